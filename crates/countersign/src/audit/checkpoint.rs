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
    let mut follower = LogFollower::new();
    follower.catch_up(store).await?;
    follower.sign(key, origin)
}

/// A checkpointer's copy of the log's state that grows with the log: each
/// [`LogFollower::catch_up`] reads only the receipts after the last one it checked, verifies
/// that they chain on from it, and adds them to the Merkle tree. A process that signs on a
/// timer (`serve --checkpoint-key`) keeps one, so a checkpoint costs the receipts written since
/// the last one, not the whole log ([`sign_log`] starts a fresh one: the whole log).
///
/// What it has read it does not read again: a rewrite of receipts already covered is caught by
/// whoever holds an earlier checkpoint (`verify --checkpoint`, a consistency proof), not by the
/// follower, which keeps signing the tree it verified; a rewrite that reaches past its position
/// breaks the link of the next receipt it reads, and it then refuses to sign (start a new one
/// once the store is restored, as `serve` does on its next tick).
#[derive(Clone, Debug, Default)]
pub struct LogFollower {
    verifier: crate::evidence::Verifier,
    tree: crate::evidence::log::LogTree,
    first: Option<StoredReceipt>,
}

impl LogFollower {
    /// A follower that has read nothing yet.
    pub fn new() -> LogFollower {
        LogFollower::default()
    }

    /// How many receipts it has verified and added (receipts 1 to this).
    pub fn size(&self) -> u64 {
        self.tree.size()
    }

    /// Read the receipts after the last one read, page by page, verifying each and adding it
    /// to the tree; stops at the head, or at the first receipt that does not verify (after
    /// which [`LogFollower::sign`] refuses).
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot be read; what was read before stays read.
    ///
    /// # Cancel safety
    ///
    /// Read-only; a cancelled call leaves the follower at a receipt boundary.
    pub async fn catch_up(&mut self, store: &dyn crate::store::Store) -> Result<(), StoreError> {
        const PAGE: usize = 2_000;
        while !self.verifier.is_broken() {
            let after = self.verifier.next_position().saturating_sub(1);
            let page = store.receipts(after, PAGE).await?;
            for receipt in &page {
                if receipt.position == 1 {
                    self.first = Some(receipt.clone());
                }
                self.verifier.feed(receipt, None);
                // INVARIANT (tree-follows-chain): the verifier accepted it, so it is at the next
                // place.
                if self.verifier.is_broken() || self.tree.push(receipt).is_err() {
                    return Ok(());
                }
            }
            if page.len() < PAGE {
                break;
            }
        }
        Ok(())
    }

    /// Does the log it has verified extend the one `earlier` signed: at least `earlier.size`
    /// receipts, the first `earlier.size` of them the ones `earlier` signed (a consistency
    /// proof, RFC 9162 §2.1.4, made and checked)? `earlier`'s signature and origin are the
    /// caller's to check.
    ///
    /// # Errors
    ///
    /// A sentence saying how the log and `earlier` differ: receipts removed, or rewritten.
    pub fn extends(&self, earlier: &Checkpoint) -> Result<(), String> {
        let tree = self.tree.tree();
        if earlier.size > tree.size() {
            return Err(format!(
                "it signed {} receipts and the log now has {}: receipts were removed",
                earlier.size,
                tree.size()
            ));
        }
        if earlier.size == 0 {
            return Ok(());
        }
        let proof = tree
            .consistency_proof(earlier.size, tree.size())
            .map_err(|error| error.to_string())?;
        crate::evidence::merkle::verify_consistency(
            earlier.size,
            tree.size(),
            &proof,
            &earlier.root,
            &tree.root(),
        )
        .map_err(|error| {
            format!(
                "the log's first {} receipts are not the ones it signed ({error}): they were rewritten, or the log forked",
                earlier.size
            )
        })
    }

    /// Sign the head of what it has verified with `key` under `origin` (default
    /// [`default_origin`]).
    ///
    /// # Errors
    ///
    /// [`SignLogError`]: nothing read yet (or an empty log), a broken chain, no receipt 1 to
    /// name the log, or an origin that cannot name a key.
    pub fn sign(&self, key: &SigningKey, origin: Option<&str>) -> Result<SignedLog, SignLogError> {
        let report = self.verifier.clone().finish(None);
        match report.outcome {
            VerifyOutcome::Verified => {}
            VerifyOutcome::Unverifiable => return Err(SignLogError::Empty),
            VerifyOutcome::Failed => {
                return Err(match report.first_break {
                    Some(chain_break) => SignLogError::Broken(chain_break),
                    None => SignLogError::Empty,
                });
            }
        }
        let origin = match (origin, &self.first) {
            (Some(origin), _) => origin.trim().to_owned(),
            (None, Some(first)) => default_origin(first),
            (None, None) => return Err(SignLogError::NoOrigin),
        };
        let tree = self.tree.tree();
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

/// Write `made`'s `log.checkpoint` event to the outbox (its own transaction), dated by the
/// store's clock ([`crate::store::Store::store_now`] of the caller's `now`), unless
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
    // One clock (SPEC 1.6): the event is dated, and becomes due for delivery, at the store's
    // time, not at the time of the host that signed it.
    let at = store.store_now(now).await?;
    let event = checkpoint_event(&made.head, &made.signed, &made.verifier_key, at);
    store.append_event(&event).await?;
    Ok(Published::Written(event.id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
    use crate::store::{MemoryStore, Store};

    async fn append(store: &MemoryStore, from: u64, to: u64) {
        for n in from..to {
            let draft = ReceiptDraft {
                kind: Some(ReceiptKind::Attempt),
                outcome: Some(ReceiptOutcome::Committed),
                action: Some(format!("action.{n}")),
                ..ReceiptDraft::default()
            };
            store
                .append_receipt(draft, Timestamp::from_millis(1_000 + n as i64))
                .await
                .expect("appended");
        }
    }

    /// A follower that catches up tick by tick signs exactly what a fresh read of the whole log
    /// signs, and reads each receipt once.
    #[tokio::test]
    async fn a_follower_signs_what_a_whole_read_signs() {
        let store = MemoryStore::new();
        let key = crate::token::generate_keypair().expect("a key");
        let mut follower = LogFollower::new();
        assert!(matches!(
            follower.sign(&key, None),
            Err(SignLogError::Empty)
        ));
        for (from, to) in [(0, 3), (3, 4), (4, 2_600)] {
            append(&store, from, to).await;
            follower.catch_up(&store).await.expect("caught up");
            assert_eq!(follower.size(), to);
            let whole = sign_log(&store, &key, None).await.expect("whole log");
            let followed = follower.sign(&key, None).expect("followed");
            assert_eq!(followed.head, whole.head);
            assert_eq!(followed.signed, whole.signed);
        }
        // Nothing new: the same checkpoint again.
        follower.catch_up(&store).await.expect("caught up");
        assert_eq!(follower.size(), 2_600);
    }

    /// The event is dated by the store's clock, whatever the signing host's clock says (one
    /// clock, SPEC 1.6): a host an hour behind the store still dates it at the store's time.
    #[tokio::test]
    async fn a_checkpoint_event_is_dated_by_the_store_clock() {
        let store = MemoryStore::new();
        append(&store, 0, 3).await;
        let key = crate::token::generate_keypair().expect("a key");
        let made = sign_log(&store, &key, None).await.expect("signed");
        let hour = 3_600_000;
        store.shift_clock_for_tests(hour).expect("a shift");
        let host = Timestamp::from_millis(5_000_000);
        let published = publish_checkpoint(&store, &made, host)
            .await
            .expect("published");
        assert!(matches!(published, Published::Written(_)), "{published:?}");
        let last = store
            .last_event(EventKind::Checkpoint)
            .await
            .expect("read")
            .expect("an event");
        assert_eq!(
            last.event.created_at,
            host.plus(std::time::Duration::from_millis(hour as u64))
        );
    }
}
