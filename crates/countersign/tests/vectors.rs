//! The shared number vectors (`tests/vectors/numbers.json`), through the kernel's two entry
//! points: JSON text (`ActionRequest::from_json_text`, what the Python and Node bindings use)
//! and typed Rust values (`ActionRequest::new`). The Python binding's `test_numbers.py` and the
//! Node binding's `numbers.test.js` read the same file and must agree on every hash.

use countersign::canonical::{self, CanonicalError};
use countersign::store::MemoryStore;
use countersign::{ActionRequest, Control, ControlError, Policy, Principal, StaticIdentity};
use serde::Deserialize;

const VECTORS: &str = include_str!("vectors/numbers.json");

#[derive(Deserialize)]
struct File {
    action: String,
    principal: String,
    vectors: Vec<Vector>,
}

#[derive(Deserialize)]
struct Vector {
    input: String,
    canonical: Option<String>,
    action_hash: Option<String>,
    refused: Option<String>,
}

/// `n` as a Rust integer, for the typed path.
#[derive(serde::Serialize)]
struct Integer {
    n: i128,
}

fn control(file: &File) -> Control {
    let policy = Policy::load(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors/numbers.policy.yaml")
            .as_path(),
    )
    .expect("the vectors' policy loads");
    Control::builder(policy, MemoryStore::new())
        .identity(StaticIdentity::new(
            Principal::new(file.principal.as_str()).expect("principal"),
        ))
        .build()
}

/// The hash, or the canonical reason of the refusal, the kernel gives `request`.
fn outcome(control: &Control, request: &ActionRequest) -> Result<String, String> {
    match control.evaluate(request) {
        Ok(evaluation) => Ok(evaluation.action_hash.as_str().to_owned()),
        Err(ControlError::InvalidArguments { source, .. }) => Err(source.reason().to_owned()),
        Err(other) => panic!("unexpected refusal {other}"),
    }
}

#[test]
fn every_number_vector_holds_on_the_text_and_the_typed_path() {
    let file: File = serde_json::from_str(VECTORS).expect("numbers.json is JSON");
    let control = control(&file);
    assert!(file.vectors.len() >= 20, "the vector file lost its vectors");
    let mut typed = 0;
    for vector in &file.vectors {
        let expected = match (&vector.action_hash, &vector.refused) {
            (Some(hash), None) => Ok(hash.clone()),
            (None, Some(reason)) => Err(reason.clone()),
            _ => panic!("vector {} needs action_hash or refused", vector.input),
        };
        let arguments = format!("{{\"n\":{}}}", vector.input);
        let text = ActionRequest::from_json_text(file.action.as_str(), &arguments);
        assert_eq!(outcome(&control, &text), expected, "text {}", vector.input);
        let canonical_text = canonical::parse_canonical(&arguments)
            .map(|json| json.as_str().to_owned())
            .map_err(|error: CanonicalError| error.reason().to_owned());
        let expected_text = match (&vector.canonical, &vector.refused) {
            (Some(text), None) => Ok(format!("{{\"n\":{text}}}")),
            (None, Some(reason)) => Err(reason.clone()),
            _ => unreachable!("checked above"),
        };
        assert_eq!(canonical_text, expected_text, "canonical {}", vector.input);
        // An integer literal, sent as a Rust integer, meets the same rule.
        if let Ok(n) = vector.input.parse::<i128>() {
            typed += 1;
            let request = ActionRequest::new(file.action.as_str(), &Integer { n });
            assert_eq!(
                outcome(&control, &request),
                expected,
                "typed {}",
                vector.input
            );
        }
    }
    assert!(
        typed >= 10,
        "too few integer vectors reached the typed path: {typed}"
    );
}

const TEXT_VECTORS: &str = include_str!("vectors/text.json");

#[derive(Deserialize)]
struct TextFile {
    action: String,
    principal: String,
    vectors: Vec<TextVector>,
}

#[derive(Deserialize)]
struct TextVector {
    input: Option<String>,
    input_hex: Option<String>,
    canonical: Option<String>,
    refused: Option<String>,
    note: String,
}

#[test]
fn every_text_vector_holds_on_the_text_path_and_in_the_strict_reader() {
    let file: TextFile = serde_json::from_str(TEXT_VECTORS).expect("text.json is JSON");
    let control = control(&File {
        action: file.action.clone(),
        principal: file.principal.clone(),
        vectors: Vec::new(),
    });
    assert!(file.vectors.len() >= 13, "the vector file lost its vectors");
    let mut hashes: std::collections::BTreeMap<String, String> = Default::default();
    for vector in &file.vectors {
        let expected = match (&vector.canonical, &vector.refused) {
            (Some(text), None) => Ok(text.clone()),
            (None, Some(reason)) => Err(reason.clone()),
            _ => panic!("vector `{}` needs canonical or refused", vector.note),
        };
        let bytes = match (&vector.input, &vector.input_hex) {
            (Some(text), None) => text.as_bytes().to_vec(),
            (None, Some(hex_text)) => hex::decode(hex_text).expect("hex"),
            _ => panic!("vector `{}` needs input or input_hex", vector.note),
        };
        // The strict reader every edge uses (bytes, so raw bytes meet it as the gateway's do).
        let read = countersign::json::read_slice(&bytes)
            .map(|value| {
                canonical::to_canonical(&value)
                    .expect("what the reader accepts has a canonical form")
                    .as_str()
                    .to_owned()
            })
            .map_err(|error| error.reason().to_owned());
        assert_eq!(read, expected, "reader: {}", vector.note);
        // The text path of the bindings (`from_json_text`), and the hash: equal canonical text,
        // equal action hash.
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let request = ActionRequest::from_json_text(file.action.as_str(), text);
            match (outcome(&control, &request), &expected) {
                (Ok(hash), Ok(canonical)) => {
                    if let Some(earlier) = hashes.insert(canonical.clone(), hash.clone()) {
                        assert_eq!(earlier, hash, "same canonical, same hash: {}", vector.note);
                    }
                }
                (Err(reason), Err(expected)) => assert_eq!(&reason, expected, "{}", vector.note),
                (got, expected) => panic!("{}: {got:?} but expected {expected:?}", vector.note),
            }
        }
    }
    // Past 4 MiB (generated, not stored): `too_large` on both paths, before parsing.
    let big = format!("{{\"s\":\"{}\"}}", "a".repeat(canonical::MAX_TEXT_BYTES));
    assert_eq!(
        countersign::json::read(&big).unwrap_err().reason(),
        "too_large"
    );
    assert_eq!(
        outcome(
            &control,
            &ActionRequest::from_json_text(file.action.as_str(), &big)
        ),
        Err("too_large".to_owned())
    );
}
