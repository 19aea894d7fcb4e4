"""Shared fixtures: a policy on disk, the operator's kernel built with the adapter's interrupt
on a fresh SQLite store, the gate, tools that count how often each really ran, and a scripted
chat model."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import countersign
from countersign_langgraph import Gate, LangGraphInterrupt, create_agent

sys.path.insert(0, str(Path(__file__).parent))
from scripted_model import ScriptedChatModel  # noqa: E402

POLICY = """\
schema: countersign.policy/v1
mode: {mode}
environment: test
directory:
  human:root: [admin]
  human:alice: [staff]
actions:
  read:
    decision: allow
  refund:
    effect: "refund:{{order}}"
    decision: approve
  delete:
    decision: approve
  transfer:
    decision: approve
  drop_table:
    decision: approve
  wire:
    decision: deny
  send_email:
    decision: approve
  read_file:
    decision: approve
  delete_file:
    rules:
      - decision: approve
        approval:
          approvers: ["group:admin"]
  log_ticket:
    effect: "log:{{id}}"
    decision: allow
  notify:
    decision: approve
  send_reminder:
    effect: "reminder:{{ticket}}:{{round}}"
    decision: allow
  close_ticket:
    decision: approve
  shell_exec:
    decision: approve
"""


def write_policy(folder: Path, mode: str = "enforce", extra: str = "") -> Path:
    path = folder / "countersign.yaml"
    path.write_text(POLICY.format(mode=mode) + extra)
    return path


def make_control(policy: Path, store: str | None = None, ttl: float | None = None):
    interrupt = LangGraphInterrupt()
    control = countersign.Control(
        policy, principal="agent:test", store_url=store, interrupt=interrupt, approval_ttl=ttl
    )
    return control, interrupt


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    return write_policy(tmp_path)


@pytest.fixture
def gate(policy: Path) -> Gate:
    control, interrupt = make_control(policy)
    return Gate(control, interrupt)


class Tools:
    """LangChain tools, with a count of real executions per (tool, arguments)."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        runs = self.runs

        def key(name: str, arguments: dict) -> str:
            return name + json.dumps(arguments, sort_keys=True)

        @tool
        def read(doc: int) -> str:
            """Read a document."""
            runs[key("read", {"doc": doc})] += 1
            return f"doc {doc} text"

        @tool
        def refund(order: str) -> str:
            """Refund an order."""
            runs[key("refund", {"order": order})] += 1
            return f"refunded {order}"

        @tool
        def delete(id: int) -> str:
            """Delete a record."""
            runs[key("delete", {"id": id})] += 1
            return f"deleted {id}"

        @tool
        def transfer(to: str, amount: int) -> str:
            """Transfer money."""
            runs[key("transfer", {"to": to, "amount": amount})] += 1
            return f"sent {amount} to {to}"

        @tool
        def drop_table(name: str) -> str:
            """Drop a table."""
            runs[key("drop_table", {"name": name})] += 1
            return f"dropped {name}"

        @tool
        def wire(amount: int) -> str:
            """Wire money (policy denies it)."""
            runs[key("wire", {"amount": amount})] += 1
            return "wired"

        @tool
        def send_email(to: str) -> str:
            """Send an email."""
            runs[key("send_email", {"to": to})] += 1
            return f"sent to {to}"

        @tool
        def read_file(path: str) -> str:
            """Read a file."""
            runs[key("read_file", {"path": path})] += 1
            return f"read {path}"

        @tool
        def delete_file(path: str) -> str:
            """Delete a file (admins approve)."""
            runs[key("delete_file", {"path": path})] += 1
            return f"deleted {path}"

        @tool
        def shell_exec(cmd: str) -> str:
            """Run a shell command (a human approves)."""
            runs[key("shell_exec", {"cmd": cmd})] += 1
            return f"ran {cmd}"

        self.all = [
            read, refund, delete, transfer, drop_table, wire, send_email, read_file, delete_file,
            shell_exec,
        ]

    def count(self, tool_name: str, /, **arguments: Any) -> int:
        return self.runs[tool_name + json.dumps(arguments, sort_keys=True)]


@pytest.fixture
def tools() -> Tools:
    return Tools()


def make_agent(gate: Gate, tools: Tools, turns: list, checkpointer: Any = None) -> Any:
    return create_agent(
        ScriptedChatModel(turns=turns),
        tools.all,
        gate=gate,
        checkpointer=checkpointer if checkpointer is not None else InMemorySaver(),
    )


def tool_messages(result: Any) -> dict[str, Any]:
    """tool call id → the ToolMessage the model was given."""
    return {
        message.tool_call_id: message
        for message in result["messages"]
        if getattr(message, "type", None) == "tool"
    }
