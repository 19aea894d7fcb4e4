//! Each rule, planted in a small workspace in a temporary folder: a clean tree passes, and each
//! kind of violation fails where it was planted.

use std::path::Path;

use super::layers::{KERNEL, LAYERS};
use super::{Rule, Violation, check};

/// A workspace with one kernel crate declaring every module of the layer table, each empty.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let tree = Tree {
            dir: tempfile::tempdir().expect("a temporary folder"),
        };
        tree.write(
            "Cargo.toml",
            &format!("[workspace]\nmembers = [\"{KERNEL}\"]\n"),
        );
        tree.write(
            &format!("{KERNEL}/Cargo.toml"),
            "[package]\nname = \"countersign\"\nversion = \"0.0.0\"\n\n[dependencies]\n",
        );
        tree.write(&format!("{KERNEL}/src/lib.rs"), &lib_rs(""));
        for module in LAYERS.iter().flat_map(|layer| layer.modules) {
            tree.write(
                &format!("{KERNEL}/src/{module}.rs"),
                &format!("//! The `{module}` module.\n"),
            );
        }
        tree
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create the folder");
        std::fs::write(path, text).expect("write the file");
    }

    fn kernel(&self, module_file: &str, text: &str) {
        self.write(&format!("{KERNEL}/src/{module_file}"), text);
    }

    fn violations(&self) -> Vec<Violation> {
        check(self.dir.path()).expect("tidy reads the tree")
    }

    /// The violations of one rule, as `(file, line)`.
    fn of(&self, rule: Rule) -> Vec<(String, usize)> {
        self.violations()
            .into_iter()
            .filter(|violation| violation.rule == rule)
            .map(|violation| (violation.file.display().to_string(), violation.line))
            .collect()
    }
}

/// The kernel's `lib.rs`: every module of the table, then `extra`.
fn lib_rs(extra: &str) -> String {
    let mut text = String::from("//! The kernel.\n");
    for module in LAYERS.iter().flat_map(|layer| layer.modules) {
        text.push_str(&format!("pub mod {module};\n"));
    }
    text.push_str(extra);
    text
}

fn in_kernel(file: &str) -> String {
    Path::new(KERNEL)
        .join("src")
        .join(file)
        .display()
        .to_string()
}

#[test]
fn passes_a_clean_tree() {
    let tree = Tree::new();
    tree.kernel(
        "control.rs",
        "//! Orchestration.\nuse crate::store::Store;\nuse crate::approval::ApprovalId;\npub fn run(_: &dyn Store) -> crate::clock::Timestamp { todo() }\n",
    );
    tree.kernel("store.rs", "use crate::evidence::Receipt;\n");
    assert_eq!(tree.violations(), Vec::new());
}

#[test]
fn refuses_a_use_that_reaches_up_a_layer() {
    let tree = Tree::new();
    tree.kernel("approval.rs", "//! Approvals.\nuse crate::store::Store;\n");
    assert_eq!(tree.of(Rule::Layers), vec![(in_kernel("approval.rs"), 2)]);
}

#[test]
fn refuses_a_path_in_an_expression_that_reaches_up() {
    let tree = Tree::new();
    tree.kernel(
        "effect.rs",
        "pub fn decide() {\n    let _ = crate::control::run();\n}\n",
    );
    assert_eq!(tree.of(Rule::Layers), vec![(in_kernel("effect.rs"), 2)]);
}

#[test]
fn refuses_a_reexport_that_reaches_up() {
    let tree = Tree::new();
    tree.kernel("evidence.rs", "pub use crate::audit::verify_store;\n");
    assert_eq!(tree.of(Rule::Layers), vec![(in_kernel("evidence.rs"), 1)]);
}

#[test]
fn refuses_a_path_in_a_macro_call_that_reaches_up() {
    let tree = Tree::new();
    tree.kernel(
        "display.rs",
        "pub fn show() {\n    println!(\"{:?}\", crate::control::DEFAULT_LEASE);\n}\n",
    );
    assert_eq!(tree.of(Rule::Layers), vec![(in_kernel("display.rs"), 2)]);
}

#[test]
fn follows_the_crate_roots_reexports_and_super() {
    let tree = Tree::new();
    tree.kernel("lib.rs", &lib_rs("pub use control::Control;\n"));
    tree.kernel("store.rs", "pub fn open(_: crate::Control) {}\n");
    tree.kernel("policy.rs", "//! Policy.\nmod load;\n");
    tree.kernel("policy/load.rs", "use super::super::store::Store;\n");
    assert_eq!(
        tree.of(Rule::Layers),
        vec![(in_kernel("policy/load.rs"), 1), (in_kernel("store.rs"), 1)]
    );
}

#[test]
fn refuses_a_cycle_inside_one_layer() {
    let tree = Tree::new();
    tree.kernel("clock.rs", "use crate::action::Action;\n");
    tree.kernel("action.rs", "\nuse crate::clock::Timestamp;\n");
    let cycles: Vec<Violation> = tree
        .violations()
        .into_iter()
        .filter(|violation| violation.message.contains("import cycle"))
        .collect();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
}

#[test]
fn ignores_test_code() {
    let tree = Tree::new();
    tree.kernel(
        "clock.rs",
        "#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod more {\n    use crate::control::Control;\n}\n",
    );
    tree.kernel("clock/tests.rs", "use crate::store::Store;\n");
    assert_eq!(tree.of(Rule::Layers), Vec::new());
}

#[test]
fn refuses_a_module_in_no_layer() {
    let tree = Tree::new();
    tree.kernel("lib.rs", &lib_rs("pub mod extra;\n"));
    tree.kernel("extra.rs", "");
    assert_eq!(tree.of(Rule::Layers), vec![(in_kernel("lib.rs"), 0)]);
}

#[test]
fn refuses_a_file_over_the_budget() {
    let tree = Tree::new();
    tree.kernel("token.rs", &"pub fn line() {}\n".repeat(801));
    assert_eq!(tree.of(Rule::Budget), vec![(in_kernel("token.rs"), 0)]);
}

#[test]
fn counts_no_test_lines_against_the_budget() {
    let tree = Tree::new();
    let code = "pub fn line() {}\n".repeat(800);
    let tests = format!(
        "#[cfg(test)]\nmod tests {{\n{}}}\n",
        "    fn case() {}\n".repeat(100)
    );
    tree.kernel(
        "token.rs",
        &format!("{code}{tests}#[cfg(test)]\nmod more;\n"),
    );
    tree.kernel("token/more.rs", &"fn case() {}\n".repeat(900));
    assert_eq!(tree.of(Rule::Budget), Vec::new());
}

#[test]
fn allows_only_the_named_files_over_the_budget() {
    let tree = Tree::new();
    let gateway = "crates/countersign-gateway";
    tree.write(
        "Cargo.toml",
        &format!("[workspace]\nmembers = [\"{KERNEL}\", \"{gateway}\"]\n"),
    );
    tree.write(
        &format!("{gateway}/Cargo.toml"),
        "[package]\nname = \"countersign-gateway\"\nversion = \"0.0.0\"\n\n[dependencies]\n",
    );
    tree.write(
        &format!("{gateway}/src/lib.rs"),
        "//! The gateway.\nmod session;\n",
    );
    tree.write(
        &format!("{gateway}/src/session.rs"),
        &"pub fn line() {}\n".repeat(900),
    );
    assert_eq!(tree.of(Rule::Budget), Vec::new());
}

#[test]
fn refuses_a_dangling_path_in_a_doc_and_in_a_doc_comment() {
    let tree = Tree::new();
    tree.write(
        "docs/ARCHITECTURE.md",
        "# Map\n\nThe clock is `crates/countersign/src/clock.rs`; see [the rules](../README.md).\nThe store is `crates/countersign/src/gone.rs`.\n",
    );
    tree.write("README.md", "Read [the map](docs/ARCHITECTURE.md#map).\n");
    tree.kernel(
        "store.rs",
        "//! Backends live in `store/sqlite.rs`; another project's `serde-saphyr/src/lib.rs`.\npub mod memory;\n",
    );
    tree.kernel(
        "store/memory.rs",
        "//! The memory store, not `store/sqlite.rs`: `store/memory.rs`.\n",
    );
    assert_eq!(
        tree.of(Rule::DocPaths),
        vec![
            (in_kernel("store/memory.rs"), 1),
            (in_kernel("store.rs"), 1),
            ("docs/ARCHITECTURE.md".to_owned(), 4),
        ]
    );
}

#[test]
fn refuses_an_ignored_test() {
    let tree = Tree::new();
    tree.write(
        &format!("{KERNEL}/tests/slow.rs"),
        "#[test]\nfn runs() {}\n\n#[test]\n#[ignore = \"slow\"]\nfn skipped() {}\n",
    );
    assert_eq!(
        tree.of(Rule::IgnoredTest),
        vec![(format!("{KERNEL}/tests/slow.rs"), 5)]
    );
}

#[test]
fn refuses_an_unused_dependency() {
    let tree = Tree::new();
    tree.write(
        &format!("{KERNEL}/Cargo.toml"),
        "[package]\nname = \"countersign\"\nversion = \"0.0.0\"\n\n[package.metadata.tidy]\nused-without-a-name = [\"feature-only\"]\n\n[dependencies]\nserde_json = \"1\"\nserde = \"1\"\nfeature-only = \"1\"\n\n[dev-dependencies]\nproptest = \"1\"\n",
    );
    tree.kernel(
        "clock.rs",
        "pub fn now() -> serde_json::Value { todo!() }\n",
    );
    tree.kernel(
        "action.rs",
        "/// ```\n/// proptest::proptest! {}\n/// ```\npub fn f() {}\n",
    );
    assert_eq!(
        tree.of(Rule::UnusedDependency),
        vec![(format!("{KERNEL}/Cargo.toml"), 10)]
    );
}

#[test]
fn refuses_a_kernel_item_path_a_doc_names_that_is_not_there() {
    let tree = Tree::new();
    tree.kernel(
        "clock.rs",
        "pub fn now() {}\npub mod manual {\n    pub struct Manual;\n}\n",
    );
    tree.kernel(
        "audit.rs",
        "pub use crate::evidence::Verifier;\npub async fn verify_store() {}\n",
    );
    tree.write(
        "docs/SPEC.md",
        "Time is `clock::now` and `clock::manual::Manual`; see `countersign::audit::{verify_store, Verifier}`.\nNot `clock::later`, nor `countersign::evidence::verify_store`; `serde_json::Value` is not ours.\n",
    );
    assert_eq!(
        tree.of(Rule::DocPaths),
        vec![
            ("docs/SPEC.md".to_owned(), 2),
            ("docs/SPEC.md".to_owned(), 2)
        ]
    );
}

#[test]
fn checks_a_crate_the_workspace_excludes_like_a_member() {
    let tree = Tree::new();
    tree.write(
        "Cargo.toml",
        &format!("[workspace]\nmembers = [\"{KERNEL}\"]\nexclude = [\"fuzz\", \"gone\"]\n"),
    );
    tree.write(
        "fuzz/Cargo.toml",
        "[package]\nname = \"countersign-fuzz\"\nversion = \"0.0.0\"\n\n[dependencies]\nafl = { version = \"1\", optional = true }\nbase64 = \"1\"\n\n[[bin]]\nname = \"json\"\npath = \"fuzz_targets/json.rs\"\n",
    );
    tree.write(
        "fuzz/src/lib.rs",
        "//! Bodies; see `fuzz/corpus/json.txt`.\n",
    );
    tree.write(
        "fuzz/fuzz_targets/json.rs",
        "fn main() {\n    afl::fuzz!(|data: &[u8]| {});\n}\n",
    );
    tree.write(
        "fuzz/tests/replay.rs",
        "#[test]\n#[ignore]\nfn replays() {}\n",
    );
    assert_eq!(
        tree.of(Rule::UnusedDependency),
        vec![("fuzz/Cargo.toml".to_owned(), 7)],
        "`afl`, named only in a binary, is used; `base64` is not"
    );
    assert_eq!(
        tree.of(Rule::DocPaths),
        vec![("fuzz/src/lib.rs".to_owned(), 1)]
    );
    assert_eq!(
        tree.of(Rule::IgnoredTest),
        vec![("fuzz/tests/replay.rs".to_owned(), 2)]
    );
}

#[test]
fn refuses_a_reqwest_client_built_outside_the_constructor() {
    let tree = Tree::new();
    tree.kernel(
        "clock.rs",
        "use reqwest::Client as Http;\nuse reqwest::ClientBuilder;\npub fn a() { let _ = reqwest::Client::new(); }\npub fn b() { let _ = Http::builder(); }\npub fn c() { let _ = ClientBuilder::new(); }\npub fn d() { let _: Option<reqwest::Client> = None; }\npub fn e() { println!(\"{:?}\", reqwest::Client::new()); }\n",
    );
    // The constructor's own crate may.
    tree.write(
        "Cargo.toml",
        &format!("[workspace]\nmembers = [\"{KERNEL}\", \"crates/countersign-http\"]\n"),
    );
    tree.write(
        "crates/countersign-http/Cargo.toml",
        "[package]\nname = \"countersign-http\"\nversion = \"0.0.0\"\n",
    );
    tree.write(
        "crates/countersign-http/src/lib.rs",
        "pub fn client() { let _ = reqwest::Client::builder(); }\n",
    );
    assert_eq!(
        tree.of(Rule::HttpClient),
        vec![
            (in_kernel("clock.rs"), 3),
            (in_kernel("clock.rs"), 4),
            (in_kernel("clock.rs"), 5),
            (in_kernel("clock.rs"), 7),
        ]
    );
}

#[test]
fn refuses_ring_or_aws_lc_in_the_lockfile_except_cargos_weak_feature_entries() {
    let tree = Tree::new();
    let lock = |ring_dependent: &str| {
        format!(
            "version = 4\n\n[[package]]\nname = \"ring\"\nversion = \"0.17.14\"\n\n[[package]]\nname = \"{ring_dependent}\"\nversion = \"1.0.0\"\ndependencies = [\n \"ring\",\n]\n"
        )
    };
    tree.write("Cargo.lock", &lock("rustls-webpki"));
    assert_eq!(tree.of(Rule::CryptoStack), Vec::new());
    tree.write("Cargo.lock", &lock("jsonwebtoken"));
    assert_eq!(
        tree.of(Rule::CryptoStack),
        vec![("Cargo.lock".to_owned(), 4)]
    );
    tree.write(
        "Cargo.lock",
        "version = 4\n\n[[package]]\nname = \"aws-lc-sys\"\nversion = \"0.30.0\"\n",
    );
    assert_eq!(
        tree.of(Rule::CryptoStack),
        vec![("Cargo.lock".to_owned(), 4)]
    );
}
