//! The gate: swiftide tools whose body is `Control::execute`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use countersign::approver::Credential;
use countersign::policy::{Template, TemplateError};
use countersign::{ActionRequest, Control, ControlError, Executed, ExecutorError, Receipt};
use serde_json::Value;
use swiftide_core::chat_completion::errors::ToolError;
use swiftide_core::chat_completion::{Tool, ToolCall, ToolOutput, ToolSpec};
use swiftide_core::{AgentContext, ToolFeedback};

use crate::feedback::{Answer, Edit, Pause, model_message};
use crate::interrupt::{PassSlot, SLOT, SharedSlot, lock};

/// What a gated tool is, for the kernel: the action name and the effect and resource templates
/// used when the policy entry declares none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionSpec {
    action: String,
    effect: Option<Template>,
    resource: Option<Template>,
}

impl ActionSpec {
    /// The action `action` (a policy entry name, such as `stripe.refund`).
    pub fn new(action: impl Into<String>) -> ActionSpec {
        ActionSpec {
            action: action.into(),
            effect: None,
            resource: None,
        }
    }

    /// The spec a type declares through [`CountersignAction`].
    ///
    /// # Errors
    ///
    /// [`TemplateError`] when a declared template does not parse.
    pub fn declared<A: CountersignAction + ?Sized>() -> Result<ActionSpec, TemplateError> {
        let mut spec = ActionSpec::new(A::ACTION);
        if let Some(effect) = A::EFFECT {
            spec = spec.effect(effect)?;
        }
        if let Some(resource) = A::RESOURCE {
            spec = spec.resource(resource)?;
        }
        Ok(spec)
    }

    /// An effect-key template (`refund:{payment_id}`).
    ///
    /// # Errors
    ///
    /// [`TemplateError`] when `template` does not parse.
    pub fn effect(mut self, template: &str) -> Result<ActionSpec, TemplateError> {
        self.effect = Some(Template::parse(template)?);
        Ok(self)
    }

    /// A resource template (`payment:{payment_id}`).
    ///
    /// # Errors
    ///
    /// [`TemplateError`] when `template` does not parse.
    pub fn resource(mut self, template: &str) -> Result<ActionSpec, TemplateError> {
        self.resource = Some(Template::parse(template)?);
        Ok(self)
    }

    /// The action name.
    pub fn action(&self) -> &str {
        &self.action
    }

    /// The kernel request for a call with `arguments` (JSON text, canonicalized strictly).
    pub fn request(&self, arguments: &str) -> ActionRequest {
        let mut request = ActionRequest::from_json_text(self.action.clone(), arguments);
        if let Some(effect) = &self.effect {
            request = request.with_effect(effect.clone());
        }
        if let Some(resource) = &self.resource {
            request = request.with_resource(resource.clone());
        }
        request
    }
}

/// A derive-friendly declaration of what a swiftide tool is for the kernel. Implement it (by
/// hand or with your own derive) and gate the tool with [`Gate::protect`].
///
/// ```
/// struct RefundTool;
/// impl countersign_swiftide::CountersignAction for RefundTool {
///     const ACTION: &'static str = "stripe.refund";
///     const EFFECT: Option<&'static str> = Some("refund:{payment_id}");
/// }
/// ```
pub trait CountersignAction {
    /// The action name (a policy entry).
    const ACTION: &'static str;
    /// The effect-key template, when the policy entry declares none.
    const EFFECT: Option<&'static str> = None;
    /// The resource template, when the policy entry declares none.
    const RESOURCE: Option<&'static str> = None;
}

type FunctionFuture = Pin<Box<dyn Future<Output = Result<String, ExecutorError>> + Send>>;
type Function = dyn Fn(Value) -> FunctionFuture + Send + Sync;

/// What a gated tool runs once the kernel allows it.
#[derive(Clone)]
enum Body {
    /// A swiftide tool, invoked with the canonical arguments.
    Tool(Box<dyn Tool>),
    /// A function of the canonical arguments.
    Function(Arc<Function>),
}

impl Body {
    async fn run(
        &self,
        context: &dyn AgentContext,
        tool_call: &ToolCall,
        tool_name: &str,
        arguments: &Value,
    ) -> Result<ToolOutput, ExecutorError> {
        match self {
            Body::Function(function) => function(arguments.clone()).await.map(ToolOutput::Text),
            Body::Tool(tool) => {
                let call = ToolCall::builder()
                    .id(tool_call.id())
                    .name(tool_name)
                    .args(arguments.to_string())
                    .build()
                    .map_err(|error| ExecutorError::not_executed(error.to_string()))?;
                match tool.invoke(context, &call).await {
                    // The wrapped tool asked for feedback itself (swiftide's `ApprovalRequired`):
                    // by swiftide's convention it did nothing yet.
                    Ok(ToolOutput::FeedbackRequired(_)) => Err(ExecutorError::not_executed(
                        "the wrapped tool asked for feedback itself: Countersign asks the human, so do not wrap swiftide's `ApprovalRequired`",
                    )),
                    // `Fail` tells the model about a failure; nothing proves the effect did not
                    // happen, so the kernel records the outcome as unknown.
                    Ok(ToolOutput::Fail(text)) => Err(ExecutorError::may_have_run(text)),
                    Ok(output) => Ok(output),
                    // The arguments did not parse: the tool did nothing.
                    Err(
                        error @ (ToolError::WrongArguments(_) | ToolError::MissingArguments(_)),
                    ) => Err(ExecutorError::not_executed(error.to_string())),
                    Err(error) => Err(ExecutorError::may_have_run(error.to_string())),
                }
            }
        }
    }
}

/// What happened to one kernel attempt made by a gated tool call, for the code that runs the
/// agent. Refusals are the kernel's [`ControlError`], as themselves.
#[derive(Debug)]
pub enum Outcome {
    /// The kernel ran the executor; its receipt.
    Ran {
        /// The swiftide tool call.
        tool_call: ToolCall,
        /// The action that ran.
        action: String,
        /// The `committed` receipt.
        receipt: Box<Receipt>,
    },
    /// The call waits for a human: the agent stopped with `FeedbackRequired` carrying `pause`.
    Paused {
        /// The swiftide tool call.
        tool_call: ToolCall,
        /// What the host shows the human.
        pause: Box<Pause>,
        /// The kernel's `ApprovalRequired`.
        refusal: Arc<ControlError>,
    },
    /// The kernel refused; the model was told plainly that the tool did not run.
    Refused {
        /// The swiftide tool call.
        tool_call: ToolCall,
        /// The action refused.
        action: String,
        /// The kernel's refusal.
        refusal: Arc<ControlError>,
    },
    /// A reviewer's edit named an action that no tool on this gate runs: nothing was asked or
    /// run, and the model was told so.
    EditRefused {
        /// The swiftide tool call.
        tool_call: ToolCall,
        /// The edit.
        edit: Edit,
    },
}

impl Outcome {
    /// The swiftide tool call.
    pub fn tool_call(&self) -> &ToolCall {
        match self {
            Outcome::Ran { tool_call, .. }
            | Outcome::Paused { tool_call, .. }
            | Outcome::Refused { tool_call, .. }
            | Outcome::EditRefused { tool_call, .. } => tool_call,
        }
    }

    /// The kernel's refusal, for `Paused` and `Refused`.
    pub fn refusal(&self) -> Option<&ControlError> {
        match self {
            Outcome::Paused { refusal, .. } | Outcome::Refused { refusal, .. } => Some(refusal),
            Outcome::Ran { .. } | Outcome::EditRefused { .. } => None,
        }
    }

    /// The kernel's refusal, owned, for `Paused` and `Refused`: `Ok` once the tool's
    /// [`Halt`] is gone (the log then holds the only reference), `Err` with the shared one
    /// otherwise; `None` for the other outcomes.
    pub fn into_refusal(self) -> Option<Result<ControlError, Arc<ControlError>>> {
        match self {
            Outcome::Paused { refusal, .. } | Outcome::Refused { refusal, .. } => {
                Some(Arc::try_unwrap(refusal))
            }
            Outcome::Ran { .. } | Outcome::EditRefused { .. } => None,
        }
    }
}

/// Why [`Pass::execute`] did not return the executor's value.
#[derive(Debug)]
pub enum Halt {
    /// The call waits for a human: return [`Halt::into_tool_output`] so the agent stops with
    /// `FeedbackRequired`.
    Paused {
        /// What to show.
        pause: Box<Pause>,
        /// The kernel's `ApprovalRequired` (shared with the gate's outcome log).
        refusal: Arc<ControlError>,
    },
    /// The kernel refused (shared with the gate's outcome log).
    Refused(Arc<ControlError>),
}

impl Halt {
    /// The kernel's refusal.
    pub fn refusal(&self) -> &ControlError {
        match self {
            Halt::Paused { refusal, .. } | Halt::Refused(refusal) => refusal,
        }
    }

    /// What the tool returns to swiftide: `FeedbackRequired` with the pause, or the text that
    /// tells the model plainly that `tool` did not run ([`model_message`]).
    pub fn into_tool_output(self, tool: &str) -> ToolOutput {
        match self {
            Halt::Paused { pause, .. } => ToolOutput::FeedbackRequired(Some(pause.to_value())),
            Halt::Refused(refusal) => ToolOutput::Text(model_message(tool, &refusal)),
        }
    }
}

struct GateInner {
    control: Control,
    /// Who the operator says answers each request (`apr_…`), until a pass takes it.
    // INVARIANT (operator-approver): the only source of the approver a pass hands the kernel.
    approvers: Mutex<HashMap<String, Credential>>,
    outcomes: Mutex<Vec<Outcome>>,
    /// Every gated tool, by action, so an edit can reach the edited action's body.
    bodies: Mutex<HashMap<String, (ActionSpec, Body, String)>>,
    /// The run (agent run / conversation) every request of this gate is scoped to.
    run: Option<String>,
}

/// Gates swiftide tools with a [`Control`] the operator built (with an
/// `InterruptApprovalProvider` around [`crate::SwiftideInterrupt`]).
///
/// Cheap to clone; clones share the outcome log.
#[derive(Clone)]
pub struct Gate {
    inner: Arc<GateInner>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate running every gated tool through `control`.
    pub fn new(control: Control) -> Gate {
        Gate::scoped(control, None)
    }

    fn scoped(control: Control, run: Option<String>) -> Gate {
        Gate {
            inner: Arc::new(GateInner {
                control,
                approvers: Mutex::new(HashMap::new()),
                outcomes: Mutex::new(Vec::new()),
                bodies: Mutex::new(HashMap::new()),
                run,
            }),
        }
    }

    /// A gate whose every kernel request is scoped to `run`
    /// ([`ActionRequest::with_run`](countersign::ActionRequest::with_run)): one gate per agent
    /// run or conversation, with an id the host keeps beside the run's checkpoint. An approval
    /// given in this run is consumed only by this run; another run asking for the identical
    /// action gets its own request (SPEC.md 1.6). A request the tool already scoped keeps its
    /// run.
    pub fn for_run(control: Control, run: impl Into<String>) -> Gate {
        Gate::scoped(control, Some(run.into()))
    }

    /// The run this gate scopes its requests to, if any ([`Gate::for_run`]).
    pub fn run(&self) -> Option<&str> {
        self.inner.run.as_deref()
    }

    /// The control.
    pub fn control(&self) -> &Control {
        &self.inner.control
    }

    /// Gate a swiftide tool as `spec`'s action. The tool keeps its name and spec for the model;
    /// it runs only through the kernel, with the canonical arguments.
    pub fn wrap(&self, tool: impl Tool + 'static, spec: ActionSpec) -> GatedTool {
        let name = tool.name().into_owned();
        let tool_spec = tool.tool_spec();
        self.gated(name, tool_spec, spec, Body::Tool(Box::new(tool)))
    }

    /// Gate a swiftide tool that declares its action with [`CountersignAction`].
    ///
    /// # Errors
    ///
    /// [`TemplateError`] when a declared template does not parse.
    pub fn protect<T: Tool + CountersignAction + 'static>(
        &self,
        tool: T,
    ) -> Result<GatedTool, TemplateError> {
        let spec = ActionSpec::declared::<T>()?;
        Ok(self.wrap(tool, spec))
    }

    /// A gated tool whose body is `function` of the canonical arguments, returning the text the
    /// model reads. Return [`ExecutorError::not_executed`] only when the effect definitely did
    /// not happen.
    pub fn function<F, Fut>(&self, tool_spec: ToolSpec, spec: ActionSpec, function: F) -> GatedTool
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, ExecutorError>> + Send + 'static,
    {
        let function: Arc<Function> =
            Arc::new(move |arguments| Box::pin(function(arguments)) as FunctionFuture);
        self.gated(
            tool_spec.name.clone(),
            tool_spec,
            spec,
            Body::Function(function),
        )
    }

    fn gated(&self, name: String, tool_spec: ToolSpec, spec: ActionSpec, body: Body) -> GatedTool {
        lock(&self.inner.bodies).insert(
            spec.action.clone(),
            (spec.clone(), body.clone(), name.clone()),
        );
        GatedTool {
            gate: self.clone(),
            name,
            tool_spec,
            spec,
            body,
        }
    }

    /// `approver` approves exactly what `pause` shows: the feedback to hand swiftide
    /// (`AgentContext::feedback_received(&tool_call, &feedback)` then `Agent::run`, or
    /// [`crate::resume`]).
    ///
    /// `approver` is who your application says answered — an approver token
    /// (`Credential::Token`, verified by the kernel against the policy's keys) or a bare name
    /// (`"human:alice"`, asserted: it gets groups only from the policy's directory). The gate
    /// keeps it beside the request id, server-side, and hands it to the kernel when the resumed
    /// run re-enters the tool on **this gate**; the feedback payload names an asserted approver
    /// for display only (never a token), and that name is never what the kernel is given
    /// (SPEC.md 2.2). The kernel judges the approver against the request's rule: an answer by
    /// someone the rule does not entitle is refused (`not_entitled`) and changes nothing; under
    /// a quorum, each answer counts once per distinct approver and the run pauses again until
    /// the last one.
    pub fn approve(&self, pause: &Pause, approver: impl Into<Credential>) -> ToolFeedback {
        let shown = self.answered_by(pause, approver.into());
        crate::feedback::answer(pause, shown.as_deref(), None, true)
    }

    /// `approver` denies what `pause` shows, with an optional note (kept and shown as data).
    /// The resumed run records the denial; the model is told the tool did not run. `approver`
    /// as in [`Gate::approve`].
    pub fn deny(
        &self,
        pause: &Pause,
        approver: impl Into<Credential>,
        note: Option<&str>,
    ) -> ToolFeedback {
        let shown = self.answered_by(pause, approver.into());
        crate::feedback::answer(pause, shown.as_deref(), note, false)
    }

    /// The old name of [`Gate::deny`], kept for one release (issue #19: a human's no is `deny`
    /// in every API).
    #[deprecated(note = "use `Gate::deny`")]
    pub fn reject(
        &self,
        pause: &Pause,
        approver: impl Into<Credential>,
        note: Option<&str>,
    ) -> ToolFeedback {
        self.deny(pause, approver, note)
    }

    /// Keep `approver` for `pause`'s request; the name to show in the payload, if asserted.
    fn answered_by(&self, pause: &Pause, approver: Credential) -> Option<String> {
        let shown = match &approver {
            Credential::Asserted(name) => Some(name.clone()),
            Credential::Verified { id, .. } => Some(id.clone()),
            Credential::Token(_) | Credential::Unverified { .. } => None,
        };
        lock(&self.inner.approvers).insert(pause.request_id.clone(), approver);
        shown
    }

    /// Begin one pass of `tool_call` inside a tool's `invoke`: takes the feedback swiftide
    /// holds for it (once: swiftide removes it), and the approver the operator passed for the
    /// request it names ([`Gate::approve`]). Use it in a hand-written tool that makes several
    /// kernel attempts; [`GatedTool`] does this for one action.
    pub async fn begin(&self, context: &dyn AgentContext, tool_call: &ToolCall) -> Pass {
        let answer = context
            .has_received_feedback(tool_call)
            .await
            .map(|feedback| Answer::from_feedback(&feedback));
        let operator_approver = answer
            .as_ref()
            .and_then(|answer| answer.request_id.as_ref())
            .and_then(|request_id| lock(&self.inner.approvers).remove(request_id));
        Pass {
            gate: self.clone(),
            tool_call: tool_call.clone(),
            slot: Arc::new(Mutex::new(PassSlot {
                answer,
                operator_approver,
                ..PassSlot::default()
            })),
        }
    }

    /// Every outcome since the last call, oldest first (drained).
    pub fn take_outcomes(&self) -> Vec<Outcome> {
        std::mem::take(&mut *lock(&self.inner.outcomes))
    }

    fn record(&self, outcome: Outcome) {
        lock(&self.inner.outcomes).push(outcome);
    }
}

/// One pass of a tool call: the feedback it was re-entered with, and the kernel attempts it
/// makes. Each attempt's refusal or pause is logged on the gate.
pub struct Pass {
    gate: Gate,
    tool_call: ToolCall,
    slot: SharedSlot,
}

impl std::fmt::Debug for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pass")
            .field("tool_call", &self.tool_call)
            .finish_non_exhaustive()
    }
}

impl Pass {
    /// The tool call.
    pub fn tool_call(&self) -> &ToolCall {
        &self.tool_call
    }

    /// The reviewer's edit this tool call carries, if any.
    pub fn edit(&self) -> Option<Edit> {
        lock(&self.slot)
            .answer
            .as_ref()
            .and_then(|answer| answer.edit.clone())
    }

    /// Run `request` through the kernel with `executor`, answering an approval from this pass's
    /// feedback when it names the kernel's pending request.
    ///
    /// # Errors
    ///
    /// [`Halt::Paused`] when a human must answer (return [`Halt::into_tool_output`] from the
    /// tool), [`Halt::Refused`] with the kernel's refusal otherwise. On a replayed pass, a step
    /// that committed before the pause is refused `duplicate` when it has an effect key; one
    /// without an effect key runs again.
    ///
    /// # Cancel safety
    ///
    /// As `Control::execute`.
    pub async fn execute<T, F, Fut>(
        &self,
        request: ActionRequest,
        executor: F,
    ) -> Result<Executed<T>, Halt>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        let action = request.name().to_owned();
        let request = match self.gate.run() {
            Some(run) if request.run().is_none() => request.with_run(run),
            _ => request,
        };
        let result = SLOT
            .scope(
                Arc::clone(&self.slot),
                self.gate.control().execute(request, executor),
            )
            .await;
        let refusal = match result {
            Ok(executed) => {
                self.gate.record(Outcome::Ran {
                    tool_call: self.tool_call.clone(),
                    action,
                    receipt: Box::new(executed.receipt.clone()),
                });
                return Ok(executed);
            }
            Err(refusal) => Arc::new(refusal),
        };
        let mut slot = lock(&self.slot);
        let suspended = slot.suspended_on.take();
        let paused_on = match (refusal.as_ref(), suspended) {
            (ControlError::ApprovalRequired { request_id, .. }, Some(pending))
                if pending.request_id == *request_id =>
            {
                Some(pending)
            }
            _ => None,
        };
        let Some(pending) = paused_on else {
            drop(slot);
            self.gate.record(Outcome::Refused {
                tool_call: self.tool_call.clone(),
                action,
                refusal: Arc::clone(&refusal),
            });
            return Err(Halt::Refused(refusal));
        };
        let ignored = match (&slot.answer, slot.answer_used) {
            (Some(answer), false) => Some(
                answer
                    .request_id
                    .clone()
                    .unwrap_or_else(|| crate::feedback::NOT_AN_ANSWER.to_owned()),
            ),
            _ => None,
        };
        let edit = slot.answer.as_ref().and_then(|answer| answer.edit.clone());
        drop(slot);
        let pause = Box::new(Pause::new(&pending, &self.tool_call, edit, ignored));
        self.gate.record(Outcome::Paused {
            tool_call: self.tool_call.clone(),
            pause: pause.clone(),
            refusal: Arc::clone(&refusal),
        });
        Err(Halt::Paused { pause, refusal })
    }
}

/// A swiftide tool gated by Countersign ([`Gate::wrap`], [`Gate::protect`], [`Gate::function`]).
///
/// Its `invoke` runs the call through the kernel: allowed calls run the body once; a call that
/// needs approval stops the agent with `ToolOutput::FeedbackRequired` carrying a [`Pause`]; the
/// resumed run re-enters here, and the feedback answers the kernel's request; a refusal (a
/// human's no included) is logged on the gate as the kernel's [`ControlError`] and the model
/// reads plainly that the tool did not run.
#[derive(Clone)]
pub struct GatedTool {
    gate: Gate,
    name: String,
    tool_spec: ToolSpec,
    spec: ActionSpec,
    body: Body,
}

impl std::fmt::Debug for GatedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatedTool")
            .field("name", &self.name)
            .field("action", &self.spec.action)
            .finish_non_exhaustive()
    }
}

impl GatedTool {
    /// The action this tool runs as.
    pub fn action(&self) -> &str {
        &self.spec.action
    }

    /// The gate this tool runs through (its outcome log).
    pub fn gate(&self) -> &Gate {
        &self.gate
    }
}

#[async_trait::async_trait]
impl Tool for GatedTool {
    async fn invoke(
        &self,
        context: &dyn AgentContext,
        tool_call: &ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        let pass = self.gate.begin(context, tool_call).await;
        let (spec, body, name, arguments) = match pass.edit() {
            None => (
                self.spec.clone(),
                self.body.clone(),
                self.name.clone(),
                tool_call.args().unwrap_or("{}").to_owned(),
            ),
            Some(edit) => {
                let target = lock(&self.gate.inner.bodies).get(&edit.action).cloned();
                let Some((spec, body, name)) = target else {
                    self.gate.record(Outcome::EditRefused {
                        tool_call: tool_call.clone(),
                        edit: edit.clone(),
                    });
                    return Ok(ToolOutput::Text(
                        serde_json::json!({
                            "status": "refused",
                            "executed": false,
                            "did_run": "no",
                            "reason": "unknown_edit_target",
                            "tool": self.name,
                            "message": format!("The tool `{}` was not executed: the reviewer's edit names `{}`, which no gated tool runs.", self.name, edit.action),
                        })
                        .to_string(),
                    ));
                };
                (spec, body, name, edit.arguments.to_string())
            }
        };
        let request = spec.request(&arguments);
        let executed = pass
            .execute(request, |canonical| async move {
                body.run(context, tool_call, &name, &canonical).await
            })
            .await;
        Ok(match executed {
            Ok(executed) => executed.value,
            Err(halt) => halt.into_tool_output(&self.name),
        })
    }

    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(&self.name)
    }

    fn tool_spec(&self) -> ToolSpec {
        self.tool_spec.clone()
    }
}

impl From<GatedTool> for Box<dyn Tool> {
    fn from(tool: GatedTool) -> Box<dyn Tool> {
        Box::new(tool)
    }
}
