//! Sign-in with an identity provider's JWT verified against a JWKS: from a file, and served on
//! 127.0.0.1 and rotated. SQLite only: nothing here depends on the store.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign::Clock;
use countersign_server::jwks::{DEFAULT_MAX_AGE, JwksSource, JwtRules, OidcSignIn};
use ed25519_dalek::pkcs8::EncodePrivateKey;
use serde_json::{Value, json};

use super::support::{Backend, Harness, Options};

const ISSUER: &str = "https://idp.example.com";
const AUDIENCE: &str = "countersign-approvals";

/// A signing key of the test identity provider.
struct IdpKey {
    kid: String,
    key: ed25519_dalek::SigningKey,
}

impl IdpKey {
    fn new(kid: &str) -> IdpKey {
        IdpKey {
            kid: kid.to_owned(),
            key: ed25519_dalek::SigningKey::from_bytes(&rand::random::<[u8; 32]>()),
        }
    }

    fn jwk(&self) -> Value {
        json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "use": "sig",
            "alg": "EdDSA",
            "kid": self.kid,
            "x": URL_SAFE_NO_PAD.encode(self.key.verifying_key().as_bytes()),
        })
    }

    /// A token with `claims`, signed by this key, naming `kid` in its header.
    fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
        header.kid = Some(kid.to_owned());
        let der = self.key.to_pkcs8_der().expect("a PKCS#8 key");
        jsonwebtoken::encode(
            &header,
            claims,
            &jsonwebtoken::EncodingKey::from_ed_der(der.as_bytes()),
        )
        .expect("a token")
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }
}

fn jwks(keys: &[&IdpKey]) -> Value {
    json!({ "keys": keys.iter().map(|key| key.jwk()).collect::<Vec<_>>() })
}

fn rules() -> JwtRules {
    JwtRules {
        issuer: ISSUER.to_owned(),
        audience: AUDIENCE.to_owned(),
        groups_claim: "groups".to_owned(),
    }
}

/// Claims for `sub` in `groups`, valid for an hour from `harness`'s clock.
fn claims(harness: &Harness, sub: &str, groups: &[&str]) -> Value {
    let now = harness.clock.now().as_millis() / 1000;
    json!({
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": sub,
        "groups": groups,
        "iat": now,
        "exp": now + 3600,
    })
}

async fn refused(harness: &Harness, token: &str, says: &str) -> Value {
    let (status, body) = harness.get("/api/v1/approvals", Some(token)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (401, Some("not_authenticated")),
        "{body}"
    );
    let detail = body["detail"].as_str().unwrap_or("");
    assert!(detail.contains(says), "`{says}` not in: {detail}");
    assert!(!body.to_string().contains(token), "the token is echoed");
    // Every refusal of a token says why in a code, as an approver token's does (found by a
    // first-time user: the identity provider's carried none).
    assert!(body["token_reason"].is_string(), "no token_reason: {body}");
    body
}

#[tokio::test]
async fn a_jwt_from_a_jwks_file_signs_in_with_its_groups() {
    let dir = tempfile::tempdir().expect("a folder");
    let idp = IdpKey::new("idp-1");
    let file = dir.path().join("jwks.json");
    std::fs::write(&file, jwks(&[&idp]).to_string()).expect("the JWKS file");
    let oidc = OidcSignIn::load(JwksSource::File(file), rules(), DEFAULT_MAX_AGE)
        .await
        .expect("the JWKS loads");
    let options = Options {
        oidc: Some(oidc),
        ..Options::default()
    };
    let harness = Harness::start(Backend::Sqlite, "oidc_file", options).await;
    let (id, hash) = harness.ask("ops.restart", json!({"host": "web1"})).await;

    // Not in the ops group: sees nothing, may not answer.
    let support = idp.sign(&claims(&harness, "oidc|sam", &["support"]));
    let (status, page) = harness.get("/api/v1/approvals", Some(&support)).await;
    assert_eq!((status, &page["items"]), (200, &json!([])), "{page}");

    // In ops: sees the request and answers it.
    let olga = idp.sign(&claims(&harness, "oidc|olga", &["ops"]));
    let (status, page) = harness.get("/api/v1/approvals", Some(&olga)).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1), "{page}");
    let (status, body) = harness.answer(&id, &olga, "approve", &hash).await;
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("granted")),
        "{body}"
    );
    let approver = &body["answers"][0]["approver"];
    assert_eq!(approver["authentication"], "oidc", "{body}");
    assert_eq!(approver["groups"], json!(["ops"]), "{body}");

    // Approver tokens still sign in beside it.
    let approver_token = harness.token("human:olga", &["ops"]);
    let (status, _) = harness
        .get("/api/v1/approvals", Some(&approver_token))
        .await;
    assert_eq!(status, 200);
    harness.stop().await;
}

#[tokio::test]
async fn refuses_expired_foreign_unknown_and_forged_jwts() {
    let dir = tempfile::tempdir().expect("a folder");
    let idp = IdpKey::new("idp-1");
    let file = dir.path().join("jwks.json");
    std::fs::write(&file, jwks(&[&idp]).to_string()).expect("the JWKS file");
    let oidc = OidcSignIn::load(JwksSource::File(file), rules(), DEFAULT_MAX_AGE)
        .await
        .expect("the JWKS loads");
    let options = Options {
        oidc: Some(oidc),
        ..Options::default()
    };
    let harness = Harness::start(Backend::Sqlite, "oidc_refusals", options).await;
    let good = claims(&harness, "oidc|olga", &["ops"]);

    let mut expired = good.clone();
    let now = harness.clock.now().as_millis() / 1000;
    expired["exp"] = json!(now - 120);
    let body = refused(&harness, &idp.sign(&expired), "expired").await;
    assert_eq!(body["token_reason"], "expired");
    // Within the 60 s allowance it still signs in.
    let mut just_expired = good.clone();
    just_expired["exp"] = json!(now - 30);
    let (status, _) = harness
        .get("/api/v1/approvals", Some(&idp.sign(&just_expired)))
        .await;
    assert_eq!(status, 200);

    let mut future = good.clone();
    future["nbf"] = json!(now + 600);
    refused(&harness, &idp.sign(&future), "not valid before").await;

    let mut no_exp = good.clone();
    no_exp.as_object_mut().expect("an object").remove("exp");
    refused(&harness, &idp.sign(&no_exp), "`exp`").await;

    let mut foreign = good.clone();
    foreign["iss"] = json!("https://evil.example.com");
    let body = refused(&harness, &idp.sign(&foreign), "wrong issuer").await;
    assert_eq!(body["token_reason"], "wrong_issuer");
    // A subject is taken exactly as signed, never trimmed into someone else's id (found by a
    // first-time user: `human:alice\u{a0}` signed in as alice).
    for sub in [
        "human:alice ",
        " human:alice",
        "human:alice\u{a0}",
        "human:alice\t",
    ] {
        refused(
            &harness,
            &idp.sign(&claims(&harness, sub, &[])),
            "is not an approver id",
        )
        .await;
    }

    let mut elsewhere = good.clone();
    elsewhere["aud"] = json!("another-app");
    refused(&harness, &idp.sign(&elsewhere), "wrong audience").await;

    let stranger = IdpKey::new("idp-2");
    let body = refused(&harness, &stranger.sign(&good), "unknown key").await;
    assert_eq!(body["token_reason"], "unknown_key");
    // Another key's signature under the known kid.
    refused(&harness, &stranger.sign_as("idp-1", &good), "bad signature").await;

    // alg none: no signature at all.
    let part = |value: Value| URL_SAFE_NO_PAD.encode(value.to_string());
    let none = format!(
        "{}.{}.",
        part(json!({"alg": "none", "kid": "idp-1", "typ": "JWT"})),
        part(good.clone())
    );
    refused(&harness, &none, "`none`").await;

    // HS256 with the public key as the HMAC secret.
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("idp-1".to_owned());
    let forged = jsonwebtoken::encode(
        &header,
        &good,
        &jsonwebtoken::EncodingKey::from_secret(idp.key.verifying_key().as_bytes()),
    )
    .expect("a token");
    refused(&harness, &forged, "`HS256`").await;

    let mut groups_not_array = good.clone();
    groups_not_array["groups"] = json!("ops");
    refused(&harness, &idp.sign(&groups_not_array), "not an array").await;
    harness.stop().await;
}

#[tokio::test]
async fn a_served_jwks_is_refreshed_and_a_failed_fetch_keeps_the_last_good_set() {
    let first = IdpKey::new("first");
    let second = IdpKey::new("second");
    // The served JWKS; `None` answers 500.
    let served: Arc<Mutex<Option<Value>>> = Arc::new(Mutex::new(Some(jwks(&[&first]))));
    let app = {
        let served = Arc::clone(&served);
        axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let served = Arc::clone(&served);
                async move {
                    let current = served.lock().expect("the JWKS").clone();
                    match current {
                        Some(set) => (axum::http::StatusCode::OK, set.to_string()),
                        None => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, String::new()),
                    }
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("an address");
    let idp_server = tokio::spawn(async move { axum::serve(listener, app).await });

    let max_age = Duration::from_millis(150);
    let source = JwksSource::parse(&format!("http://{addr}/jwks")).expect("an http URL");
    let oidc = OidcSignIn::load(source, rules(), max_age)
        .await
        .expect("the JWKS is fetched");
    let options = Options {
        oidc: Some(oidc),
        ..Options::default()
    };
    let harness = Harness::start(Backend::Sqlite, "oidc_served", options).await;
    let good = claims(&harness, "oidc|olga", &["ops"]);
    let (status, _) = harness
        .get("/api/v1/approvals", Some(&first.sign(&good)))
        .await;
    assert_eq!(status, 200);
    refused(&harness, &second.sign(&good), "unknown key").await;

    // Rotate: only the second key is served now.
    *served.lock().expect("the JWKS") = Some(jwks(&[&second]));
    let mut picked_up = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (status, _) = harness
            .get("/api/v1/approvals", Some(&second.sign(&good)))
            .await;
        if status == 200 {
            picked_up = true;
            break;
        }
    }
    assert!(picked_up, "the rotated key was never picked up");
    refused(&harness, &first.sign(&good), "unknown key").await;

    // The provider fails: the last good set stays.
    *served.lock().expect("the JWKS") = None;
    tokio::time::sleep(max_age * 4).await;
    let (status, _) = harness
        .get("/api/v1/approvals", Some(&second.sign(&good)))
        .await;
    assert_eq!(status, 200);
    harness.stop().await;
    idp_server.abort();
}

#[tokio::test]
async fn an_es256_jwt_signs_in_too() {
    use p256::pkcs8::EncodePrivateKey as _;
    let key =
        p256::ecdsa::SigningKey::from_bytes(&p256::FieldBytes::from(rand::random::<[u8; 32]>()))
            .expect("a P-256 key");
    let point = key.verifying_key().to_encoded_point(false);
    let set = json!({"keys": [{
        "kty": "EC",
        "crv": "P-256",
        "kid": "ec-1",
        "alg": "ES256",
        "x": URL_SAFE_NO_PAD.encode(point.x().expect("x")),
        "y": URL_SAFE_NO_PAD.encode(point.y().expect("y")),
    }]});
    let dir = tempfile::tempdir().expect("a folder");
    let file = dir.path().join("jwks.json");
    std::fs::write(&file, set.to_string()).expect("the JWKS file");
    let oidc = OidcSignIn::load(JwksSource::File(file), rules(), DEFAULT_MAX_AGE)
        .await
        .expect("the JWKS loads");
    let options = Options {
        oidc: Some(oidc),
        ..Options::default()
    };
    let harness = Harness::start(Backend::Sqlite, "oidc_es256", options).await;
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("ec-1".to_owned());
    let der = key.to_pkcs8_der().expect("a PKCS#8 key");
    let token = jsonwebtoken::encode(
        &header,
        &claims(&harness, "oidc|olga", &["ops"]),
        &jsonwebtoken::EncodingKey::from_ec_der(der.as_bytes()),
    )
    .expect("a token");
    let (status, body) = harness.get("/api/v1/approvals", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    // The same key claimed as EdDSA does not fit it.
    let idp = IdpKey::new("ec-1");
    refused(
        &harness,
        &idp.sign(&claims(&harness, "oidc|olga", &["ops"])),
        "does not fit",
    )
    .await;
    harness.stop().await;
}

#[tokio::test]
async fn refuses_a_jwks_over_https_or_without_usable_keys() {
    assert!(JwksSource::parse("https://idp.example.com/jwks").is_err());
    let dir = tempfile::tempdir().expect("a folder");
    let file = dir.path().join("jwks.json");
    std::fs::write(
        &file,
        r#"{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"}]}"#,
    )
    .expect("the JWKS file");
    let error = OidcSignIn::load(JwksSource::File(file), rules(), DEFAULT_MAX_AGE)
        .await
        .expect_err("no usable key");
    assert!(error.to_string().contains("no usable key"), "{error}");
}
