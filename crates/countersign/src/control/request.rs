//! Step 1 of the pipeline: an [`ActionRequest`] made into an action (principal from the
//! [`IdentityProvider`], arguments canonicalized, templates rendered) and decided by policy,
//! without writing anything ([`Control::evaluate`], [`needs_approval`]).

use std::time::Duration;

use serde::Serialize;

use crate::action::canonical::{self, CanonicalError, CanonicalJson};
use crate::action::{Action, ActionHash, Principal};
use crate::approval::{ApprovalId, Correlation};
use crate::effect::EffectKey;
use crate::error::{ControlError, DenyReason};
use crate::evidence::Receipt;
use crate::policy::{Decision, DecisionReason, Mode, Raise, Template};

use super::{Control, ExitStatusSlot, Prepared};

/// Vouches for the principal of every action (never taken from model output or arguments).
pub trait IdentityProvider: Send + Sync + 'static {
    /// The principal acting now, or `None` (then every action is refused: no principal, no
    /// action).
    fn principal(&self) -> Option<Principal>;
}

/// An identity provider that always names the same principal.
#[derive(Clone, Debug)]
pub struct StaticIdentity(Principal);

impl StaticIdentity {
    /// Always `principal`.
    pub fn new(principal: Principal) -> StaticIdentity {
        StaticIdentity(principal)
    }
}

impl IdentityProvider for StaticIdentity {
    fn principal(&self) -> Option<Principal> {
        Some(self.0.clone())
    }
}

/// One call to decide and maybe execute.
#[derive(Clone, Debug)]
pub struct ActionRequest {
    pub(super) name: String,
    pub(super) arguments: Result<CanonicalJson, CanonicalError>,
    pub(super) approval: Option<ApprovalId>,
    pub(super) timeout: Option<Duration>,
    pub(super) wait: Option<Duration>,
    pub(super) effect: Option<Template>,
    pub(super) resource: Option<Template>,
    pub(super) run: Option<String>,
    pub(super) correlation: Option<(String, String)>,
    /// Where the executor puts a process's exit status ([`ActionRequest::with_exit_status`]).
    pub(super) exit_status: Option<ExitStatusSlot>,
    /// Raise a pattern entry's `allow` to `approve` ([`ActionRequest::with_raise`]).
    pub(super) raise: Option<Raise>,
    /// The tool's input schema digest ([`ActionRequest::with_tool_schema`]).
    pub(super) tool_schema: Option<Result<String, CanonicalError>>,
    /// Where the executor puts a note about a call that completed
    /// ([`ActionRequest::with_commit_note`]).
    pub(super) commit_note: Option<CommitNoteSlot>,
}

/// Where an executor puts a note about a call that completed, so the `committed` effect record
/// and receipt carry it as their `detail`: for example that the call ran but its result could
/// not be represented and was withheld, with the result's size and digest (case B50 (c)). Give a
/// clone to [`ActionRequest::with_commit_note`] and another to the executor. A note set by an
/// executor that then fails is not recorded (a failure records its own error).
#[derive(Clone, Debug, Default)]
pub struct CommitNoteSlot(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl CommitNoteSlot {
    /// An empty slot.
    pub fn new() -> CommitNoteSlot {
        CommitNoteSlot::default()
    }

    /// Record `note` (a later call replaces an earlier one). Free text, recorded as data.
    pub fn set(&self, note: impl Into<String>) {
        // A poisoned lock only means another holder panicked; the value is still ours to set.
        let mut slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Some(note.into());
    }

    /// What was recorded, if anything.
    pub fn get(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl ActionRequest {
    /// A call of `name` with `arguments` (any `Serialize`: a struct, a `serde_json::Value`).
    /// An unrepresentable argument is reported by [`Control::execute`] as
    /// [`ControlError::InvalidArguments`].
    ///
    /// Arguments whose canonical form is longer than [`canonical::MAX_TEXT_BYTES`] (4 MiB) are
    /// refused as `too_large` before anything is hashed (case B50 (d)).
    pub fn new<A: Serialize + ?Sized>(name: impl Into<String>, arguments: &A) -> ActionRequest {
        let arguments = canonical::to_canonical(arguments).and_then(|canonical| {
            let bytes = canonical.as_str().len();
            if bytes > canonical::MAX_TEXT_BYTES {
                return Err(CanonicalError::TooLarge {
                    bytes,
                    limit: canonical::MAX_TEXT_BYTES,
                });
            }
            Ok(canonical)
        });
        ActionRequest::from_canonical(name, arguments)
    }

    /// A call whose arguments are JSON text, canonicalized strictly (duplicate keys, `-0`,
    /// integer literals outside ±(2^53−1) are refused).
    pub fn from_json_text(name: impl Into<String>, text: &str) -> ActionRequest {
        ActionRequest::from_canonical(name, canonical::parse_canonical(text))
    }

    fn from_canonical(
        name: impl Into<String>,
        arguments: Result<CanonicalJson, CanonicalError>,
    ) -> ActionRequest {
        ActionRequest {
            name: name.into(),
            arguments,
            approval: None,
            timeout: None,
            wait: None,
            effect: None,
            resource: None,
            run: None,
            correlation: None,
            exit_status: None,
            raise: None,
            tool_schema: None,
            commit_note: None,
        }
    }

    /// Record the note the executor puts in `slot` as the `detail` of the `committed` effect
    /// record and receipt, when the call completes.
    pub fn with_commit_note(mut self, slot: CommitNoteSlot) -> ActionRequest {
        self.commit_note = Some(slot);
        self
    }

    /// Scope this call to one run (a framework's run or thread id; not hashed). A request it
    /// opens is scoped to the run: only an attempt naming the same run consumes its grant, and
    /// a grant of another run, or an unscoped one, authorizes nothing here (`other_run`, case
    /// B42). An empty id means no run.
    pub fn with_run(mut self, run: impl Into<String>) -> ActionRequest {
        let run = run.into();
        self.run = (!run.is_empty()).then_some(run);
        self
    }

    /// Correlate this call with the framework call it is: `framework` and the framework's call
    /// id (its run comes from [`ActionRequest::with_run`]). The kernel's store maps the
    /// (framework, run, call id) to the request it opens, in the same transaction, first write
    /// wins; two calls with the same arguments in one step get a request each. Read the mapping
    /// with [`Control::correlated`]. The call id is never the authority: the action hash is
    /// checked when the call runs, and a call id mapped to another hash is refused `mismatch`
    /// (case B35).
    pub fn with_correlation(
        mut self,
        framework: impl Into<String>,
        call_id: impl Into<String>,
    ) -> ActionRequest {
        self.correlation = Some((framework.into(), call_id.into()));
        self
    }

    /// The run this call is scoped to, if any.
    pub fn run(&self) -> Option<&str> {
        self.run.as_deref()
    }

    /// The framework call this call is correlated with, if any.
    pub(super) fn correlation(&self) -> Option<Correlation> {
        self.correlation
            .as_ref()
            .map(|(framework, call_id)| Correlation {
                framework: framework.clone(),
                run: self.run.clone(),
                call_id: call_id.clone(),
            })
    }

    /// Present an approval: the request the human answered. It authorizes this call only if it
    /// was granted for exactly this action hash, is unexpired and unused.
    pub fn with_approval(mut self, request_id: ApprovalId) -> ActionRequest {
        self.approval = Some(request_id);
        self
    }

    /// Give the executor at most `timeout`; past it the attempt ends `ambiguous` (the call may
    /// have gone out).
    pub fn with_timeout(mut self, timeout: Duration) -> ActionRequest {
        self.timeout = Some(timeout);
        self
    }

    /// When approval is needed and no provider answers at once, wait up to `wait` for a human
    /// to answer out of band (polling the store). The wait ending is not a denial and not an
    /// expiry: the request stays pending.
    pub fn with_wait(mut self, wait: Duration) -> ActionRequest {
        self.wait = Some(wait);
        self
    }

    /// An effect-key template used when the policy entry declares none.
    pub fn with_effect(mut self, template: Template) -> ActionRequest {
        self.effect = Some(template);
        self
    }

    /// A resource template used when the policy entry declares none.
    pub fn with_resource(mut self, template: Template) -> ActionRequest {
        self.resource = Some(template);
        self
    }

    /// Ask a human before this call when a **pattern** entry (`mcp.files.*`) would allow it,
    /// for the reason `by` (issue #27: an MCP tool whose `destructiveHint` is true or absent).
    /// The decision becomes `approve`, judged by the matching rule's or entry's `approval`
    /// block (else the default), and every receipt of the attempt records `raised_by`. An
    /// exact entry, a `deny` and an `approve` are never changed, so a caller's facts about a
    /// tool can only tighten what the policy says, never loosen it.
    pub fn with_raise(mut self, by: Raise) -> ActionRequest {
        self.raise = Some(by);
        self
    }

    /// Identify the tool also by its input `schema` (a JSON Schema object, as the tool
    /// announced it): the action hash then covers the schema's digest as `tool_schema`
    /// ([`crate::action::tool_schema_digest`], SPEC 1.4), so after the tool's schema changes the
    /// same name and arguments are a different action, and an approval given before does not
    /// authorize it (issue #27). A schema with no canonical form is refused
    /// `invalid_arguments` by [`Control::execute`].
    pub fn with_tool_schema(mut self, schema: &serde_json::Value) -> ActionRequest {
        self.tool_schema = Some(crate::action::tool_schema_digest(schema));
        self
    }

    /// The action name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A successful execution: the executor's value and the receipt that records it.
#[derive(Clone, Debug)]
pub struct Executed<T> {
    /// What the executor returned.
    pub value: T,
    /// The receipt.
    pub receipt: Receipt,
}

/// What policy would decide, without writing anything ([`Control::evaluate`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Evaluation {
    /// The action name.
    pub action: String,
    /// `allow`, `approve` or `deny`.
    pub decision: Decision,
    /// The reason code (`rule`, `action_default`, `unknown_action`, `no_matching_rule`).
    pub reason: &'static str,
    /// The action hash.
    pub action_hash: ActionHash,
    /// The effect key, if any.
    pub effect_key: Option<EffectKey>,
    /// The resource, if any.
    pub resource: Option<String>,
    /// Enforce or observe.
    pub mode: Mode,
    /// The policy hash.
    pub policy_hash: crate::id::PolicyHash,
}

impl Control {
    /// Step 1 and 2: build the action and decide. Writes nothing.
    pub(super) fn prepare(&self, request: &ActionRequest) -> Result<Prepared, ControlError> {
        let name = request.name.as_str();
        let arguments =
            request
                .arguments
                .clone()
                .map_err(|source| ControlError::InvalidArguments {
                    action: name.to_owned(),
                    source,
                })?;
        let principal = self
            .inner
            .identity
            .as_ref()
            .and_then(|identity| identity.principal())
            .ok_or_else(|| ControlError::NoPrincipal {
                action: name.to_owned(),
            })?;
        let value = arguments.to_value();
        let policy = &self.inner.policy;
        let decided = policy.decide(name, &value);
        let entry = decided.entry;
        let template_error = |source| ControlError::Template {
            action: name.to_owned(),
            source,
        };
        let secrets: &[String] = entry
            .map(|entry| entry.secret_arguments())
            .unwrap_or_default();
        let effect_template = entry
            .and_then(|entry| entry.effect())
            .or(request.effect.as_ref());
        let resource_template = entry
            .and_then(|entry| entry.resource())
            .or(request.resource.as_ref());
        for template in [effect_template, resource_template].into_iter().flatten() {
            if let Some(field) = template
                .fields()
                .find(|field| secrets.iter().any(|secret| secret == field))
            {
                return Err(template_error(crate::policy::TemplateError::SecretField {
                    template: template.as_str().to_owned(),
                    field: field.to_owned(),
                }));
            }
        }
        let effect_key = effect_template
            .map(|template| template.render(&value))
            .transpose()
            .map_err(template_error)?
            .map(EffectKey::new)
            .transpose()
            .map_err(|error| {
                template_error(crate::policy::TemplateError::BadKey {
                    message: error.to_string(),
                })
            })?;
        let resource = resource_template
            .map(|template| template.render(&value))
            .transpose()
            .map_err(template_error)?;
        let action = Action::new(
            name,
            arguments,
            secrets,
            principal,
            resource,
            self.environment(),
            effect_key,
        )
        .map_err(|source| ControlError::InvalidArguments {
            action: name.to_owned(),
            source,
        })?;
        let action = match &request.tool_schema {
            None => action,
            Some(Ok(digest)) => action.with_tool_schema(digest.clone()),
            Some(Err(source)) => {
                return Err(ControlError::InvalidArguments {
                    action: name.to_owned(),
                    source: source.clone(),
                });
            }
        };
        let denial = match decided.reason {
            DecisionReason::UnknownAction => DenyReason::UnknownAction,
            DecisionReason::NoMatchingRule => DenyReason::NoMatchingRule,
            DecisionReason::Rule { .. } | DecisionReason::Shorthand => DenyReason::Denied,
        };
        let reason = match decided.decision {
            Decision::Deny => denial.reason().as_str(),
            Decision::Allow | Decision::Approve => decided.reason.code(),
        };
        // INVARIANT (raise-only-tightens): only a pattern entry's `allow` is ever raised.
        let raised_by = match (request.raise, decided.decision, entry) {
            (Some(by), Decision::Allow, Some(entry)) if entry.is_pattern() => Some(by),
            _ => None,
        };
        let decision = if raised_by.is_some() {
            Decision::Approve
        } else {
            decided.decision
        };
        let approval_rule = (decision == Decision::Approve)
            .then(|| policy.approval_rule(&decided, action.principal.as_str()));
        let resolvers = match (&action.effect_key, entry) {
            (Some(_), Some(entry)) => policy.resolver_rule(entry, action.principal.as_str()),
            _ => None,
        };
        Ok(Prepared {
            decision,
            raised_by,
            reason,
            denial,
            fingerprint: entry
                .map(|entry| entry.fingerprint().to_owned())
                .unwrap_or_default(),
            approval_ttl: self
                .inner
                .approval_ttl
                .or_else(|| decided.approval_ttl())
                .unwrap_or_else(|| policy.approval_ttl()),
            approval_rule,
            resolvers,
            action,
        })
    }

    /// What policy would decide for `request`, without writing anything.
    ///
    /// # Errors
    ///
    /// Refusals of step 1 only: `invalid_arguments`, `bad_template`, `no_principal`.
    pub fn evaluate(&self, request: &ActionRequest) -> Result<Evaluation, ControlError> {
        let prepared = self.prepare(request)?;
        Ok(Evaluation {
            action: prepared.action.name.clone(),
            decision: prepared.decision,
            reason: prepared.reason,
            action_hash: prepared.action.hash.clone(),
            effect_key: prepared.action.effect_key.clone(),
            resource: prepared.action.resource.clone(),
            mode: self.inner.policy.mode(),
            policy_hash: self.inner.policy.hash().to_owned(),
        })
    }
}

/// Does this call need a human's approval before the framework invokes the tool?
///
/// The predicate for adapters whose framework decides before invocation (the OpenAI Agents SDK's
/// `needs_approval`): true when policy says `approve` in enforce mode; false in observe mode and
/// for `allow` and `deny` (a denied call is refused, with a receipt, when it is invoked).
///
/// # Errors
///
/// Refusals of step 1: `invalid_arguments`, `bad_template`, `no_principal`.
pub fn needs_approval(
    control: &Control,
    action: &str,
    arguments: &serde_json::Value,
) -> Result<bool, ControlError> {
    let evaluation = control.evaluate(&ActionRequest::new(action, arguments))?;
    Ok(evaluation.mode == Mode::Enforce && evaluation.decision == Decision::Approve)
}
