//! Every file path a doc names exists.
//!
//! Read: every Markdown file of the repository (outside `target/`, hidden folders and
//! `node_modules/`) and every doc comment of every member's Rust files. A path is a code span
//! (`` `crates/countersign/src/store.rs` ``) or a link target (`](../docs/SPEC.md#part)`) that contains a `/` and
//! ends with a file extension tidy knows or with `/` (a folder). Placeholders (`<`, `{`, `*`,
//! `NAME`), URLs, absolute paths and home paths are not paths in the repository and are skipped.
//! A path whose first folder is nowhere in the repository names another project's file
//! (`swiftide-agents/src/agent.rs`) and is skipped. Any other path must name a file or folder
//! relative to the doc's own folder, the repository root, or a member crate's folder or its
//! `src/` (doc comments in the kernel say `store/sqlite.rs`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{Rule, Violation, Workspace};

/// Extensions of files a doc may name.
const EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "sql", "sqlite", "py", "sh", "json", "yaml", "yml", "lock", "snap", "txt",
    "html", "js", "ts", "cfg",
];

/// Check every Markdown file and every doc comment.
///
/// # Errors
///
/// A Markdown file that cannot be read.
pub(crate) fn check(workspace: &Workspace) -> Result<Vec<Violation>> {
    let mut bases: Vec<PathBuf> = vec![workspace.root.clone()];
    for member in &workspace.members {
        bases.push(workspace.root.join(&member.dir));
        bases.push(workspace.root.join(&member.dir).join("src"));
    }
    let mut violations = Vec::new();
    let mut markdown = Vec::new();
    find_markdown(&workspace.root, &workspace.root, &mut markdown);
    markdown.sort();
    for relative in markdown {
        let text = std::fs::read_to_string(workspace.root.join(&relative))
            .with_context(|| format!("cannot read {}", relative.display()))?;
        let own = workspace
            .root
            .join(relative.parent().unwrap_or(Path::new("")));
        for (number, line) in text.lines().enumerate() {
            for candidate in candidates(line) {
                if !exists(&candidate, &own, &bases) {
                    violations.push(dangling(&relative, number + 1, &candidate));
                }
            }
        }
    }
    for file in workspace.members.iter().flat_map(|member| &member.files) {
        let own = workspace
            .root
            .join(file.path.parent().unwrap_or(Path::new("")));
        for (number, line) in file.text.lines().enumerate() {
            let trimmed = line.trim_start();
            let Some(doc) = trimmed
                .strip_prefix("///")
                .or_else(|| trimmed.strip_prefix("//!"))
            else {
                continue;
            };
            for candidate in candidates(doc) {
                if !exists(&candidate, &own, &bases) {
                    violations.push(dangling(&file.path, number + 1, &candidate));
                }
            }
        }
    }
    Ok(violations)
}

fn dangling(file: &Path, line: usize, candidate: &str) -> Violation {
    Violation {
        rule: Rule::DocPaths,
        file: file.to_path_buf(),
        line,
        message: format!(
            "names `{candidate}`, which does not exist: name the file as it is now, or drop the mention"
        ),
    }
}

/// Does `candidate` exist, or name another project's file (see the module's docs)?
fn exists(candidate: &str, own: &Path, bases: &[PathBuf]) -> bool {
    let mut bases = std::iter::once(own).chain(bases.iter().map(PathBuf::as_path));
    let first = candidate.split('/').next().unwrap_or("");
    let ours = bases.clone().any(|base| base.join(first).exists());
    !ours || bases.any(|base| base.join(candidate).exists())
}

fn find_markdown(root: &Path, folder: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            find_markdown(root, &path, out);
        } else if name.ends_with(".md")
            && let Ok(relative) = path.strip_prefix(root)
        {
            out.push(relative.to_path_buf());
        }
    }
}

/// The paths one line of Markdown names: code spans and link targets that look like paths.
pub(crate) fn candidates(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    // Code spans: text between single backticks.
    let mut parts = line.split('`');
    parts.next();
    while let Some(span) = parts.next() {
        found.push(span.to_owned());
        parts.next();
    }
    // Link targets: `](target)`.
    let mut rest = line;
    while let Some(start) = rest.find("](") {
        rest = &rest[start + 2..];
        if let Some(end) = rest.find(')') {
            let target = &rest[..end];
            found.push(target.split('#').next().unwrap_or("").to_owned());
            rest = &rest[end..];
        }
    }
    found.retain(|candidate| looks_like_path(candidate));
    found
}

fn looks_like_path(candidate: &str) -> bool {
    if candidate.is_empty()
        || !candidate.contains('/')
        || candidate.contains("://")
        || candidate.starts_with('/')
        || candidate.starts_with('~')
        || candidate.starts_with('$')
        || candidate.contains("NAME")
        || !candidate
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
    {
        return false;
    }
    if candidate.ends_with('/') {
        return true;
    }
    let file_name = candidate.rsplit('/').next().unwrap_or("");
    file_name
        .rsplit_once('.')
        .is_some_and(|(stem, extension)| !stem.is_empty() && EXTENSIONS.contains(&extension))
}
