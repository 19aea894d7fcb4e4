"""A plain LangGraph graph (no LangChain agent): a model node, the gated ToolNode routed with
one `Send` per tool call, and the same pauses, resumes and refusals as the middleware."""

from __future__ import annotations

import json

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from countersign_langgraph import Approver, Gate
from conftest import Tools
from scripted_model import ScriptedChatModel, call

ALICE = Approver(name="human:alice")
CONFIG = {"configurable": {"thread_id": "g-1"}}


def graph(gate: Gate, tools: Tools, turns: list):
    model = ScriptedChatModel(turns=turns)

    def agent(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", gate.tool_node(tools.all))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", gate.send_tool_calls, ["tools", "__end__"])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


def test_a_plain_graph_pauses_per_call_and_runs_what_was_approved(gate: Gate, tools: Tools) -> None:
    app = graph(gate, tools, [[call("read", {"doc": 3}, "r"), call("delete", {"id": 1}, "h1"), call("delete", {"id": 2}, "h2")], "done"])
    result = app.invoke({"messages": [{"role": "user", "content": "go"}]}, CONFIG)
    assert tools.count("read", doc=3) == 1        # allowed: ran, no human
    pauses = gate.pending(app, CONFIG)
    assert len(pauses) == 2 == len(result["__interrupt__"])
    assert len({p.interrupt_id for p in pauses}) == 2
    by_call = {p.tool_call_id: p for p in pauses}
    resume = gate.resume(app, CONFIG, {by_call["h2"].interrupt_id: "deny", by_call["h1"].interrupt_id: "approve"}, approver=ALICE)
    result = app.invoke(resume.command, CONFIG, context=resume.context)
    assert tools.count("delete", id=1) == 1 and tools.count("delete", id=2) == 0
    assert tools.count("read", doc=3) == 1        # not run again by the resume
    messages = {m.tool_call_id: m for m in result["messages"] if m.type == "tool"}
    assert messages["h1"].content == "deleted 1"
    assert json.loads(messages["h2"].content)["status"] == "denied" and messages["h2"].status == "error"
    assert result["messages"][-1].content == "done"
