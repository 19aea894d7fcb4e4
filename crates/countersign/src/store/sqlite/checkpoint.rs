//! Checkpoints off the write path (issue #21): a store's own thread copies the write-ahead log
//! back into the database file, so the caller holding the connection does not wait on it.
//!
//! In WAL mode with `synchronous=NORMAL` a commit appends pages to the `-wal` file and does not
//! sync. The sync happens at a *checkpoint*, which copies the logged pages into the database
//! file and syncs both files. SQLite runs one by default inside the commit that takes the log
//! past 1,000 pages (`wal_autocheckpoint`). On the benchmark machine of docs/benchmarks.md
//! ("Issue #21, eighth pass") those two syncs took about 2–3 ms each, and every caller waited on
//! them: a lone caller spent a quarter of its time there, and a group's callers all waited
//! while their leader synced.
//!
//! So a writing connection gets a [`Checkpointer`]:
//!
//! - **Woken, not waited on.** The connection's WAL hook (`sqlite3_wal_hook`, which replaces the
//!   automatic checkpoint) wakes the checkpointer's thread each time the log has grown by
//!   [`Thresholds::wake_every`] pages since it last did. The thread runs a `PASSIVE` checkpoint
//!   on a connection of its own: it copies what no reader still needs and never blocks a
//!   writer or a reader (<https://www.sqlite.org/c3ref/wal_checkpoint_v2.html>).
//! - **Bounded.** A writer that never pauses can keep a passive checkpoint from ever finishing,
//!   and SQLite only starts the log over once one has. When the log reaches
//!   [`Thresholds::inline_at`] pages, the committing connection checkpoints in the hook itself,
//!   as SQLite's automatic checkpoint would have. By then the thread has copied all but the
//!   newest pages, so the caller waits for two syncs and little copying, once per
//!   `inline_at` pages instead of once per 1,000.
//! - **Never a failed commit.** The hook runs after the commit is durable as configured, and an
//!   error it returned would be reported as the commit's own (SQLite's documentation). It
//!   therefore returns `SQLITE_OK` whatever happens; a checkpoint that could not run (another
//!   process's checkpointer holds the lock) is tried again at the next commit.
//! - **Fails safe.** If the thread or its connection cannot be started, the store keeps
//!   SQLite's own automatic checkpoint: slower, never wrong.
//!
//! What is durable: no commit is lost to a crash of the process, as before. Under
//! `synchronous=NORMAL` a power loss can drop the commits since the log was last synced, which
//! a checkpoint does first: about every 1,000 pages while the thread keeps up, as before, and at
//! most `inline_at` pages when it does not. The `-wal` file is reused from its start after a
//! checkpoint has copied all of it, never shrunk while the store is open: it grows to about
//! 66 MB (16,000 frames of 4 KiB and a 24-byte header) under a writer that never pauses, and is
//! removed when the last connection to the database closes.

use std::ffi::c_int;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

/// When the checkpointer is woken and when the writer checkpoints itself, in log pages (frames).
#[derive(Clone, Copy, Debug)]
pub(super) struct Thresholds {
    /// Wake the thread each time the log has grown by this many pages: SQLite's own default
    /// automatic checkpoint interval (1,000 pages).
    pub(super) wake_every: c_int,
    /// Checkpoint on the committing connection once the log holds this many pages.
    pub(super) inline_at: c_int,
}

impl Thresholds {
    /// The store's: wake every 1,000 pages, checkpoint inline at 16,000 (64 MiB of 4 KiB pages,
    /// the most the `-wal` file grows to under a writer that never pauses). 16,000 was the best
    /// of 1,000, 4,000 and 16,000 as the automatic interval in the eighth pass.
    pub(super) const STORE: Thresholds = Thresholds {
        wake_every: 1_000,
        inline_at: 16_000,
    };
}

/// A thread that checkpoints one database file, woken by the WAL hook of its writing
/// connection. Dropping it stops the thread and waits for it to end, which takes at most the
/// checkpoint it is running.
pub(super) struct Checkpointer {
    /// Wakes the thread (the hook holds the other sender).
    wake: SyncSender<()>,
    /// Set when the store closes; the thread ends at its next wake.
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The process that started the thread: a child forked since has no such thread to join.
    process: u32,
}

impl Checkpointer {
    /// Start a checkpointer for the database at `path` (already in WAL mode) and install the
    /// WAL hook on `writer`. `None` when its connection, its thread or the hook cannot be
    /// started: `writer` then checkpoints itself as SQLite does by default (every 1,000 pages).
    pub(super) fn start(
        path: &Path,
        writer: &mut Connection,
        thresholds: Thresholds,
    ) -> Option<Checkpointer> {
        let connection = Self::connect(path).ok()?;
        let (wake, wakes) = sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("countersign-sqlite-checkpoint".to_owned())
            .spawn(move || Self::run(&connection, &wakes, &stopped))
            .ok()?;
        let checkpointer = Checkpointer {
            wake: wake.clone(),
            stop,
            thread: Some(thread),
            process: std::process::id(),
        };
        // The log size when the thread was last woken; it falls back when the log starts over.
        let mut woken_at: c_int = 0;
        let hook = move |wal: &mut rusqlite::hooks::Wal, frames: c_int| {
            if frames < woken_at {
                woken_at = 0;
            }
            if frames >= thresholds.inline_at {
                // Busy (another checkpointer holds the lock) or failed: the next commit tries
                // again. Never an error: the commit has happened.
                let _ = wal.checkpoint();
            } else if frames - woken_at >= thresholds.wake_every {
                woken_at = frames;
                match wake.try_send(()) {
                    // Full: a wake is already pending. Disconnected: the thread ended, and
                    // the inline checkpoint still bounds the log.
                    Ok(()) | Err(TrySendError::Full(()) | TrySendError::Disconnected(())) => {}
                }
            }
            Ok(())
        };
        if writer.wal_hook(Some(hook)).is_err() {
            // rusqlite clears the hook slot when installing fails, which also removes SQLite's
            // automatic checkpoint: put it back. `checkpointer` drops here, ending its thread.
            let _ = writer.execute_batch("PRAGMA wal_autocheckpoint=1000;");
            return None;
        }
        Some(checkpointer)
    }

    /// The thread's own connection: read-write (a checkpoint writes the database file), never
    /// creating, never waiting on a lock. A checkpoint syncs the log before copying from it and
    /// the database file after, whatever the connection's `synchronous` (short of `OFF`).
    fn connect(path: &Path) -> rusqlite::Result<Connection> {
        let connection = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        connection.busy_timeout(std::time::Duration::ZERO)?;
        Ok(connection)
    }

    /// Checkpoint at every wake until stopped (or every sender is gone).
    fn run(connection: &Connection, wakes: &Receiver<()>, stop: &AtomicBool) {
        while wakes.recv().is_ok() && !stop.load(Ordering::Acquire) {
            // Busy or failed: the next wake, or the writer's inline checkpoint, tries again.
            let _ = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Full: a wake is pending, and the thread sees `stop` when it takes it.
        let _ = self.wake.try_send(());
        // In a child forked since it started, the thread does not exist.
        if std::process::id() == self.process
            && let Some(thread) = self.thread.take()
        {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    //! The checkpointer on a bare connection in WAL mode: it copies the log into the database
    //! file without the writer, and the writer's inline checkpoint bounds the log.

    use std::time::{Duration, Instant};

    use super::*;

    /// A WAL database at `path` with one table, and its writer.
    fn writer(path: &Path) -> Connection {
        let connection = Connection::open(path).expect("open");
        connection
            .execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
                 CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL);",
            )
            .expect("schema");
        connection
    }

    /// `count` transactions of one row with a 3 KiB body each (about one new page apiece).
    fn write(connection: &Connection, count: usize) {
        let body = "x".repeat(3_000);
        for _ in 0..count {
            connection
                .execute("INSERT INTO rows (body) VALUES (?1)", [&body])
                .expect("insert");
        }
    }

    fn size(path: &Path) -> u64 {
        std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
    }

    #[test]
    fn the_thread_copies_the_log_into_the_database_file() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("woken.db");
        let mut connection = writer(&path);
        let before = size(&path);
        let thresholds = Thresholds {
            wake_every: 20,
            inline_at: 1_000_000,
        };
        let checkpointer =
            Checkpointer::start(&path, &mut connection, thresholds).expect("started");
        write(&connection, 200);
        // Only a checkpoint writes the database file in WAL mode, and the writer never runs
        // one here (its hook replaced the automatic checkpoint, and `inline_at` is far off).
        let deadline = Instant::now() + Duration::from_secs(10);
        while size(&path) < before + 100 * 3_000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            size(&path) >= before + 100 * 3_000,
            "the database file stayed at {} bytes (from {before})",
            size(&path)
        );
        drop(checkpointer);
        let count: i64 = connection
            .query_row("SELECT count(*) FROM rows", [], |row| row.get(0))
            .expect("count");
        assert_eq!(count, 200);
    }

    #[test]
    fn the_writer_bounds_the_log_when_the_thread_is_never_woken() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("bounded.db");
        let mut connection = writer(&path);
        let thresholds = Thresholds {
            wake_every: c_int::MAX,
            inline_at: 100,
        };
        let _checkpointer =
            Checkpointer::start(&path, &mut connection, thresholds).expect("started");
        write(&connection, 1_000);
        // The log starts over after each inline checkpoint, so it never holds much more than
        // `inline_at` pages (a frame is a 24-byte header and a 4 KiB page; the file has a
        // 32-byte header).
        let wal = size(&path.with_extension("db-wal"));
        let bound = 32 + 110 * (24 + 4_096);
        assert!(wal > 0, "the log is in use");
        assert!(wal <= bound, "the log grew to {wal} bytes (bound {bound})");
    }

    #[test]
    fn a_closed_store_leaves_no_log_behind() {
        // SQLite deletes the `-wal` file when the last connection to the database closes: a
        // checkpointer thread left running with its connection open would keep it.
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("closed.db");
        let store = crate::store::SqliteStore::open(&path).expect("open");
        assert!(
            store.checkpointer.is_some(),
            "the store runs its checkpointer"
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let draft = crate::evidence::ReceiptDraft {
            action: Some("checkpoint.test".to_owned()),
            environment: Some("test".to_owned()),
            ..crate::evidence::ReceiptDraft::default()
        };
        runtime
            .block_on(crate::store::Store::append_receipt(
                &store,
                draft,
                crate::clock::Timestamp::from_millis(1_780_000_000_000),
            ))
            .expect("appended");
        assert!(path.with_extension("db-wal").exists(), "the log is in use");
        drop(store);
        assert!(
            !path.with_extension("db-wal").exists(),
            "the log outlived the store"
        );
    }
}
