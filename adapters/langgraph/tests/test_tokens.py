"""The approver on the resuming call as an approver token (`Approver(token=...)`): verified by
the kernel against the policy's keys; a bare name is refused where the rule requires an
authenticated approver."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import countersign
from countersign_langgraph import Approver, Gate
from conftest import POLICY, Tools, make_agent, make_control
from scripted_model import call


def cli() -> str:
    return os.environ.get("COUNTERSIGN_BIN", "countersign")


def run(*arguments: str) -> str:
    done = subprocess.run([cli(), *arguments], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_an_approver_token_passed_on_the_resuming_call_is_verified(tmp_path: Path) -> None:
    key = tmp_path / "approvers.key"
    run("keygen", "--out", str(key))
    policy = tmp_path / "countersign.yaml"
    text = POLICY.format(mode="enforce").replace(
        "directory:", f"approvers:\n  keys:\n    - {key}.pub\ndirectory:"
    ) + """  wire_out:
    rules:
      - decision: approve
        approval:
          approvers: ["group:treasury"]
          require: authenticated
"""
    policy.write_text(text)
    control, interrupt = make_control(policy)
    gate = Gate(control, interrupt, gated={"transfer"}, actions={"transfer": "wire_out"})
    tools = Tools()
    agent = make_agent(gate, tools, [[call("transfer", {"to": "acct-1", "amount": 5}, "c1")], "done"])
    config = {"configurable": {"thread_id": "tok"}}
    agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
    (pause,) = gate.pending(agent, config)

    # A bare name, even one that would be in the group, is not authenticated.
    resume = gate.resume(agent, config, {pause.interrupt_id: "approve"}, approver=Approver(name="human:dana"))
    with pytest.raises(countersign.AnswerRefused) as refused:
        agent.invoke(resume.command, config, context=resume.context)
    assert refused.value.reason == "not_authenticated"

    token = run("approver", "token", "--key", str(key), "--subject", "human:dana", "--groups", "treasury", "--ttl", "10m")
    (pause,) = gate.pending(agent, config)
    resume = gate.resume(agent, config, {pause.interrupt_id: "approve"}, approver=Approver(token=token))
    assert token not in repr(resume.context) and token not in str(resume.command)   # never in the payload
    agent.invoke(resume.command, config, context=resume.context)
    assert tools.count("transfer", to="acct-1", amount=5) == 1
    granted = [r for r in control.receipts() if r["kind"] == "answer" and r["outcome"] == "granted"]
    assert granted[0]["approver"] == "human:dana" and granted[0]["authentication"] == "token"
    # The checkpoint never holds the token.
    assert token not in str(agent.get_state(config).values)
