//! Signed notes against the vectors of Go's `golang.org/x/mod/sumdb/note` tests
//! (`crates/countersign/note-vectors/sumdb-note.json`, source and commit inside it).

use super::*;

fn vectors() -> serde_json::Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/note-vectors/sumdb-note.json"
    ))
    .expect("note-vectors/sumdb-note.json is checked in");
    serde_json::from_str(&text).expect("the vectors parse")
}

fn text_of<'a>(vectors: &'a serde_json::Value, pointer: &str) -> &'a str {
    vectors
        .pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .unwrap_or_else(|| panic!("vector {pointer} is text"))
}

/// Peter's signing key from its Go signer key: `PRIVATE+KEY+<name>+<id>+<base64(0x01 || seed)>`.
fn peter_signing_key(vectors: &serde_json::Value) -> SigningKey {
    let signer_key = text_of(vectors, "/peter/signer_key");
    let base64 = signer_key.splitn(5, '+').nth(4).expect("key part");
    let bytes = STANDARD.decode(base64).expect("base64");
    assert_eq!(bytes[0], ALGORITHM_ED25519);
    SigningKey::from_seed(<[u8; 32]>::try_from(&bytes[1..]).expect("32-byte seed"))
}

fn enoch_signing_key(vectors: &serde_json::Value) -> SigningKey {
    let seed = hex::decode(text_of(vectors, "/enoch/seed_hex")).expect("hex");
    SigningKey::from_seed(<[u8; 32]>::try_from(seed.as_slice()).expect("32 bytes"))
}

fn verifier(vectors: &serde_json::Value, who: &str) -> NoteVerifier {
    NoteVerifier::parse(text_of(vectors, &format!("/{who}/verifier_key")))
        .expect("the published verifier key parses")
}

#[test]
fn derives_the_published_key_ids_and_verifier_keys() {
    let vectors = vectors();
    for (who, key) in [
        ("peter", peter_signing_key(&vectors)),
        ("enoch", enoch_signing_key(&vectors)),
    ] {
        let name = text_of(&vectors, &format!("/{who}/name"));
        let made = NoteVerifier::new(name, key.public_key()).expect("valid name");
        assert_eq!(
            format!("{:08x}", made.key_id()),
            text_of(&vectors, &format!("/{who}/key_id"))
        );
        assert_eq!(
            made.to_string(),
            text_of(&vectors, &format!("/{who}/verifier_key"))
        );
        assert_eq!(made, verifier(&vectors, who));
    }
}

#[test]
fn signs_exactly_as_go_does() {
    let vectors = vectors();
    let text = text_of(&vectors, "/text");
    let signed = sign(text, "PeterNeumann", &peter_signing_key(&vectors)).expect("signs");
    assert_eq!(signed, text_of(&vectors, "/signed_by_peter"));
    // Ed25519 is deterministic: the second signer's line is the published one too.
    let enoch = sign(text, "EnochRoot", &enoch_signing_key(&vectors)).expect("signs");
    assert!(enoch.ends_with(text_of(&vectors, "/enoch/signature_line")));
}

#[test]
fn opens_a_published_note_and_keeps_other_signatures_unverified() {
    let vectors = vectors();
    let both = text_of(&vectors, "/signed_by_both");
    let note = open(both.as_bytes(), &verifier(&vectors, "peter")).expect("opens");
    assert_eq!(note.text, text_of(&vectors, "/text"));
    assert_eq!(note.verified.name, "PeterNeumann");
    assert_eq!(note.verified.key_id, 0xc74f20a3);
    assert_eq!(note.unverified.len(), 1);
    assert_eq!(note.unverified[0].name, "EnochRoot");
    assert_eq!(note.unverified[0].key_id, 0xaf0cfe78);
    let note = open(both.as_bytes(), &verifier(&vectors, "enoch")).expect("opens");
    assert_eq!(note.verified.name, "EnochRoot");
}

#[test]
fn refuses_a_note_signed_by_another_key() {
    let vectors = vectors();
    let peter_only = text_of(&vectors, "/signed_by_peter");
    let error = open(peter_only.as_bytes(), &verifier(&vectors, "enoch")).expect_err("refused");
    assert_eq!(
        error,
        NoteError::NoVerifiedSignature {
            name: "EnochRoot".to_owned(),
            key_id: 0xaf0cfe78,
            found: "PeterNeumann+c74f20a3".to_owned(),
        }
    );
    // Another key under the same name has another key id: still not a signature by it.
    let impostor = NoteVerifier::new("PeterNeumann", enoch_signing_key(&vectors).public_key())
        .expect("valid name");
    assert!(matches!(
        open(peter_only.as_bytes(), &impostor),
        Err(NoteError::NoVerifiedSignature { .. })
    ));
}

#[test]
fn refuses_a_changed_signature_or_text() {
    let vectors = vectors();
    let peter = verifier(&vectors, "peter");
    assert_eq!(
        open(text_of(&vectors, "/invalid_signature").as_bytes(), &peter),
        Err(NoteError::InvalidSignature {
            name: "PeterNeumann".to_owned(),
            key_id: 0xc74f20a3
        })
    );
    let changed = text_of(&vectors, "/signed_by_peter").replacen("cryptography", "Cryptography", 1);
    assert!(matches!(
        open(changed.as_bytes(), &peter),
        Err(NoteError::InvalidSignature { .. })
    ));
}

#[test]
fn refuses_every_published_malformed_note() {
    let vectors = vectors();
    let peter = verifier(&vectors, "peter");
    let malformed = vectors["malformed_notes"].as_array().expect("list");
    assert_eq!(malformed.len(), 7);
    for note in malformed {
        let note = note.as_str().expect("text");
        assert!(
            matches!(
                open(note.as_bytes(), &peter),
                Err(NoteError::Malformed { .. })
            ),
            "{note:?}"
        );
    }
    let mut not_utf8 = vec![0xff];
    not_utf8.extend_from_slice(text_of(&vectors, "/signed_by_peter").as_bytes());
    assert!(matches!(
        open(&not_utf8, &peter),
        Err(NoteError::Malformed { .. })
    ));
}

#[test]
fn refuses_every_mangled_verifier_key() {
    let vectors = vectors();
    let key = text_of(&vectors, "/peter/verifier_key");
    // As Go's TestNewVerifier: every proper substring, and every byte moved by one.
    let bytes = key.as_bytes();
    for start in 0..=bytes.len() {
        for end in start + 1..=bytes.len() {
            if start == 0 && end == bytes.len() {
                continue;
            }
            let part = &key[start..end];
            assert!(NoteVerifier::parse(part).is_err(), "{part:?}");
        }
    }
    for index in 0..bytes.len() {
        let mut changed = bytes.to_vec();
        changed[index] += 1;
        let changed = String::from_utf8(changed).expect("ASCII stays UTF-8");
        assert!(NoteVerifier::parse(&changed).is_err(), "{changed:?}");
    }
    for bad in vectors["bad_verifier_keys"].as_array().expect("list") {
        let bad = bad.as_str().expect("text");
        assert!(NoteVerifier::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn refuses_bad_names_and_text() {
    let vectors = vectors();
    let key = peter_signing_key(&vectors);
    for name in ["", "a+b", "bad name", "tab\tname"] {
        assert_eq!(
            sign("text\n", name, &key),
            Err(NoteError::InvalidKeyName {
                name: name.to_owned()
            })
        );
    }
    assert!(matches!(
        sign("abc", "PeterNeumann", &key),
        Err(NoteError::Malformed { .. })
    ));
    assert!(matches!(
        sign("a\u{7}b\n", "PeterNeumann", &key),
        Err(NoteError::Malformed { .. })
    ));
}
