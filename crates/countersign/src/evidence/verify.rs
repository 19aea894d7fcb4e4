//! Verifying a chain: [`Verifier`] folds stored receipts in order and names the first break;
//! an [`Anchor`] makes truncation detectable.

use super::*;

/// An externally kept reference point: the chain's head when it was exported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// The number of receipts (the head's `seq`).
    pub seq: u64,
    /// The head's hash.
    pub hash: String,
}

/// Where a chain first breaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChainBreak {
    /// A receipt is missing or out of order.
    SeqGap {
        /// The seq expected.
        expected: u64,
        /// The seq found.
        found: u64,
    },
    /// A receipt does not point at its predecessor (a receipt was removed, inserted or forked).
    PrevHashMismatch {
        /// The receipt.
        seq: u64,
        /// The predecessor's hash.
        expected: ReceiptHash,
        /// What it points at.
        found: ReceiptHash,
    },
    /// A receipt's content does not match its hash (it was edited).
    HashMismatch {
        /// The receipt.
        seq: u64,
        /// The hash of its content now.
        computed: ReceiptHash,
        /// The hash stored with it.
        stored: ReceiptHash,
    },
    /// A receipt has no hash (written outside Countersign, or before hashing existed): it cannot
    /// be checked, and nothing after it can be trusted (case B58).
    Unhashed {
        /// The receipt.
        seq: u64,
    },
    /// A receipt's body is unreadable or disagrees with its columns.
    Unreadable {
        /// The receipt.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
}

impl ChainBreak {
    /// The receipt where the chain breaks.
    pub fn seq(&self) -> u64 {
        match self {
            ChainBreak::SeqGap { found, .. } => *found,
            ChainBreak::PrevHashMismatch { seq, .. }
            | ChainBreak::HashMismatch { seq, .. }
            | ChainBreak::Unhashed { seq }
            | ChainBreak::Unreadable { seq, .. } => *seq,
        }
    }
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainBreak::SeqGap { expected, found } => {
                write!(
                    f,
                    "receipt {expected} is missing: the next one found is {found}"
                )
            }
            ChainBreak::PrevHashMismatch {
                seq,
                expected,
                found,
            } => write!(
                f,
                "receipt {seq} does not follow receipt {}: it points at {found}, expected {expected} (a receipt was removed, inserted or forked)",
                seq.saturating_sub(1)
            ),
            ChainBreak::HashMismatch {
                seq,
                computed,
                stored,
            } => write!(
                f,
                "receipt {seq} was altered: its content hashes to {computed}, but {stored} is recorded"
            ),
            ChainBreak::Unhashed { seq } => write!(
                f,
                "receipt {seq} has no hash: it was written outside Countersign, so it and everything after it cannot be trusted"
            ),
            ChainBreak::Unreadable { seq, detail } => {
                write!(f, "receipt {seq} is unreadable: {detail}")
            }
        }
    }
}

/// What verification found out about the log's tail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AnchorCheck {
    /// No anchor was given: deleting the newest receipts cannot be detected.
    NotGiven,
    /// The log reaches the anchor and agrees with it.
    Matched,
    /// The log does not reach the anchor, or disagrees with it.
    Failed {
        /// What is wrong.
        detail: String,
    },
}

/// What a verification concluded. Nothing checked is never a success (case B58: a log with no
/// records, or none with hashes, answered "valid" elsewhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyOutcome {
    /// At least one receipt was checked, every one holds, and the anchor (if given) matched.
    Verified,
    /// A receipt or the anchor does not hold: [`VerifyReport::first_break`] or
    /// [`VerifyReport::anchor`] names it.
    Failed,
    /// Nothing could be checked (an empty log, a range past the head, a log none of whose
    /// receipts has a hash), or the range asked for reaches past the head; and nothing
    /// contradicts what was checked.
    Unverifiable,
}

impl VerifyOutcome {
    /// The wire and display word: `verified`, `failed` or `unverifiable`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyOutcome::Verified => "verified",
            VerifyOutcome::Failed => "failed",
            VerifyOutcome::Unverifiable => "unverifiable",
        }
    }
}

/// The receipts a verification covers: `seq` `from` to `to`, both included (`to`: `None` for up
/// to the head). A range that starts after the head, or ends before it starts, holds nothing
/// to check; one that ends past the head cannot be verified whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyRange {
    /// The first `seq` (1 or more).
    pub from: u64,
    /// The last `seq`, or `None` for the head.
    pub to: Option<u64>,
}

/// The result of [`verify`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// What was concluded: only [`VerifyOutcome::Verified`] is a pass.
    pub outcome: VerifyOutcome,
    /// How many receipts were checked (and held).
    pub checked: u64,
    /// The `seq` of the first receipt checked (`None`: none was).
    pub first_seq: Option<u64>,
    /// The `seq` of the last receipt checked (`None`: none was); `head`'s `seq`.
    pub last_seq: Option<u64>,
    /// The head reached (the last intact receipt), if any.
    pub head: Option<ChainHead>,
    /// The store's newest receipt as stored (its `seq` and its `hash` column, checked or not),
    /// `None` for an empty log or when the report was made without a store
    /// ([`crate::audit::verify_store_range`] fills it).
    pub log_head: Option<ChainHead>,
    /// The range asked for, when only part of the log was checked.
    pub range: Option<VerifyRange>,
    /// The first break, if any.
    pub first_break: Option<ChainBreak>,
    /// The tail check.
    pub anchor: AnchorCheck,
}

impl VerifyReport {
    /// True when no break was found and, if an anchor was given, the chain reaches it. An empty
    /// log is intact but not verified: read [`VerifyReport::outcome`] to tell a pass from
    /// "nothing to check", and [`VerifyReport::anchor`] for what an unanchored check cannot show.
    pub fn is_intact(&self) -> bool {
        self.first_break.is_none() && !matches!(self.anchor, AnchorCheck::Failed { .. })
    }
}

/// Verifies a chain page by page (so a log of any length is checked in bounded memory).
#[derive(Clone, Debug)]
pub struct Verifier {
    expected_seq: u64,
    prev_hash: ReceiptHash,
    checked: u64,
    first_break: Option<ChainBreak>,
    anchor_seen: Option<ReceiptHash>,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier {
            expected_seq: 1,
            prev_hash: ReceiptHash::genesis(),
            checked: 0,
            first_break: None,
            anchor_seen: None,
        }
    }
}

impl Verifier {
    /// A verifier at the start of a chain.
    pub fn new() -> Verifier {
        Verifier::default()
    }

    /// A verifier that starts after `before`, a receipt already known good: the next receipt
    /// fed must be `before.seq + 1` and point at `before.hash`. For checking part of a chain.
    pub fn after(before: &ChainHead) -> Verifier {
        Verifier {
            expected_seq: before.seq + 1,
            prev_hash: before.hash.clone(),
            ..Verifier::default()
        }
    }

    /// A verifier whose chain is already broken at `chain_break` (found before the part it was
    /// to check): it checks nothing more and reports the break.
    pub fn broken(chain_break: ChainBreak) -> Verifier {
        Verifier {
            first_break: Some(chain_break),
            ..Verifier::default()
        }
    }

    /// The `seq` the next receipt fed must have.
    pub fn expected_seq(&self) -> u64 {
        self.expected_seq
    }

    /// Has it found a break (so further receipts need not be fed)?
    pub fn is_broken(&self) -> bool {
        self.first_break.is_some()
    }

    /// Check the next receipt, in `seq` order.
    pub fn feed(&mut self, receipt: &StoredReceipt, anchor: Option<&Anchor>) {
        if self.first_break.is_some() {
            return;
        }
        let found = self.check(receipt).err();
        if let Some(chain_break) = found {
            self.first_break = Some(chain_break);
            return;
        }
        if anchor.is_some_and(|anchor| anchor.seq == receipt.seq) {
            self.anchor_seen = Some(receipt.hash.clone());
        }
        self.checked += 1;
        self.expected_seq += 1;
        self.prev_hash = receipt.hash.clone();
    }

    fn check(&self, receipt: &StoredReceipt) -> Result<(), ChainBreak> {
        if receipt.seq != self.expected_seq {
            return Err(ChainBreak::SeqGap {
                expected: self.expected_seq,
                found: receipt.seq,
            });
        }
        // An unhashed receipt (B58) is named as such, whatever else it lacks.
        if receipt.hash.trim().is_empty() {
            return Err(ChainBreak::Unhashed { seq: receipt.seq });
        }
        if receipt.prev_hash != self.prev_hash {
            return Err(ChainBreak::PrevHashMismatch {
                seq: receipt.seq,
                expected: self.prev_hash.clone(),
                found: receipt.prev_hash.clone(),
            });
        }
        check_alone(receipt).map(|_| ())
    }

    /// Finish: the report, judged against `anchor` if one is given.
    pub fn finish(self, anchor: Option<&Anchor>) -> VerifyReport {
        let head = (self.checked > 0).then(|| ChainHead {
            seq: self.expected_seq - 1,
            hash: self.prev_hash.clone(),
        });
        let anchor = match anchor {
            None => AnchorCheck::NotGiven,
            Some(anchor) => match &self.anchor_seen {
                Some(hash) if hash.as_str() == anchor.hash => AnchorCheck::Matched,
                Some(hash) => AnchorCheck::Failed {
                    detail: format!(
                        "receipt {} hashes to {hash}, but the anchor says {}",
                        anchor.seq, anchor.hash
                    ),
                },
                // A break before the anchor's receipt hides whether it is there: say so, and
                // leave the break (reported beside this) to say what was changed.
                None if self.first_break.is_some() => AnchorCheck::Failed {
                    detail: format!(
                        "the anchor names receipt {} but the chain breaks before it, at receipt {}: the anchor cannot be checked until the break is explained",
                        anchor.seq, self.expected_seq
                    ),
                },
                None => AnchorCheck::Failed {
                    detail: format!(
                        "the anchor names receipt {} but the intact log ends at receipt {}: receipts were removed",
                        anchor.seq,
                        self.expected_seq - 1
                    ),
                },
            },
        };
        let outcome = if self.first_break.is_some() || matches!(anchor, AnchorCheck::Failed { .. })
        {
            VerifyOutcome::Failed
        } else if self.checked == 0 {
            VerifyOutcome::Unverifiable
        } else {
            VerifyOutcome::Verified
        };
        let first_seq = (self.checked > 0).then(|| self.expected_seq - self.checked);
        VerifyReport {
            outcome,
            checked: self.checked,
            first_seq,
            last_seq: head.as_ref().map(|head| head.seq),
            head,
            log_head: None,
            range: None,
            first_break: self.first_break,
            anchor,
        }
    }
}

/// Check one stored receipt on its own, without its neighbours: it has a hash, its body hashes to
/// it, the body is a receipt of a schema this build reads, at the position its `seq` column
/// says, and names the `prev_hash` its column says. Returns the parsed receipt. The chain links
/// ([`Verifier`]) and inclusion proofs (bundles) are checked around it.
///
/// # Errors
///
/// The [`ChainBreak`] naming what does not hold.
pub fn check_alone(receipt: &StoredReceipt) -> Result<Receipt, ChainBreak> {
    if receipt.hash.trim().is_empty() {
        return Err(ChainBreak::Unhashed { seq: receipt.seq });
    }
    let computed = ReceiptHash::computed(canonical::sha256_prefixed(receipt.body.as_bytes()));
    if computed != receipt.hash {
        return Err(ChainBreak::HashMismatch {
            seq: receipt.seq,
            computed,
            stored: receipt.hash.clone(),
        });
    }
    let parsed = receipt
        .to_receipt()
        .map_err(|detail| ChainBreak::Unreadable {
            seq: receipt.seq,
            detail,
        })?;
    if parsed.seq != receipt.seq || parsed.prev_hash != receipt.prev_hash {
        return Err(ChainBreak::Unreadable {
            seq: receipt.seq,
            detail: "its body names a different position in the chain".to_owned(),
        });
    }
    if !RECEIPT_SCHEMAS.contains(&parsed.schema.as_str()) {
        return Err(ChainBreak::Unreadable {
            seq: receipt.seq,
            detail: format!(
                "its schema `{}` is not one this Countersign reads ({}): upgrade Countersign",
                parsed.schema,
                RECEIPT_SCHEMAS.join(", ")
            ),
        });
    }
    if parsed.schema == RECEIPT_SCHEMAS[0] && parsed.has_v2_fields() {
        return Err(ChainBreak::Unreadable {
            seq: receipt.seq,
            detail: "it says `countersign.receipt/v1` but carries fields only v2 has".to_owned(),
        });
    }
    Ok(parsed)
}

/// Verify a whole chain held in memory.
pub fn verify<'a>(
    receipts: impl IntoIterator<Item = &'a StoredReceipt>,
    anchor: Option<&Anchor>,
) -> VerifyReport {
    let mut verifier = Verifier::new();
    for receipt in receipts {
        verifier.feed(receipt, anchor);
        if verifier.is_broken() {
            break;
        }
    }
    verifier.finish(anchor)
}
