//! No unused dependency: every crate a member's manifest lists (`[dependencies]`,
//! `[dev-dependencies]`, `[build-dependencies]`, and their `[target.*]` forms) is named in the
//! member's code.
//!
//! This is tidy's own check, not `cargo machete` (which would need a `cargo install` on every CI
//! machine): each of the member's Rust files is split into tokens with proc-macro2, and a
//! dependency is used when its library name (the key with `-` as `_`) is an identifier anywhere
//! in them, macro bodies included, or is followed by `::` in a doc comment (a doctest). Like
//! machete, it reads names, not types: a dependency named only in a comment counts as unused.
//! A dependency needed without being named (one that only turns on a feature of another) is
//! listed with its reason in the manifest's `[package.metadata.tidy] used-without-a-name`.

use std::collections::BTreeSet;
use std::str::FromStr;

use anyhow::{Context, Result};

use super::{Member, Rule, Violation, Workspace};

/// Check every member's manifest against its code.
///
/// # Errors
///
/// A member's Rust file that proc-macro2 cannot split into tokens.
pub(crate) fn check(workspace: &Workspace) -> Result<Vec<Violation>> {
    let mut violations = Vec::new();
    for member in &workspace.members {
        let mut names = BTreeSet::new();
        let mut doc_text = String::new();
        for file in &member.files {
            let tokens = proc_macro2::TokenStream::from_str(&file.text)
                .map_err(|error| anyhow::anyhow!("{error}"))
                .with_context(|| format!("cannot read the tokens of {}", file.path.display()))?;
            collect_idents(tokens, &mut names);
            for line in file.text.lines() {
                let trimmed = line.trim_start();
                if trimmed.starts_with("///") || trimmed.starts_with("//!") {
                    doc_text.push_str(trimmed);
                    doc_text.push('\n');
                }
            }
        }
        let allowed = allowed_unnamed(member);
        for (table, key, line) in dependencies(member) {
            let library = key.replace('-', "_");
            if names.contains(&library)
                || doc_text.contains(&format!("{library}::"))
                || allowed.contains(&key)
            {
                continue;
            }
            violations.push(Violation {
                rule: Rule::UnusedDependency,
                file: member.dir.join("Cargo.toml"),
                line,
                message: format!(
                    "`{key}` in `[{table}]` is named nowhere in the crate's code: remove it (or list it with its reason in `[package.metadata.tidy] used-without-a-name`)"
                ),
            });
        }
    }
    Ok(violations)
}

fn collect_idents(tokens: proc_macro2::TokenStream, names: &mut BTreeSet<String>) {
    for token in tokens {
        match token {
            proc_macro2::TokenTree::Ident(ident) => {
                let text = ident.to_string();
                names.insert(text.strip_prefix("r#").unwrap_or(&text).to_owned());
            }
            proc_macro2::TokenTree::Group(group) => collect_idents(group.stream(), names),
            _ => {}
        }
    }
}

/// `(table, dependency key, line)` for every dependency the manifest lists.
fn dependencies(member: &Member) -> Vec<(String, String, usize)> {
    let text = &member.manifest_text;
    // The line of `key` inside the `[table]` section (the whole file for other forms).
    let line_of = |table: &str, key: &str| {
        let lines: Vec<&str> = text.lines().collect();
        let header = format!("[{table}]");
        let start = lines
            .iter()
            .position(|line| line.trim() == header)
            .map_or(0, |index| index + 1);
        lines
            .iter()
            .enumerate()
            .skip(start)
            .find(|(_, line)| {
                let line = line.trim_start();
                line.starts_with(&format!("{key} "))
                    || line.starts_with(&format!("{key}."))
                    || line.starts_with(&format!("{key}="))
            })
            .map_or(0, |(index, _)| index + 1)
    };
    let mut found = Vec::new();
    let mut tables: Vec<(String, &toml_edit::Item)> = Vec::new();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(item) = member.manifest.get(table) {
            tables.push((table.to_owned(), item));
        }
    }
    if let Some(targets) = member
        .manifest
        .get("target")
        .and_then(|t| t.as_table_like())
    {
        for (target, item) in targets.iter() {
            for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
                if let Some(inner) = item.get(table) {
                    tables.push((format!("target.{target}.{table}"), inner));
                }
            }
        }
    }
    for (table, item) in tables {
        if let Some(entries) = item.as_table_like() {
            for (key, _) in entries.iter() {
                found.push((table.clone(), key.to_owned(), line_of(&table, key)));
            }
        }
    }
    found
}

fn allowed_unnamed(member: &Member) -> BTreeSet<String> {
    member
        .manifest
        .get("package")
        .and_then(|package| package.get("metadata"))
        .and_then(|metadata| metadata.get("tidy"))
        .and_then(|tidy| tidy.get("used-without-a-name"))
        .and_then(|list| list.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|value| value.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
