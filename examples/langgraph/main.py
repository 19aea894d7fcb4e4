"""A support agent whose refunds are countersigned: LangChain v1 `create_agent` on LangGraph +
Countersign, offline (a scripted chat model).

    python main.py            # the script answers the pause for "human:alice"
    python main.py --wait     # you answer from another shell with `countersign approve` / `deny`

The agent looks up an order and refunds it. The refund is above the policy's auto-allow limit,
so the graph pauses with one `interrupt()` for it; a human answers (through
`Command(resume={interrupt_id: ...})` with the approver in `context=`, or out of band with the
CLI), and the resumed run refunds exactly what was approved, once. The checkpoints are a SQLite
file (langgraph-checkpoint-sqlite) beside the kernel's store; the receipt chain is verified at
the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver

import countersign
from countersign_langgraph import Approver, Gate, LangGraphInterrupt, create_agent

HERE = Path(__file__).parent


class ScriptedModel(BaseChatModel):
    """The offline model: asks for both tools, then reports what they returned."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages, stop: Optional[list] = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        results = {m.tool_call_id: m.content for m in messages if getattr(m, "type", None) == "tool"}
        if not results:
            message = AIMessage(content="", tool_calls=[
                {"name": "lookup_order", "args": {"order_id": "o-7"}, "id": "call_1", "type": "tool_call"},
                {"name": "refund_order", "args": {"order_id": "o-7", "amount": 25000}, "id": "call_2", "type": "tool_call"},
            ])
        else:
            message = AIMessage(content=f"Done. Tool results: {json.dumps(results)}")
        return ChatResult(generations=[ChatGeneration(message=message)])


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return json.dumps({"order_id": order_id, "total": 25000, "status": "delivered"})


@tool
def refund_order(order_id: str, amount: int) -> str:
    """Refund an order (amount in cents)."""
    print(f"  [tool] refunding {amount} on {order_id}")
    return f"refunded {amount} on {order_id}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wait", action="store_true",
                        help="wait up to 10 minutes for your answer from another shell")
    parser.add_argument("--folder", type=Path, default=None,
                        help="where the store and checkpoints go (default: a new temporary folder)")
    options = parser.parse_args()
    folder = options.folder or Path(tempfile.mkdtemp(prefix="countersign-langgraph-"))
    folder.mkdir(parents=True, exist_ok=True)
    policy = HERE / "countersign.yaml"
    store = f"sqlite:{folder / 'countersign.db'}"

    # The operator's kernel, built with the adapter's interrupt.
    interrupt = LangGraphInterrupt()
    control = countersign.Control(policy, principal="agent:support-bot", store_url=store,
                                  interrupt=interrupt)
    gate = Gate(control, interrupt)

    with sqlite3.connect(folder / "checkpoints.db", check_same_thread=False) as connection:
        agent = create_agent(ScriptedModel(), [lookup_order, refund_order], gate=gate,
                             checkpointer=SqliteSaver(connection))
        config = {"configurable": {"thread_id": "ticket-42"}}
        print("== the agent runs")
        agent.invoke({"messages": [{"role": "user", "content": "Refund order o-7 in full."}]}, config)
        pauses = gate.pending(agent, config)
        for pause in pauses:
            print(f"== paused: interrupt {pause.interrupt_id}, request {pause.request_id}")
            print(pause.display)
        if not pauses:
            print("error: the run did not pause for the refund", file=sys.stderr)
            return 1
        (pause,) = pauses
        if options.wait:
            print("\nAnswer from another shell, then this run resumes:")
            print(f"  countersign --policy {policy} --store-url {store} approve {pause.request_id} --as human:<you>")
            print(f"  countersign --policy {policy} --store-url {store} deny {pause.request_id} --as human:<you>")
            deadline = time.monotonic() + 600
            while control.approval(pause.request_id).state == "pending":
                if time.monotonic() > deadline:
                    print("error: nobody answered within 10 minutes; the run stays paused", file=sys.stderr)
                    return 1
                time.sleep(1)
            print("== answered out of band; resuming the thread")
            result = agent.invoke(None, config)
        else:
            print("== human:alice approves through the graph")
            resume = gate.resume(agent, config, {pause.interrupt_id: "approve"},
                                 approver=Approver(name="human:alice"))
            result = agent.invoke(resume.command, config, context=resume.context)
        print("== the agent says:", result["messages"][-1].content)

    for receipt in control.receipts():
        print(f"  receipt {receipt['seq']}: {receipt['kind']}/{receipt['outcome']}"
              f" {receipt['action'] or ''} {receipt['reason'] or ''} {receipt['approver'] or ''}".rstrip())
    report = control.verify_receipts()
    print("== receipt chain:", "intact" if report.get("first_break") is None else f"broken: {report}")
    return 0 if report.get("first_break") is None else 1


if __name__ == "__main__":
    sys.exit(main())
