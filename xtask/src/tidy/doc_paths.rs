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
//!
//! A Markdown document's kernel item paths are checked too: a code span such as
//! `store::txn::begin_attempt` or `countersign::audit::verify_store`, whose first segment is a
//! top-level module of the kernel, must name a module of the kernel and then an item declared
//! or re-exported in it. (Doc comments need no such check: rustdoc resolves their links.)

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
    let kernel = KernelItems::new(workspace);
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
            for item_path in item_paths(line) {
                if !kernel.names(&item_path) {
                    violations.push(Violation {
                        rule: Rule::DocPaths,
                        file: relative.clone(),
                        line: number + 1,
                        message: format!(
                            "names `{item_path}`, which is not an item of the kernel: name it where it is now"
                        ),
                    });
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

/// The kernel's modules and the names each declares or re-exports.
struct KernelItems {
    /// Module path (`["store", "txn"]`) → names.
    modules: std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<String>>,
}

impl KernelItems {
    fn new(workspace: &Workspace) -> KernelItems {
        let mut modules = std::collections::BTreeMap::new();
        let kernel_files = workspace
            .member(super::layers::KERNEL)
            .map(|member| member.files.as_slice())
            .unwrap_or_default();
        for file in kernel_files.iter().filter(|file| !file.is_test) {
            collect_names(&file.ast.items, file.module.clone(), &mut modules);
        }
        KernelItems { modules }
    }

    /// Does `path` (`store::txn::begin_attempt`) name a kernel module and then one of its items?
    /// Paths whose first segment is not a top-level kernel module are not kernel paths: true.
    fn names(&self, path: &str) -> bool {
        let path = path.strip_prefix("countersign::").unwrap_or(path);
        let segments: Vec<String> = path.split("::").map(str::to_owned).collect();
        if self.modules.is_empty() || !self.modules.contains_key(&segments[..1]) {
            return true;
        }
        // The longest prefix that is a module; the next segment must be one of its names.
        let mut length = segments.len();
        while length > 0 && !self.modules.contains_key(&segments[..length]) {
            length -= 1;
        }
        match segments.get(length) {
            None => true,
            Some(next) => self.modules[&segments[..length]].contains(next),
        }
    }
}

fn collect_names(
    items: &[syn::Item],
    module: Vec<String>,
    modules: &mut std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<String>>,
) {
    let mut names = std::collections::BTreeSet::new();
    for item in items {
        let name = match item {
            syn::Item::Const(item) => Some(item.ident.to_string()),
            syn::Item::Enum(item) => Some(item.ident.to_string()),
            syn::Item::Fn(item) => Some(item.sig.ident.to_string()),
            syn::Item::Macro(item) => item.ident.as_ref().map(ToString::to_string),
            syn::Item::Static(item) => Some(item.ident.to_string()),
            syn::Item::Struct(item) => Some(item.ident.to_string()),
            syn::Item::Trait(item) => Some(item.ident.to_string()),
            syn::Item::Type(item) => Some(item.ident.to_string()),
            syn::Item::Union(item) => Some(item.ident.to_string()),
            syn::Item::Mod(item) => {
                let mut child = module.clone();
                child.push(item.ident.to_string());
                modules.entry(child.clone()).or_default();
                if let Some((_, inner)) = &item.content {
                    collect_names(inner, child, modules);
                }
                Some(item.ident.to_string())
            }
            syn::Item::Use(item) => {
                names.extend(use_names(&item.tree));
                None
            }
            _ => None,
        };
        names.extend(name);
    }
    modules.entry(module).or_default().extend(names);
}

fn use_names(tree: &syn::UseTree) -> Vec<String> {
    match tree {
        syn::UseTree::Path(path) => use_names(&path.tree),
        syn::UseTree::Name(name) => vec![name.ident.to_string()],
        syn::UseTree::Rename(rename) => vec![rename.rename.to_string()],
        syn::UseTree::Glob(_) => Vec::new(),
        syn::UseTree::Group(group) => group.items.iter().flat_map(use_names).collect(),
    }
}

/// Code spans of one Markdown line that look like Rust item paths (`a::b`, `a::b::{c, d}`
/// expands to `a::b::c` and `a::b::d`).
fn item_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut parts = line.split('`');
    parts.next();
    while let Some(span) = parts.next() {
        parts.next();
        let (stem, group) = match span.split_once("::{") {
            Some((stem, rest)) => (stem, rest.strip_suffix('}')),
            None => (span, None),
        };
        let is_path = |text: &str| {
            text.contains("::")
                && text.split("::").all(|segment| {
                    !segment.is_empty()
                        && segment
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
                && text.starts_with(|c: char| c.is_ascii_lowercase())
        };
        match group {
            Some(group) => {
                for member in group.split(',').map(str::trim) {
                    let full = format!("{stem}::{member}");
                    if is_path(&full) {
                        found.push(full);
                    }
                }
            }
            None if is_path(stem) => found.push(stem.to_owned()),
            None => {}
        }
    }
    found
}
