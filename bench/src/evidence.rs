//! Evidence benchmarks (issue #23): how long a checkpoint takes and how large a one-receipt
//! bundle is, at 10k, 100k and 1M receipts (`--quick`: 1k).
//!
//! The receipts are sealed in memory (`evidence::seal`, each with ten canonical arguments), so
//! the checkpoint time is the Merkle tree over their stored bodies (leaf hashing included), its
//! root and the Ed25519 signature: reading the receipts out of a store is not included
//! (`receipts` pages of 2,000, measured by the store scenarios). Printed, never asserted.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use countersign::ActionRequest;
use countersign::audit::checkpoint::{LogFollower, publish_checkpoint};
use countersign::evidence::bundle::{make_bundle, verify_bundle};
use countersign::evidence::checkpoint::{self, Checkpoint};
use countersign::evidence::log::LogTree;
use countersign::evidence::{ChainHead, ReceiptDraft, ReceiptKind, ReceiptOutcome, seal};
use countersign::store::{SqliteStore, Store};
use countersign::{Timestamp, canonical};
use serde_json::json;

/// Run the evidence benchmark at each size and print one line per size.
pub fn run(quick: bool) -> Result<()> {
    let sizes: &[u64] = if quick {
        &[1_000]
    } else {
        &[10_000, 100_000, 1_000_000]
    };
    let key = countersign::token::generate_keypair()?;
    println!(
        "\n{:<12} {:>16} {:>16} {:>14} {:>14}",
        "receipts", "checkpoint ms", "bundle bytes", "proof hashes", "verify ms"
    );
    for &size in sizes {
        let mut stored = Vec::with_capacity(size as usize);
        let mut head: Option<ChainHead> = None;
        for n in 0..size {
            let draft = ReceiptDraft {
                kind: Some(ReceiptKind::Attempt),
                outcome: Some(ReceiptOutcome::Committed),
                action: Some("stripe.refund".to_owned()),
                arguments: Some(canonical::to_canonical(&crate::ten_arguments(n as usize))?),
                ..ReceiptDraft::default()
            };
            let (_, mut receipt) = seal(draft, head.as_ref(), Timestamp::from_millis(n as i64))
                .context("seal a receipt")?;
            // Placed at its `seq`, as a one-lane store reads it back.
            receipt.position = receipt.seq;
            head = Some(ChainHead {
                seq: receipt.seq,
                hash: receipt.hash.clone(),
            });
            stored.push(receipt);
        }
        let started = Instant::now();
        let mut tree = LogTree::new();
        for receipt in &stored {
            tree.push(receipt)?;
        }
        let checkpoint = Checkpoint {
            origin: "countersign/bench".to_owned(),
            size: tree.size(),
            root: tree.tree().root(),
            extensions: Vec::new(),
        };
        let signed = checkpoint::sign(&checkpoint, &key)?;
        let checkpoint_ms = started.elapsed().as_secs_f64() * 1_000.0;
        let middle = &stored[(size / 2) as usize];
        let bundle = make_bundle(&signed, &checkpoint, &tree, std::slice::from_ref(middle))?;
        let text = serde_json::to_string_pretty(&bundle)?;
        let started = Instant::now();
        verify_bundle(text.as_bytes(), &key.public_key())?;
        let verify_ms = started.elapsed().as_secs_f64() * 1_000.0;
        println!(
            "{:<12} {:>16.1} {:>16} {:>14} {:>14.2}",
            size,
            checkpoint_ms,
            text.len(),
            bundle.receipts[0].inclusion_proof.len(),
            verify_ms
        );
    }
    overhead(quick)
}

/// What one timed run of allow + effect calls measured.
struct Timed {
    calls_per_second: f64,
    /// Checkpoints the checkpointer made during the run, and how long each took (ms).
    checkpoints: Vec<f64>,
}

/// The per-call overhead of checkpoints on allow + effect calls (issue #23): the same calls on
/// copies of one SQLite store already holding `base` receipts, timed without and with a
/// checkpointer running beside them, in one run, the two alternating from round to round so
/// machine drift lands on both. The checkpointer is what `serve --checkpoint-every` does: its
/// own connection to the file and a [`LogFollower`] that read and verified the log once before
/// the timed calls (the service's start), then every `every` reads and verifies only the new
/// receipts, signs the tree and writes the `log.checkpoint` event to the outbox. (A
/// `countersign checkpoint` from cron reads the whole log each run: the checkpoint times
/// printed above.) Printed, never asserted.
pub fn overhead(quick: bool) -> Result<()> {
    let (base, calls, rounds, every) = if quick {
        (500, 300, 1, Duration::from_millis(100))
    } else {
        (100_000, 40_000, 5, Duration::from_secs(1))
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let folder = tempfile::tempdir()?;
    let seed = folder.path().join("seed.db");
    runtime.block_on(calls_on(&seed, "seed", base))?;
    let key = Arc::new(countersign::token::generate_keypair()?);
    let (mut without, mut with, mut checkpoint_ms) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which runs first, so drift within a round lands on both alike.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for checkpointing in order {
            let path = folder
                .path()
                .join(format!("round-{round}-{checkpointing}.db"));
            copy_store(&seed, &path)?;
            let timed = timed_run(
                &runtime,
                &path,
                calls,
                checkpointing.then(|| (key.clone(), every)),
            )?;
            if checkpointing {
                anyhow::ensure!(
                    !timed.checkpoints.is_empty(),
                    "the checkpointer made no checkpoint during round {round}"
                );
                checkpoint_ms.extend(timed.checkpoints);
                with.push(timed.calls_per_second);
            } else {
                without.push(timed.calls_per_second);
            }
            std::fs::remove_file(&path).ok();
        }
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let (without, with) = (median(&mut without), median(&mut with));
    let made = checkpoint_ms.len();
    let each = median(&mut checkpoint_ms);
    println!(
        "\nallow + effect key (SQLite file) on a log of {base} receipts, {calls} calls x {rounds} rounds, median"
    );
    println!("{:<48} {:>14}", "variant", "calls/s");
    println!("{:<48} {:>14.0}", "without a checkpointer", without);
    println!(
        "{:<48} {:>14.0}",
        format!("with a checkpointer every {} ms", every.as_millis()),
        with
    );
    println!(
        "overhead {:.1}% ({made} checkpoints made during the timed runs, median {each:.0} ms each)",
        (without - with) / without * 100.0
    );
    Ok(())
}

/// `calls` allow + effect calls through the kernel on the SQLite file at `path`, each with a
/// new effect key under `prefix`.
async fn calls_on(path: &Path, prefix: &str, calls: usize) -> Result<Duration> {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(path)?);
    let control = crate::control(store)?;
    let started = Instant::now();
    for n in 0..calls {
        control
            .execute(
                ActionRequest::new(
                    "stripe.refund",
                    &json!({"payment_id": format!("pi_{prefix}_{n}"), "amount": 100}),
                ),
                crate::noop,
            )
            .await?;
    }
    Ok(started.elapsed())
}

/// Copy a closed SQLite store (and its write-ahead log, if one was left).
fn copy_store(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to).context("copy the seeded store")?;
    let mut wal = from.as_os_str().to_owned();
    wal.push("-wal");
    if Path::new(&wal).exists() {
        let mut target = to.as_os_str().to_owned();
        target.push("-wal");
        std::fs::copy(&wal, &target).context("copy the seeded store's log")?;
    }
    Ok(())
}

/// One timed run, with a checkpointer thread beside it when `checkpointer` is given.
fn timed_run(
    runtime: &tokio::runtime::Runtime,
    path: &Path,
    calls: usize,
    checkpointer: Option<(Arc<countersign::token::SigningKey>, Duration)>,
) -> Result<Timed> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let thread = checkpointer.map(|(key, every)| {
        let (stop, path) = (stop.clone(), path.to_path_buf());
        std::thread::spawn(move || checkpoint_loop(&path, &key, every, &stop, &ready_tx))
    });
    if thread.is_some() {
        // The follower has read the existing log: the calls start as on a running service.
        ready
            .recv()
            .map_err(|_| anyhow::anyhow!("the checkpointer stopped before it caught up"))?;
    }
    let elapsed = runtime.block_on(calls_on(path, "timed", calls));
    stop.store(true, Ordering::Relaxed);
    let checkpoints = match thread {
        Some(thread) => thread
            .join()
            .map_err(|_| anyhow::anyhow!("the checkpointer panicked"))??,
        None => Vec::new(),
    };
    Ok(Timed {
        calls_per_second: calls as f64 / elapsed?.as_secs_f64(),
        checkpoints,
    })
}

/// Catch a [`LogFollower`] up with the store at `path` and say so on `ready`, then make a
/// checkpoint (and its outbox event) every `every` until `stop`, each reading only the receipts
/// since the last; returns how long each took, in ms.
fn checkpoint_loop(
    path: &Path,
    key: &countersign::token::SigningKey,
    every: Duration,
    stop: &AtomicBool,
    ready: &std::sync::mpsc::Sender<()>,
) -> Result<Vec<f64>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = SqliteStore::open(path)?;
    let mut follower = LogFollower::new();
    runtime.block_on(follower.catch_up(&store))?;
    ready.send(()).ok();
    let mut took = Vec::new();
    // At least one checkpoint, however short the timed run (`--quick`).
    loop {
        let tick = Instant::now();
        runtime.block_on(async {
            follower.catch_up(&store).await?;
            let made = follower.sign(key, None)?;
            publish_checkpoint(
                &store,
                &made,
                countersign::Clock::now(&countersign::SystemClock),
            )
            .await?;
            anyhow::Ok(())
        })?;
        took.push(tick.elapsed().as_secs_f64() * 1_000.0);
        while tick.elapsed() < every && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok(took)
}
