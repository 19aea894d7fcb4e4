//! Newline-delimited JSON-RPC over a byte stream: a child process's stdio, or any pipe.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

use super::{Event, Link, parse_event};
use crate::lines::{CappedLine, read_line_capped};

/// How long a child gets to exit once its input is closed, and again once it is sent `SIGTERM`.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// How long a child that closed its output is given to exit, so that its exit status can be
/// named.
const EXIT_SETTLE: Duration = Duration::from_millis(500);

/// The child process, shared with the task reading its output (which names its exit status).
type ChildSlot = Arc<Mutex<Option<tokio::process::Child>>>;

struct IoLink {
    /// `None` once closed ([`Link::close`]).
    writer: Mutex<Option<Box<dyn AsyncWrite + Send + Unpin>>>,
    /// The child, in a process group of its own; killed (with its group) if the link is dropped
    /// before [`Link::close`] took it.
    child: ChildSlot,
    /// The child's process group (its process id when spawned): kept, since a child already
    /// reaped has no id, while what it started in its group may still run.
    group: Option<u32>,
}

#[async_trait::async_trait]
impl Link for IoLink {
    async fn send(&self, message: &Value, _related: Option<u64>) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).map_err(|error| error.to_string())?;
        line.push(b'\n');
        let mut writer = self.writer.lock().await;
        let writer = writer
            .as_mut()
            .ok_or_else(|| "the connection to the upstream is closed".to_owned())?;
        writer
            .write_all(&line)
            .await
            .map_err(|error| format!("cannot write to the upstream: {error}"))?;
        writer
            .flush()
            .await
            .map_err(|error| format!("cannot write to the upstream: {error}"))
    }

    async fn close(&self) {
        // Its input ends: a stdio server exits on that. A write stuck on a server that reads
        // nothing holds the writer: then the signals below end it instead.
        if let Ok(mut writer) = tokio::time::timeout(EXIT_GRACE, self.writer.lock()).await {
            drop(writer.take());
        }
        let Some(mut child) = self.child.lock().await.take() else {
            return;
        };
        let group = self.group;
        let exited = tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok();
        // Whatever the server started in its group and left behind (an `npx` wrapper's
        // children), and the server itself if it is still running, is asked to end; whatever
        // of it is left after the grace is killed.
        signal_group(group, Ending::Terminate);
        let leader_ended = exited || tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok();
        if !leader_ended || !group_ended(group, EXIT_GRACE).await {
            signal_group(group, Ending::Kill);
            let _ = child.kill().await;
        }
    }

    fn kill(&self) {
        self.kill_now();
    }
}

impl IoLink {
    /// [`Link::kill`]: the child's whole group, the child itself included (it leads it).
    fn kill_now(&self) {
        signal_group(self.group, Ending::Kill);
        if let Ok(mut slot) = self.child.try_lock()
            && let Some(child) = slot.as_mut()
        {
            let _ = child.start_kill();
        }
    }
}

impl Drop for IoLink {
    fn drop(&mut self) {
        // Dropped without `close` (an error, a runtime ending): `kill_on_drop` ends the child,
        // this its group.
        let unclosed = self.child.try_lock().map_or(true, |slot| slot.is_some());
        if unclosed {
            signal_group(self.group, Ending::Kill);
        }
    }
}

/// Has every process of `group` ended within `grace` (polled every 20 ms)? True where groups
/// cannot be asked (elsewhere than Unix).
async fn group_ended(group: Option<u32>, grace: Duration) -> bool {
    #[cfg(unix)]
    if let Some(group) = group.and_then(|group| i32::try_from(group).ok()) {
        let deadline = tokio::time::Instant::now() + grace;
        // Signal 0 checks that some process of the group exists, and sends nothing.
        while nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group), None).is_ok() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    #[cfg(not(unix))]
    let _ = (group, grace);
    true
}

/// How [`signal_group`] ends a process group.
#[derive(Clone, Copy)]
enum Ending {
    Terminate,
    Kill,
}

/// Send `SIGTERM` or `SIGKILL` to the process group `group` (the child's own: it was spawned
/// as its leader). A group already gone is fine. Elsewhere than Unix, nothing: the child is
/// killed on drop.
fn signal_group(group: Option<u32>, ending: Ending) {
    #[cfg(unix)]
    if let Some(group) = group.and_then(|group| i32::try_from(group).ok()) {
        use nix::sys::signal::{Signal, killpg};
        let signal = match ending {
            Ending::Terminate => Signal::SIGTERM,
            Ending::Kill => Signal::SIGKILL,
        };
        let _ = killpg(nix::unistd::Pid::from_raw(group), signal);
    }
    #[cfg(not(unix))]
    let _ = (group, ending);
}

fn start(
    reader: Box<dyn AsyncRead + Send + Unpin>,
    writer: Box<dyn AsyncWrite + Send + Unpin>,
    child: Option<tokio::process::Child>,
    max_line: usize,
) -> (Arc<dyn Link>, mpsc::UnboundedReceiver<Event>) {
    let (events, receiver) = mpsc::unbounded_channel();
    let group = child.as_ref().and_then(tokio::process::Child::id);
    let child: ChildSlot = Arc::new(Mutex::new(child));
    let watched = group.is_some().then(|| Arc::downgrade(&child));
    tokio::spawn(async move {
        let mut reader = BufReader::new(reader);
        let detail = loop {
            let mut line = CappedLine::new(false);
            match read_line_capped(&mut reader, &mut line, max_line).await {
                Ok(0) => break closed_output(watched.as_ref()).await,
                Ok(read) => {
                    let kept = &line.head[..line.head.len().min(max_line)];
                    let text = String::from_utf8_lossy(kept).trim().to_owned();
                    if text.is_empty() {
                        continue;
                    }
                    let event = if line.bytes > max_line {
                        Event::Oversized {
                            bytes: read,
                            raw: text,
                            tail: String::from_utf8_lossy(&line.tail).into_owned(),
                        }
                    } else {
                        parse_event(text, None)
                    };
                    if events.send(event).is_err() {
                        return;
                    }
                }
                Err(error) => break format!("cannot read from the upstream: {error}"),
            }
        };
        let _ = events.send(Event::Closed { detail });
    });
    let link = IoLink {
        writer: Mutex::new(Some(writer)),
        child,
        group,
    };
    (Arc::new(link), receiver)
}

/// Why the upstream connection ended at the end of its output: with the child's exit status
/// when it has one (it exited within [`EXIT_SETTLE`]), so an operator can tell a crash from a
/// clean end.
async fn closed_output(child: Option<&Weak<Mutex<Option<tokio::process::Child>>>>) -> String {
    const CLOSED: &str = "the upstream closed its output";
    let Some(slot) = child.and_then(Weak::upgrade) else {
        return CLOSED.to_owned();
    };
    let mut slot = slot.lock().await;
    // Taken: the gateway is already ending it.
    let Some(child) = slot.as_mut() else {
        return CLOSED.to_owned();
    };
    match tokio::time::timeout(EXIT_SETTLE, child.wait()).await {
        Ok(Ok(status)) => format!("{CLOSED}: {}", describe_exit(status)),
        Ok(Err(_)) => CLOSED.to_owned(),
        Err(_) => format!("{CLOSED} and is still running"),
    }
}

/// `it exited with status 3`, or `it was killed by SIGKILL`.
fn describe_exit(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("it exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = nix::sys::signal::Signal::try_from(signal).map_or_else(
                |_| format!("signal {signal}"),
                |name| name.as_str().to_owned(),
            );
            return format!("it was killed by {name}");
        }
    }
    format!("it ended ({status})")
}

/// An upstream over an already connected byte stream.
pub(crate) fn connect_io(
    reader: Box<dyn AsyncRead + Send + Unpin>,
    writer: Box<dyn AsyncWrite + Send + Unpin>,
    max_line: usize,
) -> (Arc<dyn Link>, mpsc::UnboundedReceiver<Event>) {
    start(reader, writer, None, max_line)
}

/// Spawn `program args…` and speak to it over its stdin and stdout; its stderr is the
/// gateway's. It leads a process group of its own, which [`Link::close`] ends.
pub(crate) fn spawn_command(
    program: &str,
    args: &[String],
    max_line: usize,
) -> std::io::Result<(Arc<dyn Link>, mpsc::UnboundedReceiver<Event>)> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    // A process group of its own: a terminal's Ctrl-C reaches the gateway, which stops the
    // calls first and then the server, and ending the group ends what the server started.
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command.spawn()?;
    let missing = || std::io::Error::other("the child's stdio was not captured");
    let stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    Ok(start(
        Box::new(stdout),
        Box::new(stdin),
        Some(child),
        max_line,
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn closing_does_not_wait_forever_on_a_write_the_upstream_never_reads() {
        // A 64-byte pipe nobody reads: a larger message blocks its write, holding the writer.
        let (ours, theirs) = tokio::io::duplex(64);
        let (reader, writer) = tokio::io::split(ours);
        let (link, _events) = connect_io(Box::new(reader), Box::new(writer), 1 << 20);
        let sending = Arc::clone(&link);
        let stuck = tokio::spawn(async move {
            sending
                .send(&json!({"padding": "x".repeat(10_000)}), None)
                .await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!stuck.is_finished(), "the write is stuck");
        tokio::time::timeout(Duration::from_secs(10), link.close())
            .await
            .expect("close gives up on the stuck write after its grace");
        stuck.abort();
        drop(theirs);
    }
}
