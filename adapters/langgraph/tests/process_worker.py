"""One step of a cross-process run, in a process of its own: ``start`` (the agent pauses),
``resume`` (answer the pause by its interrupt id, with the approver passed on this call) or
``continue`` (resume after an answer given with ``countersign approve``).

    python process_worker.py STEP FOLDER STORE_URL CHECKPOINTER THREAD

CHECKPOINTER is ``sqlite`` (a file in FOLDER) or ``postgres`` (STORE_URL's database). Each real
run of the tool appends a line to FOLDER/runs.txt. Prints one JSON line: the pauses and the
tool messages.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from pathlib import Path

from langchain_core.tools import tool

import countersign
from countersign_langgraph import Approver, Gate, LangGraphInterrupt, create_agent

sys.path.insert(0, str(Path(__file__).parent))
from conftest import write_policy  # noqa: E402
from scripted_model import ScriptedChatModel, call  # noqa: E402


@contextlib.contextmanager
def checkpointer(kind: str, folder: Path, url: str):
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        connection = sqlite3.connect(folder / "checkpoints.db", check_same_thread=False)
        try:
            yield SqliteSaver(connection)
        finally:
            connection.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver


def main(step: str, folder: Path, store_url: str, kind: str, thread: str) -> None:
    policy = folder / "countersign.yaml"
    if not policy.exists():
        write_policy(folder)
    interrupt = LangGraphInterrupt()
    control = countersign.Control(policy, principal="agent:test", store_url=store_url, interrupt=interrupt)
    gate = Gate(control, interrupt)

    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        with open(folder / "runs.txt", "a") as runs:
            runs.write(f"refund {order}\n")
        return f"refunded {order}"

    config = {"configurable": {"thread_id": thread}}
    with checkpointer(kind, folder, store_url) as saver:
        # The order is the thread's: the PostgreSQL store outlives one test run.
        model = ScriptedChatModel(turns=[[call("refund", {"order": thread}, "c-77")], "done"])
        agent = create_agent(model, [refund], gate=gate, checkpointer=saver)
        if step == "start":
            agent.invoke({"messages": [{"role": "user", "content": "refund o-77"}]}, config)
        elif step == "resume":
            (pause,) = gate.pending(agent, config)
            resume = gate.resume(agent, config, {pause.interrupt_id: "approve"}, approver=Approver(name="human:alice"))
            agent.invoke(resume.command, config, context=resume.context)
        elif step == "continue":
            agent.invoke(None, config)
        pauses = [
            {"interrupt_id": p.interrupt_id, "request_id": p.request_id, "tool_call_id": p.tool_call_id}
            for p in gate.pending(agent, config)
        ]
        messages = [
            {"tool_call_id": m.tool_call_id, "content": m.content, "status": m.status}
            for m in agent.get_state(config).values.get("messages", [])
            if getattr(m, "type", None) == "tool"
        ]
    print(json.dumps({"pauses": pauses, "tool_messages": messages}))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
