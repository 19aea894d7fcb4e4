"""The chat-surface contract (issue #17): a paused run's interrupts as
``countersign.interrupt/v1`` objects, answered through the kernel (``Gate.apply_responses``, or
``POST /api/v1/interrupts/responses`` of a real ``countersign serve``), resumed from the saved
run state in another process."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import countersign
from countersign_openai_agents import INTERRUPT_SCHEMA, Gate, NotPendingForRun
from conftest import POLICY, Tools, make_agent, write_policy
from scripted_model import Call
from test_cross_process import cli, runs, step

CAROL = "human:carol"


def two_refunds(tools: Tools) -> Any:
    return make_agent(
        tools,
        [[Call("refund", {"order": "o1"}, "c1"), Call("send_email", {"to": "a@exam\u200bple.com"}, "c2")]],
    )


def test_emits_one_kernel_object_per_pending_call(gate: Gate, tools: Tools) -> None:
    result = asyncio.run(gate.run(two_refunds(tools), "go"))
    emitted = gate.emit_interrupts(result)
    assert [item["action"] for item in emitted] == ["refund", "send_email"]
    for item in emitted:
        assert item["schema"] == INTERRUPT_SCHEMA
        assert item == gate.control.interrupt(item["request_id"])
        assert item["run"] == gate.run_id(result)
        assert [answer["response"] for answer in item["answers"]] == [
            {"decision": "approve", "action_hash": item["action_hash"]},
            {"decision": "deny", "action_hash": item["action_hash"]},
        ]
    # The kernel's one rendering, every misreadable character escaped.
    assert "exam\\u{200b}ple.com" in emitted[1]["display_text"]
    assert emitted[1]["arguments"] == {"to": "a@exam\u200bple.com"}
    # Answered out of band: no longer pending, no longer emitted.
    gate.control.approve(emitted[0]["request_id"], approver=CAROL)
    assert [item["action"] for item in gate.emit_interrupts(result)] == ["send_email"]


def test_a_response_not_pending_for_the_run_is_refused_and_changes_nothing(
    gate: Gate, tools: Tools
) -> None:
    first = asyncio.run(gate.run(make_agent(tools, [[Call("refund", {"order": "o1"}, "c1")]]), "go"))
    other = asyncio.run(gate.run(make_agent(tools, [[Call("refund", {"order": "o2"}, "c1")]]), "go"))
    [mine] = gate.emit_interrupts(first)
    [theirs] = gate.emit_interrupts(other)
    before = gate.control.receipts()
    for responses in (
        {theirs["request_id"]: theirs["answers"][0]["response"]},      # another run's
        {"apr_aaaaaaaaaaaaaaaaaaaa": mine["answers"][0]["response"]},  # no such request
        {
            mine["request_id"]: mine["answers"][0]["response"],
            theirs["request_id"]: theirs["answers"][0]["response"],
        },
        {"responses": {mine["request_id"]: mine["answers"][0]["response"]}},  # the HTTP body
    ):
        with pytest.raises(NotPendingForRun) as refused:
            gate.apply_responses(state_of(gate, first), responses, approver=CAROL)
        assert refused.value.reason == "not_pending"
    assert gate.control.receipts() == before
    assert gate.control.approval(mine["request_id"]).state == "pending"
    assert gate.control.approval(theirs["request_id"]).state == "pending"
    # Answered (a stale card): refused the same way.
    gate.apply_responses(
        state_of(gate, first), {mine["request_id"]: mine["answers"][1]["response"]}, approver=CAROL
    )
    with pytest.raises(NotPendingForRun):
        gate.apply_responses(
            state_of(gate, first), {mine["request_id"]: mine["answers"][0]["response"]},
            approver=CAROL,
        )
    assert gate.control.approval(mine["request_id"]).state == "denied"


def state_of(gate: Gate, result: Any) -> Any:
    """A fresh run state of a paused result, carrying the gate's run id."""
    state = result.to_state()
    setattr(state, "_countersign_run", gate.run_id(result))
    return state


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        "approve",
        None,
        1,
        [],
        {},
        {"decision": "approve"},
        {"decision": "yes", "action_hash": "HASH"},
        {"decision": "reject", "action_hash": "HASH"},
        {"decision": True, "action_hash": "HASH"},
        {"decision": "approve", "action_hash": "HASH", "approver": "human:root"},
    ],
)
def test_any_other_shape_is_refused_invalid_decision_and_recorded(
    gate: Gate, tools: Tools, value: Any
) -> None:
    result = asyncio.run(gate.run(
        make_agent(tools, [[Call("refund", {"order": "o1"}, "c1"), Call("charge", {"amount": 5}, "c2")]]),
        "go",
    ))
    refund, charge = gate.emit_interrupts(result)
    if isinstance(value, dict) and value.get("action_hash") == "HASH":
        value = {**value, "action_hash": refund["action_hash"]}
    responses = {
        refund["request_id"]: value,
        charge["request_id"]: charge["answers"][0]["response"],   # valid, but not applied
    }
    with pytest.raises(countersign.InvalidDecision) as refused:
        gate.apply_responses(state_of(gate, result), responses, approver=CAROL)
    assert refused.value.reason == "invalid_decision"
    assert gate.control.approval(refund["request_id"]).state == "pending"
    assert gate.control.approval(charge["request_id"]).state == "pending"
    [receipt] = [r for r in gate.control.receipts() if r.get("reason") == "invalid_decision"]
    assert receipt["approver"] == CAROL
    assert receipt["approval_id"] == refund["request_id"]
    assert receipt["channel"] == "interrupt:openai-agents"
    assert tools.count("refund", order="o1") == 0


def test_an_answer_needs_the_signed_in_approver(gate: Gate, tools: Tools) -> None:
    result = asyncio.run(gate.run(make_agent(tools, [[Call("refund", {"order": "o1"}, "c1")]]), "go"))
    [item] = gate.emit_interrupts(result)
    with pytest.raises(countersign.NoApprover):
        gate.apply_responses(
            state_of(gate, result), {item["request_id"]: item["answers"][0]["response"]}
        )
    assert gate.control.approval(item["request_id"]).state == "pending"


def paused(folder: Path) -> list[dict]:
    emitted = step("chat-pause", folder)
    assert [item["schema"] for item in emitted] == [INTERRUPT_SCHEMA, INTERRUPT_SCHEMA]
    assert [item["arguments"] for item in emitted] == [{"order": "o1"}, {"order": "o2"}]
    assert runs(folder) == []
    return emitted


def one_approve_one_deny(emitted: list[dict]) -> dict:
    approve, deny = emitted
    return {
        approve["request_id"]: approve["answers"][0]["response"],
        deny["request_id"]: {**deny["answers"][1]["response"], "note": "not o2"},
    }


def resumed_elsewhere(folder: Path) -> None:
    resumed = step("chat-resume", folder)
    assert resumed["pending"] == 0
    assert [line.split()[1] for line in runs(folder)] == ["o1"]
    denied = json.loads(resumed["outputs"]["c2"])
    assert denied["status"] == "rejected" and denied["executed"] is False
    assert denied["reviewer_note"] == "not o2"
    assert resumed["refusals"] == {"c2": "ApprovalDenied"}
    # A replay of the saved state runs nothing again: the grant was used.
    assert step("chat-resume", folder) == {"refused": "consumed"}
    assert [line.split()[1] for line in runs(folder)] == ["o1"]


def test_pause_answer_with_apply_responses_and_resume_in_three_processes(tmp_path: Path) -> None:
    write_policy(tmp_path)
    emitted = paused(tmp_path)
    (tmp_path / "responses.json").write_text(json.dumps(one_approve_one_deny(emitted)))
    answered = step("chat-answer", tmp_path)
    assert sorted(answered.values()) == ["denied", "granted"]
    resumed_elsewhere(tmp_path)
    control = countersign.Control(tmp_path / "countersign.yaml", principal="agent:test")
    answers = [r for r in control.receipts() if r["kind"] == "answer"]
    assert {(r["approver"], r["channel"]) for r in answers} == {(CAROL, "interrupt:openai-agents")}
    assert control.verify_receipts()["first_break"] is None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def post(url: str, token: str, body: Any) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(url: str, token: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_pause_answer_through_countersign_serve_and_resume_in_another_process(
    tmp_path: Path,
) -> None:
    """The chat surface posts the answers to `POST /api/v1/interrupts/responses` of a real
    `countersign serve` on the same store, signed in with an approver token."""
    key = tmp_path / "approver.key"
    made = subprocess.run([cli(), "keygen", "--out", str(key)], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "approver.key.pub").exists()
    policy = tmp_path / "countersign.yaml"
    policy.write_text(
        POLICY.format(mode="enforce").replace(
            "environment: test\n", 'environment: test\napprovers:\n  keys: ["approver.key.pub"]\n'
        )
    )
    emitted = paused(tmp_path)
    token = subprocess.run(
        [cli(), "approver", "token", "--key", str(key), "--subject", CAROL, "--ttl", "30m"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert token.returncode == 0, token.stderr
    bearer = token.stdout.strip()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [cli(), "--policy", str(policy), "serve", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/v1/health", timeout=5).read()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                assert time.monotonic() < deadline, "countersign serve did not start"
                time.sleep(0.2)
        # The service lists the same kernel objects the adapter emitted.
        listed = get(f"{base}/api/v1/interrupts", bearer)["items"]
        by_id = lambda items: sorted(items, key=lambda item: item["request_id"])  # noqa: E731
        assert by_id(listed) == by_id(emitted)
        # A bare boolean is refused and changes nothing.
        status, problem = post(
            f"{base}/api/v1/interrupts/responses", bearer, {"responses": {emitted[0]["request_id"]: True}}
        )
        assert (status, problem["reason"]) == (422, "invalid_decision")
        status, answered = post(
            f"{base}/api/v1/interrupts/responses", bearer, {"responses": one_approve_one_deny(emitted)}
        )
        assert status == 200, answered
        assert sorted(r["state"] for r in answered["results"].values()) == ["denied", "granted"]
    finally:
        server.terminate()
        server.wait(timeout=30)
    resumed_elsewhere(tmp_path)
    control = countersign.Control(policy, principal="agent:test")
    refused = [r for r in control.receipts() if r.get("reason") == "invalid_decision"]
    assert [(r["approver"], r["channel"]) for r in refused] == [(CAROL, "service")]
