"""Countersign side by side with ctrlrun (issue #8): the same scenarios, the same machine, one run.

Run by `cargo xtask bench --compare` (which makes the venv, installs the pinned ctrlrun and our
wheel, and builds the Rust worker); run it directly with the venv's python:

    python bench/compare/compare.py --rust-bin target/release/countersign-bench [--quick]

Every timed run is its own process (worker.py for the Python libraries, `countersign-bench
--compare-worker` for Rust) on a fresh SQLite file in a temporary folder. Runs are interleaved:
each round runs every library once per scenario, and the order of the libraries rotates from
round to round, so machine drift lands on all of them alike. The report is the median calls per
second over the rounds, with the load average seen at the runs. Figures are printed, never
asserted.

SQLite settings, the same for both libraries: WAL journal, synchronous=NORMAL (each library's
default), every read-modify-write in its own BEGIN IMMEDIATE transaction.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = [
    ("noop", "(1) allow, no effect key"),
    ("effect", "(2) allow + effect key"),
    ("approval", "(3) approve → grant → execute"),
    ("duplicate", "(4) duplicate refused"),
    ("evaluate", "(5) policy evaluation only"),
]
LIBRARIES = ["ctrlrun", "countersign-python", "countersign-rust"]


class Harness:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.python = args.python
        self.rust_bin = os.path.abspath(args.rust_bin)
        self.scratch = tempfile.mkdtemp(prefix="countersign-compare-")

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def fresh_store(self) -> str:
        folder = tempfile.mkdtemp(dir=self.scratch)
        return os.path.join(folder, "bench.db")

    def command(self, library: str, scenario: str, calls: int, store: str, prefix: str = "",
                wait_go: bool = False, threads: int = 1) -> list[str]:
        if library == "countersign-rust":
            command = [self.rust_bin, "--compare-worker", scenario]
        else:
            name = "ctrlrun" if library == "ctrlrun" else "countersign"
            command = [self.python, os.path.join(HERE, "worker.py"), "--library", name,
                       "--scenario", scenario]
        command += ["--calls", str(calls), "--store", store]
        if prefix:
            command += ["--prefix", prefix]
        if wait_go:
            command.append("--wait-go")
        if threads > 1:
            command += ["--threads", str(threads)]
        return command

    def run(self, library: str, scenario: str, calls: int, store: str, prefix: str = "",
            threads: int = 1) -> dict:
        output = subprocess.run(
            self.command(library, scenario, calls, store, prefix, threads=threads),
            check=True, capture_output=True, text=True,
        )
        return json.loads(output.stdout.strip().splitlines()[-1])

    def calls(self, library: str, scenario: str) -> int:
        calls = self.args.calls_ctrlrun if library == "ctrlrun" else self.args.calls
        if scenario == "evaluate":
            calls *= 4  # nothing is written: short runs would measure the clock
        return max(1, calls)


def load() -> float:
    return os.getloadavg()[0]


def rotated(items: list, by: int) -> list:
    by %= len(items)
    return items[by:] + items[:by]


def median_rate(runs: list[dict]) -> float:
    return statistics.median(run["calls"] / run["seconds"] for run in runs)


def load_range(loads: list[float]) -> str:
    return f"{min(loads):.1f}–{max(loads):.1f}" if loads else "-"


def scenarios(harness: Harness) -> dict:
    rounds = harness.args.rounds
    results: dict = {name: {library: [] for library in LIBRARIES} for name, _ in SCENARIOS}
    loads: dict = {name: [] for name, _ in SCENARIOS}
    for round_index in range(rounds):
        for scenario, _ in SCENARIOS:
            for library in rotated(LIBRARIES, round_index):
                loads[scenario].append(load())
                run = harness.run(library, scenario, harness.calls(library, scenario),
                                  harness.fresh_store())
                results[scenario][library].append(run)
        print(f"  round {round_index + 1}/{rounds} done (load {load():.1f})", file=sys.stderr)
    table = []
    for scenario, label in SCENARIOS:
        ctrlrun = median_rate(results[scenario]["ctrlrun"])
        python = median_rate(results[scenario]["countersign-python"])
        rust = median_rate(results[scenario]["countersign-rust"])
        table.append({
            "scenario": scenario, "label": label, "ctrlrun": ctrlrun,
            "countersign_python": python, "countersign_rust": rust,
            "python_ratio": python / ctrlrun, "rust_ratio": rust / ctrlrun,
            "load": load_range(loads[scenario]),
        })
    return {"rounds": rounds, "rows": table}


def print_scenarios(report: dict) -> None:
    print(f"\n### Scenarios (median of {report['rounds']} interleaved rounds, calls/s)\n")
    print("| scenario | ctrlrun | Countersign from Python | ratio | Countersign from Rust "
          "| ratio | load avg |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for row in report["rows"]:
        print(f"| {row['label']} | {row['ctrlrun']:,.0f} | {row['countersign_python']:,.0f} "
              f"| {row['python_ratio']:.1f}× | {row['countersign_rust']:,.0f} "
              f"| {row['rust_ratio']:.1f}× | {row['load']} |")


def concurrent(harness: Harness, library: str, workers: int, calls: int) -> tuple[float, float]:
    """`workers` processes, one store, allow + effect with distinct keys; all start together.
    Returns (total calls per second over the span from the first start to the last end, load)."""
    store = harness.fresh_store()
    # Create the store once, so the workers race on calls and not on creating the schema.
    harness.run(library, "effect", 0, store)
    processes = [
        subprocess.Popen(
            harness.command(library, "effect", calls, store, prefix=f"w{index}-", wait_go=True),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        for index in range(workers)
    ]
    for process in processes:
        line = process.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"{library} worker did not start: {line!r}")
    observed = load()
    for process in processes:
        process.stdin.write("go\n")
        process.stdin.flush()
    reports = []
    for process in processes:
        out, _ = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"{library} worker failed with {process.returncode}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    span = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    return sum(r["calls"] for r in reports) / span, observed


def scaling(harness: Harness) -> dict:
    rows = []
    for workers in harness.args.workers:
        rates: dict = {library: [] for library in LIBRARIES}
        loads = []
        for round_index in range(harness.args.scaling_rounds):
            for library in rotated(LIBRARIES, round_index):
                per_worker = max(1, harness.calls(library, "effect") // 2)
                rate, observed = concurrent(harness, library, workers, per_worker)
                rates[library].append(rate)
                loads.append(observed)
        rows.append({
            "workers": workers,
            **{library: statistics.median(rates[library]) for library in LIBRARIES},
            "load": load_range(loads),
        })
        print(f"  {workers} workers done (load {load():.1f})", file=sys.stderr)
    return {"rounds": harness.args.scaling_rounds, "rows": rows}


def print_scaling(report: dict) -> None:
    print(f"\n### allow + effect key, concurrent worker processes on one store "
          f"(total calls/s, median of {report['rounds']})\n")
    print("| workers | ctrlrun | Countersign from Python | ratio | Countersign from Rust | ratio "
          "| load avg |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for row in report["rows"]:
        c, p, r = row["ctrlrun"], row["countersign-python"], row["countersign-rust"]
        print(f"| {row['workers']} | {c:,.0f} | {p:,.0f} | {p / c:.1f}× | {r:,.0f} "
              f"| {r / c:.1f}× | {row['load']} |")


def threads(harness: Harness) -> dict:
    """allow + effect key from N threads of one process sharing one Control (issue #21), each
    library, interleaved as the scenarios are; total calls/s, median over the rounds."""
    rows = []
    counts = harness.args.threads
    rates: dict = {count: {library: [] for library in LIBRARIES} for count in counts}
    loads: dict = {count: [] for count in counts}
    for round_index in range(harness.args.rounds):
        for count in rotated(counts, round_index):
            for library in rotated(LIBRARIES, round_index):
                loads[count].append(load())
                run = harness.run(library, "effect", harness.calls(library, "effect"),
                                  harness.fresh_store(), threads=count)
                rates[count][library].append(run["calls"] / run["seconds"])
        print(f"  threads round {round_index + 1}/{harness.args.rounds} done (load {load():.1f})",
              file=sys.stderr)
    for count in counts:
        rows.append({
            "threads": count,
            **{library: statistics.median(rates[count][library]) for library in LIBRARIES},
            "load": load_range(loads[count]),
        })
    return {"rounds": harness.args.rounds, "rows": rows}


def print_threads(report: dict) -> None:
    print(f"\n### allow + effect key, N threads in one process sharing one Control "
          f"(total calls/s, median of {report['rounds']})\n")
    print("| threads | ctrlrun | Countersign from Python | ratio | Countersign from Rust | ratio "
          "| load avg |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for row in report["rows"]:
        c, p, r = row["ctrlrun"], row["countersign-python"], row["countersign-rust"]
        print(f"| {row['threads']} | {c:,.0f} | {p:,.0f} | {p / c:.1f}× | {r:,.0f} "
              f"| {r / c:.1f}× | {row['load']} |")
    first, last = report["rows"][0], report["rows"][-1]
    print(f"\n{last['threads']} threads ÷ {first['threads']}: " + ", ".join(
        f"{library} {last[library] / first[library]:.2f}×" for library in LIBRARIES))


def copy_store(source: str) -> str:
    """A copy of the store at `source` (with its WAL, if any) in a new folder beside it, flushed
    to disk: otherwise the first checkpoint's fsync in the timed run would also write out the
    whole copy, and a bigger log would look slower for that alone."""
    folder = tempfile.mkdtemp(dir=os.path.dirname(os.path.dirname(source)))
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(source + suffix):
            target = os.path.join(folder, "bench.db" + suffix)
            shutil.copyfile(source + suffix, target)
            with open(target, "rb+") as handle:
                os.fsync(handle.fileno())
    return os.path.join(folder, "bench.db")


def receipt_count(store: str) -> int:
    with sqlite3.connect(store) as connection:
        return connection.execute("SELECT count(*) FROM receipts").fetchone()[0]


def growth(harness: Harness) -> dict:
    """Per-call time of allow + effect on a store already holding 0, 10k, 100k... receipts.
    The log is filled once per library (through the library itself, allow + effect calls) and
    each timed run works on a copy of it."""
    sizes = [0] + harness.args.growth
    libraries = harness.args.growth_libraries
    snapshots: dict = {library: {} for library in libraries}
    for library in libraries:
        store = harness.fresh_store()
        harness.run(library, "effect", 0, store)
        filled = 0
        for size in sizes:
            if size > filled:
                started = time.perf_counter()
                harness.run(library, "effect", size - filled, store, prefix=f"fill{size}-")
                print(f"  {library}: filled to {size} calls in {time.perf_counter() - started:.0f} s",
                      file=sys.stderr)
                filled = size
            snapshot = copy_store(store)
            snapshots[library][size] = (snapshot, receipt_count(snapshot))
    # Sizes are interleaved too (each round measures every size), so drift lands on all rows.
    per_call: dict = {size: {library: [] for library in libraries} for size in sizes}
    loads: dict = {size: [] for size in sizes}
    for round_index in range(harness.args.rounds):
        for size in rotated(sizes, round_index):
            for library in rotated(libraries, round_index):
                store = copy_store(snapshots[library][size][0])
                loads[size].append(load())
                run = harness.run(library, "effect", harness.calls(library, "effect"), store,
                                  prefix="m-")
                per_call[size][library].append(run["seconds"] / run["calls"] * 1e6)
                shutil.rmtree(os.path.dirname(store), ignore_errors=True)
        print(f"  growth round {round_index + 1}/{harness.args.rounds} done (load {load():.1f})",
              file=sys.stderr)
    rows = [
        {
            "calls_before": size,
            "receipts": {library: snapshots[library][size][1] for library in libraries},
            "per_call_us": {
                library: statistics.median(per_call[size][library]) for library in libraries
            },
            "load": load_range(loads[size]),
        }
        for size in sizes
    ]
    return {"libraries": libraries, "rows": rows}


def print_growth(report: dict) -> None:
    libraries = report["libraries"]
    print("\n### allow + effect key as the receipt log grows (µs per call, median; "
          "change from the row above)\n")
    print("| calls already made | " + " | ".join(
        f"{library} (receipts in log)" for library in libraries) + " | load avg |")
    print("|---:|" + "---:|" * len(libraries) + "---|")
    previous = report["rows"][0]["per_call_us"]
    for row in report["rows"]:
        cells = []
        for library in libraries:
            us = row["per_call_us"][library]
            change = (us / previous[library] - 1) * 100
            cells.append(f"{us:,.0f} µs ({row['receipts'][library]:,}; {change:+.0f}%)")
        print(f"| {row['calls_before']:,} | " + " | ".join(cells) + f" | {row['load']} |")
        previous = row["per_call_us"]


def table_rows(store: str) -> dict:
    with sqlite3.connect(store) as connection:
        tables = [name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {name: connection.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
                for name in tables}


def writes(harness: Harness) -> dict:
    """Rows each scenario adds per call (table counts after N calls minus after 0) and pages
    written to the WAL per call, for both libraries; ctrlrun's transactions and statements per
    call (its sqlite3 trace). Countersign's side runs through the Python binding: the same
    kernel and store as from Rust."""
    calls = 20
    report = {}
    for scenario, _ in SCENARIOS:
        report[scenario] = {}
        for library in ("ctrlrun", "countersign-python"):
            before = harness.fresh_store()
            harness.run(library, scenario, 0, before)
            after = harness.fresh_store()
            harness.run(library, scenario, calls, after)
            rows_before, rows_after = table_rows(before), table_rows(after)
            added = {name: (rows_after[name] - rows_before.get(name, 0)) / calls
                     for name in rows_after if rows_after[name] != rows_before.get(name, 0)}
            entry: dict = {"rows_per_call": added}
            command = harness.command(library, scenario, calls, harness.fresh_store())
            command.append("--count-wal-frames")
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            counted = json.loads(out.strip().splitlines()[-1])
            entry["wal_pages_per_call"] = counted["wal_frames"] / calls
            entry["transactions_per_call"] = counted["transactions"] / calls
            if library == "ctrlrun":
                command = harness.command(library, scenario, calls, harness.fresh_store())
                command.append("--count-statements")
                out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                counted = json.loads(out.strip().splitlines()[-1])["statements"]
                entry["per_call"] = {key: value / calls for key, value in counted.items()}
            report[scenario][library] = entry
    return report


def print_writes(report: dict) -> None:
    print("\n### What one call writes (per call: rows added by table; pages written to the WAL)\n")
    print("| scenario | ctrlrun rows | ctrlrun transactions (statements) | ctrlrun WAL pages "
          "| Countersign rows | Countersign transactions | Countersign WAL pages |")
    print("|---|---|---|---:|---|---:|---:|")
    for scenario, label in SCENARIOS:
        ctrlrun = report[scenario]["ctrlrun"]
        ours = report[scenario]["countersign-python"]

        def rows(entry: dict) -> str:
            added = entry["rows_per_call"]
            return ", ".join(f"{name} {count:g}" for name, count in sorted(added.items())) or "none"

        per_call = ctrlrun["per_call"]
        print(f"| {label} | {rows(ctrlrun)} | {ctrlrun['transactions_per_call']:g} "
              f"({per_call['writes']:g} writes, {per_call['reads']:g} reads) "
              f"| {ctrlrun['wal_pages_per_call']:.1f} | {rows(ours)} "
              f"| {ours['transactions_per_call']:g} | {ours['wal_pages_per_call']:.1f} |")


def versions(harness: Harness) -> dict:
    out = subprocess.run(
        [harness.python, "-c",
         "import importlib.metadata as m, sqlite3, platform; print(m.version('ctrlrun')); "
         "print(m.version('countersign')); print(sqlite3.sqlite_version); "
         "print(platform.python_version())"],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    memory = ""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            kib = int(handle.readline().split()[1])
            memory = f"{kib / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    return {
        "ctrlrun": out[0], "countersign_python": out[1], "python_sqlite": out[2],
        "python": out[3], "cores": os.cpu_count(), "memory": memory,
        "machine": platform.platform(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rust-bin", required=True, help="the release countersign-bench binary")
    parser.add_argument("--python", default=sys.executable,
                        help="the venv python that has ctrlrun and countersign installed")
    parser.add_argument("--quick", action="store_true",
                        help="tiny counts, one round: checks the harness, measures nothing")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scaling-rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3000, help="calls per Countersign run")
    parser.add_argument("--calls-ctrlrun", type=int, default=300, help="calls per ctrlrun run")
    parser.add_argument("--workers", type=lambda t: [int(x) for x in t.split(",")],
                        default=[1, 2, 4, 8])
    parser.add_argument("--threads", type=lambda t: [int(x) for x in t.split(",")],
                        default=[1, 8], help="thread counts of the threads part, comma-separated")
    parser.add_argument("--growth", type=lambda t: [int(x) for x in t.split(",") if x],
                        default=[10_000, 100_000], help="receipt log sizes, comma-separated")
    parser.add_argument("--growth-libraries", type=lambda t: t.split(","), default=LIBRARIES)
    parser.add_argument("--only", default="scenarios,threads,writes,scaling,growth",
                        help="parts to run, comma-separated: "
                             "scenarios,threads,writes,scaling,growth")
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.scaling_rounds = 1, 1
        args.calls, args.calls_ctrlrun = 20, 5
        args.workers = [1, 2]
        args.threads = [1, 2]
        args.growth = [50]
    parts = args.only.split(",")
    harness = Harness(args)
    report: dict = {"versions": versions(harness)}
    try:
        v = report["versions"]
        print(f"ctrlrun {v['ctrlrun']}, countersign (Python package) {v['countersign_python']}, "
              f"Python {v['python']}, SQLite {v['python_sqlite']} (Python's); {v['cores']} cores, "
              f"{v['memory']}; load average at start {load():.1f}")
        if args.quick:
            print("--quick: tiny counts, one round; checks the harness, measures nothing")
        if "scenarios" in parts:
            report["scenarios"] = scenarios(harness)
            print_scenarios(report["scenarios"])
        if "threads" in parts:
            report["threads"] = threads(harness)
            print_threads(report["threads"])
        if "writes" in parts:
            report["writes"] = writes(harness)
            print_writes(report["writes"])
        if "scaling" in parts:
            report["scaling"] = scaling(harness)
            print_scaling(report["scaling"])
        if "growth" in parts:
            report["growth"] = growth(harness)
            print_growth(report["growth"])
        sys.stdout.flush()
    finally:
        harness.close()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
