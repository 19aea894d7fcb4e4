//! Read scope: which requests, receipts and effects a caller may see.
//!
//! A caller sees a request when the request's *stored* rule names them among its approvers or
//! resolvers (by id or group, as [`countersign::approver::Approver::matches_any`] reads
//! patterns); members of the auditors group see everything, read-only. A token caller is judged
//! like an answer would be: the token must verify under the keys stored with the rule.

use std::collections::HashMap;

use countersign::approval::{self, ApprovalRecord};
use countersign::approver::{self, ApprovalRule, Approver, Authentication, Channel, Credential};
use countersign::token::{self, PublicKey, VerifiedToken};
use countersign::{ApprovalState, Timestamp};

use crate::auth::Caller;

/// The caller's view of the store during one API call (token checks cached per key set).
pub struct Scope<'a> {
    caller: &'a Caller,
    now: Timestamp,
    verified_under: HashMap<Vec<String>, Option<VerifiedToken>>,
}

impl<'a> Scope<'a> {
    /// The view of `caller` at `now`.
    pub fn new(caller: &'a Caller, now: Timestamp) -> Scope<'a> {
        Scope {
            caller,
            now,
            verified_under: HashMap::new(),
        }
    }

    /// The approver the caller is under `rule`, as the kernel would judge an answer of theirs;
    /// `None` when their token does not verify under the rule's stored keys.
    pub fn approver_under(&mut self, rule: &ApprovalRule) -> Option<Approver> {
        match &self.caller.credential {
            Credential::Token(jwt) => {
                let now = self.now;
                let verified = self
                    .verified_under
                    .entry(rule.keys.clone())
                    .or_insert_with(|| {
                        let keys: Vec<PublicKey> = rule
                            .keys
                            .iter()
                            .filter_map(|text| PublicKey::parse(text).ok())
                            .collect();
                        token::verify(jwt, &keys, now).ok()
                    })
                    .as_ref()?;
                // The one shape of an approver id: a token whose subject is not one stands for
                // nobody here, as it is refused at every answer (`approval::approver_of`).
                let subject = countersign::approver::ApproverId::parse(&verified.subject).ok()?;
                Some(rule.approver(
                    &subject,
                    &verified.groups,
                    Channel::Service,
                    Authentication::Token,
                ))
            }
            credential => approval::approver_of(rule, credential, Channel::Service, self.now).ok(),
        }
    }

    /// Does the caller see things governed by `rule`? Auditors see everything; others when the
    /// rule's approvers or resolvers name them.
    pub fn sees_rule(&mut self, rule: &ApprovalRule) -> bool {
        if self.caller.auditor {
            return true;
        }
        self.approver_under(rule).is_some_and(|approver| {
            approver.matches_any(&rule.approvers) || approver.matches_any(rule.resolver_patterns())
        })
    }

    /// Does the caller see this request?
    pub fn sees(&mut self, record: &ApprovalRecord) -> bool {
        self.sees_rule(&record.rule)
    }

    /// Is the caller one the request's rule lets answer (whatever its state)?
    pub fn entitled(&mut self, record: &ApprovalRecord) -> bool {
        self.approver_under(&record.rule).is_some_and(|approver| {
            approver::judge(&record.rule, &record.principal, &approver).is_ok()
        })
    }

    /// May the caller take `record` back as one of its resolvers (cancel it, or revoke its
    /// grant): live, unexpired, and the stored resolver rule lets them, as the kernel judges.
    pub fn may_resolve(&mut self, record: &ApprovalRecord) -> bool {
        matches!(
            record.state,
            ApprovalState::Pending | ApprovalState::Granted
        ) && !record.is_expired_at(self.now)
            && self.approver_under(&record.rule).is_some_and(|approver| {
                approver::judge_resolver(&record.rule, &record.principal, &approver).is_ok()
            })
    }

    /// May the caller revoke `record`: live and unexpired, and they gave one of its counted
    /// yeses, or it is granted and they may resolve it.
    pub fn may_revoke(&mut self, record: &ApprovalRecord) -> bool {
        let gave_yes = record.answers.iter().any(|answer| {
            answer.approver.id == self.caller.id
                && answer.decision == approval::AnswerDecision::Approve
        });
        matches!(
            record.state,
            ApprovalState::Pending | ApprovalState::Granted
        ) && !record.is_expired_at(self.now)
            && (gave_yes || record.state == ApprovalState::Granted && self.may_resolve(record))
    }

    /// Could an answer by the caller still count: pending, unexpired, the rule lets them answer,
    /// and they have not answered it yet?
    pub fn may_answer(&mut self, record: &ApprovalRecord) -> bool {
        record.state == ApprovalState::Pending
            && !record.is_expired_at(self.now)
            && !record
                .answers
                .iter()
                .any(|answer| answer.approver.id == self.caller.id)
            && self.entitled(record)
    }
}
