//! The JSON API's routes and handlers.

mod effects;
mod interrupts;
mod layers;
mod query;
mod receipts;
mod takeback;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign::approval::{self, AnswerDecision, ApprovalRecord};
use countersign::approver::{ApprovalRule, Authentication, Channel, Credential};
use countersign::display::{self, ApprovalDisplay};
use countersign::effect::EffectRecord;
use countersign::store::{self, Store};
use countersign::{ActionHash, ApprovalId, ApprovalState, EffectKey, EffectState, Receipt};
use serde::Serialize;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::auth::{self, Caller};
use crate::problem::Problem;
use crate::scope::Scope;
use crate::{Service, browser};

use effects::*;
use interrupts::*;
use layers::*;
use receipts::*;
use takeback::*;

pub(crate) use takeback::Take;

pub(crate) use effects::{effect_rule, sees_effect};

/// The largest request body accepted, in bytes.
const MAX_BODY: usize = 64 * 1024;
/// Items per page unless `?limit=` says otherwise.
const DEFAULT_LIMIT: usize = 50;
/// The most items one page may hold.
const MAX_LIMIT: usize = 500;
/// How many receipts one call reads at most while looking for ones the caller may see.
const RECEIPT_SCAN: usize = 10_000;

type Answer = Result<Response, Problem>;

pub(crate) fn router(service: Service) -> Router {
    let logging = service.clone();
    Router::new()
        .route("/api/v1/health", get(health))
        .route("/api/v1/approvals", get(list_approvals))
        .route("/api/v1/approvals/{id}", get(get_approval))
        .route("/api/v1/approvals/{id}/answer", post(answer))
        .route("/api/v1/approvals/{id}/revoke", post(revoke))
        .route("/api/v1/approvals/{id}/cancel", post(cancel))
        .route("/api/v1/interrupts", get(list_interrupts))
        .route("/api/v1/interrupts/responses", post(post_responses))
        .route("/api/v1/receipts", get(list_receipts))
        .route("/api/v1/effects", get(list_effects))
        .route("/api/v1/effects/{key}/resolve", post(resolve))
        .route("/metrics", get(metrics))
        .route("/signin", get(browser::signin_form).post(browser::signin))
        .route("/signout", post(browser::signout))
        .merge(crate::pages::routes())
        .merge(crate::slack::routes())
        .route_layer(axum::middleware::from_fn_with_state(service.clone(), track))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(service)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        // Nothing the service answers is cached, except the inbox's static files, which set
        // their own `Cache-Control` (they hold no data).
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(CatchPanicLayer::custom(|_panic| {
            // The payload is not shown: it could hold anything.
            Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error, please report it at https://github.com/countersign/countersign/issues",
            )
            .into_response()
        }))
        // Outermost, so that every request is logged: unknown routes and panics too.
        .layer(axum::middleware::from_fn_with_state(logging, log_request))
}

/// `GET /metrics`: Prometheus text.
async fn metrics(State(service): State<Service>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        service.inner.metrics.render(),
    )
        .into_response()
}

fn json(status: StatusCode, value: &impl Serialize) -> Answer {
    let body = serde_json::to_vec(value).map_err(|error| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("cannot write the answer as JSON: {error}: please report it"),
        )
    })?;
    Ok((
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response())
}

impl Service {
    /// Sign the caller in: a token, the proxy header, or a browser session. `changes`: the call
    /// changes something, so a session must also prove it is not cross-site (CSRF header).
    pub(crate) fn caller(&self, headers: &HeaderMap, changes: bool) -> Result<Caller, Problem> {
        let proxy_identity = self
            .inner
            .sign_in
            .proxy
            .as_ref()
            .is_some_and(|proxy| headers.contains_key(&proxy.identity_header));
        if !headers.contains_key(header::AUTHORIZATION)
            && !proxy_identity
            && let Some(id) = browser::cookie(headers, browser::SESSION_COOKIE)
        {
            let now = self.inner.clock.now();
            let session = self.inner.sessions.find(id, now).ok_or_else(|| {
                Problem::not_authenticated("the session has ended: sign in again at /signin")
            })?;
            if changes {
                let given = headers
                    .get(browser::CSRF_HEADER)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or("");
                if !browser::same_secret(given, &session.csrf) {
                    return Err(Problem::new(
                        StatusCode::FORBIDDEN,
                        "csrf",
                        format!(
                            "a call made with the browser session must send `{}` as the sign-in page shows it",
                            browser::CSRF_HEADER
                        ),
                    ));
                }
            }
            return auth::token_caller(
                &self.inner.sign_in,
                &self.inner.directory,
                self.inner.auditors_group.as_deref(),
                &session.token,
                now,
            );
        }
        auth::authenticate(
            &self.inner.sign_in,
            &self.inner.directory,
            self.inner.auditors_group.as_deref(),
            headers,
            self.inner.clock.now(),
        )
    }

    /// The browser session this request is signed in with, when the session decides who the
    /// caller is (no `Authorization`, no proxy identity header): as [`Service::caller`] picks.
    pub(crate) fn session_in_use(&self, headers: &HeaderMap) -> Option<browser::Session> {
        let proxy_identity = self
            .inner
            .sign_in
            .proxy
            .as_ref()
            .is_some_and(|proxy| headers.contains_key(&proxy.identity_header));
        if headers.contains_key(header::AUTHORIZATION) || proxy_identity {
            return None;
        }
        let id = browser::cookie(headers, browser::SESSION_COOKIE)?;
        self.inner.sessions.find(id, self.inner.clock.now())
    }

    pub(crate) async fn store(&self) -> Result<Arc<dyn Store>, Problem> {
        self.inner
            .store
            .get()
            .await
            .map_err(|error| Problem::from_store(&error))
    }

    /// The time `store` judges expiry by (issue #22, "one clock"; [`Store::store_now`]): the
    /// PostgreSQL server's clock, or the service's own for SQLite. Every listing, request view
    /// and countdown uses it, so a request the store holds expired is never shown as open, nor
    /// an open one as expired, whatever this host's clock says. Sessions and tokens keep the
    /// service's clock: they are the service's, not the store's.
    pub(crate) async fn store_time(
        &self,
        store: &dyn Store,
    ) -> Result<countersign::Timestamp, Problem> {
        store
            .store_now(self.inner.clock.now())
            .await
            .map_err(|error| Problem::from_store(&error))
    }
}

/// A request as the API shows it: the stored record (as `countersign pending --json` prints
/// it), its `display`, and whether an answer by this caller could still count.
#[derive(Serialize)]
struct ApprovalItem<'a> {
    #[serde(flatten)]
    record: &'a ApprovalRecord,
    display: ApprovalDisplay,
    may_answer: bool,
}

fn item<'a>(record: &'a ApprovalRecord, scope: &mut Scope<'_>) -> ApprovalItem<'a> {
    ApprovalItem {
        record,
        display: display::render(record, None),
        may_answer: scope.may_answer(record),
    }
}

/// One page of a listing.
#[derive(Serialize)]
struct Page<T> {
    items: Vec<T>,
    /// Pass as `?cursor=` for the next page; `null` on the last one.
    next_cursor: Option<String>,
}

/// `?state=`, `?cursor=` and `?limit=`; anything else is refused.
struct Listing {
    state: Option<String>,
    cursor: Option<String>,
    limit: usize,
}

fn listing(
    query: Result<Query<BTreeMap<String, String>>, QueryRejection>,
    takes_state: bool,
) -> Result<Listing, Problem> {
    let invalid = |detail: String| Problem::new(StatusCode::BAD_REQUEST, "invalid_query", detail);
    let Query(mut query) = query.map_err(|error| invalid(format!("unreadable query: {error}")))?;
    let limit = match query.remove("limit") {
        None => DEFAULT_LIMIT,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|limit| (1..=MAX_LIMIT).contains(limit))
            .ok_or_else(|| {
                invalid(format!(
                    "`limit` must be a whole number from 1 to {MAX_LIMIT}, not `{}`",
                    text.escape_debug()
                ))
            })?,
    };
    let state = if takes_state {
        query.remove("state")
    } else {
        None
    };
    let cursor = query.remove("cursor");
    if let Some(unknown) = query.keys().next() {
        return Err(invalid(format!(
            "unknown query parameter `{}`: this route takes {}",
            unknown.escape_debug(),
            if takes_state {
                "`state`, `cursor` and `limit`"
            } else {
                "`cursor` and `limit`"
            }
        )));
    }
    Ok(Listing {
        state,
        cursor,
        limit,
    })
}

fn invalid_cursor() -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "invalid_cursor",
        "the cursor is not one this service gave out: pass `next_cursor` from the previous page as it was, or leave it out to start again",
    )
}

fn decode_cursor(cursor: &str) -> Result<String, Problem> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(invalid_cursor)
}

fn encode_cursor(text: &str) -> String {
    URL_SAFE_NO_PAD.encode(text)
}

/// `GET /api/v1/health`: no sign-in; says whether the store answers, and lists the policy's
/// approval warnings (`warnings`: one line each, such as an approval nobody can answer, issue
/// #31; empty without a policy).
async fn health(State(service): State<Service>) -> Answer {
    let warnings = service
        .inner
        .policy
        .as_ref()
        .map(|policy| policy.approval_warnings())
        .unwrap_or_default();
    let store = service.store().await?;
    store
        .chain_head()
        .await
        .map_err(|error| Problem::from_store(&error))?;
    json(
        StatusCode::OK,
        &serde_json::json!({
            "status": "ok",
            "store": store.backend(),
            "version": env!("CARGO_PKG_VERSION"),
            "public_url": service.inner.public_url,
            "warnings": warnings,
        }),
    )
}

/// `GET /api/v1/approvals`.
async fn list_approvals(
    State(service): State<Service>,
    headers: HeaderMap,
    query: Result<Query<BTreeMap<String, String>>, QueryRejection>,
) -> Answer {
    let caller = service.caller(&headers, false)?;
    let listing = listing(query, true)?;
    let state = match listing.state.as_deref() {
        None => Some(ApprovalState::Pending),
        Some("all") => None,
        Some(text) => Some(ApprovalState::parse(text).ok_or_else(|| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!(
                    "`state` must be one of pending, granted, denied, consumed, expired, void, revoked, cancelled or all, not `{}`",
                    text.escape_debug()
                ),
            )
        })?),
    };
    let after = match &listing.cursor {
        None => None,
        Some(cursor) => {
            let text = decode_cursor(cursor)?;
            // Exactly what `encode_cursor` gave out: a creation time (milliseconds, not
            // negative) and an approval id (found by a first-time user: `-1:` was taken).
            let (millis, id) = text.split_once(':').ok_or_else(invalid_cursor)?;
            let millis: i64 = millis
                .parse()
                .ok()
                .filter(|millis| *millis >= 0)
                .ok_or_else(invalid_cursor)?;
            let id = ApprovalId::parse(id).map_err(|_| invalid_cursor())?;
            Some((millis, id.as_str().to_owned()))
        }
    };
    let store = service.store().await?;
    let now = service.store_time(store.as_ref()).await?;
    let read = |state| {
        let store = Arc::clone(&store);
        async move {
            store
                .approvals(state)
                .await
                .map_err(|error| Problem::from_store(&error))
        }
    };
    let mut records = read(state).await?;
    if state == Some(ApprovalState::Expired) {
        // A pending request past its expiry is expired whether or not the sweeper, which runs
        // on a timer, has recorded it yet.
        records.extend(
            read(Some(ApprovalState::Pending))
                .await?
                .into_iter()
                .filter(|record| record.is_expired_at(now)),
        );
    }
    for record in &mut records {
        if record.state == ApprovalState::Pending && record.is_expired_at(now) {
            record.state = ApprovalState::Expired;
        }
    }
    records.sort_by(|a, b| {
        (a.created_at.as_millis(), a.id.as_str()).cmp(&(b.created_at.as_millis(), b.id.as_str()))
    });
    let mut scope = Scope::new(&caller, now);
    let mut items = Vec::new();
    let mut next_cursor = None;
    for record in &records {
        let position = (record.created_at.as_millis(), record.id.as_str());
        if let Some((millis, id)) = &after
            && position <= (*millis, id.as_str())
        {
            continue;
        }
        let listed = if state == Some(ApprovalState::Pending) {
            // The inbox: unexpired requests this caller may answer (auditors: all of them).
            !record.is_expired_at(now) && (caller.auditor || scope.entitled(record))
        } else {
            scope.sees(record)
        };
        if !listed {
            continue;
        }
        if items.len() == listing.limit {
            if let Some(last) = items.last() {
                let last: &ApprovalItem<'_> = last;
                next_cursor = Some(encode_cursor(&format!(
                    "{}:{}",
                    last.record.created_at.as_millis(),
                    last.record.id
                )));
            }
            break;
        }
        items.push(item(record, &mut scope));
    }
    json(StatusCode::OK, &Page { items, next_cursor })
}

/// The request `id`, if it exists and the caller may see it.
pub(crate) async fn visible_approval(
    store: &dyn Store,
    id: &str,
    scope: &mut Scope<'_>,
) -> Result<ApprovalRecord, Problem> {
    let unknown = || {
        Problem::new(
            StatusCode::NOT_FOUND,
            "unknown_request",
            format!(
                "no approval request `{}` that you may see: list yours with `GET /api/v1/approvals`",
                id.escape_debug()
            ),
        )
    };
    let id = ApprovalId::parse(id).map_err(|_| unknown())?;
    let record = store
        .approval(&id)
        .await
        .map_err(|error| Problem::from_store(&error))?
        .ok_or_else(unknown)?;
    if scope.sees(&record) {
        Ok(record)
    } else {
        Err(unknown())
    }
}

fn path_problem(error: &PathRejection) -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "invalid_path",
        format!("unreadable path: {error}"),
    )
}

/// `GET /api/v1/approvals/{id}`.
async fn get_approval(
    State(service): State<Service>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Answer {
    let caller = service.caller(&headers, false)?;
    let Path(id) = path.map_err(|error| path_problem(&error))?;
    let store = service.store().await?;
    let mut scope = Scope::new(&caller, service.store_time(store.as_ref()).await?);
    let record = visible_approval(store.as_ref(), &id, &mut scope).await?;
    json(StatusCode::OK, &item(&record, &mut scope))
}

/// The JSON object of a POST body, with only the `allowed` keys.
fn body_object(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    allowed: &[&str],
) -> Result<serde_json::Map<String, serde_json::Value>, Problem> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as JSON with `Content-Type: application/json`",
        ));
    }
    let body = body.map_err(|error| {
        if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("the body is larger than {MAX_BODY} bytes"),
            )
        } else {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "malformed_body",
                format!("unreadable body: {error}"),
            )
        }
    })?;
    // The kernel's one strict reader (issue #19): a key sent twice (`{"decision":"deny",
    // "decision":"approve"}`) is refused, never resolved by "last one wins".
    let value = countersign::json::read_slice(&body).map_err(|error| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "malformed_body",
            format!("the body is not JSON the service accepts: {error}"),
        )
    })?;
    let serde_json::Value::Object(object) = value else {
        return Err(Problem::invalid_body(format!(
            "the body must be a JSON object with {}",
            allowed.join(", ")
        )));
    };
    if let Some(unknown) = object.keys().find(|key| !allowed.contains(&key.as_str())) {
        return Err(Problem::invalid_body(format!(
            "unknown field `{}`: the body takes {}",
            unknown.escape_debug(),
            allowed.join(", ")
        )));
    }
    Ok(object)
}

fn note_of(object: &serde_json::Map<String, serde_json::Value>) -> Result<Option<String>, Problem> {
    match object.get("note") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(note)) => {
            Problem::check_note(Some(note))?;
            Ok(Some(note.clone()))
        }
        Some(_) => Err(Problem::invalid_body("`note` must be a string")),
    }
}

/// The request id in a route's `{id}`; an id of the wrong shape is an unknown request (404).
fn request_id_in(path: Result<Path<String>, PathRejection>) -> Result<ApprovalId, Problem> {
    let Path(id) = path.map_err(|error| path_problem(&error))?;
    ApprovalId::parse(&id).map_err(|_| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "unknown_request",
            format!(
                "no approval request `{}`: list yours with `GET /api/v1/approvals`",
                id.escape_debug()
            ),
        )
    })
}

/// `POST /api/v1/approvals/{id}/answer`: `{decision, action_hash, note}`, judged by the kernel
/// against the request's stored rule.
async fn answer(
    State(service): State<Service>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let caller = service.caller(&headers, true)?;
    let request_id = request_id_in(path)?;
    let object = body_object(&headers, body, &["decision", "action_hash", "note"])?;
    // Strictly: only "approve", "deny" and "reject" are decisions; the kernel records anything
    // else as a refused answer (`invalid_decision`).
    let decision = AnswerDecision::from_submitted(object.get("decision"));
    // The hash the person was shown, echoed as given: anything but the request's own hash
    // (another string, a number, none) is refused `mismatch` by the kernel.
    let shown_hash = match object.get("action_hash") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(text)) => Some(ActionHash::from_stored(text.clone())),
        Some(other) => Some(ActionHash::from_stored(other.to_string())),
    };
    let note = note_of(&object)?;
    let record = service
        .answer_as(&caller, request_id, decision, shown_hash, note)
        .await?;
    let store = service.store().await?;
    let mut scope = Scope::new(&caller, service.store_time(store.as_ref()).await?);
    json(StatusCode::OK, &item(&record, &mut scope))
}

impl Service {
    /// Hand the kernel `caller`'s answer to `request_id`, exactly as every surface does
    /// ([`countersign::control::submit_answer`], channel `service`): the JSON API and the inbox's form both
    /// come here. The approver is the signed-in caller's credential, never anything submitted.
    ///
    /// # Errors
    ///
    /// The kernel's refusal (or the store's failure) as a [`Problem`].
    ///
    /// # Cancel safety
    ///
    /// As [`countersign::control::submit_answer`]: the answer is recorded in one transaction, or not at all.
    pub(crate) async fn answer_as(
        &self,
        caller: &Caller,
        request_id: ApprovalId,
        decision: Result<AnswerDecision, approval::InvalidDecision>,
        shown_hash: Option<ActionHash>,
        note: Option<String>,
    ) -> Result<ApprovalRecord, Problem> {
        let store = self.store().await?;
        let submitted = store::RecordAnswer {
            request_id,
            decision,
            approver: caller.credential.clone(),
            channel: Channel::Service,
            shown_hash,
            note,
        };
        let record =
            countersign::control::submit_answer(store.as_ref(), submitted, self.inner.clock.now())
                .await
                .map_err(|error| {
                    self.inner.metrics.record_answer(error.reason());
                    Problem::from_answer(&error)
                })?;
        self.inner.metrics.record_answer(record.state.as_str());
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;
    use crate::{ServiceConfig, SignIn, StoreSource};

    /// A token's shape, as a person might paste one into a URL.
    const TOKEN: &str =
        "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJodW1hbjphbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz";

    /// A service over an empty memory store that signs approver tokens in, logging requests.
    fn logging_service() -> Service {
        let key = countersign::token::generate_keypair().expect("a key");
        Service::new(ServiceConfig {
            store: StoreSource::Open(Arc::new(countersign::store::MemoryStore::new())),
            sign_in: SignIn {
                approver_keys: vec![key.public_key()],
                proxy: None,
                oidc: None,
            },
            directory: BTreeMap::new(),
            auditors_group: None,
            public_url: None,
            clock: Arc::new(countersign::SystemClock),
            policy: None,
        })
        .with_request_log()
    }

    /// Send `request`; its status, and the request log's line for it.
    async fn logged(service: &Service, request: Request<Body>) -> (u16, String) {
        let response = service.router().oneshot(request).await.expect("an answer");
        let mut lines = service.inner.logged.lock().expect("the log");
        assert_eq!(lines.len(), 1, "one line per request: {lines:?}");
        (response.status().as_u16(), lines.remove(0))
    }

    fn request(method: &str, path: &str, headers: &[(&str, &str)], body: Body) -> Request<Body> {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(body).expect("a request")
    }

    /// Found by a first-time user: an unknown route logged nothing, and a page's refusal
    /// logged no reason code.
    #[tokio::test]
    async fn every_request_is_logged_with_its_refusals_reason() {
        let service = logging_service();
        let form = [("content-type", "application/x-www-form-urlencoded")];
        let html = [("accept", "text/html")];
        for (request, expected) in [
            (
                request("GET", "/no/such/route", &[], Body::empty()),
                "GET /no/such/route -> 404 not_found (",
            ),
            (
                request("GET", "/no/such/page", &html, Body::empty()),
                "GET /no/such/page -> 404 not_found (",
            ),
            (
                request("DELETE", "/api/v1/approvals", &[], Body::empty()),
                "DELETE /api/v1/approvals -> 405 method_not_allowed (",
            ),
            (
                request("GET", "/inbox", &html, Body::empty()),
                "GET /inbox -> 303 not_authenticated (",
            ),
            (
                request("POST", "/signin", &form, Body::from("csrf=x&token=y")),
                "POST /signin -> 403 csrf (",
            ),
            (
                request(
                    "POST",
                    "/requests/apr_aaaaaaaaaaaaaaaaaaaa/answer",
                    &[],
                    Body::from("{}"),
                ),
                "POST /requests/apr_aaaaaaaaaaaaaaaaaaaa/answer -> 415 unsupported_media_type (",
            ),
            (
                request("GET", "/api/v1/approvals", &[], Body::empty()),
                "GET /api/v1/approvals -> 401 not_authenticated (",
            ),
            (
                request("GET", "/signin", &html, Body::empty()),
                "GET /signin -> 200 (",
            ),
        ] {
            let (_, line) = logged(&service, request).await;
            assert!(
                line.starts_with(&format!("countersign serve: {expected}")),
                "{line}"
            );
        }
    }

    /// Found by a first-time user: a token pasted into the URL reached the log.
    #[tokio::test]
    async fn a_token_in_the_path_is_not_logged() {
        let service = logging_service();
        let long = format!("/requests/{}{TOKEN}", "a".repeat(180));
        for path in [
            format!("/api/v1/approvals/{TOKEN}"),
            format!("/requests/{TOKEN}"),
            format!("/no/such/route/Bearer%20{TOKEN}"),
            long,
        ] {
            let (_, line) = logged(&service, request("GET", &path, &[], Body::empty())).await;
            assert!(!line.contains("eyJhbGciOiJFZERTQSIsInR5cCI6"), "{line}");
            // (Past 200 characters the path is cut, the redaction's mark with it.)
            assert!(line.contains("[redacted"), "{line}");
        }
    }

    /// Found by a first-time user: an oversized form got a bare `413` in plain text.
    #[tokio::test]
    async fn an_oversized_body_is_refused_like_every_other_refusal() {
        let service = logging_service();
        let big = format!("csrf=x&note={}", "a".repeat(MAX_BODY + 1));
        for (path, media, says) in [
            (
                "/signin",
                "text/html; charset=utf-8",
                "paste only the approver token",
            ),
            (
                "/requests/apr_aaaaaaaaaaaaaaaaaaaa/answer",
                "text/html; charset=utf-8",
                "shorten what you typed",
            ),
            (
                "/slack/interactions",
                crate::problem::PROBLEM_JSON,
                "body_too_large",
            ),
        ] {
            let response = service
                .router()
                .oneshot(request(
                    "POST",
                    path,
                    &[("content-type", "application/x-www-form-urlencoded")],
                    Body::from(big.clone()),
                ))
                .await
                .expect("an answer");
            assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE, "{path}");
            assert_eq!(response.headers()[header::CONTENT_TYPE], media, "{path}");
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("the body");
            let body = String::from_utf8_lossy(&body);
            assert!(body.contains(says), "{path}: {body}");
            assert!(body.contains("body_too_large"), "{path}: {body}");
            let line = service.inner.logged.lock().expect("the log").remove(0);
            assert!(line.contains("-> 413 body_too_large ("), "{line}");
        }
    }
}
