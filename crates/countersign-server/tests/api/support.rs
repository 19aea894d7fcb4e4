//! A real service on 127.0.0.1:0 over a real store (SQLite file or PostgreSQL schema), the
//! agent's `Control` on the same store, and approver tokens.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign::store::{self, Store};
use countersign::token::{self, SigningKey};
use countersign::{
    ActionHash, ActionRequest, ApprovalId, Clock, Control, ControlError, ExecutorError,
    ManualClock, Policy, Principal, StaticIdentity, SystemClock,
};
use countersign_server::{ProxySignIn, Service, ServiceConfig, SignIn, StoreSource};
use serde_json::{Value, json};

/// Which store a test runs on.
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The proxy secret the tests' proxy sends.
pub const PROXY_SECRET: &str = "proxy-secret-0123456789abcdef0123456789";

/// Options for one harness.
#[derive(Default)]
pub struct Options {
    pub proxy: bool,
    pub auditors_group: Option<&'static str>,
    pub no_sign_in: bool,
    pub oidc: Option<countersign_server::OidcSignIn>,
    /// The background task's configuration (default: the sweeper, no webhook).
    pub notifications: Option<countersign_server::Notifications>,
    /// Slack, when a test runs it (against its fake Web API).
    pub slack: Option<countersign_server::slack::SlackConfig>,
}

pub struct Harness {
    pub base: String,
    pub client: reqwest::Client,
    pub store: Arc<dyn Store>,
    pub control: Control,
    pub clock: ManualClock,
    pub key: SigningKey,
    pub executed: Arc<AtomicUsize>,
    /// The SQLite file, on SQLite.
    pub sqlite_path: Option<std::path::PathBuf>,
    _dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

fn policy_text(key: &str) -> String {
    format!(
        r#"schema: countersign.policy/v1
mode: enforce
environment: test
directory:
  human:alice: [finance]
  human:bob: [finance]
  human:sam: [support]
  human:olga: [ops]
  human:audrey: [audit]
  agent:bot: [support]
approvers:
  keys: ["{key}"]
actions:
  finance.refund:
    effect: "refund:{{payment_id}}"
    decision: approve
    approval: {{ approvers: ["group:finance"], quorum: 2, require: authenticated }}
  finance.small:
    effect: "small:{{payment_id}}"
    decision: approve
    approval: {{ approvers: ["group:finance"], require: authenticated }}
  ops.restart:
    effect: "restart:{{host}}"
    decision: approve
    approval: {{ approvers: ["group:ops"], require: authenticated }}
  support.read:
    decision: allow
"#
    )
}

/// A store on `backend`, named after `case`.
async fn open_store(backend: Backend, case: &str, dir: &std::path::Path) -> Arc<dyn Store> {
    match backend {
        Backend::Sqlite => {
            let path = dir.join("countersign.db");
            store::open_url(&format!("sqlite:{}", path.display())).expect("a SQLite store")
        }
        Backend::Postgres => {
            let base = std::env::var("COUNTERSIGN_TEST_POSTGRES_URL").expect(
                "COUNTERSIGN_TEST_POSTGRES_URL is not set: run `.ci/postgres.sh` and source what it prints",
            );
            // A fresh schema per case and run: the case name plus a random suffix.
            let suffix = ApprovalId::generate().as_str()[4..14].to_owned();
            let case: String = case.chars().take(40).collect();
            let schema = format!("serve_{case}_{suffix}");
            let joiner = if base.contains('?') { '&' } else { '?' };
            store::open_url_async(&format!("{base}{joiner}schema={schema}&max_connections=4"))
                .await
                .expect("a PostgreSQL store")
        }
    }
}

impl Harness {
    /// Time passes: the host's clock, and on PostgreSQL, which judges expiry and leases by
    /// the server's clock (issue #22), the store's too (its test offset). On SQLite the host's
    /// clock is the store's.
    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
        if self.store.backend() == "postgres" {
            let millis = i64::try_from(by.as_millis()).expect("a short duration");
            self.store
                .shift_clock_for_tests(millis)
                .expect("the store's clock moves");
        }
    }

    pub async fn start(backend: Backend, case: &str, options: Options) -> Harness {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let key = token::generate_keypair().expect("a key pair");
        let policy = Policy::from_yaml_str(&policy_text(&key.public_key().to_string()), None)
            .expect("the test policy loads");
        let store = open_store(backend, case, dir.path()).await;
        let clock = ManualClock::new(SystemClock.now());
        let control = Control::builder_shared(Arc::new(policy.clone()), Arc::clone(&store))
            .identity(StaticIdentity::new(
                Principal::new("agent:bot").expect("a principal"),
            ))
            .clock(Arc::new(clock.clone()))
            .build();
        let sign_in = if options.no_sign_in {
            SignIn::default()
        } else {
            SignIn {
                approver_keys: vec![key.public_key()],
                proxy: options.proxy.then(|| {
                    ProxySignIn::new("x-forwarded-user", "x-proxy-secret", PROXY_SECRET)
                        .expect("a proxy configuration")
                }),
                oidc: options.oidc.clone(),
            }
        };
        let mut service = Service::new(ServiceConfig {
            store: StoreSource::Open(Arc::clone(&store)),
            sign_in,
            directory: policy.directory().clone(),
            auditors_group: options.auditors_group.map(str::to_owned),
            public_url: None,
            clock: Arc::new(clock.clone()),
            policy: Some(Arc::new(policy.clone())),
        });
        if let Some(slack) = options.slack {
            service = service.with_slack(slack);
        }
        let (base, shutdown, server) =
            serve_notifying(service, options.notifications.unwrap_or_default()).await;
        Harness {
            base,
            client: countersign_http::client(&countersign_http::Trust::nothing())
                .expect("an HTTP client"),
            store,
            control,
            clock,
            key,
            executed: Arc::new(AtomicUsize::new(0)),
            sqlite_path: matches!(backend, Backend::Sqlite)
                .then(|| dir.path().join("countersign.db")),
            _dir: dir,
            shutdown: Some(shutdown),
            server: Some(server),
        }
    }

    /// A token for `subject` in `groups`, valid for an hour from the harness clock.
    pub fn token(&self, subject: &str, groups: &[&str]) -> String {
        let groups: Vec<String> = groups.iter().map(|group| (*group).to_owned()).collect();
        token::issue(
            &self.key,
            subject,
            &groups,
            Duration::from_secs(3600),
            self.clock.now(),
        )
        .expect("a token")
    }

    /// A token signed by the harness key over `subject` exactly as given, shape unchecked (as
    /// another issuer, or an older `issue`, could sign it), valid for an hour.
    pub fn hand_signed_token(&self, subject: &str) -> String {
        use base64::Engine;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let now = self.clock.now().as_millis() / 1000;
        let header = json!({"alg": "EdDSA", "typ": "JWT"});
        // A token id of the shape `approver token` issues (`tok_` and 20 base32 letters and
        // digits), here the time's decimal digits written as the letters `a` to `j`.
        let jti: String = format!("{now:020}")
            .chars()
            .map(|digit| {
                char::from(
                    b'a' + digit
                        .to_digit(10)
                        .and_then(|d| u8::try_from(d).ok())
                        .unwrap_or(0),
                )
            })
            .collect();
        let jti = format!("tok_{jti}");
        let claims = json!({"sub": subject, "iat": now, "exp": now + 3600, "jti": jti});
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = URL_SAFE_NO_PAD.encode(self.key.sign(signed.as_bytes()));
        format!("{signed}.{signature}")
    }

    /// The agent calls `action`; `fail` makes the executor fail in a way that may have run.
    pub async fn call(
        &self,
        action: &str,
        arguments: Value,
        fail: bool,
    ) -> Result<(), ControlError> {
        let executed = Arc::clone(&self.executed);
        self.control
            .execute(ActionRequest::new(action, &arguments), |_| async move {
                executed.fetch_add(1, Ordering::SeqCst);
                if fail {
                    Err(ExecutorError::may_have_run(
                        "the connection dropped after sending",
                    ))
                } else {
                    Ok(())
                }
            })
            .await
            .map(|_| ())
    }

    /// The agent asks for `action`; the request that opens.
    pub async fn ask(&self, action: &str, arguments: Value) -> (ApprovalId, ActionHash) {
        match self.call(action, arguments, false).await {
            Err(ControlError::ApprovalRequired {
                request_id,
                action_hash,
                ..
            }) => (request_id, action_hash),
            other => panic!("expected approval_required, got {other:?}"),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut request = self.client.get(self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        read(request.send().await.expect("the service answers")).await
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        let mut request = self.client.post(self.url(path)).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        read(request.send().await.expect("the service answers")).await
    }

    /// Answer `id` as the holder of `token`, echoing `hash`.
    pub async fn answer(
        &self,
        id: &ApprovalId,
        token: &str,
        decision: &str,
        hash: &ActionHash,
    ) -> (u16, Value) {
        self.post(
            &format!("/api/v1/approvals/{id}/answer"),
            Some(token),
            json!({ "decision": decision, "action_hash": hash.as_str(), "note": "checked" }),
        )
        .await
    }

    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            server
                .await
                .expect("the server task ends")
                .expect("the server ends cleanly");
        }
    }
}

/// Serve `service` on 127.0.0.1:0; its base URL, a shutdown trigger and the server task.
pub async fn serve(
    service: Service,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    serve_notifying(service, countersign_server::Notifications::default()).await
}

/// [`serve`] with this background configuration (webhooks, sweeper).
pub async fn serve_notifying(
    service: Service,
    notifications: countersign_server::Notifications,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(countersign_server::serve_notifying(
        listener,
        service,
        notifications,
        async move {
            let _ = stopped.await;
        },
    ));
    (format!("http://{addr}"), shutdown, server)
}

/// The status and JSON body; asserts problem details carry their media type and reason.
pub async fn read(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let media = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body: Value = response.json().await.expect("a JSON body");
    if status >= 400 {
        assert_eq!(media, "application/problem+json", "{body}");
        assert_eq!(body["status"], status, "{body}");
        assert!(body["reason"].is_string(), "{body}");
    } else {
        assert_eq!(media, "application/json", "{body}");
    }
    (status, body)
}

/// Run `$case` on SQLite and on PostgreSQL, as two tests.
macro_rules! on_both_stores {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case($crate::api::support::Backend::Sqlite, stringify!($case)).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case($crate::api::support::Backend::Postgres, stringify!($case)).await;
                }
            )*
        }
    };
}
pub(crate) use on_both_stores;
