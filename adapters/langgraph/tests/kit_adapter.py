"""The LangGraph adapter, checked by the Countersign adapter conformance kit.

The kit (``countersign.conformance``, the Rust kit through the binding) builds each case's
world — its kernel (``session.control``, built with this adapter's interrupt, as an operator
builds it), the tool's body (``session.run_tool``) and a scripted human (``session.review``).
Every call goes through real LangChain ``create_agent`` and LangGraph: a scripted chat model
emits the call, the Countersign middleware decides it through the kernel, the run pauses with
``interrupt()`` and is checkpointed (a SQLite file in the kit's scratch folder), the human's
answer goes back through :meth:`Gate.resume` (``Command(resume={interrupt_id: ...})`` with the
approver in ``context=``), exactly as a host application would.

Run it directly to print the report (``python kit_adapter.py``); the kit also starts it that
way for the durability case's other processes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import uuid
from pathlib import Path
from typing import Any, Optional

from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from countersign import conformance
from countersign_langgraph import Approver, Gate, LangGraphInterrupt, create_agent

sys.path.insert(0, str(Path(__file__).parent))
from scripted_model import ScriptedChatModel, call  # noqa: E402


class _OneCallModel(ScriptedChatModel):
    """Emits the kit's call when the user asked, and "done" once the tool answered (a resumed
    run, whose model instance is new, never emits the call a second time)."""

    call: dict = {}
    turns: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.turns = [[self.call], "done"]
        return super()._generate(messages, stop, run_manager, **kwargs)

# LangChain tool names are the model-facing names: the kit's actions under names without dots.
ACTIONS = {"kit_refund": "kit.refund", "kit_wire_transfer": "kit.wire_transfer"}
TOOL_NAMES = {action: name for name, action in ACTIONS.items()}


class LangGraphKitAdapter:
    framework = "langgraph"
    shape = "resumed_in_place"

    def interrupt(self, setup: conformance.Setup) -> LangGraphInterrupt:
        return LangGraphInterrupt()

    def invoke(self, session: conformance.Session, action: str, arguments: dict, run: str) -> Any:
        gate, agent, saver = self._agent(session, action, arguments)
        try:
            config = {"configurable": {"thread_id": self._thread(session, run)}}
            if gate.pending(agent, config):
                # This run is paused (a quorum's first yes, a refused answer): the next call in
                # it continues the paused one.
                return self._settle(session, gate, agent, config)
            agent.invoke({"messages": [{"role": "user", "content": "do it"}]}, config)
            return self._settle(session, gate, agent, config)
        finally:
            saver.conn.close()

    def resume(self, session: conformance.Session, action: str, arguments: dict, run: str) -> Any:
        """Continue a run paused by an earlier invoke (maybe in another process) after a human
        answered out of band: resume the thread with no value; the kernel finds the grant."""
        gate, agent, saver = self._agent(session, action, arguments)
        try:
            config = {"configurable": {"thread_id": self._thread(session, run)}}
            pauses = gate.pending(agent, config)
            if not pauses:
                return self.invoke(session, action, arguments, run)
            self.call_id = pauses[0].tool_call_id
            agent.invoke(None, config)
            return self._settle(session, gate, agent, config)
        finally:
            saver.conn.close()

    # --------------------------------------------------------------------------------------

    def _agent(self, session: conformance.Session, action: str, arguments: dict):
        gate = Gate(session.control, session.interrupt.inner, actions=ACTIONS)

        @tool("kit_refund")
        def kit_refund(payment_id: str, amount: int, principal: Optional[str] = None) -> str:
            """Refund a payment."""
            given = {"payment_id": payment_id, "amount": amount, "principal": principal}
            return json.dumps(session.run_tool({k: v for k, v in given.items() if v is not None}))

        @tool("kit_wire_transfer")
        def kit_wire_transfer(iban: str, amount: int) -> str:
            """Wire money."""
            return json.dumps(session.run_tool({"iban": iban, "amount": amount}))

        self.call_id = "call_" + uuid.uuid4().hex[:12]
        model = _OneCallModel(call=call(TOOL_NAMES[action], arguments, self.call_id))
        saver = SqliteSaver(
            sqlite3.connect(Path(session.scratch_dir) / "checkpoints.db", check_same_thread=False)
        )
        agent = create_agent(model, [kit_refund, kit_wire_transfer], gate=gate, checkpointer=saver)
        return gate, agent, saver

    @staticmethod
    def _thread(session: conformance.Session, run: str) -> str:
        """The LangGraph thread for the kit's run ``run``: made once, kept in the scratch folder
        (another process resumes the same thread)."""
        path = Path(session.scratch_dir) / "threads.json"
        threads = json.loads(path.read_text()) if path.exists() else {}
        if run not in threads:
            threads[run] = f"lg-kit-{uuid.uuid4().hex}"
            path.write_text(json.dumps(threads))
        return threads[run]

    def _approver(self, answer: dict) -> Approver:
        # The person the operator's application signed in, passed on the resuming call;
        # `payload_approver` is only what the payload shows.
        return Approver(name=answer["approver"], token=answer["approver_token"])

    def _envelope(self, value: dict, answer: dict) -> dict:
        # The arguments the human answered about (the binding case's differ from those shown).
        return {**value, "arguments": answer["arguments"], "payload_approver": answer["payload_approver"]}

    def _settle(self, session: conformance.Session, gate: Gate, agent: Any, config: dict) -> Any:
        """Answer the thread's pauses as the host would: one answer per pause; the call's
        value, or the kernel's refusal raised."""
        answered: set[str] = set()
        while True:
            pauses = gate.pending(agent, config)
            if not pauses:
                break
            pause = pauses[0]
            self.call_id = pause.tool_call_id
            if pause.request_id in answered:
                # Answered once and still pending (a quorum's first yes, a refused answer):
                # the call ends here; the next call in this run asks the next approver.
                raise session.paused(pause.request_id)
            answer = session.review(
                {
                    "request_id": pause.request_id,
                    "action": pause.action,
                    "arguments": pause.arguments,
                    "expires_at": pause.expires_at,
                }
            )
            if answer is None:
                raise session.paused(pause.request_id)
            answered.add(pause.request_id)
            resume = gate.resume(
                agent, config, {pause.interrupt_id: answer["decision"]},
                approver=self._approver(answer),
                notes={pause.interrupt_id: answer["note"]} if answer["note"] else None,
            )
            value = self._envelope(resume.command.resume[pause.interrupt_id], answer)
            # A refused answer (not_entitled, ...) is raised as itself; the thread stays paused
            # on the same request for an entitled approver.
            agent.invoke(Command(resume={pause.interrupt_id: value}), config, context=resume.context)
        state = agent.get_state(config)
        for message in reversed(state.values["messages"]):
            if getattr(message, "type", None) == "tool" and message.tool_call_id == self.call_id:
                if message.status == "error":
                    refusal = gate.refusal(self.call_id)
                    if refusal is None:
                        raise RuntimeError(f"call `{self.call_id}` was refused in another process")
                    raise refusal
                return json.loads(message.content)
        raise RuntimeError(f"the run ended without a result for call `{self.call_id}`")


# Deliberately broken variants: each must fail the suite it names, which shows the kit can fail
# this adapter's shape (docs/conformance.md).


class TakesTheApproverFromThePayload(LangGraphKitAdapter):
    """Hands the kernel the approver named in the resume payload instead of the one the
    operator passed on the resuming call. Must fail `entitlement`."""

    framework = "langgraph-broken-payload-approver"

    def _approver(self, answer: dict) -> Approver:
        return Approver(name=answer["payload_approver"] or answer["approver"])


class OneThreadForEveryRun(LangGraphKitAdapter):
    """Scopes every run to one thread id. Must fail `entitlement` (run 1's approval runs run
    2's identical call)."""

    framework = "langgraph-broken-one-thread"

    @staticmethod
    def _thread(session: conformance.Session, run: str) -> str:
        return "lg-kit-the-only-thread"


class EchoesThePendingArguments(LangGraphKitAdapter):
    """Puts the arguments of the pause into the answer instead of those the human answered
    about (any "yes" becomes a yes for whatever is pending). Must fail `binding`."""

    framework = "langgraph-broken-echoes-pending"

    def _envelope(self, value: dict, answer: dict) -> dict:
        return {**value, "payload_approver": answer["payload_approver"]}


class _LooseInterrupt(LangGraphInterrupt):
    """Answers every request the kernel asks about with the last answer it was given, whatever
    request that answer named."""

    def __init__(self) -> None:
        super().__init__()
        self.last: Optional[dict] = None

    def hold(self, request_id: str, answer: dict) -> None:
        self.last = answer
        super().hold(request_id, answer)

    def interrupt(self, pending: Any) -> Any:
        answer = super().interrupt(pending)
        if answer is None and self.last is not None:
            return self.last
        return answer


class ReusesAnEarlierAnswer(LangGraphKitAdapter):
    """Hands the kernel an earlier answer for a request nobody answered (a cache of answers).
    Must fail `denial` (the yes given to an earlier call is handed over for the denied one)."""

    framework = "langgraph-broken-answer-cache"

    def interrupt(self, setup: conformance.Setup) -> LangGraphInterrupt:
        return _LooseInterrupt()


VARIANTS = {
    adapter.framework: adapter
    for adapter in (
        LangGraphKitAdapter,
        TakesTheApproverFromThePayload,
        OneThreadForEveryRun,
        EchoesThePendingArguments,
        ReusesAnEarlierAnswer,
    )
}


def run_kit(framework: str = LangGraphKitAdapter.framework) -> conformance.Report:
    """Run the kit against the adapter (or a broken variant) named ``framework``."""
    return conformance.run(
        VARIANTS[framework](),
        relaunch=[sys.executable, os.path.abspath(__file__), framework],
    )


if __name__ == "__main__":
    report = run_kit(*sys.argv[1:2])
    print(report.text, end="")
    sys.exit(0 if report.ok else 1)
