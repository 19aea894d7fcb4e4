"""The adapter conformance kit, driven through this adapter (through the binding).

The kit is the Rust one (``countersign.conformance``); :mod:`kit_adapter` plays this adapter in
it with the real SDK and a scripted model. The report is compared with a checked-in snapshot;
four deliberately broken variants must each fail the suite they name, which shows the kit can
fail an adapter of this shape.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kit_adapter import (
    ForgetsTheCallLedger,
    OpenAIAgentsKitAdapter,
    RejectsInTheSdkOnly,
    SharesOneRunIdAcrossRuns,
    TakesTheApproverFromTheRunState,
    TrustsTheSdkFlag,
    run_kit,
)

SNAPSHOT = Path(__file__).parent / "snapshots" / "conformance-report.txt"


def test_the_adapter_passes_the_conformance_kit() -> None:
    report = run_kit()
    if os.environ.get("COUNTERSIGN_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(report.text)
    assert report.ok, report.text
    assert report.data["framework"] == "openai-agents"
    assert report.data["shape"] == "decided_before_invocation"
    assert (report.data["passed"], report.data["applicable"], report.data["not_applicable"]) == (
        17,
        17,
        1,
    )
    assert report.text == SNAPSHOT.read_text(), (
        "the report changed; review it and rerun with COUNTERSIGN_UPDATE_SNAPSHOTS=1"
    )


@pytest.mark.parametrize(
    "variant, suite",
    [
        (TrustsTheSdkFlag, "kernel"),
        (RejectsInTheSdkOnly, "denial"),
        (ForgetsTheCallLedger, "binding"),
        (TakesTheApproverFromTheRunState, "entitlement"),
        (SharesOneRunIdAcrossRuns, "entitlement"),
    ],
)
def test_a_broken_variant_fails_the_suite_it_names(variant: type, suite: str) -> None:
    report = run_kit(variant.framework)
    assert not report.ok, report.text
    status = {entry["suite"]: entry["status"] for entry in report.data["suites"]}
    assert status[suite] == "fail", report.text


class _NoInterrupt:
    framework = "incomplete"
    shape = "decided_before_invocation"

    def invoke(self, session: object, action: str, arguments: dict, run: str) -> dict:
        return {}


def test_an_adapter_missing_a_part_is_refused_before_any_case_runs() -> None:
    from countersign import conformance

    with pytest.raises(TypeError, match="lacks `interrupt`"):
        conformance.run(_NoInterrupt(), relaunch=[sys.executable, "-c", "pass"])


class _InterruptWithoutClaim:
    """An interrupt that never says whether it carries the approved arguments."""

    def interrupt(self, pending: dict) -> None:
        return None


class _SilentAboutArguments(OpenAIAgentsKitAdapter):
    framework = "openai-agents-silent-interrupt"

    def interrupt(self, setup: object) -> _InterruptWithoutClaim:
        return _InterruptWithoutClaim()


def test_an_interrupt_that_makes_no_claim_never_makes_binding_not_applicable() -> None:
    from countersign import conformance

    report = conformance.run(
        _SilentAboutArguments(), relaunch=[sys.executable, "-c", "raise SystemExit(1)"]
    )
    status = {entry["suite"]: entry["status"] for entry in report.data["suites"]}
    # Applicable (this adapter answers through the answer API, so it even passes); never
    # "not applicable" because the interrupt lacked the attribute.
    assert status["binding"] in ("pass", "fail"), report.text
