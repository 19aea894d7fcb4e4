use super::*;

use proptest::prelude::*;

/// 2026-01-01T00:00:00Z.
const NOW: Timestamp = Timestamp::from_millis(1_767_225_600_000);

const HOUR: Duration = Duration::from_secs(60 * 60);

fn new_key() -> SigningKey {
    generate_keypair().expect("the OS gives random bytes")
}

fn finance() -> Vec<String> {
    vec!["finance".to_owned()]
}

fn later(duration: Duration) -> Timestamp {
    NOW.plus(duration)
}

/// Sign `claims` (any JSON) with `key` under an EdDSA header, bypassing [`issue`]'s checks;
/// a `jti` is added when the claims are an object without one.
fn hand_signed(key: &SigningKey, claims: &serde_json::Value) -> String {
    let mut claims = claims.clone();
    if let Some(object) = claims.as_object_mut() {
        object
            .entry("jti")
            .or_insert_with(|| serde_json::json!(crate::id::random_id("tok_")));
    }
    hand_signed_exactly(key, &claims)
}

/// Sign `claims` exactly as given.
fn hand_signed_exactly(key: &SigningKey, claims: &serde_json::Value) -> String {
    let der = key.0.to_pkcs8_der().expect("encode the key");
    let encoding_key = jsonwebtoken::EncodingKey::from_ed_der(der.as_bytes());
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA),
        claims,
        &encoding_key,
    )
    .expect("sign")
}

fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now_seconds() -> i64 {
    NOW.as_millis() / 1000
}

#[test]
fn accepts_a_valid_token() {
    let key = new_key();
    let token = issue(&key, "human:alice", &finance(), 8 * HOUR, NOW).unwrap();
    let verified = verify(&token, &[key.public_key()], later(HOUR)).unwrap();
    let jti = verified.jti.clone().expect("issued tokens carry a jti");
    assert!(jti.starts_with("tok_") && jti.len() == 24, "{jti}");
    assert_eq!(super::unverified_jti(&token).as_deref(), Some(jti.as_str()));
    assert_eq!(
        verified,
        VerifiedToken {
            subject: "human:alice".to_owned(),
            groups: finance(),
            expires_at: later(8 * HOUR),
            key_id: key.public_key().key_id(),
            jti: Some(jti),
        }
    );
}

#[test]
fn reports_which_of_several_keys_verified() {
    let first = new_key();
    let second = new_key();
    let token = issue(&second, "human:bob", &[], HOUR, NOW).unwrap();
    let verified = verify(&token, &[first.public_key(), second.public_key()], NOW).unwrap();
    assert_eq!(verified.key_id, second.public_key().key_id());
    assert_ne!(verified.key_id, first.public_key().key_id());
}

#[test]
fn refuses_an_expired_token() {
    let key = new_key();
    let token = issue(&key, "human:alice", &finance(), HOUR, NOW).unwrap();
    // At exactly `exp` the token is already expired: no skew on expiry.
    let error = verify(&token, &[key.public_key()], later(HOUR)).unwrap_err();
    assert_eq!(error.reason(), "expired");
    assert!(matches!(error, TokenError::Expired { expired_at } if expired_at == later(HOUR)));
    let just_before = Timestamp::from_millis(later(HOUR).as_millis() - 1);
    assert!(verify(&token, &[key.public_key()], just_before).is_ok());
}

#[test]
fn refuses_a_token_issued_in_the_future_beyond_the_skew() {
    let key = new_key();
    let token = issue(
        &key,
        "human:alice",
        &finance(),
        HOUR,
        later(CLOCK_SKEW + Duration::from_secs(1)),
    )
    .unwrap();
    let error = verify(&token, &[key.public_key()], NOW).unwrap_err();
    assert_eq!(error.reason(), "not_yet_valid");
}

#[test]
fn accepts_a_token_issued_within_the_skew() {
    let key = new_key();
    let token = issue(&key, "human:alice", &finance(), HOUR, later(CLOCK_SKEW)).unwrap();
    assert!(verify(&token, &[key.public_key()], NOW).is_ok());
}

#[test]
fn refuses_a_token_signed_by_an_unlisted_key() {
    let listed = new_key();
    let other = new_key();
    let token = issue(&other, "human:mallory", &finance(), HOUR, NOW).unwrap();
    let error = verify(&token, &[listed.public_key()], NOW).unwrap_err();
    assert_eq!(error.reason(), "bad_signature");
    assert!(matches!(error, TokenError::BadSignature { keys_tried: 1 }));
}

#[test]
fn refuses_without_configured_keys() {
    let key = new_key();
    let token = issue(&key, "human:alice", &finance(), HOUR, NOW).unwrap();
    assert_eq!(
        verify(&token, &[], NOW).unwrap_err().reason(),
        "no_keys_configured"
    );
}

#[test]
fn refuses_alg_none() {
    let key = new_key();
    let header = base64url(br#"{"alg":"none","typ":"JWT"}"#);
    let claims = base64url(
        format!(
            r#"{{"sub":"human:mallory","groups":["finance"],"iat":{0},"exp":{1}}}"#,
            now_seconds(),
            now_seconds() + 60
        )
        .as_bytes(),
    );
    for token in [
        format!("{header}.{claims}."),
        format!("{header}.{claims}.c2ln"),
    ] {
        let error = verify(&token, &[key.public_key()], NOW).unwrap_err();
        assert!(
            matches!(error.reason(), "unsupported_algorithm" | "malformed"),
            "{error:?}"
        );
    }
    let error = verify(&format!("{header}.{claims}.c2ln"), &[key.public_key()], NOW).unwrap_err();
    assert!(
        matches!(&error, TokenError::UnsupportedAlgorithm { algorithm } if algorithm == "none")
    );
}

#[test]
fn refuses_an_hs256_token_keyed_with_the_public_key() {
    // The classic confusion attack: an HMAC over the token, keyed with the public key's bytes.
    let key = new_key();
    let public = key.public_key();
    let claims = serde_json::json!({"sub": "human:mallory", "groups": ["finance"], "iat": now_seconds(), "exp": now_seconds() + 60});
    for secret in [
        public.0.as_bytes().to_vec(),
        public.to_pem().into_bytes(),
        public.to_string().into_bytes(),
    ] {
        let token = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(&secret),
        )
        .unwrap();
        let error = verify(&token, std::slice::from_ref(&public), NOW).unwrap_err();
        assert!(
            matches!(&error, TokenError::UnsupportedAlgorithm { algorithm } if algorithm == "HS256"),
            "{error:?}"
        );
    }
}

#[test]
fn refuses_a_lifetime_over_24h_at_issue() {
    let key = new_key();
    let error = issue(
        &key,
        "human:alice",
        &finance(),
        MAX_LIFETIME + Duration::from_secs(1),
        NOW,
    )
    .unwrap_err();
    assert_eq!(error.reason(), "lifetime_too_long");
    assert!(issue(&key, "human:alice", &finance(), MAX_LIFETIME, NOW).is_ok());
}

#[test]
fn refuses_a_lifetime_under_one_second_at_issue() {
    let key = new_key();
    for ttl in [Duration::ZERO, Duration::from_millis(999)] {
        let error = issue(&key, "human:alice", &finance(), ttl, NOW).unwrap_err();
        assert_eq!(error.reason(), "lifetime_too_short");
    }
}

#[test]
fn refuses_a_lifetime_over_24h_at_verify() {
    let key = new_key();
    let token = hand_signed(
        &key,
        &serde_json::json!({"sub": "human:alice", "iat": now_seconds(), "exp": now_seconds() + 24 * 3600 + 1}),
    );
    let error = verify(&token, &[key.public_key()], NOW).unwrap_err();
    assert_eq!(error.reason(), "lifetime_too_long");
}

#[test]
fn refuses_exp_not_after_iat() {
    let key = new_key();
    let token = hand_signed(
        &key,
        &serde_json::json!({"sub": "human:alice", "iat": now_seconds() + 30, "exp": now_seconds() + 10}),
    );
    assert_eq!(
        verify(&token, &[key.public_key()], NOW)
            .unwrap_err()
            .reason(),
        "malformed"
    );
}

#[test]
fn refuses_a_tampered_payload() {
    let key = new_key();
    let token = issue(&key, "human:alice", &finance(), HOUR, NOW).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    claims["groups"] = serde_json::json!(["finance", "admin"]);
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        base64url(&serde_json::to_vec(&claims).unwrap()),
        parts[2]
    );
    let error = verify(&forged, &[key.public_key()], NOW).unwrap_err();
    assert_eq!(error.reason(), "bad_signature");
}

#[test]
fn refuses_a_missing_or_empty_subject() {
    let key = new_key();
    for claims in [
        serde_json::json!({"iat": now_seconds(), "exp": now_seconds() + 60}),
        serde_json::json!({"sub": "", "iat": now_seconds(), "exp": now_seconds() + 60}),
        serde_json::json!({"sub": "  ", "iat": now_seconds(), "exp": now_seconds() + 60}),
    ] {
        let token = hand_signed(&key, &claims);
        assert_eq!(
            verify(&token, &[key.public_key()], NOW)
                .unwrap_err()
                .reason(),
            "missing_subject"
        );
    }
    assert_eq!(
        issue(&key, " ", &[], HOUR, NOW).unwrap_err().reason(),
        "missing_subject"
    );
}

#[test]
fn refuses_to_issue_for_a_subject_that_is_not_an_approver_id() {
    // Issue #19: a token for `human:` or `human: bob` would be refused at every answer, so it is
    // not issued; the error says what was given and the expected shape.
    let key = new_key();
    for subject in [
        "human:",
        ":",
        ":alice",
        "human::alice",
        "human: bob",
        "human:bob\n",
    ] {
        let error = issue(&key, subject, &finance(), HOUR, NOW).unwrap_err();
        assert_eq!(error.reason(), "invalid_subject", "{subject:?}");
        let TokenError::InvalidSubject(shape) = &error else {
            panic!("{error:?}");
        };
        assert_eq!(shape.given, subject);
        let message = error.to_string();
        assert!(
            message.starts_with("cannot issue an approver token for this subject: `")
                && message.contains("is not an approver id")
                && message.contains("`human:alice`"),
            "{message}"
        );
    }
    for subject in [
        "alice",
        "human:alice",
        "oidc:auth0|5f1c",
        "human:alice@example.com",
    ] {
        let token = issue(&key, subject, &finance(), HOUR, NOW).expect("a well-shaped subject");
        let verified = verify(&token, &[key.public_key()], NOW).expect("verifies");
        assert_eq!(verified.subject, subject);
    }
}

#[test]
fn a_signed_token_whose_subject_is_not_an_approver_id_stands_for_no_approver() {
    // A token signed elsewhere (or by an older `issue`) with an off-shape `sub` verifies as a
    // signature, but the answer it carries is refused as `invalid_approver`.
    use crate::approval::{ApproverFault, approver_of};
    use crate::approver::{ApprovalRule, Channel, Credential};
    let key = new_key();
    let rule = ApprovalRule {
        keys: vec![key.public_key().to_string()],
        ..ApprovalRule::default()
    };
    for subject in ["human:", "human: bob"] {
        let token = hand_signed(
            &key,
            &serde_json::json!({"sub": subject, "iat": now_seconds(), "exp": now_seconds() + 60}),
        );
        match approver_of(&rule, &Credential::Token(token), Channel::Cli, NOW) {
            Err(ApproverFault::Malformed(error)) => assert_eq!(error.given, subject),
            other => panic!("{subject:?}: {other:?}"),
        }
    }
}

#[test]
fn refuses_missing_exp_or_iat() {
    let key = new_key();
    let no_exp = hand_signed(
        &key,
        &serde_json::json!({"sub": "human:alice", "iat": now_seconds()}),
    );
    let error = verify(&no_exp, &[key.public_key()], NOW).unwrap_err();
    assert!(
        matches!(error, TokenError::MissingClaim { claim: "exp" }),
        "{error:?}"
    );
    let no_iat = hand_signed(
        &key,
        &serde_json::json!({"sub": "human:alice", "exp": now_seconds() + 60}),
    );
    let error = verify(&no_iat, &[key.public_key()], NOW).unwrap_err();
    assert!(
        matches!(error, TokenError::MissingClaim { claim: "iat" }),
        "{error:?}"
    );
}

#[test]
fn parses_groups_and_treats_missing_groups_as_none() {
    let key = new_key();
    let groups = vec!["finance".to_owned(), "ops".to_owned()];
    let token = issue(&key, "human:alice", &groups, HOUR, NOW).unwrap();
    assert_eq!(
        verify(&token, &[key.public_key()], NOW).unwrap().groups,
        groups
    );
    let without = hand_signed(
        &key,
        &serde_json::json!({"sub": "human:alice", "iat": now_seconds(), "exp": now_seconds() + 60}),
    );
    assert!(
        verify(&without, &[key.public_key()], NOW)
            .unwrap()
            .groups
            .is_empty()
    );
}

#[test]
fn refuses_groups_that_are_not_strings() {
    let key = new_key();
    for groups in [
        serde_json::json!("finance"),
        serde_json::json!([1, 2]),
        serde_json::json!({"a": "b"}),
    ] {
        let token = hand_signed(
            &key,
            &serde_json::json!({"sub": "human:alice", "groups": groups, "iat": now_seconds(), "exp": now_seconds() + 60}),
        );
        assert_eq!(
            verify(&token, &[key.public_key()], NOW)
                .unwrap_err()
                .reason(),
            "malformed"
        );
    }
}

#[test]
fn refuses_an_empty_group_name_at_issue() {
    let key = new_key();
    let groups = vec!["finance".to_owned(), String::new()];
    assert_eq!(
        issue(&key, "human:alice", &groups, HOUR, NOW)
            .unwrap_err()
            .reason(),
        "empty_group"
    );
}

#[test]
fn errors_never_echo_the_token() {
    let key = new_key();
    let other = new_key();
    let token = issue(&other, "human:alice", &finance(), HOUR, NOW).unwrap();
    let signature = token.rsplit('.').next().unwrap();
    for error in [
        verify(&token, &[key.public_key()], NOW).unwrap_err(),
        verify(&format!("{token}.x"), &[key.public_key()], NOW).unwrap_err(),
    ] {
        let message = error.to_string();
        assert!(!message.contains(signature), "{message}");
        assert!(!message.contains(&token[..20]), "{message}");
    }
}

#[test]
fn public_key_round_trips_through_both_text_forms() {
    let public = new_key().public_key();
    let inline = public.to_string();
    assert!(inline.starts_with("ed25519:"));
    assert_eq!(inline.len(), "ed25519:".len() + 43);
    assert_eq!(PublicKey::parse(&inline).unwrap(), public);
    assert_eq!(PublicKey::parse(&format!("  {inline}\n")).unwrap(), public);
    let pem = public.to_pem();
    assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{pem}");
    assert_eq!(PublicKey::parse(&pem).unwrap(), public);
    assert_eq!(public.key_id().as_str().len(), 16);
}

#[test]
fn refuses_public_key_text_of_the_wrong_shape() {
    for text in [
        "",
        "ed25519:",
        "ed25519:not base64!",
        "ed25519:AAAA",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
    ] {
        let error = PublicKey::parse(text).unwrap_err();
        assert_eq!(error.reason(), "invalid_key", "{text:?}");
    }
}

#[test]
fn refuses_a_weak_public_key() {
    // The identity point: small order, under which signatures can be forged.
    let mut identity = [0_u8; 32];
    identity[0] = 1;
    let error = PublicKey::parse(&format!("ed25519:{}", base64url(&identity))).unwrap_err();
    assert_eq!(error.reason(), "invalid_key");
    assert!(error.to_string().contains("weak"), "{error}");
}

#[test]
fn keygen_writes_a_private_key_and_its_public_half() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("approver.key");
    let files = write_keypair(&out).unwrap();
    assert_eq!(files.private_key_file, out);
    assert_eq!(
        files.public_key_file,
        folder.path().join("approver.key.pub")
    );
    let signing = SigningKey::load(&out).unwrap();
    assert_eq!(signing.public_key(), files.public_key);
    assert_eq!(
        PublicKey::load(&files.public_key_file).unwrap(),
        files.public_key
    );
    let private_text = std::fs::read_to_string(&out).unwrap();
    assert!(
        private_text.starts_with("-----BEGIN PRIVATE KEY-----\n"),
        "{private_text}"
    );
    let token = issue(&signing, "human:alice", &finance(), HOUR, NOW).unwrap();
    assert!(
        verify(
            &token,
            &[PublicKey::load(&files.public_key_file).unwrap()],
            NOW
        )
        .is_ok()
    );
}

#[cfg(unix)]
#[test]
fn keygen_makes_the_private_key_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("approver.key");
    write_keypair(&out).unwrap();
    let mode = std::fs::metadata(&out).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn keygen_refuses_to_overwrite_either_file() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("approver.key");
    std::fs::write(&out, "old secret").unwrap();
    let error = write_keypair(&out).unwrap_err();
    assert!(
        matches!(&error, TokenError::KeyFileExists { path } if *path == out),
        "{error:?}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old secret");
    assert!(!folder.path().join("approver.key.pub").exists());

    let other = folder.path().join("other.key");
    let other_pub = folder.path().join("other.key.pub");
    std::fs::write(&other_pub, "old public").unwrap();
    let error = write_keypair(&other).unwrap_err();
    assert_eq!(error.reason(), "key_file_exists");
    assert!(
        !other.exists(),
        "a private key was left without its public half"
    );
    assert_eq!(std::fs::read_to_string(&other_pub).unwrap(), "old public");
}

#[test]
fn refuses_a_private_key_file_given_as_a_public_key() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("approver.key");
    write_keypair(&out).unwrap();
    let error = PublicKey::load(&out).unwrap_err();
    assert_eq!(error.reason(), "private_key_given");
    let message = error.to_string();
    assert!(
        message.contains("holds a private key where a public key belongs")
            && message.contains("never give a secret there"),
        "{message}"
    );
    let private_text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        PublicKey::parse(&private_text).unwrap_err().reason(),
        "private_key_given"
    );
}

#[test]
fn refuses_a_public_key_file_given_as_the_signing_key() {
    let folder = tempfile::tempdir().unwrap();
    let out = folder.path().join("approver.key");
    let files = write_keypair(&out).unwrap();
    let error = SigningKey::load(&files.public_key_file).unwrap_err();
    assert_eq!(error.reason(), "public_key_given");
    let missing = SigningKey::load(&folder.path().join("absent.key")).unwrap_err();
    assert_eq!(missing.reason(), "key_file_unreadable");
}

#[test]
fn signing_key_debug_hides_the_secret() {
    let key = new_key();
    let shown = format!("{key:?}");
    let pem = key.to_pkcs8_pem().unwrap();
    let body: String = pem.lines().nth(1).unwrap().chars().take(20).collect();
    assert!(!shown.contains(&body), "{shown}");
}

#[test]
fn every_reason_is_distinct_snake_case() {
    let errors = [
        TokenError::Malformed { problem: "x" },
        TokenError::UnsupportedAlgorithm {
            algorithm: "x".to_owned(),
        },
        TokenError::BadSignature { keys_tried: 1 },
        TokenError::Expired { expired_at: NOW },
        TokenError::NotYetValid { issued_at: NOW },
        TokenError::LifetimeTooLong { lifetime: HOUR },
        TokenError::LifetimeTooShort { lifetime: HOUR },
        TokenError::MissingSubject,
        TokenError::MissingClaim { claim: "exp" },
        TokenError::EmptyGroup,
        TokenError::NoKeysConfigured,
        TokenError::InvalidKey {
            path: None,
            problem: "x",
        },
        TokenError::PrivateKeyGiven { path: None },
        TokenError::PublicKeyGiven {
            path: PathBuf::from("k"),
        },
        TokenError::KeyFileUnreadable {
            path: PathBuf::from("k"),
            error: std::io::Error::other("x"),
        },
        TokenError::KeyFileExists {
            path: PathBuf::from("k"),
        },
        TokenError::KeyFileUnwritable {
            path: PathBuf::from("k"),
            error: std::io::Error::other("x"),
        },
        TokenError::KeyGenerationFailed {
            problem: "x".to_owned(),
        },
        TokenError::SigningFailed {
            problem: "x".to_owned(),
        },
    ];
    let mut reasons: Vec<_> = errors.iter().map(TokenError::reason).collect();
    for error in &errors {
        let message = error.to_string();
        assert!(!message.ends_with('.'), "{message}");
        assert!(!message.chars().next().unwrap().is_uppercase(), "{message}");
        assert!(
            error
                .reason()
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
        );
    }
    reasons.sort_unstable();
    reasons.dedup();
    assert_eq!(reasons.len(), errors.len());
}

proptest! {
    #[test]
    fn any_text_as_a_token_is_refused_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let public = PublicKey::parse("ed25519:11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo").unwrap();
        let text = String::from_utf8_lossy(&bytes);
        prop_assert!(verify(&text, std::slice::from_ref(&public), NOW).is_err());
    }

    #[test]
    fn any_three_part_text_is_refused_without_panicking(
        header in "[A-Za-z0-9_-]{0,40}",
        claims in "[A-Za-z0-9_-]{0,80}",
        signature in "[A-Za-z0-9_-]{0,90}",
    ) {
        let public = PublicKey::parse("ed25519:11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo").unwrap();
        let token = format!("{header}.{claims}.{signature}");
        prop_assert!(verify(&token, std::slice::from_ref(&public), NOW).is_err());
    }

    #[test]
    fn any_public_key_text_is_refused_or_parsed_without_panicking(text in ".{0,80}") {
        let _ = PublicKey::parse(&text);
        let _ = PublicKey::parse(&format!("ed25519:{text}"));
    }
}

/// RFC 8037 appendix A.4: the example JWS, signed with the example key of A.1. Its signature
/// verifies, so the library agrees with the RFC; its payload is a sentence, not claims.
#[test]
fn verifies_the_rfc_8037_example_signature_then_refuses_its_payload() {
    let rfc_key = PublicKey::parse("ed25519:11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo").unwrap();
    let example = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg";
    let error = verify(example, std::slice::from_ref(&rfc_key), NOW).unwrap_err();
    assert_eq!(error.reason(), "malformed", "{error:?}");
    let other = new_key().public_key();
    assert_eq!(
        verify(example, &[other], NOW).unwrap_err().reason(),
        "bad_signature"
    );
}

#[test]
fn refuses_a_token_without_an_id() {
    let key = new_key();
    for claims in [
        serde_json::json!({"sub": "human:alice", "iat": now_seconds(), "exp": now_seconds() + 60}),
        serde_json::json!({"sub": "human:alice", "iat": now_seconds(), "exp": now_seconds() + 60, "jti": ""}),
    ] {
        let token = hand_signed_exactly(&key, &claims);
        let error = verify(&token, &[key.public_key()], NOW).unwrap_err();
        assert_eq!(error.reason(), "missing_claim", "{claims}");
        assert!(error.to_string().contains("`jti`"), "{error}");
    }
}

#[test]
fn refuses_a_token_whose_id_approver_revoke_could_not_name() {
    // Found by a first-time user: such a token signed in, and could not be revoked alone.
    let key = new_key();
    for jti in [
        "abc",
        "tok_ABCDEFGHIJKLMNOPQRST",
        "tok_aaaaaaaaaaaaaaaaaaa1",
        " tok_aaaaaaaaaaaaaaaaaaaa",
    ] {
        let claims = serde_json::json!({"sub": "human:alice", "iat": now_seconds(), "exp": now_seconds() + 60, "jti": jti});
        let token = hand_signed_exactly(&key, &claims);
        let error = verify(&token, &[key.public_key()], NOW).unwrap_err();
        assert_eq!(error.reason(), "malformed", "{jti}");
        assert!(error.to_string().contains("not a token id"), "{error}");
        // `approver revoke` could never name this exact id.
        assert!(!super::revocable_id(jti).is_ok_and(|id| id == jti), "{jti}");
    }
    let claims = serde_json::json!({"sub": "human:alice", "iat": now_seconds(), "exp": now_seconds() + 60, "jti": "tok_abcdefghijklmnopqr27"});
    let token = hand_signed_exactly(&key, &claims);
    assert!(verify(&token, &[key.public_key()], NOW).is_ok());
}

#[test]
fn honours_not_before() {
    let key = new_key();
    let claims = |nbf: i64| serde_json::json!({"sub": "human:alice", "iat": now_seconds(), "exp": now_seconds() + 3600, "nbf": nbf});
    let early = hand_signed(&key, &claims(now_seconds() + 600));
    let error = verify(&early, &[key.public_key()], NOW).unwrap_err();
    assert_eq!(error.reason(), "not_yet_valid");
    assert!(error.to_string().contains("not valid before"), "{error}");
    // Within the clock skew, and once the time has come, it verifies.
    let skewed = hand_signed(&key, &claims(now_seconds() + 30));
    assert!(verify(&skewed, &[key.public_key()], NOW).is_ok());
    assert!(verify(&early, &[key.public_key()], later(Duration::from_secs(600))).is_ok());
}

#[test]
fn refuses_group_names_with_spaces_at_issue_and_in_a_token() {
    let key = new_key();
    for group in ["fin ance", " finance", "finance\u{200b}x", "finance\n"] {
        let groups = vec![group.to_owned()];
        let error = issue(&key, "human:alice", &groups, HOUR, NOW).unwrap_err();
        assert_eq!(error.reason(), "invalid_group", "{group:?}");
        assert!(!error.to_string().contains('\n'), "{error}");
        let token = hand_signed(
            &key,
            &serde_json::json!({"sub": "human:alice", "groups": [group], "iat": now_seconds(), "exp": now_seconds() + 60}),
        );
        assert_eq!(
            verify(&token, &[key.public_key()], NOW)
                .unwrap_err()
                .reason(),
            "malformed",
            "{group:?}"
        );
    }
}
