//! `countersign receipts --export jsonl|ocsf [--after SEQ]` (issue #23): the receipt log as a
//! stream for a SIEM or an archive, one receipt per line, resumable after the last `seq` a
//! consumer saw.
//!
//! The log is read a page at a time ([`PAGE`] receipts), so an export of any length holds one
//! page in memory. It ends at the head the log had when the export started. Each row is checked
//! as it passes (its body hashes to its stored hash, its `prev_hash` is the previous row's hash,
//! no `seq` is missing); the first row that fails stops the export with exit status 1 after the
//! intact lines before it, so a consumer never receives a receipt that does not re-check.
//!
//! Formats and mappings: `docs/export.md`.

mod ocsf;

use std::io::Write;
use std::process::ExitCode;

use countersign::evidence::StoredReceipt;
use countersign::id::ReceiptHash;
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

/// Write every receipt with `seq > after` up to the head the log has now, in order, one line
/// each in `format`.
///
/// # Errors
///
/// A [`Failure`] when `after` is past the head (naming the head), when a row breaks the chain
/// (after the lines before it were written), when a body cannot be read, or the store's own.
pub async fn export(
    store: &dyn Store,
    format: Format,
    after: u64,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let head = store.chain_head().await?.map_or(0, |head| head.seq);
    if after > head {
        return Err(Failure(if head == 0 {
            format!(
                "`--after {after}` is past the head of the receipt log, which is empty: this is not the store the position came from, or its receipts were deleted; run `countersign receipts --verify`"
            )
        } else {
            format!(
                "`--after {after}` is past the head of the receipt log (receipt {head}): this is not the store the position came from, or its newest receipts were deleted; run `countersign receipts --verify`, or export from the start without `--after`"
            )
        }));
    }
    let mut expected_prev = match after {
        0 => ReceiptHash::genesis(),
        _ => store
            .receipts(after - 1, 1)
            .await?
            .into_iter()
            .find(|receipt| receipt.seq == after)
            .map(|receipt| receipt.hash)
            .ok_or_else(|| {
                Failure(format!(
                    "receipt {after}, the one `--after {after}` resumes from, is missing from the log: the chain is broken; run `countersign receipts --verify`"
                ))
            })?,
    };
    let mut position = after;
    while position < head && !crate::stdout_closed() {
        let page = store.receipts(position, PAGE).await?;
        if page.is_empty() {
            return Err(missing(position + 1, None));
        }
        for receipt in page.iter().take_while(|receipt| receipt.seq <= head) {
            check_link(receipt, position + 1, &expected_prev)?;
            let line = match format {
                Format::Jsonl => receipt.body.clone(),
                Format::Ocsf => ocsf::line(receipt)?,
            };
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
            position = receipt.seq;
            expected_prev = receipt.hash.clone();
        }
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Does `receipt` sit at `expected_seq`, link to `expected_prev` and hash to its stored hash?
fn check_link(
    receipt: &StoredReceipt,
    expected_seq: u64,
    expected_prev: &ReceiptHash,
) -> Result<(), Failure> {
    if receipt.seq != expected_seq {
        return Err(missing(expected_seq, Some(receipt.seq)));
    }
    if &receipt.prev_hash != expected_prev {
        return Err(Failure(format!(
            "receipt {} does not link to receipt {} (its prev_hash is {}, receipt {} hashes to {expected_prev}): the chain is broken there, so the export stops before it; run `countersign receipts --verify`",
            receipt.seq,
            receipt.seq - 1,
            receipt.prev_hash,
            receipt.seq - 1
        )));
    }
    let computed = countersign::canonical::sha256_prefixed(receipt.body.as_bytes());
    if computed != receipt.hash.as_str() {
        return Err(Failure(format!(
            "receipt {} was altered (its body hashes to {computed}, the log says {}): the export stops before it; run `countersign receipts --verify`",
            receipt.seq, receipt.hash
        )));
    }
    Ok(())
}

/// The refusal for a `seq` missing from the log.
fn missing(expected: u64, found: Option<u64>) -> Failure {
    let next = found.map_or_else(
        || "no receipt follows it".to_owned(),
        |seq| format!("the next stored receipt is {seq}"),
    );
    Failure(format!(
        "receipt {expected} is missing from the log ({next}): the chain is broken there, so the export stops before it; run `countersign receipts --verify`"
    ))
}
