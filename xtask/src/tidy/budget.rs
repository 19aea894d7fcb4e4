//! The size budget: at most [`BUDGET`] non-test lines in one source file.
//!
//! A file's non-test lines are its lines less those of items under `#[cfg(test)]`; a file
//! reached only through `#[cfg(test)]`, or an integration test's, has none. Past the budget a
//! file holds several concepts: split it by concept (STYLE.md, "What to avoid").

use std::path::PathBuf;

use super::{Rule, Violation, Workspace};

/// Non-test lines one file may hold.
pub(crate) const BUDGET: usize = 800;

/// Files allowed over the budget, each because an open issue replaces it whole (splitting it
/// first would only make that work harder). Each entry names the issue; remove it with the file.
pub(crate) const OVER_BUDGET_ALLOWED: &[(&str, &str)] = &[(
    "crates/countersign-gateway/src/session.rs",
    "issue #32 (MCP gateway, part 1) rewrites it",
)];

/// Check the budget on every Rust file of every member.
pub(crate) fn check(workspace: &Workspace) -> Vec<Violation> {
    let mut violations = Vec::new();
    for file in workspace
        .members
        .iter()
        .flat_map(|member| &member.files)
        .filter(|file| !file.is_test)
    {
        let lines = non_test_lines(&file.text, &file.ast);
        let allowed = OVER_BUDGET_ALLOWED
            .iter()
            .any(|(path, _)| file.path == PathBuf::from(path));
        if lines > BUDGET && !allowed {
            violations.push(Violation {
                rule: Rule::Budget,
                file: file.path.clone(),
                line: 0,
                message: format!(
                    "{lines} non-test lines, over the budget of {BUDGET}: split the file by concept"
                ),
            });
        }
    }
    violations
}

/// The file's lines less those of its `#[cfg(test)]` items (at any depth of inline modules).
pub(crate) fn non_test_lines(text: &str, ast: &syn::File) -> usize {
    let total = text.lines().count();
    let mut test_lines = 0;
    count_test_lines(&ast.items, &mut test_lines);
    total.saturating_sub(test_lines)
}

fn count_test_lines(items: &[syn::Item], test_lines: &mut usize) {
    use syn::spanned::Spanned;
    for item in items {
        if let syn::Item::Mod(module) = item
            && !super::is_cfg_test(&module.attrs)
        {
            if let Some((_, inner)) = &module.content {
                count_test_lines(inner, test_lines);
            }
            continue;
        }
        let attrs = super::layers::item_attrs(item);
        if super::is_cfg_test(attrs) {
            // From the first attribute to the closing brace.
            let start = attrs
                .iter()
                .map(|attr| attr.span().start().line)
                .chain([item.span().start().line])
                .min()
                .unwrap_or(0);
            let end = item.span().end().line;
            *test_lines += end + 1 - start.max(1).min(end + 1);
        }
    }
}
