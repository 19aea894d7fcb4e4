//! The demo's last request, made answerable in the web inbox: `serve` signs people in with
//! approver tokens, and the kernel judges a token answer by the approver keys stored with the
//! request when it was opened (docs/approval-service.md, "Sign-in"). The example policy lists
//! no key, so the demo makes one of its own, beside its store, and opens that request under the
//! example policy plus that key.

use std::path::{Path, PathBuf};

use countersign::Policy;

/// What the demo made so that a person can answer its last request in the inbox.
pub(super) struct InboxSetup {
    /// The example policy plus the demo's key under `approvers.keys`: the policy the last
    /// request is opened under, and the one to start `serve` with.
    pub(super) policy_file: PathBuf,
    pub(super) policy: Policy,
    /// The private key that signs the demo's approver tokens (0600).
    pub(super) key_file: PathBuf,
}

/// Write `{stem}-approver.key` (and `.pub`) and `{stem}-inbox.yaml` beside the store
/// (`{stem}` is the store file's name without its extension): the policy at `policy_path` with
/// the new public key appended under `approvers.keys`. Files left by an earlier demo run are
/// replaced when the store is the demo's own (`replace`); beside a store named by the operator
/// an existing file is never overwritten.
///
/// # Errors
///
/// A sentence saying why the inbox cannot answer this run's request (the demo goes on and says
/// so): the policy already lists approver keys or an `approvers:` section, a file exists or
/// cannot be written, or the extended policy does not load.
pub(super) fn prepare(
    policy_path: &Path,
    policy: &Policy,
    store_path: &Path,
    replace: bool,
) -> Result<InboxSetup, String> {
    if !policy.approver_keys().is_empty() {
        return Err(format!(
            "`{}` lists approver keys already: start `countersign serve --policy {0}` and sign in with a token from one of them (`countersign approver token --key FILE --subject human:NAME`)",
            policy_path.display()
        ));
    }
    let text = std::fs::read_to_string(policy_path)
        .map_err(|error| format!("cannot read `{}`: {error}", policy_path.display()))?;
    if text.lines().any(|line| line.starts_with("approvers:")) {
        return Err(format!(
            "`{}` has an `approvers:` section without keys: add one made by `countersign keygen --out FILE` under `approvers.keys`",
            policy_path.display()
        ));
    }
    let folder = store_path.parent().unwrap_or(Path::new("."));
    let stem = store_path
        .file_stem()
        .map_or_else(|| "demo".into(), |stem| stem.to_string_lossy());
    let key_file = folder.join(format!("{stem}-approver.key"));
    let public_file = folder.join(format!("{stem}-approver.key.pub"));
    let policy_file = folder.join(format!("{stem}-inbox.yaml"));
    for file in [&key_file, &public_file, &policy_file] {
        if !file.exists() {
            continue;
        }
        if !replace {
            return Err(format!(
                "`{}` exists and the demo never overwrites a file beside a store you named: remove it, or leave `--store-url` out",
                file.display()
            ));
        }
        std::fs::remove_file(file)
            .map_err(|error| format!("cannot remove `{}`: {error}", file.display()))?;
    }
    countersign::token::write_keypair(&key_file).map_err(|error| error.to_string())?;
    let public_name = public_file
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let extended = format!(
        "{text}{}\n# Added by `countersign demo`: the key that signs the demo's approver tokens\n# (`countersign approver token --key {}`), so the web inbox can answer its requests.\napprovers:\n  keys: [\"{public_name}\"]\n",
        if text.ends_with('\n') { "" } else { "\n" },
        key_file.display()
    );
    std::fs::write(&policy_file, extended)
        .map_err(|error| format!("cannot write `{}`: {error}", policy_file.display()))?;
    let policy = Policy::load(&policy_file).map_err(|error| {
        format!(
            "the policy with the demo's key added does not load ({error}): answer with `approve`"
        )
    })?;
    Ok(InboxSetup {
        policy_file,
        policy,
        key_file,
    })
}
