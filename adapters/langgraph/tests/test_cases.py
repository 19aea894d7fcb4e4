"""The cases in shared/cases/resumed-in-place.md (B07-B11) and those in approvals-and-surfaces.md
that name langgraph (B35, B38, B39, B41, B42), as tests against real LangGraph. B07, B38 and
B41 are in test_agent.py (two pauses in one step; anything but the closed answer; stale and
unknown resumes); the rest are here."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

import countersign
from countersign_langgraph import (
    Approver,
    Gate,
    LangGraphInterrupt,
    NoApprovalChannel,
    NoApprovalChannelWarning,
    create_agent,
)
from countersign_langgraph import _INTERRUPT_TAKES_SCHEMA as NEWER_LANGGRAPH
from conftest import Tools, make_agent, make_control, tool_messages, write_policy
from scripted_model import ScriptedChatModel, call

ALICE = Approver(name="human:alice")
ROOT = Approver(name="human:root")


def config(thread: str = "t-1") -> dict:
    return {"configurable": {"thread_id": thread}}


def answer(gate, graph, decisions, thread: str = "t-1", approver=ALICE):
    resume = gate.resume(graph, config(thread), decisions, approver=approver)
    return graph.invoke(resume.command, config(thread), context=resume.context)


def answer_the_pause(gate, graph, decision: str, thread: str = "t-1", approver=ALICE):
    (pause,) = gate.pending(graph, config(thread))
    return pause, answer(gate, graph, {pause.interrupt_id: decision}, thread, approver)


def one_node_graph(node) -> object:
    builder = StateGraph(MessagesState)
    builder.add_node("work", node)
    builder.add_edge(START, "work")
    builder.add_edge("work", END)
    return builder.compile(checkpointer=InMemorySaver())


def already_done(run):
    """A node's replay: an effect the kernel says is already committed is not done again."""
    try:
        return run()
    except countersign.DuplicateEffect:
        return None


def test_b08_a_step_with_two_pauses_runs_each_effect_once(gate: Gate) -> None:
    counts: Counter[str] = Counter()

    def executor(name):
        def run(arguments: dict) -> str:
            counts[name] += 1
            return name
        return run

    def node(state: MessagesState) -> dict:
        already_done(lambda: gate.call("log_ticket", {"id": 7}, executor("log_ticket"), call_id="log"))
        already_done(lambda: gate.call("refund", {"order": "7"}, executor("refund"), call_id="refund"))
        gate.call("notify", {"id": 7}, executor("notify"), call_id="notify")
        return {"messages": [{"role": "assistant", "content": "done"}]}

    graph = one_node_graph(node)
    graph.invoke({"messages": [{"role": "user", "content": "go"}]}, config())
    first, _ = answer_the_pause(gate, graph, "approve")
    assert first.action == "refund"
    second, result = answer_the_pause(gate, graph, "approve")
    assert second.action == "notify"
    assert "__interrupt__" not in result
    assert counts == {"log_ticket": 1, "refund": 1, "notify": 1}
    requests = gate.control.approvals()
    assert len(requests) == 2 and {r.state for r in requests} == {"consumed"}
    assert len({r.action_hash for r in requests}) == 2          # no hash prompted twice
    # The replays of step (1) reached the kernel and were refused before the executor.
    refused = [r for r in gate.control.receipts() if r["action"] == "log_ticket" and r["outcome"] == "refused"]
    assert [r["reason"] for r in refused] == ["duplicate", "duplicate"]


def test_b09_a_pause_in_a_loop_multiplies_nothing(gate: Gate) -> None:
    """A denial stands for its action until it expires (SPEC.md 1.6), so each round asks about
    its own attempt (`close_ticket{ticket, attempt}`): the identical call would be refused
    without a new prompt."""
    counts: Counter[str] = Counter()

    def count(name):
        def run(arguments: dict) -> str:
            counts[name] += 1
            return name
        return run

    def node(state: MessagesState) -> dict:
        for round_ in (1, 2, 3):
            already_done(lambda: gate.call(
                "send_reminder", {"ticket": 9, "round": round_}, count("send_reminder"), call_id=f"rem-{round_}"
            ))
            try:
                gate.call("close_ticket", {"ticket": 9, "attempt": round_}, count("close_ticket"), call_id=f"close-{round_}")
            except countersign.ApprovalDenied:
                continue
            return {"messages": [{"role": "assistant", "content": f"closed on round {round_}"}]}
        return {"messages": [{"role": "assistant", "content": "not closed"}]}

    graph = one_node_graph(node)
    graph.invoke({"messages": [{"role": "user", "content": "go"}]}, config())
    pauses = []
    for decision in ("deny", "deny", "approve"):
        pause, result = answer_the_pause(gate, graph, decision)
        pauses.append(pause)
    assert result["messages"][-1].content == "closed on round 3"
    assert counts == {"send_reminder": 3, "close_ticket": 1}
    assert len({p.request_id for p in pauses}) == 3
    if NEWER_LANGGRAPH:
        # langgraph >= 1.1 gives each pause of a task its own id; older releases give every
        # pause of one task the task's id (README, "Where LangGraph shows through").
        assert len({p.interrupt_id for p in pauses}) == 3
    states = Counter(r.state for r in gate.control.approvals())
    assert states == {"denied": 2, "consumed": 1}


def test_b10_a_rejected_call_pushed_straight_to_the_tools_still_does_not_run(gate: Gate, tools: Tools) -> None:
    agent = make_agent(gate, tools, [[call("drop_table", {"name": "users"}, "c1")], "done"])
    agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config())
    _, result = answer_the_pause(gate, agent, "deny")
    assert json.loads(tool_messages(result)["c1"].content)["reason"] == "approval_denied"
    # A harness pushes the same call into the tool-execution path, skipping the model's turn
    # and the adapter's message handling: a plain graph whose only node is the gated ToolNode.
    builder = StateGraph(MessagesState)
    builder.add_node("tools", gate.tool_node(tools.all))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    bypass = builder.compile(checkpointer=InMemorySaver())
    pushed = bypass.invoke({"messages": [AIMessage(content="", tool_calls=[call("drop_table", {"name": "users"}, "c9")])]}, config("bypass"))
    assert json.loads(pushed["messages"][-1].content)["reason"] == "approval_denied"
    assert tools.count("drop_table", name="users") == 0
    trail = [(r["kind"], r["outcome"], r["reason"]) for r in gate.control.receipts()]
    assert trail == [
        ("answer", "denied", "rejected"),
        ("attempt", "refused", "approval_denied"),
        ("attempt", "refused", "approval_denied"),
    ]


def edit_link(gate: Gate, original) -> str:
    """The note of the original request's denial: the evidence that links the two hashes."""
    [denial] = [
        r for r in gate.control.receipts()
        if r["kind"] == "answer" and r.get("approval_id") == original.request_id
    ]
    assert (denial["outcome"], denial["approver"], denial["channel"]) == (
        "denied", "human:alice", "interrupt:langgraph"
    )
    assert denial["action_hash"] == original.action_hash
    return denial["note"]


def test_b11_an_edit_that_changes_the_tool_needs_the_targets_own_approval(gate: Gate, tools: Tools) -> None:
    agent = make_agent(gate, tools, [[call("read_file", {"path": "/a"}, "c1")], "done"])
    agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config())
    (original,) = gate.pending(agent, config())
    # (a) The reviewer turns the paused call into delete_file{/a}: a new action, decided from
    # scratch under delete_file's own rule; the original is denied with the link.
    new_id = gate.edit(agent, config(), original.interrupt_id, tool="delete_file", arguments={"path": "/a"}, approver=ALICE)
    agent.invoke(None, config())
    (edited,) = gate.pending(agent, config())
    assert edited.action == "delete_file" and edited.action_hash != original.action_hash
    assert edited.tool_call_id == new_id
    assert edited.payload["approvers"] == "group:admin"
    assert tools.count("delete_file", path="/a") == 0
    assert f"edited into `delete_file` {edited.action_hash} (tool call {new_id})" in edit_link(gate, original)
    # The read_file request authorizes nothing here, and alice is not an admin.
    assert gate.control.approval(original.request_id).state == "denied"
    with pytest.raises(countersign.AnswerRefused) as refused:
        answer(gate, agent, {edited.interrupt_id: "approve"})
    assert refused.value.reason == "not_entitled"
    assert tools.count("delete_file", path="/a") == 0
    answer(gate, agent, {gate.pending(agent, config())[0].interrupt_id: "approve"}, approver=ROOT)
    assert tools.count("delete_file", path="/a") == 1 and tools.count("read_file", path="/a") == 0
    requests = {r.action: r for r in gate.control.approvals()}
    assert requests["read_file"].run == requests["delete_file"].run == "t-1"
    assert requests["read_file"].state == "denied" and requests["delete_file"].state == "consumed"


def test_b11_an_edit_into_a_denied_tool_is_refused(gate: Gate, tools: Tools) -> None:
    agent = make_agent(gate, tools, [[call("read_file", {"path": "/a"}, "c1")], "done"])
    agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config())
    (original,) = gate.pending(agent, config())
    gate.edit(agent, config(), original.interrupt_id, tool="wire", arguments={"amount": 5}, approver=ALICE)
    with pytest.raises(countersign.ActionDenied):
        agent.invoke(None, config())
    assert tools.count("wire", amount=5) == 0 and tools.count("read_file", path="/a") == 0
    assert "edited into `wire`" in edit_link(gate, original)


def test_b11_b_an_edit_of_the_arguments_is_bound_to_the_edited_hash(gate: Gate, tools: Tools) -> None:
    agent = make_agent(gate, tools, [[call("read_file", {"path": "/a"}, "c1")], "done"])
    agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config())
    (original,) = gate.pending(agent, config())
    gate.edit(agent, config(), original.interrupt_id, arguments={"path": "/b"}, approver=ALICE)
    agent.invoke(None, config())
    (edited,) = gate.pending(agent, config())
    assert edited.arguments == {"path": "/b"} and edited.request_id != original.request_id
    assert edited.action_hash in edit_link(gate, original)
    answer(gate, agent, {edited.interrupt_id: "approve"})
    assert tools.count("read_file", path="/b") == 1 and tools.count("read_file", path="/a") == 0
    assert gate.control.approval(edited.request_id).state == "consumed"
    assert gate.control.approval(original.request_id).state == "denied"
    # The original approval cannot authorize the edited hash, nor the original call again.
    with pytest.raises(countersign.ApprovalError):
        gate.control.execute("read_file", {"path": "/b"}, lambda _: None, approval=original.request_id, run="t-1")
    assert tools.count("read_file", path="/b") == 1


def test_b35_an_injected_call_under_the_same_id_runs_nothing(gate: Gate, tools: Tools) -> None:
    """A second pending call with the same tool call id and other arguments is appended to the
    run state before the human answers; the human approves the call they were shown."""
    agent = make_agent(gate, tools, [[call("transfer", {"to": "acct-1", "amount": 100}, "C")], "done"])
    agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config())
    (pause,) = gate.pending(agent, config())
    ai = agent.get_state(config()).values["messages"][-1]
    injected = ai.model_copy(update={"tool_calls": [
        call("transfer", {"to": "acct-1", "amount": 100}, "C"),
        call("transfer", {"to": "acct-9", "amount": 999}, "C"),
    ]})
    agent.update_state(config(), {"messages": [injected]}, as_node="model")
    agent.invoke(None, config())
    with pytest.raises(countersign.ApprovalMismatch):
        answer(gate, agent, {p.interrupt_id: "approve" for p in gate.pending(agent, config()) if p.request_id == pause.request_id})
    assert tools.count("transfer", to="acct-9", amount=999) == 0
    # LangGraph runs the two calls as parallel tasks, so the injected call meets the request in
    # whichever state the shown call has left it: still pending or already used (the store
    # refuses a second mapping of the call id, "duplicate correlation"), or granted and not yet
    # used (the injected call presents that grant for other arguments). Both refusals are
    # `mismatch`, recorded against the injected arguments and the one request; no other
    # receipt names those arguments.
    injected = [r for r in gate.control.receipts() if r["arguments"] == {"to": "acct-9", "amount": 999}]
    assert [(r["outcome"], r["reason"], r["approval_id"]) for r in injected] == [
        ("refused", "mismatch", pause.request_id)
    ], injected


def test_b39_no_approval_channel_parks_the_call_and_an_allowed_one_still_runs(tmp_path: Path, tools: Tools) -> None:
    """The kernel decides "approval required" from policy alone: a control built without an
    interrupt (headless), with a `read` in the same turn. The gate says so at startup, in its
    status and in every pause it raises."""
    control = countersign.Control(write_policy(tmp_path), principal="agent:test")   # no channel
    with pytest.warns(NoApprovalChannelWarning, match="no approval channel"):
        gate = Gate(control, LangGraphInterrupt())
    status = gate.status()
    assert (status["run_mode"], status["approval_channel"]) == ("headless", None)
    assert [line.split(":")[0] for line in status["warnings"]] == ["no approval channel"]
    agent = make_agent(gate, tools, [[call("read", {"doc": 1}, "r1"), call("shell_exec", {"cmd": "ls"}, "s1")], "done"])
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config())
    assert tools.count("read", doc=1) == 1
    assert tools.count("shell_exec", cmd="ls") == 0
    assert "__interrupt__" in result
    (request,) = control.approvals()
    assert request.state == "pending" and request.action == "shell_exec"
    (pause,) = gate.pending(agent, config())
    assert pause.payload["run_mode"] == "headless" and pause.payload["approval_channel"] is None
    assert pause.payload["waiting_reason"].startswith("no approval channel")
    # An answer through the graph cannot be recorded without the operator's channel: refused
    # before anything is sent, and the call stays parked until answered out of band.
    with pytest.raises(NoApprovalChannel) as refused:
        gate.resume(agent, config(), {pause.interrupt_id: "approve"}, approver=ALICE)
    assert refused.value.reason == "no_approval_channel"
    agent.invoke(None, config())
    assert tools.count("shell_exec", cmd="ls") == 0 and control.approvals()[0].state == "pending"
    control.approve(request.request_id, approver="human:alice")
    agent.invoke(None, config())
    assert tools.count("shell_exec", cmd="ls") == 1


def test_b39_a_sub_agent_spawned_from_a_headless_run_parks_the_call_too(tmp_path: Path, tools: Tools) -> None:
    """Variant (3): the headless run spawns a sub-agent (a `create_agent` invoked inside a node
    of the parent graph) on the same kernel. Policy alone decides: the call is parked."""
    control = countersign.Control(write_policy(tmp_path), principal="agent:test")   # no channel
    with pytest.warns(NoApprovalChannelWarning):
        gate = Gate(control, LangGraphInterrupt())
    child = create_agent(
        ScriptedChatModel(turns=[[call("shell_exec", {"cmd": "ls"}, "s1")], "done"]), tools.all, gate=gate
    )

    def spawn(state: MessagesState) -> dict:
        done = child.invoke({"messages": [{"role": "user", "content": "run ls"}]})
        return {"messages": [done["messages"][-1]]}

    builder = StateGraph(MessagesState)
    builder.add_node("spawn", spawn)
    builder.add_edge(START, "spawn")
    builder.add_edge("spawn", END)
    parent = builder.compile(checkpointer=InMemorySaver())
    result = parent.invoke({"messages": [{"role": "user", "content": "go"}]}, config("headless"))
    assert "__interrupt__" in result
    assert tools.count("shell_exec", cmd="ls") == 0
    (request,) = control.approvals()
    assert (request.state, request.action) == ("pending", "shell_exec")
    control.approve(request.request_id, approver="human:alice")
    parent.invoke(None, config("headless"))
    assert tools.count("shell_exec", cmd="ls") == 1


def test_b39_a_kernel_with_a_channel_reports_the_interrupt_run_mode(gate: Gate) -> None:
    assert gate.status() == {
        "framework": "langgraph",
        "run_mode": "interrupt",
        "approval_channel": "interrupt:langgraph",
        "policy_mode": "enforce",
        "warnings": [],
    }


def test_b42_an_approval_never_leaks_to_another_thread(gate: Gate, tools: Tools) -> None:
    """Two threads ask for the identical refund, with the same provider call id; thread 1's
    approval runs only thread 1's call."""
    agents = {t: make_agent(gate, tools, [[call("refund", {"order": "o1"}, "call_1")], "done"]) for t in ("r1", "r2")}
    agents["r1"].invoke({"messages": [{"role": "user", "content": "go"}]}, config("r1"))
    (p1,) = gate.pending(agents["r1"], config("r1"))
    gate.control.approve(p1.request_id, approver="human:alice")
    result = agents["r2"].invoke({"messages": [{"role": "user", "content": "go"}]}, config("r2"))
    (p2,) = gate.pending(agents["r2"], config("r2"))
    assert "__interrupt__" in result and p2.request_id != p1.request_id
    assert tools.count("refund", order="o1") == 0
    agents["r1"].invoke(None, config("r1"))
    assert tools.count("refund", order="o1") == 1
    states = {r.request_id: (r.state, r.run) for r in gate.control.approvals()}
    assert states == {p1.request_id: ("consumed", "r1"), p2.request_id: ("pending", "r2")}
