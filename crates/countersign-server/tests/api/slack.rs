//! Slack (issue #17) against a local fake of Slack's Web API that the test runs: a message per
//! request with buttons bound to its id and hash; presses with a bad signature, an old
//! timestamp, an unmapped or an unentitled user are each refused with nothing recorded but the
//! refusal; a quorum answered by two Slack users; an expired request's message.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::Path;
use axum::http::HeaderMap;
use countersign::outbox::EventKind;
use countersign::{ActionHash, ApprovalId, ApprovalState, Clock};
use countersign_server::Notifications;
use countersign_server::slack::SlackConfig;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};

use crate::api::support::{Backend, Harness, Options};

const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const BOT_TOKEN: &str = "xoxb-test-token";
const CHANNEL: &str = "C0COUNTERSIGN";

/// One call the fake Web API got.
#[derive(Clone, Debug)]
struct Call {
    method: String,
    body: Value,
}

/// The fake: records every call, answers like Slack (`ok`, a channel and a `ts`).
#[derive(Clone, Default)]
struct FakeSlack {
    calls: Arc<Mutex<Vec<Call>>>,
}

impl FakeSlack {
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("an address");
        let fake = self.clone();
        let app = axum::Router::new().route(
            "/api/{method}",
            axum::routing::post(
                move |Path(method): Path<String>, headers: HeaderMap, body: String| {
                    let fake = fake.clone();
                    async move { axum::Json(fake.take(method, &headers, &body)) }
                },
            ),
        );
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}/api")
    }

    fn take(&self, method: String, headers: &HeaderMap, body: &str) -> Value {
        let authorized = headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            == Some(&format!("Bearer {BOT_TOKEN}"));
        if !authorized {
            return json!({"ok": false, "error": "not_authed"});
        }
        let body: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let mut calls = self.calls.lock().expect("the log");
        calls.push(Call {
            method: method.clone(),
            body: body.clone(),
        });
        match method.as_str() {
            "chat.postMessage" => json!({
                "ok": true,
                "channel": body["channel"],
                "ts": format!("1700000000.{:06}", calls.len()),
            }),
            "chat.update" | "chat.postEphemeral" => json!({"ok": true}),
            _ => json!({"ok": false, "error": "unknown_method"}),
        }
    }

    fn calls(&self, method: &str) -> Vec<Value> {
        self.calls
            .lock()
            .expect("the log")
            .iter()
            .filter(|call| call.method == method)
            .map(|call| call.body.clone())
            .collect()
    }

    /// Wait (up to 20 s) for the `count`th call of `method`, and return it.
    async fn wait_for(&self, method: &str, count: usize) -> Value {
        for _ in 0..400 {
            if let Some(call) = self.calls(method).get(count - 1) {
                return call.clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "Slack never got {method} #{count}: {:#?}",
            self.calls.lock().expect("the log")
        );
    }
}

async fn harness(case: &str) -> (Harness, FakeSlack) {
    let fake = FakeSlack::default();
    let api = fake.start().await;
    let users = SlackConfig::parse_users(
        "UALICE: human:alice\nUBOB: human:bob\nUSAM: human:sam\n",
        "users",
    )
    .expect("users");
    let slack = SlackConfig::new(&api, BOT_TOKEN, SIGNING_SECRET, CHANNEL, users).expect("slack");
    let harness = Harness::start(
        Backend::Sqlite,
        case,
        Options {
            notifications: Some(Notifications {
                tick: Duration::from_millis(25),
                timeout: Duration::from_secs(2),
                ..Notifications::default()
            }),
            slack: Some(slack),
            ..Options::default()
        },
    )
    .await;
    (harness, fake)
}

/// What every Slack test starts from: a fresh harness, one request asked for `action` with
/// `payment_id`, its Slack message once posted, and the value its buttons carry.
struct Asked {
    harness: Harness,
    fake: FakeSlack,
    id: ApprovalId,
    hash: ActionHash,
    posted: Value,
    value: String,
}

async fn asked(case: &str, action: &str, payment_id: &str) -> Asked {
    let (harness, fake) = harness(case).await;
    let (id, hash) = harness.ask(action, json!({"payment_id": payment_id})).await;
    let posted = fake.wait_for("chat.postMessage", 1).await;
    let value = button_value(&id, &hash);
    Asked {
        harness,
        fake,
        id,
        hash,
        posted,
        value,
    }
}

/// Slack's `v0` signature, written here from Slack's documentation (not with the service's
/// code).
fn sign(secret: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("any key");
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    let digest = mac.finalize().into_bytes();
    format!(
        "v0={}",
        digest
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>()
    )
}

/// Press a button as Slack would post it: a form body with a `block_actions` payload.
async fn press(
    harness: &Harness,
    user: &str,
    action: &str,
    value: &str,
    secret: &str,
    timestamp: i64,
) -> u16 {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "username": user.to_lowercase()},
        "channel": {"id": CHANNEL},
        "actions": [{"action_id": action, "block_id": "countersign", "value": value, "type": "button"}],
    });
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish();
    harness
        .client
        .post(harness.url("/slack/interactions"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header("x-slack-signature", sign(secret, timestamp, &body))
        .body(body)
        .send()
        .await
        .expect("the service answers")
        .status()
        .as_u16()
}

fn now_seconds(harness: &Harness) -> i64 {
    harness.clock.now().as_millis() / 1000
}

fn button_value(id: &ApprovalId, hash: &ActionHash) -> String {
    format!("{id}|{}", hash.as_str())
}

/// The `actions` block of a message's blocks, if it has one.
fn buttons(blocks: &Value) -> Option<Value> {
    blocks
        .as_array()?
        .iter()
        .find(|block| block["type"] == "actions")
        .cloned()
}

/// Every text in a message's blocks, joined.
fn texts(blocks: &Value) -> String {
    let mut all = String::new();
    for block in blocks.as_array().into_iter().flatten() {
        if let Some(text) = block["text"]["text"].as_str() {
            all.push_str(text);
            all.push('\n');
        }
        for element in block["elements"].as_array().into_iter().flatten() {
            if let Some(text) = element["text"].as_str() {
                all.push_str(text);
                all.push('\n');
            }
        }
    }
    all
}

/// What a refused press must leave: the request pending, no answer event, and `receipts`
/// receipts.
async fn assert_unchanged(harness: &Harness, id: &ApprovalId, receipts: usize) {
    let record = harness
        .store
        .approval(id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(record.state, ApprovalState::Pending);
    assert!(record.answers.is_empty());
    assert_eq!(
        harness
            .store
            .receipts(0, 100)
            .await
            .expect("receipts")
            .len(),
        receipts
    );
    let events = harness.store.events(0, 100).await.expect("events");
    assert!(
        events
            .iter()
            .all(|stored| stored.event.kind != EventKind::Answered),
        "{events:?}"
    );
}

#[tokio::test]
async fn each_request_gets_one_message_with_buttons_bound_to_its_id_and_hash() {
    let Asked {
        harness,
        id,
        hash,
        posted,
        ..
    } = asked("slack_message", "finance.small", "pi_s\u{200b}1").await;
    assert_eq!(posted["channel"], CHANNEL);
    let blocks = &posted["blocks"];
    let buttons = buttons(blocks).expect("buttons while pending");
    let elements = buttons["elements"].as_array().expect("two buttons");
    assert_eq!(elements.len(), 2);
    assert_eq!(elements[0]["action_id"], "approve");
    assert_eq!(elements[1]["action_id"], "deny");
    assert!(
        elements
            .iter()
            .all(|button| button["value"] == button_value(&id, &hash).as_str())
    );
    let text = texts(blocks);
    // The shared rendering, as plain text: the zero-width space is shown, not hidden.
    let shown = countersign::display::render(
        &harness
            .store
            .approval(&id)
            .await
            .expect("read")
            .expect("exists"),
        None,
    )
    .to_text();
    assert!(text.contains(&shown), "{text}");
    assert!(text.contains("pi_s\\u{200b}1"), "{text}");
    assert!(
        text.contains(&hash.as_str()[..19]),
        "the short hash: {text}"
    );
    assert!(text.contains("0 of 1 approval"), "{text}");
    assert!(
        blocks
            .as_array()
            .expect("blocks")
            .iter()
            .filter(|block| block["type"] == "section")
            .all(|block| block["text"]["type"] == "plain_text"),
        "no Slack markup is interpreted"
    );
    harness.stop().await;
}

#[tokio::test]
async fn refused_presses_record_nothing_but_the_refusal() {
    let Asked {
        harness,
        fake,
        id,
        value,
        ..
    } = asked("slack_refusals", "finance.small", "pi_s2").await;
    let receipts = harness
        .store
        .receipts(0, 100)
        .await
        .expect("receipts")
        .len();
    let now = now_seconds(&harness);

    // A bad signature, and a correctly signed press six minutes old: 401, nothing recorded.
    assert_eq!(
        press(&harness, "UALICE", "approve", &value, "wrong-secret", now).await,
        401
    );
    assert_unchanged(&harness, &id, receipts).await;
    assert_eq!(
        press(
            &harness,
            "UALICE",
            "approve",
            &value,
            SIGNING_SECRET,
            now - 360
        )
        .await,
        401
    );
    assert_unchanged(&harness, &id, receipts).await;

    // A Slack user the operator did not map: told so, nothing recorded.
    assert_eq!(
        press(&harness, "UMALLORY", "approve", &value, SIGNING_SECRET, now).await,
        200
    );
    let told = fake.wait_for("chat.postEphemeral", 1).await;
    assert_eq!(told["user"], "UMALLORY");
    assert!(
        told["text"].as_str().unwrap_or("").contains("not mapped"),
        "{told}"
    );
    assert_unchanged(&harness, &id, receipts).await;

    // A mapped user the request's rule does not entitle (support, not finance): the kernel
    // refuses and records only its refusal.
    assert_eq!(
        press(&harness, "USAM", "approve", &value, SIGNING_SECRET, now).await,
        200
    );
    let told = fake.wait_for("chat.postEphemeral", 2).await;
    assert_eq!(told["user"], "USAM");
    assert!(
        told["text"].as_str().unwrap_or("").contains("refused"),
        "{told}"
    );
    assert_unchanged(&harness, &id, receipts + 1).await;
    let refusal = harness
        .store
        .receipts(0, 100)
        .await
        .expect("receipts")
        .pop()
        .expect("the refusal")
        .to_receipt()
        .expect("parses");
    assert_eq!(refusal.reason.as_deref(), Some("not_entitled"));
    assert_eq!(refusal.approver.as_deref(), Some("human:sam"));
    assert_eq!(refusal.channel.as_deref(), Some("slack"));
    // Nobody's press reached the message: it still has its buttons and no update was sent.
    assert!(fake.calls("chat.update").is_empty());
    harness.stop().await;
}

#[tokio::test]
async fn a_quorum_is_answered_by_two_slack_users() {
    let Asked {
        harness,
        fake,
        id,
        value,
        ..
    } = asked("slack_quorum", "finance.refund", "pi_s3").await;
    let arguments = json!({"payment_id": "pi_s3"});
    let now = now_seconds(&harness);

    assert_eq!(
        press(&harness, "UALICE", "approve", &value, SIGNING_SECRET, now).await,
        200
    );
    let first = fake.wait_for("chat.update", 1).await;
    assert_eq!(first["channel"], CHANNEL);
    assert_eq!(first["ts"], "1700000000.000001");
    assert!(texts(&first["blocks"]).contains("1 of 2 approvals so far: human:alice"));
    assert!(
        buttons(&first["blocks"]).is_some(),
        "still waiting for a second yes"
    );

    assert_eq!(
        press(&harness, "UBOB", "approve", &value, SIGNING_SECRET, now).await,
        200
    );
    let second = fake.wait_for("chat.update", 2).await;
    let text = texts(&second["blocks"]);
    assert!(text.contains("Approved by human:bob at "), "{text}");
    assert!(
        text.contains("2 of 2 approvals so far: human:alice, human:bob"),
        "{text}"
    );
    assert!(
        buttons(&second["blocks"]).is_none(),
        "no buttons once decided"
    );

    let record = harness
        .store
        .approval(&id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(record.state, ApprovalState::Granted);
    let by: BTreeMap<String, (String, String)> = record
        .answers
        .iter()
        .map(|answer| {
            (
                answer.approver.id.to_string(),
                (
                    answer.approver.authentication.as_str().to_owned(),
                    answer.approver.channel.as_str().into_owned(),
                ),
            )
        })
        .collect();
    let slack = ("slack_signature".to_owned(), "slack".to_owned());
    assert_eq!(by.get("human:alice"), Some(&slack));
    assert_eq!(by.get("human:bob"), Some(&slack));
    harness
        .call("finance.refund", arguments, false)
        .await
        .expect("the granted call runs");
    let third = fake.wait_for("chat.update", 3).await;
    assert!(texts(&third["blocks"]).contains("used by attempt att_"));
    assert_eq!(
        fake.calls("chat.postMessage").len(),
        1,
        "one message per request"
    );
    harness.stop().await;
}

#[tokio::test]
async fn an_expired_requests_message_says_so() {
    let Asked {
        harness,
        fake,
        id,
        hash,
        ..
    } = asked("slack_expired", "finance.small", "pi_s4").await;
    harness.advance(Duration::from_secs(15 * 60));
    let update = fake.wait_for("chat.update", 1).await;
    let text = texts(&update["blocks"]);
    assert!(text.contains("Expired at "), "{text}");
    assert!(text.contains("nothing was authorized"), "{text}");
    assert!(buttons(&update["blocks"]).is_none());
    // A press on the old message now authorizes nothing.
    let now = now_seconds(&harness);
    assert_eq!(
        press(
            &harness,
            "UALICE",
            "approve",
            &button_value(&id, &hash),
            SIGNING_SECRET,
            now
        )
        .await,
        200
    );
    let told = fake.wait_for("chat.postEphemeral", 1).await;
    assert!(
        told["text"].as_str().unwrap_or("").contains("expired"),
        "{told}"
    );
    let record = harness
        .store
        .approval(&id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(record.state, ApprovalState::Expired);
    harness.stop().await;
}

/// A redelivered `approval.opened` (`countersign webhooks --redeliver`) updates the request's
/// one message instead of posting a second (found by a first-time user); once the request is
/// decided, the header no longer asks for an approval.
#[tokio::test]
async fn a_redelivered_opening_updates_the_one_message() {
    let Asked {
        harness,
        fake,
        id,
        hash,
        posted,
        ..
    } = asked("slack_redelivered", "finance.small", "pi_s5").await;
    assert!(
        texts(&posted["blocks"]).contains("approval needed"),
        "{posted}"
    );
    let opened = harness
        .store
        .deliveries(None, 100)
        .await
        .expect("the deliveries")
        .into_iter()
        .find(|delivery| {
            delivery.endpoint == "slack"
                && delivery.kind == EventKind::Opened
                && delivery.request_id.as_ref() == Some(&id)
        })
        .expect("the opening's delivery to Slack");
    harness
        .store
        .redeliver(opened.id, harness.clock.now())
        .await
        .expect("redeliver")
        .expect("the delivery exists");
    let update = fake.wait_for("chat.update", 1).await;
    assert_eq!(update["ts"], posted_ts(&fake));
    assert_eq!(fake.calls("chat.postMessage").len(), 1, "a second message");
    // Decided: the message says so in its header too.
    let now = now_seconds(&harness);
    let value = button_value(&id, &hash);
    assert_eq!(
        press(&harness, "UALICE", "deny", &value, SIGNING_SECRET, now).await,
        200
    );
    let update = fake.wait_for("chat.update", 2).await;
    let text = texts(&update["blocks"]);
    assert!(
        text.contains("approval request denied") && !text.contains("approval needed"),
        "{text}"
    );
    assert_eq!(fake.calls("chat.postMessage").len(), 1, "a second message");
    harness.stop().await;
}

/// A press is taken once: the same signed request sent again (a replay from a captured log)
/// does not bring back a yes its giver withdrew (found by a first-time user).
#[tokio::test]
async fn a_replayed_press_is_taken_once() {
    let Asked {
        harness, id, value, ..
    } = asked("slack_replayed", "finance.refund", "pi_s6").await;
    let now = now_seconds(&harness);
    assert_eq!(
        press(&harness, "UALICE", "approve", &value, SIGNING_SECRET, now).await,
        200
    );
    let answers = |record: countersign::ApprovalRecord| record.answers.len();
    let read = || async {
        harness
            .store
            .approval(&id)
            .await
            .expect("read")
            .expect("exists")
    };
    assert_eq!(answers(read().await), 1);
    let alice = harness.token("human:alice", &["finance"]);
    let (status, body) = harness
        .post(
            &format!("/api/v1/approvals/{id}/revoke"),
            Some(&alice),
            json!({"note": "changed my mind"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answers(read().await), 0, "withdrawn");
    assert_eq!(
        press(&harness, "UALICE", "approve", &value, SIGNING_SECRET, now).await,
        200
    );
    assert_eq!(answers(read().await), 0, "the replay changed nothing");
    harness.stop().await;
}

/// The `ts` of the one message posted.
fn posted_ts(fake: &FakeSlack) -> String {
    let calls = fake.calls.lock().expect("the log");
    assert_eq!(
        calls
            .iter()
            .filter(|call| call.method == "chat.postMessage")
            .count(),
        1
    );
    // The fake numbers each `ts` by the call's place in its log.
    let place = calls
        .iter()
        .position(|call| call.method == "chat.postMessage")
        .expect("posted")
        + 1;
    format!("1700000000.{place:06}")
}

/// Issue #32: Slack's Web API over HTTPS, its certificate checked against the configured CA
/// (a local CA made with `openssl`), through the one client constructor.
#[tokio::test]
async fn messages_reach_an_https_web_api_through_the_configured_ca() {
    use countersign_http::testing::{LocalCa, server_config, terminate_tls};
    let folder = tempfile::tempdir().expect("a folder");
    let ca = LocalCa::new(folder.path(), "ca").expect("a CA (needs the openssl command)");
    let leaf = ca
        .leaf("slack", &["DNS:localhost", "IP:127.0.0.1"])
        .expect("a leaf");
    let fake = FakeSlack::default();
    let plain = fake.start().await;
    let plain = plain
        .trim_start_matches("http://")
        .trim_end_matches("/api")
        .parse()
        .expect("the fake's address");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("an address").port();
    let terminating = terminate_tls(listener, server_config(&leaf).expect("TLS"), plain);
    let users = SlackConfig::parse_users("UALICE: human:alice\n", "users").expect("users");
    let slack = SlackConfig::new(
        &format!("https://localhost:{port}/api"),
        BOT_TOKEN,
        SIGNING_SECRET,
        CHANNEL,
        users,
    )
    .expect("slack")
    .with_trust(countersign_http::Trust::pem_file(&ca.certificate()).expect("the CA"))
    .expect("a client");
    let harness = Harness::start(
        Backend::Sqlite,
        "slack_https",
        Options {
            notifications: Some(Notifications {
                tick: Duration::from_millis(25),
                timeout: Duration::from_secs(2),
                ..Notifications::default()
            }),
            slack: Some(slack),
            ..Options::default()
        },
    )
    .await;
    let (id, _) = harness
        .ask("finance.small", json!({"payment_id": "pi_tls"}))
        .await;
    let posted = fake.wait_for("chat.postMessage", 1).await;
    assert_eq!(posted["channel"], CHANNEL);
    assert!(posted.to_string().contains(id.as_str()), "{posted}");
    harness.stop().await;
    terminating.abort();
}
