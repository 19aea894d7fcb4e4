//! Verifying a chain: [`Verifier`] folds stored receipts in order and names the first break;
//! an [`Anchor`] (`anchor.rs`) makes truncation detectable.

use super::*;

/// How a receipt is named to a person: `receipt 7`, or `receipt 7 of lane 3` outside lane 0.
pub(super) fn receipt_name(lane: u32, seq: u64) -> String {
    if lane == 0 {
        format!("receipt {seq}")
    } else {
        format!("receipt {seq} of lane {lane}")
    }
}

fn is_lane_zero(lane: &u32) -> bool {
    *lane == 0
}

/// Where a chain first breaks. Each names the lane it broke in (`lane`, not written for lane 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChainBreak {
    /// A receipt is missing or out of order.
    SeqGap {
        /// The lane.
        #[serde(skip_serializing_if = "is_lane_zero")]
        lane: u32,
        /// The seq expected.
        expected: u64,
        /// The seq found.
        found: u64,
    },
    /// A receipt does not point at its predecessor (a receipt was removed, inserted or forked).
    PrevHashMismatch {
        /// The lane.
        #[serde(skip_serializing_if = "is_lane_zero")]
        lane: u32,
        /// The receipt.
        seq: u64,
        /// The predecessor's hash.
        expected: ReceiptHash,
        /// What it points at.
        found: ReceiptHash,
    },
    /// A receipt's content does not match its hash (it was edited).
    HashMismatch {
        /// The lane.
        #[serde(skip_serializing_if = "is_lane_zero")]
        lane: u32,
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
        /// The lane.
        #[serde(skip_serializing_if = "is_lane_zero")]
        lane: u32,
        /// The receipt.
        seq: u64,
    },
    /// A receipt is not at the next place in the log's total order ([`StoredReceipt::position`]):
    /// a receipt before it was removed from the log with its place, or places were changed. Its
    /// own lane's chain held up to it, so the receipt named is where the break was seen, not
    /// what was changed: the place expected is (its message starts with it when the log skips
    /// a place).
    Misplaced {
        /// The lane.
        #[serde(skip_serializing_if = "is_lane_zero")]
        lane: u32,
        /// The receipt.
        seq: u64,
        /// The place that comes next in the log.
        expected_position: u64,
        /// The place it has.
        position: u64,
    },
    /// The log's order names a receipt the store no longer holds ([`StoredReceipt::missing`]):
    /// its row was deleted after it was placed. Only a store that records places apart from
    /// the receipts (PostgreSQL) can name it; elsewhere a deleted receipt is a
    /// [`ChainBreak::SeqGap`] in its lane.
    Missing {
        /// The lane.
        #[serde(skip_serializing_if = "is_lane_zero")]
        lane: u32,
        /// The receipt.
        seq: u64,
        /// Its place in the log.
        position: u64,
    },
    /// A receipt's body is unreadable or disagrees with its columns.
    Unreadable {
        /// The lane.
        #[serde(skip_serializing_if = "is_lane_zero")]
        lane: u32,
        /// The receipt.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
}

impl ChainBreak {
    /// The receipt where the chain breaks (its `seq` in [`ChainBreak::lane`]).
    pub fn seq(&self) -> u64 {
        match self {
            ChainBreak::SeqGap { found, .. } => *found,
            ChainBreak::PrevHashMismatch { seq, .. }
            | ChainBreak::HashMismatch { seq, .. }
            | ChainBreak::Unhashed { seq, .. }
            | ChainBreak::Misplaced { seq, .. }
            | ChainBreak::Missing { seq, .. }
            | ChainBreak::Unreadable { seq, .. } => *seq,
        }
    }

    /// The lane the chain breaks in (0 for a log of one lane).
    pub fn lane(&self) -> u32 {
        match self {
            ChainBreak::SeqGap { lane, .. }
            | ChainBreak::PrevHashMismatch { lane, .. }
            | ChainBreak::HashMismatch { lane, .. }
            | ChainBreak::Unhashed { lane, .. }
            | ChainBreak::Misplaced { lane, .. }
            | ChainBreak::Missing { lane, .. }
            | ChainBreak::Unreadable { lane, .. } => *lane,
        }
    }
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainBreak::SeqGap {
                lane,
                expected,
                found,
            } if found > expected => {
                // Read in the log's order, a receipt of its lane came first: the one expected
                // was removed, or moved later (a swap of places reads the same way).
                let of_lane = match lane {
                    0 => String::new(),
                    lane => format!("of lane {lane} "),
                };
                write!(
                    f,
                    "{} is missing where it belongs: the next one {of_lane}found is {found} (it was removed, or moved later in the log)",
                    receipt_name(*lane, *expected)
                )
            }
            ChainBreak::SeqGap {
                lane,
                expected,
                found,
            } => write!(
                f,
                "{} is out of order: {} was expected next in its lane (receipts were moved, or numbered again)",
                receipt_name(*lane, *found),
                receipt_name(*lane, *expected)
            ),
            ChainBreak::PrevHashMismatch {
                lane,
                seq,
                expected,
                found,
            } => write!(
                f,
                "{} does not follow receipt {}: it points at {found}, expected {expected} (a receipt was removed, inserted or forked)",
                receipt_name(*lane, *seq),
                seq.saturating_sub(1)
            ),
            ChainBreak::HashMismatch {
                lane,
                seq,
                computed,
                stored,
            } => write!(
                f,
                "{} was altered: its content hashes to {computed}, but {stored} is recorded",
                receipt_name(*lane, *seq)
            ),
            ChainBreak::Unhashed { lane, seq } => write!(
                f,
                "{} has no hash: it was written outside Countersign, so it and everything after it cannot be trusted",
                receipt_name(*lane, *seq)
            ),
            ChainBreak::Misplaced {
                lane,
                seq,
                expected_position,
                position,
            } => {
                let name = receipt_name(*lane, *seq);
                if position > expected_position {
                    write!(
                        f,
                        "no receipt is at place {expected_position} of the log: the next one, {name}, is at place {position}, and its own lane holds up to it, so a receipt was removed from the log or moved in it"
                    )
                } else {
                    write!(
                        f,
                        "{name} is at place {position} of the log, but place {expected_position} comes next: the log's places were changed"
                    )
                }
            }
            ChainBreak::Missing {
                lane,
                seq,
                position,
            } => write!(
                f,
                "{} is missing: the log names it at place {position}, but the store no longer holds it (its row was deleted after it was written)",
                receipt_name(*lane, *seq)
            ),
            ChainBreak::Unreadable { lane, seq, detail } => {
                write!(f, "{} is unreadable: {detail}", receipt_name(*lane, *seq))
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

impl AnchorCheck {
    /// Was nothing checked against ([`AnchorCheck::NotGiven`])?
    pub fn is_not_given(&self) -> bool {
        matches!(self, AnchorCheck::NotGiven)
    }
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
    /// The head reached in lane 0 (its last intact receipt), if any.
    pub head: Option<ChainHead>,
    /// The heads reached in the other lanes, by lane; empty (and not written) for a log of one
    /// lane.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<LaneHead>,
    /// The store's newest receipt as stored: in `seq`, its place in the log (SPEC 1.5; its
    /// `seq` in a store of one lane), and its `hash` column, checked or not (empty when its
    /// row is [`missing`](StoredReceipt::missing)); `None` for an empty log or when the report
    /// was made without a store
    /// ([`crate::audit::verify_store_range`] fills it).
    pub log_head: Option<ChainHead>,
    /// The range asked for, when only part of the log was checked.
    pub range: Option<VerifyRange>,
    /// The first break, if any.
    pub first_break: Option<ChainBreak>,
    /// The tail check.
    pub anchor: AnchorCheck,
    /// The log against the heads the store records apart from its receipts
    /// ([`Store::recorded_heads`](crate::store::Store::recorded_heads), PostgreSQL): every lane
    /// reaches the head recorded for it. Not written while [`AnchorCheck::NotGiven`]: a range,
    /// a broken chain, or a store that records no heads apart.
    #[serde(skip_serializing_if = "AnchorCheck::is_not_given")]
    pub recorded_heads: AnchorCheck,
}

impl VerifyReport {
    /// True when no break was found and, if an anchor was given, the chain reaches it. An empty
    /// log is intact but not verified: read [`VerifyReport::outcome`] to tell a pass from
    /// "nothing to check", and [`VerifyReport::anchor`] for what an unanchored check cannot show.
    pub fn is_intact(&self) -> bool {
        self.first_break.is_none()
            && !matches!(self.anchor, AnchorCheck::Failed { .. })
            && !matches!(self.recorded_heads, AnchorCheck::Failed { .. })
    }

    /// Judge the log this report reached against the heads the store records apart from its
    /// receipts (read before the log's head, so every receipt they name is in the part checked),
    /// and set [`VerifyReport::recorded_heads`]: a lane that ends before its recorded head lost
    /// receipts; one that ends at it must end with the recorded hash. A lane that goes past it
    /// was written to since. Nothing is judged past a break.
    pub fn judge_recorded_heads(&mut self, heads: &Anchor) {
        if self.first_break.is_some() {
            return;
        }
        let reached = |lane: u32| -> (u64, Option<&ReceiptHash>) {
            if lane == 0 {
                self.head
                    .as_ref()
                    .map_or((0, None), |head| (head.seq, Some(&head.hash)))
            } else {
                self.lanes
                    .iter()
                    .find(|head| head.lane == lane)
                    .map_or((0, None), |head| (head.seq, Some(&head.hash)))
            }
        };
        let mut check = AnchorCheck::Matched;
        for lane in std::iter::once(0).chain(heads.lanes.iter().map(|head| head.lane)) {
            let Some((seq @ 1.., hash)) = heads.head_of(lane) else {
                continue;
            };
            let name = receipt_name(lane, seq);
            let detail = match reached(lane) {
                (at, _) if at < seq => Some(format!(
                    "the store records {name} as its lane's newest, but the log ends {}: receipts were removed, or the head record edited",
                    if at == 0 {
                        "before its first receipt".to_owned()
                    } else {
                        format!("at {}", receipt_name(lane, at))
                    }
                )),
                (at, Some(found)) if at == seq && found.as_str() != hash => Some(format!(
                    "the store records {name} as its lane's newest with the hash {hash}, but that receipt hashes to {found}: it or the head record was edited"
                )),
                _ => None,
            };
            if let Some(detail) = detail {
                check = AnchorCheck::Failed { detail };
                break;
            }
        }
        if matches!(check, AnchorCheck::Failed { .. }) {
            self.outcome = VerifyOutcome::Failed;
        }
        self.recorded_heads = check;
    }
}

/// Verifies a log page by page (so a log of any length is checked in bounded memory).
///
/// A log is one chain per lane ([`Receipt::lane`]); receipts may be fed with the lanes
/// interleaved in any way, as long as each lane's come in its `seq` order. Each lane's chain is
/// checked on its own: `seq` from 1 without gaps, `prev_hash` the lane's previous receipt's
/// hash (the first's [`GENESIS_HASH`]), the body hashing to `hash`. Checking stops at the first
/// break in any lane.
#[derive(Clone, Debug)]
pub struct Verifier {
    /// Each lane reached so far; a lane not in it starts at `seq` 1 and genesis.
    lanes: std::collections::BTreeMap<u32, LaneProgress>,
    /// The place in the log the next placed receipt must have (1 at the start of a log).
    next_position: u64,
    /// A lane not yet in `lanes` starts at whatever receipt of it comes first, checked on its
    /// own (a range that starts after receipt 1, [`Verifier::after_receipt`]).
    open_lanes: bool,
    checked: u64,
    first_break: Option<ChainBreak>,
    /// The hash of the receipt each lane's anchor names, once it was reached.
    anchor_seen: std::collections::BTreeMap<u32, ReceiptHash>,
    /// The lanes the log's store writes, when known ([`Verifier::keeping_lanes`]).
    kept_lanes: Option<u32>,
}

/// Where a [`Verifier`] stands in one lane.
#[derive(Clone, Debug)]
struct LaneProgress {
    expected_seq: u64,
    prev_hash: ReceiptHash,
    checked: u64,
}

impl Default for LaneProgress {
    fn default() -> Self {
        LaneProgress {
            expected_seq: 1,
            prev_hash: ReceiptHash::genesis(),
            checked: 0,
        }
    }
}

impl Default for Verifier {
    /// [`Verifier::new`].
    fn default() -> Self {
        Verifier {
            lanes: std::collections::BTreeMap::new(),
            next_position: 1,
            open_lanes: false,
            checked: 0,
            first_break: None,
            anchor_seen: std::collections::BTreeMap::new(),
            kept_lanes: None,
        }
    }
}

impl Verifier {
    /// A verifier at the start of a log: the first receipt fed of each lane is its receipt 1,
    /// and the first placed one the log's place 1.
    pub fn new() -> Verifier {
        Verifier::default()
    }

    /// A verifier that starts after `before`, a receipt already known good, for checking part
    /// of a log: the next receipt fed in `before`'s lane must be `before.seq + 1` and point at
    /// `before.hash`, the next placed one must be at `before.position + 1`, and every other
    /// lane starts at its first receipt fed, which is checked on its own
    /// ([`check_alone`]): its link to the lane's receipts before the range is not checked.
    pub fn after_receipt(before: &StoredReceipt) -> Verifier {
        let mut verifier = Verifier {
            next_position: before.position.saturating_add(1),
            open_lanes: true,
            ..Verifier::default()
        };
        verifier.lanes.insert(
            before.lane,
            LaneProgress {
                expected_seq: before.seq + 1,
                prev_hash: before.hash.clone(),
                checked: 0,
            },
        );
        verifier
    }

    /// A verifier whose chain is already broken at `chain_break` (found before the part it was
    /// to check): it checks nothing more and reports the break.
    pub fn broken(chain_break: ChainBreak) -> Verifier {
        Verifier {
            first_break: Some(chain_break),
            ..Verifier::default()
        }
    }

    /// The same verifier, for a log whose store writes lanes 0 to `lanes - 1` only
    /// ([`Store::lanes`](crate::store::Store::lanes)): a receipt stored in any other lane is a
    /// break ([`ChainBreak::Unreadable`]), since no writer put it there. Without it, a receipt
    /// forged in a lane of its own chains from genesis and holds on its own.
    pub fn keeping_lanes(mut self, lanes: u32) -> Verifier {
        self.kept_lanes = Some(lanes);
        self
    }

    /// The `seq` the next receipt fed in lane 0 must have.
    pub fn expected_seq(&self) -> u64 {
        self.lanes.get(&0).map_or(1, |lane| lane.expected_seq)
    }

    /// The place in the log the next placed receipt must have (1 for a new verifier): the
    /// [`Store::receipts`](crate::store::Store::receipts) cursor to read on from is one less.
    pub fn next_position(&self) -> u64 {
        self.next_position.max(1)
    }

    /// Has it found a break (so further receipts need not be fed)?
    pub fn is_broken(&self) -> bool {
        self.first_break.is_some()
    }

    /// Check the next receipt of its lane, in `seq` order.
    pub fn feed(&mut self, receipt: &StoredReceipt, anchor: Option<&Anchor>) {
        if self.first_break.is_some() {
            return;
        }
        let open_lanes = self.open_lanes;
        let lane = self.lanes.entry(receipt.lane).or_insert_with(|| {
            if open_lanes {
                // The range starts inside this lane: its first receipt anchors it.
                LaneProgress {
                    expected_seq: receipt.seq,
                    prev_hash: receipt.prev_hash.clone(),
                    checked: 0,
                }
            } else {
                LaneProgress::default()
            }
        });
        // A receipt the log names but the store lost is named as such, before its lane's
        // chain (whose next receipt it is) would call it anything else.
        if let Err(chain_break) = check_present(receipt)
            .and_then(|()| check_kept(self.kept_lanes, receipt))
            .and_then(|()| check_next(lane, receipt))
        {
            self.first_break = Some(chain_break);
            return;
        }
        // The lane's chain holds (so a receipt removed from a lane is named as a gap in it
        // first); now its place in the log.
        if receipt.position != 0 {
            if receipt.position != self.next_position {
                self.first_break = Some(ChainBreak::Misplaced {
                    lane: receipt.lane,
                    seq: receipt.seq,
                    expected_position: self.next_position,
                    position: receipt.position,
                });
                return;
            }
            self.next_position = receipt.position.saturating_add(1);
        }
        if anchor
            .and_then(|anchor| anchor.head_of(receipt.lane))
            .is_some_and(|(seq, _)| seq == receipt.seq)
        {
            self.anchor_seen.insert(receipt.lane, receipt.hash.clone());
        }
        self.checked += 1;
        lane.checked += 1;
        lane.expected_seq += 1;
        lane.prev_hash = receipt.hash.clone();
    }

    /// Finish: the report, judged against `anchor` if one is given.
    pub fn finish(self, anchor: Option<&Anchor>) -> VerifyReport {
        let head_of = |progress: &LaneProgress| ChainHead {
            seq: progress.expected_seq - 1,
            hash: progress.prev_hash.clone(),
        };
        let first = self.lanes.get(&0).filter(|lane| lane.checked > 0);
        let head = first.map(head_of);
        let lanes = self
            .lanes
            .iter()
            .filter(|(lane, progress)| **lane != 0 && progress.checked > 0)
            .map(|(lane, progress)| {
                let head = head_of(progress);
                LaneHead {
                    lane: *lane,
                    seq: head.seq,
                    hash: head.hash,
                }
            })
            .collect();
        let anchor = match anchor {
            None => AnchorCheck::NotGiven,
            Some(anchor) => self.judge_anchor(anchor),
        };
        let outcome = if self.first_break.is_some() || matches!(anchor, AnchorCheck::Failed { .. })
        {
            VerifyOutcome::Failed
        } else if self.checked == 0 {
            VerifyOutcome::Unverifiable
        } else {
            VerifyOutcome::Verified
        };
        VerifyReport {
            outcome,
            checked: self.checked,
            first_seq: first.map(|lane| lane.expected_seq - lane.checked),
            last_seq: head.as_ref().map(|head| head.seq),
            head,
            lanes,
            log_head: None,
            range: None,
            first_break: self.first_break,
            anchor,
            recorded_heads: AnchorCheck::NotGiven,
        }
    }

    /// Does the log reach every head `anchor` names, with the hash it names? The first lane
    /// that does not is the one named.
    fn judge_anchor(&self, anchor: &Anchor) -> AnchorCheck {
        let named = std::iter::once(0).chain(anchor.lanes.iter().map(|head| head.lane));
        for lane in named {
            // A lane empty when the anchor was made has nothing to lose.
            let Some((seq @ 1.., hash)) = anchor.head_of(lane) else {
                continue;
            };
            let name = receipt_name(lane, seq);
            let detail = match self.anchor_seen.get(&lane) {
                Some(seen) if seen.as_str() == hash => continue,
                Some(seen) => format!("{name} hashes to {seen}, but the anchor says {hash}"),
                // A break before the anchor's receipt hides whether it is there: say so, and
                // leave the break (reported beside this) to say what was changed.
                None => match &self.first_break {
                    Some(chain_break) => format!(
                        "the anchor names {name} but the chain breaks before it, at {}: the anchor cannot be checked until the break is explained",
                        receipt_name(chain_break.lane(), chain_break.seq())
                    ),
                    None => {
                        let reached = self
                            .lanes
                            .get(&lane)
                            .map_or(0, |lane| lane.expected_seq - 1);
                        let lane_words = if lane == 0 {
                            String::new()
                        } else {
                            format!(" of lane {lane}")
                        };
                        if reached == 0 {
                            format!(
                                "the anchor names {name} but the log holds no receipt{lane_words}: receipts were removed"
                            )
                        } else {
                            format!(
                                "the anchor names {name} but the intact log ends at receipt {reached}{lane_words}: receipts were removed"
                            )
                        }
                    }
                },
            };
            return AnchorCheck::Failed { detail };
        }
        AnchorCheck::Matched
    }
}

/// Is `receipt` still stored ([`StoredReceipt::missing`])?
fn check_present(receipt: &StoredReceipt) -> Result<(), ChainBreak> {
    if receipt.missing {
        return Err(ChainBreak::Missing {
            lane: receipt.lane,
            seq: receipt.seq,
            position: receipt.position,
        });
    }
    Ok(())
}

/// Is `receipt` in a lane its store writes (`kept`, when known)?
fn check_kept(kept: Option<u32>, receipt: &StoredReceipt) -> Result<(), ChainBreak> {
    match kept {
        Some(kept) if receipt.lane >= kept => Err(ChainBreak::Unreadable {
            lane: receipt.lane,
            seq: receipt.seq,
            detail: format!(
                "it is stored in lane {}, but this store writes lanes 0 to {} only: no writer put it there, it was inserted by hand",
                receipt.lane,
                kept.saturating_sub(1)
            ),
        }),
        _ => Ok(()),
    }
}

/// Check `receipt` as the next of the lane `lane` stands at.
fn check_next(lane: &LaneProgress, receipt: &StoredReceipt) -> Result<(), ChainBreak> {
    if receipt.seq != lane.expected_seq {
        return Err(ChainBreak::SeqGap {
            lane: receipt.lane,
            expected: lane.expected_seq,
            found: receipt.seq,
        });
    }
    // An unhashed receipt (B58) is named as such, whatever else it lacks.
    if receipt.hash.trim().is_empty() {
        return Err(ChainBreak::Unhashed {
            lane: receipt.lane,
            seq: receipt.seq,
        });
    }
    if receipt.prev_hash != lane.prev_hash {
        return Err(ChainBreak::PrevHashMismatch {
            lane: receipt.lane,
            seq: receipt.seq,
            expected: lane.prev_hash.clone(),
            found: receipt.prev_hash.clone(),
        });
    }
    check_alone(receipt).map(|_| ())
}

/// Check one stored receipt on its own, without its neighbours: it has a hash, its body hashes to
/// it, the body is a receipt of a schema this build reads, at the position its `lane` and `seq`
/// columns say, and names the `prev_hash` its column says. Returns the parsed receipt. The chain links
/// ([`Verifier`]) and inclusion proofs (bundles) are checked around it.
///
/// # Errors
///
/// The [`ChainBreak`] naming what does not hold.
pub fn check_alone(receipt: &StoredReceipt) -> Result<Receipt, ChainBreak> {
    let (lane, seq) = (receipt.lane, receipt.seq);
    check_present(receipt)?;
    if receipt.hash.trim().is_empty() {
        return Err(ChainBreak::Unhashed { lane, seq });
    }
    let computed = ReceiptHash::computed(canonical::sha256_prefixed(receipt.body.as_bytes()));
    if computed != receipt.hash {
        return Err(ChainBreak::HashMismatch {
            lane,
            seq,
            computed,
            stored: receipt.hash.clone(),
        });
    }
    let unreadable = |detail: String| ChainBreak::Unreadable { lane, seq, detail };
    let parsed = receipt.to_receipt().map_err(unreadable)?;
    if parsed.lane != lane {
        return Err(unreadable(format!(
            "its body names lane {}, but it is stored in lane {lane}: it was moved between lanes",
            parsed.lane
        )));
    }
    if parsed.seq != seq || parsed.prev_hash != receipt.prev_hash {
        return Err(unreadable(
            "its body names a different position in the chain".to_owned(),
        ));
    }
    if !RECEIPT_SCHEMAS.contains(&parsed.schema.as_str()) {
        return Err(unreadable(format!(
            "its schema `{}` is not one this Countersign reads ({}): upgrade Countersign",
            parsed.schema,
            RECEIPT_SCHEMAS.join(", ")
        )));
    }
    if parsed.schema == RECEIPT_SCHEMAS[0] && parsed.has_v2_fields() {
        return Err(unreadable(
            "it says `countersign.receipt/v1` but carries fields only v2 has".to_owned(),
        ));
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
