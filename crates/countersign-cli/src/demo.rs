//! `countersign demo`: the kernel's guarantees, one step at a time, on a fresh SQLite file.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Args;
use countersign::approval::{AnswerDecision, ApprovalRecord};
use countersign::approver::{Channel, Credential};
use countersign::store::{RecordAnswer, SqliteStore, Store};
use countersign::{
    ActionHash, ActionRequest, AnswerError, ApprovalId, Clock, Control, ControlError, Decision,
    EffectKey, EffectState, ExecutorError, Policy, Principal, StaticIdentity, SystemClock,
};
use serde_json::{Value, json};

use crate::render;

mod inbox;
use crate::{Failure, Global};

/// The example refunds policy, for when the demo runs outside a checkout. The file lives in the
/// crate so that the published package carries it; `examples/refunds/countersign.yaml` links
/// to it.
const EXAMPLE_POLICY: &str = include_str!("../demo/countersign.yaml");
const EXAMPLE_POLICY_PATH: &str = "examples/refunds/countersign.yaml";

/// The principal the demo's agent acts as.
const AGENT: &str = "agent:support-bot";

/// The refund of the quorum scene: in the example policy's band that needs two people from
/// `group:finance`, none of them sharing a group with the agent.
fn quorum_refund() -> Value {
    json!({"payment_id": "pi_1005", "amount": 400000})
}

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Answer yourself instead of the scripted approvers: the first approval request, and the
    /// second finance approval of the two-approver refund (as human:bob).
    #[arg(long)]
    interactive: bool,
}

struct Demo<'a> {
    control: Control,
    store: Arc<dyn Store>,
    out: &'a mut dyn Write,
    /// The payment provider's calls, in order: the payment id, and a note when its reply was
    /// lost.
    refunds: Arc<Mutex<Vec<String>>>,
}

type Step = Result<(), Failure>;

impl Demo<'_> {
    fn say(&mut self, line: impl AsRef<str>) -> Step {
        writeln!(self.out, "{}", line.as_ref())?;
        Ok(())
    }

    /// The agent asks for a refund; the payment provider either refunds or loses the reply.
    async fn refund(
        &mut self,
        arguments: Value,
        approval: Option<countersign::ApprovalId>,
        lose_reply: bool,
    ) -> Result<Result<String, ControlError>, Failure> {
        let mut request = ActionRequest::new("stripe.refund", &arguments);
        if let Some(id) = approval {
            request = request.with_approval(id);
        }
        self.say(format!(
            "   agent   → stripe.refund {}",
            countersign::canonical::to_canonical(&arguments)?
        ))?;
        let refunds = Arc::clone(&self.refunds);
        let result = self
            .control
            .execute(request, |arguments| async move {
                let payment = arguments["payment_id"].as_str().unwrap_or("?");
                let call = if lose_reply {
                    format!("{payment} (whose reply was lost)")
                } else {
                    payment.to_owned()
                };
                refunds
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(call);
                if lose_reply {
                    return Err(ExecutorError::may_have_run(
                        "the refund request was sent, then the connection dropped before the reply",
                    ));
                }
                Ok(format!(
                    "refunded {}",
                    arguments["payment_id"].as_str().unwrap_or("?")
                ))
            })
            .await;
        Ok(
            result
                .map(|executed| format!("{} (receipt #{})", executed.value, executed.receipt.seq)),
        )
    }

    fn show(&mut self, result: &Result<String, ControlError>) -> Step {
        match result {
            Ok(value) => self.say(format!("   result  → committed: {value}")),
            Err(error) if error.did_run() == countersign::DidRun::Maybe => self.say(format!(
                "   result  → ambiguous ({}): {error}",
                error.reason()
            )),
            Err(error) => self.say(format!(
                "   result  → refused ({}): {error}",
                error.reason()
            )),
        }
    }

    /// Ask the interactive human a yes-or-no question; anything but `y` or `yes` is no.
    fn ask(&mut self, question: impl AsRef<str>) -> Result<bool, Failure> {
        self.say(format!("   human   ? {} [y/N] ", question.as_ref()))?;
        self.out.flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        Ok(matches!(line.trim(), "y" | "Y" | "yes"))
    }

    /// `who` answers `request_id` the way `countersign approve ID --as WHO --hash HASH` does:
    /// through the CLI channel, echoing the hash the request showed. A refusal is a result to
    /// print, not a failure of the demo.
    async fn answer(
        &mut self,
        request_id: &ApprovalId,
        shown_hash: &ActionHash,
        decision: AnswerDecision,
        who: &str,
    ) -> Result<Result<ApprovalRecord, AnswerError>, Failure> {
        let answer = RecordAnswer {
            request_id: request_id.clone(),
            decision: Ok(decision),
            approver: Credential::Asserted(who.to_owned()),
            channel: Channel::Cli,
            shown_hash: Some(shown_hash.clone()),
            note: None,
        };
        match countersign::control::submit_answer(self.store.as_ref(), answer, SystemClock.now())
            .await
        {
            Ok(record) => Ok(Ok(record)),
            Err(AnswerError::Store(error)) => Err(Failure(error.to_string())),
            Err(refused) => Ok(Err(refused)),
        }
    }

    /// Print an answer's outcome: the request's state and count, or the refusal's reason code.
    fn show_answer(
        &mut self,
        who: &str,
        verb: &str,
        result: &Result<ApprovalRecord, AnswerError>,
    ) -> Step {
        match result {
            Ok(record) => self.say(format!(
                "   {who} {verb}: {}, {}",
                record.state,
                countersign::display::approvals_count(record.approvals_given(), record.rule.quorum)
            )),
            Err(refused) => self.say(format!(
                "   {who} {verb}: refused ({}): {refused}",
                refused.reason()
            )),
        }
    }

    /// The answer receipts of `request_id`, as the chain holds them: who, with which groups,
    /// through which channel, and what each answer did.
    async fn answer_receipts(&mut self, request_id: &ApprovalId) -> Step {
        let stored = self.store.receipts(0, 1_000).await?;
        let mut table = render::Table::new([
            "SEQ",
            "OUTCOME",
            "REASON",
            "BY",
            "GROUPS",
            "CHANNEL",
            "AUTH",
            "APPROVALS",
        ]);
        for stored in &stored {
            let receipt = stored.to_receipt().map_err(Failure)?;
            if receipt.approval_id.as_deref() != Some(request_id.as_str())
                || receipt.channel.is_none()
            {
                continue;
            }
            let count = match (receipt.approvals_given, receipt.approvals_needed) {
                (Some(given), Some(needed)) => format!("{given} of {needed}"),
                _ => "-".to_owned(),
            };
            let dash = || "-".to_owned();
            table.row([
                format!("#{}", receipt.seq),
                receipt.outcome.as_str().to_owned(),
                receipt.reason.clone().unwrap_or_else(dash),
                receipt.approver.clone().unwrap_or_else(dash),
                receipt
                    .approver_groups
                    .as_ref()
                    .map_or_else(dash, |groups| groups.join(",")),
                receipt.channel.clone().unwrap_or_else(dash),
                receipt.authentication.clone().unwrap_or_else(dash),
                count,
            ]);
        }
        let mut text = Vec::new();
        table.write(&mut text)?;
        for line in String::from_utf8_lossy(&text).lines() {
            self.say(format!("     {line}"))?;
        }
        Ok(())
    }
}

fn prepare_policy(global: &Global) -> Result<PathBuf, Failure> {
    if let Some(path) = &global.policy {
        return Ok(path.clone());
    }
    let example = PathBuf::from(EXAMPLE_POLICY_PATH);
    if example.exists() {
        return Ok(example);
    }
    // Outside a checkout: write the example to a new private folder of its own (never a
    // shared, guessable one: another user's or another run's demo may be there), beside the
    // scratch store. It is kept so the operator can look around afterwards.
    let folder = tempfile::Builder::new()
        .prefix("countersign-demo-")
        .tempdir()
        .map_err(|error| {
            Failure(format!(
                "cannot make a folder for the demo in `{}`: {error}: pass `--policy {EXAMPLE_POLICY_PATH}` from a checkout, or set `TMPDIR` to a writable folder",
                std::env::temp_dir().display()
            ))
        })?
        .keep();
    let path = folder.join("countersign.yaml");
    std::fs::write(&path, EXAMPLE_POLICY).map_err(|error| {
        Failure(format!(
            "cannot write the example policy to `{}`: {error}",
            path.display()
        ))
    })?;
    Ok(path)
}

/// A new SQLite store at `path`. The demo's own default file is replaced; a file named with
/// `--store-url` (or `COUNTERSIGN_STORE_URL`, which may point at the agent's real store) is
/// never deleted.
/// Also says whether an earlier demo's store was replaced.
fn fresh_store(path: &Path, named_by_operator: bool) -> Result<(SqliteStore, bool), Failure> {
    if named_by_operator && path.exists() {
        return Err(Failure(format!(
            "`{}` already exists and the demo needs a fresh store: pass `--store-url sqlite:NEW_PATH` (check `COUNTERSIGN_STORE_URL` too), or leave `--store-url` out",
            path.display()
        )));
    }
    let replaced = path.exists();
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(Failure(format!(
                    "cannot remove the old demo store `{}`: {error}",
                    file.display()
                )));
            }
        }
    }
    Ok((SqliteStore::open(path)?, replaced))
}

/// Take the lock file `STORE.lock` beside the demo's store, so two demos never share (and
/// delete) one store: the second is refused at once, naming the first, instead of failing
/// midway on a file the other replaced. The lock is the operating system's (`flock` on Unix),
/// released when the returned file is dropped or the process ends, however it ends; the file
/// itself stays.
///
/// # Errors
///
/// A [`Failure`] when another process holds the lock, or the lock file cannot be made.
fn lock_demo_store(store: &Path) -> Result<std::fs::File, Failure> {
    let path = PathBuf::from(format!("{}.lock", store.display()));
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent)
            .map_err(|error| Failure(format!("cannot create `{}`: {error}", parent.display())))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(&path)
        .map_err(|error| Failure(format!("cannot open `{}`: {error}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Failure(format!(
            "another `countersign demo` is running on `{}` (it holds `{}`): wait for it to finish, or give this one a store of its own with `--store-url sqlite:OTHER_PATH`",
            store.display(),
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(error)) => Err(Failure(format!(
            "cannot lock `{}`: {error}",
            path.display()
        ))),
    }
}

/// `countersign demo`.
pub async fn run(
    global: &Global,
    args: &DemoArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    if global.json {
        return Err(Failure(
            "the demo prints a walk-through for people, not JSON: leave out `--json`".to_owned(),
        ));
    }
    let policy_path = prepare_policy(global)?;
    let policy = Policy::load(&policy_path)?;
    check_demo_policy(&policy, &policy_path)?;
    let quorum = quorum_of(&policy);
    let store_path = match &global.store_url {
        Some(url) => PathBuf::from(
            countersign::store::sqlite_path(url)
                .filter(|path| !path.is_empty())
                .ok_or_else(|| {
                    Failure(format!(
                        "the demo runs on a SQLite file, not `{url}`: pass `--store-url sqlite:PATH` or leave it out"
                    ))
                })?,
        ),
        None => policy_path
            .parent()
            .unwrap_or(Path::new("."))
            .join(".countersign")
            .join("demo.db"),
    };
    // Held until the demo ends: a second demo on the same store would delete it under this one.
    let _running = lock_demo_store(&store_path)?;
    let (fresh, replaced) = fresh_store(&store_path, global.store_url.is_some())?;
    let store: Arc<dyn Store> = Arc::new(fresh);
    let control = Control::builder_shared(Arc::new(policy), Arc::clone(&store))
        .identity(StaticIdentity::new(Principal::new(AGENT)?))
        .build();
    let mut demo = Demo {
        control,
        store,
        out,
        refunds: Arc::new(Mutex::new(Vec::new())),
    };
    let policy_hash = demo.control.policy().hash().to_owned();

    demo.say(format!(
        "Countersign demo: policy {} ({policy_hash})",
        policy_path.display()
    ))?;
    demo.say(format!(
        "store: sqlite:{} (created fresh)",
        store_path.display()
    ))?;
    if replaced {
        // A `serve` started on the last demo's store keeps reading the file just deleted.
        demo.say(
            "note: this replaced the last demo's store and approver key: restart any `countersign serve` still running on them (it keeps reading the deleted file) and issue a new token",
        )?;
    }
    demo.say(if quorum.is_some() {
        "the agent is `agent:support-bot`; refunds up to 50000 are allowed, up to 200000 need a human, up to 1000000 two people from finance, larger are denied"
    } else {
        "the agent is `agent:support-bot`; refunds up to 50000 are allowed, up to 1000000 need a human, larger are denied"
    })?;

    demo.say("\n1. An allowed refund runs once")?;
    let result = demo
        .refund(
            json!({"payment_id": "pi_1001", "amount": 2500}),
            None,
            false,
        )
        .await?;
    demo.show(&result)?;

    demo.say("\n2. A larger refund waits for a human")?;
    let arguments = json!({"payment_id": "pi_1002", "amount": 75000});
    let result = demo.refund(arguments.clone(), None, false).await?;
    demo.show(&result)?;
    let request_id = match result {
        Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
        other => {
            let got = match other {
                Ok(value) => format!("it ran ({value})"),
                Err(error) => error.to_string(),
            };
            return Err(Failure(format!(
                "the demo needs a policy under which a refund of 75000 waits for a human, like `{EXAMPLE_POLICY_PATH}`, but `{}` gave: {got}",
                policy_path.display()
            )));
        }
    };
    let approve = if args.interactive {
        demo.ask(format!(
            "approve refund of 75000 on pi_1002 ({request_id})?"
        ))?
    } else {
        true
    };
    let (decision, verb, who) = if !args.interactive {
        (AnswerDecision::Approve, "approve", "human:alice")
    } else if approve {
        (AnswerDecision::Approve, "approve", "human:you")
    } else {
        (AnswerDecision::Deny, "deny", "human:you")
    };
    let record = countersign::control::record_answer(
        demo.store.as_ref(),
        &request_id,
        decision,
        who,
        None,
        SystemClock.now(),
    )
    .await?;
    demo.say(format!(
        "   human   → `countersign {verb} {}` as {who}: {}",
        record.id, record.state
    ))?;
    demo.say("   agent sends the identical call again")?;
    let result = demo.refund(arguments, None, false).await?;
    demo.show(&result)?;

    demo.say("\n3. An answer about different arguments authorizes nothing")?;
    let asked = demo
        .refund(
            json!({"payment_id": "pi_1003", "amount": 80000}),
            None,
            false,
        )
        .await?;
    demo.show(&asked)?;
    if let Err(ControlError::ApprovalRequired { request_id, .. }) = asked {
        countersign::control::record_answer(
            demo.store.as_ref(),
            &request_id,
            AnswerDecision::Approve,
            "human:alice",
            None,
            SystemClock.now(),
        )
        .await?;
        demo.say(format!(
            "   human   → approves {request_id} (80000 on pi_1003)"
        ))?;
        demo.say("   agent presents that approval for a different amount")?;
        let result = demo
            .refund(
                json!({"payment_id": "pi_1003", "amount": 900000}),
                Some(request_id),
                false,
            )
            .await?;
        demo.show(&result)?;
    }

    quorum_scene(&mut demo, quorum, &policy_path, args.interactive).await?;

    demo.say("\n5. A duplicate is refused: refund:pi_1001 already happened")?;
    let result = demo
        .refund(
            json!({"payment_id": "pi_1001", "amount": 2500}),
            None,
            false,
        )
        .await?;
    demo.show(&result)?;

    demo.say("\n6. A lost response is ambiguous, and a blind retry is refused")?;
    let result = demo
        .refund(json!({"payment_id": "pi_1004", "amount": 4000}), None, true)
        .await?;
    demo.show(&result)?;
    demo.say("   agent retries the identical call")?;
    let result = demo
        .refund(
            json!({"payment_id": "pi_1004", "amount": 4000}),
            None,
            false,
        )
        .await?;
    demo.show(&result)?;
    let key = EffectKey::new("refund:pi_1004")?;
    demo.control
        .resolve(
            &key,
            EffectState::Committed,
            "human:ops",
            Some("the provider's dashboard shows the refund"),
        )
        .await?;
    demo.say("   human   → `countersign resolve refund:pi_1004 --committed` (the provider shows the refund)")?;
    let result = demo
        .refund(
            json!({"payment_id": "pi_1004", "amount": 4000}),
            None,
            false,
        )
        .await?;
    demo.show(&result)?;

    demo.say("\n7. An action the policy does not know is denied")?;
    demo.say("   agent   → stripe.delete_customer {\"customer\":\"cus_9\"}")?;
    let result = demo
        .control
        .execute(
            ActionRequest::new("stripe.delete_customer", &json!({"customer": "cus_9"})),
            |_| async { Ok::<String, ExecutorError>("deleted".to_owned()) },
        )
        .await
        .map(|executed| executed.value);
    demo.show(&result)?;

    let calls = demo
        .refunds
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    demo.say(format!(
        "\nthe payment provider was called {} times: {}, each exactly once",
        calls.len(),
        words(&calls)
    ))?;

    demo.say("\n8. The evidence: every attempt left a receipt, chained by hash")?;
    let stored = demo.store.receipts(0, 1_000).await?;
    let receipts: Vec<_> = stored
        .iter()
        .map(|receipt| receipt.to_receipt())
        .collect::<Result<_, _>>()
        .map_err(Failure)?;
    render::receipts_table(&receipts).write(demo.out)?;
    demo.say("")?;
    let report = demo.control.verify_receipts(None).await?;
    // Suggested commands name the demo's store, wherever it is.
    let flags = format!(
        " --store-url {}",
        crate::store_access::shell_word(&format!("sqlite:{}", store_path.display()))
    );
    render::verify_report(&report, &flags, demo.out)?;
    // One request is left waiting, so that `pending`, `approve` and the web inbox have
    // something to show on the demo's store (a waiting request holds nothing and writes no
    // receipt, so the chain above is unchanged). It is opened under the example policy plus a
    // key of the demo's own, so that `serve` can sign a person in and the kernel accepts their
    // answer (it judges a token by the keys stored with the request).
    demo.say("\n9. One request is left waiting for you")?;
    let inbox = inbox::prepare(
        &policy_path,
        demo.control.policy(),
        &store_path,
        global.store_url.is_none(),
    );
    if let Ok(setup) = &inbox {
        demo.control =
            Control::builder_shared(Arc::new(setup.policy.clone()), Arc::clone(&demo.store))
                .identity(StaticIdentity::new(Principal::new(AGENT)?))
                .build();
    }
    let left = demo
        .refund(
            json!({"payment_id": "pi_1006", "amount": 120000}),
            None,
            false,
        )
        .await?;
    demo.show(&left)?;
    if let Err(ControlError::ApprovalRequired { request_id, .. }) = &left {
        demo.say(format!(
            "   answer it from another shell: countersign approve {request_id} --as human:you --store-url sqlite:{0}",
            store_path.display()
        ))?;
        match &inbox {
            Ok(setup) => {
                demo.say(format!(
                    "   or in the web inbox: countersign serve --policy {} --store-url sqlite:{}",
                    setup.policy_file.display(),
                    store_path.display()
                ))?;
                demo.say(format!(
                    "   and sign in at http://127.0.0.1:8780/signin with the token this prints: countersign approver token --key {} --subject human:you",
                    setup.key_file.display()
                ))?;
            }
            Err(why) => demo.say(format!("   the web inbox cannot answer it: {why}"))?,
        }
    }
    demo.say(format!(
        "\nlook around: countersign receipts --store-url sqlite:{0}  (or effects, pending, inspect <id>)",
        store_path.display()
    ))?;
    Ok(crate::verify::exit_for(&report))
}

/// The quorum the example's larger refunds need under `policy`, when it is more than one
/// answer; `None` for a policy (an older copy of the example) that asks one human for them.
fn quorum_of(policy: &Policy) -> Option<u32> {
    let decided = policy.decide("stripe.refund", &quorum_refund());
    if decided.decision != Decision::Approve {
        return None;
    }
    let quorum = policy.approval_rule(&decided, AGENT).quorum;
    (quorum > 1).then_some(quorum)
}

/// `a`, `a and b`, `a, b and c`.
fn words(items: &[String]) -> String {
    match items {
        [] => "nothing".to_owned(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Scene 4: a refund that needs two approvers from `group:finance`. One yes leaves it pending
/// (`1 of 2`); the agent's own answer and answers from outside the group, or from inside it but
/// sharing the agent's group, are refused with their reason codes; the second finance yes
/// grants it. Interactively, the operator gives that second answer as `human:bob`.
async fn quorum_scene(
    demo: &mut Demo<'_>,
    quorum: Option<u32>,
    policy_path: &Path,
    interactive: bool,
) -> Step {
    let arguments = quorum_refund();
    let amount = &arguments["amount"];
    let payment = arguments["payment_id"].as_str().unwrap_or("?").to_owned();
    let Some(quorum) = quorum else {
        demo.say(format!(
            "\n4. A refund of {amount} that needs several approvers"
        ))?;
        return demo.say(format!(
            "   skipped: under `{}` a refund of {amount} needs one answer; the example policy asks two people from finance",
            policy_path.display()
        ));
    };
    demo.say(format!(
        "\n4. A refund of {amount} needs {quorum} approvers from finance, and not just anyone's answer counts"
    ))?;
    let result = demo.refund(arguments.clone(), None, false).await?;
    demo.show(&result)?;
    let Err(ControlError::ApprovalRequired {
        request_id,
        action_hash,
        ..
    }) = result
    else {
        return Err(Failure(format!(
            "the demo needs a policy under which a refund of {amount} waits for approvers, like `{EXAMPLE_POLICY_PATH}`, but `{}` did not",
            policy_path.display()
        )));
    };
    if let Some(record) = demo.store.approval(&request_id).await? {
        demo.say(format!(
            "   request → {request_id} may be answered by {}",
            record.rule.summary()
        ))?;
    }
    demo.say(if interactive {
        "   each answer is what `countersign approve ID --as NAME --hash HASH` records; you give the last one"
    } else {
        "   each answer is what `countersign approve ID --as NAME --hash HASH` records (scripted)"
    })?;

    let result = demo
        .answer(
            &request_id,
            &action_hash,
            AnswerDecision::Approve,
            "human:alice",
        )
        .await?;
    demo.show_answer("human   → human:alice", "approves", &result)?;
    demo.say("   agent sends the identical call again")?;
    let retried = demo.refund(arguments.clone(), None, false).await?;
    demo.show(&retried)?;

    for (who, label, verb) in [
        (
            AGENT,
            "agent   → agent:support-bot",
            "approves its own request",
        ),
        ("human:sam", "human   → human:sam", "approves"),
        ("human:carol", "human   → human:carol", "approves"),
    ] {
        let result = demo
            .answer(&request_id, &action_hash, AnswerDecision::Approve, who)
            .await?;
        demo.show_answer(label, verb, &result)?;
    }

    let decision = if interactive
        && !demo.ask(format!(
            "you are human:bob (finance): approve refund of {amount} on {payment} ({request_id})?"
        ))? {
        AnswerDecision::Deny
    } else {
        AnswerDecision::Approve
    };
    let verb = match decision {
        AnswerDecision::Approve => "approves",
        AnswerDecision::Deny => "denies",
    };
    let result = demo
        .answer(&request_id, &action_hash, decision, "human:bob")
        .await?;
    demo.show_answer("human   → human:bob", verb, &result)?;
    demo.say("   agent sends the identical call again")?;
    let result = demo.refund(arguments, None, false).await?;
    demo.show(&result)?;

    demo.say(format!(
        "   evidence → the answers to {request_id}, as their receipts record them:"
    ))?;
    demo.answer_receipts(&request_id).await
}

/// The demo's steps assume the example policy's decisions; refuse another policy before
/// writing anything rather than stopping half-way.
fn check_demo_policy(policy: &Policy, path: &Path) -> Result<(), Failure> {
    let differs = |what: String| {
        Failure(format!(
            "the demo walks through the example refunds policy, and `{}` differs: {what}: run `countersign demo` without --policy, or use a copy of examples/refunds/countersign.yaml",
            path.display()
        ))
    };
    if policy
        .entry("stripe.refund")
        .and_then(|entry| entry.effect())
        .is_none()
    {
        return Err(differs(
            "`stripe.refund` has no `effect` template, and the demo shows a duplicate refused"
                .to_owned(),
        ));
    }
    let expected = [
        (
            "stripe.refund",
            json!({"payment_id": "pi_1001", "amount": 2500}),
            Decision::Allow,
        ),
        (
            "stripe.refund",
            json!({"payment_id": "pi_1002", "amount": 75000}),
            Decision::Approve,
        ),
        (
            "stripe.delete_customer",
            json!({"customer": "cus_9"}),
            Decision::Deny,
        ),
    ];
    for (action, arguments, decision) in expected {
        let decided = policy.decide(action, &arguments).decision;
        if decided != decision {
            return Err(differs(format!(
                "`{action}` {arguments} is `{}`, the demo needs `{}`",
                decided.as_str(),
                decision.as_str()
            )));
        }
    }
    Ok(())
}
