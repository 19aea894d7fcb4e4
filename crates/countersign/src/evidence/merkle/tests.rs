//! RFC 6962 / 9162 tree hashing and proofs, against the vectors published with
//! transparency-dev/merkle (`crates/countersign/merkle-vectors/`, source and commit in its
//! README) and property tests.

use super::*;
use proptest::prelude::*;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/merkle-vectors");

fn hex_hash(text: &str) -> NodeHash {
    let bytes = hex::decode(text).expect("vector hex decodes");
    NodeHash::from_slice(&bytes).expect("vector hash is 32 bytes")
}

fn hex_list(value: &serde_json::Value) -> Vec<NodeHash> {
    value
        .as_array()
        .expect("a list of hashes")
        .iter()
        .map(|item| hex_hash(item.as_str().expect("hex text")))
        .collect()
}

fn reference() -> serde_json::Value {
    let text = std::fs::read_to_string(format!("{VECTORS}/reference.json"))
        .expect("merkle-vectors/reference.json is checked in");
    serde_json::from_str(&text).expect("reference.json parses")
}

fn reference_tree() -> Tree {
    let mut tree = Tree::new();
    for input in reference()["leaf_inputs"].as_array().expect("leaf_inputs") {
        let bytes = hex::decode(input.as_str().expect("hex")).expect("hex decodes");
        tree.push_leaf(&bytes);
    }
    tree
}

#[test]
fn hashes_leaves_and_nodes_as_rfc6962() {
    let vectors = reference();
    let hasher = &vectors["hasher"];
    assert_eq!(
        leaf_hash(b"").to_hex(),
        hasher["empty_leaf"].as_str().expect("hex")
    );
    assert_eq!(
        leaf_hash(b"L123456").to_hex(),
        hasher["leaf_L123456"].as_str().expect("hex")
    );
    // `HashChildren("N123", "N456")` hashes its raw inputs: replay it byte for byte.
    let mut hasher_bytes = Sha256::new();
    hasher_bytes.update([0x01]);
    hasher_bytes.update(b"N123N456");
    assert_eq!(
        hex::encode(hasher_bytes.finalize()),
        hasher["node_N123_N456"].as_str().expect("hex")
    );
    assert_eq!(
        empty_root().to_hex(),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn reference_tree_has_the_published_leaves_and_roots() {
    let vectors = reference();
    let tree = reference_tree();
    let leaves = hex_list(&vectors["leaf_hashes"]);
    for (index, expected) in leaves.iter().enumerate() {
        assert_eq!(tree.leaf(index as u64), Some(*expected), "leaf {index}");
    }
    let roots = hex_list(&vectors["root_hashes"]);
    assert_eq!(roots.len(), 9);
    for (size, expected) in roots.iter().enumerate() {
        assert_eq!(
            tree.root_at(size as u64).expect("size within the tree"),
            *expected,
            "root of size {size}"
        );
    }
    assert_eq!(tree.root(), roots[8]);
}

#[test]
fn makes_and_verifies_the_published_inclusion_proofs() {
    let vectors = reference();
    let tree = reference_tree();
    let roots = hex_list(&vectors["root_hashes"]);
    for case in vectors["inclusion_proofs"].as_array().expect("list") {
        let index = case["leaf_index0"].as_u64().expect("index");
        let size = case["size"].as_u64().expect("size");
        let expected = hex_list(&case["proof"]);
        let made = tree.inclusion_proof(index, size).expect("proof");
        assert_eq!(made, expected, "inclusion proof of {index} in {size}");
        let leaf = tree.leaf(index).expect("leaf");
        verify_inclusion(index, size, &leaf, &made, &roots[size as usize])
            .expect("published proof verifies");
    }
}

#[test]
fn makes_and_verifies_the_published_consistency_proofs() {
    let vectors = reference();
    let tree = reference_tree();
    let roots = hex_list(&vectors["root_hashes"]);
    for case in vectors["consistency_proofs"].as_array().expect("list") {
        let old_size = case["size1"].as_u64().expect("size1");
        let new_size = case["size2"].as_u64().expect("size2");
        let expected = hex_list(&case["proof"]);
        let made = tree.consistency_proof(old_size, new_size).expect("proof");
        assert_eq!(made, expected, "consistency proof {old_size} -> {new_size}");
        verify_consistency(
            old_size,
            new_size,
            &made,
            &roots[old_size as usize],
            &roots[new_size as usize],
        )
        .expect("published proof verifies");
    }
}

/// A probe's base64 field as a hash; `None` when it is absent or null (such a probe must be a
/// `wantErr` one). Go's verifier takes any byte string; a value that is not 32 bytes (`"don't
/// care"` roots, `"WrongLeaf"`, empty garbage in a proof) cannot be a `NodeHash`, so it stands in
/// as the leaf hash of its bytes: still 32 bytes that equal only what Go would find equal.
fn probe_hash(value: &serde_json::Value) -> Option<NodeHash> {
    let bytes = STANDARD.decode(value.as_str()?).ok()?;
    Some(NodeHash::from_slice(&bytes).unwrap_or_else(|| leaf_hash(&bytes)))
}

fn probe_proof(value: &serde_json::Value) -> Option<Vec<NodeHash>> {
    match value {
        serde_json::Value::Null => Some(Vec::new()),
        serde_json::Value::Array(items) => items.iter().map(probe_hash).collect(),
        _ => None,
    }
}

/// Every `*.json` file under `folder`, recursively, in name order.
fn probe_files(folder: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("vector folder reads") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Run every probe in `folder` through `check` (None: the probe's inputs cannot be expressed)
/// and compare with its `wantErr`.
fn run_probes(folder: &str, check: impl Fn(&serde_json::Value) -> Option<Result<(), ProofError>>) {
    let files = probe_files(&std::path::Path::new(VECTORS).join(folder));
    assert!(files.len() > 50, "the {folder} probes are checked in");
    let (mut passes, mut failures) = (0, 0);
    for file in files {
        let text = std::fs::read_to_string(&file).expect("probe reads");
        let probe: serde_json::Value = serde_json::from_str(&text).expect("probe parses");
        let want_error = probe["wantErr"].as_bool().expect("wantErr");
        let result = check(&probe);
        match (want_error, result) {
            (false, Some(Ok(()))) => passes += 1,
            (true, None | Some(Err(_))) => failures += 1,
            (want_error, result) => {
                panic!("{}: wantErr {want_error}, got {result:?}", file.display())
            }
        }
    }
    assert!(
        passes > 0 && failures > 0,
        "{passes} passes, {failures} refusals"
    );
}

#[test]
fn agrees_with_every_published_inclusion_probe() {
    run_probes("inclusion", |probe| {
        let proof = probe_proof(&probe["proof"])?;
        Some(verify_inclusion(
            probe["leafIdx"].as_u64()?,
            probe["treeSize"].as_u64()?,
            // Go checks a leaf hash's length first: one that is not 32 bytes is refused.
            &NodeHash::parse_base64(probe["leafHash"].as_str()?).ok()?,
            &proof,
            &probe_hash(&probe["root"])?,
        ))
    });
}

#[test]
fn agrees_with_every_published_consistency_probe() {
    run_probes("consistency", |probe| {
        let proof = probe_proof(&probe["proof"])?;
        Some(verify_consistency(
            probe["size1"].as_u64()?,
            probe["size2"].as_u64()?,
            &proof,
            &probe_hash(&probe["root1"])?,
            &probe_hash(&probe["root2"])?,
        ))
    });
}

#[test]
fn refuses_impossible_positions() {
    let tree = reference_tree();
    assert_eq!(
        tree.inclusion_proof(8, 8),
        Err(ProofError::IndexOutOfRange { index: 8, size: 8 })
    );
    assert_eq!(
        tree.inclusion_proof(0, 9),
        Err(ProofError::SizeOutOfRange {
            size: 9,
            available: 8
        })
    );
    assert_eq!(
        tree.consistency_proof(0, 3),
        Err(ProofError::BadSizes {
            old_size: 0,
            new_size: 3
        })
    );
    assert_eq!(
        tree.consistency_proof(4, 3),
        Err(ProofError::BadSizes {
            old_size: 4,
            new_size: 3
        })
    );
    // Sizes near u64::MAX from an untrusted bundle are refused, never a panic.
    let leaf = leaf_hash(b"x");
    assert!(verify_inclusion(u64::MAX - 1, u64::MAX, &leaf, &[], &leaf).is_err());
    assert!(verify_inclusion(1 << 63, u64::MAX, &leaf, &[leaf; 3], &leaf).is_err());
    assert!(verify_consistency(u64::MAX - 1, u64::MAX, &[leaf], &leaf, &leaf).is_err());
}

#[test]
fn node_hash_base64_round_trips_and_refuses_other_lengths() {
    let hash = leaf_hash(b"receipt");
    assert_eq!(NodeHash::parse_base64(&hash.to_base64()), Ok(hash));
    assert!(NodeHash::parse_base64("AAAA").is_err());
    assert!(NodeHash::parse_base64("not base64!").is_err());
    let json = serde_json::to_string(&hash).expect("serializes");
    assert_eq!(
        serde_json::from_str::<NodeHash>(&json).expect("deserializes"),
        hash
    );
}

/// A tree of `count` distinct leaves.
fn tree_of(count: usize) -> Tree {
    let mut tree = Tree::new();
    for index in 0..count {
        tree.push_leaf(format!("leaf {index}").as_bytes());
    }
    tree
}

/// One way to damage a proof.
#[derive(Clone, Debug)]
enum Damage {
    /// Flip one bit of one byte of one hash.
    Flip { hash: usize, byte: usize, bit: u8 },
    /// Remove one hash.
    Delete { hash: usize },
    /// Swap two different hashes.
    Swap { first: usize, second: usize },
    /// Keep only the first `keep` hashes.
    Truncate { keep: usize },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 0..32_usize, 0..8_u8).prop_map(|(hash, byte, bit)| Damage::Flip {
            hash,
            byte,
            bit
        }),
        any::<usize>().prop_map(|hash| Damage::Delete { hash }),
        (any::<usize>(), any::<usize>()).prop_map(|(first, second)| Damage::Swap { first, second }),
        any::<usize>().prop_map(|keep| Damage::Truncate { keep }),
    ]
}

/// `proof` damaged, or `None` when this damage changes nothing (an empty proof, two equal
/// hashes swapped).
fn damaged(proof: &[NodeHash], damage: &Damage) -> Option<Vec<NodeHash>> {
    if proof.is_empty() {
        return None;
    }
    let mut out = proof.to_vec();
    match *damage {
        Damage::Flip { hash, byte, bit } => {
            let mut bytes = *out[hash % out.len()].as_bytes();
            bytes[byte] ^= 1 << bit;
            out[hash % proof.len()] = NodeHash::from_bytes(bytes);
        }
        Damage::Delete { hash } => {
            out.remove(hash % proof.len());
        }
        Damage::Swap { first, second } => {
            let (first, second) = (first % proof.len(), second % proof.len());
            if out[first] == out[second] {
                return None;
            }
            out.swap(first, second);
        }
        Damage::Truncate { keep } => out.truncate(keep % proof.len()),
    }
    Some(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_inclusion_proof_verifies(size in 1..200_u64, pick in any::<u64>()) {
        let tree = tree_of(size as usize);
        let index = pick % size;
        let proof = tree.inclusion_proof(index, size).expect("proof");
        let leaf = tree.leaf(index).expect("leaf");
        prop_assert_eq!(verify_inclusion(index, size, &leaf, &proof, &tree.root()), Ok(()));
    }

    #[test]
    fn every_consistency_proof_verifies(new_size in 1..200_u64, pick in any::<u64>()) {
        let tree = tree_of(new_size as usize);
        let old_size = 1 + pick % new_size;
        let proof = tree.consistency_proof(old_size, new_size).expect("proof");
        let old_root = tree.root_at(old_size).expect("root");
        prop_assert_eq!(
            verify_consistency(old_size, new_size, &proof, &old_root, &tree.root()),
            Ok(())
        );
    }

    #[test]
    fn a_damaged_inclusion_proof_fails(size in 2..200_u64, pick in any::<u64>(), damage in damage()) {
        let tree = tree_of(size as usize);
        let index = pick % size;
        let proof = tree.inclusion_proof(index, size).expect("proof");
        let leaf = tree.leaf(index).expect("leaf");
        if let Some(bad) = damaged(&proof, &damage) {
            prop_assert!(verify_inclusion(index, size, &leaf, &bad, &tree.root()).is_err());
        }
        // The right proof for another leaf, a changed leaf or another root fails too.
        let other = (index + 1) % size;
        prop_assert!(verify_inclusion(other, size, &leaf, &proof, &tree.root()).is_err());
        let changed = leaf_hash(b"not this leaf");
        prop_assert!(verify_inclusion(index, size, &changed, &proof, &tree.root()).is_err());
        let smaller = tree.root_at(size - 1).expect("root");
        prop_assert!(verify_inclusion(index, size, &leaf, &proof, &smaller).is_err());
    }

    #[test]
    fn a_damaged_consistency_proof_fails(new_size in 2..200_u64, pick in any::<u64>(), damage in damage()) {
        let tree = tree_of(new_size as usize);
        let old_size = 1 + pick % (new_size - 1);
        let proof = tree.consistency_proof(old_size, new_size).expect("proof");
        let old_root = tree.root_at(old_size).expect("root");
        if let Some(bad) = damaged(&proof, &damage) {
            prop_assert!(verify_consistency(old_size, new_size, &bad, &old_root, &tree.root()).is_err());
        }
        // A log rewritten before the old size (one leaf changed) is not consistent with it.
        let mut forked = tree_of(new_size as usize);
        forked.leaves[(pick % old_size) as usize] = leaf_hash(b"rewritten");
        let forked_proof = forked.consistency_proof(old_size, new_size).expect("proof");
        prop_assert!(
            verify_consistency(old_size, new_size, &forked_proof, &old_root, &forked.root()).is_err()
        );
    }
}
