"""The `countersign` Python binding over the kernel: execute, protect (sync and async),
answers, and the exception hierarchy."""

from __future__ import annotations

import asyncio
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
    rules:
      - when: { amount: { lte: 500 } }
        decision: allow
      - decision: approve
  support.lookup:
    decision: allow
"""


@pytest.fixture
def control(tmp_path: Path) -> countersign.Control:
    policy = tmp_path / "countersign.yaml"
    policy.write_text(POLICY)
    return countersign.Control(policy, principal="agent:test")


def test_default_store_is_sqlite_beside_the_policy(control: countersign.Control, tmp_path) -> None:
    assert control.store_url == f"sqlite:{tmp_path}/.countersign/countersign.db"
    assert (tmp_path / ".countersign" / "countersign.db").exists()


def test_protected_sync_function_runs_at_most_once_per_effect_key(control) -> None:
    runs = []

    @control.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        runs.append(payment_id)
        return f"refunded {payment_id}"

    assert refund("pi_1", amount=100) == "refunded pi_1"
    with pytest.raises(countersign.DuplicateEffect) as raised:
        refund("pi_1", amount=100)
    assert raised.value.reason == "duplicate"
    assert raised.value.did_run == countersign.DidRun.NO and raised.value.may_retry is False
    assert runs == ["pi_1"]


def test_approval_required_then_approved_runs_once(control) -> None:
    runs = []

    @control.protect("stripe.refund")
    async def refund(payment_id: str, amount: int) -> str:
        runs.append(payment_id)
        return "ok"

    with pytest.raises(countersign.ApprovalRequired) as raised:
        asyncio.run(refund("pi_2", 900))
    assert raised.value.may_retry is True
    assert raised.value.action_hash.startswith("sha256:") and raised.value.expires_at
    record = control.approve(raised.value.request_id, approver="human:alice", note="fine")
    assert record.state == "granted" and record.approver == "human:alice"
    assert asyncio.run(refund("pi_2", 900)) == "ok"
    assert runs == ["pi_2"]
    assert control.approval(record.request_id).state == "consumed"


def test_the_agent_cannot_answer_its_own_request(control) -> None:
    @control.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> str:
        return "ok"

    with pytest.raises(countersign.ApprovalRequired) as raised:
        refund("pi_self", 900)
    request_id = raised.value.request_id
    for answer in (control.approve, control.deny):
        with pytest.raises(countersign.SelfApproval) as refused:
            answer(request_id, approver="agent:test")
        assert refused.value.reason == "self_approval"
        assert refused.value.approver == "agent:test"
    assert control.approval(request_id).state == "pending"


def test_denied_request_is_refused_with_the_note(control) -> None:
    def never(arguments: dict) -> str:
        raise AssertionError("must not run")

    with pytest.raises(countersign.ApprovalRequired) as raised:
        control.execute("stripe.refund", {"payment_id": "pi_3", "amount": 900}, never)
    control.deny(raised.value.request_id, approver="human:bob", note="wrong account")
    with pytest.raises(countersign.ApprovalDenied) as denied:
        control.execute("stripe.refund", {"payment_id": "pi_3", "amount": 900}, never)
    assert denied.value.note == "wrong account" and denied.value.approver == "human:bob"
    with pytest.raises(countersign.AlreadyDecided):
        control.approve(raised.value.request_id, approver="human:eve")


def test_an_approval_for_other_arguments_authorizes_nothing(control) -> None:
    with pytest.raises(countersign.ApprovalRequired) as raised:
        control.execute("stripe.refund", {"payment_id": "pi_4", "amount": 900}, lambda a: "x")
    control.approve(raised.value.request_id, approver="human:alice")
    with pytest.raises(countersign.ApprovalMismatch):
        control.execute(
            "stripe.refund",
            {"payment_id": "pi_4", "amount": 901},
            lambda a: "x",
            approval=raised.value.request_id,
        )


def test_not_executed_allows_a_retry_and_other_errors_make_the_outcome_unknown(control) -> None:
    def declined(arguments: dict) -> str:
        raise countersign.NotExecuted("card declined before sending")

    with pytest.raises(countersign.NotExecuted) as first:
        control.execute("stripe.refund", {"payment_id": "pi_5", "amount": 1}, declined)
    assert first.value.may_retry is True and first.value.effect_key == "refund:pi_5"
    assert control.execute(
        "stripe.refund", {"payment_id": "pi_5", "amount": 1}, lambda a: "done"
    ).value == "done"

    def boom(arguments: dict) -> str:
        raise ConnectionResetError("reset after send")

    with pytest.raises(countersign.OutcomeUnknown) as unknown:
        control.execute("stripe.refund", {"payment_id": "pi_6", "amount": 1}, boom)
    assert unknown.value.did_run == "maybe"
    assert isinstance(unknown.value.__cause__, ConnectionResetError)
    with pytest.raises(countersign.AmbiguousEffect):
        control.execute("stripe.refund", {"payment_id": "pi_6", "amount": 1}, lambda a: "x")


def test_unrepresentable_arguments_are_refused_before_anything_is_written(control) -> None:
    with pytest.raises(countersign.InvalidArguments):
        control.execute("support.lookup", {"n": float("nan")}, lambda a: "x")
    with pytest.raises(countersign.InvalidArguments):
        control.execute("support.lookup", {"n": 2**60}, lambda a: "x")
    assert control.receipts() == []


def test_unknown_action_is_denied_with_a_receipt(control) -> None:
    with pytest.raises(countersign.ActionDenied) as raised:
        control.execute("stripe.wire", {}, lambda a: "x")
    assert raised.value.reason == "unknown_action"
    assert [r["outcome"] for r in control.receipts()] == ["refused"]


def test_async_tools_do_not_block_the_event_loop(control) -> None:
    @control.protect("support.lookup")
    async def lookup(key: str, gate: int) -> str:
        await started[gate].wait()
        return key

    started: list[asyncio.Event] = []

    async def main() -> list[str]:
        started.extend([asyncio.Event(), asyncio.Event()])
        first = asyncio.ensure_future(lookup("a", 0))
        second = asyncio.ensure_future(lookup("b", 1))
        # Both calls are in flight on one loop; releasing them in reverse order completes both.
        await asyncio.sleep(0)
        started[1].set()
        assert await asyncio.wait_for(second, timeout=10) == "b"
        started[0].set()
        return [await asyncio.wait_for(first, timeout=10), "b"]

    assert asyncio.run(main()) == ["a", "b"]


def test_bad_policy_is_a_policy_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("schema: countersign.policy/v1\nactions:\n  x:\n    decison: allow\n")
    with pytest.raises(countersign.PolicyError) as raised:
        countersign.Control(path, principal="agent:test")
    assert "bad.yaml:4:5" in str(raised.value)


def test_receipt_chain_verifies(control) -> None:
    control.execute("support.lookup", {"k": 1}, lambda a: "x")
    report = control.verify_receipts()
    assert report["checked"] == 1 and report["first_break"] is None
    assert report["outcome"] == "verified" and report["first_seq"] == 1


def test_executed_receipt_is_the_stored_receipt(control) -> None:
    """The receipt `execute` returns (built natively) equals the stored one (read as JSON):
    same keys, same order, same values and types."""
    arguments = {"payment_id": "pi_r", "amount": 5, "ratio": 0.25, "tags": ["a", None, True]}
    done = control.execute("stripe.refund", arguments, lambda canonical: canonical)
    assert done.value == arguments
    stored = control.receipts()[-1]
    assert list(done.receipt.items()) == list(stored.items())
    assert [type(value) for value in done.receipt.values()] == [
        type(value) for value in stored.values()
    ]


QUORUM_POLICY = """\
schema: countersign.policy/v1
environment: test
directory:
  human:alice: [finance]
  human:bob: [finance]
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    decision: approve
    approval: { approvers: ["group:finance"], quorum: 2 }
"""


@pytest.fixture
def quorum_control(tmp_path: Path) -> countersign.Control:
    policy = tmp_path / "countersign.yaml"
    policy.write_text(QUORUM_POLICY)
    return countersign.Control(policy, principal="agent:test")


def _pending_request(control: countersign.Control, payment_id: str) -> str:
    def never(arguments: dict) -> str:
        raise AssertionError("must not run")

    with pytest.raises(countersign.ApprovalRequired) as raised:
        control.execute("stripe.refund", {"payment_id": payment_id, "amount": 900}, never)
    return raised.value.request_id


@pytest.mark.parametrize(
    "decision",
    [None, True, False, 0, 1, "true", "false", "no", "yes", "", "Approve", {}, [], {"approved": "yes"}],
)
def test_only_the_closed_decisions_change_anything(control, decision) -> None:
    """Case B38: a malformed decision is refused, recorded, and the request stays pending."""
    request_id = _pending_request(control, "pi_b38")
    with pytest.raises(countersign.InvalidDecision) as refused:
        control.answer(request_id, decision, approver="human:alice")
    assert refused.value.reason == "invalid_decision"
    assert refused.value.may_retry is True
    assert control.approval(request_id).state == "pending"
    assert control.answer(request_id, "deny", approver="human:alice").state == "denied"


def test_a_note_past_the_kernels_limit_is_refused_and_nothing_is_recorded(control) -> None:
    # The limit is the kernel's (4,096 bytes of UTF-8), so the binding cannot store more than
    # the CLI or the approval service would.
    request_id = _pending_request(control, "pi_note")
    with pytest.raises(countersign.NoteTooLong) as refused:
        control.approve(request_id, approver="human:alice", note="é" * 2049)
    assert refused.value.reason is countersign.Reason.NOTE_TOO_LONG
    assert (refused.value.bytes, refused.value.limit) == (4098, 4096)
    assert refused.value.may_retry is True
    assert control.approval(request_id).state == "pending"
    granted = control.approve(request_id, approver="human:alice", note="n" * 4096)
    assert granted.state == "granted"


@pytest.mark.parametrize("approver", ["human:", ":", "human: bob"])
def test_a_malformed_approver_name_is_refused_with_the_expected_shape(control, approver) -> None:
    # Issue #19: one shape for approver ids; nothing changes and nothing reaches a receipt's
    # approver field.
    request_id = _pending_request(control, "pi_shape")
    with pytest.raises(countersign.InvalidApprover) as refused:
        control.approve(request_id, approver=approver)
    assert refused.value.reason is countersign.Reason.INVALID_APPROVER
    assert refused.value.given == approver
    assert "`human:alice`" in refused.value.message
    assert control.approval(request_id).state == "pending"


def test_a_quorum_needs_two_distinct_entitled_approvers(quorum_control) -> None:
    request_id = _pending_request(quorum_control, "pi_q")
    with pytest.raises(countersign.NotEntitled) as refused:
        quorum_control.approve(request_id, approver="human:mallory")
    assert refused.value.approver == "human:mallory"
    assert "group:finance" in refused.value.approvers
    one = quorum_control.approve(request_id, approver="human:alice")
    assert (one.state, one.approvals_given, one.quorum) == ("pending", 1, 2)
    assert one.approvers == "group:finance (2 of them)"
    # The same approver again is one approval, not two.
    assert quorum_control.approve(request_id, approver="human:alice").approvals_given == 1
    two = quorum_control.approve(request_id, approver="human:bob")
    assert (two.state, two.approvals_given) == ("granted", 2)


def test_an_answer_about_another_hash_is_refused(control) -> None:
    request_id = _pending_request(control, "pi_hash")
    with pytest.raises(countersign.AnswerMismatch) as refused:
        control.approve(request_id, approver="human:alice", action_hash="sha256:" + "0" * 64)
    assert refused.value.reason == "mismatch"
    record = control.approval(request_id)
    assert record.state == "pending"
    granted = control.approve(request_id, approver="human:alice", action_hash=record.action_hash)
    assert granted.state == "granted"


# ----------------------------------------------------------------------- run scope and correlation


def _refund_pending(control: countersign.Control, run=None, correlation=None, payment_id="pi_r"):
    with pytest.raises(countersign.ApprovalRequired) as raised:
        control.execute(
            "stripe.refund",
            {"payment_id": payment_id, "amount": 900},
            lambda arguments: "ran",
            run=run,
            correlation=correlation,
        )
    return raised.value.request_id


def test_a_runs_approval_does_not_leak_to_another_run(control) -> None:
    # Case B42: two runs ask for the identical action; the human approves run 1's request.
    runs = []
    first = _refund_pending(control, run="r1")
    second = _refund_pending(control, run="r2")
    assert first != second
    assert _refund_pending(control, run="r1") == first, "pending reuse is per (hash, run)"
    record = control.approve(first, approver="human:alice")
    assert record.state == "granted" and record.run == "r1"
    assert control.approval(second).run == "r2" and control.approval(second).state == "pending"

    def refund(arguments: dict) -> str:
        runs.append(arguments["payment_id"])
        return "refunded"

    arguments = {"payment_id": "pi_r", "amount": 900}
    # Run 2 reaches execution first: run 1's grant authorizes nothing there.
    with pytest.raises(countersign.ApprovalRequired) as pending:
        control.execute("stripe.refund", arguments, refund, run="r2")
    assert pending.value.request_id == second
    with pytest.raises(countersign.ApprovalOtherRun) as other:
        control.execute("stripe.refund", arguments, refund, run="r2", approval=first)
    assert other.value.reason == "other_run" and other.value.may_retry is True
    assert other.value.did_run == countersign.DidRun.NO
    assert other.value.request_id == first and other.value.run == "r1"
    # An unscoped call neither.
    with pytest.raises(countersign.ApprovalOtherRun):
        control.execute("stripe.refund", arguments, refund, approval=first)
    assert runs == []
    # Run 1 executes once on its own approval.
    assert control.execute("stripe.refund", arguments, refund, run="r1").value == "refunded"
    assert runs == ["pi_r"]
    assert control.approval(first).state == "consumed"


def test_protect_scopes_its_calls_to_a_run(control) -> None:
    @control.protect("stripe.refund", run="r7")
    def refund(payment_id: str, amount: int) -> str:
        return "ok"

    with pytest.raises(countersign.ApprovalRequired) as raised:
        refund("pi_p", 900)
    assert control.approval(raised.value.request_id).run == "r7"


def test_each_correlated_call_gets_its_own_request_and_can_be_read_back(control) -> None:
    arguments = {"payment_id": "pi_c", "amount": 900}
    first = control.request_approval(
        "stripe.refund", arguments, run="r1", correlation=("toyflow", "call_1")
    )
    second = control.request_approval(
        "stripe.refund", arguments, run="r1", correlation=("toyflow", "call_2")
    )
    assert first is not None and second is not None
    assert first.request_id != second.request_id
    assert first.run == "r1" and first.state == "pending"
    again = control.request_approval(
        "stripe.refund", arguments, run="r1", correlation=("toyflow", "call_1")
    )
    assert again.request_id == first.request_id, "the same framework call finds its request"
    assert control.correlated("toyflow", "r1", "call_1").request_id == first.request_id
    assert control.correlated("toyflow", "r1", "call_2").request_id == second.request_id
    assert control.correlated("toyflow", "r2", "call_1") is None
    assert control.correlated("othertool", "r1", "call_1") is None


def test_a_call_id_claimed_by_other_arguments_is_refused(control) -> None:
    # Case B35: the same framework call id, other arguments.
    request_id = _refund_pending(control, run="r1", correlation=("adk", "C"), payment_id="pi_a")
    control.approve(request_id, approver="human:alice")
    with pytest.raises(countersign.ApprovalMismatch) as refused:
        control.execute(
            "stripe.refund",
            {"payment_id": "pi_b", "amount": 999},
            lambda arguments: "ran",
            run="r1",
            correlation=("adk", "C"),
        )
    assert refused.value.reason == "mismatch"
    last = control.receipts()[-1]
    assert last["reason"] == "mismatch" and "duplicate correlation" in last["detail"]
    assert control.correlated("adk", "r1", "C").request_id == request_id


def test_a_correlation_must_be_a_pair_of_strings(control) -> None:
    with pytest.raises(TypeError):
        control.request_approval("stripe.refund", {"payment_id": "x", "amount": 900},
                                 correlation="call_1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        control.request_approval("stripe.refund", {"payment_id": "x", "amount": 900},
                                 correlation=("", "call_1"))


class _ScriptedInterrupt:
    """A framework interrupt for `Control(interrupt=...)`: suspends until `answer` is set."""

    framework = "scripted"
    carries_approved_arguments = True

    def __init__(self) -> None:
        self.answer = None
        self.asked = []

    def interrupt(self, pending: str):
        import json

        record = json.loads(pending)
        self.asked.append(record["request_id"])
        if self.answer is None:
            return None
        return json.dumps({**self.answer, "action_hash": record["action_hash"]})


def _interrupt_control(tmp_path: Path, interrupt) -> countersign.Control:
    policy = tmp_path / "countersign.yaml"
    policy.write_text(POLICY)
    return countersign.Control(policy, principal="agent:test", interrupt=interrupt)


def test_a_control_built_with_an_interrupt_asks_it_and_records_its_answer(tmp_path: Path) -> None:
    interrupt = _ScriptedInterrupt()
    control = _interrupt_control(tmp_path, interrupt)
    runs = []
    with pytest.raises(countersign.ApprovalRequired) as raised:
        control.execute("stripe.refund", {"payment_id": "pi_i", "amount": 900}, runs.append)
    assert interrupt.asked == [raised.value.request_id] and runs == []
    interrupt.answer = {
        "decision": "approve", "approver": "human:alice", "note": None,
        "arguments": {"payment_id": "pi_i", "amount": 900},
    }
    control.execute("stripe.refund", {"payment_id": "pi_i", "amount": 900}, runs.append)
    assert len(runs) == 1
    answer = [r for r in control.receipts() if r["kind"] == "answer"][0]
    assert answer["channel"] == "interrupt:scripted" and answer["approver"] == "human:alice"
    assert answer["hash_confirmed"] is True


def test_an_interrupt_answer_about_other_arguments_or_naming_nobody_authorizes_nothing(tmp_path: Path) -> None:
    interrupt = _ScriptedInterrupt()
    control = _interrupt_control(tmp_path, interrupt)
    interrupt.answer = {"decision": "approve", "approver": "human:alice", "arguments": {"payment_id": "pi_x", "amount": 1}}
    with pytest.raises(countersign.ApprovalMismatch):
        control.execute("stripe.refund", {"payment_id": "pi_j", "amount": 900}, lambda a: "ran")
    interrupt.answer = {"decision": "approve", "arguments": {"payment_id": "pi_j", "amount": 900}}
    with pytest.raises(countersign.CountersignError) as raised:
        control.execute("stripe.refund", {"payment_id": "pi_j", "amount": 900}, lambda a: "ran")
    assert raised.value.reason in ("no_approver", "not_authenticated")
    assert {r.state for r in control.approvals()} == {"pending"}


def test_an_interrupt_that_raises_is_interrupt_failed_and_a_malformed_one_is_refused(tmp_path: Path) -> None:
    class Broken(_ScriptedInterrupt):
        def interrupt(self, pending: str):
            raise RuntimeError("the framework is down")

    control = _interrupt_control(tmp_path, Broken())
    with pytest.raises(countersign.InterruptFailed):
        control.execute("stripe.refund", {"payment_id": "pi_k", "amount": 900}, lambda a: "ran")

    class Nameless:
        carries_approved_arguments = True

        def interrupt(self, pending):
            return None

    with pytest.raises(TypeError, match="framework"):
        _interrupt_control(tmp_path, Nameless())


def test_a_revoked_grant_raises_revoked_and_a_used_one_cannot_be_revoked(control) -> None:
    runs = []

    def refund(arguments: dict) -> str:
        runs.append(arguments["payment_id"])
        return "ok"

    call = {"payment_id": "pi_rv", "amount": 900}
    with pytest.raises(countersign.ApprovalRequired) as raised:
        control.execute("stripe.refund", call, refund)
    request_id = raised.value.request_id
    control.approve(request_id, approver="human:alice")
    record = control.revoke(request_id, approver="human:alice", reason="wrong payment")
    assert record.state == "revoked"
    with pytest.raises(countersign.ApprovalRevoked) as revoked:
        control.execute("stripe.refund", call, refund, approval=request_id)
    assert revoked.value.reason == "revoked" and revoked.value.did_run == countersign.DidRun.NO
    assert runs == []

    with pytest.raises(countersign.ApprovalRequired) as again:
        control.execute("stripe.refund", {"payment_id": "pi_used", "amount": 900}, refund)
    used = again.value.request_id
    control.approve(used, approver="human:alice")
    control.execute("stripe.refund", {"payment_id": "pi_used", "amount": 900}, refund, approval=used)
    with pytest.raises(countersign.ApprovalConsumed) as consumed:
        control.revoke(used, approver="human:alice")
    assert consumed.value.reason == "consumed"
    assert control.approval(used).state == "consumed"


def test_a_cancelled_request_leaves_the_inbox_and_refuses_a_late_answer(control) -> None:
    with pytest.raises(countersign.ApprovalRequired) as raised:
        control.execute("stripe.refund", {"payment_id": "pi_cx", "amount": 900}, lambda a: "x")
    request_id = raised.value.request_id
    record = control.cancel(request_id, operator="ops:dana", reason="run abandoned")
    assert record.state == "cancelled"
    assert all(pending.request_id != request_id for pending in control.approvals("pending"))
    with pytest.raises(countersign.ApprovalCancelled) as late:
        control.approve(request_id, approver="human:alice")
    assert late.value.reason == "cancelled"
