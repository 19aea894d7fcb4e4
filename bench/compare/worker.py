"""One timed run of one comparison scenario, in one Python library (Countersign's binding or
ctrlrun), on the SQLite store at --store. Started by compare.py; prints one JSON object:
{"library", "scenario", "calls", "seconds", "start", "end"} (start/end: UNIX time, seconds).

With --threads N (scenario effect only, issue #21) the calls are split over N threads of this
one process sharing one Control, started together; the report counts the calls of all.

With --wait-go it prints "ready" once set up and waits for a line on stdin before the timed
part, so concurrent workers start together. With --count-statements (ctrlrun only) it also
reports the SQL statements and transactions its connection ran per call.

Both libraries are driven through their documented execute API with a no-op executor; each
builds, decides, records and runs the action exactly as it would for a user.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = ("noop", "effect", "approval", "duplicate", "evaluate")


class CountersignRunner:
    def __init__(self, store: str, prefix: str) -> None:
        import countersign

        self.cs = countersign
        self.control = countersign.Control(
            os.path.join(HERE, "countersign.yaml"),
            principal="agent:bench",
            store_url=f"sqlite:{store}",
        )
        self.prefix = prefix

    @staticmethod
    def _noop(arguments: dict) -> None:
        return None

    def setup(self, scenario: str) -> None:
        if scenario == "duplicate":
            self.control.execute(
                "stripe.refund", {"payment_id": f"{self.prefix}dup", "amount": 100}, self._noop
            )

    def call(self, scenario: str, n: int) -> None:
        control, noop = self.control, self._noop
        if scenario == "noop":
            control.execute("tool.noop", {"n": n}, noop)
        elif scenario == "effect":
            control.execute("stripe.refund", {"payment_id": f"{self.prefix}{n}", "amount": 100}, noop)
        elif scenario == "approval":
            arguments = {"payment_id": f"{self.prefix}{n}", "amount": 70_000}
            try:
                control.execute("stripe.refund", arguments, noop)
            except self.cs.ApprovalRequired as pending:
                request_id = pending.request_id
            else:
                raise AssertionError("expected approval_required")
            control.approve(request_id, approver="human:bench")
            control.execute("stripe.refund", arguments, noop, approval=request_id)
        elif scenario == "duplicate":
            try:
                control.execute(
                    "stripe.refund", {"payment_id": f"{self.prefix}dup", "amount": 100}, noop
                )
            except self.cs.DuplicateEffect:
                pass
            else:
                raise AssertionError("expected a duplicate refusal")
        else:
            control.evaluate("stripe.refund", {"payment_id": f"{self.prefix}{n}", "amount": 100})


class CtrlrunRunner:
    def __init__(self, store: str, prefix: str) -> None:
        import ctrlrun

        self.ctrlrun = ctrlrun
        self.store = ctrlrun.SQLiteStateStore(store)
        with open(os.path.join(HERE, "ctrlrun.yaml"), encoding="utf-8") as handle:
            policy = ctrlrun.Policy.from_yaml(handle.read())
        # No event sinks (the JSONL files `Control.from_file` adds): the store alone, like ours.
        self.control = ctrlrun.Control(
            policy, self.store, ctrlrun.LocalApprovalProvider(self.store), environment="bench"
        )
        self.principal = ctrlrun.Principal(agent="agent:bench")
        self.prefix = prefix

    @staticmethod
    def _noop() -> None:
        return None

    def _refund(self, payment_id: str, amount: int):
        # ctrlrun's Control.execute takes resolved templates (its decorator resolves them).
        action = self.ctrlrun.Action(
            "stripe.refund",
            {"payment_id": payment_id, "amount": amount},
            self.principal,
            resource=f"payment:{payment_id}",
            environment="bench",
        )
        return action, f"refund:{payment_id}"

    def setup(self, scenario: str) -> None:
        if scenario == "duplicate":
            action, key = self._refund(f"{self.prefix}dup", 100)
            self.control.execute(action, self._noop, effect_key=key)

    def call(self, scenario: str, n: int) -> None:
        ctrlrun, control, noop = self.ctrlrun, self.control, self._noop
        if scenario == "noop":
            control.execute(ctrlrun.Action("tool.noop", {"n": n}, self.principal, environment="bench"), noop)
        elif scenario == "effect":
            action, key = self._refund(f"{self.prefix}{n}", 100)
            control.execute(action, noop, effect_key=key)
        elif scenario == "approval":
            action, key = self._refund(f"{self.prefix}{n}", 70_000)
            try:
                control.execute(action, noop, effect_key=key)
            except ctrlrun.ApprovalRequired as pending:
                request_id = pending.request_id
            else:
                raise AssertionError("expected approval_required")
            # The scripted grant: what ctrlrun's ScriptedApprovalProvider and `ctrlrun approve` do.
            self.store.grant_approval(request_id, "human:bench")
            with ctrlrun.with_approval(request_id):
                action, key = self._refund(f"{self.prefix}{n}", 70_000)
                control.execute(action, noop, effect_key=key)
        elif scenario == "duplicate":
            action, key = self._refund(f"{self.prefix}dup", 100)
            try:
                control.execute(action, noop, effect_key=key)
            except ctrlrun.DuplicateEffect:
                pass
            else:
                raise AssertionError("expected a duplicate refusal")
        else:
            action, _ = self._refund(f"{self.prefix}{n}", 100)
            control.evaluate(action)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", choices=("countersign", "ctrlrun"), required=True)
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--wait-go", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--count-statements", action="store_true")
    parser.add_argument("--count-wal-frames", action="store_true")
    args = parser.parse_args()

    runner_type = CountersignRunner if args.library == "countersign" else CtrlrunRunner
    runner = runner_type(args.store, args.prefix)
    runner.setup(args.scenario)
    statements: list[str] = []
    if args.count_statements:
        if args.library != "ctrlrun":
            sys.exit("--count-statements: only ctrlrun's connection is visible from Python")
        runner.store._connection().set_trace_callback(statements.append)
    if args.count_wal_frames:
        wal_frames(args.store, reset=True)
    if args.wait_go:
        print("ready", flush=True)
        sys.stdin.readline()
    call, scenario = runner.call, args.scenario
    if args.threads > 1:
        if scenario != "effect":
            sys.exit("--threads: scenario effect only")
        calls, start, end, seconds = threaded(runner, args.calls, args.threads)
    else:
        calls = args.calls
        start = time.time()
        started = time.perf_counter()
        for n in range(args.calls):
            call(scenario, n)
        seconds = time.perf_counter() - started
        end = time.time()
    report = {
        "library": f"{args.library}-python" if args.library == "countersign" else "ctrlrun",
        "scenario": scenario,
        "calls": calls,
        "threads": args.threads,
        "seconds": seconds,
        "start": start,
        "end": end,
    }
    if args.count_statements:
        report["statements"] = count_statements(statements)
    if args.count_wal_frames:
        report["wal_frames"], report["transactions"] = wal_frames(args.store, reset=False)
    print(json.dumps(report), flush=True)


def threaded(runner, calls: int, threads: int) -> tuple[int, float, float, float]:
    """allow + effect from `threads` threads sharing `runner` (one Control), `calls // threads`
    each on keys of their own, released together. Returns (calls, start, end, seconds)."""
    import threading

    each = calls // threads
    barrier = threading.Barrier(threads + 1)
    failures: list[BaseException] = []

    def work(index: int) -> None:
        barrier.wait()
        try:
            for n in range(each):
                runner.call("effect", f"t{index}-{n}")
        except BaseException as error:  # reported below, the run fails
            failures.append(error)

    workers = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    start = time.time()
    started = time.perf_counter()
    barrier.wait()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - started
    end = time.time()
    if failures:
        raise failures[0]
    return each * threads, start, end, seconds


WAL_COUNTER = """
import sqlite3, struct, sys
store, mode = sys.argv[1], sys.argv[2]
commits = 0
if mode == "PASSIVE":
    # Read the WAL as written so far: a frame whose header carries a database size ends a
    # transaction (https://www.sqlite.org/fileformat.html#the_write_ahead_log). Frames with
    # other salts are left over from before the reset and are not counted.
    try:
        with open(store + "-wal", "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        data = b""
    page_size = struct.unpack(">I", data[8:12])[0] if len(data) >= 32 else 0
    salts = data[16:24]
    offset = 32
    while page_size and offset + 24 + page_size <= len(data):
        header = data[offset:offset + 24]
        if header[8:16] != salts:
            break
        if struct.unpack(">I", header[4:8])[0] != 0:
            commits += 1
        offset += 24 + page_size
connection = sqlite3.connect(store, isolation_level=None)
busy, frames, _ = connection.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
print(-1 if busy else frames, commits)
"""


def wal_frames(store: str, reset: bool) -> tuple[int, int]:
    """(Pages written to the WAL, transactions committed) since the last reset; each frame is
    one page image. With `reset`, checkpoint everything and empty the WAL first. Asks from
    another process: two SQLite libraries in one process (Python's and the one in
    Countersign's wheel) would break each other's POSIX locks. Exact while the WAL stays under
    the automatic checkpoint (1,000 pages)."""
    import subprocess

    mode = "TRUNCATE" if reset else "PASSIVE"
    out = subprocess.run(
        [sys.executable, "-c", WAL_COUNTER, store, mode],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    frames, commits = int(out[0]), int(out[1])
    if frames < 0:
        raise RuntimeError("the WAL could not be checkpointed: the database is busy")
    return frames, commits


def count_statements(statements: list[str]) -> dict:
    """Transactions and statements from a sqlite3 trace: an explicit BEGIN…COMMIT is one
    transaction; a write outside one is its own (autocommit) transaction."""
    transactions = writes = reads = 0
    inside = False
    for text in statements:
        word = text.lstrip().split(None, 1)[0].upper() if text.strip() else ""
        if word == "BEGIN":
            inside = True
            transactions += 1
        elif word in ("COMMIT", "ROLLBACK", "END"):
            inside = False
        elif word in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
            writes += 1
            if not inside:
                transactions += 1
        elif word in ("SELECT", "WITH", "PRAGMA"):
            reads += 1
    return {"transactions": transactions, "writes": writes, "reads": reads}


if __name__ == "__main__":
    main()
