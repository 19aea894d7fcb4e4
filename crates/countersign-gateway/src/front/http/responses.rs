//! The HTTP front's responses: JSON bodies, refusals and event streams.

use std::convert::Infallible;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::header::HeaderValue;
use hyper::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;

use super::Body;
use crate::{codes, wire};

pub(super) fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed_unsync()
}

pub(super) fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(full(Bytes::new()));
    *response.status_mut() = status;
    response
}

pub(super) fn json_response(status: StatusCode, message: &Value) -> Response<Body> {
    let mut response = Response::new(full(message.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// An HTTP refusal: `status`, with a JSON-RPC error (id null) whose message says what to do,
/// and `data.reason` the JSON-RPC 2.0 name of `code` (§5.1: `parse_error`, `invalid_request`,
/// `method_not_found`, `invalid_params`; `refused` for any other code).
pub(super) fn refuse(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    let reason = match code {
        codes::PARSE_ERROR => "parse_error",
        codes::INVALID_REQUEST => "invalid_request",
        codes::METHOD_NOT_FOUND => "method_not_found",
        codes::INVALID_PARAMS => "invalid_params",
        _ => "refused",
    };
    refuse_with(status, code, reason, message)
}

/// [`refuse`], naming the refusal's own `reason`.
pub(super) fn refuse_with(
    status: StatusCode,
    code: i64,
    reason: &str,
    message: &str,
) -> Response<Body> {
    json_response(
        status,
        &wire::error_response(Value::Null, wire::refusal_object(code, reason, message)),
    )
}

pub(super) fn sse_event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// An event stream of the messages in `first`, then everything `receiver` delivers until its
/// sender is dropped.
pub(super) fn event_stream(
    first: Vec<Value>,
    receiver: mpsc::UnboundedReceiver<Value>,
) -> Response<Body> {
    event_stream_mapped(first, receiver, |message| message)
}

/// [`event_stream`], each message passed through `map` first.
pub(super) fn event_stream_mapped(
    first: Vec<Value>,
    receiver: mpsc::UnboundedReceiver<Value>,
    map: impl Fn(Value) -> Value + Send + 'static,
) -> Response<Body> {
    let rest = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|message| (message, receiver))
    });
    let stream = futures::stream::iter(first)
        .chain(rest)
        .map(move |message| Ok::<_, Infallible>(Frame::data(sse_event(&map(message)))));
    let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(stream)));
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    response
}
