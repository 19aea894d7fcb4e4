//! Taking it back through a [`Control`] (issue #31): revoke a grant, cancel a request, or
//! every waiting request of one run. The transitions are [`crate::approval::withdraw`]'s.

use crate::approval::withdraw::{VoidCause, Withdrawal, WithdrawalKind};
use crate::approval::{ApprovalId, ApprovalRecord, ApprovalState};
use crate::approver::{Channel, Credential};
use crate::control::Control;
use crate::error::AnswerError;

impl Control {
    /// Revoke the grant of `request_id` before it is used (or withdraw `approver`'s counted
    /// yes from a quorum still pending), as the programmatic API: an asserted `approver`
    /// through [`Channel::Api`]. [`Control::withdraw`] takes a token and a channel.
    ///
    /// # Errors
    ///
    /// [`AnswerError`]: `consumed` (the grant was used: nothing changed), `revoked`,
    /// `cancelled`, `not_revocable`, `not_entitled`, `expired`, unknown, store.
    ///
    /// # Cancel safety
    ///
    /// One store transaction.
    pub async fn revoke(
        &self,
        request_id: &ApprovalId,
        approver: &str,
        reason: Option<&str>,
    ) -> Result<ApprovalRecord, AnswerError> {
        self.withdraw(Withdrawal {
            request_id: request_id.clone(),
            kind: WithdrawalKind::Revoke {
                approver: Credential::Asserted(approver.to_owned()),
                channel: Channel::Api,
            },
            reason: reason.map(str::to_owned),
        })
        .await
    }

    /// Cancel the waiting (or granted, unused) request `request_id`: the operator's side. It
    /// leaves every inbox and no answer changes it. Cancelling it again succeeds and writes
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`AnswerError`]: `consumed`, `revoked`, `not_revocable`, `expired`, unknown, store.
    ///
    /// # Cancel safety
    ///
    /// One store transaction.
    pub async fn cancel(
        &self,
        request_id: &ApprovalId,
        operator: &str,
        reason: Option<&str>,
    ) -> Result<ApprovalRecord, AnswerError> {
        self.withdraw(Withdrawal {
            request_id: request_id.clone(),
            kind: WithdrawalKind::Cancel {
                operator: operator.to_owned(),
                channel: Channel::Api,
            },
            reason: reason.map(str::to_owned),
        })
        .await
    }

    /// Cancel every `pending` or `granted` request of `run` (an abandoned run), oldest first,
    /// each in its own transaction; returns what each cancellation returned, in that order.
    /// A request that changed meanwhile (answered, used, expired) is reported with its
    /// refusal and the others still go ahead.
    ///
    /// # Errors
    ///
    /// [`AnswerError::Store`] when the requests cannot be listed.
    ///
    /// # Cancel safety
    ///
    /// Each cancellation is one transaction; a dropped future leaves those done committed.
    pub async fn cancel_run(
        &self,
        run: &str,
        operator: &str,
        reason: Option<&str>,
    ) -> Result<Vec<(ApprovalId, Result<ApprovalRecord, AnswerError>)>, AnswerError> {
        let mut waiting = Vec::new();
        for state in [ApprovalState::Pending, ApprovalState::Granted] {
            waiting.extend(
                self.inner
                    .store
                    .approvals(Some(state))
                    .await?
                    .into_iter()
                    .filter(|record| record.run.as_deref() == Some(run)),
            );
        }
        waiting.sort_by_key(|record| record.created_at);
        let mut done = Vec::with_capacity(waiting.len());
        for record in waiting {
            let result = self.cancel(&record.id, operator, reason).await;
            done.push((record.id, result));
        }
        Ok(done)
    }

    /// Void every `pending` or `granted` (unused) request for `action` that was opened for
    /// another version of the tool (issue #27): each request's action hash is recomputed from
    /// its stored parts with the tool's current input `schema` digest
    /// ([`crate::action::tool_schema_digest`]); a request whose hash differs (an older schema,
    /// or none) becomes `void`, with an `approval_voided` / `voided` / `tool_changed` receipt
    /// naming `operator`. Requests for the current schema are left alone. Returns the ids
    /// voided, oldest first; one that changed meanwhile (answered, used, expired) is skipped.
    ///
    /// # Errors
    ///
    /// [`AnswerError::Store`] when the requests cannot be listed or one cannot be written. A
    /// schema with no canonical form voids nothing (no call can be made with it either).
    ///
    /// # Cancel safety
    ///
    /// Each voiding is one transaction; a dropped future leaves those done committed.
    pub async fn void_for_changed_tool(
        &self,
        action: &str,
        schema: &serde_json::Value,
        operator: &str,
    ) -> Result<Vec<ApprovalId>, AnswerError> {
        let Ok(digest) = crate::action::tool_schema_digest(schema) else {
            return Ok(Vec::new());
        };
        let mut open = Vec::new();
        for state in [ApprovalState::Pending, ApprovalState::Granted] {
            open.extend(
                self.inner
                    .store
                    .approvals(Some(state))
                    .await?
                    .into_iter()
                    .filter(|record| record.action == action),
            );
        }
        open.sort_by_key(|record| record.created_at);
        let mut voided = Vec::new();
        for record in open {
            let current = crate::action::hash_of(
                &record.action,
                &record.arguments,
                &record.principal,
                record.resource.as_deref(),
                &record.environment,
                Some(&digest),
            );
            if current == record.action_hash {
                continue;
            }
            let done = self
                .withdraw(Withdrawal {
                    request_id: record.id.clone(),
                    kind: WithdrawalKind::Void {
                        operator: operator.to_owned(),
                        cause: VoidCause::ToolChanged,
                    },
                    reason: Some(format!(
                        "the tool's input schema changed (now {digest}): a call now is a different action"
                    )),
                })
                .await;
            match done {
                Ok(_) => voided.push(record.id),
                Err(AnswerError::Store(error)) => return Err(AnswerError::Store(error)),
                // Answered, used, expired or cancelled meanwhile: nothing to void.
                Err(_) => {}
            }
        }
        Ok(voided)
    }

    /// Take something back as a surface submits it (see [`crate::approval::withdraw`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Store::withdraw_approval`].
    ///
    /// # Cancel safety
    ///
    /// One store transaction.
    pub async fn withdraw(&self, withdrawal: Withdrawal) -> Result<ApprovalRecord, AnswerError> {
        self.inner
            .store
            .withdraw_approval(withdrawal, self.now())
            .await
    }
}

impl Control {
    /// Put an approver token on the store's deny-list before it expires (issue #31): every
    /// answer presenting it is refused `not_authenticated` from then on, on every surface.
    /// `token_or_id` is the token's id (`tok_…`) or the whole token; `operator` and `reason`
    /// are kept with the entry. Returns false when it was already listed (nothing changed).
    ///
    /// # Errors
    ///
    /// [`RevokeTokenError::NotATokenId`] when `token_or_id` is neither shape (see
    /// [`crate::token::revocable_id`]); [`RevokeTokenError::Store`].
    ///
    /// # Cancel safety
    ///
    /// One store transaction.
    pub async fn revoke_token(
        &self,
        token_or_id: &str,
        operator: &str,
        reason: Option<&str>,
    ) -> Result<bool, RevokeTokenError> {
        let jti = crate::token::revocable_id(token_or_id).map_err(RevokeTokenError::NotATokenId)?;
        Ok(self
            .inner
            .store
            .revoke_token(&jti, operator, reason, self.now())
            .await?)
    }
}

/// Why [`Control::revoke_token`] refused.
#[derive(Debug, thiserror::Error)]
pub enum RevokeTokenError {
    /// The text given is neither a token id nor a token with a `jti` claim; the message says
    /// what to pass instead.
    #[error("{0}")]
    NotATokenId(String),
    /// The store could not record the revocation; nothing changed.
    #[error(transparent)]
    Store(#[from] crate::error::StoreError),
}
