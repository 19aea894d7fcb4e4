//! The plan of a resolution: a person (judged by the effect's resolver rule) or the reconcile
//! hook settles an effect record left `ambiguous` (or `reserved` past its lease).

use super::{Changes, Done, Halt, Plan, Reads, effect_draft};
use crate::approval::{ApprovalRecord, ApproverFault, approver_of};
use crate::approver::{ApprovalRule, Approver, Ineligible, judge_resolver};
use crate::clock::Timestamp;
use crate::effect::{EffectRecord, EffectState, resolution_allowed};
use crate::error::ResolveError;
use crate::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
use crate::store::{RECONCILE_HOOK, ResolveEffect, Resolver};

/// [`crate::Store::resolve_effect`]: reads the effect record, then the approval its attempt
/// consumed. A refusal by the resolver rule is committed with its receipt.
pub(super) fn resolve(
    mut changes: Changes,
    reads: &Reads,
    resolve: &ResolveEffect,
) -> Result<Plan, Halt> {
    let before = reads.effect(&resolve.key)?;
    let approval = match before {
        Some(record) => reads.consumed_approval(record)?,
        None => None,
    };
    let result = match resolve_step(
        before.cloned(),
        approval,
        resolve.clone(),
        changes.now,
        changes.caller,
    ) {
        ResolveStep::Write { record, receipt } => {
            if let Some(before) = before {
                changes.settle_effect(before, &record);
            }
            changes.receipt(receipt);
            Ok(record)
        }
        ResolveStep::Refuse { error, receipt } => {
            if let Some(receipt) = receipt {
                changes.receipt(receipt);
            }
            Err(error)
        }
    };
    Ok(changes.done(Done::Resolved(result)))
}

/// What a resolution does, decided from the stored effect (and the approval its attempt
/// consumed) alone: the plan both kinds of backend apply.
// Built once per resolution and consumed at once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum ResolveStep {
    /// Write the resolved record and its receipt.
    Write {
        record: EffectRecord,
        receipt: ReceiptDraft,
    },
    /// Refuse; write the refusal receipt, if any (a resolver the rule refuses gets one).
    Refuse {
        error: ResolveError,
        receipt: Option<ReceiptDraft>,
    },
}

/// Decide what `resolve` does to `record` at `now`: a person is judged by the effect's
/// resolver rule (the consumed approval's rule, else the attempt's `resolvers`, else the
/// default: anyone but the principal); then the retry table says whether the state allows it.
pub(crate) fn resolve_step(
    record: Option<EffectRecord>,
    approval: Option<&ApprovalRecord>,
    resolve: ResolveEffect,
    now: Timestamp,
    verified_at: Timestamp,
) -> ResolveStep {
    if let Err(error) = crate::approval::check_note(resolve.note.as_deref()) {
        return ResolveStep::Refuse {
            error: error.into(),
            receipt: None,
        };
    }
    let Some(mut record) = record else {
        return ResolveStep::Refuse {
            error: ResolveError::Refused {
                effect_key: resolve.key,
                refusal: crate::effect::ResolveRefusal::Unknown,
            },
            receipt: None,
        };
    };
    let mut resolver_fields = None;
    let resolved_by = match resolve.resolver {
        Resolver::Hook => RECONCILE_HOOK.to_owned(),
        Resolver::Person {
            credential,
            channel,
        } => {
            let context = record.attempt.as_ref();
            let default_rule = ApprovalRule::default();
            let rule = approval
                .map(|approval| &approval.rule)
                .or_else(|| context.and_then(|context| context.resolvers.as_ref()))
                .unwrap_or(&default_rule);
            let principal = context.map_or("", |context| context.principal.as_str());
            let refuse = |record: &EffectRecord,
                          approver: Option<&Approver>,
                          reason: &'static str,
                          message: String| {
                let mut receipt = effect_draft(
                    record,
                    approval,
                    ReceiptKind::Resolution,
                    ReceiptOutcome::Refused,
                    reason,
                );
                receipt.channel = Some(channel.as_str().into_owned());
                if let Some(approver) = approver {
                    receipt.approver = Some(approver.id.to_string());
                    receipt.approver_groups = Some(approver.groups.clone());
                    receipt.authentication = Some(approver.authentication.as_str().to_owned());
                }
                receipt.detail = Some(message.clone());
                receipt.note = resolve.note.clone();
                ResolveStep::Refuse {
                    error: ResolveError::NotPermitted {
                        effect_key: record.key.clone(),
                        reason,
                        message,
                    },
                    receipt: Some(receipt),
                }
            };
            let approver = match approver_of(rule, &credential, channel.clone(), verified_at) {
                Ok(approver) => approver,
                Err(ApproverFault::Malformed(error)) => {
                    return refuse(&record, None, "invalid_approver", error.to_string());
                }
                Err(ApproverFault::Anonymous) => {
                    return ResolveStep::Refuse {
                        error: ResolveError::NotPermitted {
                            effect_key: record.key.clone(),
                            reason: "no_approver",
                            message: "a resolution needs a resolver: say who is resolving (for example `--as human:alice`)".to_owned(),
                        },
                        receipt: None,
                    };
                }
                Err(ApproverFault::Unverified(detail)) => {
                    return refuse(
                        &record,
                        None,
                        "not_authenticated",
                        format!("the approver token does not verify: {detail}"),
                    );
                }
            };
            if let Err(ineligible) = judge_resolver(rule, principal, &approver) {
                let message = match &ineligible {
                    Ineligible::NotAuthenticated => format!(
                        "`{}` is asserted and resolving `{}` needs an authenticated resolver: pass an approver token with `--token-file FILE`",
                        approver.id, record.key
                    ),
                    Ineligible::NotEntitled => format!(
                        "`{}` may not resolve `{}`: it may be resolved by {}",
                        approver.id,
                        record.key,
                        rule.resolver_patterns().join(", ")
                    ),
                    Ineligible::SelfApproval { .. } => format!(
                        "`{}` ran the attempt behind `{}` and cannot resolve it: a different identity must",
                        approver.id, record.key
                    ),
                };
                return refuse(&record, Some(&approver), ineligible.reason(), message);
            }
            let id = approver.id.to_string();
            resolver_fields = Some((approver, channel));
            id
        }
    };
    if let Err(refusal) = resolution_allowed(&record, resolve.to, now) {
        return ResolveStep::Refuse {
            error: ResolveError::Refused {
                effect_key: resolve.key,
                refusal,
            },
            receipt: None,
        };
    }
    record.state = resolve.to;
    record.updated_at = now;
    record.resolved_by = Some(resolved_by.clone());
    record.detail = resolve.note.clone();
    let outcome = match resolve.to {
        EffectState::Committed => ReceiptOutcome::Committed,
        _ => ReceiptOutcome::Failed,
    };
    let mut receipt = effect_draft(
        &record,
        approval,
        ReceiptKind::Resolution,
        outcome,
        "resolved",
    );
    receipt.approver = Some(resolved_by);
    receipt.note = resolve.note;
    receipt.detail = None;
    if let Some((approver, channel)) = resolver_fields {
        receipt.approver_groups = Some(approver.groups);
        receipt.authentication = Some(approver.authentication.as_str().to_owned());
        receipt.channel = Some(channel.as_str().into_owned());
    }
    ResolveStep::Write { record, receipt }
}
