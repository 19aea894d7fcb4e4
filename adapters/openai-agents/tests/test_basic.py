"""Allow, approve, reject through the real SDK with a scripted model."""

from __future__ import annotations

import asyncio
import json

import pytest

import countersign
from conftest import Tools, make_agent, outputs, receipts_for
from countersign_openai_agents import Gate
from scripted_model import Call


def test_allowed_call_runs_once_without_pausing(gate: Gate, tools: Tools) -> None:
    agent = make_agent(tools, [[Call("read", {"doc": 1}, "c1")]])
    result = asyncio.run(gate.run(agent, "read doc 1"))
    assert result.interruptions == []
    assert tools.count("read", doc=1) == 1
    assert outputs(result)["c1"] == "doc 1 text"


def test_approved_call_runs_once_with_the_approver_recorded(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    agent = make_agent(tools, [[Call("refund", {"order": "o1"}, "c1")]])
    paused = asyncio.run(gate.run(agent, "refund o1"))
    assert tools.count("refund", order="o1") == 0
    [call] = gate.pending(paused)
    assert call.request.state == "pending"
    assert call.request.arguments == {"order": "o1"}
    state = paused.to_state()
    gate.approve(state, call, approver="human:alice", note="ok")
    result = asyncio.run(gate.run(agent, state))
    assert tools.count("refund", order="o1") == 1
    assert outputs(result)["c1"] == "refunded o1"
    record = control.approval(call.request.request_id)
    assert record is not None and record.state == "consumed"
    assert record.approver == "human:alice"
    kinds = [(r["kind"], r["outcome"]) for r in receipts_for(control, record.action_hash)]
    assert ("answer", "granted") in kinds and ("attempt", "committed") in kinds
    assert control.verify_receipts()["first_break"] is None


def test_rejected_call_does_not_run_and_the_model_reads_a_rejection(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    agent = make_agent(tools, [[Call("delete", {"doc": 7}, "c1")]])
    paused = asyncio.run(gate.run(agent, "delete doc 7"))
    [call] = gate.pending(paused)
    state = paused.to_state()
    gate.deny(state, call, approver="human:bob", note="wrong account")
    result = asyncio.run(gate.run(agent, state))
    assert tools.count("delete", doc=7) == 0
    seen = json.loads(outputs(result)["c1"])
    assert seen["status"] == "rejected"
    assert seen["executed"] is False
    assert "was not executed" in seen["message"]
    assert seen["reviewer_note"] == "wrong account"
    assert "wrong account" not in seen["message"]
    record = control.approval(call.request.request_id)
    assert record is not None and record.state == "denied" and record.approver == "human:bob"


def test_denied_action_reaches_the_caller_as_itself(gate: Gate, tools: Tools) -> None:
    agent = make_agent(tools, [[Call("wire", {"amount": 5}, "c1")]])
    with pytest.raises(countersign.ActionDenied) as raised:
        asyncio.run(gate.run(agent, "wire 5"))
    assert raised.value.did_run == "no" and raised.value.may_retry is False
    assert tools.count("wire", amount=5) == 0


def test_executor_failure_is_an_unknown_outcome_with_its_cause(
    gate: Gate, control: countersign.Control
) -> None:
    @gate.tool(action="refund")
    async def flaky_refund(order: str) -> str:
        """Refund that times out upstream."""
        raise TimeoutError("upstream timed out")

    from agents import Agent
    from scripted_model import ScriptedModel

    agent = Agent(
        name="a",
        model=ScriptedModel([[Call("flaky_refund", {"order": "o9"}, "c1")]]),
        tools=[flaky_refund],
    )
    paused = asyncio.run(gate.run(agent, "go"))
    state = paused.to_state()
    [call] = gate.pending(paused)
    gate.approve(state, call, approver="human:alice")
    with pytest.raises(countersign.OutcomeUnknown) as raised:
        asyncio.run(gate.run(agent, state))
    assert raised.value.did_run == "maybe"
    assert isinstance(raised.value.__cause__, TimeoutError)
    assert control.effect("refund:o9")["state"] == "ambiguous"


def test_observe_mode_never_pauses(tmp_path) -> None:
    from conftest import write_policy

    control = countersign.Control(write_policy(tmp_path, mode="observe"), principal="agent:test")
    gate = Gate(control)
    tools = Tools(gate)
    agent = make_agent(tools, [[Call("refund", {"order": "o1"}, "c1")]])
    result = asyncio.run(gate.run(agent, "refund"))
    assert result.interruptions == []
    assert tools.count("refund", order="o1") == 1
    assert [r["outcome"] for r in control.receipts()] == ["observed"]



def test_reject_is_a_deprecated_alias_of_deny(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    """Issue #19: a human's no is ``deny`` in every API; ``Gate.reject`` still records it for
    one release, with a DeprecationWarning."""
    agent = make_agent(tools, [[Call("delete", {"doc": 8}, "c1")]])
    paused = asyncio.run(gate.run(agent, "delete doc 8"))
    [call] = gate.pending(paused)
    state = paused.to_state()
    with pytest.warns(DeprecationWarning, match="Gate.deny"):
        record = gate.reject(state, call, approver="human:bob", note="old name")
    assert record.state == "denied"
    result = asyncio.run(gate.run(agent, state))
    assert tools.count("delete", doc=8) == 0
    assert json.loads(outputs(result)["c1"])["status"] == "rejected"
