//! The web inbox: server-rendered HTML pages over the same kernel calls as the JSON API.
//!
//! | page | what |
//! |---|---|
//! | `GET /inbox` (`/` redirects here) | pending, unexpired requests the signed-in person may answer, with `1 of 2 approvals` and the time left |
//! | `GET /requests/{id}` | one request in full: action, principal, resource, environment, the rule that required approval, the action hash, the arguments through [`countersign::display`], and the answer form |
//! | `POST /requests/{id}/answer` | form fields `csrf`, `decision` (`approve` or `deny`), `action_hash` (the hash the page showed), `note` |
//! | `GET /history` | answered, expired, consumed and void requests the person may see, newest first |
//! | `GET /receipts` | the receipts the person may read, with the chain's status from the last verification ([`crate::chain`]) |
//! | `GET /effects` | ambiguous effects the person may see, with a resolve form for those who may resolve them |
//! | `POST /effects/{key}/resolve` | form fields `csrf`, `to` (`committed` or `failed`), `note` (required) |
//!
//! Who the person is comes only from the sign-in (a browser session, an authenticating proxy,
//! or a bearer token): no form has a field that names an approver. Every form carries a CSRF
//! value (the session's, or for proxy sign-in a keyed digest of the identity) and a request
//! with an `Origin` must come from the service's own origin. Answers go through
//! [`countersign::control::submit_answer`] exactly like the API's; a hash other than the
//! request's is refused `mismatch` and the page says so.
//!
//! Every HTML response carries [`CONTENT_SECURITY_POLICY`], `X-Content-Type-Options: nosniff`
//! and `Referrer-Policy: same-origin`. The pages use no inline script or style: the style sheet
//! and a few lines of script (the expiry countdown) are served from `/static/`.

mod forms;
mod prose;
mod takeback;
pub(crate) mod views;

use std::collections::{BTreeMap, HashMap};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign::approval::{AnswerDecision, ApprovalRecord};
use countersign::display::{self, ApprovalDisplay};
use countersign::effect::EffectRecord;
use countersign::policy::DecisionReason;
use countersign::{ActionHash, ApprovalId, ApprovalState, EffectKey, EffectState, Timestamp};
use maud::Markup;

use crate::auth::Caller;
use crate::problem::{LoggedReason, Problem};
use crate::scope::Scope;
use crate::{Service, api, browser};

/// The `Content-Security-Policy` of every HTML page: nothing but this service's own script,
/// style sheet and images; forms post only here; no framing; no `<base>`.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Requests per inbox page.
const INBOX_PAGE: usize = 100;
/// Requests per history page.
const HISTORY_PAGE: usize = 100;
/// Receipts per receipts page.
const RECEIPTS_PAGE: usize = 100;
/// The refusal banner's heading for an answer.
const NOT_COUNTED: &str = "Your answer was not counted.";

/// The style sheet, served as `/static/inbox.css`.
const STYLE: &str = include_str!("../static/inbox.css");
/// The countdown script, served as `/static/inbox.js`.
const SCRIPT: &str = include_str!("../static/inbox.js");

pub(crate) fn routes() -> Router<Service> {
    Router::new()
        .route("/", get(home))
        .route("/inbox", get(inbox))
        .route("/requests/{id}", get(request_page))
        .route("/requests/{id}/answer", post(forms::answer))
        .route("/requests/{id}/take-back", post(takeback::take_back))
        .route("/history", get(history))
        .route("/receipts", get(receipts))
        .route("/effects", get(effects))
        .route("/effects/{key}/resolve", post(resolve))
        .route("/static/inbox.css", get(style))
        .route("/static/inbox.js", get(script))
}

/// An HTML response with the headers every page carries, and `cookies` as `Set-Cookie`.
pub(crate) fn html(status: StatusCode, page: Markup, cookies: &[String]) -> Response {
    let mut response = (status, page.into_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    for cookie in cookies {
        if let Ok(value) = HeaderValue::from_str(cookie) {
            headers.append(header::SET_COOKIE, value);
        }
    }
    response
}

/// `303 See Other` to `location` (after a form, so a reload does not post it again).
pub(crate) fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response.headers_mut().insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

fn static_file(media: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    // Built into the binary and holding no data: a browser may keep them for five minutes.
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

async fn style() -> Response {
    static_file("text/css; charset=utf-8", STYLE)
}

async fn script() -> Response {
    static_file("text/javascript; charset=utf-8", SCRIPT)
}

async fn home() -> Response {
    see_other("/inbox")
}

/// The signed-in person looking at a page, and the CSRF value their forms carry.
pub(crate) struct Viewer {
    /// Who, as sign-in established it.
    pub caller: Caller,
    /// The value every form of theirs must send back in `csrf`.
    pub csrf: String,
}

impl Service {
    /// The CSRF value for pages of a caller without a browser session (proxy or bearer
    /// sign-in): a keyed digest of the identity, with a key made when the service started.
    fn keyed_csrf(&self, id: &str) -> String {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        hasher.update(self.inner.page_key);
        hasher.update(b"countersign page csrf\0");
        hasher.update(id.as_bytes());
        URL_SAFE_NO_PAD.encode(hasher.finalize())
    }

    /// Who is looking, as the API would sign them in.
    fn viewer(&self, headers: &HeaderMap) -> Result<Viewer, Problem> {
        let caller = self.caller(headers, false)?;
        let csrf = match self.session_in_use(headers) {
            Some(session) => session.csrf,
            None => self.keyed_csrf(&caller.id),
        };
        Ok(Viewer { caller, csrf })
    }

    /// Who is posting a form: signed in, from this service's own origin, with their CSRF value.
    fn poster(
        &self,
        headers: &HeaderMap,
        fields: &HashMap<String, String>,
    ) -> Result<Viewer, Problem> {
        if !self.origin_allowed(headers) {
            return Err(csrf_refused(
                "the form was sent from another site: open the page on this service and answer there",
            ));
        }
        let viewer = self.viewer(headers)?;
        let given = fields.get("csrf").map_or("", String::as_str);
        if given.is_empty() {
            return Err(csrf_refused(
                "the form carried no check value (`csrf`): reload the page and send it again",
            ));
        }
        if !browser::same_secret(given, &viewer.csrf) {
            return Err(csrf_refused(
                "the form's check value (`csrf`) is not this sign-in's: reload the page and send it again",
            ));
        }
        Ok(viewer)
    }

    /// The page for a refusal: signed-out GETs go to the sign-in form; anything else is an HTML
    /// page with the problem's status, saying what happened and what to do. Either way the
    /// request log gets the reason code, as for the API.
    fn refused_page(&self, viewer: Option<&Viewer>, problem: Problem, get: bool) -> Response {
        if get && problem.status == StatusCode::UNAUTHORIZED {
            return LoggedReason::mark(&problem, see_other("/signin"));
        }
        LoggedReason::mark(
            &problem,
            html(problem.status, views::problem(viewer, &problem), &[]),
        )
    }
}

fn csrf_refused(detail: &str) -> Problem {
    Problem::new(StatusCode::FORBIDDEN, "csrf", detail.to_owned())
}

/// The 1-based `?page=`, 1 when absent or unreadable.
fn page_number(query: &BTreeMap<String, String>) -> usize {
    query
        .get("page")
        .and_then(|page| page.parse::<usize>().ok())
        .filter(|page| *page >= 1)
        .unwrap_or(1)
}

/// One row of the inbox.
pub(crate) struct InboxRow {
    pub record: ApprovalRecord,
    pub display: ApprovalDisplay,
    /// The viewer already answered it (it waits for others).
    pub answered: bool,
}

/// `GET /inbox`.
async fn inbox(
    State(service): State<Service>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let viewer = match service.viewer(&headers) {
        Ok(viewer) => viewer,
        Err(problem) => return service.refused_page(None, problem, true),
    };
    match inbox_rows(&service, &viewer.caller, page_number(&query)).await {
        Ok((rows, total, page, now)) => html(
            StatusCode::OK,
            views::inbox(&viewer, &rows, total, page, INBOX_PAGE, now),
            &[],
        ),
        Err(problem) => service.refused_page(Some(&viewer), problem, true),
    }
}

/// The inbox's rows for `page`, how many requests wait in all, the page shown, and the store's
/// time they were judged at (their countdowns count from it).
async fn inbox_rows(
    service: &Service,
    caller: &Caller,
    page: usize,
) -> Result<(Vec<InboxRow>, usize, usize, Timestamp), Problem> {
    let store = service.store().await?;
    let now = service.store_time(store.as_ref()).await?;
    let mut records = store
        .approvals(Some(ApprovalState::Pending))
        .await
        .map_err(|error| Problem::from_store(&error))?;
    let mut scope = Scope::new(caller, now);
    // Only what this person may answer: unexpired, and their rule lets them.
    records.retain(|record| !record.is_expired_at(now) && scope.entitled(record));
    // The soonest to expire first: that is what needs an answer first.
    records.sort_by(|a, b| {
        (a.expires_at.as_millis(), a.id.as_str()).cmp(&(b.expires_at.as_millis(), b.id.as_str()))
    });
    let total = records.len();
    let pages = total.div_ceil(INBOX_PAGE).max(1);
    let page = page.min(pages);
    let rows = records
        .into_iter()
        .skip((page - 1) * INBOX_PAGE)
        .take(INBOX_PAGE)
        .map(|record| InboxRow {
            display: display::render(&record, None),
            answered: record
                .answers
                .iter()
                .any(|answer| answer.approver.id == caller.id),
            record,
        })
        .collect();
    Ok((rows, total, page, now))
}

/// What the request page shows besides the request.
pub(crate) struct RequestView {
    pub record: ApprovalRecord,
    pub display: ApprovalDisplay,
    /// Could an answer by the viewer still count?
    pub may_answer: bool,
    /// The viewer already answered.
    pub answered: bool,
    /// The policy rule that required approval, as far as the service's policy can tell.
    pub policy_rule: Option<String>,
    /// A banner: the viewer's answer that just counted (`?answered=`).
    pub just_answered: bool,
    /// With [`RequestView::just_answered`]: the answer repeated one the viewer had already
    /// given (a second tab, a resubmitted form), so nothing changed (`?answered=again`).
    pub answered_again: bool,
    /// A refusal of the viewer's last answer, shown above the form.
    pub refusal: Option<Problem>,
    /// A banner: the viewer just took it back (`?taken=`).
    pub just_taken_back: bool,
    /// What the refusal banner says was not done.
    pub refusal_heading: &'static str,
    /// May the viewer revoke it (issue #31)?
    pub may_revoke: bool,
    /// May the viewer cancel it, as one of its resolvers?
    pub may_cancel: bool,
}

impl Service {
    /// The policy rule that required approval, when the service has the policy and the
    /// action's entry is unchanged since the request (same fingerprint).
    fn policy_rule(&self, record: &ApprovalRecord) -> Option<String> {
        let policy = self.inner.policy.as_ref()?;
        let Some(entry) = policy.entry(&record.action) else {
            return Some(format!(
                "the policy this service runs with no longer has an entry for `{}`",
                record.action
            ));
        };
        if entry.fingerprint() != record.entry_fingerprint {
            return Some(format!(
                "policy entry `{}` has changed since this request was made (it was {}); the rule below is the one stored with the request",
                entry.key(),
                record.entry_fingerprint
            ));
        }
        let decided = policy.decide(&record.action, &record.arguments.to_value());
        Some(match decided.reason {
            DecisionReason::Rule { index } => format!(
                "policy entry `{}`, rule {} of its rules (decision: {})",
                entry.key(),
                index + 1,
                decided.decision.as_str()
            ),
            DecisionReason::Shorthand => format!(
                "policy entry `{}` (decision: {})",
                entry.key(),
                decided.decision.as_str()
            ),
            DecisionReason::UnknownAction | DecisionReason::NoMatchingRule => {
                format!("policy entry `{}` ({})", entry.key(), decided.reason.code())
            }
        })
    }

    /// The request page's view of `id` for `viewer`.
    async fn request_view(&self, viewer: &Viewer, id: &str) -> Result<RequestView, Problem> {
        let store = self.store().await?;
        let mut scope = Scope::new(&viewer.caller, self.store_time(store.as_ref()).await?);
        // A person in a browser is sent back to the inbox, not to the API's listing.
        let record = api::visible_approval(store.as_ref(), id, &mut scope)
            .await
            .map_err(|problem| {
                if problem.reason == "unknown_request" {
                    unknown_request(id)
                } else {
                    problem
                }
            })?;
        let may_answer = scope.may_answer(&record);
        let may_revoke = scope.may_revoke(&record);
        let may_cancel = scope.may_resolve(&record);
        Ok(RequestView {
            display: display::render(&record, None),
            answered: record
                .answers
                .iter()
                .any(|answer| answer.approver.id == viewer.caller.id),
            may_answer,
            policy_rule: self.policy_rule(&record),
            just_answered: false,
            answered_again: false,
            refusal: None,
            just_taken_back: false,
            refusal_heading: NOT_COUNTED,
            may_revoke,
            may_cancel,
            record,
        })
    }
}

/// `GET /requests/{id}`.
async fn request_page(
    State(service): State<Service>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let viewer = match service.viewer(&headers) {
        Ok(viewer) => viewer,
        Err(problem) => return service.refused_page(None, problem, true),
    };
    let Ok(Path(id)) = path else {
        return service.refused_page(Some(&viewer), unknown_request(""), true);
    };
    match service.request_view(&viewer, &id).await {
        Ok(mut view) => {
            view.just_answered = query.contains_key("answered") && view.answered;
            view.answered_again =
                view.just_answered && query.get("answered").map(String::as_str) == Some("again");
            view.just_taken_back = query.contains_key("taken");
            html(
                StatusCode::OK,
                views::request(&viewer, &view, service.inner.clock.now()),
                &[],
            )
        }
        Err(problem) => service.refused_page(Some(&viewer), problem, true),
    }
}

fn unknown_request(id: &str) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "unknown_request",
        format!(
            "no approval request `{}` that you may see: go back to your inbox",
            id.escape_debug()
        ),
    )
}

/// The request page again, with `problem` above the form, under the problem's status.
async fn request_with_refusal(
    service: &Service,
    viewer: &Viewer,
    id: &str,
    problem: Problem,
    heading: &'static str,
) -> Response {
    match service.request_view(viewer, id).await {
        Ok(mut view) => {
            let status = problem.status;
            let logged = LoggedReason::of(&problem);
            view.refusal = Some(problem);
            view.refusal_heading = heading;
            let mut response = html(
                status,
                views::request(viewer, &view, service.inner.clock.now()),
                &[],
            );
            response.extensions_mut().insert(logged);
            response
        }
        // The request itself cannot be shown: show the refusal alone.
        Err(_) => service.refused_page(Some(viewer), problem, false),
    }
}

/// `GET /history`: what the viewer may see that is no longer waiting, newest first.
async fn history(
    State(service): State<Service>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let viewer = match service.viewer(&headers) {
        Ok(viewer) => viewer,
        Err(problem) => return service.refused_page(None, problem, true),
    };
    let result = async {
        let store = service.store().await?;
        let now = service.inner.clock.now();
        let mut records = store
            .approvals(None)
            .await
            .map_err(|error| Problem::from_store(&error))?;
        let mut scope = Scope::new(&viewer.caller, now);
        records.retain(|record| {
            (record.state != ApprovalState::Pending || record.is_expired_at(now))
                && scope.sees(record)
        });
        records.sort_by(|a, b| {
            let last = |record: &ApprovalRecord| {
                record
                    .consumed_at
                    .or(record.answered_at)
                    .unwrap_or(record.expires_at)
                    .as_millis()
            };
            (last(b), b.id.as_str()).cmp(&(last(a), a.id.as_str()))
        });
        let total = records.len();
        let pages = total.div_ceil(HISTORY_PAGE).max(1);
        let page = page_number(&query).min(pages);
        let shown: Vec<ApprovalRecord> = records
            .into_iter()
            .skip((page - 1) * HISTORY_PAGE)
            .take(HISTORY_PAGE)
            .collect();
        Ok::<_, Problem>((shown, total, page, now))
    }
    .await;
    match result {
        Ok((records, total, page, now)) => html(
            StatusCode::OK,
            views::history(&viewer, &records, total, page, HISTORY_PAGE, now),
            &[],
        ),
        Err(problem) => service.refused_page(Some(&viewer), problem, true),
    }
}

/// `GET /receipts`: the receipts the viewer may read (`?after=SEQ` for the next page) and the
/// chain's status from the last verification.
async fn receipts(
    State(service): State<Service>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let viewer = match service.viewer(&headers) {
        Ok(viewer) => viewer,
        Err(problem) => return service.refused_page(None, problem, true),
    };
    let after = query
        .get("after")
        .and_then(|after| after.parse::<u64>().ok())
        .unwrap_or(0);
    match service
        .visible_receipts(&viewer.caller, after, RECEIPTS_PAGE)
        .await
    {
        Ok((items, next)) => html(
            StatusCode::OK,
            views::receipts(&viewer, &items, after, next, &service.chain_status()),
            &[],
        ),
        Err(problem) => service.refused_page(Some(&viewer), problem, true),
    }
}

/// One ambiguous effect on the effects page.
pub(crate) struct EffectRow {
    pub record: EffectRecord,
    /// Who may resolve it, in words.
    pub resolvers: String,
    /// May the viewer resolve it (as the store will judge it)?
    pub may_resolve: bool,
}

impl Service {
    /// The ambiguous effects `caller` may see, by key.
    async fn ambiguous_effects(&self, caller: &Caller) -> Result<Vec<EffectRow>, Problem> {
        let store = self.store().await?;
        let mut records = store
            .effects(Some(EffectState::Ambiguous))
            .await
            .map_err(|error| Problem::from_store(&error))?;
        records.sort_by(|a, b| a.key.cmp(&b.key));
        let mut scope = Scope::new(caller, self.inner.clock.now());
        let mut approvals = HashMap::new();
        let mut rows = Vec::new();
        for record in records {
            let rule = api::effect_rule(store.as_ref(), &record, &mut approvals).await?;
            if !api::sees_effect(&mut scope, rule.as_ref()) {
                continue;
            }
            let principal = record
                .attempt
                .as_ref()
                .map(|attempt| attempt.principal.as_str());
            let (resolvers, may_resolve) = match &rule {
                Some(rule) => (
                    rule.resolver_summary(),
                    scope.approver_under(rule).is_some_and(|approver| {
                        approver.matches_any(rule.resolver_patterns())
                            && principal != Some(caller.id.as_str())
                    }),
                ),
                None => (
                    "anyone but the principal".to_owned(),
                    principal != Some(caller.id.as_str()),
                ),
            };
            rows.push(EffectRow {
                record,
                resolvers,
                may_resolve,
            });
        }
        Ok(rows)
    }
}

/// `GET /effects`.
async fn effects(
    State(service): State<Service>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let viewer = match service.viewer(&headers) {
        Ok(viewer) => viewer,
        Err(problem) => return service.refused_page(None, problem, true),
    };
    // The banner only confirms what the store says: a crafted link naming an effect that is
    // still ambiguous (or none at all) shows no "Resolved" claim.
    let resolved = match query.get("resolved") {
        Some(key) => confirmed_resolution(&service, key).await,
        None => None,
    };
    effects_page(&service, &viewer, StatusCode::OK, None, resolved).await
}

/// `key` when the store holds that effect and it is no longer `ambiguous`; else `None`.
async fn confirmed_resolution(service: &Service, key: &str) -> Option<String> {
    let key = countersign::EffectKey::new(key).ok()?;
    let store = service.store().await.ok()?;
    let record = store.effect(&key).await.ok()??;
    (record.state != countersign::EffectState::Ambiguous).then(|| key.as_str().to_owned())
}

async fn effects_page(
    service: &Service,
    viewer: &Viewer,
    status: StatusCode,
    refusal: Option<(String, Problem)>,
    resolved: Option<String>,
) -> Response {
    match service.ambiguous_effects(&viewer.caller).await {
        Ok(rows) => {
            let mut response = html(
                status,
                views::effects(viewer, &rows, refusal.as_ref(), resolved.as_deref()),
                &[],
            );
            if let Some((_, problem)) = &refusal {
                response.extensions_mut().insert(LoggedReason::of(problem));
            }
            response
        }
        Err(problem) => service.refused_page(Some(viewer), problem, true),
    }
}

/// `POST /effects/{key}/resolve`: `to` and a required `note`, judged by the store.
async fn resolve(
    State(service): State<Service>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Response {
    let fields = match browser::any_form_fields(&headers, &body) {
        Ok(fields) => fields,
        Err(problem) => return service.refused_page(None, problem, false),
    };
    let viewer = match service.poster(&headers, &fields) {
        Ok(viewer) => viewer,
        Err(problem) => return service.refused_page(None, problem, false),
    };
    if let Err(problem) = browser::only_fields(&fields, &["csrf", "to", "note"]) {
        return service.refused_page(Some(&viewer), problem, false);
    }
    let key = path.map(|Path(key)| key).unwrap_or_default();
    // The banner quotes the key: a token pasted into the path is not handed back.
    let refuse = |problem: Problem| (crate::redact_tokens(&key).into_owned(), problem);
    let unknown = || {
        Problem::new(
            StatusCode::NOT_FOUND,
            "unknown_effect",
            format!("no effect `{}` that you may see", key.escape_debug()),
        )
    };
    let outcome = async {
        let effect_key = EffectKey::new(key.clone()).map_err(|_| unknown())?;
        let to = match fields.get("to").map(String::as_str) {
            Some("committed") => EffectState::Committed,
            Some("failed") => EffectState::Failed,
            _ => {
                return Err(Problem::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_target",
                    "choose what happened: it happened (committed: retries are refused) or it definitely did not (failed: a retry may run)",
                ));
            }
        };
        let note = fields
            .get("note")
            .map(|note| note.trim().to_owned())
            .filter(|note| !note.is_empty())
            .ok_or_else(|| {
                Problem::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "note_required",
                    "say how you found out in the note: it is kept in the resolution's receipt",
                )
            })?;
        Problem::check_note(Some(&note))?;
        service
            .resolve_as(&viewer.caller, effect_key, to, note, unknown)
            .await
    }
    .await;
    match outcome {
        Ok(record) => see_other(&format!(
            "/effects?resolved={}",
            views::query_value(record.key.as_str())
        )),
        Err(problem) => {
            let status = problem.status;
            effects_page(&service, &viewer, status, Some(refuse(problem)), None).await
        }
    }
}

/// Time left until `until` from `now`, for a person: `14 min 05 s`, `2 h 03 min`, `42 s`, or
/// `expired`. The countdown script writes the same form.
pub(crate) fn time_left(now: Timestamp, until: Timestamp) -> String {
    let millis = until.as_millis() - now.as_millis();
    if millis <= 0 {
        return "expired".to_owned();
    }
    let seconds = millis.div_euclid(1000);
    let (hours, minutes, seconds) = (seconds / 3600, (seconds % 3600) / 60, seconds % 60);
    if hours > 0 {
        format!("expires in {hours} h {minutes:02} min")
    } else if minutes > 0 {
        format!("expires in {minutes} min {seconds:02} s")
    } else {
        format!("expires in {seconds} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_reads_like_the_countdown() {
        let now = Timestamp::from_millis(1_000_000);
        assert_eq!(time_left(now, now), "expired");
        assert_eq!(
            time_left(now, Timestamp::from_millis(1_042_500)),
            "expires in 42 s"
        );
        assert_eq!(
            time_left(now, Timestamp::from_millis(1_000_000 + 845_000)),
            "expires in 14 min 05 s"
        );
        assert_eq!(
            time_left(now, Timestamp::from_millis(1_000_000 + 7_380_000)),
            "expires in 2 h 03 min"
        );
    }
}
