//! One client over newline-delimited JSON-RPC (an MCP host launching the gateway as its
//! server command).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::lines::{CappedLine, read_line_capped};
use crate::session::Session;
use crate::wire;
use crate::{GatewayError, GatewayShared, PrincipalSource, Upstream, codes};

/// Serve the client on `reader`/`writer` until its input ends (then every request already read
/// is answered first: [`Session::drain`]), the upstream goes away, writing to the client fails,
/// or `shutdown` completes (then running tool calls are cancelled: [`Session::stop`]). Replies
/// already made are written before returning.
pub(crate) async fn serve<R, W, S>(
    shared: Arc<GatewayShared>,
    reader: R,
    mut writer: W,
    upstream: Upstream,
    shutdown: S,
) -> Result<(), GatewayError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
    S: Future<Output = ()> + Send,
{
    // The client on the gateway's own standard input is attested under this name.
    const STDIO_CLIENT: &str = "stdio";
    // How long replies already made may take to be written once the gateway was told to stop.
    const FLUSH_ON_STOP: Duration = Duration::from_secs(1);
    let principal = match &shared.config.principal {
        PrincipalSource::Fixed(principal) => Some(principal.clone()),
        PrincipalSource::Header(_) | PrincipalSource::Missing => None,
    };
    let max = shared.config.max_message_bytes;
    let (link, events) = crate::connect(&shared, upstream)?;
    let (session, mut outgoing) = Session::start(shared, principal, STDIO_CLIENT, link, events);
    session.bound_initialize();
    let (errors, mut write_failed) = tokio::sync::mpsc::unbounded_channel::<std::io::Error>();
    // Told to finish: write what is queued, then end (the session may outlive this function).
    let (finish, mut finishing) = tokio::sync::oneshot::channel::<()>();
    let mut writer_task = tokio::spawn(async move {
        let mut closing = false;
        loop {
            let out = if closing {
                match outgoing.try_recv() {
                    Ok(out) => out,
                    Err(_) => return,
                }
            } else {
                tokio::select! {
                    biased;
                    out = outgoing.recv() => match out {
                        Some(out) => out,
                        None => return,
                    },
                    _ = &mut finishing => {
                        closing = true;
                        continue;
                    }
                }
            };
            let mut line = match serde_json::to_vec(&out.message) {
                Ok(line) => line,
                Err(_) => continue,
            };
            line.push(b'\n');
            if let Err(error) = async {
                writer.write_all(&line).await?;
                writer.flush().await
            }
            .await
            {
                let _ = errors.send(error);
                return;
            }
        }
    });
    let shutdown = shutdown.fuse();
    tokio::pin!(shutdown);
    let mut stopped = false;
    let mut reader = BufReader::new(reader);
    let result = loop {
        let mut line = CappedLine::new(true);
        // Bytes, not a `String`: a line that is not UTF-8 is refused by the strict reader
        // (`invalid_utf8`, case B51) and the session goes on, instead of ending the gateway.
        // A shutdown wins over anything else ready at the same moment.
        let read = tokio::select! {
            biased;
            () = &mut shutdown => {
                stopped = true;
                break session.stop().await.map_err(GatewayError::Unrecorded);
            }
            read = read_line_capped(&mut reader, &mut line, max) => read,
            detail = session.upstream_closed() => break Err(GatewayError::UpstreamGone(detail)),
            Some(error) = write_failed.recv() => break Err(GatewayError::Client(error)),
        };
        match read {
            Ok(0) => {
                // The client closed its input: answer what it asked, unless told to stop.
                tokio::select! {
                    biased;
                    () = &mut shutdown => {
                        stopped = true;
                        break session.stop().await.map_err(GatewayError::Unrecorded);
                    }
                    () = session.drain() => break Ok(()),
                    Some(error) = write_failed.recv() => break Err(GatewayError::Client(error)),
                }
            }
            Ok(_) => {}
            Err(error) => break Err(GatewayError::Client(error)),
        }
        // Over the cap, whitespace included (found by a first-time user: a line padded with
        // spaces past the cap was read whole, and memory grew with it).
        if line.bytes > max {
            if !session
                .client_oversized_reply(&line.head, &line.tail, line.bytes, max)
                .await
            {
                let (head, bytes) = (std::mem::take(&mut line.head), line.bytes);
                let digest = line.digest().unwrap_or_default();
                session.reply_directly(refuse_oversized(&head, bytes, &digest, max));
            }
            continue;
        }
        let text = line.head.trim_ascii();
        if text.is_empty() {
            continue;
        }
        if let Some(refusal) = refuse_message(text, max) {
            session.reply_directly(refusal);
            continue;
        }
        match countersign::json::read_slice(text) {
            Ok(message) => session.handle_client(message).await,
            Err(error) => session.reply_directly(wire::unreadable(text, &error, "line")),
        }
    };
    let result = match result {
        // The client's connection failed (a terminal that hung up reads `EIO`): nobody can be
        // answered, but calls already running finish and are recorded as they end, unless a
        // signal stops them first.
        Err(GatewayError::Client(error)) => {
            let refused = tokio::select! {
                biased;
                () = &mut shutdown => {
                    stopped = true;
                    session.stop().await.err()
                }
                () = session.drain() => None,
            };
            Err(refused.map_or(GatewayError::Client(error), GatewayError::Unrecorded))
        }
        other => other,
    };
    let _ = finish.send(());
    // Replies already made are written, unless the client's connection itself failed.
    if !matches!(result, Err(GatewayError::Client(_))) {
        if stopped {
            let _ = tokio::time::timeout(FLUSH_ON_STOP, &mut writer_task).await;
        } else {
            // A client that stops reading is stopped by a signal.
            tokio::select! {
                _ = &mut writer_task => {}
                () = &mut shutdown => {
                    let _ = tokio::time::timeout(FLUSH_ON_STOP, &mut writer_task).await;
                }
            }
        }
    }
    writer_task.abort();
    // The client has its replies; now the upstream is told, and given time to exit.
    session.close_upstream().await;
    drop(session);
    result
}

/// The refusal of a message of `bytes` (SHA-256 `digest`), over the `max`-byte cap, of which
/// `head` is the start: answered under the `id` it starts with, when one can be read.
fn refuse_oversized(head: &[u8], bytes: usize, digest: &str, max: usize) -> Value {
    let id = wire::leading_request_id(head).unwrap_or(Value::Null);
    wire::error_response(
        id,
        json!({
            "code": codes::INVALID_REQUEST,
            "message": format!(
                "not executed: the message is {bytes} bytes, larger than the gateway's {max}-byte cap for one message: send smaller arguments (a file's path or URL rather than its content)"
            ),
            "data": {
                "countersign": true,
                "reason": "too_large",
                "did_run": "no",
                "may_retry": false,
                "raw_bytes": bytes,
                "raw_digest": digest,
                "max_bytes": max,
            },
        }),
    )
}

/// A refusal for a message the gateway will not read: too large, or a batch.
///
/// A message over the cap is answered under the `id` it starts with, when one can be read
/// before its large part ([`wire::leading_request_id`]), so the client can tell which request
/// was refused; `data` names its size and digest as for any unreadable message.
pub(crate) fn refuse_message(text: &[u8], max: usize) -> Option<Value> {
    if text.len() > max {
        let digest = countersign::canonical::sha256_prefixed(text);
        return Some(refuse_oversized(text, text.len(), &digest, max));
    }
    if text.starts_with(b"[") {
        return Some(wire::error_response(
            Value::Null,
            wire::refusal_object(
                codes::INVALID_REQUEST,
                "batch",
                "not executed: batch requests are not supported: send one message at a time",
            ),
        ));
    }
    None
}
