//! Signed checkpoints of a store's log (issue #23, `docs/evidence.md`): [`sign_log`] verifies
//! the whole chain, builds its Merkle tree and signs the head; [`publish_checkpoint`] writes the
//! `log.checkpoint` outbox event, so webhooks carry the checkpoint outside the store. Both are
//! run by the one process that holds the log's key (`countersign checkpoint`, or `countersign
//! serve --checkpoint-key`), never by agents.

use crate::clock::Timestamp;
use crate::error::StoreError;
use crate::evidence::checkpoint::{self, Checkpoint, CheckpointError};
use crate::evidence::{ChainBreak, StoredReceipt, VerifyOutcome};
use crate::outbox::{EventKind, checkpoint_event};
use crate::token::SigningKey;

/// A checkpoint signed over a store's whole log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedLog {
    /// What was signed: the origin, the tree size (receipts 1 to `size`) and the root.
    pub head: Checkpoint,
    /// The signed note (C2SP `signed-note`), as `countersign checkpoint` prints it.
    pub signed: String,
    /// The verifier key, `origin+keyid+base64(0x01 || key)` (Go's `note.NewVerifier` format).
    pub verifier_key: String,
}

/// Why [`sign_log`] made no checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum SignLogError {
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The log has no receipt: nothing to sign yet.
    #[error(
        "the receipt log is empty: there is nothing to checkpoint yet; run this again once the agent has made a call"
    )]
    Empty,
    /// The chain does not verify: signing it would vouch for a broken log.
    #[error(
        "refusing to sign a broken log: {0}: run `countersign verify` and restore the store before making a checkpoint"
    )]
    Broken(ChainBreak),
    /// Receipt 1 was not read, so no default origin can be derived.
    #[error("receipt 1 was not found: pass the log's name with `--origin NAME`")]
    NoOrigin,
    /// The origin cannot name a key (spaces, `+`, empty).
    #[error(
        "cannot sign a checkpoint for `{origin}`: {error}: pick another name with `--origin NAME`"
    )]
    Sign {
        /// The origin refused.
        origin: String,
        /// Why.
        error: CheckpointError,
    },
}

/// The origin a log gets when none is given: `countersign/` and the first 16 hex digits of
/// receipt 1's hash, stable for the log's life and different per log.
pub fn default_origin(first: &StoredReceipt) -> String {
    let digits = first.hash.as_str().trim_start_matches("sha256:");
    format!("countersign/{}", &digits[..digits.len().min(16)])
}

/// Verify the whole chain in `store`, build its Merkle tree and sign its head with `key` under
/// `origin` (default [`default_origin`]). Reads only.
///
/// # Errors
///
/// [`SignLogError`]: the store cannot be read, the log is empty or broken, or the origin
/// cannot name a key.
///
/// # Cancel safety
///
/// Read-only.
pub async fn sign_log(
    store: &dyn crate::store::Store,
    key: &SigningKey,
    origin: Option<&str>,
) -> Result<SignedLog, SignLogError> {
    let mut first = None;
    let log = super::read_log(store, |receipt| {
        if receipt.seq == 1 {
            first = Some(receipt.clone());
        }
        false
    })
    .await?;
    match log.report.outcome {
        VerifyOutcome::Verified => {}
        VerifyOutcome::Unverifiable => return Err(SignLogError::Empty),
        VerifyOutcome::Failed => {
            return Err(match log.report.first_break {
                Some(chain_break) => SignLogError::Broken(chain_break),
                None => SignLogError::Empty,
            });
        }
    }
    let origin = match (origin, &first) {
        (Some(origin), _) => origin.trim().to_owned(),
        (None, Some(first)) => default_origin(first),
        (None, None) => return Err(SignLogError::NoOrigin),
    };
    let tree = log.tree.tree();
    let head = Checkpoint {
        origin,
        size: tree.size(),
        root: tree.root(),
        extensions: Vec::new(),
    };
    let refused = |error| SignLogError::Sign {
        origin: head.origin.clone(),
        error,
    };
    let signed = checkpoint::sign(&head, key).map_err(refused)?;
    let verifier_key = checkpoint::verifier(&head.origin, key.public_key())
        .map_err(refused)?
        .to_string();
    Ok(SignedLog {
        head,
        signed,
        verifier_key,
    })
}

/// What [`publish_checkpoint`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Published {
    /// The `log.checkpoint` event with this id was written.
    Written(String),
    /// Not written: the newest `log.checkpoint` event in the outbox (this id) already carries a
    /// checkpoint of the same origin, size and root (the log has not grown since).
    Unchanged(String),
}

/// Write `made`'s `log.checkpoint` event to the outbox at `now` (its own transaction), unless
/// the newest such event already carries the same origin, size and root; every webhook endpoint
/// then receives it (`docs/approval-service.md`).
///
/// # Errors
///
/// [`StoreError`]: the store cannot be written, or keeps no outbox.
///
/// # Cancel safety
///
/// One transaction, committed or not.
pub async fn publish_checkpoint(
    store: &dyn crate::store::Store,
    made: &SignedLog,
    now: Timestamp,
) -> Result<Published, StoreError> {
    if let Some(last) = store.last_event(EventKind::Checkpoint).await? {
        let data = serde_json::from_str::<serde_json::Value>(&last.event.body)
            .ok()
            .map(|body| body["data"].clone());
        let same = data.is_some_and(|data| {
            data["origin"] == made.head.origin.as_str()
                && data["size"] == made.head.size
                && data["root"] == made.head.root.to_base64().as_str()
        });
        if same {
            return Ok(Published::Unchanged(last.event.id));
        }
    }
    let event = checkpoint_event(&made.head, &made.signed, &made.verifier_key, now);
    store.append_event(&event).await?;
    Ok(Published::Written(event.id))
}
