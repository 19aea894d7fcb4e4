"""The OpenAI Agents SDK adapter, checked by the Countersign adapter conformance kit.

The kit (``countersign.conformance``, the Rust kit through the binding) builds each case's
world and hands this adapter the kernel (``session.control``) and the tool's body
(``session.run_tool``). Every call goes through the real SDK: a scripted model emits it, the
SDK asks the gate's ``needs_approval``, pauses with ``result.interruptions``, and the scripted
human (``session.review``) answers through :meth:`Gate.approve` / :meth:`Gate.deny`, exactly
as a host application would; the run resumes with :meth:`Gate.run`.

Run it directly to print the report (``python kit_adapter.py``); the kit also starts it that
way for the durability case's second and third processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any, Optional

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import Agent, RunState, set_tracing_disabled  # noqa: E402

from countersign import AnswerRefused, ApprovalExpired, conformance  # noqa: E402
from countersign_openai_agents import Gate  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from run_state import forge  # noqa: E402
from scripted_model import Call, ScriptedModel  # noqa: E402

set_tracing_disabled(True)

# The SDK's tool names allow no dots: the kit's actions under the names the model sees.
TOOL_NAMES = {"kit.refund": "kit_refund", "kit.wire_transfer": "kit_wire_transfer"}


class KitInterrupt:
    """The SDK decides before invocation: the human's answer is recorded with the kernel's
    answer API (:meth:`Gate.approve` / :meth:`Gate.deny`, the path ``countersign approve``
    uses) before the SDK invokes the tool, so the kernel finds the request answered and never
    needs this interrupt. If it is asked (a request still pending at invocation), it suspends:
    a wait is never an answer."""

    # The run state the SDK resumes holds the arguments the tool is invoked with, and the
    # kernel re-checks their hash against the answered request: prevention.
    carries_approved_arguments = True

    def interrupt(self, pending: dict) -> Optional[dict]:
        return None


class OpenAIAgentsKitAdapter:
    framework = "openai-agents"
    shape = "decided_before_invocation"

    def interrupt(self, setup: conformance.Setup) -> KitInterrupt:
        return KitInterrupt()

    def invoke(self, session: conformance.Session, action: str, arguments: dict, run: str) -> Any:
        return asyncio.run(self._invoke(session, action, arguments, run))

    def resume(self, session: conformance.Session, action: str, arguments: dict, run: str) -> Any:
        return asyncio.run(self._resume(session, action, arguments, run))

    # --------------------------------------------------------------------------------------

    def _gate(self, session: conformance.Session) -> tuple[Gate, list]:
        gate = Gate(session.control)

        def body(**given: Any) -> str:
            # The arguments the kernel handed over (the kit sends no nulls), to the kit's
            # executor; its value is the tool's result as the model reads it (JSON text).
            arguments = {key: value for key, value in given.items() if value is not None}
            return json.dumps(session.run_tool(arguments))

        @gate.tool(action="kit.refund", name="kit_refund")
        def kit_refund(payment_id: str, amount: int, principal: Optional[str] = None) -> str:
            """Refund a payment."""
            return body(payment_id=payment_id, amount=amount, principal=principal)

        @gate.tool(action="kit.wire_transfer", name="kit_wire_transfer")
        def kit_wire_transfer(iban: str, amount: int) -> str:
            """Wire money."""
            return body(iban=iban, amount=amount)

        return gate, [kit_refund, kit_wire_transfer]

    def _agent(self, tools: list, action: str, arguments: dict, call_id: str) -> Agent:
        script = [[Call(TOOL_NAMES[action], arguments, call_id)]]
        return Agent(name="kit", instructions="Use the tools.", model=ScriptedModel(script), tools=tools)

    @staticmethod
    def _paused_path(session: conformance.Session, run: str) -> Path:
        return Path(session.scratch_dir) / f"paused-{run}.json"

    @staticmethod
    def _run_id(session: conformance.Session, run: str) -> str:
        """The host's run id for the kit's run ``run``: made once, kept in the scratch folder
        (another process resumes the same run)."""
        path = Path(session.scratch_dir) / "runs.json"
        runs = json.loads(path.read_text()) if path.exists() else {}
        if run not in runs:
            runs[run] = f"oa-kit-{uuid.uuid4().hex}"
            path.write_text(json.dumps(runs))
        return runs[run]

    async def _invoke(
        self, session: conformance.Session, action: str, arguments: dict, run: str
    ) -> Any:
        if self._paused_path(session, run).exists():
            # This run is paused (a quorum's first yes, a refused answer): the next invocation
            # in it continues that run, whose request is scoped to it.
            return await self._resume(session, action, arguments, run)
        gate, tools = self._gate(session)
        call_id = "call_" + uuid.uuid4().hex[:12]
        agent = self._agent(tools, action, arguments, call_id)
        result = await gate.run(agent, "Do what the user asked.", run_id=self._run_id(session, run))
        return await self._settle(session, gate, agent, result, call_id, arguments, run)

    async def _resume(
        self, session: conformance.Session, action: str, arguments: dict, run: str
    ) -> Any:
        saved = self._paused_path(session, run)
        if not saved.exists():  # nothing paused: the identical call again
            return await self._invoke(session, action, arguments, run)
        paused = json.loads(saved.read_text())
        saved.unlink()  # saved again if the resumed run pauses again
        gate, tools = self._gate(session)
        agent = self._agent(tools, action, arguments, paused["call_id"])
        state = await gate.load_state(agent, paused["state"])
        # Gate.run applies the kernel's recorded answers (here: `countersign approve` from
        # another process) to the run state before resuming.
        result = await gate.run(agent, state)
        return await self._settle(session, gate, agent, result, paused["call_id"], arguments, run)

    def _approve(self, gate: Gate, state: Any, call: Any, answer: dict) -> bool:
        """Record the yes; whether the call may go on (False: it stays paused)."""
        try:
            # The approver is the one the operator passes on this call (the person signed in
            # to the host), never `payload_approver`, the name the run state carries.
            record = gate.approve(state, call, approver=answer["approver"], note=answer["note"])
        except ApprovalExpired:
            # Answered too late: tell the model (the kernel records the refused attempt)
            # instead of resuming with an approval.
            gate.apply_decisions(state)
            return True
        except AnswerRefused:
            # The request's rule refused this approver (a receipt says why): nothing changed,
            # the call waits for an entitled approver.
            return False
        # A quorum's first yes leaves the request pending: the call waits for the next one.
        return record.state != "pending"

    def _reject(self, gate: Gate, state: Any, call: Any, answer: dict) -> bool:
        try:
            gate.deny(state, call, approver=answer["approver"], note=answer["note"])
        except AnswerRefused:
            return False
        return True

    def _save(
        self, session: conformance.Session, gate: Gate, call: Any, state: Any, run: str
    ) -> None:
        saved = self._paused_path(session, run)
        saved.write_text(json.dumps({"call_id": call.call_id, "state": gate.save_state(state)}))

    async def _settle(
        self,
        session: conformance.Session,
        gate: Gate,
        agent: Agent,
        result: Any,
        call_id: str,
        arguments: dict,
        run: str,
    ) -> Any:
        """Answer the run's pauses as the host would, until it ends; the call's value, or the
        kernel's refusal raised."""
        for _ in range(4):
            pending = gate.pending(result)
            if not pending:
                break
            state = result.to_state()
            run_id = gate.run_id(result)
            edited: Optional[dict] = None
            for call in pending:
                request = call.request
                answer = session.review(
                    {
                        "request_id": request.request_id,
                        "action": request.action,
                        "arguments": request.arguments,
                        "expires_at": request.expires_at,
                    }
                )
                if answer is None:
                    # Nobody answered: the run stays paused; save it for a later resume.
                    self._save(session, gate, call, state, run)
                    raise session.paused(request.request_id)
                if answer["decision"] == "approve":
                    goes_on = self._approve(gate, state, call, answer)
                else:
                    goes_on = self._reject(gate, state, call, answer)
                if not goes_on:
                    # One answer per pause: the call still waits (a refused answer, or a
                    # quorum's first yes); save the run for a later resume.
                    self._save(session, gate, call, state, run)
                    raise session.paused(request.request_id)
                if answer["arguments"] != request.arguments:
                    edited = answer["arguments"]
            if edited is not None:
                # The answer is about other arguments: the run state the SDK resumes was edited
                # after the pause (what a client holding the state can do).
                blob = forge(
                    state.to_string(),
                    json.dumps(json.dumps(arguments))[1:-1],
                    json.dumps(json.dumps(edited))[1:-1],
                )
                state = await RunState.from_string(agent, blob)
            # The host resumes its own run (it knows the run id; the blob is what was edited).
            result = await gate.run(agent, state, run_id=run_id)
        refusal = gate.refusal(call_id)
        if refusal is not None:
            # The model read "the tool did not run"; the host gets the kernel's refusal.
            raise refusal
        output = _output_of(result, call_id)
        if output is None:
            raise RuntimeError(f"the run ended without a result for call `{call_id}`")
        return json.loads(output)


# Deliberately broken variants: each must fail the suite it names, which shows the kit can fail
# this adapter's shape (docs/conformance.md).


class TrustsTheSdkFlag(OpenAIAgentsKitAdapter):
    """Approves in the SDK's run state only; no answer reaches the kernel. Must fail `kernel`
    (a matching answer authorizes nothing here: the kernel still waits)."""

    framework = "openai-agents-broken-sdk-flag"

    def _approve(self, gate: Gate, state: Any, call: Any, answer: dict) -> bool:
        state.approve(call.item)
        return True


class RejectsInTheSdkOnly(OpenAIAgentsKitAdapter):
    """Rejects in the SDK's run state only: no recorded denial, and the SDK's own rejection
    text is all the caller gets. Must fail `denial`."""

    framework = "openai-agents-broken-sdk-reject"

    def _reject(self, gate: Gate, state: Any, call: Any, answer: dict) -> bool:
        state.reject(call.item)
        return True


class _ForgetfulControl:
    """The kernel, but every call is run with no approval presented and no framework call
    correlated: what an adapter that forgets which request a call paused on does."""

    def __init__(self, control: Any) -> None:
        self._control = control

    def __getattr__(self, name: str) -> Any:
        return getattr(self._control, name)

    async def execute_async(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("approval", None)
        kwargs.pop("correlation", None)
        return await self._control.execute_async(*args, **kwargs)


class ForgetsTheCallLedger(OpenAIAgentsKitAdapter):
    """Presents no approval request and no call correlation when the tool runs (the kernel then
    looks for a grant for whatever arguments arrive). Must fail `binding`: edited arguments are
    no longer recognised as an answer about other arguments."""

    framework = "openai-agents-broken-no-ledger"

    def _gate(self, session: conformance.Session) -> tuple[Gate, list]:
        gate, tools = super()._gate(session)
        gate.control = _ForgetfulControl(gate.control)  # type: ignore[assignment]
        return gate, tools


class TakesTheApproverFromTheRunState(OpenAIAgentsKitAdapter):
    """Records the approver named in the run state (``payload_approver``) instead of the one the
    operator passed on the resuming call. Must fail `entitlement`: an entitled name written into
    the run state authorizes the call although an outsider answered."""

    framework = "openai-agents-broken-run-state-approver"

    def _approve(self, gate: Gate, state: Any, call: Any, answer: dict) -> bool:
        return super()._approve(gate, state, call, {**answer, "approver": answer["payload_approver"]})


class SharesOneRunIdAcrossRuns(OpenAIAgentsKitAdapter):
    """Passes one run id for every run of the host. Must fail `entitlement`: an approval given
    in one run authorizes another run's identical call."""

    framework = "openai-agents-broken-one-run-id"

    @staticmethod
    def _run_id(session: conformance.Session, run: str) -> str:
        return "oa-kit-the-only-run"


VARIANTS = {
    adapter.framework: adapter
    for adapter in (
        OpenAIAgentsKitAdapter,
        TrustsTheSdkFlag,
        RejectsInTheSdkOnly,
        ForgetsTheCallLedger,
        TakesTheApproverFromTheRunState,
        SharesOneRunIdAcrossRuns,
    )
}


def _output_of(result: Any, call_id: str) -> Optional[str]:
    for item in result.to_input_list():
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            if item.get("call_id") == call_id:
                return item["output"]
    return None


def run_kit(framework: str = OpenAIAgentsKitAdapter.framework) -> conformance.Report:
    """Run the kit against the adapter (or a broken variant) named ``framework``."""
    return conformance.run(
        VARIANTS[framework](),
        relaunch=[sys.executable, os.path.abspath(__file__), framework],
    )


if __name__ == "__main__":
    report = run_kit(*sys.argv[1:2])
    print(report.text, end="")
    sys.exit(0 if report.ok else 1)
