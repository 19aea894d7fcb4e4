//! No ignored test: a test that cannot run states a known bug with a FIXME and asserts what
//! happens today, or is deleted (STYLE.md, "Where tests live").

use syn::visit::Visit;

use super::{Rule, Violation, Workspace};

/// Check every Rust file of every member, test files included.
pub(crate) fn check(workspace: &Workspace) -> Vec<Violation> {
    let mut violations = Vec::new();
    for file in workspace.members.iter().flat_map(|member| &member.files) {
        let mut finder = IgnoreFinder { lines: Vec::new() };
        finder.visit_file(&file.ast);
        for line in finder.lines {
            violations.push(Violation {
                rule: Rule::IgnoredTest,
                file: file.path.clone(),
                line,
                message: "an `#[ignore]`d test: make it run (pin a known bug with a FIXME and assert today's value) or delete it".to_owned(),
            });
        }
    }
    violations
}

struct IgnoreFinder {
    lines: Vec<usize>,
}

impl<'ast> Visit<'ast> for IgnoreFinder {
    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        let path = attr.path();
        let line = path
            .segments
            .first()
            .map(|segment| segment.ident.span().start().line)
            .unwrap_or(0);
        if path.is_ident("ignore") {
            self.lines.push(line);
        } else if path.is_ident("cfg_attr")
            && let syn::Meta::List(list) = &attr.meta
            && list.tokens.clone().into_iter().any(
                |token| matches!(token, proc_macro2::TokenTree::Ident(ident) if ident == "ignore"),
            )
        {
            self.lines.push(line);
        }
    }
}
