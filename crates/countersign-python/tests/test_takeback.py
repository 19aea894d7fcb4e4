"""Taking it back from Python (issue #31): cancelling a whole run, revoking an approver
token, and the warning a policy gives when nobody can answer its approvals."""

from __future__ import annotations

import base64
import json
import warnings
from pathlib import Path

import pytest

import countersign

POLICY = """\
schema: countersign.policy/v1
mode: enforce
environment: test
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: approve
"""

NOBODY = """\
schema: countersign.policy/v1
environment: test
directory:
  human:alice: [support]
actions:
  stripe.refund:
    decision: approve
    approval: { approvers: ["group:finance"] }
"""


@pytest.fixture
def control(tmp_path: Path) -> countersign.Control:
    policy = tmp_path / "countersign.yaml"
    policy.write_text(POLICY)
    return countersign.Control(policy, principal="agent:test")


def _ask(control: countersign.Control, payment_id: str, run: str) -> str:
    with pytest.raises(countersign.ApprovalRequired) as raised:
        control.execute(
            "stripe.refund", {"payment_id": payment_id}, lambda a: "ran", run=run
        )
    return raised.value.request_id


def test_cancel_run_clears_only_that_runs_waiting_requests(control) -> None:
    first = _ask(control, "pi_1", "run-a")
    second = _ask(control, "pi_2", "run-a")
    other = _ask(control, "pi_3", "run-b")
    control.deny(second, approver="human:alice")

    outcomes = control.cancel_run("run-a", operator="ops:dana", reason="abandoned")

    assert [request_id for request_id, _ in outcomes] == [first]
    assert outcomes[0][1].state == "cancelled"
    assert control.approval(first).state == "cancelled"
    assert control.approval(second).state == "denied"
    assert control.approval(other).state == "pending"
    assert control.cancel_run("run-a", operator="ops:dana") == []
    with pytest.raises(countersign.ApprovalCancelled):
        control.approve(first, approver="human:alice")


def _unsigned_token_with_id(jti: str) -> str:
    def part(value: dict) -> str:
        raw = json.dumps(value).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    return f"{part({'alg': 'EdDSA'})}.{part({'sub': 'human:alice', 'jti': jti})}.c2ln"


def test_revoke_token_takes_an_id_or_a_whole_token(control) -> None:
    jti = "tok_" + "abcdefghijklmnopqrst"
    assert control.revoke_token(jti, operator="ops:dana", reason="leaked") is True
    assert control.revoke_token(jti, operator="ops:dana") is False
    other = "tok_" + "bcdefghijklmnopqrst2"
    assert control.revoke_token(_unsigned_token_with_id(other), operator="ops:dana") is True
    assert control.revoke_token(other, operator="ops:dana") is False


@pytest.mark.parametrize("bad", ["", "tok_short", "TOK_ABCDEFGHIJKLMNOPQRST", "a.b.c"])
def test_revoke_token_refuses_anything_else_and_says_what_to_pass(control, bad) -> None:
    with pytest.raises(ValueError, match="tok_|jti"):
        control.revoke_token(bad, operator="ops:dana")


def test_opening_a_policy_nobody_can_answer_warns_with_the_line(tmp_path: Path) -> None:
    policy = tmp_path / "countersign.yaml"
    policy.write_text(NOBODY)
    with pytest.warns(countersign.ApprovalWarning) as caught:
        countersign.Control(policy, principal="agent:test")
    messages = [str(warning.message) for warning in caught]
    assert any("line 6: `stripe.refund`: nobody can answer" in m for m in messages), messages
    policy.write_text(NOBODY.replace("[support]", "[support, finance]"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", countersign.ApprovalWarning)
        countersign.Control(policy, principal="agent:test")
