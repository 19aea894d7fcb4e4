//! Slack (issue #17): one Block Kit message per request with Approve / Deny buttons, updated
//! as the request changes, and the interactivity endpoint that turns a button press into an
//! answer through the kernel.
//!
//! - **Messages.** The outbox's events reach Slack like a webhook endpoint named `slack`
//!   ([`crate::notify`]): the first event of a request posts the message
//!   (`chat.postMessage`) and keeps its channel and `ts` with the delivery; every later event
//!   of the request, a redelivered one included, updates it (`chat.update`) from the request as
//!   stored. A request no one can answer any more (decided or expired before Slack heard of it,
//!   as when Slack is configured after it opened) is not posted. The message shows the request through the
//!   shared rendering ([`countersign::display::render`], as plain text: nothing in it is read as
//!   Slack markup), the action hash's short form and the expiry; while the request is
//!   `pending`, two buttons carry its id and full action hash. Once decided the buttons go and
//!   the message says who decided and when, how many approvals a quorum has, or that it
//!   expired.
//! - **Answers** (`POST /slack/interactions`): the request must carry Slack's `v0` signature
//!   (HMAC-SHA256 with the app's signing secret over `v0:{timestamp}:{body}`) and a timestamp
//!   within five minutes of the service's clock, else it is refused 401 and nothing is
//!   recorded (<https://api.slack.com/authentication/verifying-requests-from-slack>, read
//!   2026-12-01). The Slack user is mapped to an approver id by the operator's users file; an
//!   unmapped user is told so and nothing is recorded. A mapped user's press goes through
//!   [`countersign::control::submit_answer`] as [`Credential::Verified`] (authentication
//!   `slack_signature`, channel `slack`, the button's hash as the hash shown), so the request's
//!   stored rule judges it like any answer; a refusal is recorded by the kernel and shown to
//!   the user only (`chat.postEphemeral`).
//!
//! The Web API is reached at `--slack-api-url` (default [`DEFAULT_API_URL`], a forwarding
//! proxy on loopback): `https://slack.com/api` directly works too, through the one client
//! constructor `countersign-http` (issue #32).

mod message;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use countersign::approver::{Authentication, Channel, Credential};
use countersign::outbox::{ClaimedDelivery, Settlement};
use countersign::store::{RecordAnswer, Store};
use countersign::{ActionHash, AnswerDecision, ApprovalId, Timestamp};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::Service;

pub use message::blocks;

/// The endpoint name Slack's deliveries are recorded under.
pub const ENDPOINT: &str = "slack";
/// Where the Web API is reached unless told otherwise: a forwarding proxy on loopback.
pub const DEFAULT_API_URL: &str = "http://127.0.0.1:8790/api";
/// How far a request's timestamp may be from the service's clock.
pub const SIGNATURE_WINDOW: Duration = Duration::from_secs(300);

/// Why the Slack configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SlackConfigError {
    /// A users file line that is not `SLACK_USER_ID: approver`.
    #[error(
        "`{file}` line {line}: {problem}: write one `SLACK_USER_ID: approver` per line, for example `U024BE7LH: human:alice`"
    )]
    Users {
        /// The file.
        file: String,
        /// The line (from 1).
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// An empty secret or token.
    #[error("the Slack {what} is empty: write it in the file given for it")]
    Empty {
        /// What is missing.
        what: &'static str,
    },
    /// Not an `http://` or `https://` URL.
    #[error(
        "`{url}` is not an http:// or https:// URL: give Slack's Web API (`https://slack.com/api`) or a proxy's address"
    )]
    Url {
        /// The URL given.
        url: String,
    },
    /// The Web API URL carries user information, a query or a fragment.
    #[error(
        "the Slack Web API URL must not carry credentials, a query or a fragment: give its base, such as `https://slack.com/api`; the bot token goes in `--slack-token-file`"
    )]
    UrlCredentials,
    /// A plain `http://` Web API URL off this machine: the bot token would cross the network
    /// in the clear.
    #[error(
        "`{url}` is plain http:// to another machine, so the bot token would cross the network unencrypted: use `https://slack.com/api`, or a forwarding proxy on loopback (`http://127.0.0.1:PORT/api`)"
    )]
    PlainHttp {
        /// The URL given.
        url: String,
    },
    /// The HTTP client could not be made (a bug, or an unusable CA).
    #[error("cannot reach Slack over HTTP: {0}")]
    HttpClient(String),
}

/// What the service needs to talk to Slack. Secrets are never shown: `Debug` hides them.
#[derive(Clone)]
pub struct SlackConfig {
    api_url: String,
    bot_token: String,
    signing_secret: Vec<u8>,
    channel: String,
    users: BTreeMap<String, String>,
    /// Built by the one constructor (`countersign_http`) for `trust`.
    client: reqwest::Client,
    trust: countersign_http::Trust,
    /// The signatures of the presses taken in the last [`SIGNATURE_WINDOW`], with their
    /// timestamps (Unix seconds): a press sent again (replayed, or retried by Slack) is taken
    /// once.
    seen: Arc<std::sync::Mutex<BTreeMap<String, i64>>>,
}

impl std::fmt::Debug for SlackConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackConfig")
            .field("api_url", &self.api_url)
            .field("channel", &self.channel)
            .field("users", &self.users.len())
            .finish_non_exhaustive()
    }
}

impl SlackConfig {
    /// A configuration: the Web API's base URL (`https://slack.com/api`, or a proxy's
    /// `http://…/api`), the bot token (`xoxb-…`), the app's signing secret, the channel id to
    /// post in, and the Slack user id → approver id map. HTTPS certificates are checked against
    /// the system's trust store ([`SlackConfig::with_trust`] to change it).
    ///
    /// # Errors
    ///
    /// [`SlackConfigError::Url`] for a URL that is not `http://` or `https://`,
    /// [`SlackConfigError::Empty`] for an empty token or secret.
    pub fn new(
        api_url: &str,
        bot_token: &str,
        signing_secret: &str,
        channel: &str,
        users: BTreeMap<String, String>,
    ) -> Result<SlackConfig, SlackConfigError> {
        let parsed = reqwest::Url::parse(api_url).map_err(|_| SlackConfigError::Url {
            url: api_url.to_owned(),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(SlackConfigError::Url {
                url: api_url.to_owned(),
            });
        }
        // The bot token goes with every call: never in the clear past this machine, and the
        // URL itself (kept in messages) carries no credential.
        if !parsed.username().is_empty()
            || parsed.password().is_some()
            || parsed.query().is_some()
            || parsed.fragment().is_some()
        {
            return Err(SlackConfigError::UrlCredentials);
        }
        if parsed.scheme() == "http" && !is_loopback(&parsed) {
            return Err(SlackConfigError::PlainHttp {
                url: api_url.to_owned(),
            });
        }
        for (value, what) in [
            (bot_token, "bot token (xoxb-…)"),
            (signing_secret, "signing secret"),
        ] {
            if value.trim().is_empty() {
                return Err(SlackConfigError::Empty { what });
            }
        }
        Ok(SlackConfig {
            api_url: api_url.trim_end_matches('/').to_owned(),
            bot_token: bot_token.trim().to_owned(),
            signing_secret: signing_secret.trim().as_bytes().to_vec(),
            channel: channel.to_owned(),
            users,
            client: http_client(&countersign_http::Trust::system())?,
            trust: countersign_http::Trust::system(),
            seen: Arc::default(),
        })
    }

    /// This configuration trusting `trust` for an `https://` Web API URL (`ca_file:` in the
    /// notify file, or `serve --notify-ca FILE`).
    ///
    /// # Errors
    ///
    /// [`SlackConfigError::HttpClient`] when the client cannot be built (a bug).
    pub fn with_trust(
        mut self,
        trust: countersign_http::Trust,
    ) -> Result<SlackConfig, SlackConfigError> {
        self.client = http_client(&trust)?;
        self.trust = trust;
        Ok(self)
    }

    /// Parse a users file: one `SLACK_USER_ID: approver` per line; blank lines and lines
    /// starting with `#` are skipped.
    ///
    /// # Errors
    ///
    /// [`SlackConfigError::Users`] naming the first bad line.
    pub fn parse_users(
        text: &str,
        file: &str,
    ) -> Result<BTreeMap<String, String>, SlackConfigError> {
        let mut users = BTreeMap::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |problem: String| SlackConfigError::Users {
                file: file.to_owned(),
                line: index + 1,
                problem,
            };
            let (user, approver) = line.split_once(':').ok_or_else(|| {
                bad("it has no `:` between the Slack user id and the approver".to_owned())
            })?;
            let (user, approver) = (user.trim(), approver.trim());
            if user.is_empty() {
                return Err(bad("the Slack user id before the `:` is empty".to_owned()));
            }
            // Slack's user ids are upper-case letters and digits (`U024BE7LH`, `W012A3CDE`).
            if let Some(other) = user.chars().find(|c| !c.is_ascii_alphanumeric()) {
                return Err(bad(format!(
                    "the Slack user id `{}` holds `{}`, but Slack's ids are only letters and digits (find yours under the person's profile, More, Copy member ID)",
                    user.escape_debug(),
                    other.escape_debug()
                )));
            }
            // An approver no answer could be counted for is refused now, not at every press.
            if let Err(error) = countersign::approver::ApproverId::parse(approver) {
                return Err(bad(error.to_string()));
            }
            if users.contains_key(user) {
                return Err(bad(format!(
                    "the Slack user id `{user}` is mapped twice: map each Slack user to one approver"
                )));
            }
            users.insert(user.to_owned(), approver.to_owned());
        }
        Ok(users)
    }
}

impl SlackConfig {
    /// Is this the first time a request signed `signature` arrives? A request is remembered
    /// for twice [`SIGNATURE_WINDOW`], as long as its timestamp can still be accepted (it may
    /// be one window behind the first sight and one window ahead of a replay).
    fn first_sight(&self, signature: &str, now_seconds: i64) -> bool {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let window = i64::try_from(SIGNATURE_WINDOW.as_secs() * 2).unwrap_or(i64::MAX);
        seen.retain(|_, at| now_seconds.saturating_sub(*at) <= window);
        match seen.entry(signature.to_owned()) {
            std::collections::btree_map::Entry::Occupied(_) => false,
            std::collections::btree_map::Entry::Vacant(entry) => {
                entry.insert(now_seconds);
                true
            }
        }
    }
}

/// Is the URL's host this machine (`localhost`, `127.0.0.0/8`, `::1`)?
fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let address = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || address
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// The `v0=` signature Slack sends for `body` at `timestamp` (Unix seconds, as sent).
fn signature(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    // INVARIANT (hmac-any-key): HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        unreachable!("HMAC accepts every key length")
    };
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut hex = String::with_capacity(3 + digest.len() * 2);
    hex.push_str("v0=");
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// Why an interaction was refused before anything was looked at.
#[derive(Debug, PartialEq, Eq)]
enum Unsigned {
    /// No or a wrong signature.
    Signature,
    /// A timestamp missing or more than [`SIGNATURE_WINDOW`] from now.
    Stale,
}

/// Check Slack's signature and timestamp on a raw request body.
fn check_signature(
    secret: &[u8],
    headers: &HeaderMap,
    body: &[u8],
    now: Timestamp,
) -> Result<(), Unsigned> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let timestamp = header("x-slack-request-timestamp").ok_or(Unsigned::Stale)?;
    let sent: i64 = timestamp.parse().map_err(|_| Unsigned::Stale)?;
    // Any `i64` may be sent: the distance is taken without overflow.
    let distance = now
        .as_millis()
        .div_euclid(1_000)
        .checked_sub(sent)
        .map(i64::unsigned_abs);
    if distance.is_none_or(|distance| distance > SIGNATURE_WINDOW.as_secs()) {
        return Err(Unsigned::Stale);
    }
    let given = header("x-slack-signature").ok_or(Unsigned::Signature)?;
    let expected = signature(secret, timestamp, body);
    if subtle::ConstantTimeEq::ct_eq(given.as_bytes(), expected.as_bytes()).into() {
        Ok(())
    } else {
        Err(Unsigned::Signature)
    }
}

/// The routes Slack calls.
pub(crate) fn routes() -> Router<Service> {
    Router::new().route("/slack/interactions", post(interaction))
}

/// A button press: the request it names, the answer and the hash the button carried.
struct Press {
    user: String,
    channel: Option<String>,
    request_id: ApprovalId,
    decision: AnswerDecision,
    shown_hash: ActionHash,
}

/// Read a `block_actions` payload (`payload=` JSON in a form body).
fn press_of(body: &[u8]) -> Option<Press> {
    let payload = form_urlencoded::parse(body)
        .find(|(key, _)| key == "payload")
        .map(|(_, value)| value.into_owned())?;
    let payload: Value = serde_json::from_str(&payload).ok()?;
    if payload["type"] != "block_actions" {
        return None;
    }
    let action = payload["actions"].get(0)?;
    let decision = match action["action_id"].as_str()? {
        "approve" => AnswerDecision::Approve,
        "deny" => AnswerDecision::Deny,
        _ => return None,
    };
    let (request_id, hash) = action["value"].as_str()?.split_once('|')?;
    Some(Press {
        user: payload["user"]["id"].as_str()?.to_owned(),
        channel: payload["channel"]["id"].as_str().map(str::to_owned),
        request_id: ApprovalId::parse(request_id).ok()?,
        decision,
        shown_hash: ActionHash::from_stored(hash.to_owned()),
    })
}

/// A refusal of a request that claims to come from Slack: `text` as plain text (Slack shows
/// nothing of it), with `reason` kept for the request log.
fn refused(status: StatusCode, reason: &'static str, text: &'static str) -> Response {
    let mut response = (status, text).into_response();
    response
        .extensions_mut()
        .insert(crate::problem::LoggedReason(reason.to_owned()));
    response
}

/// `POST /slack/interactions`.
async fn interaction(
    State(service): State<Service>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(slack) = service.inner.slack.get().cloned() else {
        return refused(
            StatusCode::NOT_FOUND,
            "not_found",
            "Slack is not configured on this service",
        );
    };
    let now = service.inner.clock.now();
    match check_signature(&slack.signing_secret, &headers, &body, now) {
        Ok(()) => {}
        Err(Unsigned::Signature) => {
            service.inner.metrics.record_answer("slack_bad_signature");
            return refused(
                StatusCode::UNAUTHORIZED,
                "slack_bad_signature",
                "refused: the request does not carry a valid Slack signature (check the signing secret)",
            );
        }
        Err(Unsigned::Stale) => {
            service.inner.metrics.record_answer("slack_stale_timestamp");
            return refused(
                StatusCode::UNAUTHORIZED,
                "slack_stale_timestamp",
                "refused: the request's timestamp is missing or more than five minutes from now (replayed, or a clock is wrong)",
            );
        }
    }
    // A press is taken once: the same signed request again (a replay from a captured log, or
    // Slack retrying one it thinks was lost) changes nothing, even after its giver withdrew.
    let signature = headers
        .get("x-slack-signature")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if !slack.first_sight(signature, now.as_millis().div_euclid(1_000)) {
        service.inner.metrics.record_answer("slack_replayed");
        return StatusCode::OK.into_response();
    }
    let Some(press) = press_of(&body) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "refused: not a Countersign button press (`block_actions` with `approve` or `deny`)",
        );
    };
    let channel = press
        .channel
        .clone()
        .unwrap_or_else(|| slack.channel.clone());
    let Some(approver) = slack.users.get(&press.user).cloned() else {
        service.inner.metrics.record_answer("slack_unmapped_user");
        let text = format!(
            "Countersign did not record your answer to {}: your Slack account ({}) is not mapped to an approver. Ask the operator to add it to the Slack users file.",
            press.request_id, press.user
        );
        tell(slack, channel, press.user, text);
        return StatusCode::OK.into_response();
    };
    let answer = RecordAnswer {
        request_id: press.request_id.clone(),
        decision: Ok(press.decision),
        approver: Credential::Verified {
            id: approver,
            groups: Vec::new(),
            authentication: Authentication::SlackSignature,
        },
        channel: Channel::Slack,
        shown_hash: Some(press.shown_hash),
        note: None,
    };
    let store = match service.store().await {
        Ok(store) => store,
        Err(problem) => return problem.into_response(),
    };
    let answered = countersign::control::submit_answer(store.as_ref(), answer, now).await;
    match answered {
        Ok(record) => {
            service.inner.metrics.record_answer(record.state.as_str());
            StatusCode::OK.into_response()
        }
        Err(error) => {
            service.inner.metrics.record_answer(error.reason());
            let text = format!("Countersign refused your answer: {error}");
            tell(slack, channel, press.user, text);
            StatusCode::OK.into_response()
        }
    }
}

fn http_client(trust: &countersign_http::Trust) -> Result<reqwest::Client, SlackConfigError> {
    countersign_http::client(trust).map_err(|error| SlackConfigError::HttpClient(error.to_string()))
}

/// Tell one user, in a message only they see (`chat.postEphemeral`), why their press did not
/// count. Sent in the background: Slack wants its answer to a press within three seconds.
fn tell(slack: Arc<SlackConfig>, channel: String, user: String, text: String) {
    tokio::spawn(async move {
        let _ = api_call(
            &slack,
            "chat.postEphemeral",
            json!({"channel": channel, "user": user, "text": text}),
        )
        .await;
    });
}

/// Call one Web API method; its JSON answer when Slack says `ok`, otherwise why not (never
/// the token).
async fn api_call(slack: &SlackConfig, method: &str, body: Value) -> Result<Value, String> {
    let sent = slack
        .client
        .post(format!("{}/{method}", slack.api_url))
        .timeout(Duration::from_secs(10))
        .bearer_auth(&slack.bot_token)
        .header("content-type", "application/json; charset=utf-8")
        .body(body.to_string())
        .send()
        .await
        .map_err(
            |error| match countersign_http::tls_failure(&error, &slack.trust) {
                Some(failure) => {
                    crate::webhook::tls_refusal(&slack.api_url, &failure, &slack.trust)
                }
                None => format!("cannot reach Slack: {}", crate::webhook::root_cause(error)),
            },
        )?;
    let status = sent.status();
    let text = sent
        .text()
        .await
        .map_err(|error| format!("cannot read Slack's answer: {}", error.without_url()))?;
    let answer: Value = serde_json::from_str(&text)
        .map_err(|_| format!("Slack answered HTTP {} without JSON", status.as_u16()))?;
    if answer["ok"] == true {
        Ok(answer)
    } else {
        Err(format!(
            "Slack refused {method}: {}",
            answer["error"].as_str().unwrap_or("no error given")
        ))
    }
}

/// Deliver one event to Slack: post the request's message, or update it. `Err` is why the
/// attempt failed (retried like a webhook's).
pub(crate) async fn deliver(
    service: &Service,
    store: &dyn Store,
    held: &ClaimedDelivery,
) -> Result<Settlement, String> {
    let Some(slack) = service.inner.slack.get().cloned() else {
        return Err("Slack is not configured on this service".to_owned());
    };
    // Slack shows requests to approvers; an event about the log (`log.checkpoint`) is for
    // webhooks, and Slack has nothing to post for it.
    let Some(request_id) = &held.delivery.request_id else {
        return Ok(Settlement::Delivered { reference: None });
    };
    let record = store
        .approval(request_id)
        .await
        .map_err(|error| format!("cannot read the request: {error}"))?
        .ok_or_else(|| format!("request {request_id} is gone"))?;
    let now = service.inner.clock.now();
    let (text, blocks) = message::blocks(&record, now);
    // One message per request, whatever the event (a redelivered `approval.opened` too): the
    // message posted earlier, if any, is updated; a new one is posted only while someone can
    // still answer, so a request that ended before Slack heard of it (Slack configured later,
    // or down meanwhile) is not posted at all.
    let earlier = store
        .delivery_reference(&record.id, ENDPOINT)
        .await
        .map_err(|error| format!("cannot read the message's reference: {error}"))?;
    let answerable =
        record.state == countersign::ApprovalState::Pending && !record.is_expired_at(now);
    if earlier.is_none() && !answerable {
        return Ok(Settlement::Delivered { reference: None });
    }
    match earlier
        .as_deref()
        .and_then(|reference| reference.split_once('/'))
    {
        Some((channel, ts)) => {
            api_call(
                &slack,
                "chat.update",
                json!({"channel": channel, "ts": ts, "text": text, "blocks": blocks}),
            )
            .await?;
            // The message this delivery updated: a redelivered opening keeps the reference
            // every later event finds the message by.
            Ok(Settlement::Delivered { reference: earlier })
        }
        None => {
            let answer = api_call(
                &slack,
                "chat.postMessage",
                json!({"channel": slack.channel, "text": text, "blocks": blocks}),
            )
            .await?;
            let channel = answer["channel"].as_str().unwrap_or(&slack.channel);
            let ts = answer["ts"]
                .as_str()
                .ok_or_else(|| "Slack's chat.postMessage answer has no `ts`".to_owned())?;
            Ok(Settlement::Delivered {
                reference: Some(format!("{channel}/{ts}")),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slack's published example (the page named in the module docs).
    #[test]
    fn signatures_reproduce_slacks_published_example() {
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            signature(b"8f742231b10e8888abcd99yyyzzz85a5", "1531420618", body),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    /// Any timestamp a caller sends is judged without overflow (found by a first-time user:
    /// `-9223372036854775807` panicked), and a request is taken once.
    #[test]
    fn extreme_timestamps_are_stale_and_a_press_is_taken_once() {
        let now = Timestamp::from_millis(1_700_000_000_000);
        for sent in [i64::MIN, i64::MIN + 1, -9_223_372_036_854_775_807, i64::MAX] {
            let mut headers = HeaderMap::new();
            headers.insert(
                "x-slack-request-timestamp",
                sent.to_string().parse().expect("a header value"),
            );
            headers.insert(
                "x-slack-signature",
                "v0=00".parse().expect("a header value"),
            );
            assert_eq!(
                check_signature(b"secret", &headers, b"payload=x", now),
                Err(Unsigned::Stale),
                "{sent}"
            );
        }
        let slack = SlackConfig::new(DEFAULT_API_URL, "xoxb-1", "secret", "C1", BTreeMap::new())
            .expect("a configuration");
        assert!(slack.first_sight("v0=aa", 1_000));
        assert!(!slack.first_sight("v0=aa", 1_200), "a replay");
        assert!(
            !slack.clone().first_sight("v0=aa", 1_500),
            "shared by clones"
        );
        assert!(slack.first_sight("v0=bb", 1_500));
        // Forgotten once no timestamp it could carry is accepted any more.
        assert!(slack.first_sight("v0=aa", 1_000 + 601));
    }

    /// The bot token never crosses the network in the clear, and the URL carries no credential.
    #[test]
    fn the_web_api_url_is_https_or_loopback_and_carries_no_credential() {
        let config = |url: &str| SlackConfig::new(url, "xoxb-1", "secret", "C1", BTreeMap::new());
        for fine in [
            "https://slack.com/api",
            "http://127.0.0.1:8790/api",
            "http://localhost:8790/api",
            "http://[::1]:8790/api",
        ] {
            assert!(config(fine).is_ok(), "{fine}");
        }
        for (refused, said) in [
            ("http://slack.example.com/api", "unencrypted"),
            ("http://10.1.2.3:8790/api", "unencrypted"),
            (
                "https://user:pw@slack.com/api",
                "must not carry credentials",
            ),
            (
                "https://slack.com/api?token=x",
                "must not carry credentials",
            ),
        ] {
            let error = config(refused).expect_err(refused).to_string();
            assert!(error.contains(said), "{refused}: {error}");
            assert!(!error.contains("pw@"), "{error}");
        }
    }

    #[test]
    fn users_files_map_slack_ids_to_approvers() {
        let users = SlackConfig::parse_users(
            "# who answers from Slack\nU024BE7LH: human:alice\n\nW012A3CDE : human:bob\n",
            "users.txt",
        )
        .expect("a users file");
        assert_eq!(
            users.get("U024BE7LH").map(String::as_str),
            Some("human:alice")
        );
        assert_eq!(
            users.get("W012A3CDE").map(String::as_str),
            Some("human:bob")
        );
        for (text, said) in [
            ("U1", "has no `:`"),
            ("U1 human:alice", "holds ` `"),
            ("U_ALICE: human:alice", "holds `_`"),
            (": human:alice", "is empty"),
            ("U1: human:ali ce", "is not an approver id"),
            ("U1:", "is not an approver id"),
            ("U1: human:bob\nU1: human:alice", "is mapped twice"),
        ] {
            let lines = text.lines().count() + 1;
            match SlackConfig::parse_users(&format!("# first\n{text}"), "users.txt") {
                Err(error @ SlackConfigError::Users { line, .. }) if line == lines => {
                    let message = error.to_string();
                    assert!(message.contains(said), "{text}: {message}");
                    assert!(
                        message.starts_with(&format!("`users.txt` line {lines}: ")),
                        "{message}"
                    );
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
