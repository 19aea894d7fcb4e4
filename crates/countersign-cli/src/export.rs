//! `countersign receipts --export jsonl|ocsf [--after POSITION]` (issue #23): the receipt log as
//! a stream for a SIEM or an archive, one receipt per line, in log order, resumable after the
//! last place in the log a consumer saw (a receipt's `seq` in a store of one lane; SPEC 1.5).
//!
//! The log is read a page at a time ([`PAGE`] receipts), so an export of any length holds one
//! page in memory. It ends at the head the log had when the export started. Each row is checked
//! as it passes by the kernel's [`Verifier`] (its body hashes to its stored hash, its
//! `prev_hash` is its lane's previous row's hash, no `seq` of its lane and no place in the log
//! is missing); the first row that fails stops the export with exit status 1 after the intact
//! lines before it, so a consumer never receives a receipt that does not re-check.
//!
//! Formats and mappings: `docs/export.md`.

mod ocsf;

use std::io::Write;
use std::process::ExitCode;

use countersign::evidence::Verifier;
use countersign::store::Store;

use crate::Failure;

/// Receipts read from the store at once.
const PAGE: usize = 500;

/// What `--export` writes: one line per receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The stored receipt body, byte for byte: the line's SHA-256 is the receipt's hash, and
    /// each line's `prev_hash` is the hash of the line before.
    Jsonl,
    /// One OCSF 1.8.0 API Activity event (class_uid 6003) per receipt.
    Ocsf,
}

/// Write every receipt placed after `after` up to the head the log has now, in log order, one
/// line each in `format`. `flags` (`store_access::store_flags`) go into the commands its errors
/// suggest, so they act on the same store.
///
/// # Errors
///
/// A [`Failure`] when `after` is past the head (naming the head), when a row breaks the chain
/// (after the lines before it were written), when a body cannot be read, or the store's own.
pub async fn export(
    store: &dyn Store,
    format: Format,
    after: u64,
    flags: &str,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let head = store.chain_head().await?.map_or(0, |head| head.seq);
    if after > head {
        return Err(Failure(if head == 0 {
            format!(
                "`--after {after}` is past the head of the receipt log, which is empty: this is not the store the position came from, or its receipts were deleted; run `countersign receipts --verify{flags}`"
            )
        } else {
            format!(
                "`--after {after}` is past the head of the receipt log (place {head}): this is not the store the position came from, or its newest receipts were deleted; run `countersign receipts --verify{flags}`, or export from the start without `--after`"
            )
        }));
    }
    let verifier = match after {
        0 => Verifier::new(),
        _ => store
            .receipts(after - 1, 1)
            .await?
            .into_iter()
            .find(|receipt| receipt.position == after && !receipt.missing)
            .map(|before| Verifier::after_receipt(&before))
            .ok_or_else(|| {
                Failure(format!(
                    "the receipt at place {after}, the one `--after {after}` resumes from, is missing from the log: the chain is broken; run `countersign receipts --verify{flags}`"
                ))
            })?,
    };
    let mut verifier = verifier.keeping_lanes(store.lanes());
    let mut position = after;
    while position < head && !crate::stdout_closed() {
        let page = store.receipts(position, PAGE).await?;
        if page.is_empty() {
            return Err(Failure(format!(
                "the receipt at place {} in the log is missing (no receipt follows it, though the log's head is at {head}): the chain is broken there, so the export stops before it; run `countersign receipts --verify{flags}`",
                position + 1
            )));
        }
        for receipt in page.iter().take_while(|receipt| receipt.position <= head) {
            verifier.feed(receipt, None);
            if verifier.is_broken() {
                let report = verifier.finish(None);
                let what = report
                    .first_break
                    .map_or_else(|| "the chain is broken".to_owned(), |at| at.to_string());
                return Err(Failure(format!(
                    "{what}; the chain is broken there, so the export stops before it: run `countersign receipts --verify{flags}`"
                )));
            }
            let line = match format {
                Format::Jsonl => receipt.body.clone(),
                Format::Ocsf => ocsf::line(receipt)?,
            };
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
            position = receipt.position;
        }
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}
