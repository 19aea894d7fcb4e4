"""A support agent whose refunds are countersigned: the OpenAI Agents SDK + Countersign.

    python main.py                 # scripted model: offline, no API key
    python main.py --wait          # you answer from another shell with `countersign approve`
    OPENAI_API_KEY=sk-... python main.py   # a real model

The run pauses on the large refund (policy says `approve`), a human answers (the script answers
for "human:alice"; with --wait it waits up to 10 minutes for your `countersign approve <id>` or
`countersign deny <id>` from another shell), and the resumed run refunds exactly what was
approved, once. The receipt chain is verified at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from agents import Agent, set_tracing_disabled

import countersign
from countersign_openai_agents import Gate

HERE = Path(__file__).parent


def scripted_model():
    """The offline model: the SDK's `Model` interface answering from a script."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    class Scripted(Model):
        async def get_response(self, *args, **kwargs):
            given = kwargs.get("input", args[1] if len(args) > 1 else [])
            items = [] if isinstance(given, str) else list(given)
            done = {i.get("call_id"): i.get("output") for i in items
                    if isinstance(i, dict) and i.get("type") == "function_call_output"}
            if not done:
                calls = [("lookup_order", {"order_id": "o-7"}, "call_1"),
                         ("refund_order", {"order_id": "o-7", "amount": 25000}, "call_2")]
                return ModelResponse(output=[
                    ResponseFunctionToolCall(id=f"fc_{cid}", call_id=cid, name=name,
                                             arguments=json.dumps(args), type="function_call",
                                             status="completed")
                    for name, args, cid in calls], usage=Usage(), response_id=None)
            text = f"Done. Tool results: {json.dumps(done)}"
            return ModelResponse(output=[ResponseOutputMessage(
                id="msg_1", role="assistant", status="completed", type="message",
                content=[ResponseOutputText(text=text, type="output_text", annotations=[])])],
                usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    return Scripted()


WAIT = "--wait" in sys.argv[1:]


async def wait_for_answer(control: countersign.Control, request_id: str) -> None:
    """Poll the kernel until someone answers `request_id` (or it expires), up to 10 minutes."""
    for _ in range(600):
        record = control.approval(request_id)
        if record is not None and record.state != "pending":
            print(f"  answered: {record.state} by {record.approver}")
            return
        await asyncio.sleep(1)
    print("  nobody answered in 10 minutes; the call stays pending")


async def main() -> None:
    # The operator's part: the policy, the store (a fresh SQLite file here) and the principal.
    workdir = Path(tempfile.mkdtemp(prefix="countersign-example-"))
    policy = workdir / "countersign.yaml"
    policy.write_text((HERE / "countersign.yaml").read_text())
    control = countersign.Control(policy, principal="agent:support-bot")
    gate = Gate(control)

    @gate.tool()
    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        return json.dumps({"order_id": order_id, "total": 25000, "status": "delivered"})

    @gate.tool()
    def refund_order(order_id: str, amount: int) -> str:
        """Refund an order (amount in cents)."""
        print(f"  >>> refund_order ran: {order_id} {amount}")
        return f"refunded {amount} cents on {order_id}"

    if os.environ.get("OPENAI_API_KEY"):
        model = os.environ.get("OPENAI_MODEL", "gpt-4.1-mini")
        print(f"using the real model {model}")
    else:
        model = scripted_model()
        set_tracing_disabled(True)  # nothing to export traces to without a key
        print("using the scripted model (set OPENAI_API_KEY to use a real one)")
    agent = Agent(name="support", instructions="Refund order o-7 in full (25000 cents).",
                  model=model, tools=[lookup_order, refund_order])

    result = await gate.run(agent, "Please refund order o-7 in full.")
    while result.interruptions:
        saved = gate.save_state(result)                 # keep it server-side, with its run id
        state = await gate.load_state(agent, saved)     # RunState.from_string inside
        for call in gate.pending(state):
            print(f"paused: {call.tool} {call.request.arguments} -> {call.request.request_id}")
            command = (
                f"countersign --policy {policy} approve {call.request.request_id} "
                "--as human:<you>"
            )
            if WAIT:
                print(f"  waiting for your answer; from another shell run:\n    {command}")
                await wait_for_answer(control, call.request.request_id)
            else:
                print(f"  (with --wait you would answer it yourself: {command})")
                gate.approve(state, call, approver="human:alice", note="customer verified")
        # Gate.run applies answers recorded elsewhere (the CLI) before resuming.
        result = await gate.run(agent, state)

    print("final:", result.final_output)
    report = control.verify_receipts()
    print(f"receipts: {report['checked']} checked, chain intact: {report['first_break'] is None}")
    for receipt in control.receipts():
        print(f"  {receipt['seq']:>2} {receipt['kind']:<8} {receipt['outcome']:<10} "
              f"{receipt.get('action') or '':<14} {receipt.get('reason') or ''}")


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
