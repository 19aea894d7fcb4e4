//! Every input of every fuzz target's corpus (`corpus/<target>/`) and every regression input
//! (`regressions/<target>/`), replayed through the target's body as an ordinary test: how CI runs
//! the targets, with no fuzzer and no instrumented build (docs/fuzzing.md).

use std::path::{Path, PathBuf};

use countersign_fuzz::TARGETS;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files in `folder`, sorted; none when it does not exist.
fn inputs(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Run `target` on each of its corpus and regression inputs; fail naming every input that
/// panicked.
fn replay(target: &str) {
    let run = TARGETS
        .iter()
        .find(|candidate| candidate.name == target)
        .map(|found| found.run)
        .unwrap_or_else(|| panic!("no target `{target}` in countersign_fuzz::TARGETS"));
    let corpus = inputs(&crate_dir().join("corpus").join(target));
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{target}/ is empty: seed it (docs/fuzzing.md)"
    );
    let regressions = inputs(&crate_dir().join("regressions").join(target));
    let mut failed = Vec::new();
    for path in corpus.iter().chain(&regressions) {
        let data =
            std::fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "`{target}` failed on {} of {} inputs: {failed:?}",
        failed.len(),
        corpus.len() + regressions.len()
    );
    eprintln!(
        "{target}: {} corpus and {} regression inputs replayed",
        corpus.len(),
        regressions.len()
    );
}

#[test]
fn answer_replays_its_corpus() {
    replay("answer");
}

#[test]
fn ids_replays_its_corpus() {
    replay("ids");
}

#[test]
fn json_replays_its_corpus() {
    replay("json");
}

#[test]
fn jsonrpc_replays_its_corpus() {
    replay("jsonrpc");
}

#[test]
fn policy_replays_its_corpus() {
    replay("policy");
}

#[test]
fn store_url_replays_its_corpus() {
    replay("store_url");
}

#[test]
fn token_replays_its_corpus() {
    replay("token");
}

/// Every binary in `fuzz_targets/` has a body in [`TARGETS`] and a test above, and the other
/// way round, so a target added later is replayed too.
#[test]
fn every_fuzz_target_is_listed_and_replayed() {
    let mut binaries: Vec<String> = inputs(&crate_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|path| path.file_stem()?.to_str().map(str::to_owned))
        .collect();
    binaries.sort();
    let mut listed: Vec<String> = TARGETS
        .iter()
        .map(|target| target.name.to_owned())
        .collect();
    listed.sort();
    assert_eq!(
        binaries, listed,
        "fuzz_targets/*.rs and countersign_fuzz::TARGETS differ"
    );
    let this_file = include_str!("replay.rs");
    for name in &listed {
        assert!(
            this_file.contains(&format!("replay(\"{name}\");")),
            "no replay test for `{name}` in fuzz/tests/replay.rs"
        );
    }
    let manifest =
        std::fs::read_to_string(crate_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for name in &listed {
        assert!(
            manifest.contains(&format!("path = \"fuzz_targets/{name}.rs\"")),
            "fuzz/Cargo.toml has no [[bin]] for `{name}`"
        );
    }
}
