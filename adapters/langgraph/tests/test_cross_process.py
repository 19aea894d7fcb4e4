"""Pause in one process, answer and resume in another, on both checkpointers: a SQLite file
(langgraph-checkpoint-sqlite, the kernel's store a SQLite file beside it) and PostgreSQL
(langgraph-checkpoint-postgres and the kernel's store in the test database)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

WORKER = Path(__file__).parent / "process_worker.py"


def step(name: str, folder: Path, store_url: str, kind: str, thread: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(WORKER), name, str(folder), store_url, kind, thread],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def runs(folder: Path) -> list[str]:
    path = folder / "runs.txt"
    return path.read_text().splitlines() if path.exists() else []


def cli() -> str:
    return os.environ.get("COUNTERSIGN_BIN", "countersign")


def postgres_url() -> str:
    url = os.environ.get("COUNTERSIGN_TEST_POSTGRES_URL")
    if not url:
        pytest.fail(
            "COUNTERSIGN_TEST_POSTGRES_URL is not set: run `bash .ci/postgres.sh ENV_FILE` and "
            "`source ENV_FILE` first (the PostgreSQL cross-process test needs the test database)"
        )
    return url


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_pause_in_one_process_answer_and_resume_in_another(tmp_path: Path, kind: str) -> None:
    store = f"sqlite:{tmp_path / 'countersign.db'}" if kind == "sqlite" else postgres_url()
    thread = f"xp-{uuid.uuid4().hex}"
    paused = step("start", tmp_path, store, kind, thread)
    assert len(paused["pauses"]) == 1 and runs(tmp_path) == []
    resumed = step("resume", tmp_path, store, kind, thread)
    assert resumed["pauses"] == []
    assert [m["content"] for m in resumed["tool_messages"]] == [f"refunded {thread}"]
    assert runs(tmp_path) == [f"refund {thread}"]
    # A third process replaying the thread runs nothing again.
    again = step("continue", tmp_path, store, kind, thread)
    assert again["pauses"] == [] and runs(tmp_path) == [f"refund {thread}"]
    if kind == "postgres":
        assert not list(tmp_path.rglob("*.db")), "nothing is kept beside the stores"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_answered_with_the_cli_and_continued_in_another_process(tmp_path: Path, kind: str) -> None:
    store = f"sqlite:{tmp_path / 'countersign.db'}" if kind == "sqlite" else postgres_url()
    thread = f"xp-{uuid.uuid4().hex}"
    paused = step("start", tmp_path, store, kind, thread)
    (pause,) = paused["pauses"]
    approved = subprocess.run(
        [cli(), "--policy", str(tmp_path / "countersign.yaml"), "--store-url", store, "approve",
         pause["request_id"], "--as", "human:alice"],
        capture_output=True, text=True, timeout=60,
    )
    assert approved.returncode == 0, approved.stderr
    resumed = step("continue", tmp_path, store, kind, thread)
    assert resumed["pauses"] == []
    assert [m["content"] for m in resumed["tool_messages"]] == [f"refunded {thread}"]
    assert runs(tmp_path) == [f"refund {thread}"]
