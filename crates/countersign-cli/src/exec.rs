//! `countersign exec`: run a command as a protected action.
//!
//! The command is the executor of [`countersign::Control::execute`]: the policy decides, an
//! `approve` waits for a grant, the effect key is reserved, and the attempt ends in one receipt
//! that records the exit status. Exit 0 is `committed`; an exit code listed with
//! `--not-executed-exit` is `failed` (the command says it did nothing; a retry may run); any
//! other exit, a signal or `--timeout` is `ambiguous`. A command that cannot be started is
//! `failed`: it definitely did not run.

use std::ffi::OsString;
use std::io::Write;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use countersign::evidence::ProcessExit;
use countersign::{
    ActionRequest, ApprovalId, Control, ControlError, ExecutorError, ExitStatusSlot, StaticIdentity,
};

use crate::everyday::{load_policy, parse_arguments, principal};
use crate::{Failure, Global};

/// The exit status when Countersign refused or failed: a refusal and `exec`'s own errors before
/// the command (bad `--args`, a policy or store it cannot open: the command did not run), and a
/// command whose outcome could not be recorded after it ran (`not_recorded`: its effect stays
/// reserved, then `ambiguous`, so no retry runs it again), so none of them looks like the
/// command's exit 1 or its success (the convention of `env(1)` and `timeout(1)`).
pub const REFUSED: u8 = 125;
/// The exit status when the command could not be started because it is not executable.
pub const NOT_EXECUTABLE: u8 = 126;
/// The exit status when the command was not found.
pub const NOT_FOUND: u8 = 127;
/// The exit status when `--timeout` ended the command (as `timeout(1)`).
pub const TIMED_OUT: u8 = 124;

/// Arguments of `exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The action name the policy decides (`deploy`, `db.migrate`).
    #[arg(long, value_name = "NAME", value_parser = crate::args::action_name)]
    action: String,
    /// The action's arguments: a JSON object. They are what the policy's conditions and the
    /// effect-key template read and what an approver sees; the command gets them, canonical, in
    /// `COUNTERSIGN_ARGS`.
    #[arg(long = "args", value_name = "JSON", default_value = "{}")]
    arguments: String,
    /// An exit code by which the command says it definitely did nothing: recorded `failed`, so a
    /// retry may run (repeat for several). Any other non-zero exit is `ambiguous`.
    #[arg(
        long = "not-executed-exit",
        value_name = "CODE",
        allow_negative_numbers = true,
        value_parser = crate::args::failure_exit_code
    )]
    not_executed: Vec<i32>,
    /// End the command after this long (`30s`, `5m`, `1h`): killed, and recorded `ambiguous`
    /// (it may have done its work); exit status 124.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::args::positive_duration)]
    timeout: Option<Duration>,
    /// When the call needs approval, wait this long for the answer (`10m`) instead of exiting
    /// at once; the command runs as soon as it is granted.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::args::positive_duration)]
    wait: Option<Duration>,
    /// Present this granted approval request (`apr_…`) [default: a grant for this exact call
    /// is found by its action hash].
    #[arg(long, value_name = "ID")]
    approval: Option<String>,
    /// Who acts: part of the action hash and the receipt.
    #[arg(
        long,
        value_name = "WHO",
        default_value = "agent:local",
        env = "COUNTERSIGN_PRINCIPAL"
    )]
    principal: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// `countersign exec`.
pub async fn exec(
    global: &Global,
    args: &ExecArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    // Our own output is flushed first: the command writes to the same standard output.
    out.flush()?;
    let arguments = parse_arguments(&args.arguments, "`--args`")?;
    let principal = principal(&args.principal)?;
    let approval = args
        .approval
        .as_deref()
        .map(|id| ApprovalId::parse(id.trim()))
        .transpose()?;
    let policy = load_policy(&global.policy_path())?;
    let store = crate::store_access::open_for_recording(global).await?;
    // Issue #31: an approval nobody can give is said when the store opens, not after the
    // request it opens has expired.
    for warning in policy.approval_warnings() {
        if global.json {
            say_json(&Said::new("warning", warning));
        } else {
            countersign::stderr_line!("warning: {}", countersign::evidence::printable(&warning));
        }
    }
    let control = Control::builder_shared(Arc::new(policy), store)
        .identity(StaticIdentity::new(principal))
        .build();

    let slot = ExitStatusSlot::new();
    let mut request =
        ActionRequest::new(args.action.clone(), &arguments).with_exit_status(slot.clone());
    if let Some(timeout) = args.timeout {
        request = request.with_timeout(timeout);
    }
    if let Some(wait) = args.wait {
        // Open (or find) the request first and say which it is: the kernel waits in silence,
        // and the person who must approve needs its id (`request_approval` is idempotent per
        // action hash, so the wait below watches this same request).
        let mut probe = ActionRequest::new(args.action.clone(), &arguments);
        if let Some(id) = &approval {
            probe = probe.with_approval(id.clone());
        }
        if approval.is_none()
            && let Ok(Some(record)) = control.request_approval(&probe).await
            && record.state == countersign::ApprovalState::Pending
        {
            // The wait ends at whichever comes first: `--wait` running out, or the request
            // expiring (an answer after that authorizes nothing).
            let wait_ends = countersign::Clock::now(&countersign::SystemClock).plus(wait);
            let until = if record.expires_at <= wait_ends {
                format!("until the request expires at {}", record.expires_at)
            } else {
                format!(
                    "up to {}, until {wait_ends}; the request expires at {}",
                    humantime::format_duration(wait),
                    record.expires_at
                )
            };
            let message = format!(
                "`{}` needs a human's approval: request {} is waiting; answer it from another shell with `countersign approve {}{}`; waiting {until}",
                countersign::evidence::printable(&args.action),
                record.id,
                record.id,
                crate::store_access::store_flags(global),
            );
            let mut said = Said::new("waiting", message);
            said.request_id = Some(record.id.to_string());
            said.expires_at = Some(record.expires_at.to_string());
            say(global.json, &said);
        }
        request = request.with_wait(wait);
    }
    if let Some(id) = approval {
        request = request.with_approval(id);
    }
    let program = args.command[0].clone();
    let rest: Vec<OsString> = args.command[1..].to_vec();
    let not_executed = args.not_executed.clone();
    let action = args.action.clone();
    // The exit status of a command that could not be started: 126 or 127.
    let not_started: Arc<std::sync::Mutex<Option<u8>>> = Arc::default();
    let record_not_started = Arc::clone(&not_started);
    // The signal that stopped `countersign exec` while the command ran (SIGTERM, SIGINT, SIGHUP).
    let stopped_by: Arc<std::sync::Mutex<Option<i32>>> = Arc::default();
    let record_stopped_by = Arc::clone(&stopped_by);
    let executor_slot = slot.clone();
    let result = control
        .execute(request, move |canonical_arguments| async move {
            let mut command = tokio::process::Command::new(&program);
            command
                .args(&rest)
                .env("COUNTERSIGN_ACTION", &action)
                .env("COUNTERSIGN_ARGS", canonical_arguments.to_string())
                .stdin(Stdio::inherit())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                // A timeout or a dropped attempt kills the command rather than leaving it
                // running unrecorded.
                .kill_on_drop(true);
            let mut child = command.spawn().map_err(|error| {
                let code = match error.kind() {
                    std::io::ErrorKind::NotFound => NOT_FOUND,
                    _ => NOT_EXECUTABLE,
                };
                if let Ok(mut slot) = record_not_started.lock() {
                    *slot = Some(code);
                }
                ExecutorError::not_executed(format!(
                    "cannot start `{}`: {error}",
                    program.to_string_lossy()
                ))
            })?;
            let (status, received) =
                wait_passing_on_signals(&mut child).await.map_err(|error| {
                    ExecutorError::may_have_run(format!("lost track of the command: {error}"))
                })?;
            if let (Some(received), Ok(mut slot)) = (received, record_stopped_by.lock()) {
                *slot = Some(received);
            }
            let exit = process_exit(status);
            executor_slot.set(exit);
            match exit.code {
                Some(0) => Ok(()),
                Some(code) if not_executed.contains(&code) => Err(ExecutorError::not_executed(
                    format!("exit code {code}, listed with --not-executed-exit"),
                )),
                _ => Err(ExecutorError::may_have_run(format!(
                    "the command ended with {exit}"
                ))),
            }
        })
        .await;
    let code_of = |exit: Option<ProcessExit>| -> u8 {
        match exit {
            Some(ProcessExit {
                code: Some(code), ..
            }) => u8::try_from(code.rem_euclid(256)).unwrap_or(1),
            Some(ProcessExit {
                signal: Some(signal),
                ..
            }) => u8::try_from(128 + signal.rem_euclid(128)).unwrap_or(1),
            _ => 1,
        }
    };
    let name = countersign::evidence::printable(&args.action).into_owned();
    let stopped = stopped_by.lock().ok().and_then(|slot| *slot);
    let (mut said, status) = match result {
        Ok(executed) => {
            let mut said = Said::new("committed", format!("`{name}` ran: recorded `committed`"));
            said.effect_key = executed
                .receipt
                .effect_key
                .as_ref()
                .map(ToString::to_string);
            said.receipt = Some(executed.receipt);
            (said, 0)
        }
        Err(ControlError::NotExecuted {
            message,
            effect_key,
            ..
        }) => {
            let started = not_started.lock().ok().and_then(|slot| *slot);
            let mut said = Said::new(
                "failed",
                format!(
                    "`{name}` did not run ({message}): recorded `failed`; a retry may run it (if this call needed an approval, the retry needs a new one: an approval authorizes one attempt)"
                ),
            );
            said.effect_key = effect_key.as_ref().map(ToString::to_string);
            (said, started.unwrap_or_else(|| code_of(slot.get())))
        }
        Err(ControlError::OutcomeUnknown {
            effect_key, cause, ..
        }) => {
            let next = match &effect_key {
                Some(key) => format!(
                    "every retry is refused until someone finds out what happened and runs `countersign resolve {}{} --committed` or `--failed`",
                    countersign::evidence::shell_word(key.as_str()),
                    crate::store_access::store_flags(global)
                ),
                None => "it has no effect key, so nothing refuses a retry".to_owned(),
            };
            let mut said = Said::new(
                "ambiguous",
                format!("`{name}` may have done its work ({cause}): recorded `ambiguous`; {next}"),
            );
            said.effect_key = effect_key.as_ref().map(ToString::to_string);
            let exit = slot.get();
            let status = match (exit, args.timeout) {
                (None, Some(_)) => TIMED_OUT,
                _ => code_of(exit),
            };
            (said, status)
        }
        Err(ControlError::ApprovalRequired {
            request_id,
            expires_at,
            ..
        }) => {
            let flags = crate::store_access::store_flags(global);
            let wait_hint = if args.wait.is_some() {
                "; no answer came within `--wait`"
            } else {
                ", or add `--wait 10m` to wait for the answer"
            };
            let mut said = Said::new(
                "approval_required",
                format!(
                    "`{name}` needs a human's approval: request {request_id} is waiting (see `countersign pending{flags}`); once `countersign approve {request_id}{flags}` grants it, run this same command again (until {expires_at}){wait_hint}; the command did not run"
                ),
            );
            said.reason = Some(countersign::Reason::ApprovalRequired.as_str());
            said.request_id = Some(request_id.to_string());
            said.expires_at = Some(expires_at.to_string());
            (said, REFUSED)
        }
        Err(ControlError::Store {
            after_run: true,
            source,
        }) => (
            Said::new(
                "not_recorded",
                format!(
                    "`{name}` ran ({}), but its outcome could not be recorded ({source}): its effect stays reserved and becomes `ambiguous` when the lease lapses, so no retry runs it again; exit status 125 (not the command's own), since nothing records that it ran",
                    slot.get().map_or_else(
                        || "its exit status unknown".to_owned(),
                        |exit| format!("it ended with {exit}")
                    )
                ),
            ),
            // Not the command's status: a success there would hide that nothing was recorded.
            REFUSED,
        ),
        Err(refusal) => {
            // The kernel's `countersign resolve KEY` names no store: say which, when it is not
            // the default one.
            let flags = crate::store_access::store_flags(global);
            let store_hint = match &refusal {
                ControlError::AmbiguousEffect { .. } if !flags.is_empty() => format!(
                    " (add `{}` to that `resolve`: this is not the default store)",
                    flags.trim_start()
                ),
                _ => String::new(),
            };
            let mut said = Said::new(
                "refused",
                format!(
                    "`{name}` refused ({}): {refusal}{store_hint}; the command did not run",
                    refusal.reason()
                ),
            );
            said.reason = Some(refusal.reason());
            said.effect_key = match &refusal {
                ControlError::DuplicateEffect { effect_key, .. }
                | ControlError::AmbiguousEffect { effect_key, .. } => Some(effect_key.to_string()),
                _ => None,
            };
            (said, REFUSED)
        }
    };
    let status = match stopped {
        // Stopped from outside: the outcome is recorded (as above); exit as a process killed
        // by that signal would, 128 + its number (143 for SIGTERM).
        Some(signal) => {
            // SIGINT is not passed on: a terminal's Ctrl-C reaches the whole process group.
            let passed = if signal == 2 {
                "did not pass it on (a terminal's Ctrl-C reaches the command by itself)"
            } else {
                "passed it on to the command"
            };
            said.message = format!(
                "stopped by signal {signal} while `{name}` ran: {passed}, waited for it to end, and recorded its outcome: {}",
                said.message
            );
            said.signal = Some(signal);
            u8::try_from(128 + signal).unwrap_or(1)
        }
        None => status,
    };
    // Nothing to add on an ordinary success in text: the command's own output said it.
    if global.json || said.event != "committed" || stopped.is_some() {
        said.exit_status = Some(status);
        say(global.json, &said);
    }
    Ok(ExitCode::from(status))
}

/// One thing `exec` says about itself on standard error, which it shares with the command:
/// a line `countersign: MESSAGE` (`warning: MESSAGE` for a warning), or with `--json` one JSON
/// object per line (JSON Lines) with the fields below, the command's own output passing through
/// untouched. The last object is the ending, the one with `exit_status`.
#[derive(Clone, Debug, serde::Serialize)]
struct Said {
    /// `warning` (an approval nobody can give), `waiting` (for an answer, with `--wait`), or
    /// how it ended: `committed`, `failed`, `ambiguous` (recorded so), `approval_required`,
    /// `refused` (nothing ran), `not_recorded` (it ran; its outcome could not be written).
    event: &'static str,
    /// The text form's line, without its prefix.
    message: String,
    /// The kernel's reason code for a refusal (`denied`, `duplicate`, …: `Reason`'s wire
    /// strings, docs/SPEC.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    /// The approval request waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
    /// When that request expires (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    /// The call's effect key, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    effect_key: Option<String>,
    /// The signal that stopped `exec` while the command ran (the outcome was recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<i32>,
    /// The receipt that records a `committed` run.
    #[serde(skip_serializing_if = "Option::is_none")]
    receipt: Option<countersign::Receipt>,
    /// `exec`'s own exit status (the ending only).
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_status: Option<u8>,
}

impl Said {
    fn new(event: &'static str, message: String) -> Said {
        Said {
            event,
            message,
            reason: None,
            request_id: None,
            expires_at: None,
            effect_key: None,
            signal: None,
            receipt: None,
            exit_status: None,
        }
    }
}

/// Say `said` on standard error, as text or as one JSON line.
fn say(json: bool, said: &Said) {
    if json {
        say_json(said);
    } else {
        // What the message quotes reaches a terminal: control characters are shown escaped.
        countersign::stderr_line!(
            "countersign: {}",
            countersign::evidence::printable(&said.message)
        );
    }
}

/// Say `said` as one JSON line on standard error (`serde_json` escapes control characters).
/// The human-readable `message` is shown as the text form shows it (a bidi override in a key
/// it quotes, which JSON would pass raw to the terminal, is escaped); the data fields
/// (`effect_key`) keep their exact values.
fn say_json(said: &Said) {
    let shown = Said {
        message: countersign::evidence::printable(&said.message).into_owned(),
        ..said.clone()
    };
    match serde_json::to_string(&shown) {
        Ok(line) => countersign::stderr_line!("{line}"),
        // Not reachable (every field serializes); the text keeps the message anyway.
        Err(_) => countersign::stderr_line!("countersign: {}", said.message),
    }
}

/// How a process ended, for the receipt.
fn process_exit(status: std::process::ExitStatus) -> ProcessExit {
    if let Some(code) = status.code() {
        return ProcessExit::code(code);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return ProcessExit::signal(signal);
        }
    }
    // Neither a code nor a signal: not reachable on Unix or Windows; record the failure.
    ProcessExit::code(-1)
}

/// How long the command has to end after a signal was passed on to it, before it is killed.
const SIGNAL_GRACE: Duration = Duration::from_secs(10);

/// Wait for the command to end. When `countersign exec` itself gets SIGTERM or SIGHUP (a
/// supervisor stopping it: `kill`, systemd, `docker stop`), the signal is passed on to the
/// command; SIGINT is not, as a terminal's Ctrl-C already reached the whole process group.
/// Either way exec stays to record the outcome (the command killed after [`SIGNAL_GRACE`]), so
/// the effect is settled at once instead of staying `reserved` until its lease lapses. Returns
/// the command's status and the signal exec received, if any.
///
/// # Errors
///
/// The operating system's, when the signal handlers cannot be installed or the command's status
/// cannot be read.
#[cfg(unix)]
async fn wait_passing_on_signals(
    child: &mut tokio::process::Child,
) -> std::io::Result<(std::process::ExitStatus, Option<i32>)> {
    use nix::sys::signal::{Signal, kill};
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let received = tokio::select! {
        status = child.wait() => return Ok((status?, None)),
        _ = terminate.recv() => Signal::SIGTERM,
        _ = interrupt.recv() => Signal::SIGINT,
        _ = hangup.recv() => Signal::SIGHUP,
    };
    if received != Signal::SIGINT
        && let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok())
    {
        // The command may have ended meanwhile: then there is nothing to pass the signal to.
        let _ = kill(nix::unistd::Pid::from_raw(pid), received);
    }
    let status = match tokio::time::timeout(SIGNAL_GRACE, child.wait()).await {
        Ok(status) => status?,
        Err(_) => {
            child.kill().await?;
            child.wait().await?
        }
    };
    Ok((status, Some(received as i32)))
}

/// Elsewhere: wait for the command; no signal is passed on.
#[cfg(not(unix))]
async fn wait_passing_on_signals(
    child: &mut tokio::process::Child,
) -> std::io::Result<(std::process::ExitStatus, Option<i32>)> {
    Ok((child.wait().await?, None))
}
