//! Audit: the receipt chain in a store verified page by page ([`verify_store`]), and the store's
//! effect and approval rows checked against what their receipts record
//! ([`cross_check_effects`], [`cross_check_approvals`]). The pure chain check itself is
//! [`crate::evidence::Verifier`]; this module only reads a [`crate::store::Store`] into it.

pub mod checkpoint;

use serde::Serialize;

use crate::evidence::{
    Anchor, ChainBreak, Receipt, ReceiptKind, ReceiptOutcome, Verifier, VerifyOutcome, VerifyRange,
    VerifyReport, check_alone, printable,
};

/// Verify the whole chain in `store`, page by page, against `anchor` if given
/// ([`verify_store_range`] over the whole log).
///
/// # Errors
///
/// [`crate::StoreError`] when the store cannot be read.
///
/// # Cancel safety
///
/// Read-only.
pub async fn verify_store(
    store: &dyn crate::store::Store,
    anchor: Option<&Anchor>,
) -> Result<VerifyReport, crate::error::StoreError> {
    verify_store_range(store, None, anchor).await
}

/// Verify the receipts of `range` in `store` (the whole log for `None`), page by page, against
/// `anchor` if given, and note the store's head in [`VerifyReport::log_head`]. The log is
/// checked as it stood when the check began, up to that head: receipts written meanwhile (a
/// store in use) are left for the next check. The whole log is also held to the heads the store
/// records apart from its receipts, if it does ([`crate::store::Store::recorded_heads`],
/// [`VerifyReport::recorded_heads`]), and a receipt stored outside the store's lanes with no
/// place in the log, which no walk sees ([`crate::store::Store::stray_receipt`]), is its break
/// when the walk found none.
///
/// `range` counts places in the log (SPEC 1.5; a receipt's `seq` in a store of one lane). A range
/// starting after place 1 is checked from the receipt before it: that receipt's own hash must
/// hold and the next receipt of its lane must point at it; in a log of several lanes every
/// other lane's first receipt in the range is checked on its own (the receipts before the range
/// are not checked). The outcome is [`VerifyOutcome::Unverifiable`] when nothing was checked (an empty
/// log, a range past the head or an empty one, a log none of whose receipts has a hash: the
/// first is named in [`VerifyReport::first_break`]) or when the range ends past the head, unless
/// something checked failed (case B58: nothing checked is never a pass).
///
/// # Errors
///
/// [`crate::StoreError`] when the store cannot be read.
///
/// # Cancel safety
///
/// Read-only.
pub async fn verify_store_range(
    store: &dyn crate::store::Store,
    range: Option<VerifyRange>,
    anchor: Option<&Anchor>,
) -> Result<VerifyReport, crate::error::StoreError> {
    const PAGE: usize = 2_000;
    // Read before the head: every receipt they name is then placed at or before it.
    let recorded_heads = match range {
        None => store.recorded_heads().await?,
        Some(_) => None,
    };
    let log_head = store.chain_head().await?;
    let from = range.map_or(1, |range| range.from.max(1));
    let to = range.and_then(|range| range.to).unwrap_or(u64::MAX);
    // The log as it stood when the check began: receipts written while it runs (a live store)
    // are left for the next check, so what was checked and the head reported agree.
    let walk_to = to.min(log_head.as_ref().map_or(0, |head| head.seq));
    let verifier = if from == 1 {
        Verifier::new()
    } else {
        // The receipt before the range anchors it: its own hash must hold.
        match store.receipts(from - 2, 1).await?.into_iter().next() {
            Some(before) if before.position == from - 1 => match check_alone(&before) {
                Ok(_) => Verifier::after_receipt(&before),
                Err(chain_break) => Verifier::broken(chain_break),
            },
            // Places run from 1 without gaps: a later one means a receipt was removed.
            Some(later) if later.lane == 0 && later.position == later.seq => {
                Verifier::broken(ChainBreak::SeqGap {
                    lane: 0,
                    expected: from - 1,
                    found: later.seq,
                })
            }
            Some(later) => Verifier::broken(ChainBreak::Misplaced {
                lane: later.lane,
                seq: later.seq,
                expected_position: from - 1,
                position: later.position,
            }),
            // The log ends before the range: nothing to check.
            None => Verifier::new(),
        }
    };
    let mut verifier = verifier.keeping_lanes(store.lanes());
    let mut after = from - 1;
    let mut unhashed_only = true;
    'pages: while !verifier.is_broken() && after < walk_to {
        let page = store.receipts(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.position;
        for receipt in &page {
            if receipt.position > walk_to {
                break 'pages;
            }
            verifier.feed(receipt, anchor);
            if verifier.is_broken() {
                break 'pages;
            }
        }
        if page.len() < PAGE {
            break;
        }
    }
    let mut report = verifier.finish(anchor);
    if let Some(heads) = &recorded_heads {
        report.judge_recorded_heads(heads);
    }
    if range.is_none() {
        judge_stray(store, &mut report).await?;
    }
    // A first receipt without a hash: is any receipt of the range hashed at all?
    if report.checked == 0
        && let Some(ChainBreak::Unhashed { .. }) = &report.first_break
    {
        // The first receipt of the range (or the one before it) is the unhashed one. A log
        // without hashes has none from its first receipt on: a hashed receipt before the range
        // makes an unhashed one a break (`failed`), as the whole log's check says (case B58).
        let mut after = 0;
        'scan: loop {
            let page = store.receipts(after, PAGE).await?;
            let Some(last) = page.last() else { break };
            after = last.position;
            for receipt in &page {
                if receipt.position > walk_to {
                    break 'scan;
                }
                if !receipt.hash.trim().is_empty() {
                    unhashed_only = false;
                    break 'scan;
                }
            }
        }
    } else {
        unhashed_only = false;
    }
    // `to` is `u64::MAX` when no end was asked for: the head, whatever it is.
    let past_head = log_head
        .as_ref()
        .is_none_or(|head| from > head.seq || (to != u64::MAX && to > head.seq));
    let failed = report.outcome == VerifyOutcome::Failed && !unhashed_only;
    if !failed && (unhashed_only || from > to || past_head) {
        report.outcome = VerifyOutcome::Unverifiable;
    }
    report.log_head = log_head;
    report.range = range;
    Ok(report)
}

/// Name a receipt stored outside the store's lanes with no place in the log
/// ([`crate::store::Store::stray_receipt`]) as the log's break, when the walk found none: no
/// reader of the log sees such a row, so the walk cannot.
async fn judge_stray(
    store: &dyn crate::store::Store,
    report: &mut VerifyReport,
) -> Result<(), crate::error::StoreError> {
    if report.first_break.is_some() {
        return Ok(());
    }
    let Some(stray) = store.stray_receipt().await? else {
        return Ok(());
    };
    let others = match stray.count.saturating_sub(1) {
        0 => String::new(),
        1 => " (1 other receipt is stored the same way)".to_owned(),
        more => format!(" ({more} other receipts are stored the same way)"),
    };
    report.first_break = Some(ChainBreak::Unreadable {
        // A negative lane has no `u32`: the detail names it as stored.
        lane: u32::try_from(stray.lane).unwrap_or(u32::MAX),
        seq: u64::try_from(stray.seq).unwrap_or(0),
        detail: format!(
            "it is stored in lane {}, but this store writes lanes 0 to {} only, and no place of the log holds it: no writer put it there, it was inserted by hand{others}",
            stray.lane,
            store.lanes().saturating_sub(1)
        ),
    });
    report.outcome = VerifyOutcome::Failed;
    Ok(())
}

/// The whole log read once: its chain verified, its Merkle tree built, and the receipts a
/// caller selected ([`read_log`]).
#[derive(Debug)]
pub struct LogRead {
    /// The chain's verification (as [`verify_store`] without an anchor).
    pub report: VerifyReport,
    /// The Merkle tree of every receipt up to the first break (all of them on an intact chain),
    /// in log order ([`crate::evidence::log`]).
    pub tree: crate::evidence::log::LogTree,
    /// The receipts `select` chose, in log order, among those in the tree.
    pub selected: Vec<crate::evidence::StoredReceipt>,
}

/// Read the whole log in `store` page by page: verify the chain, build its Merkle tree, and
/// keep the receipts `select` chooses. Stops at the first break. A receipt stored outside the
/// store's lanes with no place in the log ([`crate::store::Store::stray_receipt`]) is the
/// break when the walk found none.
///
/// # Errors
///
/// [`crate::StoreError`] when the store cannot be read.
///
/// # Cancel safety
///
/// Read-only.
pub async fn read_log(
    store: &dyn crate::store::Store,
    mut select: impl FnMut(&crate::evidence::StoredReceipt) -> bool + Send,
) -> Result<LogRead, crate::error::StoreError> {
    const PAGE: usize = 2_000;
    // The head as the store records it, read first, as `verify` does (found by a first-time
    // user: `verify --checkpoint --json` showed `chain.log_head: null`).
    let log_head = store.chain_head().await?;
    let mut verifier = Verifier::new().keeping_lanes(store.lanes());
    let mut tree = crate::evidence::log::LogTree::new();
    let mut selected = Vec::new();
    let mut after = 0;
    'pages: loop {
        let page = store.receipts(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.position;
        for receipt in &page {
            verifier.feed(receipt, None);
            // INVARIANT (tree-follows-chain): the verifier accepted it, so it is at the next
            // place.
            if verifier.is_broken() || tree.push(receipt).is_err() {
                break 'pages;
            }
            if select(receipt) {
                selected.push(receipt.clone());
            }
        }
        if page.len() < PAGE {
            break;
        }
    }
    let mut report = verifier.finish(None);
    report.log_head = log_head;
    judge_stray(store, &mut report).await?;
    Ok(LogRead {
        report,
        tree,
        selected,
    })
}

/// An effect whose row in the store disagrees with what its receipts record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EffectDisagreement {
    /// The effect key.
    pub effect_key: String,
    /// The state in the effects table (`None`: no row).
    pub table: Option<crate::effect::EffectState>,
    /// The state its receipts end in (`None`: no receipt records an outcome for it).
    pub receipts: Option<crate::effect::EffectState>,
}

impl std::fmt::Display for EffectDisagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = printable(&self.effect_key);
        match (self.table, self.receipts) {
            (None, Some(receipts)) => write!(
                f,
                "effect `{key}` has no row in the effects table, but its receipts end `{}`: the row was deleted (so the effect could run again), or the receipts were forged",
                receipts.as_str()
            ),
            (Some(table), None) => write!(
                f,
                "effect `{key}` is `{}` in the effects table, but no receipt records an outcome for it: the row was written outside Countersign, or its receipts were removed",
                table.as_str()
            ),
            (Some(table), Some(receipts)) => write!(
                f,
                "effect `{key}` is `{}` in the effects table, but its receipts end `{}`: the table or the receipts were edited",
                table.as_str(),
                receipts.as_str()
            ),
            (None, None) => write!(f, "effect `{key}`: nothing recorded"),
        }
    }
}

/// What a comparison of a state table with the receipts found ([`cross_check_effects`],
/// [`cross_check_approvals`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StateCheck<D> {
    /// Rows compared.
    pub checked: u64,
    /// Every disagreement, in key order.
    pub disagreements: Vec<D>,
}

impl<D> Default for StateCheck<D> {
    fn default() -> Self {
        StateCheck {
            checked: 0,
            disagreements: Vec::new(),
        }
    }
}

impl<D> StateCheck<D> {
    /// True when every compared row agrees with the receipts.
    pub fn agrees(&self) -> bool {
        self.disagreements.is_empty()
    }
}

/// What [`cross_check_effects`] found.
pub type EffectCheck = StateCheck<EffectDisagreement>;

/// The effect state a receipt leaves its key in, if it changes it.
fn effect_state_after(receipt: &Receipt) -> Option<crate::effect::EffectState> {
    use crate::effect::EffectState;
    match (receipt.kind, receipt.outcome) {
        (ReceiptKind::Attempt | ReceiptKind::Resolution, ReceiptOutcome::Committed) => {
            Some(EffectState::Committed)
        }
        (ReceiptKind::Attempt | ReceiptKind::Resolution, ReceiptOutcome::Failed) => {
            Some(EffectState::Failed)
        }
        (ReceiptKind::Attempt, ReceiptOutcome::Ambiguous | ReceiptOutcome::HandedOff)
        | (ReceiptKind::LeaseExpired, _) => Some(EffectState::Ambiguous),
        _ => None,
    }
}

/// Compare the effects table with the receipt chain: every settled effect row (committed,
/// failed, ambiguous) must be the state its key's receipts end in; a `reserved` row (an attempt
/// in flight, or one whose lease lapsed) may only follow no outcome or a definite failure; and
/// every key whose receipts record an outcome must still have its row. The effects table is
/// what the kernel consults before running an effect, and it is not hash-chained: an edited or
/// deleted row could let an effect run again, and this is how `countersign verify` notices.
/// Keys with `observed` receipts (observe mode) are skipped. Run it on an intact chain
/// ([`verify_store`]). On a store being written, a disagreement counts only when a second
/// check finds it again ([`settled`]).
///
/// # Errors
///
/// [`crate::StoreError`] when the store cannot be read, or `Corrupt` for a receipt whose body
/// does not parse.
///
/// # Cancel safety
///
/// Read-only.
pub async fn cross_check_effects(
    store: &dyn crate::store::Store,
) -> Result<EffectCheck, crate::error::StoreError> {
    settled(|| effects_once(store)).await
}

/// One pass of [`cross_check_effects`]: the receipts, then the table.
async fn effects_once(
    store: &dyn crate::store::Store,
) -> Result<EffectCheck, crate::error::StoreError> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut ended: BTreeMap<String, crate::effect::EffectState> = BTreeMap::new();
    let mut observed: BTreeSet<String> = BTreeSet::new();
    for_each_receipt(store, |receipt| {
        let Some(key) = receipt
            .effect_key
            .as_ref()
            .map(|key| key.as_str().to_owned())
        else {
            return;
        };
        if receipt.outcome == ReceiptOutcome::Observed {
            observed.insert(key);
        } else if let Some(state) = effect_state_after(&receipt) {
            ended.insert(key, state);
        }
    })
    .await?;
    let mut check = EffectCheck::default();
    let mut rows = BTreeSet::new();
    for effect in store.effects(None).await? {
        use crate::effect::EffectState;
        let key = effect.key.as_str().to_owned();
        rows.insert(key.clone());
        if observed.contains(&key) {
            continue;
        }
        check.checked += 1;
        let receipts = ended.get(&key).copied();
        let agrees = match effect.state {
            // A reservation follows no outcome yet (the first attempt, in flight or lapsed) or
            // a definite failure (a retry); never a commit, and never an unresolved ambiguity.
            EffectState::Reserved => matches!(receipts, None | Some(EffectState::Failed)),
            settled => receipts == Some(settled),
        };
        if !agrees {
            check.disagreements.push(EffectDisagreement {
                effect_key: key,
                table: Some(effect.state),
                receipts,
            });
        }
    }
    for (key, state) in ended {
        if !rows.contains(&key) && !observed.contains(&key) {
            check.disagreements.push(EffectDisagreement {
                effect_key: key,
                table: None,
                receipts: Some(state),
            });
        }
    }
    check
        .disagreements
        .sort_by(|a, b| a.effect_key.cmp(&b.effect_key));
    Ok(check)
}

/// A state check that holds on a store being written. One pass reads the receipts and then the
/// table, so a row committed between the two reads (with its receipt, in one transaction) is
/// in the table but not in the receipts read: for that moment it disagrees, though nothing is
/// wrong. So when `check` finds any disagreement, it runs again, reading everything afresh,
/// and only what both passes found, the same in both, counts: a row written during the first
/// pass has its receipt in the second's read, and a row changed outside Countersign disagrees
/// every time. (A live race repeating itself exactly, same key and same states, would need the
/// row to change again between the second pass's two reads to the same states: not a
/// transition the kernel makes.) The counts are the second pass's.
async fn settled<D, F, Fut>(mut check: F) -> Result<StateCheck<D>, crate::error::StoreError>
where
    D: PartialEq,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<StateCheck<D>, crate::error::StoreError>>,
{
    let first = check().await?;
    if first.agrees() {
        return Ok(first);
    }
    let mut second = check().await?;
    second
        .disagreements
        .retain(|disagreement| first.disagreements.contains(disagreement));
    Ok(second)
}

/// Every receipt in `store`, oldest first, parsed, handed to `visit` page by page (bounded
/// memory).
async fn for_each_receipt(
    store: &dyn crate::store::Store,
    mut visit: impl FnMut(Receipt),
) -> Result<(), crate::error::StoreError> {
    const PAGE: usize = 2_000;
    let mut after = 0;
    loop {
        let page = store.receipts(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.position;
        for stored in &page {
            visit(
                stored
                    .to_receipt()
                    .map_err(|detail| crate::error::StoreError::Corrupt {
                        detail: format!("receipt {} does not parse: {detail}", stored.seq),
                    })?,
            );
        }
        if page.len() < PAGE {
            break;
        }
    }
    Ok(())
}

/// A `granted` approval row that its receipts do not back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalDisagreement {
    /// The request id.
    pub request_id: String,
    /// What its receipts end in: `granted`, `denied`, `consumed`, `expired`, `voided`, or
    /// `None` when no receipt records an answer.
    pub receipts: Option<&'static str>,
}

impl std::fmt::Display for ApprovalDisagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = printable(&self.request_id);
        match self.receipts {
            None => write!(
                f,
                "approval `{id}` is `granted` in the approvals table, but no receipt records anyone answering it: the row was written outside Countersign (and would authorize an action nobody approved), or its receipts were removed"
            ),
            Some(ended) => write!(
                f,
                "approval `{id}` is `granted` in the approvals table, but its receipts end `{ended}`: the table was edited (and would authorize an action again), or the receipts were"
            ),
        }
    }
}

/// What [`cross_check_approvals`] found (`checked` counts `granted` rows).
pub type ApprovalCheck = StateCheck<ApprovalDisagreement>;

/// Compare the approvals table with the receipts: every `granted` row — the state that
/// authorizes an action — must be backed by a `granted` answer receipt for that request that no
/// later receipt superseded (an attempt that consumed it, an expiry, a voiding). Other states
/// authorize nothing and are not compared. Run it on an intact chain ([`verify_store`]). On a
/// store being written, a disagreement counts only when a second check finds it again
/// ([`settled`]).
///
/// # Errors
///
/// As [`cross_check_effects`].
///
/// # Cancel safety
///
/// Read-only.
pub async fn cross_check_approvals(
    store: &dyn crate::store::Store,
) -> Result<ApprovalCheck, crate::error::StoreError> {
    settled(|| approvals_once(store)).await
}

/// One pass of [`cross_check_approvals`]: the receipts, then the table.
async fn approvals_once(
    store: &dyn crate::store::Store,
) -> Result<ApprovalCheck, crate::error::StoreError> {
    let mut ended: std::collections::BTreeMap<String, &'static str> = Default::default();
    for_each_receipt(store, |receipt| {
        let Some(id) = receipt
            .approval_id
            .as_ref()
            .map(|id| id.as_str().to_owned())
        else {
            return;
        };
        let state = match (receipt.kind, receipt.outcome) {
            (ReceiptKind::Answer, ReceiptOutcome::Granted) => "granted",
            (ReceiptKind::Answer, ReceiptOutcome::Denied) => "denied",
            (ReceiptKind::ApprovalExpired, _) => "expired",
            (ReceiptKind::ApprovalVoided, _) => "voided",
            (ReceiptKind::ApprovalRevoked, ReceiptOutcome::Revoked) => "revoked",
            (ReceiptKind::ApprovalCancelled, ReceiptOutcome::Cancelled) => "cancelled",
            (
                ReceiptKind::Attempt,
                ReceiptOutcome::Committed
                | ReceiptOutcome::Failed
                | ReceiptOutcome::Ambiguous
                | ReceiptOutcome::HandedOff,
            ) => "consumed",
            _ => return,
        };
        ended.insert(id, state);
    })
    .await?;
    let mut check = ApprovalCheck::default();
    // Issue #31: a revoked or cancelled request must end on its own receipt, and a granted one
    // must not have been revoked or cancelled since.
    let mut records = store
        .approvals(Some(crate::approval::ApprovalState::Granted))
        .await?;
    records.extend(
        store
            .approvals(Some(crate::approval::ApprovalState::Revoked))
            .await?,
    );
    records.extend(
        store
            .approvals(Some(crate::approval::ApprovalState::Cancelled))
            .await?,
    );
    for record in records {
        check.checked += 1;
        let id = record.id.as_str().to_owned();
        let receipts = ended.get(&id).copied();
        let expected = match record.state {
            crate::approval::ApprovalState::Revoked => "revoked",
            crate::approval::ApprovalState::Cancelled => "cancelled",
            _ => "granted",
        };
        if receipts != Some(expected) {
            check.disagreements.push(ApprovalDisagreement {
                request_id: id,
                receipts,
            });
        }
    }
    check
        .disagreements
        .sort_by(|a, b| a.request_id.cmp(&b.request_id));
    Ok(check)
}
