"""The adapter conformance kit, driven through this adapter (through the binding).

The kit is the Rust one (``countersign.conformance``); :mod:`kit_adapter` plays this adapter in
it with real LangChain/LangGraph and a scripted chat model. The report is compared with a
checked-in snapshot; four deliberately broken variants must each fail the suite they name,
which shows the kit can fail an adapter of this shape.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kit_adapter import (
    EchoesThePendingArguments,
    OneThreadForEveryRun,
    ReusesAnEarlierAnswer,
    TakesTheApproverFromThePayload,
    run_kit,
)

SNAPSHOT = Path(__file__).parent / "snapshots" / "conformance-report.txt"


def test_the_adapter_passes_the_conformance_kit() -> None:
    report = run_kit()
    if os.environ.get("COUNTERSIGN_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(report.text)
    assert report.ok, report.text
    assert report.data["framework"] == "langgraph"
    assert report.data["shape"] == "resumed_in_place"
    # Every case applies to a resumed-in-place adapter that prevents: nothing is claimed
    # not applicable (the reference adapter's count, `cargo xtask conformance`).
    assert (report.data["passed"], report.data["applicable"], report.data["not_applicable"]) == (
        18,
        18,
        0,
    )
    assert report.text == SNAPSHOT.read_text(), (
        "the report changed; review it and rerun with COUNTERSIGN_UPDATE_SNAPSHOTS=1"
    )


@pytest.mark.parametrize(
    "variant, suite",
    [
        (TakesTheApproverFromThePayload, "entitlement"),
        (OneThreadForEveryRun, "entitlement"),
        (EchoesThePendingArguments, "binding"),
        (ReusesAnEarlierAnswer, "denial"),
    ],
)
def test_a_broken_variant_fails_the_suite_it_names(variant: type, suite: str) -> None:
    report = run_kit(variant.framework)
    assert not report.ok, report.text
    status = {entry["suite"]: entry["status"] for entry in report.data["suites"]}
    assert status[suite] == "fail", report.text
