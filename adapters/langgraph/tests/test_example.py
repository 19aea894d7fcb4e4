"""examples/langgraph runs offline: it pauses, is answered through the graph, refunds once,
and its receipt chain verifies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "langgraph" / "main.py"


def test_the_example_runs_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--folder", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("[tool] refunding 25000 on o-7") == 1
    assert "receipt 2: answer/granted refund_order approved human:alice" in done.stdout
    assert "== receipt chain: intact" in done.stdout
