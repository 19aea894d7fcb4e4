//! `cargo xtask tidy`: the structure rules CI checks before the tests run.
//!
//! Each rule is described in `docs/ARCHITECTURE.md` ("Tidy rules"), and every violation it
//! prints names the rule, the file and the line:
//!
//! - **layers** — the kernel's modules import only their own layer or a layer below it, and no
//!   two modules import each other, even through others (`layers.rs` holds the table);
//! - **budget** — at most [`budget::BUDGET`] non-test lines in one source file;
//! - **doc-paths** — every file path a doc comment or a Markdown document names exists;
//! - **ignored-test** — no `#[ignore]`d test;
//! - **unused-dependency** — every dependency a crate's manifest lists is named in its code;
//! - **http-client** — no member but `crates/countersign-http` builds a reqwest client;
//! - **crypto-stack** — neither ring nor aws-lc is in `Cargo.lock` or the build graph;
//! - **pooler-safe** — no session-level advisory lock and no session `SET` in any SQL
//!   (case B57: a transaction pooler strands them on a server connection).

mod budget;
mod crypto_stack;
mod deps;
mod doc_paths;
mod http_client;
mod ignored;
mod layers;
mod pooler_safe;
mod tree;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// One of the rules `tidy` checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rule {
    Layers,
    Budget,
    DocPaths,
    IgnoredTest,
    UnusedDependency,
    HttpClient,
    CryptoStack,
    PoolerSafe,
}

impl Rule {
    fn name(self) -> &'static str {
        match self {
            Rule::Layers => "layers",
            Rule::Budget => "budget",
            Rule::DocPaths => "doc-paths",
            Rule::IgnoredTest => "ignored-test",
            Rule::UnusedDependency => "unused-dependency",
            Rule::HttpClient => "http-client",
            Rule::CryptoStack => "crypto-stack",
            Rule::PoolerSafe => "pooler-safe",
        }
    }
}

/// A place where a rule is broken.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Violation {
    pub(crate) rule: Rule,
    /// The file, relative to the checked root.
    pub(crate) file: PathBuf,
    /// 1-based; 0 when the violation is about the whole file.
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{}: {}:{}: {}",
            self.rule.name(),
            self.file.display(),
            self.line,
            self.message
        )
    }
}

/// `cargo xtask tidy`: check every rule on this checkout; fail listing each violation.
pub(crate) fn run() -> Result<()> {
    let root = crate::project_root();
    let mut violations = check(&root)?;
    violations.extend(crypto_stack::check_build_graph(&root)?);
    if violations.is_empty() {
        eprintln!(
            "xtask: tidy passed (layers, budget, doc-paths, ignored-test, unused-dependency, http-client, crypto-stack, pooler-safe)"
        );
        return Ok(());
    }
    for violation in &violations {
        eprintln!("tidy: {violation}");
    }
    bail!(
        "tidy found {} violation(s); each rule is described in docs/ARCHITECTURE.md, \"Tidy rules\"",
        violations.len()
    )
}

/// Every violation of every rule under `root` (a workspace: a `Cargo.toml` with `members`).
///
/// # Errors
///
/// A manifest or source file that cannot be read or parsed.
pub(crate) fn check(root: &Path) -> Result<Vec<Violation>> {
    let workspace = Workspace::load(root)?;
    let mut violations = Vec::new();
    violations.extend(layers::check(&workspace)?);
    violations.extend(budget::check(&workspace));
    violations.extend(doc_paths::check(&workspace)?);
    violations.extend(ignored::check(&workspace));
    violations.extend(deps::check(&workspace)?);
    violations.extend(http_client::check(&workspace));
    violations.extend(crypto_stack::check(&workspace)?);
    violations.extend(pooler_safe::check(&workspace));
    violations.sort();
    Ok(violations)
}

/// The workspace as tidy sees it: its members (and the crates it excludes but keeps in the
/// tree, such as `fuzz/`) and every Rust file of theirs, parsed.
pub(crate) struct Workspace {
    pub(crate) root: PathBuf,
    pub(crate) members: Vec<Member>,
}

/// One workspace member crate, or a crate the workspace excludes but keeps in the tree.
pub(crate) struct Member {
    /// The crate's folder, relative to the workspace root.
    pub(crate) dir: PathBuf,
    pub(crate) manifest: toml_edit::DocumentMut,
    pub(crate) manifest_text: String,
    /// Every Rust file reached from one of the crate's targets.
    pub(crate) files: Vec<tree::SourceFile>,
}

impl Workspace {
    fn load(root: &Path) -> Result<Workspace> {
        let (manifest, _) = read_manifest(&root.join("Cargo.toml"))?;
        let members = manifest
            .get("workspace")
            .and_then(|workspace| workspace.get("members"))
            .and_then(|members| members.as_array())
            .context("the root Cargo.toml has no `[workspace] members` list")?;
        // Crates the workspace excludes but keeps in the tree (`fuzz/`, outside the workspace so
        // that its instrumented build stays apart) follow the same rules as the members.
        let excluded = manifest
            .get("workspace")
            .and_then(|workspace| workspace.get("exclude"))
            .and_then(|exclude| exclude.as_array())
            .into_iter()
            .flat_map(|exclude| exclude.iter())
            .filter(|dir| {
                dir.as_str()
                    .is_some_and(|dir| root.join(dir).join("Cargo.toml").is_file())
            });
        let mut loaded = Vec::new();
        for member in members.iter().chain(excluded) {
            let dir = PathBuf::from(
                member
                    .as_str()
                    .context("a `[workspace] members` or `exclude` entry is not a string")?,
            );
            let (manifest, manifest_text) = read_manifest(&root.join(&dir).join("Cargo.toml"))?;
            let files = tree::crate_files(root, &dir, &manifest)?;
            loaded.push(Member {
                dir,
                manifest,
                manifest_text,
                files,
            });
        }
        Ok(Workspace {
            root: root.to_path_buf(),
            members: loaded,
        })
    }

    /// The member whose folder is `dir`, if there is one.
    pub(crate) fn member(&self, dir: &str) -> Option<&Member> {
        self.members
            .iter()
            .find(|member| member.dir == Path::new(dir))
    }
}

fn read_manifest(path: &Path) -> Result<(toml_edit::DocumentMut, String)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let manifest = text
        .parse()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    Ok((manifest, text))
}

/// Does this attribute list hold `#[cfg(test)]` (alone; `cfg(all(test, ...))` counts too)?
pub(crate) fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .meta
                .require_list()
                .map(|list| {
                    let tokens = list.tokens.to_string();
                    tokens == "test" || tokens.starts_with("all (test")
                })
                .unwrap_or(false)
    })
}
