"""The Countersign adapter conformance kit, run against the toy adapter as this package's CI
runs it. Needs a `countersign` wheel built with the `conformance` feature, and the
`countersign` command (`COUNTERSIGN_BIN`, or on PATH) for the durability case, which runs this
file again in other processes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from countersign import conformance

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from countersign_toy_adapter import FRAMEWORK, Done, ToyInterrupt, step  # noqa: E402


class ToyKitAdapter:
    """The toy adapter as the kit drives it: one call, pausing and resuming as toy does."""

    framework = FRAMEWORK
    shape = "resumed_in_place"

    def interrupt(self, setup: conformance.Setup) -> ToyInterrupt:
        return ToyInterrupt()

    def invoke(self, session: conformance.Session, action: str, arguments: dict, run: str) -> Any:
        interrupt = session.interrupt.inner
        first = step(session.control, interrupt, run, action, arguments, session.run_tool)
        if isinstance(first, Done):
            return first.value
        pending = first.pending
        answer = session.review(
            {
                "request_id": pending["request_id"],
                "action": pending["action"],
                "arguments": pending["arguments"],
                "expires_at": pending["expires_at"],
            }
        )
        if answer is None:
            # Nobody answered: the run stays paused and the request pending.
            raise first.refusal
        interrupt.resume_with(
            pending["request_id"],
            {
                "decision": answer["decision"],
                "approver": answer.get("approver"),
                "approver_token": answer.get("approver_token"),
                "note": answer.get("note"),
                # The hash toy showed the person with the question: an interrupt's answer must
                # echo it, and the kernel refuses any other (`mismatch`).
                "action_hash": pending["action_hash"],
            },
        )
        second = step(session.control, interrupt, run, action, arguments, session.run_tool)
        if isinstance(second, Done):
            return second.value
        raise second.refusal


def test_toy_adapter_passes_the_countersign_kit() -> None:
    report = conformance.run(ToyKitAdapter(), relaunch=[sys.executable, __file__])
    print(report.text)
    assert report.ok, report.text


if __name__ == "__main__":
    # The kit's durability case starts this file in other processes; `run` runs their phase.
    conformance.run(ToyKitAdapter(), relaunch=[sys.executable, __file__])
