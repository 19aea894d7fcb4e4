//! No sign-in configured, an unreachable store, and arbitrary requests.

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use countersign::store::MemoryStore;
use countersign::{SystemClock, token};
use countersign_server::{Service, ServiceConfig, SignIn, StoreSource};
use proptest::prelude::*;
use serde_json::json;
use tower::ServiceExt;

use super::support::{Backend, Harness, Options, read, serve};

#[tokio::test]
async fn without_a_sign_in_method_every_call_is_refused() {
    let options = Options {
        no_sign_in: true,
        ..Options::default()
    };
    let harness = Harness::start(Backend::Sqlite, "no_sign_in", options).await;
    let alice = harness.token("human:alice", &[]);
    for path in ["/api/v1/approvals", "/api/v1/receipts", "/api/v1/effects"] {
        let (status, body) = harness.get(path, Some(&alice)).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (401, Some("not_authenticated")),
            "{body}"
        );
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains("no sign-in method"))
        );
    }
    harness.stop().await;
}

#[tokio::test]
async fn an_unreachable_store_answers_503_and_keeps_serving() {
    let key = token::generate_keypair().expect("a key");
    let service = Service::new(ServiceConfig {
        // Nothing listens on port 1: the connection is refused at once.
        store: StoreSource::Url("postgres://nobody@127.0.0.1:1/none".to_owned()),
        sign_in: SignIn {
            approver_keys: vec![key.public_key()],
            proxy: None,
            oidc: None,
        },
        directory: Default::default(),
        auditors_group: None,
        public_url: None,
        clock: Arc::new(SystemClock),
        policy: None,
    });
    let (base, shutdown, server) = serve(service).await;
    let client =
        countersign_http::client(&countersign_http::Trust::nothing()).expect("an HTTP client");
    let alice = token::issue(
        &key,
        "human:alice",
        &[],
        std::time::Duration::from_secs(60),
        countersign::Clock::now(&SystemClock),
    )
    .expect("a token");
    for _ in 0..2 {
        for path in [
            "/api/v1/approvals",
            "/api/v1/receipts",
            "/api/v1/effects",
            "/api/v1/health",
        ] {
            let response = client
                .get(format!("{base}{path}"))
                .bearer_auth(&alice)
                .send()
                .await
                .expect("the service answers");
            assert_eq!(response.headers()["retry-after"], "5");
            let (status, body) = read(response).await;
            assert_eq!(
                (status, body["reason"].as_str()),
                (503, Some("store_open")),
                "{path}: {body}"
            );
            // Where the store is (host, port, user) is never told to a caller.
            let text = body.to_string();
            assert!(
                !text.contains("127.0.0.1") && !text.contains("nobody") && !text.contains(":1/"),
                "{path}: {text}"
            );
            assert!(
                body["detail"]
                    .as_str()
                    .is_some_and(|detail| detail.contains("try again shortly")),
                "{path}: {body}"
            );
        }
    }
    let response = client
        .post(format!(
            "{base}/api/v1/approvals/apr_aaaaaaaaaaaaaaaaaaaa/answer"
        ))
        .bearer_auth(&alice)
        .json(&json!({"decision": "approve", "action_hash": "sha256:00"}))
        .send()
        .await
        .expect("the service answers");
    let (status, _) = read(response).await;
    assert_eq!(status, 503);
    let _ = shutdown.send(());
    server.await.expect("the task ends").expect("a clean stop");
}

#[tokio::test]
async fn every_documented_operation_exists_and_needs_sign_in() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/approval-service.openapi.yaml"
    ))
    .expect("the OpenAPI file");
    let document: serde_json::Value = serde_saphyr::from_str(&text).expect("valid YAML");
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().expect("paths");
    let (router, id, _) = tokio::task::spawn_blocking(fuzz_router)
        .await
        .expect("a router");
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().expect("a path item") {
            operations += 1;
            let concrete = path.replace("{id}", &id).replace("{key}", "e:1");
            let request = Request::builder()
                .method(method.to_uppercase().as_str())
                .uri(concrete.as_str())
                .header("content-type", "application/json")
                .body(Body::from("{}"))
                .expect("a request");
            let status = router
                .clone()
                .oneshot(request)
                .await
                .expect("infallible")
                .status()
                .as_u16();
            let public = operation["security"] == json!([]);
            let expected = if public { 200 } else { 401 };
            assert_eq!(status, expected, "{method} {path}");
        }
    }
    assert_eq!(operations, 11);
}

/// A router over a memory store with one pending request, and a valid token for it.
fn fuzz_router() -> (axum::Router, String, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let key = token::generate_keypair().expect("a key");
    let store = Arc::new(MemoryStore::new());
    let policy = countersign::Policy::from_yaml_str(
        &format!(
            "schema: countersign.policy/v1\napprovers:\n  keys: [\"{}\"]\nactions:\n  a.b:\n    effect: \"e:{{x}}\"\n    decision: approve\n",
            key.public_key()
        ),
        None,
    )
    .expect("a policy");
    let shared: Arc<dyn countersign::Store> = store.clone();
    let control = countersign::Control::builder_shared(Arc::new(policy), shared)
        .identity(countersign::StaticIdentity::new(
            countersign::Principal::new("agent:bot").expect("a principal"),
        ))
        .build();
    let id = runtime.block_on(async {
        match control
            .execute(
                countersign::ActionRequest::new("a.b", &json!({"x": 1})),
                |_| async { Ok(()) },
            )
            .await
        {
            Err(countersign::ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected a pending request, got {other:?}"),
        }
    });
    let token = token::issue(
        &key,
        "human:alice",
        &[],
        std::time::Duration::from_secs(3600),
        countersign::Clock::now(&SystemClock),
    )
    .expect("a token");
    let service = Service::new(ServiceConfig {
        store: StoreSource::Open(store),
        sign_in: SignIn {
            approver_keys: vec![key.public_key()],
            proxy: Some(
                countersign_server::ProxySignIn::new("x-user", "x-secret", &"s".repeat(32))
                    .expect("a proxy"),
            ),
            oidc: None,
        },
        directory: Default::default(),
        auditors_group: Some("audit".to_owned()),
        public_url: None,
        clock: Arc::new(SystemClock),
        policy: None,
    });
    (service.router(), id.as_str().to_owned(), token)
}

/// Paths, some under the API's routes; `{ID}` stands for the pending request's id.
fn any_path() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "/api/v1/approvals",
        "/api/v1/approvals/{ID}",
        "/api/v1/approvals/{ID}/answer",
        "/api/v1/approvals/apr_aaaaaaaaaaaaaaaaaaaa/answer",
        "/api/v1/receipts",
        "/api/v1/effects",
        "/api/v1/effects/e:1/resolve",
        "/api/v1/health",
    ]);
    let query = prop::option::of("[a-z=&%0-9_:.-]{0,24}");
    prop_oneof![
        (fixed.clone(), query).prop_map(|(path, query)| match query {
            Some(query) => format!("{path}?{query}"),
            None => path.to_owned(),
        }),
        (fixed, "[a-zA-Z0-9%._~:/-]{0,40}").prop_map(|(path, tail)| format!("{path}/{tail}")),
        "/[a-zA-Z0-9%._~:/?&=-]{0,60}",
    ]
}

fn any_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        (
            prop::option::of(prop_oneof![
                Just(json!("approve")),
                Just(json!("deny")),
                Just(json!(null)),
                any::<i64>().prop_map(|n| json!(n)),
                ".{0,12}".prop_map(|text| json!(text)),
            ]),
            prop::option::of(".{0,80}"),
            prop::option::of(".{0,40}"),
            prop::option::of(prop_oneof![Just("committed"), Just("failed"), Just("x")]),
        )
            .prop_map(|(decision, hash, note, to)| {
                let mut object = serde_json::Map::new();
                if let Some(decision) = decision {
                    object.insert("decision".into(), decision);
                }
                if let Some(hash) = hash {
                    object.insert("action_hash".into(), json!(hash));
                }
                if let Some(note) = note {
                    object.insert("note".into(), json!(note));
                }
                if let Some(to) = to {
                    object.insert("to".into(), json!(to));
                }
                serde_json::to_vec(&object).unwrap_or_default()
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever comes in — method, path, query, headers, body — the answer is never a 500
    /// and never a panic, and every error is problem details.
    #[test]
    fn arbitrary_requests_never_get_a_500(
        path in any_path(),
        method in prop::sample::select(vec!["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
        body in any_body(),
        authorization in prop::option::of(prop_oneof![
            Just("valid".to_owned()),
            "Bearer [ -~]{0,64}",
            "[ -~]{0,64}",
        ]),
        content_type in prop::option::of(prop_oneof![
            Just("application/json".to_owned()),
            Just("application/json; charset=utf-8".to_owned()),
            "[ -~]{0,30}",
        ]),
        proxy in prop::option::of(("[ -~]{0,40}", prop::option::of("[ -~]{0,40}"))),
    ) {
        let (router, id, token) = fuzz_router();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let path = path.replace("{ID}", &id);
        let mut request = Request::builder().method(method).uri(path.as_str());
        if let Some(authorization) = &authorization {
            let value = if authorization == "valid" { format!("Bearer {token}") } else { authorization.clone() };
            request = request.header("authorization", value);
        }
        if let Some(content_type) = &content_type {
            request = request.header("content-type", content_type.as_str());
        }
        if let Some((user, secret)) = &proxy {
            request = request.header("x-user", user.as_str());
            if let Some(secret) = secret {
                request = request.header("x-secret", secret.as_str());
            }
        }
        // A path or header the http crate cannot carry is not a request the service sees.
        let Ok(request) = request.body(Body::from(body)) else {
            return Ok(());
        };
        let response = runtime
            .block_on(router.oneshot(request))
            .expect("the router is infallible");
        let status = response.status();
        prop_assert!(status.as_u16() < 500, "{method} {path}: {status}");
        if status.is_client_error() && method != "HEAD" {
            prop_assert_eq!(
                response.headers().get("content-type").and_then(|value| value.to_str().ok()),
                Some("application/problem+json")
            );
        }
    }
}
