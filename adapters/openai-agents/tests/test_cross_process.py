"""Durable: pause in one process, answer with the `countersign` CLI from another, resume in a
third; the approved call runs exactly once, and a fourth process replaying the saved state runs
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import write_policy

WORKER = Path(__file__).parent / "process_worker.py"


def cli() -> str:
    explicit = os.environ.get("COUNTERSIGN_BIN")
    if explicit:
        return explicit
    target = os.environ.get("CARGO_TARGET_DIR", str(Path(__file__).parents[3] / "target"))
    path = Path(target) / "debug" / "countersign"
    assert path.exists(), (
        f"no countersign binary at `{path}`: run `cargo build -p countersign-cli` or set "
        "COUNTERSIGN_BIN"
    )
    return str(path)


def step(name: str, folder: Path, env: "dict[str, str] | None" = None):
    done = subprocess.run(
        [sys.executable, str(WORKER), name, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def runs(folder: Path) -> list[str]:
    log = folder / "runs.log"
    return log.read_text().splitlines() if log.exists() else []


def test_pause_answer_with_the_cli_and_resume_in_three_processes(tmp_path: Path) -> None:
    policy = write_policy(tmp_path)
    [request_id] = step("pause", tmp_path)
    assert runs(tmp_path) == []

    answered = subprocess.run(
        [cli(), "--policy", str(policy), "approve", request_id, "--as", "human:carol"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answered.returncode == 0, answered.stderr

    resumed = step("resume", tmp_path)
    assert resumed["pending"] == 0
    assert len(runs(tmp_path)) == 1

    replayed = step("resume", tmp_path)
    assert replayed == {"refused": "consumed"}
    assert len(runs(tmp_path)) == 1

    inspected = subprocess.run(
        [cli(), "--policy", str(policy), "--json", "receipts", "--verify"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert inspected.returncode == 0, inspected.stderr + inspected.stdout


def test_on_postgres_pause_answer_with_the_cli_and_resume_in_another_process(
    tmp_path: Path,
) -> None:
    """Issue #13: the same three steps on the test PostgreSQL database, with no file shared
    between the processes but the policy: the request, its answer and the call's mapping all
    live in the kernel's store."""
    base = os.environ.get("COUNTERSIGN_TEST_POSTGRES_URL")
    assert base, (
        "COUNTERSIGN_TEST_POSTGRES_URL is not set: run `bash .ci/postgres.sh ENV_FILE` and "
        "`source ENV_FILE` (this test needs PostgreSQL)"
    )
    schema = f"oa_{os.getpid()}_{tmp_path.name.replace('-', '_')}".lower()
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    policy = write_policy(tmp_path)
    env = {**os.environ, "COUNTERSIGN_STORE_URL": url}

    [request_id] = step("pause", tmp_path, env)
    assert runs(tmp_path) == []
    assert not list(tmp_path.rglob("*.db")), "no SQLite file: nothing is kept beside the store"

    answered = subprocess.run(
        [cli(), "--policy", str(policy), "--store-url", url, "approve", request_id,
         "--as", "human:carol"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answered.returncode == 0, answered.stderr

    resumed = step("resume", tmp_path, env)
    assert resumed["pending"] == 0
    [line] = runs(tmp_path)
    assert line.startswith("refund o1 ")

    replayed = step("resume", tmp_path, env)
    assert replayed == {"refused": "consumed"}
    assert len(runs(tmp_path)) == 1
    assert not list(tmp_path.rglob("*.db"))
