//! `countersign demo`: the kernel's guarantees, one step at a time, on a fresh SQLite file.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Args;
use countersign::approval::{self, AnswerDecision};
use countersign::store::{SqliteStore, Store};
use countersign::{
    ActionRequest, Clock, Control, ControlError, EffectKey, EffectState, ExecutorError, Policy,
    Principal, StaticIdentity, SystemClock,
};
use serde_json::{Value, json};

use crate::render;
use crate::{Failure, Global};

/// The example policy, for when the demo runs outside a checkout.
const EXAMPLE_POLICY: &str = include_str!("../../../examples/refunds/countersign.yaml");
const EXAMPLE_POLICY_PATH: &str = "examples/refunds/countersign.yaml";

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Answer the approval request yourself instead of the scripted approver.
    #[arg(long)]
    interactive: bool,
}

struct Demo<'a> {
    control: Control,
    store: Arc<dyn Store>,
    out: &'a mut dyn Write,
    refunds: Arc<AtomicUsize>,
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
                refunds.fetch_add(1, Ordering::SeqCst);
                if lose_reply {
                    return Err(ExecutorError::failed(
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
fn fresh_store(path: &Path, named_by_operator: bool) -> Result<SqliteStore, Failure> {
    if named_by_operator && path.exists() {
        return Err(Failure(format!(
            "`{}` already exists and the demo needs a fresh store: pass `--store-url sqlite:NEW_PATH` (check `COUNTERSIGN_STORE_URL` too), or leave `--store-url` out",
            path.display()
        )));
    }
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
    Ok(SqliteStore::open(path)?)
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
    let store: Arc<dyn Store> = Arc::new(fresh_store(&store_path, global.store_url.is_some())?);
    let control = Control::builder_shared(Arc::new(policy), Arc::clone(&store))
        .identity(StaticIdentity::new(Principal::new("agent:support-bot")?))
        .build();
    let mut demo = Demo {
        control,
        store,
        out,
        refunds: Arc::new(AtomicUsize::new(0)),
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
    demo.say("the agent is `agent:support-bot`; refunds up to 50000 are allowed, up to 1000000 need a human, larger are denied")?;

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
        demo.say(format!(
            "   human   ? approve refund of 75000 on pi_1002 ({request_id})? [y/N] "
        ))?;
        demo.out.flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        matches!(line.trim(), "y" | "Y" | "yes")
    } else {
        true
    };
    let (decision, verb, who) = if !args.interactive {
        (AnswerDecision::Approve, "approve", "human:alice")
    } else if approve {
        (AnswerDecision::Approve, "approve", "human:you")
    } else {
        (AnswerDecision::Reject, "deny", "human:you")
    };
    let record = approval::record_answer(
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
        approval::record_answer(
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

    demo.say("\n4. A duplicate is refused: refund:pi_1001 already happened")?;
    let result = demo
        .refund(
            json!({"payment_id": "pi_1001", "amount": 2500}),
            None,
            false,
        )
        .await?;
    demo.show(&result)?;

    demo.say("\n5. A lost response is ambiguous, and a blind retry is refused")?;
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

    demo.say("\n6. An action the policy does not know is denied")?;
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

    let provider_refunds = demo.refunds.load(Ordering::SeqCst);
    demo.say(format!("\nthe payment provider was called {provider_refunds} times: pi_1001, pi_1002 and pi_1004 (whose reply was lost), each exactly once"))?;

    demo.say("\n7. The evidence: every attempt left a receipt, chained by hash")?;
    let stored = demo.store.receipts(0, 1_000).await?;
    let receipts: Vec<_> = stored
        .iter()
        .map(|receipt| receipt.to_receipt())
        .collect::<Result<_, _>>()
        .map_err(Failure)?;
    render::receipts_table(&receipts).write(demo.out)?;
    demo.say("")?;
    let report = demo.control.verify_receipts(None).await?;
    render::verify_report(&report, demo.out)?;
    demo.say(format!(
        "\nlook around: countersign receipts --store-url sqlite:{0}  (or effects, pending, inspect <id>)",
        store_path.display()
    ))?;
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The demo's steps assume the example policy's decisions; refuse another policy before
/// writing anything rather than stopping half-way.
fn check_demo_policy(policy: &Policy, path: &Path) -> Result<(), Failure> {
    use countersign::Decision;
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
