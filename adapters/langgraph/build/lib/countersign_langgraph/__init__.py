"""Countersign for LangGraph and LangChain v1: approvals through ``interrupt()`` /
``Command(resume=...)``, with prevention — what runs after the resume is re-checked by the
kernel against the approved action hash.

The operator builds the kernel with this adapter's interrupt, and the adapter gates tool calls::

    import countersign
    from countersign_langgraph import Approver, Gate, LangGraphInterrupt, create_agent

    interrupt = LangGraphInterrupt()
    control = countersign.Control("countersign.yaml", principal="agent:support-bot",
                                  interrupt=interrupt)
    gate = Gate(control, interrupt)
    agent = create_agent(model, tools, gate=gate, checkpointer=saver)   # LangChain v1
    config = {"configurable": {"thread_id": "t-1"}}
    agent.invoke({"messages": [...]}, config)             # pauses: one interrupt per call
    for pause in gate.pending(agent, config):             # show pause.display to a human
        ...
    resume = gate.resume(agent, config, {pause.interrupt_id: "approve"},
                         approver=Approver(token=signed_in_token))
    agent.invoke(resume.command, config, context=resume.context)

A plain LangGraph graph uses ``gate.tool_node(tools)`` (a LangChain ``ToolNode`` whose
``wrap_tool_call`` is the gate) with :meth:`Gate.send_tool_calls` as its router, or
:meth:`Gate.call` inside a node of its own.

See README.md for the shape, what the model and the caller see per refusal, and where
LangGraph shows through.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import uuid
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Collection, Iterable, Literal, Mapping, Optional, Sequence, Union

import countersign
from countersign import ApprovalRequired, CountersignError, InvalidDecision
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.messages import ToolMessage
from langgraph.types import Command, Send, interrupt as _lg_interrupt
from pydantic import BaseModel, ConfigDict, ValidationError

__version__ = "0.1.0"

__all__ = [
    "FRAMEWORK",
    "PAUSE_SCHEMA",
    "ANSWER_SCHEMA",
    "Answer",
    "Approver",
    "ResumeContext",
    "Resume",
    "Pause",
    "LangGraphInterrupt",
    "Gate",
    "CountersignMiddleware",
    "create_agent",
    "ConfigurationError",
    "ResumeError",
    "NothingPending",
    "StaleApproval",
    "AmbiguousResume",
    "NoApprovalChannel",
    "NoApprovalChannelWarning",
    "RUN_MODES",
    "CONTINUE_REASONS",
    "refusal_message",
    "check_middleware",
]

FRAMEWORK = "langgraph"
"""The framework's name: in correlations, and in answer receipts' channel
``interrupt:langgraph``."""

PAUSE_SCHEMA = "countersign.pause/v1"
"""The ``countersign`` field of every interrupt payload this adapter raises."""

ANSWER_SCHEMA = "countersign.answer/v1"
"""The ``countersign`` field of every resume value this adapter accepts."""

CONTINUE_REASONS = frozenset({"approval_denied", "expired", "approval_required"})
"""Kernel refusals a run continues past: the model gets a ``ToolMessage(status="error")``
saying the tool did not run. Every other refusal is raised out of ``invoke`` as the binding's
exception (README, "What the caller and the model see")."""

# langgraph >= 1.1 validates resume values against a schema given to `interrupt()`; older
# releases take none (this adapter validates the same model itself there).
_INTERRUPT_TAKES_SCHEMA = "response_schema" in inspect.signature(_lg_interrupt).parameters


class ConfigurationError(ValueError):
    """The agent or graph is built in a way Countersign cannot protect (for example a
    ``HumanInTheLoopMiddleware`` that gates a tool the gate gates: two approvals, one of which
    the kernel never sees)."""


class ResumeError(CountersignError):
    """A resume :meth:`Gate.resume` refuses to build; nothing was sent to the graph."""

    default_reason = "invalid_resume"


class NothingPending(ResumeError):
    """The thread has no Countersign pause pending (case B41 b): a resume would be a silent
    no-op, so none is built."""

    default_reason = "nothing_pending"


class StaleApproval(ResumeError):
    """The resume names an interrupt id that is not pending on the thread (answered already,
    from another surface, or from an older batch: case B41 a). Attribute ``interrupt_ids``."""

    default_reason = "stale_approval"


class NoApprovalChannel(ResumeError):
    """The gate's kernel was built without an approval channel (no ``interrupt=``: a headless
    run, case B39), so an answer passed through the graph could not be recorded: none is
    built. Answer out of band (``countersign approve``, ``countersign serve``) and continue
    the thread with ``invoke(None, config)``."""

    default_reason = "no_approval_channel"


class NoApprovalChannelWarning(UserWarning):
    """Issued when a :class:`Gate` is built on a kernel with no approval channel (case B39):
    calls that need a human are parked pending, and run only once answered out of band."""


RUN_MODES = ("interrupt", "headless")
"""How a gate's kernel hears a human (:meth:`Gate.status`, every pause payload's
``run_mode``): ``interrupt`` — through LangGraph's interrupt, recorded by the operator's
channel ``interrupt:langgraph``; ``headless`` — no approval channel: a call that needs a human
is parked pending (the graph pauses and never runs it) until someone answers out of band."""

_NO_CHANNEL = (
    "no approval channel: this kernel was built without interrupt=, so a call that needs a "
    "human is parked pending and runs only once answered out of band (countersign approve, "
    "countersign serve); then continue the thread with invoke(None, config)"
)


class AmbiguousResume(ResumeError):
    """A bare answer while more than one pause is pending: it would be applied positionally,
    to whichever pause came first. Address each answer by interrupt id (case B07)."""

    default_reason = "ambiguous_resume"


class Answer(BaseModel):
    """The closed resume value (``countersign.answer/v1``): the only thing a Countersign pause
    accepts. ``decision`` is exactly ``"approve"`` or ``"deny"``; ``request_id`` and
    ``action_hash`` echo what the person was shown; ``arguments`` are the arguments they
    answered about (the kernel refuses an answer about others, ``mismatch``); ``answer_id``
    ties the value to the resuming call that passed it (:class:`ResumeContext`), so a value
    replayed from a checkpoint carries no approver. ``payload_approver`` is display only: the
    kernel is handed the approver in ``runtime.context``, never this."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    countersign: Literal["countersign.answer/v1"]
    request_id: str
    action_hash: str
    decision: Literal["approve", "deny"]
    arguments: Any
    answer_id: str
    note: Optional[str] = None
    payload_approver: Optional[str] = None


@dataclass(frozen=True)
class Approver:
    """Who answers, as the application signed them in: an approver ``token`` (from
    ``countersign approver token``; verified by the kernel) or a bare ``name`` (``asserted``:
    refused where the rule says ``require: authenticated``). Never written into graph state."""

    name: Optional[str] = None
    token: Optional[str] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.name and not self.token:
            raise ValueError("an Approver needs a token or a name: an anonymous answer authorizes nothing")


@dataclass(frozen=True)
class ResumeContext:
    """What the application passes as ``context=`` on the resuming ``invoke`` (it reaches the
    gate as ``runtime.context`` and is never checkpointed): the approver and the ids of the
    answers this call carries. With a ``context_schema`` of your own, put it in a field named
    ``countersign``."""

    approver: Approver
    answer_ids: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Resume:
    """A resume built by :meth:`Gate.resume`: pass ``command`` as the input and ``context``
    as ``context=`` of the same ``invoke``/``stream`` call."""

    command: Command
    context: ResumeContext


@dataclass(frozen=True)
class Pause:
    """One pending Countersign pause on a thread: the LangGraph ``interrupt_id`` to answer,
    and the payload shown to the human (``request_id``, ``action``, ``arguments``,
    ``display`` — the kernel's rendering, show this —, ``action_hash``, ``expires_at``,
    ``tool_call_id``, ``approvers``, ``quorum``, ``approvals_given``)."""

    interrupt_id: str
    request_id: str
    action: str
    arguments: Any
    display: str
    action_hash: str
    expires_at: str
    tool_call_id: str
    payload: dict


class LangGraphInterrupt:
    """The adapter's ``FrameworkInterrupt``: hand it to ``countersign.Control(...,
    interrupt=...)`` (the operator's kernel then records answers with channel
    ``interrupt:langgraph``), and the same object to :class:`Gate`.

    The LangGraph pause itself happens in the tool call (``interrupt()`` needs the node's
    context); when the kernel asks this object, it returns the answer the gate read from the
    resume value of this very call and validated (request id, hash echo, approver from
    ``runtime.context``), or ``None`` — suspend — when there is none. Answers are held only
    for the duration of one kernel call in this process: nothing here survives a process.
    """

    framework = FRAMEWORK
    # The resume value carries the arguments the human answered about: the kernel refuses
    # (`mismatch`) an answer about other arguments than the pending ones.
    carries_approved_arguments = True

    def __init__(self) -> None:
        self._held: dict[str, dict] = {}
        self._lock = threading.Lock()

    def hold(self, request_id: str, answer: dict) -> None:
        with self._lock:
            self._held[request_id] = answer

    def drop(self, request_id: str) -> None:
        with self._lock:
            self._held.pop(request_id, None)

    def interrupt(self, pending: Any) -> Any:
        """Called by the kernel's provider with the pending request (JSON text from a
        Python-built control, a dict from the conformance kit)."""
        as_text = isinstance(pending, str)
        record = json.loads(pending) if as_text else pending
        with self._lock:
            answer = self._held.pop(record["request_id"], None)
        if answer is None:
            return None
        return json.dumps(answer) if as_text else answer


def _resume_context(context: Any) -> Optional[ResumeContext]:
    if isinstance(context, ResumeContext):
        return context
    if isinstance(context, Mapping):
        found = context.get("countersign")
    else:
        found = getattr(context, "countersign", None)
    return found if isinstance(found, ResumeContext) else None


def _thread(config: Mapping[str, Any]) -> str:
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None or str(thread) == "":
        raise ConfigurationError(
            "no thread_id in the run's config: a Countersign pause is resumed on its thread, "
            "so invoke with config={'configurable': {'thread_id': ...}} and a checkpointer"
        )
    return str(thread)


def _error_artifact(error: CountersignError) -> dict:
    """The kernel's error as data: what a ToolMessage's ``artifact`` carries (checkpointable)."""
    artifact: dict[str, Any] = {
        "error": type(error).__name__,
        "reason": error.reason,
        "did_run": str(error.did_run.value),
        "may_retry": error.may_retry,
        "message": error.message,
    }
    for name in ("request_id", "action_hash", "expires_at", "approver", "note"):
        value = getattr(error, name, None)
        if value is not None:
            artifact[name] = value
    return artifact


_STATUS = {"approval_denied": "denied", "expired": "expired", "approval_required": "pending"}


def refusal_message(error: CountersignError, *, tool: str, tool_call_id: str) -> ToolMessage:
    """The model-facing result of a refusal a run continues past (SPEC.md 2.6): JSON text
    saying the tool was not executed, with ``reason`` and ``did_run``; a reviewer's note
    quoted as data; the kernel's error as the ``artifact``."""
    status = _STATUS[error.reason]
    if status == "denied":
        message = f"The tool `{tool}` was not executed: a human reviewer denied this call."
    elif status == "expired":
        message = (
            f"The tool `{tool}` was not executed: the approval request expired before it was "
            "used. It will not run unless the call is made again and approved."
        )
    else:
        message = f"The tool `{tool}` was not executed: the call is waiting for a human's decision."
    content: dict[str, Any] = {
        "status": status,
        "executed": False,
        "reason": error.reason,
        "did_run": str(error.did_run.value),
        "tool": tool,
        "message": message,
        "request_id": getattr(error, "request_id", None),
    }
    if status == "denied" and getattr(error, "note", None):
        content["reviewer_note"] = error.note
    return ToolMessage(
        content=json.dumps(content),
        tool_call_id=tool_call_id,
        name=tool,
        status="error",
        artifact=_error_artifact(error),
    )


class Gate:
    """Decides every gated tool call through the kernel.

    Args:
        control: the operator's ``countersign.Control``, built with ``interrupt=`` the same
            :class:`LangGraphInterrupt` (the kit hands a control built that way).
        interrupt: that interrupt.
        actions: tool name → kernel action name (default: the tool's own name).
        gated: the tool names that go through the kernel (default: every tool: a tool the
            policy does not name is denied, ``unknown_action``).
    """

    framework = FRAMEWORK

    def __init__(
        self,
        control: countersign.Control,
        interrupt: LangGraphInterrupt,
        *,
        actions: Optional[Mapping[str, str]] = None,
        gated: Optional[Collection[str]] = None,
    ) -> None:
        if not isinstance(interrupt, LangGraphInterrupt):
            raise TypeError("interrupt must be the LangGraphInterrupt the control was built with")
        self.control = control
        self.interrupt = interrupt
        self.actions = dict(actions or {})
        self.gated = None if gated is None else frozenset(gated)
        self._refusals: dict[str, CountersignError] = {}
        self._recorded_invalid: set[str] = set()
        self._lock = threading.Lock()
        if self.run_mode == "headless":
            warnings.warn(f"countersign-langgraph: {_NO_CHANNEL}", NoApprovalChannelWarning, stacklevel=2)

    # -- how a human is heard (case B39) --------------------------------------------------

    @property
    def run_mode(self) -> str:
        """``interrupt`` or ``headless`` (:data:`RUN_MODES`), from the kernel's approval
        channel (``Control.approval_channel``), never from whether anyone is watching."""
        channel = getattr(self.control, "approval_channel", None)
        return "headless" if channel is None else "interrupt"

    def status(self) -> dict:
        """What this gate can do, for a health or status check: ``framework``, ``run_mode``,
        ``approval_channel`` (``interrupt:langgraph`` or ``None``), the policy's ``mode``
        (``enforce`` / ``observe``) and ``warnings`` (one line each; ``no approval channel:
        ...`` when headless)."""
        return {
            "framework": FRAMEWORK,
            "run_mode": self.run_mode,
            "approval_channel": getattr(self.control, "approval_channel", None),
            "policy_mode": self.control.mode,
            "warnings": [_NO_CHANNEL] if self.run_mode == "headless" else [],
        }

    def _record_invalid(
        self, request_id: str, value: Any, approver: Optional["Approver"], *, once: bool = False
    ) -> Optional[CountersignError]:
        """Hand a resume value that is not a Countersign answer to the kernel as a refused
        answer (case B38): recorded with who sent it (the approver of the resuming call) and
        the value as given, under ``{"resume": value}`` — a shape the kernel never accepts, so
        nothing can be granted here. ``once``: at most once per (request, value) in this
        process (a value LangGraph < 1.1 replays on every later pass). Returns the
        kernel's refusal, or ``None`` when nobody can be named (no approver on the resuming
        call: nothing is recorded, the value still decides nothing)."""
        if approver is None:
            return None
        try:
            given = json.dumps({"resume": value}, sort_keys=True, default=repr)
        except (TypeError, ValueError):
            given = json.dumps({"resume": repr(value)})
        key = f"{request_id} {given}"
        if once:
            with self._lock:
                if key in self._recorded_invalid:
                    return None
                if len(self._recorded_invalid) > 4096:
                    self._recorded_invalid.clear()
                self._recorded_invalid.add(key)
        try:
            self.control.respond(
                request_id, json.loads(given), framework=FRAMEWORK,
                approver=None if approver.token else approver.name, token=approver.token,
            )
        except CountersignError as refusal:
            return refusal
        return None  # unreachable: the kernel never accepts {"resume": ...}

    # -- what is gated --------------------------------------------------------------------

    def action_for(self, tool_name: str) -> Optional[str]:
        """The kernel action for a tool call, or ``None`` when the tool is not gated."""
        if self.gated is not None and tool_name not in self.gated:
            return None
        return self.actions.get(tool_name, tool_name)

    def gates(self, tool_name: str) -> bool:
        return self.action_for(tool_name) is not None

    # -- LangChain v1 / ToolNode hooks ----------------------------------------------------

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """A ``ToolCallWrapper``: the body of ``CountersignMiddleware.wrap_tool_call`` and of
        :meth:`tool_node`'s ``wrap_tool_call``."""
        call = request.tool_call
        action = self.action_for(call["name"])
        if action is None:
            return handler(request)

        def run(canonical: dict) -> Any:
            return handler(request.override(tool_call={**call, "args": canonical}))

        runtime = request.runtime
        try:
            return self._decide(
                action, call["args"], str(call["id"]), runtime.config, runtime.context, run,
                tool=call["name"],
            )
        except CountersignError as error:
            return self._refused(error, call)

    async def awrap_tool_call(
        self, request: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """The async ``ToolCallWrapper`` (``ainvoke``/``astream``): the kernel works in a
        worker thread; the tool's coroutine runs on the caller's loop."""
        call = request.tool_call
        action = self.action_for(call["name"])
        if action is None:
            return await handler(request)
        loop = asyncio.get_running_loop()

        def run(canonical: dict) -> Any:
            coroutine = handler(request.override(tool_call={**call, "args": canonical}))
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

        runtime = request.runtime
        try:
            # `interrupt()` reads the node's context: to_thread copies it into the worker.
            return await asyncio.to_thread(
                self._decide, action, call["args"], str(call["id"]), runtime.config,
                runtime.context, run, call["name"],
            )
        except CountersignError as error:
            return self._refused(error, call)

    def _refused(self, error: CountersignError, call: Mapping[str, Any]) -> ToolMessage:
        if error.reason in CONTINUE_REASONS and not isinstance(error, ResumeError):
            with self._lock:
                self._refusals[str(call["id"])] = error
                while len(self._refusals) > 1024:
                    self._refusals.pop(next(iter(self._refusals)))
            return refusal_message(error, tool=call["name"], tool_call_id=str(call["id"]))
        raise error

    def refusal(self, tool_call_id: str) -> Optional[CountersignError]:
        """The kernel's refusal behind a model-facing ``ToolMessage`` (denied, expired,
        pending) for this tool call, as raised in this process (the last 1024 are kept), or
        ``None``. For the host; the model reads the message."""
        with self._lock:
            return self._refusals.get(tool_call_id)

    def middleware(self) -> "CountersignMiddleware":
        """The LangChain v1 agent middleware (prefer :func:`create_agent`, which also checks
        the rest of the middleware list)."""
        return CountersignMiddleware(self)

    def tool_node(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """A LangChain ``ToolNode`` whose every call goes through the gate. Route to it with
        :meth:`send_tool_calls` (one task per tool call, so each pause is its own interrupt)."""
        return _tool_node_class()(
            tools, wrap_tool_call=self.wrap_tool_call, awrap_tool_call=self.awrap_tool_call,
            **kwargs,
        )

    @staticmethod
    def send_tool_calls(
        state: Any, *, node: str = "tools", messages_key: str = "messages"
    ) -> Union[list[Send], str]:
        """A conditional edge: one ``Send`` to ``node`` per tool call of the last AI message
        (each call its own task, so two pauses in one step get their own interrupt ids on
        every LangGraph release), or ``"__end__"`` when there is none."""
        from langchain.tools.tool_node import ToolCallWithContext

        messages = state[messages_key] if isinstance(state, Mapping) else getattr(state, messages_key)
        last = messages[-1] if messages else None
        calls = list(getattr(last, "tool_calls", None) or [])
        if not calls:
            return "__end__"
        return [
            Send(node, ToolCallWithContext(__type="tool_call_with_context", tool_call=call, state=state))
            for call in calls
        ]

    # -- a node of your own ---------------------------------------------------------------

    def call(
        self,
        action: str,
        arguments: Mapping[str, Any],
        executor: Callable[[dict], Any],
        *,
        call_id: str,
    ) -> Any:
        """Decide one call from inside a node of your own (``executor`` gets the canonical
        arguments). ``call_id`` names the call within the thread: stable across the node's
        replays, different for different calls. Returns the executor's value, pauses the
        graph (``interrupt()``) when a human must answer, or raises the kernel's refusal
        (every one, ``approval_denied`` and ``expired`` included: there is no model message to
        carry them)."""
        from langgraph.config import get_config

        config = get_config()
        context = None
        try:
            from langgraph.runtime import get_runtime

            context = get_runtime().context
        except Exception:  # noqa: BLE001 - no runtime outside a LangGraph node
            context = None
        return self._decide(action, dict(arguments), call_id, config, context, executor, tool=action)

    # -- the decision ---------------------------------------------------------------------

    def _decide(
        self,
        action: str,
        arguments: Any,
        call_id: str,
        config: Mapping[str, Any],
        context: Any,
        executor: Callable[[dict], Any],
        tool: str,
    ) -> Any:
        run = _thread(config)
        correlation = (FRAMEWORK, call_id)
        asker = _Asker(self, tool, call_id, context)
        record = self.control.correlated(FRAMEWORK, run, call_id)
        presented: Optional[str] = None
        if record is not None and record.state == "pending":
            # A replay of this call after its pause: read the answer to its request.
            held = asker.ask(record)
            if held is not None and _expired(record.expires_at):
                # The answer came after the request expired: it counts for nothing. The kernel
                # refuses it (recording the expiry) and the attempt presenting the expired
                # request ends `expired`: the model is told, nothing runs, no new request is
                # opened for a human to find later.
                self.interrupt.drop(record.request_id)
                self._record_late(record, held)
                presented = record.request_id
        elif record is not None and record.state == "granted":
            # Answered out of band (`countersign approve`): present the request the store maps
            # this call to (SPEC.md 2.3), so a grant that expired meanwhile is refused as
            # `expired` rather than silently replaced by a new request.
            presented = record.request_id
        while True:
            try:
                done = self.control.execute(
                    action, arguments, executor, approval=presented, run=run,
                    correlation=correlation,
                )
                return done.value
            except ApprovalRequired as error:
                # The request waits for a human: pause (the first pass), or ask again after
                # an answer that left it pending (a quorum's first yes, an answer about another
                # request).
                pending = self.control.approval(error.request_id)
                if pending is None or pending.state != "pending":
                    raise
                note = None
                earlier = asker.last_request
                if earlier is not None and earlier != pending.request_id:
                    old = self.control.approval(earlier)
                    if old is not None and old.state == "expired":
                        # The answer came after the request it named expired: the kernel
                        # recorded the expiry and opened a new request for the same call.
                        note = (
                            f"the request that was answered ({earlier}) expired before the "
                            "answer arrived; this is a new request for the same call"
                        )
                asker.ask(pending, note=note)
            finally:
                if asker.last_request is not None:
                    self.interrupt.drop(asker.last_request)

    def _record_late(self, record: countersign.ApprovalRequest, held: dict) -> None:
        """Hand an answer that came after its request expired to the kernel, which refuses it
        (``expired``) and records the expiry (an ``approval_expired`` receipt, as for any
        late answer); the refusal itself is not raised here (the attempt that follows ends
        ``expired``)."""
        response = {"decision": held["decision"], "action_hash": held["action_hash"]}
        if held.get("note") is not None:
            response["note"] = held["note"]
        try:
            self.control.respond(
                record.request_id, response, framework=FRAMEWORK,
                approver=held.get("approver"), token=held.get("approver_token"),
            )
        except CountersignError:
            pass

    # -- the application's side: what is pending, and resuming --------------------------

    def pending(self, graph: Any, config: Mapping[str, Any]) -> list[Pause]:
        """The Countersign pauses pending on the thread, in LangGraph's order."""
        state = graph.get_state(config)
        seen: dict[str, Pause] = {}
        interrupts = list(getattr(state, "interrupts", ()) or ())
        for task in getattr(state, "tasks", ()) or ():
            interrupts.extend(getattr(task, "interrupts", ()) or ())
        for item in interrupts:
            value = getattr(item, "value", None)
            if not isinstance(value, Mapping) or value.get("countersign") != PAUSE_SCHEMA:
                continue
            if item.id in seen:
                continue
            seen[item.id] = Pause(
                interrupt_id=item.id,
                request_id=value["request_id"],
                action=value["action"],
                arguments=value["arguments"],
                display=value.get("display", ""),
                action_hash=value["action_hash"],
                expires_at=value["expires_at"],
                tool_call_id=value["tool_call_id"],
                payload=dict(value),
            )
        return list(seen.values())

    def resume(
        self,
        graph: Any,
        config: Mapping[str, Any],
        answers: Union[Mapping[str, Any], str],
        *,
        approver: Approver,
        notes: Optional[Mapping[str, str]] = None,
    ) -> Resume:
        """Build the resume for the pending pauses named in ``answers`` (interrupt id →
        ``"approve"`` or ``"deny"``), each addressed by its interrupt id, each echoing the
        request id, action hash and arguments its payload showed.

        A bare ``"approve"``/``"deny"`` is accepted only while exactly one pause is pending.

        Raises:
            NothingPending: no pause pending on the thread.
            StaleApproval: an interrupt id that is not pending.
            AmbiguousResume: a bare answer while several pauses are pending.
            InvalidDecision: a decision other than ``"approve"`` or ``"deny"`` (``"reject"``
                is read as ``"deny"``); nothing is sent.
        """
        if not isinstance(approver, Approver):
            raise TypeError("approver must be an Approver (the person the application signed in)")
        pauses = {pause.interrupt_id: pause for pause in self.pending(graph, config)}
        if pauses and self.run_mode == "headless":
            raise NoApprovalChannel(
                f"{_NO_CHANNEL}; nothing was sent",
                pending_ids=sorted(pauses),
                request_ids=sorted({pause.request_id for pause in pauses.values()}),
            )
        if not pauses:
            raise NothingPending(
                "nothing is pending on this thread: there is no Countersign pause to answer "
                "(it was answered already, or the thread never paused)"
            )
        if not isinstance(answers, Mapping):
            if len(pauses) != 1:
                raise AmbiguousResume(
                    f"{len(pauses)} pauses are pending: answer each by its interrupt id "
                    "({interrupt_id: 'approve' | 'deny'}), never with one bare value",
                    pending_ids=sorted(pauses),
                )
            answers = {next(iter(pauses)): answers}
        unknown = sorted(set(answers) - set(pauses))
        if unknown:
            raise StaleApproval(
                f"interrupt `{unknown[0]}` is not pending on this thread: the approval was "
                "answered already or belongs to another batch; read gate.pending() again",
                interrupt_ids=unknown,
                pending_ids=sorted(pauses),
            )
        resume_map: dict[str, dict] = {}
        answer_ids: set[str] = set()
        for interrupt_id, decision in answers.items():
            pause = pauses[interrupt_id]
            if decision == "reject":
                decision = "deny"
            if not isinstance(decision, str) or decision not in ("approve", "deny"):
                recorded = self._record_invalid(pause.request_id, decision, approver)
                raise InvalidDecision(
                    f"decision {decision!r} for interrupt `{interrupt_id}` is not a decision: "
                    "use \"approve\" or \"deny\"; nothing was sent"
                    + ("" if recorded is None else " (the refusal is recorded)"),
                    reason="invalid_decision",
                    request_id=pause.request_id,
                )
            answer_id = uuid.uuid4().hex
            answer_ids.add(answer_id)
            resume_map[interrupt_id] = Answer(
                countersign=ANSWER_SCHEMA,
                request_id=pause.request_id,
                action_hash=pause.action_hash,
                decision=decision,
                arguments=pause.arguments,
                answer_id=answer_id,
                note=(notes or {}).get(interrupt_id),
                payload_approver=approver.name,
            ).model_dump()
        return Resume(
            command=Command(resume=resume_map),
            context=ResumeContext(approver=approver, answer_ids=frozenset(answer_ids)),
        )

    def edit(
        self,
        graph: Any,
        config: Mapping[str, Any],
        interrupt_id: str,
        *,
        arguments: Mapping[str, Any],
        approver: Approver,
        tool: Optional[str] = None,
        note: Optional[str] = None,
        as_node: str = "model",
        messages_key: str = "messages",
    ) -> str:
        """A reviewer's edit of a paused call (case B11): the call becomes a **new** action
        that is decided from scratch, and the original authorizes nothing.

        1. The edited call's hash is computed by the kernel (``Control.evaluate``: the policy
           of the edited tool, writes nothing).
        2. The original request is denied by ``approver`` through the kernel (channel
           ``interrupt:langgraph``), with a note naming the edited action, its hash and its
           tool call id: that answer receipt is the evidence linking the two hashes.
        3. The paused call in the last AI message is replaced by the edited one, under a new
           tool call id, as the node ``as_node`` (``model`` for ``create_agent``).

        Continue the thread with ``invoke(None, config)``: the edited call goes through the
        gate like any call — allowed, denied, or paused for its own approval under its own
        rule (another tool's rule when ``tool`` renames it). Returns the new tool call id.

        Raises:
            NothingPending, StaleApproval: the interrupt is not pending.
            NoApprovalChannel: the kernel has no approval channel (headless).
            ConfigurationError: ``tool`` is not gated by this gate (the edit would run outside
                the kernel), or the paused call is not in the last AI message.
            ValueError: the edit changes nothing (answer the pause instead).
            The kernel's refusal of the denial (``not_entitled``, ``expired``, ...): nothing
            was changed in the graph.
        """
        if not isinstance(approver, Approver):
            raise TypeError("approver must be an Approver (the person the application signed in)")
        pauses = {pause.interrupt_id: pause for pause in self.pending(graph, config)}
        if not pauses:
            raise NothingPending("nothing is pending on this thread: there is no pause to edit")
        if interrupt_id not in pauses:
            raise StaleApproval(
                f"interrupt `{interrupt_id}` is not pending on this thread: read gate.pending() again",
                interrupt_ids=[interrupt_id],
                pending_ids=sorted(pauses),
            )
        if self.run_mode == "headless":
            raise NoApprovalChannel(f"{_NO_CHANNEL}; nothing was edited")
        pause = pauses[interrupt_id]
        new_tool = tool or str(pause.payload.get("tool") or pause.action)
        new_action = self.action_for(new_tool)
        if new_action is None:
            raise ConfigurationError(
                f"`{new_tool}` is not gated by this gate: an edit into it would run outside "
                "the kernel; gate the tool or edit into a gated one"
            )
        edited_hash = self.control.evaluate(new_action, dict(arguments)).action_hash
        if edited_hash == pause.action_hash:
            raise ValueError("the edit changes nothing: answer the pause instead")
        state = graph.get_state(config)
        values = state.values if isinstance(state.values, Mapping) else {}
        messages = list(values.get(messages_key) or [])
        last = messages[-1] if messages else None
        calls = list(getattr(last, "tool_calls", None) or [])
        positions = [i for i, call in enumerate(calls) if str(call.get("id")) == pause.tool_call_id]
        if len(positions) != 1:
            raise ConfigurationError(
                f"the paused call `{pause.tool_call_id}` is not in the thread's last AI message "
                "once: edit it in the graph yourself and deny the original request"
            )
        new_id = f"{pause.tool_call_id}-edit-{uuid.uuid4().hex[:8]}"
        link = f"edited into `{new_action}` {edited_hash} (tool call {new_id})"
        self.control.respond(
            pause.request_id,
            {
                "decision": "deny",
                "action_hash": pause.action_hash,
                "note": link if not note else f"{link}: {note}",
            },
            framework=FRAMEWORK,
            approver=None if approver.token else approver.name,
            token=approver.token,
        )
        calls[positions[0]] = {
            **calls[positions[0]],
            "name": new_tool,
            "args": dict(arguments),
            "id": new_id,
        }
        graph.update_state(
            config, {messages_key: [last.model_copy(update={"tool_calls": calls})]}, as_node=as_node
        )
        return new_id


def _tool_node_class() -> type:
    """LangGraph's ``ToolNode`` where it takes ``wrap_tool_call`` (langgraph-prebuilt >= 1.1),
    else the one LangChain 1.0's ``create_agent`` uses (``langchain.tools.tool_node``)."""
    from langgraph.prebuilt import ToolNode

    if "wrap_tool_call" in inspect.signature(ToolNode.__init__).parameters:
        return ToolNode
    from langchain.tools.tool_node import _ToolNode

    return _ToolNode


_UNSET = object()


def _resume_value_of(error: ValidationError) -> Any:
    """The resume value LangGraph refused (it validates against ``Answer`` itself and does not
    hand the value back), as far as the error shows it: the whole value when an error is about
    all of it, else each offending field's input by its location."""
    details = error.errors(include_url=False)
    for detail in details:
        location = tuple(detail.get("loc") or ())
        if location == () or (detail.get("type") == "missing" and len(location) == 1):
            return detail.get("input")
    return {
        ".".join(str(part) for part in detail.get("loc") or ()): detail.get("input")
        for detail in details
    }


def _expired(expires_at: str) -> bool:
    """Is a request past its ``expires_at`` (RFC 3339, UTC) now? As the kernel judges it:
    expired from that instant on, no skew allowance."""
    when = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    return datetime.now(timezone.utc) >= when


class _Asker:
    """One call's asking: shows its pending request through LangGraph's ``interrupt()`` and
    reads the answer this resuming call passed."""

    def __init__(self, gate: Gate, tool: str, call_id: str, context: Any) -> None:
        self.gate = gate
        self.tool = tool
        self.call_id = call_id
        self.context = _resume_context(context)
        self.last_request: Optional[str] = None
        self.asked: set[str] = set()

    def payload(self, record: countersign.ApprovalRequest, note: Optional[str]) -> dict:
        payload = {
            "countersign": PAUSE_SCHEMA,
            "request_id": record.request_id,
            "action": record.action,
            "arguments": record.arguments,
            "display": record.display,
            "action_hash": record.action_hash,
            "expires_at": record.expires_at,
            "tool": self.tool,
            "tool_call_id": self.call_id,
            "approvers": record.approvers,
            "quorum": record.quorum,
            "approvals_given": record.approvals_given,
            "run_mode": self.gate.run_mode,
            "answer_with": {
                "countersign": ANSWER_SCHEMA,
                "decision": ["approve", "deny"],
                "echo": ["request_id", "action_hash", "arguments"],
            },
        }
        if self.gate.run_mode == "headless":
            # Case B39: whoever reads the pause (and the checkpoint that keeps it) learns that
            # no answer given through the graph can count.
            payload["approval_channel"] = None
            payload["waiting_reason"] = _NO_CHANNEL
        if note:
            payload["previous_answer"] = note
        return payload

    def ask(self, record: countersign.ApprovalRequest, note: Optional[str] = None) -> dict:
        """Pause with this request (``GraphInterrupt`` propagates), or hold the answer this
        resuming call carries for it, for the kernel's provider to take; returns what is
        held."""
        self.last_request = record.request_id
        if note is None and record.request_id in self.asked:
            note = "the last answer left the request pending (approvals so far: " \
                f"{record.approvals_given} of {record.quorum})"
        while True:
            payload = self.payload(record, note)
            value: Any = _UNSET
            try:
                if _INTERRUPT_TAKES_SCHEMA:
                    value = _lg_interrupt(payload, response_schema=Answer)
                else:
                    value = _lg_interrupt(payload)
                answer = value if isinstance(value, Answer) else Answer.model_validate(value)
            except ValidationError as error:
                # Case B38: recorded by the kernel as a refused answer naming the approver of
                # this resuming call (when it names one), before anything else.
                self.gate._record_invalid(
                    record.request_id,
                    _resume_value_of(error) if value is _UNSET else value,
                    None if self.context is None else self.context.approver,
                    once=not _INTERRUPT_TAKES_SCHEMA,
                )
                if not _INTERRUPT_TAKES_SCHEMA:
                    # langgraph < 1.1 keeps a resume value in the task's resume list even when
                    # the task then fails, so raising here would fail every later resume of the
                    # thread: the value is skipped (it decides nothing) and the call asks again.
                    note = (
                        "a resume value that is not a Countersign answer was ignored "
                        f"(invalid_decision, {error.error_count()} problem(s)): build answers "
                        "with Gate.resume"
                    )
                    continue
                raise InvalidDecision(
                    "the resume value is not a Countersign answer (countersign.answer/v1 with "
                    "decision \"approve\" or \"deny\", echoing request_id, action_hash and "
                    f"arguments): nothing was decided; build it with Gate.resume ({error.error_count()} "
                    "problem(s))",
                    reason="invalid_decision",
                    request_id=record.request_id,
                ) from None
            if answer.request_id != record.request_id:
                note = f"an answer to another request ({answer.request_id}) was not applied to this one"
                continue
            if answer.answer_id in self.asked:
                continue
            if self.context is None or answer.answer_id not in self.context.answer_ids:
                # Replayed from the checkpoint, or resumed without the approver: it carries
                # no identity. Ask again.
                self.asked.add(answer.answer_id)
                note = (
                    "an answer was not applied: no approver was passed for it on the resuming "
                    "call (invoke(..., context=resume.context))"
                )
                continue
            self.asked.add(answer.answer_id)
            self.asked.add(record.request_id)
            approver = self.context.approver
            held = {
                "decision": answer.decision,
                "approver": None if approver.token else approver.name,
                "approver_token": approver.token,
                "note": answer.note,
                "arguments": answer.arguments,
                "action_hash": answer.action_hash,
            }
            self.gate.interrupt.hold(record.request_id, held)
            return held


class CountersignMiddleware(AgentMiddleware):
    """LangChain v1 agent middleware: every gated tool call is decided by the kernel
    (:meth:`Gate.wrap_tool_call`). Prefer :func:`create_agent`, which adds it innermost (it
    sees exactly the arguments that will run) and checks the rest of the list."""

    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    @property
    def name(self) -> str:
        return "CountersignMiddleware"

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self.gate.wrap_tool_call(request, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await self.gate.awrap_tool_call(request, handler)


def check_middleware(gate: Gate, middleware: Iterable[Any], tools: Iterable[Any] = ()) -> None:
    """Raise :class:`ConfigurationError` when a ``HumanInTheLoopMiddleware`` in ``middleware``
    gates a tool the gate gates (its approval would be a second one the kernel never sees, and
    its edits would change the arguments after the human saw them)."""
    tool_names = {getattr(tool, "name", None) or getattr(tool, "__name__", "") for tool in tools}
    for item in middleware:
        if isinstance(item, HumanInTheLoopMiddleware):
            clashing = sorted(
                name
                for name, config in (getattr(item, "interrupt_on", {}) or {}).items()
                if config and gate.gates(name) and (not tool_names or name in tool_names)
            )
            if clashing:
                raise ConfigurationError(
                    "HumanInTheLoopMiddleware gates " + ", ".join(f"`{n}`" for n in clashing)
                    + ", which Countersign gates: remove them from its interrupt_on (the "
                    "kernel's approval is the one that is checked when the tool runs)"
                )
        if isinstance(item, CountersignMiddleware):
            raise ConfigurationError(
                "the middleware list already holds a CountersignMiddleware: create_agent adds "
                "the gate's own"
            )


def create_agent(model: Any, tools: Sequence[Any] = (), *, gate: Gate, middleware: Sequence[Any] = (), **kwargs: Any) -> Any:
    """LangChain v1 ``create_agent`` with the gate's middleware innermost (it sees exactly the
    arguments that will run), after checking ``middleware`` (:func:`check_middleware`).

    Other constructions — ``CountersignMiddleware`` added by hand beside a
    ``HumanInTheLoopMiddleware`` — are not checked and not supported."""
    from langchain.agents import create_agent as _create_agent

    check_middleware(gate, middleware, tools)
    return _create_agent(model, tools, middleware=[*middleware, gate.middleware()], **kwargs)
