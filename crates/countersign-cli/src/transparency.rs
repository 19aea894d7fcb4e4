//! Evidence a third party checks without trusting the store (issue #23, `docs/evidence.md`):
//! `countersign checkpoint` (sign the log's Merkle tree head), `verify --checkpoint` (the store
//! is still consistent with a checkpoint the verifier kept), `receipts --bundle` and
//! `verify --bundle` (receipts with inclusion proofs, checked with no store).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use countersign::audit::checkpoint::{LogFollower, Published, publish_checkpoint};
use countersign::evidence::bundle::{self, BundleError};
use countersign::evidence::checkpoint::{self, Checkpoint};
use countersign::evidence::{StoredReceipt, merkle};
use countersign::token::{PublicKey, SigningKey};

use crate::commands::write_json;
use crate::store_access::{missing_store_file, missing_store_message, open_for_reading};
use crate::verify::UNVERIFIABLE;
use crate::{Failure, Global};

/// Arguments of `countersign checkpoint`.
#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// The log's private key (from `countersign keygen --out FILE`). Only the process that makes
    /// checkpoints holds it, never an agent.
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Also write the signed checkpoint to this file (replaced whole, never half-written). Keep
    /// it, or give it to an auditor: a checkpoint kept only beside the store proves nothing
    /// against someone who can write the store. An existing file is replaced only when it is an
    /// earlier checkpoint of this log, by this key, that the log still extends; anything else
    /// (another file, another log, a log since rewritten or truncated) is kept and refused.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The log's name, which is also the signing key's name in the note: no spaces, no `+`
    /// [default: `countersign/` and the first 16 hex digits of receipt 1's hash].
    #[arg(long, value_name = "NAME")]
    origin: Option<String>,
    /// Do not write the `log.checkpoint` event to the store's outbox (which webhooks deliver):
    /// the store is only read, and the checkpoint is only printed (and written to `--out`).
    #[arg(long)]
    no_event: bool,
}

/// `countersign checkpoint`: verify the chain, compute the Merkle tree over the whole log, sign
/// its head, print (and with `--out`, write) the signed note, and write it to the outbox as a
/// `log.checkpoint` event for webhooks (unless `--no-event`, or the newest such event already
/// carries the same head).
pub async fn checkpoint(
    global: &Global,
    args: &CheckpointArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let key = SigningKey::load(&args.key)?;
    let store = if args.no_event {
        open_for_reading(global).await?
    } else {
        crate::store_access::open_existing(global).await?
    };
    let mut follower = LogFollower::new();
    follower
        .catch_up(store.as_ref())
        .await
        .map_err(|error| Failure(error.to_string()))?;
    let made = follower
        .sign(&key, args.origin.as_deref())
        .map_err(|error| Failure(error.to_string()))?;
    let head = &made.head;
    if let Some(path) = &args.out {
        may_replace(path, &key, head, &follower)?;
        write_whole(path, made.signed.as_bytes())?;
    }
    let event = if args.no_event {
        None
    } else {
        let now = countersign::Clock::now(&countersign::SystemClock);
        Some(publish_checkpoint(store.as_ref(), &made, now).await.map_err(|error| {
            Failure(format!(
                "the checkpoint was signed{} but its `log.checkpoint` event could not be written to the outbox: {error}: run this again to send it, or pass `--no-event` to make checkpoints without notifying",
                args.out
                    .as_ref()
                    .map_or_else(String::new, |path| format!(" and written to {}", path.display()))
            ))
        })?)
    };
    if global.json {
        let (event_id, event_written) = match &event {
            Some(Published::Written(id)) => (Some(id.as_str()), true),
            Some(Published::Unchanged(id)) => (Some(id.as_str()), false),
            None => (None, false),
        };
        write_json(
            out,
            &serde_json::json!({
                "origin": head.origin,
                "size": head.size,
                "root": head.root.to_base64(),
                "checkpoint": made.signed,
                "verifier_key": made.verifier_key,
                "out": args.out.as_ref().map(|path| path.display().to_string()),
                "event": event_id,
                "event_written": event_written,
            }),
        )?;
    } else {
        write!(out, "{}", made.signed)?;
        if let Some(path) = &args.out {
            writeln!(
                out,
                "\nwritten to {}: keep a copy away from the store; check the store against it later with `countersign verify --checkpoint {} --key PUBLIC_KEY_FILE`",
                path.display(),
                path.display()
            )?;
        }
        let said = match &event {
            Some(Published::Written(id)) => Some(format!(
                "outbox event {id} (`log.checkpoint`) written: every webhook of `countersign serve` on this store receives it"
            )),
            Some(Published::Unchanged(id)) => Some(format!(
                "no new outbox event: the log has not grown since event {id} carried this same checkpoint"
            )),
            None => None,
        };
        // Without `--out`, standard output is the note alone (`> FILE` keeps a valid note).
        match (said, &args.out) {
            (Some(said), Some(_)) => writeln!(out, "{said}")?,
            (Some(said), None) => countersign::stderr_line!("{said}"),
            (None, _) => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// May `checkpoint --out PATH` replace what is at `path`? Yes when nothing is there, or an
/// earlier checkpoint of the log `head` names, signed by `key`, which the log `follower` read
/// still extends. Otherwise the file is kept, and the refusal says why (found by a first-time
/// user: `--out` silently replaced the copy kept as evidence; a checkpoint of a log since
/// rewritten is exactly the one to keep).
fn may_replace(
    path: &Path,
    key: &SigningKey,
    head: &Checkpoint,
    follower: &LogFollower,
) -> Result<(), Failure> {
    // `-` is not standard output here: the note is printed there already (found by a
    // first-time user: a file named `-` was written, and `verify --checkpoint -` suggested).
    if path.as_os_str() == "-" {
        return Err(Failure(
            "`--out -`: the checkpoint is already printed on standard output (without `--json`); `--out` names a file to keep it in".to_owned(),
        ));
    }
    // Only a regular file is read and replaced (found by a first-time user: a FIFO at the
    // path hung the command, waiting for a writer).
    match std::fs::metadata(path) {
        Ok(metadata) if !metadata.is_file() => {
            return Err(Failure(format!(
                "`{}` was not replaced and no checkpoint was written: it is not a regular file (a folder, a FIFO or a device): pass the path of a file",
                path.display()
            )));
        }
        _ => {}
    }
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(Failure(format!(
                "cannot read `{}`, which `--out` would replace: {error}: pass another path",
                path.display()
            )));
        }
    };
    let kept = |why: String| {
        Failure(format!(
            "`{}` was not replaced and no checkpoint was written: {why}",
            path.display()
        ))
    };
    let earlier = match checkpoint::open(&bytes, &key.public_key()) {
        Ok((earlier, _)) => earlier,
        Err(_) => {
            return Err(kept(
                "it exists and is not a checkpoint this key signed: pass another `--out` path, or move that file away first".to_owned(),
            ));
        }
    };
    if earlier.origin != head.origin {
        return Err(kept(format!(
            "it is a checkpoint of another log (`{}`, this one is `{}`): pass another `--out` path",
            earlier.origin, head.origin
        )));
    }
    follower.extends(&earlier).map_err(|why| {
        kept(format!(
            "the log no longer extends the checkpoint it holds: {why}; keep that file as evidence, and see `countersign verify --checkpoint {} --key PUBLIC_KEY_FILE`",
            path.display()
        ))
    })
}

/// Write `bytes` to `path` whole: a temporary file beside it, synced, then renamed over it.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let cannot = |error: std::io::Error| {
        Failure(format!(
            "cannot write `{}`: {error}: give a path in a folder you can write",
            path.display()
        ))
    };
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".partial");
    let temporary = PathBuf::from(temporary);
    let result = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if let Err(error) = result {
        let _ = std::fs::remove_file(&temporary);
        return Err(cannot(error));
    }
    Ok(())
}

/// Read a file an operator named, or say which and why not.
fn read_named(path: &Path, what: &str) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|error| {
        Failure(format!(
            "cannot read the {what} `{}`: {error}: check the path",
            path.display()
        ))
    })
}

/// Read a signed checkpoint file (`--checkpoint`), refusing a PEM key given in its place (the
/// two files sit side by side, and a swapped pair would otherwise read as a checkpoint that
/// "does not hold").
fn read_checkpoint(path: &Path) -> Result<Vec<u8>, Failure> {
    let bytes = read_named(path, "checkpoint")?;
    if bytes.trim_ascii_start().starts_with(b"-----BEGIN") {
        return Err(Failure(format!(
            "`{}` is a PEM key, not a signed checkpoint: pass the file `countersign checkpoint --out FILE` wrote as `--checkpoint`, and the log's public key (the `.pub` file) as `--key`",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Load the public key a verifier trusts.
fn load_public_key(key: Option<&Path>, flag: &str) -> Result<PublicKey, Failure> {
    let Some(path) = key else {
        return Err(Failure(format!(
            "`{flag}` needs `--key PUBLIC_KEY_FILE`: the `.pub` file `countersign keygen` wrote beside the log's private key"
        )));
    };
    Ok(PublicKey::load(path)?)
}

/// What `verify --checkpoint` found, for `--json`.
#[derive(Debug, serde::Serialize)]
struct CheckpointCheck {
    outcome: &'static str,
    detail: String,
    checkpoint: Option<TreeHead>,
    store: Option<TreeHead>,
    consistency_proof: Option<Vec<merkle::NodeHash>>,
    chain: Option<countersign::VerifyReport>,
}

#[derive(Debug, serde::Serialize)]
struct TreeHead {
    origin: Option<String>,
    size: u64,
    root: String,
}

fn finish_check(
    check: &CheckpointCheck,
    json: bool,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    if json {
        write_json(out, check)?;
    } else {
        if let Some(chain) = check
            .chain
            .as_ref()
            .filter(|chain| chain.first_break.is_none())
        {
            writeln!(out, "chain intact: {} receipt(s) checked", chain.checked)?;
        }
        writeln!(out, "{}: {}", check.outcome, check.detail)?;
    }
    Ok(match check.outcome {
        "verified" => ExitCode::SUCCESS,
        "unverifiable" => ExitCode::from(UNVERIFIABLE),
        _ => ExitCode::FAILURE,
    })
}

/// `countersign verify --checkpoint FILE --key PUB`: the checkpoint is signed by the key, the
/// store's chain is intact, and the store's first `size` receipts are exactly the ones the
/// checkpoint signed (a consistency proof from its size to the store's, checked).
pub async fn verify_checkpoint(
    global: &Global,
    file: &Path,
    key: Option<&Path>,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let key = load_public_key(key, "--checkpoint")?;
    let signed = read_checkpoint(file)?;
    let mut check = CheckpointCheck {
        outcome: "failed",
        detail: String::new(),
        checkpoint: None,
        store: None,
        consistency_proof: None,
        chain: None,
    };
    let head = match checkpoint::open(&signed, &key) {
        Ok((head, _)) => head,
        Err(error) => {
            check.detail = format!(
                "the checkpoint `{}` does not hold: {error}: check that `--key` is the log's public key and that the file is the one you kept",
                file.display()
            );
            return finish_check(&check, global.json, out);
        }
    };
    check.checkpoint = Some(TreeHead {
        origin: Some(head.origin.clone()),
        size: head.size,
        root: head.root.to_base64(),
    });
    // No store: nothing to check against, as `verify` itself says (exit 3, not 1).
    if let Some(store_file) = missing_store_file(global) {
        check.outcome = "unverifiable";
        check.detail = format!(
            "cannot check the checkpoint: {}",
            missing_store_message(global, &store_file)
        );
        return finish_check(&check, global.json, out);
    }
    // A PostgreSQL database or schema holding no store is nothing to check against too
    // (found by a first-time user: it exited 1, as if the checkpoint had failed).
    let store = match crate::store_access::open_or_nothing(global).await? {
        Ok(store) => store,
        Err(why) => {
            check.outcome = "unverifiable";
            check.detail = format!("cannot check the checkpoint: {why}");
            return finish_check(&check, global.json, out);
        }
    };
    let log = countersign::audit::read_log(store.as_ref(), |_| false).await?;
    let tree = log.tree.tree();
    check.store = Some(TreeHead {
        origin: None,
        size: tree.size(),
        root: tree.root().to_base64(),
    });
    let broken = log.report.first_break.clone();
    check.chain = Some(log.report);
    if let Some(chain_break) = broken {
        check.detail = format!(
            "the chain breaks at receipt {}, so the store cannot be checked against the checkpoint: {chain_break}",
            chain_break.seq()
        );
        return finish_check(&check, global.json, out);
    }
    if head.size == 0 {
        check.outcome = "unverifiable";
        check.detail = "the checkpoint covers no receipt: there is nothing to compare".to_owned();
        return finish_check(&check, global.json, out);
    }
    if tree.size() < head.size {
        check.detail = format!(
            "the checkpoint signed {} receipts, but the store has {}: receipts were removed (truncation); restore the store from a backup",
            head.size,
            tree.size()
        );
        return finish_check(&check, global.json, out);
    }
    // INVARIANT (sizes-in-range): 0 < head.size <= tree.size(), checked above.
    let proof = tree.consistency_proof(head.size, tree.size())?;
    let verdict =
        merkle::verify_consistency(head.size, tree.size(), &proof, &head.root, &tree.root());
    check.consistency_proof = Some(proof);
    match verdict {
        Ok(()) => {
            check.outcome = "verified";
            let added = tree.size() - head.size;
            check.detail = format!(
                "the store's first {} receipts are the ones checkpoint `{}` signed{} (consistency proof checked)",
                head.size,
                head.origin,
                if added == 0 {
                    ", and none was added since".to_owned()
                } else {
                    format!(", and the {added} after them extend that log")
                }
            );
        }
        Err(error) => {
            // A checkpoint named by default after receipt 1 that names another receipt 1: say
            // so, since it may simply be another log's (found by a first-time user: only
            // tampering was blamed).
            let first = store.receipts(0, 1).await?;
            let other_log = first
                .first()
                .map(countersign::audit::checkpoint::default_origin)
                .filter(|origin| head.origin.starts_with("countersign/") && *origin != head.origin);
            check.detail = match other_log {
                Some(origin) => format!(
                    "the store's first {} receipts are not the ones the checkpoint signed ({error}): the checkpoint is of log `{}` and this store's receipt 1 names log `{origin}`, so either it is another log's checkpoint (check the `--checkpoint` and `--store-url` you passed) or this store's whole history was rewritten; if it is this log's, restore the store from a backup",
                    head.size, head.origin
                ),
                None => format!(
                    "the store's first {} receipts are not the ones the checkpoint signed ({error}): receipts before it were rewritten, or the log forked; restore the store from a backup",
                    head.size
                ),
            };
        }
    }
    finish_check(&check, global.json, out)
}

/// Arguments of `receipts --bundle`, flattened into `countersign receipts`.
#[derive(Debug, Args)]
pub struct BundleArgs {
    /// Write an offline bundle of the receipt at one place in the log (a receipt's seq on a
    /// one-lane SQLite store), or of every receipt of one action hash (`sha256:…`) or approval
    /// id (`apr_…`): the receipts, their inclusion proofs and the signed checkpoint, in one JSON
    /// file anyone can check with `countersign verify --bundle FILE --key PUB`.
    #[arg(long, value_name = "POSITION|HASH|ID", requires = "checkpoint", conflicts_with_all = ["verify", "export_anchor"])]
    pub bundle: Option<String>,
    /// With --bundle: the signed checkpoint the proofs lead to (from `countersign checkpoint
    /// --out FILE`); every receipt bundled must be in it.
    #[arg(long, value_name = "FILE", requires = "bundle")]
    pub checkpoint: Option<PathBuf>,
    /// With --bundle: the checkpoint's public key, to check it before using it.
    #[arg(long, value_name = "FILE", requires = "bundle")]
    pub key: Option<PathBuf>,
    /// With --bundle: write the bundle to this file (replaced whole) instead of standard output.
    #[arg(long, value_name = "FILE", requires = "bundle")]
    pub out: Option<PathBuf>,
}

/// Which receipts a bundle selector names.
enum Selector {
    /// A place in the log (a receipt's `seq` in a store of one lane).
    Position(u64),
    ActionHash(String),
    ApprovalId(String),
}

impl Selector {
    fn parse(text: &str) -> Result<Selector, Failure> {
        let text = text.trim();
        if let Ok(seq) = text.parse::<u64>() {
            return Ok(Selector::Position(seq));
        }
        if let Ok(hash) = countersign::ActionHash::parse(text) {
            return Ok(Selector::ActionHash(hash.as_str().to_owned()));
        }
        if let Ok(id) = countersign::ApprovalId::parse(text) {
            return Ok(Selector::ApprovalId(id.as_str().to_owned()));
        }
        Err(Failure(format!(
            "`--bundle {}` is neither a place in the log (a receipt's number), an action hash (`sha256:` and 64 hex digits) nor an approval id (`apr_…`): pass one of those",
            countersign::evidence::printable(text)
        )))
    }

    fn matches(&self, receipt: &StoredReceipt) -> bool {
        match self {
            Selector::Position(position) => receipt.position == *position,
            Selector::ActionHash(hash) => receipt.to_receipt().is_ok_and(|parsed| {
                parsed
                    .action_hash
                    .is_some_and(|found| found.as_str() == hash)
            }),
            Selector::ApprovalId(id) => receipt
                .to_receipt()
                .is_ok_and(|parsed| parsed.approval_id.is_some_and(|found| found.as_str() == id)),
        }
    }
}

/// `countersign receipts --bundle SELECTOR --checkpoint FILE`.
pub async fn write_bundle(
    global: &Global,
    args: &BundleArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let (Some(selector_text), Some(checkpoint_file)) = (&args.bundle, &args.checkpoint) else {
        return Err(Failure(
            "`--bundle` needs `--checkpoint FILE`: make one with `countersign checkpoint --key FILE --out FILE`".to_owned(),
        ));
    };
    let selector = Selector::parse(selector_text)?;
    let signed_bytes = read_checkpoint(checkpoint_file)?;
    let signed = String::from_utf8(signed_bytes.clone()).map_err(|_| {
        Failure(format!(
            "`{}` is not a signed checkpoint (not UTF-8 text): pass the file `countersign checkpoint --out` wrote",
            checkpoint_file.display()
        ))
    })?;
    let head = match &args.key {
        Some(key_file) => checkpoint::open(&signed_bytes, &PublicKey::load(key_file)?)
            .map(|(head, _)| head)
            .map_err(|error| {
                Failure(format!(
                    "the checkpoint `{}` does not hold under `{}`: {error}",
                    checkpoint_file.display(),
                    key_file.display()
                ))
            })?,
        None => unsigned_head(&signed).map_err(|error| {
            Failure(format!(
                "`{}` is not a signed checkpoint: {error}: pass the file `countersign checkpoint --out` wrote",
                checkpoint_file.display()
            ))
        })?,
    };
    let store = open_for_reading(global).await?;
    let log =
        countersign::audit::read_log(store.as_ref(), |receipt| selector.matches(receipt)).await?;
    if let Some(chain_break) = &log.report.first_break {
        return Err(Failure(format!(
            "the chain breaks at receipt {}: {chain_break}: run `countersign verify` before bundling",
            chain_break.seq()
        )));
    }
    let tree = log.tree.tree();
    if tree.size() < head.size || tree.root_at(head.size)? != head.root {
        return Err(Failure(format!(
            "this store does not hold the log checkpoint `{}` signed ({} receipts): pass the checkpoint of this store, or check it with `countersign verify --checkpoint`",
            checkpoint_file.display(),
            head.size
        )));
    }
    if log.selected.is_empty() {
        return Err(Failure(format!(
            "no receipt matches `{}`: the log holds receipts 1 to {}; give a receipt's number in that range, an action hash (`sha256:…`) or an approval id (`apr_…`), as `countersign receipts` lists them",
            countersign::evidence::printable(selector_text),
            tree.size()
        )));
    }
    if let Some(newer) = log
        .selected
        .iter()
        .find(|receipt| receipt.position > head.size)
    {
        return Err(Failure(format!(
            "the receipt at place {} in the log is newer than the checkpoint ({} receipts): make a new one with `countersign checkpoint --key FILE --out FILE` and bundle against it",
            newer.position, head.size
        )));
    }
    let made = bundle::make_bundle(&signed, &head, &log.tree, &log.selected)?;
    let mut text = serde_json::to_string_pretty(&made)?;
    text.push('\n');
    match &args.out {
        Some(path) => {
            write_whole(path, text.as_bytes())?;
            if global.json {
                write_json(
                    out,
                    &serde_json::json!({"out": path.display().to_string(), "receipts": made.receipts.len(), "checkpoint_size": head.size}),
                )?;
            } else {
                writeln!(
                    out,
                    "wrote {} receipt(s) with inclusion proofs against the checkpoint of {} receipts to {}: check it anywhere with `countersign verify --bundle {} --key PUBLIC_KEY_FILE`",
                    made.receipts.len(),
                    head.size,
                    path.display(),
                    path.display()
                )?;
            }
        }
        None => out.write_all(text.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The checkpoint inside a signed note, its signature not checked (the store's tree is compared
/// with it; the bundle's reader checks the signature).
fn unsigned_head(signed: &str) -> Result<Checkpoint, String> {
    let split = signed
        .rfind("\n\n")
        .ok_or_else(|| "no signature block".to_owned())?;
    Checkpoint::parse(&signed[..=split]).map_err(|error| error.to_string())
}

/// `countersign verify --bundle FILE --key PUB`: no store, no policy.
pub fn verify_bundle(
    global: &Global,
    file: &Path,
    key: Option<&Path>,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let key = load_public_key(key, "--bundle")?;
    let bytes = read_named(file, "bundle")?;
    match bundle::verify_bundle(&bytes, &key) {
        Ok(verified) => {
            let seqs: Vec<u64> = verified
                .receipts
                .iter()
                .map(|receipt| receipt.seq)
                .collect();
            if global.json {
                write_json(
                    out,
                    &serde_json::json!({
                        "outcome": "verified",
                        "checkpoint": {"origin": verified.checkpoint.origin, "size": verified.checkpoint.size, "root": verified.checkpoint.root.to_base64()},
                        "receipts": seqs,
                        "other_signatures": verified.other_signatures,
                    }),
                )?;
            } else {
                writeln!(
                    out,
                    "verified: {} receipt(s) ({}) are in the log `{}` as its checkpoint of {} receipts signed it (root {}); each receipt's hash and inclusion proof checked",
                    seqs.len(),
                    seqs.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    verified.checkpoint.origin,
                    verified.checkpoint.size,
                    verified.checkpoint.root
                )?;
                if !verified.other_signatures.is_empty() {
                    writeln!(
                        out,
                        "not checked: other signatures on the checkpoint ({})",
                        verified.other_signatures.join(", ")
                    )?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            let outcome = if error.is_unverifiable() {
                "unverifiable"
            } else {
                "failed"
            };
            let detail = match &error {
                BundleError::Unreadable { .. } => {
                    format!("{error}: pass the file `countersign receipts --bundle` wrote")
                }
                BundleError::Checkpoint(_) => format!(
                    "{error}: check that `--key` is the log's public key; otherwise the bundle was altered"
                ),
                _ => format!("{error}: the bundle was altered, or is not from this log"),
            };
            if global.json {
                write_json(
                    out,
                    &serde_json::json!({"outcome": outcome, "detail": detail}),
                )?;
            } else {
                writeln!(out, "{outcome}: {detail}")?;
            }
            Ok(if error.is_unverifiable() {
                ExitCode::from(UNVERIFIABLE)
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
