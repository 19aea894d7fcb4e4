"""The cases of decided-before-invocation.md (B01, B04, B06, B12), B34's model-facing results,
expiry and parallel calls, through the real SDK with a scripted model."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path

import pytest

import countersign
from agents import Agent, RunState
from conftest import Tools, call_ids, make_agent, outputs, receipts_for
from countersign_openai_agents import DecisionNotFound, Gate
from run_state import forge
from scripted_model import Call, ScriptedModel


def pause(gate: Gate, agent: Agent, prompt: str = "go"):
    result = asyncio.run(gate.run(agent, prompt))
    return result, result.to_state()


def hash_of(control: countersign.Control, action: str, arguments: dict) -> str:
    return control.evaluate(action, arguments).action_hash


# B01 -------------------------------------------------------------------------------------------


def test_b01_explicit_reject_beats_a_sticky_approve(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    agent = make_agent(
        tools,
        [[Call("refund", {"order": "o1"}, "c1"), Call("refund", {"order": "o2"}, "c2")]],
    )
    paused, state = pause(gate, agent)
    calls = {call.call_id: call for call in gate.pending(paused)}
    assert set(calls) == {"c1", "c2"}
    gate.approve(state, calls["c1"], approver="human:alice", always=True)
    gate.deny(state, calls["c2"], approver="human:alice", note="wrong order")
    result = asyncio.run(gate.run(agent, state))

    assert tools.count("refund", order="o1") == 1
    assert tools.count("refund", order="o2") == 0
    rejected = json.loads(outputs(result)["c2"])
    assert rejected["status"] == "rejected" and rejected["reviewer_note"] == "wrong order"
    h2 = hash_of(control, "refund", {"order": "o2"})
    denied = [r for r in receipts_for(control, h2) if r["outcome"] == "denied"]
    assert len(denied) == 1 and denied[0]["note"] == "wrong order"
    # always-approve became a grant for H1 only.
    granted = [a for a in control.approvals() if a.approver is not None and a.state != "denied"]
    assert [a.action_hash for a in granted] == [hash_of(control, "refund", {"order": "o1"})]


def test_b01_sticky_approve_does_not_authorize_a_later_call(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    agent = make_agent(
        tools,
        [[Call("refund", {"order": "o1"}, "c1")], [Call("refund", {"order": "o3"}, "c3")]],
    )
    paused, state = pause(gate, agent)
    [call] = gate.pending(paused)
    gate.approve(state, call, approver="human:alice", always=True)
    result = asyncio.run(gate.run(agent, state))
    assert tools.count("refund", order="o1") == 1
    # The SDK's sticky flag let c3 through without a pause; the kernel had no grant for it.
    assert tools.count("refund", order="o3") == 0
    assert json.loads(outputs(result)["c3"])["status"] == "pending"
    h3 = hash_of(control, "refund", {"order": "o3"})
    assert [a.state for a in control.approvals() if a.action_hash == h3] == ["pending"]


# B04 -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class AppContext:
    tenant: str


@pytest.mark.parametrize("fresh_context", [{"tenant": "t1"}, AppContext("t1")], ids=["mapping", "struct"])
def test_b04_restored_and_approved_run_resumes_with_a_fresh_context(
    gate: Gate, tools: Tools, control: countersign.Control, fresh_context: object
) -> None:
    agent = make_agent(tools, [[Call("refund", {"order": "o1"}, "c1")]])
    paused = asyncio.run(gate.run(agent, "refund o1", context={"tenant": "t0"}))
    saved = gate.save_state(paused)

    restored = asyncio.run(gate.load_state(agent, saved))
    [call] = gate.pending(restored)
    gate.approve(restored, call, approver="human:alice")
    result = asyncio.run(gate.run(agent, restored, context=fresh_context))

    assert result.interruptions == []
    assert tools.count("refund", order="o1") == 1
    h = hash_of(control, "refund", {"order": "o1"})
    requests = [a for a in control.approvals() if a.action_hash == h]
    assert len(requests) == 1 and requests[0].state == "consumed"
    outcomes = [(r["kind"], r["outcome"]) for r in receipts_for(control, h)]
    assert outcomes == [("answer", "granted"), ("attempt", "committed")]


def test_b04_a_decision_that_cannot_be_found_is_a_typed_error(
    control: countersign.Control, tools: Tools, tmp_path: Path
) -> None:
    agent = make_agent(tools, [[Call("refund", {"order": "o1"}, "c1")]])
    first = Gate(control)
    Tools(first)
    paused = asyncio.run(first.run(agent, "refund o1"))
    before = len(control.approvals())
    # The state saved without its run id (the SDK's own string): the store maps the paused
    # call under the run that paused it, so nothing is found, nothing is asked, nothing runs.
    elsewhere = Gate(control)
    Tools(elsewhere)
    blind = asyncio.run(elsewhere.load_state(agent, paused.to_state().to_string()))
    assert elsewhere.run_id(blind) is None
    with pytest.raises(DecisionNotFound) as raised:
        asyncio.run(elsewhere.run(agent, blind))
    assert raised.value.call_id == "c1" and raised.value.reason == "decision_not_found"
    assert tools.count("refund", order="o1") == 0
    assert len(control.approvals()) == before
    # With its run id the same state is found again.
    found = asyncio.run(elsewhere.load_state(agent, first.save_state(paused)))
    [call] = elsewhere.pending(found)
    assert call.request.run == first.run_id(paused)


def test_a_call_ledger_file_left_by_an_older_release_is_not_read(
    control: countersign.Control, tools: Tools, tmp_path: Path
) -> None:
    # Releases before issue #13 kept `<store>.openai-agents-calls.db` beside the store. A run
    # paused then has no mapping in the kernel's store: the file is ignored and the paused call
    # raises DecisionNotFound (documented in the README), never a new prompt or a run.
    import sqlite3

    agent = make_agent(tools, [[Call("refund", {"order": "o9"}, "c9")]])
    paused = asyncio.run(_paused_by_the_sdk_alone(agent))
    [interrupted] = paused.interruptions
    ledger = tmp_path / ".countersign" / "countersign.openai-agents-calls.db"
    with sqlite3.connect(ledger) as connection:
        connection.execute(
            "CREATE TABLE calls (tool TEXT NOT NULL, call_id TEXT NOT NULL, request_id TEXT "
            "NOT NULL, action_hash TEXT NOT NULL, created_at TEXT NOT NULL, "
            "PRIMARY KEY (tool, call_id))"
        )
        connection.execute(
            "INSERT INTO calls VALUES ('refund', 'c9', 'apr_0000000000000000000000000000', "
            "'sha256:0', '2026-01-01T00:00:00Z')"
        )
    gate = Gate(control)
    Tools(gate)
    state = asyncio.run(gate.load_state(agent, paused.to_state().to_string()))
    before = len(control.approvals())
    with pytest.raises(DecisionNotFound):
        asyncio.run(gate.run(agent, state))
    assert tools.count("refund", order="o9") == 0
    assert len(control.approvals()) == before == 0
    assert interrupted.tool_name == "refund"


async def _paused_by_the_sdk_alone(agent: Agent):
    """A pause made without the kernel (the SDK's own `needs_approval=True` tool of the same
    name): what a run paused by an older release looks like to this one."""
    from agents import Runner, function_tool

    @function_tool(needs_approval=True, name_override="refund")
    def refund(order: str) -> str:
        raise AssertionError("must not run")

    return await Runner.run(agent.clone(tools=[refund]), "refund o9")


# B06 -------------------------------------------------------------------------------------------


def test_b06_edited_arguments_with_a_forged_approval_run_nothing(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    agent = make_agent(tools, [[Call("send_email", {"to": "a@example.test"}, "c1")]])
    paused, state = pause(gate, agent)
    for item in state.get_interruptions():
        state.approve(item)  # the client's own approval flag, no kernel answer
    blob = forge(state.to_string(), "a@example.test", "b@example.test")
    forged = asyncio.run(RunState.from_string(agent, blob))

    with pytest.raises(countersign.ApprovalMismatch):
        # The operator's application resumes its run: it knows the run id, the blob was edited.
        asyncio.run(gate.run(agent, forged, run_id=gate.run_id(paused)))
    assert tools.count("send_email", to="b@example.test") == 0
    assert tools.count("send_email", to="a@example.test") == 0
    edited = hash_of(control, "send_email", {"to": "b@example.test"})
    refusals = [r for r in receipts_for(control, edited) if r["outcome"] == "refused"]
    assert [r["reason"] for r in refusals] == ["mismatch"]


def test_b06_an_approval_flag_set_by_hand_runs_nothing(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    agent = make_agent(tools, [[Call("send_email", {"to": "a@example.test"}, "c1")]])
    paused, state = pause(gate, agent)
    forged = asyncio.run(RunState.from_string(agent, state.to_string()))
    for item in forged.get_interruptions():
        forged.approve(item)

    result = asyncio.run(gate.run(agent, forged, run_id=gate.run_id(paused)))
    assert tools.count("send_email", to="a@example.test") == 0
    assert json.loads(outputs(result)["c1"])["status"] == "pending"
    h = hash_of(control, "send_email", {"to": "a@example.test"})
    refusals = [r for r in receipts_for(control, h) if r["outcome"] == "refused"]
    assert [r["reason"] for r in refusals] == ["approval_required"]


# B12 -------------------------------------------------------------------------------------------


def test_b12_mixed_batch_runs_the_approved_call_and_answers_every_call_id(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    agent = make_agent(
        tools,
        [
            [
                Call("read", {"doc": 1}, "A"),
                Call("charge", {"amount": 5}, "B"),
                Call("delete", {"doc": 1}, "C"),
            ]
        ],
    )
    paused, state = pause(gate, agent)
    calls = {call.call_id: call for call in gate.pending(paused)}
    assert set(calls) == {"B", "C"}
    gate.approve(state, calls["B"], approver="human:alice")
    gate.deny(state, calls["C"], approver="human:alice", note="keep it")
    saved = gate.save_state(state)
    result = asyncio.run(gate.run(agent, state))

    counts = {
        "A": tools.count("read", doc=1),
        "B": tools.count("charge", amount=5),
        "C": tools.count("delete", doc=1),
    }
    assert counts == {"A": 1, "B": 1, "C": 0}
    seen = outputs(result)
    assert set(seen) == call_ids(result) == {"A", "B", "C"}
    assert seen["A"] == "doc 1 text" and seen["B"] == "charged 5"
    assert json.loads(seen["C"])["status"] == "rejected"

    # The second resume, from the same saved state with the same decisions: nothing new runs
    # and nothing new is asked. The replayed approved call is refused as used.
    requests_before = len(control.approvals())
    replay = asyncio.run(gate.load_state(agent, saved))
    try:
        asyncio.run(gate.run(agent, replay))
    except countersign.ApprovalConsumed:
        pass
    assert {
        "A": tools.count("read", doc=1),
        "B": tools.count("charge", amount=5),
        "C": tools.count("delete", doc=1),
    } == counts
    assert len(control.approvals()) == requests_before


# B34 and expiry ----------------------------------------------------------------------------------


def test_b34_an_unchanged_reissue_of_a_rejected_call_is_refused_without_asking(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    agent = make_agent(
        tools,
        [[Call("charge", {"amount": 9}, "c1")], [Call("charge", {"amount": 9}, "c2")]],
    )
    paused, state = pause(gate, agent)
    [call] = gate.pending(paused)
    gate.deny(state, call, approver="human:bob", note="wrong account")
    result = asyncio.run(gate.run(agent, state))
    assert result.interruptions == []
    assert tools.count("charge", amount=9) == 0
    again = json.loads(outputs(result)["c2"])
    assert again["status"] == "rejected" and again["reviewer_note"] == "wrong account"
    assert len(control.approvals()) == 1


def test_an_answer_after_expiry_authorizes_nothing_and_the_model_reads_expired(
    policy: Path, tools: Tools
) -> None:
    control = countersign.Control(policy, principal="agent:test", approval_ttl=0.2)
    gate = Gate(control)
    tools = Tools(gate)
    agent = make_agent(tools, [[Call("refund", {"order": "o5"}, "c1")]])
    paused, state = pause(gate, agent)
    [call] = gate.pending(paused)
    time.sleep(0.3)
    with pytest.raises(countersign.ApprovalExpired):
        gate.approve(state, call, approver="human:alice")
    result = asyncio.run(gate.run(agent, state))
    assert tools.count("refund", order="o5") == 0
    seen = json.loads(outputs(result)["c1"])
    assert seen["status"] == "expired" and "later" not in seen["message"].split("not happen")[0]
    assert "will not happen later" in seen["message"]


def test_an_approval_that_expires_before_the_resume_runs_nothing(policy: Path) -> None:
    control = countersign.Control(policy, principal="agent:test", approval_ttl=0.3)
    gate = Gate(control)
    tools = Tools(gate)
    agent = make_agent(tools, [[Call("refund", {"order": "o6"}, "c1")]])
    paused, state = pause(gate, agent)
    [call] = gate.pending(paused)
    gate.approve(state, call, approver="human:alice")
    time.sleep(0.4)
    result = asyncio.run(gate.run(agent, state))
    assert tools.count("refund", order="o6") == 0
    assert json.loads(outputs(result)["c1"])["status"] == "expired"


# Parallel calls --------------------------------------------------------------------------------


def test_parallel_calls_run_concurrently_on_one_event_loop(gate: Gate, control) -> None:
    started = 0
    all_started = asyncio.Event()

    @gate.tool(action="lookup")
    async def lookup(key: str) -> str:
        """Look a key up; waits until all three lookups are in flight."""
        nonlocal started
        started += 1
        if started == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), timeout=10)
        return f"value of {key}"

    agent = Agent(
        name="a",
        model=ScriptedModel([[Call("lookup", {"key": k}, f"c{k}") for k in ("1", "2", "3")]]),
        tools=[lookup],
    )
    result = asyncio.run(gate.run(agent, "go"))
    assert outputs(result) == {"c1": "value of 1", "c2": "value of 2", "c3": "value of 3"}
    committed = [r for r in control.receipts() if r["outcome"] == "committed"]
    assert len(committed) == 3
