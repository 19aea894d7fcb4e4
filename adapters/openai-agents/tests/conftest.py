"""Shared fixtures: a policy on disk, a kernel Control on a fresh SQLite store, the gate, and
executors that count how often each tool really ran."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import Agent, set_tracing_disabled  # noqa: E402

import countersign  # noqa: E402
from countersign_openai_agents import Gate  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from scripted_model import Call, ScriptedModel  # noqa: E402

set_tracing_disabled(True)

POLICY = """\
schema: countersign.policy/v1
mode: {mode}
environment: test
actions:
  read:
    decision: allow
  lookup:
    decision: allow
  refund:
    effect: "refund:{{order}}"
    decision: approve
  send_email:
    decision: approve
  charge:
    decision: approve
  delete:
    decision: approve
  wire:
    decision: deny
"""


def write_policy(folder: Path, mode: str = "enforce") -> Path:
    path = folder / "countersign.yaml"
    path.write_text(POLICY.format(mode=mode))
    return path


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    return write_policy(tmp_path)


@pytest.fixture
def control(policy: Path) -> countersign.Control:
    return countersign.Control(policy, principal="agent:test")


@pytest.fixture
def gate(control: countersign.Control) -> Gate:
    return Gate(control)


class Tools:
    """The test tools, gated, with a count of real executions per (tool, arguments)."""

    def __init__(self, gate: Gate) -> None:
        self.runs: Counter[str] = Counter()
        runs = self.runs

        def key(name: str, arguments: dict) -> str:
            return name + json.dumps(arguments, sort_keys=True)

        @gate.tool()
        async def read(doc: int) -> str:
            """Read a document."""
            runs[key("read", {"doc": doc})] += 1
            return f"doc {doc} text"

        @gate.tool()
        async def refund(order: str) -> str:
            """Refund an order."""
            runs[key("refund", {"order": order})] += 1
            return f"refunded {order}"

        @gate.tool()
        def send_email(to: str) -> str:
            """Send an email (a sync tool)."""
            runs[key("send_email", {"to": to})] += 1
            return f"sent to {to}"

        @gate.tool()
        async def charge(amount: int) -> str:
            """Charge an amount."""
            runs[key("charge", {"amount": amount})] += 1
            return f"charged {amount}"

        @gate.tool()
        async def delete(doc: int) -> str:
            """Delete a document."""
            runs[key("delete", {"doc": doc})] += 1
            return f"deleted {doc}"

        @gate.tool()
        async def wire(amount: int) -> str:
            """Wire money (policy denies it)."""
            runs[key("wire", {"amount": amount})] += 1
            return "wired"

        self.all = [read, refund, send_email, charge, delete, wire]

    def count(self, name: str, **arguments: Any) -> int:
        return self.runs[name + json.dumps(arguments, sort_keys=True)]


@pytest.fixture
def tools(gate: Gate) -> Tools:
    return Tools(gate)


def make_agent(tools: Tools, turns: list[list[Call]]) -> Agent:
    return Agent(
        name="assistant",
        instructions="Use the tools.",
        model=ScriptedModel(turns),
        tools=list(tools.all),
    )


def outputs(result: Any) -> dict[str, Any]:
    """call id → the tool result the model was given."""
    found = {}
    for item in result.to_input_list():
        kind = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
        if kind == "function_call_output":
            found[item["call_id"]] = item["output"]
    return found


def call_ids(result: Any) -> set[str]:
    found = set()
    for item in result.to_input_list():
        if isinstance(item, dict) and item.get("type") == "function_call":
            found.add(item["call_id"])
    return found


def receipts_for(control: countersign.Control, action_hash: str) -> list[dict]:
    return [r for r in control.receipts() if r.get("action_hash") == action_hash]
