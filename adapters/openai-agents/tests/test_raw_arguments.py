"""Case B52 (and B51) through the real SDK: the adapter hands the kernel the model's raw
``arguments`` text, so a key written twice is refused by the kernel's strict reader, never
resolved the way ``json.loads`` resolves it (the last one wins)."""

from __future__ import annotations

import asyncio

import pytest

import countersign
from conftest import Tools, make_agent
from countersign_openai_agents import Gate
from scripted_model import Call


@pytest.mark.parametrize(
    "raw",
    [
        '{"doc":1,"doc":1000}',
        '{"doc":1,"\\u0064oc":2}',
    ],
)
def test_a_key_written_twice_is_refused_and_nothing_runs(
    gate: Gate, tools: Tools, control: countersign.Control, raw: str
) -> None:
    agent = make_agent(tools, [[Call("read", raw, "c1")]])
    with pytest.raises(countersign.InvalidArguments) as raised:
        asyncio.run(gate.run(agent, "read"))
    assert raised.value.canonical_reason == "duplicate_key"
    assert raised.value.did_run == "no"
    assert sum(tools.runs.values()) == 0
    assert control.approvals() == []


def test_a_nested_duplicate_is_refused_too(
    gate: Gate, tools: Tools, control: countersign.Control
) -> None:
    agent = make_agent(tools, [[Call("read", '{"doc":{"k":1,"k":2}}', "c1")]])
    with pytest.raises(countersign.InvalidArguments) as raised:
        asyncio.run(gate.run(agent, "read"))
    assert raised.value.canonical_reason == "duplicate_key"
    assert sum(tools.runs.values()) == 0
    assert control.approvals() == []


def test_the_same_call_written_once_runs(gate: Gate, tools: Tools) -> None:
    agent = make_agent(tools, [[Call("read", '{"doc":1000}', "c1")]])
    result = asyncio.run(gate.run(agent, "read"))
    assert result.interruptions == []
    assert tools.count("read", doc=1000) == 1


def test_raw_text_with_a_lone_surrogate_fails_locally_never_replaced(
    control: countersign.Control,
) -> None:
    # B51: a Python str can hold a lone surrogate that UTF-8 cannot; it is refused here with a
    # typed error, never turned into U+FFFD or `?`.
    with pytest.raises(countersign.InvalidArguments) as raised:
        countersign.RawArguments('{"doc":"\ud800"}')
    assert raised.value.canonical_reason == "lone_surrogate"
    # The escaped form reaches the kernel, which refuses it the same way.
    with pytest.raises(countersign.InvalidArguments) as escaped:
        control.evaluate("read", countersign.RawArguments('{"doc":"\\ud800"}'))
    assert escaped.value.canonical_reason == "lone_surrogate"
