//! Errors as RFC 9457 problem details (`application/problem+json`), carrying the kernel's
//! reason codes.

use std::borrow::Cow;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use countersign::effect::ResolveRefusal;
use countersign::error::ResolveError;
use countersign::{AnswerError, StoreError};

/// The media type of every error body (RFC 9457 §3).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One refusal or failure, as the API answers it.
///
/// Serialized as `{type, title, status, detail, reason, ...}`: `type` is
/// `urn:countersign:reason:<reason>`, `reason` the kernel's stable reason code
/// (`not_entitled`, `mismatch`, ...), `detail` one line saying what happened and what to do.
/// A detail never contains a token or the proxy's secret: one pasted into a path or a body
/// and quoted back is replaced by [`REDACTED_TOKEN`] ([`redact_tokens`]).
#[derive(Debug)]
pub struct Problem {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable reason code.
    pub reason: &'static str,
    /// What happened and what to do next.
    pub detail: String,
    /// Extension members (`request_id`, `token_reason`, ...).
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Problem {
    /// A problem with no extension members. A bearer token the detail quotes (a path or a
    /// body field holding one) is replaced by [`REDACTED_TOKEN`] ([`redact_tokens`]).
    pub fn new(status: StatusCode, reason: &'static str, detail: impl Into<String>) -> Problem {
        let detail = detail.into();
        let detail = match redact_tokens(&detail) {
            Cow::Borrowed(_) => detail,
            Cow::Owned(redacted) => redacted,
        };
        Problem {
            status,
            reason,
            detail,
            extra: serde_json::Map::new(),
        }
    }

    /// Add an extension member.
    pub fn with(mut self, name: &str, value: impl Into<serde_json::Value>) -> Problem {
        self.extra.insert(name.to_owned(), value.into());
        self
    }

    /// 401 `not_authenticated`: the caller did not sign in, or its sign-in was refused.
    pub fn not_authenticated(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::UNAUTHORIZED, "not_authenticated", detail)
    }

    /// 422 for a request body that is not what the route takes.
    pub fn invalid_body(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", detail)
    }

    /// 422 `note_too_long`: the kernel's refusal of a note past
    /// [`countersign::approval::MAX_NOTE_BYTES`], checked here before the store is touched;
    /// `Ok` for no note or one within the limit.
    ///
    /// # Errors
    ///
    /// The problem, with the kernel's sentence (the note's length and the limit).
    pub fn check_note(note: Option<&str>) -> Result<(), Problem> {
        countersign::approval::check_note(note).map_err(|too_long| {
            Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                countersign::Reason::NoteTooLong.as_str(),
                too_long.to_string(),
            )
        })
    }

    /// The status and problem for a store failure: 503 when the store is unreachable or busy
    /// (try again), 500 when it holds something this service cannot read. An unreachable or
    /// failing store is described to the caller only as unavailable (its location and the
    /// server's message go to standard error), since this may answer before sign-in.
    pub fn from_store(error: &StoreError) -> Problem {
        let status = match error {
            StoreError::Corrupt { .. }
            | StoreError::Incompatible { .. }
            | StoreError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            StoreError::Busy { .. }
            | StoreError::OutcomeUnknown { .. }
            | StoreError::Open { .. }
            | StoreError::NoStore { .. }
            | StoreError::Backend { .. } => StatusCode::SERVICE_UNAVAILABLE,
        };
        let detail = match error {
            // Where the store is and what its server said are the operator's business, not every
            // caller's (this may answer before sign-in): the log has them, the caller a next step.
            StoreError::Open { .. } | StoreError::NoStore { .. } | StoreError::Backend { .. } => {
                countersign::stderr_line!("warning: the store failed: {error}");
                "the approval service cannot reach its store: try again shortly; the service's log names the cause".to_owned()
            }
            _ => error.to_string(),
        };
        Problem::new(status, error.reason(), detail)
    }

    /// The problem for a refused or failed answer.
    pub fn from_answer(error: &AnswerError) -> Problem {
        let status = match error {
            AnswerError::Unknown { .. } => StatusCode::NOT_FOUND,
            AnswerError::AlreadyDecided { .. }
            | AnswerError::Expired { .. }
            | AnswerError::Mismatch { .. }
            | AnswerError::Cancelled { .. }
            | AnswerError::Revoked { .. }
            | AnswerError::Consumed { .. }
            | AnswerError::NotRevocable { .. } => StatusCode::CONFLICT,
            AnswerError::NoApprover => StatusCode::UNAUTHORIZED,
            AnswerError::SelfApproval { .. }
            | AnswerError::NotAuthenticated { .. }
            | AnswerError::NotEntitled { .. } => StatusCode::FORBIDDEN,
            AnswerError::InvalidDecision { .. }
            | AnswerError::InvalidApprover { .. }
            | AnswerError::NoteTooLong(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AnswerError::Store(store) => return Problem::from_store(store),
        };
        // The kernel's sentence points a person at the CLI; an API caller lists with the API
        // (found by a first-time user).
        let detail = match error {
            AnswerError::Unknown { request_id } => format!(
                "no approval request `{request_id}` that you may see: list yours with `GET /api/v1/approvals`"
            ),
            _ => error.to_string(),
        };
        let mut problem = Problem::new(status, error.reason(), detail);
        if let Some(id) = error.request_id() {
            problem = problem.with("request_id", id.as_str());
        }
        if let AnswerError::AlreadyDecided { state, .. } | AnswerError::NotRevocable { state, .. } =
            error
        {
            problem = problem.with("state", state.as_str());
        }
        problem
    }

    /// The problem for a refused or failed resolution.
    pub fn from_resolve(error: &ResolveError) -> Problem {
        match error {
            ResolveError::Refused {
                effect_key,
                refusal,
            } => {
                let (status, reason) = match refusal {
                    ResolveRefusal::Unknown => (StatusCode::NOT_FOUND, "unknown_effect"),
                    ResolveRefusal::NotAmbiguous { .. } => (StatusCode::CONFLICT, "not_ambiguous"),
                    ResolveRefusal::BadTarget { .. } => {
                        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_target")
                    }
                };
                Problem::new(status, reason, error.to_string())
                    .with("effect_key", effect_key.as_str())
            }
            ResolveError::NotPermitted {
                effect_key, reason, ..
            } => {
                let status = if *reason == "no_approver" {
                    StatusCode::UNAUTHORIZED
                } else {
                    StatusCode::FORBIDDEN
                };
                Problem::new(status, reason, error.to_string())
                    .with("effect_key", effect_key.as_str())
            }
            ResolveError::NoteTooLong(_) => Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                countersign::Reason::NoteTooLong.as_str(),
                error.to_string(),
            ),
            ResolveError::Store(store) => Problem::from_store(store),
        }
    }

    fn title(&self) -> &'static str {
        self.status.canonical_reason().unwrap_or("Error")
    }
}

/// The reason code of a refusal (and, for a refused token, why: `not_authenticated
/// (expired)`), kept in the response's extensions for the request log
/// ([`crate::Service::with_request_log`]); never a detail, which may quote input.
#[derive(Clone, Debug)]
pub(crate) struct LoggedReason(pub(crate) String);

impl LoggedReason {
    /// `problem`'s reason code for the request log.
    pub(crate) fn of(problem: &Problem) -> LoggedReason {
        LoggedReason(
            match problem
                .extra
                .get("token_reason")
                .and_then(|value| value.as_str())
            {
                Some(why) => format!("{} ({why})", problem.reason),
                None => problem.reason.to_owned(),
            },
        )
    }

    /// `response` (a page or a redirect answering `problem`) with `problem`'s reason code kept
    /// for the request log, as a problem+json response keeps it.
    pub(crate) fn mark(problem: &Problem, mut response: Response) -> Response {
        response.extensions_mut().insert(LoggedReason::of(problem));
        response
    }
}

/// What a bearer token found in echoed or logged text is replaced by.
pub const REDACTED_TOKEN: &str = "[redacted token]";

/// `text` with every bearer-token-shaped substring replaced by [`REDACTED_TOKEN`]: a JWT (an
/// approver token, or an identity provider's), that is a run of base64url characters and
/// dots starting `eyJ` (the encoding of `{"`, which begins every JWT header), with a header
/// of at least 10 characters, a non-empty payload and a second dot. For anything the service
/// repeats from a request: the path in the request log, a problem's detail quoting a path or
/// a body. A token pasted into a URL or a form field would otherwise be handed back, or
/// written to the log, in the clear (found by a first-time user).
pub fn redact_tokens(text: &str) -> Cow<'_, str> {
    if !text.contains("eyJ") {
        return Cow::Borrowed(text);
    }
    let token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let mut redacted = String::with_capacity(text.len());
    let mut replaced = false;
    let mut rest = text;
    while let Some(start) = rest.find("eyJ") {
        let run = &rest[start..];
        let length = run.find(|c: char| !token_char(c)).unwrap_or(run.len());
        let mut segments = run[..length].split('.');
        let header = segments.next().unwrap_or_default();
        let payload = segments.next().unwrap_or_default();
        if header.len() >= 10 && !payload.is_empty() && segments.next().is_some() {
            redacted.push_str(&rest[..start]);
            redacted.push_str(REDACTED_TOKEN);
            replaced = true;
            rest = &run[length..];
        } else {
            redacted.push_str(&rest[..start + 3]);
            rest = &run[3..];
        }
    }
    if !replaced {
        return Cow::Borrowed(text);
    }
    redacted.push_str(rest);
    Cow::Owned(redacted)
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let logged = LoggedReason::of(&self);
        let mut body = serde_json::Map::new();
        body.insert(
            "type".to_owned(),
            format!("urn:countersign:reason:{}", self.reason).into(),
        );
        body.insert("title".to_owned(), self.title().into());
        body.insert("status".to_owned(), self.status.as_u16().into());
        body.insert("detail".to_owned(), self.detail.into());
        body.insert("reason".to_owned(), self.reason.into());
        for (name, value) in self.extra {
            body.entry(name).or_insert(value);
        }
        // The detail is redacted already; an extension member may quote the body too
        // (`results` keyed by the ids a caller sent).
        let text = redact_tokens(&serde_json::Value::Object(body).to_string()).into_owned();
        let mut response = (self.status, text).into_response();
        response.extensions_mut().insert(logged);
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"countersign\""),
            );
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An approver token's shape: `{"alg":"EdDSA","typ":"JWT"}`, claims, a signature.
    const TOKEN: &str =
        "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJodW1hbjphbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz";

    #[test]
    fn a_token_pasted_anywhere_is_redacted_and_nothing_else_is() {
        assert_eq!(
            redact_tokens(&format!("/api/v1/approvals/{TOKEN}/answer")),
            "/api/v1/approvals/[redacted token]/answer"
        );
        assert_eq!(
            redact_tokens(&format!("/inbox/Bearer%20{TOKEN}")),
            "/inbox/Bearer%20[redacted token]"
        );
        // Unsigned (`alg: none`): the signature is empty.
        assert_eq!(
            redact_tokens("x eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0. y"),
            "x [redacted token] y"
        );
        for kept in [
            "/api/v1/approvals/apr_0123456789abcdefghij",
            "api.example.com and sha256:0a1b",
            "heyJude.mp3",
            "eyJhbGciOiJ9.eyJzdWIi",
            "the approver token `tok_abcdefghijklmnopqrst` was revoked",
        ] {
            assert!(matches!(redact_tokens(kept), Cow::Borrowed(_)), "{kept}");
        }
    }

    #[tokio::test]
    async fn a_problem_never_hands_a_token_back() {
        let problem = Problem::new(
            StatusCode::NOT_FOUND,
            "unknown_request",
            format!("no approval request `{TOKEN}`"),
        )
        .with(
            "results",
            serde_json::json!({ TOKEN: {"status": "refused"} }),
        );
        assert_eq!(problem.detail, "no approval request `[redacted token]`");
        let response = problem.into_response();
        assert_eq!(
            response
                .extensions()
                .get::<LoggedReason>()
                .map(|logged| logged.0.as_str()),
            Some("unknown_request")
        );
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("the body");
        let body = String::from_utf8_lossy(&body);
        assert!(!body.contains(TOKEN), "{body}");
        assert!(body.contains("[redacted token]"), "{body}");
    }
}
