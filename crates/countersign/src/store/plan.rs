//! The transaction plan: every rule a store transaction applies, written once for every backend.
//!
//! A store operation ([`Operation`]) is planned in three pure steps, and a backend does only
//! the I/O between them:
//!
//! 1. **Reads.** [`plan`] runs the operation's rules over the rows read so far ([`Reads`]).
//!    When a rule needs a row not yet read it stops with [`Halt::Read`] naming it; the backend
//!    fetches that row inside its open transaction ([`Fetched`]) and calls [`plan`] again. Each
//!    operation reads a fixed set of rows, in a fixed order (the order PostgreSQL takes its row
//!    locks in): only rows named by an earlier read (the request a framework call maps to, the
//!    approval an effect's attempt consumed) depend on what was read.
//! 2. **Decision.** With every read in hand, [`plan`] returns a [`Plan`]: the row writes, each
//!    carrying the prior state it expects (compare-and-set: [`Write`]), the outbox events, the
//!    receipt drafts, and the reply. It is a pure function of the operation, the reads and the
//!    time, so a backend may run it again from the start after a rolled-back try.
//! 3. **Sealing.** The backend reads the chain head (only if the plan has receipts) and
//!    [`Plan::seal`] chains the drafts onto it ([`crate::evidence::seal`]), giving the stored
//!    receipts and the caller's result ([`Done`]); PostgreSQL applies the writes first and locks
//!    the head last ([`Plan::split`]). A write whose expectation fails means another transaction
//!    got there first: PostgreSQL rolls back and plans again; the memory and SQLite stores, which
//!    hold the whole store's write lock, report [`StoreError::Corrupt`].
//!
//! Everything a plan decides is committed, refusals included (a refused answer or resolution
//! leaves its refusal receipt); a [`StoreError`] from a rule rolls the transaction back.

mod approval;
mod attempt;
#[cfg(test)]
mod model;
mod resolve;
mod unsealed;
pub(crate) mod withdraw;

pub(crate) use unsealed::Unsealed;

use std::borrow::Borrow;

use crate::ActionHash;
use crate::approval::{ApprovalId, ApprovalRecord, ApprovalState, Correlation};
use crate::clock::Timestamp;
use crate::effect::{EffectKey, EffectRecord, EffectState};
use crate::error::{AnswerError, ResolveError, StoreError};
use crate::evidence::{
    self, ChainHead, Receipt, ReceiptDraft, ReceiptKind, ReceiptOutcome, StoredReceipt,
};
use crate::id::AttemptId;
use crate::outbox::{EventKind, OutboxEvent, approval_event};
use crate::store::{
    BeginAttempt, BeginOutcome, BeginRefusal, FinishAttempt, HandOff, HandOffOutcome, NewApproval,
    OpenOutcome, RecordAnswer, ResolveEffect,
};

/// One store operation that reads, decides and writes in one transaction, kept whole so a
/// rolled-back try can be planned again.
// One value per store call, moved once: boxing the attempt would cost an allocation per call
// for no saving.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub(crate) enum Operation {
    /// [`crate::Store::open_approval`].
    Open(NewApproval),
    /// [`crate::Store::answer_approval`].
    Answer(RecordAnswer),
    /// [`crate::Store::withdraw_approval`].
    Withdraw(crate::approval::withdraw::Withdrawal),
    /// [`crate::Store::expire_approval`].
    Expire(ApprovalId),
    /// [`crate::Store::begin_attempt`].
    Begin(BeginAttempt),
    /// [`crate::Store::finish_attempt`].
    Finish(FinishAttempt),
    /// [`crate::Store::hand_off`].
    HandOff(HandOff),
    /// [`crate::Store::append_receipt`].
    Append(ReceiptDraft),
    /// [`crate::Store::resolve_effect`].
    Resolve(ResolveEffect),
}

impl Operation {
    /// Its name, for [`StoreError::OutcomeUnknown`].
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Operation::Open(_) => "open_approval",
            Operation::Answer(_) => "answer_approval",
            Operation::Withdraw(_) => "withdraw_approval",
            Operation::Expire(_) => "expire_approval",
            Operation::Begin(_) => "begin_attempt",
            Operation::Finish(_) => "finish_attempt",
            Operation::HandOff(_) => "hand_off",
            Operation::Append(_) => "append_receipt",
            Operation::Resolve(_) => "resolve_effect",
        }
    }
}

/// A row (or set of rows) a plan needs read, inside the transaction, before it can decide.
/// PostgreSQL reads every one of them `FOR UPDATE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// One approval request.
    Approval(ApprovalId),
    /// Every approval request bound to an action hash (PostgreSQL also takes a transaction
    /// advisory lock on the hash, so two first requests cannot both create one).
    ApprovalsForHash(ActionHash),
    /// The request a framework call is mapped to.
    Correlation(Correlation),
    /// One effect record.
    Effect(EffectKey),
    /// Who holds an effect key: its record's state and attempt only (what an outcome needs,
    /// without decoding the whole row).
    EffectHolder(EffectKey),
    /// Whether an approver token id is on the deny-list (issue #31).
    TokenRevoked(String),
}

/// What a backend read for a [`Read`].
#[derive(Clone, Debug)]
pub(crate) enum Fetched {
    /// [`Read::Approval`].
    Approval(ApprovalId, Option<ApprovalRecord>),
    /// [`Read::ApprovalsForHash`].
    ApprovalsForHash(ActionHash, Vec<ApprovalRecord>),
    /// [`Read::Correlation`].
    Correlation(Correlation, Option<ApprovalId>),
    /// [`Read::Effect`].
    Effect(EffectKey, Option<EffectRecord>),
    /// [`Read::EffectHolder`].
    EffectHolder(EffectKey, Option<EffectVersion>),
    /// [`Read::TokenRevoked`].
    TokenRevoked(String, bool),
}

/// The rows read so far in one transaction.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    approvals: Rows<ApprovalId, Option<ApprovalRecord>>,
    for_hash: Rows<ActionHash, Vec<ApprovalRecord>>,
    correlations: Rows<Correlation, Option<ApprovalId>>,
    effects: Rows<EffectKey, Option<EffectRecord>>,
    holders: Rows<EffectKey, Option<EffectVersion>>,
    revoked: Rows<String, bool>,
}

/// A handful of rows by key: a plan reads a few, so a scan beats hashing.
#[derive(Debug)]
struct Rows<K, V>(Vec<(K, V)>);

impl<K, V> Default for Rows<K, V> {
    fn default() -> Self {
        Rows(Vec::new())
    }
}

impl<K: PartialEq, V> Rows<K, V> {
    fn get<Q: PartialEq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.0
            .iter()
            .find(|(held, _)| held.borrow() == key)
            .map(|(_, value)| value)
    }

    fn insert(&mut self, key: K, value: V) {
        match self.0.iter_mut().find(|(held, _)| *held == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }
}

/// Why [`plan`] stopped before deciding.
#[derive(Debug)]
pub(crate) enum Halt {
    /// Read this, then plan again.
    Read(Read),
    /// A rule found the store inconsistent: roll back.
    Fail(StoreError),
}

impl From<StoreError> for Halt {
    fn from(error: StoreError) -> Self {
        Halt::Fail(error)
    }
}

impl Reads {
    /// Add what a backend fetched.
    pub(crate) fn insert(&mut self, fetched: Fetched) {
        match fetched {
            Fetched::Approval(id, record) => {
                self.approvals.insert(id, record);
            }
            Fetched::ApprovalsForHash(hash, records) => {
                for record in &records {
                    self.approvals
                        .insert(record.id.clone(), Some(record.clone()));
                }
                self.for_hash.insert(hash, records);
            }
            Fetched::Correlation(correlation, id) => {
                self.correlations.insert(correlation, id);
            }
            Fetched::Effect(key, record) => {
                self.effects.insert(key, record);
            }
            Fetched::EffectHolder(key, holder) => {
                self.holders.insert(key, holder);
            }
            Fetched::TokenRevoked(jti, revoked) => {
                self.revoked.insert(jti, revoked);
            }
        }
    }

    fn approval(&self, id: &ApprovalId) -> Result<Option<&ApprovalRecord>, Halt> {
        match self.approvals.get(id) {
            Some(record) => Ok(record.as_ref()),
            None => Err(Halt::Read(Read::Approval(id.clone()))),
        }
    }

    fn approvals_for_hash(&self, hash: &ActionHash) -> Result<&[ApprovalRecord], Halt> {
        match self.for_hash.get(hash) {
            Some(records) => Ok(records),
            None => Err(Halt::Read(Read::ApprovalsForHash(hash.clone()))),
        }
    }

    fn correlation(&self, correlation: &Correlation) -> Result<Option<&ApprovalId>, Halt> {
        match self.correlations.get(correlation) {
            Some(id) => Ok(id.as_ref()),
            None => Err(Halt::Read(Read::Correlation(correlation.clone()))),
        }
    }

    fn effect(&self, key: &EffectKey) -> Result<Option<&EffectRecord>, Halt> {
        match self.effects.get(key) {
            Some(record) => Ok(record.as_ref()),
            None => Err(Halt::Read(Read::Effect(key.clone()))),
        }
    }

    fn effect_holder(&self, key: &EffectKey) -> Result<Option<EffectVersion>, Halt> {
        if let Some(record) = self.effects.get(key) {
            return Ok(record.as_ref().map(EffectVersion::of));
        }
        match self.holders.get(key) {
            Some(holder) => Ok(holder.clone()),
            None => Err(Halt::Read(Read::EffectHolder(key.clone()))),
        }
    }

    fn token_revoked(&self, jti: &str) -> Result<bool, Halt> {
        match self.revoked.get(jti) {
            Some(revoked) => Ok(*revoked),
            None => Err(Halt::Read(Read::TokenRevoked(jti.to_owned()))),
        }
    }

    /// The approval an effect record's attempt consumed, if its context names one.
    fn consumed_approval(&self, record: &EffectRecord) -> Result<Option<&ApprovalRecord>, Halt> {
        match record
            .attempt
            .as_ref()
            .and_then(|context| context.approval_id.as_deref())
        {
            Some(id) => self.approval(&ApprovalId::from_stored(id.to_owned())),
            None => Ok(None),
        }
    }
}

/// The prior state an approval update expects (compare-and-set): its state and how many
/// answers it held. Backends check what they can see cheaply: memory both, SQLite the state
/// (it holds the database's write lock), PostgreSQL the state and the `answers` column as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApprovalVersion {
    pub(crate) state: ApprovalState,
    pub(crate) answers: usize,
}

impl ApprovalVersion {
    pub(crate) fn of(record: &ApprovalRecord) -> ApprovalVersion {
        ApprovalVersion {
            state: record.state,
            answers: record.answers.len(),
        }
    }
}

/// The prior state an effect write expects: the record's state and the attempt holding it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EffectVersion {
    pub(crate) state: EffectState,
    pub(crate) attempt_id: AttemptId,
}

impl EffectVersion {
    pub(crate) fn of(record: &EffectRecord) -> EffectVersion {
        EffectVersion {
            state: record.state,
            attempt_id: record.attempt_id.clone(),
        }
    }
}

/// One row write of a plan, with the prior state it expects.
// Built once per write and applied at once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub(crate) enum Write {
    /// Insert a new request (its id must be free).
    InsertApproval(ApprovalRecord),
    /// Overwrite a request's mutable fields (state, answer, consumption, answers), if it is
    /// still at `expected`.
    UpdateApproval {
        record: ApprovalRecord,
        expected: ApprovalVersion,
    },
    /// Map a framework call to a request.
    PutCorrelation(Mapping),
    /// Reserve an effect key: the whole record, inserted when `expected` is `None` (the key was
    /// free), else overwriting the record still at `expected`.
    ReserveEffect {
        record: EffectRecord,
        expected: Option<EffectVersion>,
    },
    /// Move an effect record to a new state (an outcome, a lapsed lease, a resolution).
    SettleEffect(Settlement),
}

/// A framework call's mapping to a request: a new one (`replace: false`, the call must be
/// unmapped), or one replacing a mapping whose request ended unused.
#[derive(Clone, Debug)]
pub(crate) struct Mapping {
    pub(crate) correlation: Correlation,
    pub(crate) id: ApprovalId,
    pub(crate) replace: bool,
}

/// An effect record still at `expected` moved to `state`, with `detail` and `resolved_by`,
/// updated at `updated_at`; its other columns stay.
#[derive(Clone, Debug)]
pub(crate) struct Settlement {
    pub(crate) key: EffectKey,
    pub(crate) expected: EffectVersion,
    pub(crate) state: EffectState,
    pub(crate) detail: Option<String>,
    pub(crate) resolved_by: Option<String>,
    pub(crate) updated_at: Timestamp,
}

impl Settlement {
    /// Apply it to the record it expects (the columns the SQL backends' `UPDATE` sets).
    pub(crate) fn apply(self, record: &mut EffectRecord) {
        record.state = self.state;
        record.detail = self.detail;
        record.resolved_by = self.resolved_by;
        record.updated_at = self.updated_at;
    }
}

/// What an operation returns before its receipts are sealed: the result, or where the sealed
/// receipt goes.
// One per plan, moved once.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Reply {
    /// The result needs no receipt.
    Ready(Done),
    /// [`BeginOutcome::Refused`] with the last receipt.
    BeginRefused(BeginRefusal),
    /// [`HandOffOutcome::Refused`] with the last receipt.
    HandOffRefused(BeginRefusal),
    /// [`HandOffOutcome::HandedOff`] with the last receipt.
    HandedOff(Option<ApprovalRecord>),
    /// The last receipt itself.
    Receipt,
}

/// What an operation returned (committed whatever it is: refusals carry marks and receipts).
// One per call, moved once.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Done {
    Opened(OpenOutcome),
    Answered(Result<ApprovalRecord, AnswerError>),
    Begun(BeginOutcome),
    HandedOff(HandOffOutcome),
    Receipt(Box<Receipt>),
    Resolved(Result<EffectRecord, ResolveError>),
    Expired(Option<ApprovalRecord>),
}

/// The error for a result of the wrong shape (a bug of ours).
fn wrong_result() -> StoreError {
    StoreError::Internal {
        detail: "a store operation returned the result of another".to_owned(),
    }
}

impl Done {
    /// [`crate::Store::open_approval`]'s result.
    pub(crate) fn opened(self) -> Result<OpenOutcome, StoreError> {
        match self {
            Done::Opened(outcome) => Ok(outcome),
            _ => Err(wrong_result()),
        }
    }

    /// [`crate::Store::answer_approval`]'s (and `withdraw_approval`'s) result.
    pub(crate) fn answered(self) -> Result<ApprovalRecord, AnswerError> {
        match self {
            Done::Answered(result) => result,
            _ => Err(wrong_result().into()),
        }
    }

    /// [`crate::Store::begin_attempt`]'s result.
    pub(crate) fn begun(self) -> Result<BeginOutcome, StoreError> {
        match self {
            Done::Begun(outcome) => Ok(outcome),
            _ => Err(wrong_result()),
        }
    }

    /// [`crate::Store::hand_off`]'s result.
    pub(crate) fn handed_off(self) -> Result<HandOffOutcome, StoreError> {
        match self {
            Done::HandedOff(outcome) => Ok(outcome),
            _ => Err(wrong_result()),
        }
    }

    /// The receipt of [`crate::Store::finish_attempt`] or `append_receipt`.
    pub(crate) fn receipt(self) -> Result<Receipt, StoreError> {
        match self {
            Done::Receipt(receipt) => Ok(*receipt),
            _ => Err(wrong_result()),
        }
    }

    /// [`crate::Store::resolve_effect`]'s result.
    pub(crate) fn resolved(self) -> Result<EffectRecord, ResolveError> {
        match self {
            Done::Resolved(result) => result,
            _ => Err(wrong_result().into()),
        }
    }

    /// [`crate::Store::expire_approval`]'s result.
    pub(crate) fn expired(self) -> Result<Option<ApprovalRecord>, StoreError> {
        match self {
            Done::Expired(record) => Ok(record),
            _ => Err(wrong_result()),
        }
    }
}

/// The decision of one operation: writes, events, receipt drafts and the reply.
#[derive(Debug)]
pub(crate) struct Plan {
    writes: Vec<Write>,
    events: Vec<OutboxEvent>,
    receipts: Vec<ReceiptDraft>,
    reply: Reply,
    now: Timestamp,
}

pub(crate) use crate::store::clock::Now;

/// A plan with its receipts chained onto the head: what the backend writes, and the result.
#[derive(Debug)]
pub(crate) struct Sealed {
    /// The row writes, in order.
    pub(crate) writes: Vec<Write>,
    /// The outbox events, in order (issue #17).
    pub(crate) events: Vec<OutboxEvent>,
    /// The receipts, in chain order, the first one following the head that was sealed onto.
    pub(crate) receipts: Vec<StoredReceipt>,
    /// The caller's result.
    pub(crate) done: Done,
}

impl Plan {
    /// Does it append receipts (so the backend must read, and lock, the chain head)?
    pub(crate) fn has_receipts(&self) -> bool {
        !self.receipts.is_empty()
    }

    /// Chain the receipts onto `head` and build the result.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] for a draft that cannot be sealed.
    pub(crate) fn seal(self, head: Option<ChainHead>) -> Result<Sealed, StoreError> {
        let (writes, events, unsealed) = self.split();
        let (receipts, done) = unsealed.seal(head)?;
        Ok(Sealed {
            writes,
            events,
            receipts,
            done,
        })
    }

    /// Take the row writes and events out, to apply them before the receipts are sealed: a
    /// backend then locks the chain head for the shortest span (issue #21).
    pub(crate) fn split(self) -> (Vec<Write>, Vec<OutboxEvent>, Unsealed) {
        let unsealed = Unsealed {
            receipts: self.receipts,
            reply: self.reply,
            now: self.now,
        };
        (self.writes, self.events, unsealed)
    }
}

/// Stored receipts in chain order, and the caller's result.
pub(crate) type Sealing = (Vec<StoredReceipt>, Done);

/// A plan being built: the writes, events and receipt drafts decided so far.
#[derive(Debug)]
struct Changes {
    writes: Vec<Write>,
    events: Vec<OutboxEvent>,
    receipts: Vec<ReceiptDraft>,
    /// The store's time (issue #22): expiry, leases, and every time written.
    now: Timestamp,
    /// The caller's time: approver tokens only ([`Now`]).
    caller: Timestamp,
}

impl Changes {
    fn new(now: Now) -> Changes {
        Changes {
            writes: Vec::new(),
            events: Vec::new(),
            receipts: Vec::new(),
            now: now.store,
            caller: now.caller,
        }
    }

    /// Overwrite `before` (as read) with `record`.
    fn update_approval(&mut self, before: &ApprovalRecord, record: ApprovalRecord) {
        self.writes.push(Write::UpdateApproval {
            record,
            expected: ApprovalVersion::of(before),
        });
    }

    /// Write the outbox event `kind` for `record` as it now stands (issue #17).
    fn announce(&mut self, record: &ApprovalRecord, kind: EventKind) {
        self.events.push(approval_event(record, kind, self.now));
    }

    /// Append a receipt.
    fn receipt(&mut self, draft: ReceiptDraft) {
        self.receipts.push(draft);
    }

    /// Finish with `reply`.
    fn reply(self, reply: Reply) -> Plan {
        Plan {
            writes: self.writes,
            events: self.events,
            receipts: self.receipts,
            reply,
            now: self.now,
        }
    }

    /// Finish with a result that needs no receipt.
    fn done(self, done: Done) -> Plan {
        self.reply(Reply::Ready(done))
    }

    /// Move `record` to `expired` or `void`, with its event and receipt; returns it as moved.
    fn mark_approval(&mut self, before: &ApprovalRecord, state: ApprovalState) -> ApprovalRecord {
        let mut record = before.clone();
        record.state = state;
        self.update_approval(before, record.clone());
        let (event, kind, outcome, reason) = match state {
            ApprovalState::Void => (
                EventKind::Voided,
                ReceiptKind::ApprovalVoided,
                ReceiptOutcome::Voided,
                "policy_changed",
            ),
            _ => (
                EventKind::Expired,
                ReceiptKind::ApprovalExpired,
                ReceiptOutcome::Expired,
                "expired",
            ),
        };
        self.announce(&record, event);
        self.receipt(approval_draft(&record, kind, outcome, reason));
        record
    }

    /// Record that a lapsed lease left `before` (as read) ambiguous, with its receipt naming
    /// the approval its attempt consumed; returns the record as moved.
    fn mark_lease_expired(
        &mut self,
        before: &EffectRecord,
        consumed: Option<&ApprovalRecord>,
    ) -> EffectRecord {
        let mut record = before.clone();
        record.state = EffectState::Ambiguous;
        record.updated_at = self.now;
        record.detail = Some(format!(
            "the lease of attempt {} lapsed at {} with no outcome recorded",
            record.attempt_id, record.lease_until
        ));
        self.settle_effect(before, &record);
        self.receipt(effect_draft(
            &record,
            consumed,
            ReceiptKind::LeaseExpired,
            ReceiptOutcome::Ambiguous,
            "lease_expired",
        ));
        record
    }

    /// Move the effect record `before` (as read) to `after`'s state, detail and resolver.
    fn settle_effect(&mut self, before: &EffectRecord, after: &EffectRecord) {
        self.writes.push(Write::SettleEffect(Settlement {
            key: after.key.clone(),
            expected: EffectVersion::of(before),
            state: after.state,
            detail: after.detail.clone(),
            resolved_by: after.resolved_by.clone(),
            updated_at: after.updated_at,
        }));
    }
}

/// Plan `operation` at `now` over what has been read: the [`Plan`], or the next row to read.
/// `now.store` judges expiry and leases and dates what is written; `now.caller` judges approver
/// tokens ([`Now`]); a caller's instants in `operation` are already in the store's clock
/// (`store/clock.rs`).
///
/// # Errors
///
/// [`Halt::Read`] when a rule needs a row not yet in `reads`; [`Halt::Fail`] when the rows read
/// contradict each other (a bug or an edited store).
pub(crate) fn plan(operation: &Operation, reads: &Reads, now: Now) -> Result<Plan, Halt> {
    let changes = Changes::new(now);
    match operation {
        Operation::Open(new) => approval::open(changes, reads, new),
        Operation::Answer(answer) => approval::answer(changes, reads, answer),
        Operation::Withdraw(withdrawal) => withdraw::withdraw(changes, reads, withdrawal),
        Operation::Expire(id) => approval::expire(changes, reads, id),
        Operation::Begin(begin) => attempt::begin(changes, reads, begin),
        Operation::Finish(finish) => attempt::finish(changes, reads, finish),
        Operation::HandOff(hand_off) => attempt::hand_off(changes, reads, hand_off),
        Operation::Append(draft) => {
            let mut changes = changes;
            changes.receipt(draft.clone());
            Ok(changes.reply(Reply::Receipt))
        }
        Operation::Resolve(resolve) => resolve::resolve(changes, reads, resolve),
    }
}

/// Plan `operation` to the end, fetching each row it needs with `fetch` (a synchronous
/// backend's read inside its open transaction).
///
/// # Errors
///
/// What `fetch` returns, or a rule's [`StoreError`].
pub(crate) fn plan_with<E: From<StoreError>>(
    operation: &Operation,
    now: Now,
    mut fetch: impl FnMut(&Read) -> Result<Fetched, E>,
) -> Result<Plan, E> {
    let mut reads = Reads::default();
    loop {
        match plan(operation, &reads, now) {
            Ok(plan) => return Ok(plan),
            Err(Halt::Read(read)) => reads.insert(fetch(&read)?),
            Err(Halt::Fail(error)) => return Err(error.into()),
        }
    }
}

/// The receipt for a change to an approval request.
fn approval_draft(
    record: &ApprovalRecord,
    kind: ReceiptKind,
    outcome: ReceiptOutcome,
    reason: &str,
) -> ReceiptDraft {
    ReceiptDraft {
        kind: Some(kind),
        outcome: Some(outcome),
        reason: Some(reason.to_owned()),
        action: Some(record.action.clone()),
        action_hash: Some(record.action_hash.clone()),
        principal: Some(record.principal.clone()),
        resource: record.resource.clone(),
        environment: Some(record.environment.clone()),
        effect_key: record.effect_key.clone(),
        arguments: Some(record.arguments.clone()),
        approval_id: Some(record.id.clone()),
        approver: record.approver.clone(),
        note: record.note.clone(),
        policy_hash: Some(record.policy_hash.clone()),
        ..ReceiptDraft::default()
    }
}

/// A receipt about an effect record written without its attempt (a lapsed lease, a
/// resolution): it names the attempt's action, principal, environment, policy, start and the
/// approval it consumed with the approvers who granted it, from the record's context.
fn effect_draft(
    record: &EffectRecord,
    approval: Option<&ApprovalRecord>,
    kind: ReceiptKind,
    outcome: ReceiptOutcome,
    reason: &str,
) -> ReceiptDraft {
    let mut draft = ReceiptDraft {
        kind: Some(kind),
        outcome: Some(outcome),
        reason: Some(reason.to_owned()),
        attempt_id: Some(record.attempt_id.clone()),
        action_hash: Some(record.action_hash.clone()),
        effect_key: Some(record.key.clone()),
        detail: record.detail.clone(),
        ..ReceiptDraft::default()
    };
    if let Some(context) = &record.attempt {
        draft.action = Some(context.action.clone());
        draft.principal = Some(context.principal.clone());
        draft.environment = Some(context.environment.clone());
        draft.policy_hash = Some(context.policy_hash.clone());
        draft.attempt_started_at = Some(context.started_at);
        draft.approval_id = context.approval_id.clone();
    }
    if let Some(approval) = approval {
        draft.approval_policy_hash = Some(approval.policy_hash.clone());
        draft.approvers = Some(approval.granted_by().into_iter().cloned().collect());
    }
    draft
}
