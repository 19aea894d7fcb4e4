//! Newline-delimited JSON-RPC over a byte stream: a child process's stdio, or any pipe.

use std::process::Stdio;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

use super::{Event, Link, parse_event};

struct IoLink {
    writer: Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    // Keeps the child alive (and kills it when the link is dropped).
    _child: Option<tokio::process::Child>,
}

#[async_trait::async_trait]
impl Link for IoLink {
    async fn send(&self, message: &Value, _related: Option<u64>) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).map_err(|error| error.to_string())?;
        line.push(b'\n');
        let mut writer = self.writer.lock().await;
        writer
            .write_all(&line)
            .await
            .map_err(|error| format!("cannot write to the upstream: {error}"))?;
        writer
            .flush()
            .await
            .map_err(|error| format!("cannot write to the upstream: {error}"))
    }
}

fn start(
    reader: Box<dyn AsyncRead + Send + Unpin>,
    writer: Box<dyn AsyncWrite + Send + Unpin>,
    child: Option<tokio::process::Child>,
    max_line: usize,
) -> (Arc<dyn Link>, mpsc::UnboundedReceiver<Event>) {
    let (events, receiver) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut reader = BufReader::new(reader);
        let mut line = Vec::new();
        let detail = loop {
            line.clear();
            match read_line_capped(&mut reader, &mut line, max_line).await {
                Ok(0) => break "the upstream closed its output".to_owned(),
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line).trim().to_owned();
                    if text.is_empty() {
                        continue;
                    }
                    if events.send(parse_event(text, None)).is_err() {
                        return;
                    }
                }
                Err(error) => break format!("cannot read from the upstream: {error}"),
            }
        };
        let _ = events.send(Event::Closed { detail });
    });
    let link = IoLink {
        writer: Mutex::new(writer),
        _child: child,
    };
    (Arc::new(link), receiver)
}

/// Read one line (without its end) of at most `max` bytes; a longer line is read to its end
/// and delivered cut, so it is malformed rather than silently split.
async fn read_line_capped<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(total);
        }
        let (chunk, found) = match buffer.iter().position(|&byte| byte == b'\n') {
            Some(end) => (&buffer[..end], Some(end + 1)),
            None => (buffer, None),
        };
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = found.unwrap_or(buffer.len());
        total += used;
        reader.consume(used);
        if found.is_some() {
            return Ok(total);
        }
    }
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
/// gateway's.
pub(crate) fn spawn_command(
    program: &str,
    args: &[String],
    max_line: usize,
) -> std::io::Result<(Arc<dyn Link>, mpsc::UnboundedReceiver<Event>)> {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
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
