use std::time::Duration;

use super::tally::{self, Mode, Tally};
use super::{Invocation, StoreKind, parse};

fn args(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn parses_the_soak_options_with_defaults() {
    let Ok(Invocation::Supervise(options)) =
        parse(&args("--store postgres --workers 8 --minutes 30 --seed 7"))
    else {
        panic!("the options did not parse as a soak");
    };
    assert_eq!(options.store, StoreKind::Postgres);
    assert_eq!(options.workers, 8);
    assert_eq!(options.duration, Duration::from_secs(1_800));
    assert_eq!(options.seed, 7);
    assert_eq!(options.concurrency, 4);
    assert!(options.run_dir.ends_with("countersign-soak-7"));
}

#[test]
fn refuses_unknown_stores_zero_workers_and_stray_arguments() {
    let message = |text: &str| match parse(&args(text)) {
        Err(message) => message,
        Ok(other) => format!("parsed: {other:?}"),
    };
    assert_eq!(
        message("--store mysql"),
        "`--store mysql`: use `sqlite` or `postgres`"
    );
    assert_eq!(message("--workers 0"), "`--workers` must be at least 1");
    assert_eq!(
        message("--seconds 0"),
        "the soak needs a duration above zero (`--seconds` or `--minutes`)"
    );
    assert_eq!(
        message("--frobnicate 1"),
        "unknown argument `--frobnicate`: see --help"
    );
    assert_eq!(
        message("--workers"),
        "`--workers` needs a value: see --help"
    );
}

#[test]
fn worker_arguments_round_trip() {
    let options = super::worker::WorkerOptions {
        url: "sqlite:/tmp/x.db".to_owned(),
        run_dir: "/tmp/run".into(),
        instance: "w3-7".to_owned(),
        seed: 42,
        concurrency: 3,
        lease: Duration::from_secs(30),
    };
    let Ok(Invocation::Worker(parsed)) = parse(&options.to_args()) else {
        panic!("the worker arguments did not parse");
    };
    assert_eq!(parsed.url, options.url);
    assert_eq!(parsed.instance, "w3-7");
    assert_eq!(parsed.seed, 42);
    assert_eq!(parsed.concurrency, 3);
    assert_eq!(parsed.lease, Duration::from_secs(30));
}

#[test]
fn tallies_count_every_execution_across_instances() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let first = Tally::open(folder.path(), "w0-1").expect("a tally");
    let second = Tally::open(folder.path(), "w1-1").expect("a tally");
    first.executed("k:a", Mode::Run).expect("written");
    first.fault("k:b", Mode::Lose).expect("written");
    first.executed("k:b", Mode::Lose).expect("written");
    second.executed("k:a", Mode::Run).expect("written");
    second.store_failed("k:c").expect("written");
    let read = tally::read(folder.path()).expect("the tallies read");
    assert_eq!(read.files, 2);
    assert_eq!(read.execution_count(), 3);
    assert_eq!(
        read.executions["k:a"],
        vec![
            ("w0-1".to_owned(), Mode::Run),
            ("w1-1".to_owned(), Mode::Run)
        ]
    );
    assert_eq!(read.faults["k:b"], vec![("w0-1".to_owned(), Mode::Lose)]);
    assert_eq!(read.store_failures["k:c"], vec!["w1-1".to_owned()]);
    assert!(read.torn.is_empty());
}

#[test]
fn a_torn_last_line_still_counts_its_execution() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let tally = Tally::open(folder.path(), "w2-4").expect("a tally");
    tally.executed("k:a", Mode::Run).expect("written");
    let path = tally::folder(folder.path()).join("w2-4.log");
    let mut text = std::fs::read_to_string(&path).expect("readable");
    text.push_str("X k:b ru");
    std::fs::write(&path, text).expect("writable");
    let read = tally::read(folder.path()).expect("the tallies read");
    assert_eq!(read.execution_count(), 2);
    assert_eq!(read.torn, vec!["w2-4: X k:b ru".to_owned()]);
}

#[test]
fn refuses_a_complete_line_that_is_not_a_tally_line() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    std::fs::create_dir_all(tally::folder(folder.path())).expect("a folder");
    std::fs::write(
        tally::folder(folder.path()).join("w0-1.log"),
        "X k:a run\nhello\n",
    )
    .expect("writable");
    let error = tally::read(folder.path()).expect_err("a bad line is refused");
    assert!(
        error.ends_with("line 2: `hello` is not a tally line"),
        "{error}"
    );
}

#[test]
fn the_soak_policy_loads_and_names_its_principals() {
    countersign::Policy::from_yaml_str(super::SOAK_POLICY, None).expect("the soak policy loads");
    assert_eq!(super::principal_of("w3-7"), "agent:soak-w3-7");
    assert_eq!(super::instance_of("agent:soak-w3-7"), Some("w3-7"));
    assert_eq!(super::instance_of("agent:other"), None);
}

/// A soak control acting as worker instance `instance` on `store`.
fn soak_control(
    store: std::sync::Arc<dyn countersign::store::Store>,
    instance: &str,
) -> countersign::Control {
    let policy = countersign::Policy::from_yaml_str(super::SOAK_POLICY, None).expect("loads");
    let principal =
        countersign::Principal::new(super::principal_of(instance)).expect("a principal");
    countersign::Control::builder_shared(std::sync::Arc::new(policy), store)
        .identity(countersign::StaticIdentity::new(principal))
        .build()
}

async fn send(
    control: &countersign::Control,
    tally: &std::sync::Arc<Tally>,
    key: &str,
    mode: Mode,
) {
    let tally = std::sync::Arc::clone(tally);
    let owned = key.to_owned();
    let request = countersign::ActionRequest::new("soak.effect", &serde_json::json!({"key": key}));
    // The outcome is what the checker reads back from the store; the call's result is not
    // what this test is about.
    let _ = control
        .execute(request, move |_arguments| {
            super::worker::act(tally, owned, mode)
        })
        .await;
}

#[tokio::test]
async fn the_checker_names_double_executions_and_unattributed_ambiguous_effects() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let store: std::sync::Arc<dyn countersign::store::Store> = std::sync::Arc::new(
        countersign::store::SqliteStore::open(folder.path().join("soak.db")).expect("a store"),
    );
    let control = soak_control(std::sync::Arc::clone(&store), "w0-1");
    let tally = std::sync::Arc::new(Tally::open(folder.path(), "w0-1").expect("a tally"));
    send(&control, &tally, "k:committed", Mode::Run).await;
    tally.fault("k:lost", Mode::Lose).expect("written");
    send(&control, &tally, "k:lost", Mode::Lose).await;
    // The same failure with no fault written down: nothing explains it.
    send(&control, &tally, "k:unexplained", Mode::Lose).await;
    let killed = std::collections::BTreeSet::new();

    let report = super::check::run(store.as_ref(), folder.path(), &killed)
        .await
        .expect("the check runs");
    assert!(report.chain_verified, "{}", report.chain);
    assert_eq!(report.executions, 3);
    assert!(report.doubles.is_empty(), "{:?}", report.doubles);
    assert_eq!(
        report
            .attributed
            .get("executor failed, hung or lost its reply"),
        Some(&1)
    );
    assert_eq!(report.unattributed.len(), 1, "{:?}", report.unattributed);
    assert!(report.unattributed[0].starts_with("effect `k:unexplained` is ambiguous"));
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    assert_eq!(report.failures().len(), 1);

    // A second execution of a committed key, in another instance's tally, is a double.
    Tally::open(folder.path(), "w1-1")
        .expect("a tally")
        .executed("k:committed", Mode::Run)
        .expect("written");
    let report = super::check::run(store.as_ref(), folder.path(), &killed)
        .await
        .expect("the check runs");
    assert_eq!(
        report.doubles,
        vec!["effect `k:committed` executed 2 times: by w0-1 (run), w1-1 (run)".to_owned()]
    );
}

#[tokio::test]
async fn the_checker_names_a_committed_effect_no_tally_saw_run() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let store: std::sync::Arc<dyn countersign::store::Store> = std::sync::Arc::new(
        countersign::store::SqliteStore::open(folder.path().join("soak.db")).expect("a store"),
    );
    let control = soak_control(std::sync::Arc::clone(&store), "w0-1");
    Tally::open(folder.path(), "w0-1").expect("a tally");
    // An executor that keeps no tally: the store says committed, no tally says it ran.
    let request =
        countersign::ActionRequest::new("soak.effect", &serde_json::json!({"key": "k:silent"}));
    control
        .execute(request, |_arguments| async {
            Ok::<_, countersign::ExecutorError>(())
        })
        .await
        .expect("it runs");
    let report = super::check::run(store.as_ref(), folder.path(), &Default::default())
        .await
        .expect("the check runs");
    assert_eq!(
        report.mismatches,
        vec!["effect `k:silent` is committed but no tally records it running".to_owned()]
    );
}
