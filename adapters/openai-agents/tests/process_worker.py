"""One step of the cross-process test, run as its own Python process.

    python process_worker.py pause  FOLDER   # run until the pause; save the run state
    python process_worker.py resume FOLDER   # restore the saved state and resume

The chat-surface steps (issue #17) pause on two refunds in one turn:

    python process_worker.py chat-pause  FOLDER  # pause; save the state; print the interrupts
    python process_worker.py chat-answer FOLDER  # apply FOLDER/responses.json as human:carol
    python process_worker.py chat-resume FOLDER  # resume; print each call's result and refusal

The executor appends a line to FOLDER/runs.log each time the tool really runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import Agent, set_tracing_disabled  # noqa: E402

import countersign  # noqa: E402
from countersign_openai_agents import Gate  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from scripted_model import Call, ScriptedModel  # noqa: E402

set_tracing_disabled(True)


def build(folder: Path, turns: "list[list[Call]] | None" = None) -> tuple[Gate, Agent]:
    # COUNTERSIGN_STORE_URL: another store than the SQLite file beside the policy (PostgreSQL).
    control = countersign.Control(
        folder / "countersign.yaml",
        principal="agent:test",
        store_url=os.environ.get("COUNTERSIGN_STORE_URL"),
    )
    gate = Gate(control)

    @gate.tool()
    async def refund(order: str) -> str:
        """Refund an order."""
        with open(folder / "runs.log", "a") as log:
            log.write(f"refund {order} pid={os.getpid()}\n")
        return f"refunded {order}"

    agent = Agent(
        name="assistant",
        model=ScriptedModel(turns or [[Call("refund", {"order": "o1"}, "c1")]]),
        tools=[refund],
    )
    return gate, agent


CHAT_TURNS = [[Call("refund", {"order": "o1"}, "c1"), Call("refund", {"order": "o2"}, "c2")]]


async def chat(step: str, folder: Path) -> None:
    gate, agent = build(folder, CHAT_TURNS)
    saved = folder / "state.json"
    if step == "chat-pause":
        result = await gate.run(agent, "refund o1 and o2")
        saved.write_text(gate.save_state(result))
        print(json.dumps(gate.emit_interrupts(result)))
    elif step == "chat-answer":
        state = await gate.load_state(agent, saved.read_text())
        responses = json.loads((folder / "responses.json").read_text())
        recorded = gate.apply_responses(state, responses, approver="human:carol")
        saved.write_text(gate.save_state(state))
        print(json.dumps({key: record.state for key, record in recorded.items()}))
    else:
        state = await gate.load_state(agent, saved.read_text())
        try:
            result = await gate.run(agent, state)
        except countersign.CountersignError as refusal:
            print(json.dumps({"refused": refusal.reason}))
            return
        outputs = {}
        for item in result.to_input_list():
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                outputs[item["call_id"]] = item["output"]
        refusals = {
            call_id: type(gate.refusal(call_id)).__name__
            for call_id in ("c1", "c2")
            if gate.refusal(call_id) is not None
        }
        print(json.dumps({
            "outputs": outputs,
            "refusals": refusals,
            "pending": len(result.interruptions),
        }))


async def main(step: str, folder: Path) -> None:
    if step.startswith("chat-"):
        await chat(step, folder)
        return
    gate, agent = build(folder)
    if step == "pause":
        result = await gate.run(agent, "refund o1")
        (folder / "state.json").write_text(gate.save_state(result))
        print(json.dumps([call.request.request_id for call in gate.pending(result)]))
    elif step == "resume":
        state = await gate.load_state(agent, (folder / "state.json").read_text())
        try:
            result = await gate.run(agent, state)
        except countersign.CountersignError as refusal:
            print(json.dumps({"refused": refusal.reason}))
            return
        print(json.dumps({"final": result.final_output, "pending": len(result.interruptions)}))
    else:
        raise SystemExit(f"unknown step `{step}`: use pause or resume")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
