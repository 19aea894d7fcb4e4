"""The floor under allow + effect key: SQLite alone doing the same two commits per call (a
small row inserted in one `BEGIN IMMEDIATE` transaction; in the next, that row updated and a
1 KB row appended), WAL and synchronous=NORMAL like both libraries, nothing else. Prints the
JSON line the workers print, so it can be timed beside them:

    python bench/compare/sqlite_floor.py STORE CALLS
"""

import json
import sqlite3
import sys
import time


def main() -> None:
    store, calls = sys.argv[1], int(sys.argv[2])
    connection = sqlite3.connect(store, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("CREATE TABLE effects (key TEXT PRIMARY KEY, state TEXT) WITHOUT ROWID")
    connection.execute("CREATE TABLE receipts (seq INTEGER PRIMARY KEY, body TEXT)")
    body = "x" * 1000
    started = time.perf_counter()
    for n in range(calls):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO effects VALUES (?, 'reserved')", (f"k{n}",))
        connection.execute("COMMIT")
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("UPDATE effects SET state = 'committed' WHERE key = ?", (f"k{n}",))
        connection.execute("INSERT INTO receipts (body) VALUES (?)", (body,))
        connection.execute("COMMIT")
    seconds = time.perf_counter() - started
    print(json.dumps({"library": "sqlite-floor", "calls": calls, "seconds": seconds}))


if __name__ == "__main__":
    main()
