//! The layer rule: the kernel's modules import only their own layer or one below it, and no two
//! modules import each other (even through others).
//!
//! Every `crate::`, `super::` and `self::` path in the kernel's non-test code is resolved to the
//! top-level module it names: in `use` items and re-exports, in types, expressions and patterns,
//! and in the tokens of macro calls. A name the crate root re-exports (`crate::Control`) is
//! followed to the module that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::Result;
use syn::visit::Visit;

use super::{Rule, Violation, Workspace};

/// The kernel crate's folder.
pub(crate) const KERNEL: &str = "crates/countersign";

/// One layer of the kernel: its name and its top-level modules.
pub(crate) struct Layer {
    pub(crate) name: &'static str,
    pub(crate) modules: &'static [&'static str],
}

/// The kernel's layers, lowest first: the same table as in `docs/ARCHITECTURE.md` ("Layers").
/// A module may import its own layer and the layers above it in this list, never one below.
/// The crate root (`lib.rs`) only re-exports and sits above every layer.
pub(crate) const LAYERS: &[Layer] = &[
    Layer {
        name: "vocabulary",
        modules: &[
            "clock", "text", "id", "action", "json", "token", "approver", "policy", "effect",
            "approval", "evidence", "display", "error", "outbox",
        ],
    },
    Layer {
        name: "store",
        modules: &["store"],
    },
    Layer {
        name: "orchestration",
        modules: &["control", "audit"],
    },
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|layer| layer.modules.contains(&module))
}

/// One import from one top-level module of the kernel into another.
struct Edge {
    from: String,
    to: String,
    file: PathBuf,
    line: usize,
    written: String,
}

/// Check the layer rule on the kernel.
///
/// # Errors
///
/// Never today; a `Result` so a rule that must read more can fail.
pub(crate) fn check(workspace: &Workspace) -> Result<Vec<Violation>> {
    let mut violations = Vec::new();
    let Some(kernel) = workspace.member(KERNEL) else {
        violations.push(Violation {
            rule: Rule::Layers,
            file: PathBuf::from(KERNEL),
            line: 0,
            message: format!("the kernel crate `{KERNEL}` is not a workspace member"),
        });
        return Ok(violations);
    };
    let lib = PathBuf::from(KERNEL).join("src/lib.rs");
    let Some(root) = kernel.files.iter().find(|file| file.path == lib) else {
        violations.push(Violation {
            rule: Rule::Layers,
            file: lib,
            line: 0,
            message: "the kernel has no `src/lib.rs`".to_owned(),
        });
        return Ok(violations);
    };
    // The crate root's modules and re-exports.
    let mut top_modules = BTreeSet::new();
    let mut reexports: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in &root.ast.items {
        match item {
            syn::Item::Mod(module) => {
                top_modules.insert(module.ident.to_string());
            }
            syn::Item::Use(item_use) => {
                for (name, path, _) in flatten_use(&item_use.tree, &[]) {
                    reexports.insert(name, path);
                }
            }
            _ => {}
        }
    }
    for module in &top_modules {
        if layer_of(module).is_none() {
            violations.push(Violation {
                rule: Rule::Layers,
                file: root.path.clone(),
                line: 0,
                message: format!(
                    "module `{module}` is in no layer: add it to the layer table (xtask/src/tidy/layers.rs and docs/ARCHITECTURE.md)"
                ),
            });
        }
    }
    for layer in LAYERS {
        for module in layer.modules {
            if !top_modules.contains(*module) {
                violations.push(Violation {
                    rule: Rule::Layers,
                    file: root.path.clone(),
                    line: 0,
                    message: format!(
                        "the layer table names module `{module}`, which the kernel does not declare: keep the table true"
                    ),
                });
            }
        }
    }
    let mut edges: Vec<Edge> = Vec::new();
    for file in kernel.files.iter().filter(|file| !file.is_test) {
        let Some(from) = file.module.first() else {
            continue; // The crate root re-exports every layer.
        };
        let mut collector = PathCollector {
            module: file.module.clone(),
            found: Vec::new(),
        };
        collector.visit_file(&file.ast);
        for (absolute, line, written) in collector.found {
            let Some(to) = top_module_of(&absolute, &reexports, &top_modules) else {
                violations.push(Violation {
                    rule: Rule::Layers,
                    file: file.path.clone(),
                    line,
                    message: format!(
                        "`{written}` names nothing tidy can place in a layer (not a module of the crate root, nor one of its re-exports)"
                    ),
                });
                continue;
            };
            if &to == from {
                continue;
            }
            edges.push(Edge {
                from: from.clone(),
                to,
                file: file.path.clone(),
                line,
                written,
            });
        }
    }
    for edge in &edges {
        if let (Some(from), Some(to)) = (layer_of(&edge.from), layer_of(&edge.to))
            && to > from
        {
            violations.push(Violation {
                rule: Rule::Layers,
                file: edge.file.clone(),
                line: edge.line,
                message: format!(
                    "`{}` in module `{}` ({} layer) reaches up into module `{}` ({} layer): move the code to the layer it needs, or the dependency down",
                    edge.written, edge.from, LAYERS[from].name, edge.to, LAYERS[to].name
                ),
            });
        }
    }
    violations.extend(cycles(&edges));
    Ok(violations)
}

/// Each import cycle between top-level modules, reported once at one of its imports.
fn cycles(edges: &[Edge]) -> Vec<Violation> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for edge in edges {
        graph.entry(&edge.from).or_default().insert(&edge.to);
    }
    let mut reported: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    let mut violations = Vec::new();
    for edge in edges {
        // A cycle through this edge: a path back from `to` to `from`.
        let Some(back) = path_between(&graph, &edge.to, &edge.from) else {
            continue;
        };
        let members: BTreeSet<String> = back.iter().map(|m| (*m).to_owned()).collect();
        if !reported.insert(members) {
            continue;
        }
        let mut cycle = vec![edge.from.as_str()];
        cycle.extend(back.iter().copied());
        violations.push(Violation {
            rule: Rule::Layers,
            file: edge.file.clone(),
            line: edge.line,
            message: format!(
                "import cycle {} (this file's `{}` is one of its imports): one of these modules must stop importing the other",
                cycle.join(" → "),
                edge.written
            ),
        });
    }
    violations
}

/// The modules on a shortest path from `from` to `to` (both included), if there is one.
fn path_between<'a>(
    graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    from: &'a str,
    to: &'a str,
) -> Option<Vec<&'a str>> {
    let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    let mut seen = BTreeSet::from([from]);
    while let Some(node) = queue.pop_front() {
        if node == to {
            let mut path = vec![to];
            let mut at = to;
            while let Some(before) = previous.get(at) {
                path.push(before);
                at = before;
            }
            path.reverse();
            return Some(path);
        }
        for next in graph.get(node).into_iter().flatten() {
            if seen.insert(next) {
                previous.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    None
}

/// The top-level module an absolute path (`["store", "Store"]`) lands in, following the crate
/// root's re-exports.
fn top_module_of(
    absolute: &[String],
    reexports: &BTreeMap<String, Vec<String>>,
    top_modules: &BTreeSet<String>,
) -> Option<String> {
    let mut path = absolute.to_vec();
    for _ in 0..8 {
        let first = path.first()?;
        if top_modules.contains(first) {
            return Some(first.clone());
        }
        let target = reexports.get(first)?;
        let mut followed = target.clone();
        followed.extend(path.into_iter().skip(1));
        path = followed;
    }
    None
}

/// Flatten a use tree into `(name it binds, path it names, the ident it ends on)`.
fn flatten_use(tree: &syn::UseTree, prefix: &[String]) -> Vec<(String, Vec<String>, syn::Ident)> {
    let mut out = Vec::new();
    match tree {
        syn::UseTree::Path(path) => {
            let mut prefix = prefix.to_vec();
            prefix.push(path.ident.to_string());
            out.extend(flatten_use(&path.tree, &prefix));
        }
        syn::UseTree::Name(name) => {
            let ident = name.ident.to_string();
            if ident == "self" {
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.to_vec(), name.ident.clone()));
                }
            } else {
                let mut path = prefix.to_vec();
                path.push(ident.clone());
                out.push((ident, path, name.ident.clone()));
            }
        }
        syn::UseTree::Rename(rename) => {
            let mut path = prefix.to_vec();
            path.push(rename.ident.to_string());
            out.push((rename.rename.to_string(), path, rename.ident.clone()));
        }
        syn::UseTree::Glob(glob) => {
            let span_ident = syn::Ident::new("glob", glob.star_token.span);
            out.push(("*".to_owned(), prefix.to_vec(), span_ident));
        }
        syn::UseTree::Group(group) => {
            for tree in &group.items {
                out.extend(flatten_use(tree, prefix));
            }
        }
    }
    out
}

/// Resolve a path written in `module` to an absolute path from the crate root, if it starts
/// with `crate`, `super` or `self`.
fn resolve(module: &[String], segments: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.to_vec();
    let mut rest = segments;
    match rest.first()?.as_str() {
        "crate" => {
            base.clear();
            rest = &rest[1..];
        }
        "self" => rest = &rest[1..],
        "super" => {
            while rest.first().is_some_and(|segment| segment == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Collects every crate-relative path in a file's non-test code.
struct PathCollector {
    /// The module being visited (grows inside inline `mod` items).
    module: Vec<String>,
    /// `(absolute path, line, the path as written)`.
    found: Vec<(Vec<String>, usize, String)>,
}

impl PathCollector {
    fn record(&mut self, segments: Vec<String>, line: usize) {
        if let Some(absolute) = resolve(&self.module, &segments)
            && !absolute.is_empty()
        {
            self.found.push((absolute, line, segments.join("::")));
        }
    }

    /// `crate :: a :: b` (and `super`, `self`) inside the tokens of a macro call.
    fn scan_tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let tokens: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
        let mut index = 0;
        while index < tokens.len() {
            match &tokens[index] {
                proc_macro2::TokenTree::Group(group) => self.scan_tokens(group.stream()),
                proc_macro2::TokenTree::Ident(ident)
                    if ident == "crate" || ident == "super" || ident == "self" =>
                {
                    let line = ident.span().start().line;
                    let mut segments = vec![ident.to_string()];
                    let mut next = index + 1;
                    while let (
                        Some(proc_macro2::TokenTree::Punct(first)),
                        Some(proc_macro2::TokenTree::Punct(second)),
                        Some(proc_macro2::TokenTree::Ident(segment)),
                    ) = (tokens.get(next), tokens.get(next + 1), tokens.get(next + 2))
                    {
                        if first.as_char() != ':' || second.as_char() != ':' {
                            break;
                        }
                        segments.push(segment.to_string());
                        next += 3;
                    }
                    if segments.len() > 1 {
                        self.record(segments, line);
                    }
                    index = next - 1;
                }
                _ => {}
            }
            index += 1;
        }
    }
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if super::is_cfg_test(item_attrs(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.module.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.module.pop();
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Fn(function) => &function.attrs,
            syn::ImplItem::Const(constant) => &constant.attrs,
            syn::ImplItem::Type(alias) => &alias.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !super::is_cfg_test(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        for (_, path, ident) in flatten_use(&item.tree, &[]) {
            self.record(path, ident.span().start().line);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string())
            .collect();
        if let Some(first) = path.segments.first() {
            self.record(segments, first.ident.span().start().line);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.scan_tokens(mac.tokens.clone());
    }

    fn visit_attribute(&mut self, _attr: &'ast syn::Attribute) {
        // Doc comments and attributes name no code; the doc-paths rule reads docs.
    }
}

pub(crate) fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(item) => &item.attrs,
        syn::Item::Enum(item) => &item.attrs,
        syn::Item::ExternCrate(item) => &item.attrs,
        syn::Item::Fn(item) => &item.attrs,
        syn::Item::ForeignMod(item) => &item.attrs,
        syn::Item::Impl(item) => &item.attrs,
        syn::Item::Macro(item) => &item.attrs,
        syn::Item::Mod(item) => &item.attrs,
        syn::Item::Static(item) => &item.attrs,
        syn::Item::Struct(item) => &item.attrs,
        syn::Item::Trait(item) => &item.attrs,
        syn::Item::TraitAlias(item) => &item.attrs,
        syn::Item::Type(item) => &item.attrs,
        syn::Item::Union(item) => &item.attrs,
        syn::Item::Use(item) => &item.attrs,
        _ => &[],
    }
}
