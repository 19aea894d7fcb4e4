//! A crate's Rust files, found the way rustc finds them: from each target's root file through
//! every `mod name;`, each marked test or not by the `#[cfg(test)]` on its way.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// One Rust source file of a crate.
pub(crate) struct SourceFile {
    /// Relative to the workspace root.
    pub(crate) path: PathBuf,
    /// Its module path inside its target (`["store", "postgres"]`); empty for a target's root.
    pub(crate) module: Vec<String>,
    /// Reached only through `#[cfg(test)]`, or part of an integration test target.
    pub(crate) is_test: bool,
    pub(crate) text: String,
    pub(crate) ast: syn::File,
}

/// Every Rust file of the crate in `dir` (relative to `root`), from each of its targets.
///
/// # Errors
///
/// A file that cannot be read or does not parse, or a `mod name;` with no file.
pub(crate) fn crate_files(
    root: &Path,
    dir: &Path,
    manifest: &toml_edit::DocumentMut,
) -> Result<Vec<SourceFile>> {
    let mut roots: Vec<(PathBuf, bool)> = Vec::new();
    for (candidate, is_test) in [
        ("src/lib.rs", false),
        ("src/main.rs", false),
        ("build.rs", false),
    ] {
        roots.push((dir.join(candidate), is_test));
    }
    for (folder, is_test) in [
        ("src/bin", false),
        ("tests", true),
        ("benches", false),
        ("examples", false),
    ] {
        let folder = root.join(dir).join(folder);
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for entry in entries {
            let target = if entry.is_dir() {
                entry.join("main.rs")
            } else if entry.extension().is_some_and(|ext| ext == "rs") {
                entry
            } else {
                continue;
            };
            let relative = target.strip_prefix(root).unwrap_or(&target).to_path_buf();
            roots.push((relative, is_test));
        }
    }
    // Targets with a path of their own in the manifest.
    for (table, is_test) in [
        ("bin", false),
        ("test", true),
        ("bench", false),
        ("example", false),
    ] {
        if let Some(targets) = manifest.get(table).and_then(|t| t.as_array_of_tables()) {
            for target in targets.iter() {
                if let Some(path) = target.get("path").and_then(|p| p.as_str()) {
                    roots.push((dir.join(path), is_test));
                }
            }
        }
    }
    let mut files: Vec<SourceFile> = Vec::new();
    for (path, is_test) in roots {
        if root.join(&path).is_file() {
            walk(root, &path, Vec::new(), is_test, true, &mut files)?;
        }
    }
    Ok(files)
}

/// Read and parse `path`, record it, then follow its `mod name;` items.
fn walk(
    root: &Path,
    path: &Path,
    module: Vec<String>,
    is_test: bool,
    is_root: bool,
    files: &mut Vec<SourceFile>,
) -> Result<()> {
    if let Some(seen) = files.iter_mut().find(|file| file.path == path) {
        seen.is_test &= is_test;
        return Ok(());
    }
    let text = std::fs::read_to_string(root.join(path))
        .with_context(|| format!("cannot read {}", path.display()))?;
    let ast = syn::parse_file(&text)
        .with_context(|| format!("{} does not parse as Rust", path.display()))?;
    let parent = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let is_mod_rs = path.file_name().is_some_and(|name| name == "mod.rs");
    let children_dir = if is_root || is_mod_rs {
        parent.clone()
    } else {
        parent.join(path.file_stem().unwrap_or_default())
    };
    let mut declared = Vec::new();
    collect_mods(
        root,
        &ast.items,
        &children_dir,
        &parent,
        &module,
        is_test,
        &mut declared,
    );
    files.push(SourceFile {
        path: path.to_path_buf(),
        module,
        is_test,
        text,
        ast,
    });
    for (child, child_module, child_test) in declared {
        walk(root, &child, child_module, child_test, false, files)
            .with_context(|| format!("following `mod` declarations from {}", path.display()))?;
    }
    Ok(())
}

/// The files of the `mod name;` items in `items` (descending into inline modules).
fn collect_mods(
    root: &Path,
    items: &[syn::Item],
    children_dir: &Path,
    file_dir: &Path,
    module: &[String],
    is_test: bool,
    out: &mut Vec<(PathBuf, Vec<String>, bool)>,
) {
    for item in items {
        let syn::Item::Mod(item_mod) = item else {
            continue;
        };
        let name = item_mod.ident.to_string();
        let child_test = is_test || super::is_cfg_test(&item_mod.attrs);
        let mut child_module = module.to_vec();
        child_module.push(name.clone());
        let path_attr = item_mod.attrs.iter().find_map(|attr| {
            if !attr.path().is_ident("path") {
                return None;
            }
            let syn::Meta::NameValue(value) = &attr.meta else {
                return None;
            };
            let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) = &value.value
            else {
                return None;
            };
            Some(text.value())
        });
        match (&item_mod.content, path_attr) {
            (Some((_, inner)), _) => collect_mods(
                root,
                inner,
                &children_dir.join(&name),
                file_dir,
                &child_module,
                child_test,
                out,
            ),
            (None, Some(path)) => out.push((file_dir.join(path), child_module, child_test)),
            (None, None) => {
                let flat = children_dir.join(format!("{name}.rs"));
                let nested = children_dir.join(&name).join("mod.rs");
                // `walk` reports the missing file if neither exists (rustc would too).
                let chosen = if root.join(&nested).is_file() {
                    nested
                } else {
                    flat
                };
                out.push((chosen, child_module, child_test));
            }
        }
    }
}
