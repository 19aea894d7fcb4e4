//! Checkpoints: the C2SP text, signing under the origin, and refusals.

use super::*;
use crate::evidence::merkle::Tree;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_seed([seed; 32])
}

fn checkpoint_of(size: usize) -> Checkpoint {
    let mut tree = Tree::new();
    for index in 0..size {
        tree.push_leaf(format!("receipt {index}").as_bytes());
    }
    Checkpoint {
        origin: "countersign.test/log".to_owned(),
        size: tree.size(),
        root: tree.root(),
        extensions: Vec::new(),
    }
}

#[test]
fn writes_the_c2sp_text() {
    let checkpoint = checkpoint_of(3);
    assert_eq!(
        checkpoint.text(),
        format!("countersign.test/log\n3\n{}\n", checkpoint.root.to_base64())
    );
    // The example of c2sp.org/tlog-checkpoint reads back.
    let example =
        "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
    let parsed = Checkpoint::parse(example).expect("the spec's example parses");
    assert_eq!(parsed.origin, "example.com/behind-the-sofa");
    assert_eq!(parsed.size, 20_852_163);
    assert_eq!(parsed.text(), example);
}

#[test]
fn a_signed_checkpoint_opens_under_its_key() {
    let checkpoint = checkpoint_of(5);
    let signed = sign(&checkpoint, &key(1)).expect("signs");
    let (opened, note) = open(signed.as_bytes(), &key(1).public_key()).expect("opens");
    assert_eq!(opened, checkpoint);
    assert_eq!(note.verified.name, checkpoint.origin);
    assert!(note.unverified.is_empty());
}

#[test]
fn a_checkpoint_signed_by_one_key_fails_under_another() {
    let signed = sign(&checkpoint_of(5), &key(1)).expect("signs");
    let error = open(signed.as_bytes(), &key(2).public_key()).expect_err("another key");
    assert!(
        matches!(
            error,
            CheckpointError::Note(NoteError::NoVerifiedSignature { .. })
        ),
        "{error:?}"
    );
}

#[test]
fn an_edited_checkpoint_fails() {
    let checkpoint = checkpoint_of(5);
    let signed = sign(&checkpoint, &key(1)).expect("signs");
    let public = key(1).public_key();
    // A larger size, another root, another origin: each breaks the signature or its key name.
    let bigger = signed.replacen("\n5\n", "\n6\n", 1);
    assert!(matches!(
        open(bigger.as_bytes(), &public),
        Err(CheckpointError::Note(NoteError::InvalidSignature { .. }))
    ));
    let other_root = checkpoint_of(4).root.to_base64();
    let rerooted = signed.replacen(&checkpoint.root.to_base64(), &other_root, 1);
    assert!(open(rerooted.as_bytes(), &public).is_err());
    let renamed = signed.replacen("countersign.test/log\n", "countersign.test/other\n", 1);
    assert!(matches!(
        open(renamed.as_bytes(), &public),
        Err(CheckpointError::Note(NoteError::NoVerifiedSignature { .. }))
    ));
    // Every single byte changed anywhere: never opens.
    let bytes = signed.as_bytes();
    for index in 0..bytes.len() {
        let mut changed = bytes.to_vec();
        changed[index] ^= 0x01;
        assert!(open(&changed, &public).is_err(), "byte {index} changed");
    }
}

#[test]
fn refuses_text_that_is_not_a_checkpoint() {
    let root = checkpoint_of(1).root.to_base64();
    for (text, problem) in [
        (format!("log\n1\n{root}"), "newline"),
        (format!("\n1\n{root}\n"), "origin"),
        (format!("a log\n1\n{root}\n"), "origin"),
        (format!("log\n01\n{root}\n"), "size"),
        (format!("log\n-1\n{root}\n"), "size"),
        (format!("log\n18446744073709551616\n{root}\n"), "size"),
        ("log\n1\n".to_owned(), "root"),
        ("log\n1\nAAAA\n".to_owned(), "root"),
        (format!("log\n1\n{root}\n\n"), "extension"),
    ] {
        match Checkpoint::parse(&text) {
            Err(CheckpointError::Malformed { problem: found }) => {
                assert!(found.contains(problem), "{text:?}: {found}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    let with_extension = format!("log\n0\n{root}\nextension line\n");
    let parsed = Checkpoint::parse(&with_extension).expect("extensions are allowed");
    assert_eq!(parsed.extensions, ["extension line"]);
    assert_eq!(parsed.text(), with_extension);
}
