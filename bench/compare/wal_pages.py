"""Which tables and indexes a Countersign scenario writes: pages written to the WAL per call,
by table or index (docs/benchmarks.md, issue #21's third pass).

    python bench/compare/wal_pages.py SCENARIO [CALLS]

Runs CALLS calls (default 50) of SCENARIO (worker.py's: noop, effect, approval, duplicate)
through the `countersign` wheel on a fresh store in a temporary folder, after five warm-up calls
and a checkpoint that empties the WAL; copies the store and its WAL while the store is still
open (SQLite removes the WAL when the last connection closes); reads each WAL frame's page
number; and names each page through SQLite's `dbstat` table (Python's `sqlite3`, which has it).
Keep CALLS × pages per call under the automatic checkpoint (1,000 pages) so that no frame is
overwritten. Prints one line per table or index, most pages first, and the total.
"""

from __future__ import annotations

import collections
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import worker  # noqa: E402  (beside this file)


def frame_pages(wal: bytes) -> list[int]:
    """The page number of every frame of a WAL file (its 32-byte header, then frames of a
    24-byte header and one page each; https://sqlite.org/fileformat.html#the_write_ahead_log)."""
    if len(wal) < 32:
        return []
    page_size = struct.unpack(">I", wal[8:12])[0]
    pages, offset = [], 32
    while offset + 24 + page_size <= len(wal):
        pages.append(struct.unpack(">I", wal[offset:offset + 4])[0])
        offset += 24 + page_size
    return pages


def main() -> None:
    if len(sys.argv) not in (2, 3) or sys.argv[1] not in worker.SCENARIOS:
        sys.exit(f"usage: wal_pages.py SCENARIO [CALLS]  (SCENARIO: {', '.join(worker.SCENARIOS)})")
    scenario, calls = sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 50
    folder = tempfile.mkdtemp(prefix="countersign-wal-pages-")
    store = os.path.join(folder, "bench.db")
    runner = worker.CountersignRunner(store, "")
    runner.setup(scenario)
    for n in range(5):
        runner.call(scenario, 1_000_000 + n)
    # From another process: two SQLite libraries in one process break each other's locks.
    subprocess.run(
        [sys.executable, "-c",
         "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')",
         store],
        check=True,
    )
    for n in range(calls):
        runner.call(scenario, n)
    snapshot = os.path.join(folder, "snapshot.db")
    shutil.copy(store, snapshot)
    shutil.copy(store + "-wal", snapshot + "-wal")
    with open(snapshot + "-wal", "rb") as file:
        pages = frame_pages(file.read())
    names = {page: name for name, page in sqlite3.connect(snapshot).execute("SELECT name, pageno FROM dbstat")}
    counted = collections.Counter(names.get(page, f"page {page}") for page in pages)
    for name, count in counted.most_common():
        print(f"{name:32s} {count / calls:6.2f}")
    print(f"{'total pages per call':32s} {len(pages) / calls:6.2f}")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
