//! One HTTP client constructor: no member but `crates/countersign-http` builds a reqwest client
//! itself (issue #32).
//!
//! reqwest's features are unified across a build: once the constructor turns on rustls without
//! a provider, a `reqwest::Client::new()` anywhere else in the same build looks for a
//! process-wide rustls provider and panics ("No provider set"). So every client, tests and
//! examples included, comes from `countersign_http::client` or `client_builder`.
//!
//! Checked in every Rust file of every member except the constructor's crate: a path to
//! `reqwest::Client::new`, `::builder` or `::default`, `reqwest::ClientBuilder::new` or
//! `::default`, `reqwest::get` or anything under `reqwest::blocking`, written in full or
//! through a `use` of `reqwest` items in the same file (aliases followed), in expressions, in
//! `use` items and in the tokens of macro calls.

use std::collections::BTreeMap;

use syn::visit::Visit;

use super::{Rule, Violation, Workspace};

/// The crate that holds the one constructor.
pub(crate) const CONSTRUCTOR: &str = "crates/countersign-http";

/// Check every member but [`CONSTRUCTOR`].
pub(crate) fn check(workspace: &Workspace) -> Vec<Violation> {
    let mut violations = Vec::new();
    for member in &workspace.members {
        if member.dir == std::path::Path::new(CONSTRUCTOR) {
            continue;
        }
        for file in &member.files {
            let mut imports = Imports::default();
            imports.visit_file(&file.ast);
            let mut finder = Finder {
                imports: &imports.names,
                found: Vec::new(),
            };
            finder.visit_file(&file.ast);
            for (line, written) in finder.found {
                violations.push(Violation {
                    rule: Rule::HttpClient,
                    file: file.path.clone(),
                    line,
                    message: format!(
                        "`{written}` builds a reqwest client outside {CONSTRUCTOR}: use `countersign_http::client(&trust)` or `countersign_http::client_builder(&trust)` (a plain reqwest client panics \"No provider set\" once rustls is in the build)"
                    ),
                });
            }
        }
    }
    violations
}

/// The full reqwest path of a name `use`d in the file: `Client` → `reqwest::Client`.
#[derive(Default)]
struct Imports {
    names: BTreeMap<String, Vec<String>>,
}

impl<'ast> Visit<'ast> for Imports {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut stack = Vec::new();
        collect(&item.tree, &mut stack, &mut self.names);
    }
}

fn collect(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    names: &mut BTreeMap<String, Vec<String>>,
) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            collect(&path.tree, prefix, names);
            prefix.pop();
        }
        syn::UseTree::Name(name) => {
            let mut full = prefix.clone();
            full.push(name.ident.to_string());
            names.insert(name.ident.to_string(), full);
        }
        syn::UseTree::Rename(rename) => {
            let mut full = prefix.clone();
            full.push(rename.ident.to_string());
            names.insert(rename.rename.to_string(), full);
        }
        syn::UseTree::Group(group) => {
            for item in &group.items {
                collect(item, prefix, names);
            }
        }
        syn::UseTree::Glob(_) => {}
    }
}

/// Is `path` (already expanded to its full form) a forbidden constructor?
fn forbidden(path: &[String]) -> bool {
    let path: Vec<&str> = path
        .iter()
        .map(String::as_str)
        .skip_while(|segment| *segment == "crate" || segment.is_empty())
        .collect();
    matches!(
        path.as_slice(),
        ["reqwest", "Client", "new" | "builder" | "default"]
            | ["reqwest", "ClientBuilder", "new" | "default"]
            | ["reqwest", "get"]
            | ["reqwest", "blocking", ..]
    )
}

struct Finder<'a> {
    imports: &'a BTreeMap<String, Vec<String>>,
    found: Vec<(usize, String)>,
}

impl Finder<'_> {
    fn check_segments(&mut self, segments: Vec<String>, line: usize) {
        let Some(first) = segments.first() else {
            return;
        };
        let expanded: Vec<String> = match self.imports.get(first) {
            Some(full) if full.first().is_some_and(|head| head == "reqwest") => full
                .iter()
                .cloned()
                .chain(segments.iter().skip(1).cloned())
                .collect(),
            _ => segments.clone(),
        };
        if forbidden(&expanded) {
            self.found.push((line, segments.join("::")));
        }
    }
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string())
            .collect();
        let line = path
            .segments
            .first()
            .map_or(0, |segment| segment.ident.span().start().line);
        self.check_segments(segments, line);
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut names = BTreeMap::new();
        collect(&item.tree, &mut Vec::new(), &mut names);
        let line = item.use_token.span.start().line;
        for full in names.into_values() {
            if forbidden(&full) {
                self.found.push((line, full.join("::")));
            }
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // The tokens of a macro call: every `a::b::c` run of identifiers.
        let mut tokens: Vec<proc_macro2::TokenTree> = Vec::new();
        flatten(mac.tokens.clone(), &mut tokens);
        let mut run: Vec<String> = Vec::new();
        let mut line = 0;
        let mut colons = 0;
        for token in tokens {
            match token {
                proc_macro2::TokenTree::Ident(ident) => {
                    if !run.is_empty() && colons != 2 {
                        self.check_segments(std::mem::take(&mut run), line);
                    }
                    if run.is_empty() {
                        line = ident.span().start().line;
                    }
                    run.push(ident.to_string());
                    colons = 0;
                }
                proc_macro2::TokenTree::Punct(punct) if punct.as_char() == ':' => colons += 1,
                _ => {
                    if !run.is_empty() {
                        self.check_segments(std::mem::take(&mut run), line);
                    }
                    colons = 0;
                }
            }
        }
        if !run.is_empty() {
            self.check_segments(run, line);
        }
    }
}

fn flatten(tokens: proc_macro2::TokenStream, out: &mut Vec<proc_macro2::TokenTree>) {
    for token in tokens {
        match token {
            proc_macro2::TokenTree::Group(group) => {
                out.push(proc_macro2::TokenTree::Punct(proc_macro2::Punct::new(
                    ',',
                    proc_macro2::Spacing::Alone,
                )));
                flatten(group.stream(), out);
                out.push(proc_macro2::TokenTree::Punct(proc_macro2::Punct::new(
                    ',',
                    proc_macro2::Spacing::Alone,
                )));
            }
            other => out.push(other),
        }
    }
}
