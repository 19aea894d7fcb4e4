//! Worker processes: the `countersign-store-worker` binary and the kit's side of it.
//!
//! A worker opens one store URL and answers one JSON request per stdin line with one JSON reply
//! per stdout line (after `{"ready":true}` once the store is open). Requests:
//!
//! - `{"op":"execute","key":K,"sleep_ms":N,"start_at_ms":T,"lease_ms":L,"action":A,"approval":ID,"announce":B}`:
//!   wait until the Unix time `T` (ms), then run action `A` (default `kit.effect`, whose effect
//!   key is `K`) through [`countersign::Control::execute`], the executor sleeping `N` ms. With
//!   `announce`, the executor first prints `{"event":"executing"}`. Reply:
//!   `{"ran":bool,"ok":bool,"reason":..,"message":..}`.
//! - `{"op":"execute_many","prefix":P,"count":N,"start_at_ms":T}`: `N` executions on the
//!   unique keys `P-0`…; reply `{"ran":n,"ok":n,"reasons":{reason:count},"messages":[..]}`.
//! - `{"op":"append_many","count":N,"start_at_ms":T}`: `N` receipts appended with
//!   [`countersign::Store::append_receipt`]; reply `{"ok":n,"errors":[..]}`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::KitError;

/// The policy every kit control and every worker uses.
pub const KIT_POLICY: &str = "\
schema: countersign.policy/v1
environment: kit
actions:
  kit.effect:
    effect: \"{key}\"
    decision: allow
  kit.approve:
    effect: \"{key}\"
    decision: approve
  kit.note:
    decision: allow
";

/// The principal every kit control acts as.
pub const KIT_PRINCIPAL: &str = "agent:store-kit";

/// Milliseconds since the Unix epoch.
pub fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A start time `lead` from now, for releasing several workers together.
pub fn start_in(lead: Duration) -> i64 {
    unix_millis() + i64::try_from(lead.as_millis()).unwrap_or(0)
}

/// One running worker process.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: BufReader<ChildStdout>,
}

impl Worker {
    /// Start `binary` on the store at `url` and wait until it has opened it.
    ///
    /// # Errors
    ///
    /// A message when it cannot start or does not open the store.
    pub fn spawn(binary: &Path, url: &str) -> Result<Worker, KitError> {
        let mut child = Command::new(binary)
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|error| format!("cannot start `{}`: {error}", binary.display()))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| "the worker has no stdout".to_owned())?;
        let mut worker = Worker {
            child,
            stdin,
            lines: BufReader::new(stdout),
        };
        let ready = worker.receive()?;
        if ready.get("ready") != Some(&Value::Bool(true)) {
            return Err(format!("the worker did not get ready: {ready}"));
        }
        Ok(worker)
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Send one request.
    ///
    /// # Errors
    ///
    /// A message when the worker is gone.
    pub fn send(&mut self, request: &Value) -> Result<(), KitError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| "the worker's stdin is closed".to_owned())?;
        writeln!(stdin, "{request}")
            .and_then(|()| stdin.flush())
            .map_err(|error| format!("cannot write to the worker: {error}"))
    }

    /// The next line the worker prints, as JSON.
    ///
    /// # Errors
    ///
    /// A message when the worker exited or printed something else.
    pub fn receive(&mut self) -> Result<Value, KitError> {
        let mut line = String::new();
        let read = self
            .lines
            .read_line(&mut line)
            .map_err(|error| format!("cannot read from the worker: {error}"))?;
        if read == 0 {
            let status = self.child.try_wait().ok().flatten();
            return Err(format!("the worker exited ({status:?}) without answering"));
        }
        serde_json::from_str(&line).map_err(|error| format!("the worker printed `{line}`: {error}"))
    }

    /// Send a request and wait for its reply.
    ///
    /// # Errors
    ///
    /// As [`Worker::send`] and [`Worker::receive`].
    pub fn request(&mut self, request: &Value) -> Result<Value, KitError> {
        self.send(request)?;
        self.receive()
    }

    /// kill -9 the worker and reap it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stdin.take();
        self.kill();
    }
}

/// Start `count` workers on `url`.
///
/// # Errors
///
/// The first worker that failed to start.
pub fn spawn_many(binary: &Path, url: &str, count: usize) -> Result<Vec<Worker>, KitError> {
    (0..count).map(|_| Worker::spawn(binary, url)).collect()
}

/// Send each worker its request, then collect every reply (so they run concurrently).
///
/// # Errors
///
/// The first worker that failed.
pub fn exchange(workers: &mut [Worker], requests: &[Value]) -> Result<Vec<Value>, KitError> {
    for (worker, request) in workers.iter_mut().zip(requests) {
        worker.send(request)?;
    }
    workers.iter_mut().map(Worker::receive).collect()
}
