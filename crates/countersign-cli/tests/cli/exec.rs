//! `countersign exec`: a command run as a protected action. Each exit mapping (0 committed,
//! a listed code failed, another code, a signal or the timeout ambiguous), the exit status on
//! the receipt, and a duplicate refused by its effect key.

use serde_json::Value;

use crate::support::{Run, Sandbox};

/// `countersign exec --policy agent.yaml --action job --args {"id": ID} EXTRA… -- sh -c SCRIPT`.
/// The script appends a line to `work/runs` each time it runs.
fn job(sandbox: &Sandbox, id: &str, extra: &[&str], script: &str) -> Run {
    job_with(sandbox, &[], id, extra, script)
}

/// [`job`] with global flags before `exec` (`--json`).
fn job_with(sandbox: &Sandbox, global: &[&str], id: &str, extra: &[&str], script: &str) -> Run {
    let arguments = format!("{{\"id\": \"{id}\"}}");
    let script = format!("echo {id} >> runs; {script}");
    let mut tail = extra.to_vec();
    tail.extend_from_slice(&["--", "sh", "-c", &script]);
    exec_job_with(sandbox, global, &arguments, &tail)
}

/// `countersign exec --policy agent.yaml --action job --args ARGUMENTS TAIL…`.
fn exec_job(sandbox: &Sandbox, arguments: &str, tail: &[&str]) -> Run {
    exec_job_with(sandbox, &[], arguments, tail)
}

/// [`exec_job`] with global flags before `exec`.
fn exec_job_with(sandbox: &Sandbox, global: &[&str], arguments: &str, tail: &[&str]) -> Run {
    let mut args = global.to_vec();
    args.extend_from_slice(&[
        "exec",
        "--policy",
        "agent.yaml",
        "--action",
        "job",
        "--args",
        arguments,
    ]);
    args.extend_from_slice(tail);
    sandbox.run(&args)
}

/// How many times the job scripts ran.
fn runs(sandbox: &Sandbox) -> usize {
    std::fs::read_to_string(sandbox.work().join("runs"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

fn last_receipt(sandbox: &Sandbox) -> Value {
    sandbox.receipts_json().pop().expect("a receipt")
}

#[test]
fn exit_zero_is_committed_and_its_output_passes_through() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let run = job(
        &sandbox,
        "a",
        &[],
        "echo \"args: $COUNTERSIGN_ARGS\"; echo to-stderr >&2",
    );
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stdout, "args: {\"id\":\"a\"}\n");
    assert_eq!(run.stderr, "to-stderr\n");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("exec_committed", run.transcript()));
    let receipt = last_receipt(&sandbox);
    assert_eq!(receipt["outcome"], "committed");
    assert_eq!(receipt["effect_key"], "job:a");
    assert_eq!(receipt["exit_status"], serde_json::json!({"code": 0}));
}

#[test]
fn a_listed_exit_code_is_failed_and_a_retry_may_run() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let run = job(&sandbox, "b", &["--not-executed-exit", "75"], "exit 75");
    assert_eq!(run.status, Some(75), "the command's own status: {run:?}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("exec_failed", run.transcript()));
    let receipt = last_receipt(&sandbox);
    assert_eq!(receipt["outcome"], "failed");
    assert_eq!(receipt["reason"], "not_executed");
    assert_eq!(receipt["exit_status"], serde_json::json!({"code": 75}));
    let retry = job(&sandbox, "b", &[], "exit 0");
    assert_eq!(retry.status, Some(0), "{retry:?}");
    assert_eq!(runs(&sandbox), 2);
    assert_eq!(last_receipt(&sandbox)["outcome"], "committed");
}

#[test]
fn another_exit_code_is_ambiguous_and_refuses_every_retry() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let run = job(&sandbox, "c", &["--not-executed-exit", "75"], "exit 3");
    assert_eq!(run.status, Some(3), "{run:?}");
    let receipt = last_receipt(&sandbox);
    assert_eq!(receipt["outcome"], "ambiguous");
    assert_eq!(receipt["exit_status"], serde_json::json!({"code": 3}));
    let retry = job(&sandbox, "c", &[], "exit 0");
    assert_eq!(retry.status, Some(125), "refused: {retry:?}");
    assert!(
        retry.stderr.contains("countersign resolve job:c"),
        "{retry:?}"
    );
    assert_eq!(runs(&sandbox), 1, "the retry did not run");
    let transcripts = format!("{}\n{}", run.transcript(), retry.transcript());
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("exec_ambiguous_then_refused", transcripts));
}

#[test]
fn a_signal_is_ambiguous_with_the_signal_recorded() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let run = job(&sandbox, "d", &[], "kill -9 $$");
    assert_eq!(run.status, Some(128 + 9), "{run:?}");
    let receipt = last_receipt(&sandbox);
    assert_eq!(receipt["outcome"], "ambiguous");
    assert_eq!(receipt["exit_status"], serde_json::json!({"signal": 9}));
}

#[test]
fn the_timeout_kills_the_command_and_is_ambiguous() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    // `exec`: the shell becomes `sleep`, so the process killed is the one that would finish.
    let started = std::time::Instant::now();
    let run = job(&sandbox, "e", &["--timeout", "1s"], "exec sleep 20");
    assert_eq!(run.status, Some(124), "{run:?}");
    let receipt = last_receipt(&sandbox);
    assert_eq!(receipt["outcome"], "ambiguous");
    assert_eq!(receipt["reason"], "timeout");
    assert!(receipt.get("exit_status").is_none(), "{receipt}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "the command was killed at the timeout, not left to finish"
    );
}

#[test]
fn a_duplicate_run_is_refused_by_its_effect_key() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    assert_eq!(job(&sandbox, "f", &[], "exit 0").status, Some(0));
    let duplicate = job(&sandbox, "f", &[], "exit 0");
    assert_eq!(duplicate.status, Some(125), "{duplicate:?}");
    assert_eq!(runs(&sandbox), 1, "the duplicate did not run");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("exec_duplicate", duplicate.transcript()));
    let receipt = last_receipt(&sandbox);
    assert_eq!(receipt["outcome"], "refused");
    assert_eq!(receipt["reason"], "duplicate");
}

/// `exec`'s own failures (arguments that are not JSON, a policy file that is not there) exit
/// 125, not 1, so a caller can tell them from the command's own exit 1; the command never ran
/// and nothing was recorded. With `--json` the error object says the same status.
#[test]
fn execs_own_failures_exit_125_not_the_commands_1() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let not_json = exec_job(&sandbox, "{id: 1}", &["--", "sh", "-c", "echo ran >> runs"]);
    assert_eq!(not_json.status, Some(125), "{not_json:?}");
    assert!(not_json.stderr.starts_with("error: "), "{not_json:?}");
    assert!(not_json.stderr.contains("--args"), "{not_json:?}");
    let no_policy = sandbox.run(&[
        "--json",
        "exec",
        "--policy",
        "missing.yaml",
        "--action",
        "job",
        "--",
        "sh",
        "-c",
        "echo ran >> runs",
    ]);
    assert_eq!(no_policy.status, Some(125), "{no_policy:?}");
    let error: Value = serde_json::from_str(no_policy.stderr.trim()).expect("one JSON object");
    assert_eq!(error["exit_status"], 125, "{no_policy:?}");
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|text| text.contains("missing.yaml")),
        "{no_policy:?}"
    );
    assert_eq!(runs(&sandbox), 0, "the command never ran");
    // The command's own exit 1 is still 1 (and `ambiguous`).
    let own = job(&sandbox, "b", &[], "exit 1");
    assert_eq!(own.status, Some(1), "{own:?}");
}

/// `countersign --json exec …`: what exec says about itself on standard error, one JSON object
/// per line, the last (the ending) with `exit_status`; the command's own output passes through.
fn endings(run: &Run) -> Vec<Value> {
    run.stderr
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

#[test]
fn with_json_exec_says_how_it_ended_as_one_json_line() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let json_job =
        |id: &str, extra: &[&str], script: &str| job_with(&sandbox, &["--json"], id, extra, script);
    // Committed: the command's output untouched, and the receipt that records it.
    let run = json_job("j1", &[], "echo out; echo err >&2");
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stdout, "out\n");
    assert!(run.stderr.starts_with("err\n"), "{run:?}");
    let said = endings(&run);
    assert_eq!(said.len(), 1, "{run:?}");
    assert_eq!(said[0]["event"], "committed");
    assert_eq!(said[0]["exit_status"], 0);
    assert_eq!(said[0]["effect_key"], "job:j1");
    assert_eq!(said[0]["receipt"]["outcome"], "committed");
    assert_eq!(
        said[0]["receipt"]["exit_status"],
        serde_json::json!({"code": 0})
    );
    // A duplicate: refused, with the kernel's reason code.
    let duplicate = json_job("j1", &[], "exit 0");
    assert_eq!(duplicate.status, Some(125), "{duplicate:?}");
    let said = endings(&duplicate);
    assert_eq!(said.len(), 1, "{duplicate:?}");
    assert_eq!(said[0]["event"], "refused");
    assert_eq!(said[0]["reason"], "duplicate");
    assert_eq!(said[0]["exit_status"], 125);
    assert_eq!(said[0]["effect_key"], "job:j1");
    assert!(
        said[0]["message"]
            .as_str()
            .is_some_and(|text| text.contains("the command did not run")),
        "{duplicate:?}"
    );
    // Ambiguous: the command's own status, and the key every retry is refused on.
    let unknown = json_job("j2", &[], "exit 3");
    assert_eq!(unknown.status, Some(3), "{unknown:?}");
    let said = endings(&unknown);
    assert_eq!(said[0]["event"], "ambiguous");
    assert_eq!(said[0]["effect_key"], "job:j2");
    assert_eq!(said[0]["exit_status"], 3);
    // Failed: a listed code.
    let failed = json_job("j3", &["--not-executed-exit", "75"], "exit 75");
    assert_eq!(failed.status, Some(75), "{failed:?}");
    assert_eq!(endings(&failed)[0]["event"], "failed");
    assert_eq!(endings(&failed)[0]["exit_status"], 75);
    assert_eq!(
        runs(&sandbox),
        3,
        "j1, j2 and j3 ran; the duplicate did not"
    );
    // An unusable command line is a usage error, as JSON too.
    let unusable = json_job("j4", &["--timeout", "0s"], "exit 0");
    assert_eq!(unusable.status, Some(2), "{unusable:?}");
    let error: Value = serde_json::from_str(unusable.stderr.trim()).expect("one JSON object");
    assert_eq!(error["exit_status"], 2, "{unusable:?}");
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|text| text.starts_with("invalid value '0s' for '--timeout <DURATION>'")),
        "{unusable:?}"
    );
    // Every line exec wrote is JSON: nothing else but the command's own `err`.
    for run in [&duplicate, &unknown, &failed] {
        assert!(
            run.stderr.lines().all(|line| line.starts_with('{')),
            "{run:?}"
        );
    }
}

/// The command runs, but its outcome cannot be recorded (here the command itself deletes the
/// effects table's rows, its own reservation among them, as a bad migration would): exec exits
/// 125, not the command's 0, since nothing records that it ran, and says so in text and in
/// `--json`.
#[test]
fn a_run_whose_outcome_cannot_be_recorded_exits_125_not_the_commands_0() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let wipe = format!(
        "python3 -c \"import sqlite3; c = sqlite3.connect('{}'); c.execute('DELETE FROM effects'); c.commit()\"",
        sandbox.store_path().display()
    );
    assert_eq!(job(&sandbox, "r0", &[], "exit 0").status, Some(0));
    let run = job(&sandbox, "r1", &[], &wipe);
    assert_eq!(run.status, Some(125), "{run:?}");
    assert!(
        run.stderr.contains(
            "`job` ran (it ended with exit code 0), but its outcome could not be recorded"
        ),
        "{run:?}"
    );
    assert_eq!(runs(&sandbox), 2, "the command ran");
    let json = job_with(&sandbox, &["--json"], "r2", &[], &wipe);
    assert_eq!(json.status, Some(125), "{json:?}");
    let said = endings(&json);
    let ending = said.last().expect("an ending");
    assert_eq!(ending["event"], "not_recorded", "{json:?}");
    assert_eq!(ending["exit_status"], 125);
}

#[test]
fn a_command_that_needs_approval_runs_after_the_grant() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let deploy = |sandbox: &Sandbox| {
        sandbox.run(&[
            "exec",
            "--policy",
            "agent.yaml",
            "--action",
            "deploy",
            "--args",
            "{\"service\": \"api\"}",
            "--",
            "sh",
            "-c",
            "echo deployed >> runs",
        ])
    };
    let waiting = deploy(&sandbox);
    assert_eq!(waiting.status, Some(125), "{waiting:?}");
    assert_eq!(runs(&sandbox), 0);
    let id = waiting
        .stderr
        .split_whitespace()
        .find(|word| word.starts_with("apr_"))
        .expect("the request id")
        .to_owned();
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("exec_needs_approval", waiting.transcript()));
    let approved = sandbox.run(&["approve", &id]);
    assert_eq!(approved.status, Some(0), "{approved:?}");
    let ran = deploy(&sandbox);
    assert_eq!(ran.status, Some(0), "{ran:?}");
    assert_eq!(runs(&sandbox), 1);
    let receipt = last_receipt(&sandbox);
    assert_eq!(receipt["outcome"], "committed");
    assert_eq!(receipt["approval_id"], id.as_str());
}

#[test]
fn a_command_that_cannot_start_is_failed_with_status_127() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let run = exec_job(&sandbox, "{\"id\": \"g\"}", &["--", "./no-such-command"]);
    assert_eq!(run.status, Some(127), "{run:?}");
    assert_eq!(last_receipt(&sandbox)["outcome"], "failed");
}

#[test]
fn with_wait_the_command_runs_as_soon_as_it_is_granted() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let waiting = std::thread::scope(|scope| {
        let exec = scope.spawn(|| {
            sandbox.run(&[
                "exec",
                "--policy",
                "agent.yaml",
                "--action",
                "deploy",
                "--args",
                "{\"service\": \"web\"}",
                "--wait",
                "60s",
                "--",
                "sh",
                "-c",
                "echo deployed >> runs",
            ])
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let id = loop {
            let pending = sandbox.run(&["pending", "--json"]);
            if pending.status == Some(0)
                && let Ok(Value::Array(requests)) = serde_json::from_str::<Value>(&pending.stdout)
                && let Some(id) = requests.first().and_then(|request| request["id"].as_str())
            {
                break id.to_owned();
            }
            assert!(std::time::Instant::now() < deadline, "no request appeared");
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert_eq!(runs(&sandbox), 0, "nothing runs before the grant");
        let approved = sandbox.run(&["approve", &id]);
        assert_eq!(approved.status, Some(0), "{approved:?}");
        (id, exec.join().expect("the exec thread"))
    });
    let (id, waiting) = waiting;
    assert_eq!(waiting.status, Some(0), "{waiting:?}");
    // While it waits, it names the request and the command that answers it.
    assert!(
        waiting.stderr.contains(&format!(
            "request {id} is waiting; answer it from another shell with `countersign approve {id} --policy agent.yaml`; waiting up to 1m, until "
        )),
        "{waiting:?}"
    );
    // The wait's own end, then the request's expiry: two different instants, each named.
    assert!(
        waiting.stderr.contains("; the request expires at "),
        "{waiting:?}"
    );
    assert_eq!(runs(&sandbox), 1);
    assert_eq!(last_receipt(&sandbox)["outcome"], "committed");
}

/// A supervisor stopping `countersign exec` (SIGTERM) stops the command too, and the outcome is
/// recorded at once: `ambiguous` with the command's signal, never an effect left `reserved`
/// until its lease lapses while the command runs on unwatched.
#[test]
fn sigterm_is_passed_on_to_the_command_and_the_outcome_recorded() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let marker = sandbox.tmp().join("command.pid");
    // The shell writes its pid, then becomes `sleep`: the pid is the process that must stop.
    let script = format!("echo $$ > {}; exec sleep 60", marker.display());
    let exec = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args([
            "exec",
            "--policy",
            "agent.yaml",
            "--action",
            "job",
            "--args",
            "{\"id\": \"t\"}",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .current_dir(sandbox.work())
        .env("USER", "tester")
        .env_remove("COUNTERSIGN_POLICY")
        .env_remove("COUNTERSIGN_STORE_URL")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start countersign exec");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let command_pid = loop {
        if let Some(pid) = std::fs::read_to_string(&marker)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &exec.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let output = exec.wait_with_output().expect("wait for countersign exec");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(128 + 15), "{stderr}");
    assert!(
        stderr.contains("stopped by signal 15") && stderr.contains("recorded `ambiguous`"),
        "{stderr}"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{command_pid}")).exists(),
        "the command (pid {command_pid}) is still running"
    );
    let receipt = last_receipt(&sandbox);
    assert_eq!(receipt["outcome"], "ambiguous");
    assert_eq!(receipt["effect_key"], "job:t");
    assert_eq!(receipt["exit_status"], serde_json::json!({"signal": 15}));
    let effects = sandbox.run(&["effects", "--policy", "agent.yaml", "--json"]);
    assert!(effects.stdout.contains("\"ambiguous\""), "{effects:?}");
    assert!(!effects.stdout.contains("\"reserved\""), "{effects:?}");
}

/// An effect whose lease lapsed (its `exec` was killed outright) is listed as such, not as an
/// ordinary `reserved` one that is still running.
#[test]
fn effects_names_a_lapsed_lease() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let run = job(&sandbox, "l", &[], "true");
    assert_eq!(run.status, Some(0), "{run:?}");
    // The effect as a running attempt leaves it, its lease ending at `until` (milliseconds),
    // then `effects` as text.
    let listed_with_lease_until = |until: i64| {
        let changed = rusqlite::Connection::open(sandbox.store_path())
            .expect("open the store file directly")
            .execute(
                "UPDATE effects SET state = 'reserved', lease_until = ?1 WHERE key = 'job:l'",
                [until],
            )
            .expect("set the lease");
        assert_eq!(changed, 1);
        let listed = sandbox.run(&["effects", "--policy", "agent.yaml"]);
        assert_eq!(listed.status, Some(0), "{listed:?}");
        listed
    };
    // A live lease says when it ends: when a retry may learn what became of a killed attempt.
    let listed = listed_with_lease_until(4_102_444_800_000);
    assert!(
        listed
            .stdout
            .contains("reserved, lease until 2100-01-01T00:00:00"),
        "{listed:?}"
    );
    // Lapsed, as after a SIGKILL.
    let listed = listed_with_lease_until(1);
    assert!(
        listed.stdout.contains("reserved, lease lapsed")
            && listed.stdout.contains("a lapsed lease means"),
        "{listed:?}"
    );
}

/// An effect key holding a control character (which no command line can carry) or a bidi
/// override is named everywhere in its printed form, `\u{HEX}` escapes quoted for a shell, and
/// `inspect` and `resolve` take that form back: the effect can be settled from the CLI (found by
/// a first-time user: the suggested `resolve` refused the key it printed, so the effect stayed
/// `ambiguous`). Nothing prints the bidi override raw.
#[test]
fn an_effect_key_with_a_control_character_is_resolved_by_the_form_printed() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let arguments = r#"{"id": "n\u0001x\u202e y"}"#;
    let printed = r"job:n\u{1}x\u{202e} y";
    // The words a shell reads from the suggested command line: the printed key, then the
    // store's flags.
    let suggested_key = |run: &Run| {
        let words = run
            .stderr
            .split("countersign resolve ")
            .nth(1)
            .and_then(|rest| rest.split(" --committed").next())
            .unwrap_or_else(|| panic!("no resolve suggested: {run:?}"));
        shlex::split(words)
    };
    let printed_with_flags = Some(vec![
        printed.to_owned(),
        "--policy".to_owned(),
        "agent.yaml".to_owned(),
    ]);
    let run = exec_job(&sandbox, arguments, &["--", "sh", "-c", "exit 3"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert_eq!(suggested_key(&run), printed_with_flags, "{run:?}");
    let retry = exec_job(&sandbox, arguments, &["--", "sh", "-c", "exit 0"]);
    assert_eq!(retry.status, Some(125), "refused: {retry:?}");
    // The kernel's refusal names the key; `exec` adds the store's flags after it.
    assert_eq!(
        suggested_key(&retry),
        Some(vec![printed.to_owned()]),
        "{retry:?}"
    );
    assert!(
        retry
            .stderr
            .contains("(add `--policy agent.yaml` to that `resolve`"),
        "{retry:?}"
    );
    let inspect = sandbox.run(&["inspect", printed]);
    assert_eq!(inspect.status, Some(0), "{inspect:?}");
    assert!(
        inspect
            .stdout
            .contains(&format!("effect {printed}: ambiguous")),
        "{inspect:?}"
    );
    let resolve = sandbox.run(&["resolve", printed, "--failed", "--as", "human:ops"]);
    assert_eq!(resolve.status, Some(0), "{resolve:?}");
    assert!(
        resolve
            .stdout
            .contains(&format!("resolved {printed} as failed")),
        "{resolve:?}"
    );
    for run in [&run, &retry, &inspect, &resolve] {
        assert!(
            !run.stdout.contains('\u{202e}') && !run.stderr.contains('\u{202e}'),
            "a bidi override reached the terminal: {run:?}"
        );
    }
    // The key as the agent wrote it is settled: a retry runs.
    let again = exec_job(&sandbox, arguments, &["--", "sh", "-c", "exit 0"]);
    assert_eq!(again.status, Some(0), "{again:?}");
}

/// A key whose text holds `\u{` itself prints with that backslash escaped (`\u{5c}`), so it
/// never prints like a key holding the character the escape stands for (found by a first-time
/// user: a NUL key and a `\u{0}` key printed alike, and neither could be resolved; a NUL is now
/// refused in any key, so a U+0001 stands in for it). Each is resolved by the form printed; the
/// literal text still names a key only it can.
#[test]
fn an_effect_key_holding_a_backslash_is_named_as_printed() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    for arguments in [r#"{"id": "n\\u{1}x"}"#, r#"{"id": "n\u0001x"}"#] {
        let run = exec_job(&sandbox, arguments, &["--", "sh", "-c", "exit 3"]);
        assert_eq!(run.status, Some(3), "{run:?}");
    }
    let listed = sandbox.run(&["effects", "--policy", "agent.yaml"]);
    assert!(
        listed.stdout.contains(r"job:n\u{5c}u{1}x") && listed.stdout.contains("job:n\\u{1}x  "),
        "{listed:?}"
    );
    // The control-character key, by its printed form.
    let resolve = sandbox.run(&["resolve", r"job:n\u{1}x", "--failed", "--as", "human:ops"]);
    assert_eq!(resolve.status, Some(0), "{resolve:?}");
    assert!(
        resolve.stdout.contains(r"resolved job:n\u{1}x as failed"),
        "{resolve:?}"
    );
    // The backslash key, by its printed form.
    let resolve = sandbox.run(&[
        "resolve",
        r"job:n\u{5c}u{1}x",
        "--failed",
        "--as",
        "human:ops",
    ]);
    assert_eq!(resolve.status, Some(0), "{resolve:?}");
    assert!(
        resolve
            .stdout
            .contains(r"resolved job:n\u{5c}u{1}x as failed"),
        "{resolve:?}"
    );
    // Typed as its text, a key no escape reading names is still found.
    let run = exec_job(
        &sandbox,
        r#"{"id": "a\\u{41}"}"#,
        &["--", "sh", "-c", "exit 3"],
    );
    assert_eq!(run.status, Some(3), "{run:?}");
    let inspect = sandbox.run(&["inspect", "job:aA"]);
    assert_eq!(
        inspect.status,
        Some(1),
        "`job:aA` was never recorded: {inspect:?}"
    );
    // With the key its escape spells recorded too, the key exactly as typed still wins (found
    // by a first-time user: `job:aA` was resolved instead).
    let run = exec_job(&sandbox, r#"{"id": "aA"}"#, &["--", "sh", "-c", "exit 3"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    let resolve = sandbox.run(&["resolve", r"job:a\u{41}", "--failed", "--as", "human:ops"]);
    assert_eq!(resolve.status, Some(0), "{resolve:?}");
    assert!(
        resolve
            .stdout
            .contains(r"resolved job:a\u{5c}u{41} as failed"),
        "{resolve:?}"
    );
    let untouched = sandbox.run(&["inspect", "job:aA", "--json"]);
    assert_eq!(untouched.status, Some(0), "{untouched:?}");
    let inspected: serde_json::Value =
        serde_json::from_str(&untouched.stdout).expect("inspect --json is JSON");
    assert_eq!(
        inspected["effect"]["resolved_by"],
        serde_json::Value::Null,
        "`job:aA` was resolved: {inspected}"
    );
    assert_eq!(inspected["effect"]["key"], "job:aA", "{inspected}");
}

/// An effect key holding a NUL is refused before anything runs, with the reason, on SQLite and
/// PostgreSQL alike (found by a first-time user: SQLite stored it, and PostgreSQL refused it
/// with a raw driver error). Needs `COUNTERSIGN_TEST_POSTGRES_URL` (fails loudly without it).
#[test]
fn an_effect_key_holding_a_nul_is_refused_on_every_store() {
    let (postgres, _schema) = crate::support::postgres_schema_url("cli_nul_key");
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let arguments = r#"{"id": "n\u0000x"}"#;
    for global in [&[][..], &["--store-url", postgres.as_str()][..]] {
        let run = exec_job_with(
            &sandbox,
            global,
            arguments,
            &["--", "sh", "-c", "echo ran >> runs"],
        );
        assert_ne!(run.status, Some(0), "{global:?}: {run:?}");
        assert!(
            run.stderr.contains("NUL character (U+0000)") && !run.stderr.contains("0x00"),
            "{global:?}: {run:?}"
        );
        assert_eq!(runs(&sandbox), 0, "{global:?}: the job ran: {run:?}");
    }
}
