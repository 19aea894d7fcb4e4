//! Webhooks through the real binary (issue #17): a `countersign serve` killed with SIGKILL in
//! the middle of a delivery loses nothing — the next `serve` on the store sends it again with
//! the same `webhook-id`, and the event written while no `serve` ran — and `countersign
//! webhooks` lists the deliveries and sends one again with `--redeliver`. Signed checkpoints
//! (issue #23) reach the webhooks as `log.checkpoint` events, from `countersign checkpoint` and
//! from `serve --checkpoint-key`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::Sandbox;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One POST the receiver read: its `webhook-id` and body.
#[derive(Clone, Debug)]
struct Received {
    id: String,
    body: String,
    answered: bool,
}

/// A plain-HTTP receiver on its own thread: with `hang_first`, the first request it reads is
/// never answered (the connection is held open, as a receiver that hangs); every other one gets
/// `200`.
struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    fn start(hang_first: bool) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("an address");
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let log = Arc::clone(&got);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().flatten() {
                let Some((id, body)) = read_request(&stream) else {
                    continue;
                };
                let mut log = log.lock().expect("the log");
                let answered = !hang_first || !log.is_empty();
                log.push(Received { id, body, answered });
                drop(log);
                if answered {
                    let mut stream = stream;
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                } else {
                    held.push(stream);
                }
            }
        });
        Receiver { addr, got }
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().expect("the log").clone()
    }

    fn wait_for(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            let got = self.got();
            if done(&got) {
                return got;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the receiver never got {what}: {:#?}", self.got());
    }
}

/// Read one HTTP request: its `webhook-id` header and its body.
fn read_request(stream: &TcpStream) -> Option<(String, String)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut id = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "webhook-id" => id = value.trim().to_owned(),
                "content-length" => length = value.trim().parse().ok()?,
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((id, String::from_utf8(body).ok()?))
}

/// Start `countersign serve` delivering to `receiver`, and wait until it is up.
fn serve(sandbox: &Sandbox, receiver: &Receiver) -> Child {
    serve_with(
        sandbox,
        &[
            "--webhook",
            &format!("http://{}/hook", receiver.addr),
            "--webhook-secret-file",
            "hook.secret",
        ],
    )
}

/// Start `countersign serve --listen 127.0.0.1:0 --webhook-timeout 1s ARGS`, and wait until it
/// is up with one webhook.
fn serve_with(sandbox: &Sandbox, args: &[&str]) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--webhook-timeout",
            "1s",
        ])
        .args(args)
        .current_dir(sandbox.work())
        .env_remove("COUNTERSIGN_POLICY")
        .env_remove("COUNTERSIGN_STORE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start countersign serve");
    let mut started = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut started)
        .expect("read the startup line");
    assert!(started.contains(", 1 webhook)"), "{started:?}");
    child
}

fn event_type(received: &Received) -> String {
    let body: serde_json::Value = serde_json::from_str(&received.body).expect("a JSON body");
    body["type"].as_str().unwrap_or("").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_killed_mid_delivery_loses_nothing_and_redelivers_with_the_same_id() {
    let sandbox = Sandbox::new();
    sandbox.write("hook.secret", &format!("{SECRET}\n"));
    let agent = sandbox.agent();
    let first = agent.request_approval("pi_k1", 75_000).await;
    let receiver = Receiver::start(true);

    // The receiver takes the first delivery and never answers; serve is killed mid-send.
    let mut running = serve(&sandbox, &receiver);
    let got = receiver.wait_for("the first attempt", |got| !got.is_empty());
    running.kill().expect("SIGKILL serve");
    running.wait().expect("reap serve");
    let hung = got[0].clone();
    assert!(hung.body.contains(first.as_str()), "{hung:?}");
    assert_eq!(event_type(&hung), "approval.opened");

    // While no serve runs, another request opens: its event waits in the store.
    let second = agent.request_approval("pi_k2", 80_000).await;

    // The next serve sends both once the dead one's lease lapses: the first again, under the
    // same webhook-id.
    let mut running = serve(&sandbox, &receiver);
    let got = receiver.wait_for("both events, answered", |got| {
        got.iter().filter(|received| received.answered).count() >= 2
    });
    let answered: Vec<&Received> = got.iter().filter(|received| received.answered).collect();
    let again = answered
        .iter()
        .find(|received| received.body.contains(first.as_str()))
        .expect("the first request's event again");
    assert_eq!(again.id, hung.id, "a redelivery keeps its webhook-id");
    assert_eq!(again.body, hung.body, "and its body");
    assert!(
        answered
            .iter()
            .any(|received| received.body.contains(second.as_str())),
        "the event written while serve was down: {got:#?}"
    );
    running.kill().expect("stop serve");
    running.wait().expect("reap serve");

    // `countersign webhooks` lists both, delivered.
    let listed = sandbox.run(&["webhooks", "--json"]);
    assert_eq!(listed.status, Some(0), "{listed:?}");
    let deliveries: Vec<serde_json::Value> =
        serde_json::from_str(&listed.stdout).expect("a JSON list");
    assert_eq!(deliveries.len(), 2, "{deliveries:#?}");
    assert!(
        deliveries
            .iter()
            .all(|delivery| delivery["state"] == "delivered"),
        "{deliveries:#?}"
    );
    let later = deliveries
        .iter()
        .find(|delivery| delivery["request_id"] == second.as_str())
        .expect("the second request's delivery");
    assert_eq!(later["attempts"], 1, "{later}");
    let redelivered = deliveries
        .iter()
        .find(|delivery| delivery["request_id"] == first.as_str())
        .expect("the first request's delivery");
    assert_eq!(redelivered["event_id"], hung.id.as_str());
    let id = redelivered["id"].as_u64().expect("an id").to_string();

    // `--redeliver ID` makes it due again; the next serve sends it, same id.
    let run = sandbox.run(&["webhooks", "--redeliver", &id]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert!(run.stdout.contains("is due again"), "{run:?}");
    let mut running = serve(&sandbox, &receiver);
    let got = receiver.wait_for("the redelivery", |got| {
        got.iter()
            .filter(|received| received.answered && received.id == hung.id)
            .count()
            == 2
    });
    running.kill().expect("stop serve");
    running.wait().expect("reap serve");
    assert_eq!(
        got.iter().filter(|received| received.id == hung.id).count(),
        3,
        "sent three times in all, always under one id: {got:#?}"
    );
    let unknown = sandbox.run(&["webhooks", "--redeliver", "999"]);
    assert_eq!(unknown.status, Some(1));
    assert_eq!(
        unknown.one_line_error(),
        "there is no delivery 999: list them with `countersign webhooks`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notify_config_file_wires_the_webhooks() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.work().join("conf")).expect("a folder");
    sandbox.write("conf/hook.secret", &format!("{SECRET}\n"));
    let receiver = Receiver::start(false);
    sandbox.write(
        "conf/notify.yaml",
        &format!(
            "webhooks:\n  - url: http://{}/hook\n    secret_file: hook.secret\n",
            receiver.addr
        ),
    );
    let request = sandbox.agent().request_approval("pi_c1", 75_000).await;
    let mut running = serve_with(&sandbox, &["--notify-config", "conf/notify.yaml"]);
    let got = receiver.wait_for("the opening", |got| !got.is_empty());
    running.kill().expect("stop serve");
    running.wait().expect("reap serve");
    assert!(got[0].body.contains(request.as_str()));
    assert_eq!(event_type(&got[0]), "approval.opened");

    // Slack from the same kind of file: the service starts with it.
    sandbox.write("conf/slack.token", "xoxb-test\n");
    sandbox.write("conf/slack.secret", "8f742231b10e8888abcd99yyyzzz85a5\n");
    sandbox.write(
        "conf/slack.yaml",
        "slack:\n  channel: C0123\n  token_file: slack.token\n  signing_secret_file: slack.secret\n  users:\n    U024BE7LH: human:alice\n",
    );
    let mut running = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--notify-config",
            "conf/slack.yaml",
        ])
        .current_dir(sandbox.work())
        .env_remove("COUNTERSIGN_POLICY")
        .env_remove("COUNTERSIGN_STORE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start countersign serve");
    let mut started = String::new();
    BufReader::new(running.stdout.take().expect("stdout"))
        .read_line(&mut started)
        .expect("read the startup line");
    running.kill().expect("stop serve");
    running.wait().expect("reap serve");
    assert!(started.contains(", Slack)"), "{started:?}");

    // A misspelt key is refused, naming the file, before anything starts.
    sandbox.write(
        "conf/typo.yaml",
        "webhook:\n  - url: http://127.0.0.1:9/hook\n",
    );
    let refused = sandbox.run(&["serve", "--notify-config", "conf/typo.yaml"]);
    assert_eq!(refused.status, Some(1), "{refused:?}");
    let message = refused.one_line_error();
    assert!(
        message.starts_with("`conf/typo.yaml` is not a notify configuration:")
            && message.contains("webhook"),
        "{message}"
    );
}

/// A checkpoint made by `countersign checkpoint` reaches the webhook as a `log.checkpoint`
/// event carrying the note; `serve --checkpoint-key` then signs the log again when it grows,
/// and that checkpoint arrives too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_reach_the_webhook_from_the_command_and_from_serve() {
    let sandbox = Sandbox::new();
    sandbox.write("hook.secret", &format!("{SECRET}\n"));
    sandbox.fill_with_demo();
    let key = sandbox.work().join("log-key.pem");
    let key = key.to_str().expect("UTF-8 path");
    let run = sandbox.run(&["keygen", "--out", key]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let run = sandbox.run(&["checkpoint", "--key", key, "--out", "kept.note"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let note = std::fs::read_to_string(sandbox.work().join("kept.note")).expect("the note");

    let receiver = Receiver::start(false);
    let checkpoints = |got: &[Received]| -> Vec<serde_json::Value> {
        got.iter()
            .filter(|received| event_type(received) == "log.checkpoint")
            .map(|received| serde_json::from_str(&received.body).expect("JSON"))
            .collect()
    };
    let mut running = serve_with(
        &sandbox,
        &[
            "--webhook",
            &format!("http://{}/hook", receiver.addr),
            "--webhook-secret-file",
            "hook.secret",
            "--checkpoint-key",
            key,
            "--checkpoint-every",
            "200ms",
        ],
    );
    let got = receiver.wait_for("the kept checkpoint", |got| !checkpoints(got).is_empty());
    let first = &checkpoints(&got)[0];
    assert_eq!(first["data"]["checkpoint"], note.as_str());
    assert_eq!(first["data"]["size"], 11);

    // The log grows: serve's timer signs it and the webhook gets the new head.
    sandbox
        .agent()
        .refund("pi_cp1", 100, None)
        .await
        .expect("an allowed refund runs");
    let got = receiver.wait_for("serve's checkpoint of the grown log", |got| {
        checkpoints(got)
            .iter()
            .any(|body| body["data"]["size"] == 12)
    });
    running.kill().expect("stop serve");
    running.wait().expect("reap serve");
    let grown = checkpoints(&got)
        .into_iter()
        .find(|body| body["data"]["size"] == 12)
        .expect("the grown checkpoint");
    let grown_note = grown["data"]["checkpoint"].as_str().expect("the note");
    sandbox.write("grown.note", grown_note);
    let verified = sandbox.run(&[
        "verify",
        "--checkpoint",
        "grown.note",
        "--key",
        &format!("{key}.pub"),
    ]);
    assert_eq!(verified.status, Some(0), "{verified:?}");
    // `countersign webhooks` lists its delivery as about the log.
    let listed = sandbox.run(&["webhooks", "--json"]);
    let deliveries: Vec<serde_json::Value> =
        serde_json::from_str(&listed.stdout).expect("a JSON list");
    assert!(
        deliveries
            .iter()
            .any(|delivery| delivery["type"] == "log.checkpoint"
                && delivery["request_id"] == serde_json::Value::Null),
        "{deliveries:#?}"
    );
}

/// `serve` logs one line per request to standard error: method, path, status and the refusal's
/// reason, and never the token (found by a first-time user: it logged nothing, not even a
/// refused sign-in); `--quiet` turns it off.
#[test]
fn serve_logs_each_request_without_its_token() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let start = |extra: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .current_dir(sandbox.work())
            .env_remove("COUNTERSIGN_POLICY")
            .env_remove("COUNTERSIGN_STORE_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start countersign serve");
        let mut started = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut started)
            .expect("read the startup line");
        let addr: SocketAddr = started
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no address in {started:?}"));
        (child, addr)
    };
    let forged = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJodW1hbjptYWxsb3J5In0.c2VjcmV0LXNpZ25hdHVyZQ";
    let ask = |addr: SocketAddr| {
        let mut stream = TcpStream::connect(addr).expect("connect");
        write!(
            stream,
            "GET /api/v1/approvals?limit=5 HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {forged}\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    };
    let stop = |mut child: Child| {
        child.kill().expect("stop serve");
        let mut logged = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut logged)
            .expect("read stderr");
        child.wait().expect("reap serve");
        logged
    };

    let (child, addr) = start(&[]);
    ask(addr);
    let logged = stop(child);
    assert!(
        logged.contains("countersign serve: GET /api/v1/approvals -> 401 not_authenticated ("),
        "{logged}"
    );
    assert!(
        !logged.contains(forged) && !logged.contains("limit=5"),
        "the token or the query reached the log: {logged}"
    );

    let (child, addr) = start(&["--quiet"]);
    ask(addr);
    let logged = stop(child);
    assert!(!logged.contains("countersign serve: GET"), "{logged}");
}
