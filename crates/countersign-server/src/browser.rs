//! Browser sign-in: a form that exchanges an approver token for a session cookie.
//!
//! `GET /signin` shows a form; `POST /signin` (form-encoded `token` and `csrf`) verifies the
//! token like the API does, sets `countersign_session` (HttpOnly, SameSite=Lax, `Secure`
//! when the public URL is https), valid until the token expires, and sends the browser to the
//! inbox (`303 /inbox`). `POST /signout` ends it (`303 /signin?signed_out`).
//!
//! CSRF: the form carries a random value that must equal the `countersign_csrf` cookie set with
//! it (double submit), and a request with an `Origin` header must come from the service's own
//! origin. The session keeps the *token* as its credential, so every answer made with it is
//! still verified by the kernel against the keys stored with the request. A call authenticated
//! by the session cookie that changes anything (POST) must also send the session's CSRF value
//! in `x-countersign-csrf` (shown on the signed-in page), so a cross-site request cannot use it.
//!
//! Sessions live in memory: a restart signs everyone out.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign::Timestamp;
use countersign::token;
use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::problem::{LoggedReason, Problem};
use crate::{Service, pages};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "countersign_session";
/// The sign-in form's CSRF cookie.
pub const CSRF_COOKIE: &str = "countersign_csrf";
/// The header a session-authenticated POST carries its CSRF value in.
pub const CSRF_HEADER: &str = "x-countersign-csrf";
/// The most live sessions kept; beyond it, sign-in is refused until some expire.
const MAX_SESSIONS: usize = 10_000;

/// One signed-in browser.
#[derive(Clone)]
pub struct Session {
    /// The approver token it was opened with (the credential every answer carries).
    pub token: String,
    /// The value a POST made with this session must echo in [`CSRF_HEADER`].
    pub csrf: String,
    /// When it ends: the token's expiry.
    pub expires_at: Timestamp,
}

/// The live sessions, by the digest of their cookie value.
#[derive(Default)]
pub struct Sessions {
    by_id: Mutex<HashMap<[u8; 32], Session>>,
}

fn digest(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// 32 random bytes, base64url.
fn random_value() -> String {
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Sessions {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        // A poisoned lock means a panic while holding it; the map itself is still whole.
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Open a session; its cookie value, or `None` when too many are live.
    fn open(&self, session: Session, now: Timestamp) -> Option<String> {
        let mut map = self.map();
        if map.len() >= MAX_SESSIONS {
            map.retain(|_, session| now < session.expires_at);
            if map.len() >= MAX_SESSIONS {
                return None;
            }
        }
        let id = random_value();
        // Kept by digest: a memory dump shows no usable cookie.
        map.insert(digest(&id), session);
        Some(id)
    }

    /// The live session whose cookie value is `id`.
    pub fn find(&self, id: &str, now: Timestamp) -> Option<Session> {
        let mut map = self.map();
        let key = digest(id);
        match map.get(&key) {
            Some(session) if now < session.expires_at => Some(session.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// End the session whose cookie value is `id` (signed out, or its token revoked).
    pub(crate) fn close(&self, id: &str) {
        self.map().remove(&digest(id));
    }
}

/// The value of cookie `name`, if the request carries exactly one.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(key, _)| *key == name)
        .map(|(_, value)| value);
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// Equal, in constant time for equal lengths.
pub fn same_secret(given: &str, expected: &str) -> bool {
    given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

fn csrf_refused(detail: &str) -> Problem {
    Problem::new(StatusCode::FORBIDDEN, "csrf", detail.to_owned())
}

impl Service {
    fn secure_cookies(&self) -> bool {
        self.inner
            .public_url
            .as_deref()
            .is_some_and(|url| url.starts_with("https://"))
    }

    fn cookie_attributes(&self) -> &'static str {
        if self.secure_cookies() {
            "HttpOnly; SameSite=Lax; Path=/; Secure"
        } else {
            "HttpOnly; SameSite=Lax; Path=/"
        }
    }

    /// A request with an `Origin` must come from this service: the public URL's origin, or
    /// `http(s)://` plus the `Host` it was sent to.
    pub(crate) fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        if let Some(public) = &self.inner.public_url {
            let public = public.trim_end_matches('/');
            let public_origin = public
                .find("://")
                .and_then(|scheme_end| {
                    public[scheme_end + 3..]
                        .find('/')
                        .map(|path| &public[..scheme_end + 3 + path])
                })
                .unwrap_or(public);
            return origin == public_origin;
        }
        let host = headers
            .get(header::HOST)
            .and_then(|host| host.to_str().ok())
            .unwrap_or("");
        !host.is_empty()
            && (origin == format!("http://{host}") || origin == format!("https://{host}"))
    }
}

/// The sign-in form with a fresh CSRF value (cookie and hidden field), and `error` from the last
/// attempt if there was one (its reason code kept for the request log), under `status`.
pub(crate) fn signin_page(
    service: &Service,
    status: StatusCode,
    error: Option<&Problem>,
    signed_out: bool,
) -> Response {
    let csrf = random_value();
    let page = pages::html(
        status,
        pages::views::signin(&csrf, error, signed_out),
        &[format!(
            "{CSRF_COOKIE}={csrf}; {}; Max-Age=3600",
            service
                .cookie_attributes()
                .replace("SameSite=Lax", "SameSite=Strict")
        )],
    );
    match error {
        Some(problem) => LoggedReason::mark(problem, page),
        None => page,
    }
}

/// `GET /signin`: the form, with a fresh CSRF value in a cookie and a hidden field
/// (`?signed_out` adds a line saying the person is signed out).
pub async fn signin_form(
    State(service): State<Service>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    signin_page(
        &service,
        StatusCode::OK,
        None,
        query.contains_key("signed_out"),
    )
}

pub(crate) fn form_fields(
    headers: &HeaderMap,
    body: &Bytes,
    allowed: &[&str],
) -> Result<HashMap<String, String>, Problem> {
    let fields = any_form_fields(headers, body)?;
    only_fields(&fields, allowed)?;
    Ok(fields)
}

/// Refuse a field the page does not send (`allowed`), as the API refuses an unknown field: a
/// field such as `approver` is refused, never ignored (the signed-in person answers).
///
/// # Errors
///
/// `422 invalid_body` naming the field and the ones the page sends.
pub(crate) fn only_fields(
    fields: &HashMap<String, String>,
    allowed: &[&str],
) -> Result<(), Problem> {
    let mut unknown: Vec<&String> = fields
        .keys()
        .filter(|key| !allowed.contains(&key.as_str()))
        .collect();
    unknown.sort();
    match unknown.first() {
        None => Ok(()),
        Some(key) => Err(Problem::invalid_body(format!(
            "the form sent a field `{}` this page does not send (it sends {}): there is no field that names who answers, the signed-in person does; use the page's own form",
            key.escape_debug(),
            allowed.join(", ")
        ))),
    }
}

/// The fields of a form body, whatever they are (each at most once).
///
/// # Errors
///
/// `415` for a body that is not a form; `422 invalid_body` for a field given twice.
pub(crate) fn any_form_fields(
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<HashMap<String, String>, Problem> {
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| {
            media
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !is_form {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the form as `application/x-www-form-urlencoded`",
        ));
    }
    let mut fields = HashMap::new();
    for (key, value) in form_urlencoded::parse(body) {
        if fields
            .insert(key.into_owned(), value.into_owned())
            .is_some()
        {
            return Err(Problem::invalid_body("a form field is given twice"));
        }
    }
    Ok(fields)
}

/// `POST /signin`: check the CSRF value and the origin, verify the token, open a session and
/// go to the inbox (`303`); a refusal shows the form again with what went wrong, under the
/// refusal's status (`403 csrf`, `401 not_authenticated`, ...).
pub async fn signin(State(service): State<Service>, headers: HeaderMap, body: Bytes) -> Response {
    match open_session(&service, &headers, &body).await {
        Ok(response) => response,
        Err(problem) => signin_page(&service, problem.status, Some(&problem), false),
    }
}

async fn open_session(
    service: &Service,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, Problem> {
    if !service.origin_allowed(headers) {
        return Err(csrf_refused(
            "the sign-in form was sent from another site: open /signin on this service and sign in there",
        ));
    }
    let fields = form_fields(headers, body, &["csrf", "token"])?;
    let expected = cookie(headers, CSRF_COOKIE).ok_or_else(|| {
        csrf_refused("the sign-in form's check cookie is missing: reload /signin and try again")
    })?;
    let given = fields.get("csrf").map_or("", String::as_str);
    if !same_secret(given, expected) {
        return Err(csrf_refused(
            "the sign-in form's check value does not match: reload /signin and try again",
        ));
    }
    // A token copied from an `Authorization` header keeps its scheme: take the token itself.
    let jwt = fields.get("token").map_or("", |token| {
        let token = token.trim();
        token
            .strip_prefix("Bearer ")
            .or_else(|| token.strip_prefix("bearer "))
            .map_or(token, str::trim)
    });
    let keys = &service.inner.sign_in.approver_keys;
    if keys.is_empty() {
        return Err(Problem::not_authenticated(
            "this approval service accepts no approver tokens: no approver keys are configured",
        ));
    }
    let now = service.inner.clock.now();
    let verified = token::verify(jwt, keys, now).map_err(|error| {
        Problem::not_authenticated(error.to_string()).with("token_reason", error.reason())
    })?;
    // Exactly as the API signs it in: a subject no answer could use, or a revoked token, opens
    // no session (it did, and the inbox then showed an empty form without a reason).
    crate::auth::token_subject(verified.subject.clone())?;
    if let Some(jti) = &verified.jti {
        let store = service.store().await?;
        if store
            .token_revoked(jti)
            .await
            .map_err(|error| Problem::from_store(&error))?
        {
            return Err(Problem::not_authenticated(format!(
                "the approver token `{jti}` was revoked (`countersign approver revoke`): ask for a new one"
            ))
            .with("token_reason", "revoked"));
        }
    }
    let csrf = random_value();
    let session = Session {
        token: jwt.to_owned(),
        csrf: csrf.clone(),
        expires_at: verified.expires_at,
    };
    let id = service.inner.sessions.open(session, now).ok_or_else(|| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_sessions",
            "too many browsers are signed in: try again later",
        )
    })?;
    let max_age = (verified.expires_at.as_millis() - now.as_millis()).max(0) / 1000;
    let mut response = pages::see_other("/inbox");
    for cookie in [
        format!(
            "{SESSION_COOKIE}={id}; {}; Max-Age={max_age}",
            service.cookie_attributes()
        ),
        format!("{CSRF_COOKIE}=; {}; Max-Age=0", service.cookie_attributes()),
    ] {
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    Ok(response)
}

/// `response` with the session cookie removed from the browser.
pub(crate) fn clear_session_cookie(service: &Service, mut response: Response) -> Response {
    if let Ok(value) = HeaderValue::from_str(&format!(
        "{SESSION_COOKIE}=; {}; Max-Age=0",
        service.cookie_attributes()
    )) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// `POST /signout`: end the session (the form's `csrf` must be the session's).
pub async fn signout(State(service): State<Service>, headers: HeaderMap, body: Bytes) -> Response {
    let result = (|| {
        if !service.origin_allowed(&headers) {
            return Err(csrf_refused("sign out from this service's own page"));
        }
        let fields = form_fields(&headers, &body, &["csrf"])?;
        let id = cookie(&headers, SESSION_COOKIE)
            .ok_or_else(|| Problem::not_authenticated("not signed in"))?;
        let session = service
            .inner
            .sessions
            .find(id, service.inner.clock.now())
            .ok_or_else(|| Problem::not_authenticated("not signed in"))?;
        if !same_secret(fields.get("csrf").map_or("", String::as_str), &session.csrf) {
            return Err(csrf_refused("sign out from this service's own page"));
        }
        service.inner.sessions.close(id);
        Ok(clear_session_cookie(
            &service,
            pages::see_other("/signin?signed_out"),
        ))
    })();
    result.unwrap_or_else(|problem| {
        LoggedReason::mark(
            &problem,
            pages::html(problem.status, pages::views::problem(None, &problem), &[]),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_reads_one_cookie() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; countersign_csrf=xyz"),
        );
        assert_eq!(cookie(&headers, CSRF_COOKIE), Some("xyz"));
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("countersign_csrf=other"),
        );
        assert_eq!(
            cookie(&headers, CSRF_COOKIE),
            None,
            "two values: neither is trusted"
        );
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }

    #[test]
    fn sessions_end_with_their_token() {
        let sessions = Sessions::default();
        let session = Session {
            token: "t".to_owned(),
            csrf: "c".to_owned(),
            expires_at: Timestamp::from_millis(1_000),
        };
        let id = sessions
            .open(session, Timestamp::from_millis(0))
            .expect("room for one");
        assert!(sessions.find(&id, Timestamp::from_millis(999)).is_some());
        assert!(sessions.find(&id, Timestamp::from_millis(1_000)).is_none());
        assert!(
            sessions
                .find("made-up", Timestamp::from_millis(0))
                .is_none()
        );
    }
}
