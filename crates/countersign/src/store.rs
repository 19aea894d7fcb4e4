//! Stores: where approvals, effect records and receipts live.
//!
//! [`Store`] is one async trait. Each method is one atomic unit (one transaction, or one
//! savepoint of a transaction it shares with concurrent callers: group commit). Every rule a
//! writing method applies is written once, in `store/plan.rs`: a fixed set of reads, then a pure
//! function from those reads and the time to the writes (each with the prior state it expects),
//! the outbox events, the receipts and the result. Its decisions (the retry table, whether an
//! approval may be consumed, what an answer does) are pure functions in [`crate::effect`] and
//! [`crate::approval`]. Backends only fetch the rows a plan asks for and apply what it decided.
//!
//! Backends:
//! - [`MemoryStore`]: in this process only, for tests and examples.
//! - [`SqliteStore`]: the embedded default, one file, WAL, every read-modify-write in one
//!   `BEGIN IMMEDIATE` transaction run inline on the calling thread (see its docs).
//! - [`PostgresStore`] (cargo feature `postgres`, on by default): many workers on many hosts;
//!   row locks, unique constraints and compare-and-set updates whose row counts are checked
//!   (see its docs). Open it with [`open_url_async`].
//!
//! **Group commit** (issue #21, both SQL backends): concurrent writing calls on one store queue
//! their operations, and whichever caller holds the store's lead applies every queued operation
//! in one transaction, on its own task; each operation keeps its own result and receipt, the
//! receipts are chained in queue order, and one that fails is rolled back alone (a savepoint
//! each; on PostgreSQL only once one has failed after writing, `postgres/group.rs`). A lone
//! caller runs alone at once and never waits for company.
//!
//! # Cancel safety
//!
//! Every method runs its transaction to completion before its first `.await` point that could
//! be a cancellation point only between whole transactions (the SQLite backend sleeps between
//! retries on a busy database, never inside a transaction). Dropping a future therefore leaves
//! each transaction either committed or not started. A writing call whose future is dropped
//! while its operation waits in the group-commit queue is skipped, never run; once a leader
//! has taken it, it commits with its group or not at all, like a lone transaction dropped
//! during `COMMIT`.

mod begin;
pub(crate) mod clock;
mod columns;
pub(crate) mod group;
pub(crate) use group::jitter;
pub mod memory;
mod outbox;
pub(crate) mod plan;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod sqlite;
mod stored;
mod url;

use crate::action::ActionHash;
use crate::approval::{
    AnswerDecision, ApprovalId, ApprovalRecord, ApprovalState, Correlation, InvalidDecision,
};
use crate::approver::{Channel, Credential};
use crate::clock::Timestamp;
use crate::effect::{EffectKey, EffectRecord, EffectState, RetryDecision};
use crate::error::{AnswerError, ResolveError, StoreError};
use crate::evidence::{ChainHead, Receipt, ReceiptDraft, StoredReceipt};
use crate::id::AttemptId;
use crate::outbox::{
    ClaimedDelivery, Delivery, DeliveryState, EventKind, OutboxEvent, Settlement, StoredEvent,
};

pub use begin::{BeginOutcome, BeginRefusal};
pub use memory::MemoryStore;
pub use outbox::DeliveryClaim;
use outbox::outbox_unsupported;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;
#[doc(hidden)]
pub use url::read_url;
pub use url::{
    SHOWN_PARAMETERS, open_url, open_url_async, open_url_existing, open_url_for_reading,
    redact_url, sqlite_path,
};

/// A receipt stored in a lane its store never writes, with no place in the log
/// ([`Store::stray_receipt`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrayReceipt {
    /// Its lane as stored: negative, or [`Store::lanes`] and up.
    pub lane: i64,
    /// Its `seq` as stored.
    pub seq: i64,
    /// How many receipts the store holds outside its lanes with no place, this one included.
    pub count: u64,
}

/// A new pending approval request, and the effect key to check before asking a human.
#[derive(Clone, Debug)]
pub struct NewApproval {
    /// The request to create (state `pending`), if no usable one exists. Its `run` scopes it.
    pub record: ApprovalRecord,
    /// The action's effect key: if the retry table would refuse it, nobody is asked.
    pub effect_key: Option<EffectKey>,
    /// The framework call it is for: the request already mapped to it is found; otherwise a
    /// new request is made (never one of another call's) and mapped, in the same transaction.
    pub correlation: Option<Correlation>,
}

/// What [`Store::open_approval`] found or created.
#[derive(Clone, Debug)]
pub enum OpenOutcome {
    /// A granted, unexpired request for this hash and policy entry exists.
    Granted(ApprovalRecord),
    /// A pending request exists (`created: false`) or was just created (`created: true`).
    Pending {
        /// The request.
        record: ApprovalRecord,
        /// Was it created by this call?
        created: bool,
    },
    /// A human denied this exact action and the denial still stands.
    Denied(ApprovalRecord),
    /// The correlation is already mapped to a request for another action hash: two calls
    /// claimed one framework call id (case B35). Nothing was written.
    CorrelationConflict(ApprovalRecord),
    /// The effect key would be refused anyway: nobody is asked.
    EffectRefused {
        /// The retry table's answer.
        decision: RetryDecision,
        /// The effect record.
        record: EffectRecord,
    },
}

/// An approval presented to an attempt.
#[derive(Clone, Debug)]
pub struct PresentedApproval {
    /// The request.
    pub id: ApprovalId,
    /// The fingerprint of the policy entry governing the attempt.
    pub fingerprint: String,
    /// The attempt's run, if any: a request of another run (or scope) is refused `other_run`.
    pub run: Option<String>,
}

/// An effect key to reserve.
#[derive(Clone, Debug)]
pub struct EffectClaim {
    /// The key.
    pub key: EffectKey,
    /// When the lease lapses.
    pub lease_until: Timestamp,
}

/// Start an attempt: consume the approval and reserve the effect key, atomically.
#[derive(Clone, Debug)]
pub struct BeginAttempt {
    /// The attempt (`att_…`).
    pub attempt_id: AttemptId,
    /// Its action hash.
    pub action_hash: ActionHash,
    /// The approval to consume, if any.
    pub approval: Option<PresentedApproval>,
    /// The effect key to reserve, if any.
    pub effect: Option<EffectClaim>,
    /// The attempt's context, kept on the effect record it reserves (see
    /// [`crate::effect::AttemptContext`]); its `approval_id` is filled in by the store.
    pub context: Option<crate::effect::AttemptContext>,
    /// The receipt to write if the attempt is refused (outcome and reason are filled in).
    pub refusal_draft: ReceiptDraft,
}

/// Finish an attempt: record the outcome and its receipt, atomically.
#[derive(Clone, Debug)]
pub struct FinishAttempt {
    /// The attempt.
    pub attempt_id: AttemptId,
    /// The reserved key, if any.
    pub effect_key: Option<EffectKey>,
    /// The outcome: `committed`, `failed` or `ambiguous`.
    pub state: EffectState,
    /// The executor's error text, if any.
    pub detail: Option<String>,
    /// The receipt (outcome and reason already set).
    pub draft: ReceiptDraft,
}

/// Hand an attempt off to a tool that runs outside Countersign ([`Store::hand_off`]): consume
/// the presented approval, reserve the effect key and end the attempt with its `handed_off`
/// receipt, all in one transaction.
#[derive(Clone, Debug)]
pub struct HandOff {
    /// The attempt, exactly as [`Store::begin_attempt`] takes it (its `refusal_draft` is the
    /// receipt written if the approval or the key is refused).
    pub begin: BeginAttempt,
    /// The receipt ending the attempt (outcome `handed_off`); the store fills in the consumed
    /// approval's id, approver, note, policy hash and granting approvers.
    pub draft: ReceiptDraft,
    /// Kept on a reserved effect record, which is left `ambiguous`: whether the tool ran is
    /// not known to Countersign.
    pub detail: String,
}

/// What [`Store::hand_off`] did.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum HandOffOutcome {
    /// The approval (if any) is consumed, the key (if any) reserved and left `ambiguous`, and
    /// the `handed_off` receipt written.
    HandedOff {
        /// The consumed approval.
        approval: Option<ApprovalRecord>,
        /// The `handed_off` receipt.
        receipt: Box<Receipt>,
    },
    /// Refused; nothing was consumed or reserved, and the refusal receipt was written.
    Refused {
        /// Why.
        refusal: BeginRefusal,
        /// The refusal receipt.
        receipt: Box<Receipt>,
    },
}

/// A human's answer to record: the one closed answer contract every surface submits.
#[derive(Clone, Debug)]
pub struct RecordAnswer {
    /// The request.
    pub request_id: ApprovalId,
    /// Approve or reject; an [`InvalidDecision`] is recorded as a refused answer and changes
    /// nothing (case B38).
    pub decision: Result<AnswerDecision, InvalidDecision>,
    /// Who answers: a verified token or an asserted name.
    pub approver: Credential,
    /// Where the answer came from.
    pub channel: Channel,
    /// The action hash the surface showed the approver; refused `mismatch` when it is not the
    /// request's. Only [`Channel::Api`] and [`Channel::Cli`] may leave it out (the receipt then
    /// records `hash_confirmed: false`).
    pub shown_hash: Option<ActionHash>,
    /// Their note, kept as data.
    pub note: Option<String>,
}

/// Resolve an ambiguous effect.
#[derive(Clone, Debug)]
pub struct ResolveEffect {
    /// The key.
    pub key: EffectKey,
    /// `committed` or `failed`.
    pub to: EffectState,
    /// Who resolves it.
    pub resolver: Resolver,
    /// Their note.
    pub note: Option<String>,
}

/// Who resolves an ambiguous effect.
#[derive(Clone, Debug)]
pub enum Resolver {
    /// The operator's [`crate::ReconcileHook`], configured on the control (recorded as
    /// `reconcile-hook`).
    Hook,
    /// A person, judged by the effect's resolver rule (the consumed approval's rule, or the
    /// entry's `resolvers:`; by default anyone) like an answer.
    Person {
        /// Who.
        credential: Credential,
        /// Where from.
        channel: Channel,
    },
}

/// The name a resolution by the reconcile hook records.
pub const RECONCILE_HOOK: &str = "reconcile-hook";

/// The storage every backend provides. Each method is one atomic transaction.
///
/// # Cancel safety
///
/// See the [module docs](self): dropping a returned future leaves each transaction either
/// committed or not started.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// The backend's name: `memory`, `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// The time this store judges expiry and leases by, for a caller whose clock reads `now`
    /// (issue #22, "one clock"): the PostgreSQL server's clock on PostgreSQL, `now` itself on
    /// SQLite and memory (one host, one clock); plus any test offset
    /// ([`Store::shift_clock_for_tests`]). Every writing method judges by this time, read
    /// inside its own transaction; this method is for callers that need it beforehand (the
    /// sweeper's choice of requests to expire). The caller's `now` in every other method is
    /// the origin of the instants it computed (an approval's `expires_at`, a lease): the store
    /// moves them to its own clock, keeping their distance from `now` (SPEC 1.6).
    ///
    /// The default implementation returns `now`.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only (PostgreSQL: the server cannot be reached).
    async fn store_now(&self, now: Timestamp) -> Result<Timestamp, StoreError> {
        Ok(now)
    }

    /// Test-only: move the clock this store judges by `millis` milliseconds (negative: back),
    /// for this handle and every operation it runs from now on. PostgreSQL adds the offset to
    /// the server's clock, SQLite and memory to the caller's `now`, so a test that moves time
    /// runs unchanged on every backend. No URL or configuration reaches it.
    ///
    /// The default implementation refuses with [`StoreError::Backend`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] from a backend that cannot shift its clock.
    #[doc(hidden)]
    fn shift_clock_for_tests(&self, millis: i64) -> Result<(), StoreError> {
        let _ = millis;
        Err(StoreError::Backend {
            message: format!(
                "the `{}` store cannot shift its clock for a test: use the memory, SQLite or PostgreSQL store",
                self.backend()
            ),
        })
    }

    /// Find a usable approval for this action hash, or create a pending one (see
    /// [`crate::approval::plan_open`]). Expired and voided requests met on the way are marked,
    /// each with a receipt.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn open_approval(
        &self,
        new: NewApproval,
        now: Timestamp,
    ) -> Result<OpenOutcome, StoreError>;

    /// Record a human's answer (first answer wins) and its receipt.
    ///
    /// # Errors
    ///
    /// [`AnswerError`]: unknown, already decided (with the stored state), expired, store.
    async fn answer_approval(
        &self,
        answer: RecordAnswer,
        now: Timestamp,
    ) -> Result<ApprovalRecord, AnswerError>;

    /// One approval request.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError>;

    /// The request mapped to a framework call, if any.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn correlated(
        &self,
        correlation: &Correlation,
    ) -> Result<Option<ApprovalRecord>, StoreError>;

    /// Approval requests, oldest first, optionally only those in `state`.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn approvals(
        &self,
        state: Option<ApprovalState>,
    ) -> Result<Vec<ApprovalRecord>, StoreError>;

    /// Consume the presented approval and reserve the effect key in one transaction; on a
    /// refusal, change nothing but write the refusal receipt (and mark an expired approval or a
    /// lapsed lease, with their receipts).
    ///
    /// # Errors
    ///
    /// [`StoreError`] only; refusals are [`BeginOutcome::Refused`].
    async fn begin_attempt(
        &self,
        begin: BeginAttempt,
        now: Timestamp,
    ) -> Result<BeginOutcome, StoreError>;

    /// Record an attempt's outcome on its effect record (only if this attempt still holds the
    /// reservation; otherwise the record is left as it is and the receipt says so) and write
    /// its receipt.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn finish_attempt(
        &self,
        finish: FinishAttempt,
        now: Timestamp,
    ) -> Result<Receipt, StoreError>;

    /// Hand an attempt off to a tool that runs outside Countersign: [`Store::begin_attempt`]'s
    /// checks and writes, then the `handed_off` receipt (and a reserved key left `ambiguous`),
    /// in one transaction. On a refusal, exactly what `begin_attempt` writes on one.
    ///
    /// The default implementation refuses with [`StoreError::Backend`]: a backend that does
    /// not override it cannot hand off in one transaction, and never does it in two. The
    /// memory, SQLite and PostgreSQL stores override it.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only; refusals are [`HandOffOutcome::Refused`].
    async fn hand_off(
        &self,
        hand_off: HandOff,
        now: Timestamp,
    ) -> Result<HandOffOutcome, StoreError> {
        let _ = (hand_off, now);
        Err(StoreError::Backend {
            message: format!(
                "the `{}` store cannot hand an attempt off in one transaction: use the memory, SQLite or PostgreSQL store",
                self.backend()
            ),
        })
    }

    /// Take something back (issue #31): revoke a grant not yet used, withdraw one's counted
    /// yes from a pending quorum, or (the operator) cancel a request; one receipt, in one
    /// transaction with the change. See [`crate::approval::withdraw`] for the transitions.
    ///
    /// The default implementation refuses with [`StoreError::Backend`]; the memory, SQLite and
    /// PostgreSQL stores override it.
    ///
    /// # Errors
    ///
    /// [`AnswerError`]: unknown, `consumed`, `revoked`, `cancelled`, `not_revocable`,
    /// `expired`, the identity refusals of an answer, store.
    ///
    /// # Cancel safety
    ///
    /// As every method: the transaction is committed or not started.
    async fn withdraw_approval(
        &self,
        withdrawal: crate::approval::withdraw::Withdrawal,
        now: Timestamp,
    ) -> Result<ApprovalRecord, AnswerError> {
        let _ = (withdrawal, now);
        Err(StoreError::Backend {
            message: format!(
                "the `{}` store cannot revoke or cancel approvals: use the memory, SQLite or PostgreSQL store",
                self.backend()
            ),
        }
        .into())
    }

    /// Write a receipt that records no other state change (a policy denial, an attempt with
    /// no effect key).
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn append_receipt(
        &self,
        draft: ReceiptDraft,
        now: Timestamp,
    ) -> Result<Receipt, StoreError>;

    /// One effect record.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn effect(&self, key: &EffectKey) -> Result<Option<EffectRecord>, StoreError>;

    /// Effect records, ordered by key, optionally only those in `state`.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn effects(&self, state: Option<EffectState>) -> Result<Vec<EffectRecord>, StoreError>;

    /// Resolve an ambiguous effect to `committed` or `failed`, with its receipt.
    ///
    /// # Errors
    ///
    /// [`ResolveError`]: not ambiguous, unknown key, bad target, store.
    async fn resolve_effect(
        &self,
        resolve: ResolveEffect,
        now: Timestamp,
    ) -> Result<EffectRecord, ResolveError>;

    /// Up to `limit` receipts placed after `after` in the log's one order (SPEC 1.5: the
    /// cursor is the last one's [`StoredReceipt::position`], its `seq` in a one-lane store); a
    /// store of several lanes (PostgreSQL) first places every receipt committed before the call.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn receipts(&self, after: u64, limit: usize) -> Result<Vec<StoredReceipt>, StoreError>;

    /// The log's newest receipt: its place (in `seq`) and hash; `None` for an empty log.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn chain_head(&self) -> Result<Option<ChainHead>, StoreError>;

    /// Every lane's head as an anchor (`receipts --export-anchor`); `None` for an empty log.
    /// The default, [`Store::chain_head`] as lane 0's, suits a one-lane store.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn anchor(&self) -> Result<Option<crate::evidence::Anchor>, StoreError> {
        let head = self.chain_head().await?;
        Ok(head.map(|head| crate::evidence::Anchor::of_lane_0(head.seq, head.hash)))
    }

    /// The heads the store records apart from its receipts (PostgreSQL's `lane_heads`, written
    /// in the transaction of each receipt), as an anchor, for [`crate::audit::verify_store`] to
    /// check the log against; `None` for a store whose head is simply its newest receipt
    /// (memory, SQLite: the default), or whose log is empty. They live in the same database as
    /// the receipts, so they catch receipts deleted by hand or by a bad migration, not someone
    /// who also rewrites them: an anchor kept elsewhere does that.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn recorded_heads(&self) -> Result<Option<crate::evidence::Anchor>, StoreError> {
        Ok(None)
    }

    /// How many lanes the store writes receipts in: lanes 0 to `lanes() - 1`. 1 (the default)
    /// for a store of one chain (memory, SQLite); PostgreSQL's 16 (`postgres/log.rs`).
    /// [`crate::audit::verify_store`] refuses a receipt stored in any other lane: no writer
    /// put it there.
    fn lanes(&self) -> u32 {
        1
    }

    /// The first receipt (by lane, then `seq`) stored in a lane this store never writes (below
    /// 0, or [`Store::lanes`] and up) that no place of the log holds, with how many such
    /// receipts there are; `None` when there is none. [`Store::receipts`] reads placed receipts
    /// only, so no reader of the log ever sees such a row, and [`crate::audit::verify_store`]
    /// asks for it: a row inserted by hand without a place is named too.
    ///
    /// The default is `None`: a store of one chain (memory, SQLite) has no lane to put a row in
    /// and reads every row it holds. PostgreSQL overrides it.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn stray_receipt(&self) -> Result<Option<StrayReceipt>, StoreError> {
        Ok(None)
    }

    /// Put the approver token id `jti` on the deny-list (issue #31): from now on a token with
    /// that id is refused `not_authenticated` by every answer and revocation, before it
    /// expires. `by` and `reason` are kept with it. Returns false when it was already listed
    /// (nothing changes).
    ///
    /// The default implementation refuses with [`StoreError::Backend`] (fail closed); the
    /// memory, SQLite and PostgreSQL stores override it.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn revoke_token(
        &self,
        jti: &str,
        by: &str,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let _ = (jti, by, reason, now);
        Err(StoreError::Backend {
            message: format!(
                "the `{}` store keeps no token deny-list: use the memory, SQLite or PostgreSQL store",
                self.backend()
            ),
        })
    }

    /// Is the approver token id `jti` on the deny-list? The approval service asks this at
    /// sign-in; answers are checked inside their own transaction.
    ///
    /// The default implementation refuses with [`StoreError::Backend`] (fail closed).
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn token_revoked(&self, jti: &str) -> Result<bool, StoreError> {
        let _ = jti;
        Err(StoreError::Backend {
            message: format!(
                "the `{}` store keeps no token deny-list: use the memory, SQLite or PostgreSQL store",
                self.backend()
            ),
        })
    }

    /// Expire one request if it is past its `expires_at` and still `pending` or `granted`
    /// (issue #17's sweeper): `expired`, with its receipt and its `approval.expired` event, in
    /// one transaction. Returns the expired request, or `None` when there was nothing to do
    /// (unknown, already ended, not yet due).
    ///
    /// This method and the outbox's below (issue #17) refuse with [`StoreError::Backend`] by
    /// default (fail closed); the memory, SQLite and PostgreSQL stores override them.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    ///
    /// # Cancel safety
    ///
    /// As every method: the transaction is committed or not started.
    async fn expire_approval(
        &self,
        id: &ApprovalId,
        now: Timestamp,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let _ = (id, now);
        Err(outbox_unsupported(self.backend()))
    }

    /// Expire every request past its `expires_at` that is still `pending` or `granted`, each
    /// in its own transaction ([`Store::expire_approval`]). Returns the requests expired.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only; the requests expired before the error stay expired.
    ///
    /// # Cancel safety
    ///
    /// Each request's transaction is committed or not started.
    async fn sweep_expired(&self, now: Timestamp) -> Result<Vec<ApprovalRecord>, StoreError> {
        // Chosen by the store's clock (issue #22); each expiry is judged again inside its
        // own transaction.
        let judged = self.store_now(now).await?;
        let mut expired = Vec::new();
        for state in [ApprovalState::Pending, ApprovalState::Granted] {
            for record in self.approvals(Some(state)).await? {
                if record.is_expired_at(judged)
                    && let Some(record) = self.expire_approval(&record.id, now).await?
                {
                    expired.push(record);
                }
            }
        }
        Ok(expired)
    }

    /// Up to `limit` outbox events with `seq > after_seq`, in order of `seq`.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn events(&self, after_seq: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let _ = (after_seq, limit);
        Err(outbox_unsupported(self.backend()))
    }

    /// Claim up to `limit` deliveries due at `now` for `endpoints`, each under a lease until
    /// `now + lease`, so that no other sender (another `countersign serve` on the same store)
    /// claims them meanwhile. First, every event since `since` that has no delivery row for an
    /// endpoint gets one (`pending`, due at once). A delivery is due when it is `pending`, its
    /// `next_attempt_at` has come, no live lease holds it, and no earlier event of the same
    /// request is still `pending` for the same endpoint (so each request's events arrive in
    /// order). Oldest events first.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    ///
    /// # Cancel safety
    ///
    /// One transaction, committed or not: a claim that committed holds its lease until it
    /// lapses, and the delivery is claimed again after that.
    async fn claim_deliveries(
        &self,
        claim: DeliveryClaim,
        now: Timestamp,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        let _ = (claim, now);
        Err(outbox_unsupported(self.backend()))
    }

    /// Record what a claimed attempt came to, only if `owner` still holds its lease (or the
    /// lease lapsed and nobody claimed it since). Returns false, writing nothing, when another
    /// sender holds it now or it was settled already.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn settle_delivery(
        &self,
        id: u64,
        owner: &str,
        settlement: Settlement,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let _ = (id, owner, settlement, now);
        Err(outbox_unsupported(self.backend()))
    }

    /// The reference the endpoint gave when it acknowledged the first of `request_id`'s events
    /// that got one (see [`Settlement::Delivered`]): Slack's message for a request.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn delivery_reference(
        &self,
        request_id: &ApprovalId,
        endpoint: &str,
    ) -> Result<Option<String>, StoreError> {
        let _ = (request_id, endpoint);
        Err(outbox_unsupported(self.backend()))
    }

    /// Deliveries, newest first, up to `limit`, optionally only those in `state`.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn deliveries(
        &self,
        state: Option<DeliveryState>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let _ = (state, limit);
        Err(outbox_unsupported(self.backend()))
    }

    /// Send delivery `id` again: `pending`, due at `now`, its retry window starting at `now`,
    /// its lease cleared. Returns the delivery as it is now, or `None` when there is no such
    /// delivery (or its event was pruned).
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn redeliver(&self, id: u64, now: Timestamp) -> Result<Option<Delivery>, StoreError> {
        let _ = (id, now);
        Err(outbox_unsupported(self.backend()))
    }

    /// Delete the events created before `before` whose every delivery was `delivered` (an
    /// event nobody had to be told about counts as delivered), with their deliveries. Returns
    /// how many events went. A `pending` or `failed` delivery keeps its event.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn prune_outbox(&self, before: Timestamp) -> Result<u64, StoreError> {
        let _ = before;
        Err(outbox_unsupported(self.backend()))
    }

    /// Append `event` to the outbox in a transaction of its own: an event that records no
    /// change of the store's (issue #23: a signed checkpoint's `log.checkpoint`, written by
    /// whoever made the checkpoint so that webhooks carry it outside the store).
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    ///
    /// # Cancel safety
    ///
    /// One transaction, committed or not.
    async fn append_event(&self, event: &OutboxEvent) -> Result<(), StoreError> {
        let _ = event;
        Err(outbox_unsupported(self.backend()))
    }

    /// The newest event of `kind` still in the outbox (not pruned), if any.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    async fn last_event(&self, kind: EventKind) -> Result<Option<StoredEvent>, StoreError> {
        let _ = kind;
        Err(outbox_unsupported(self.backend()))
    }
}
