//! The operator commands: pending, approve, deny, resolve, receipts, effects, inspect, verify.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use countersign::approval::{self, AnswerDecision};
use countersign::approver::{Channel, Credential};
use countersign::display;
use countersign::evidence::{StoredReceipt, printable};
use countersign::store::{self, Store};
use countersign::{
    ActionHash, ApprovalId, ApprovalState, Clock, EffectKey, EffectState, SystemClock,
};

use crate::render::{self, Table};
use crate::store_access::{missing_store_file, missing_store_message, open_existing, store_flags};
use crate::{Failure, Global};

pub(crate) fn write_json(
    out: &mut dyn Write,
    value: &impl serde::Serialize,
) -> Result<(), Failure> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Arguments of `pending`.
#[derive(Debug, Args)]
pub struct PendingArgs {
    /// Only the requests the given approver may answer (`--as`, `--token-file` or
    /// `COUNTERSIGN_APPROVER_TOKEN` say who; judged by each request's stored rule).
    #[arg(long)]
    mine: bool,
    #[command(flatten)]
    identity: IdentityArgs,
}

/// `countersign pending`.
pub async fn pending(
    global: &Global,
    args: &PendingArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let store = open_existing(global).await?;
    let now = SystemClock.now();
    let credential = if args.mine {
        Some(args.identity.credential()?)
    } else {
        None
    };
    let mut waiting = Vec::new();
    for record in store.approvals(Some(ApprovalState::Pending)).await? {
        if record.is_expired_at(now) {
            continue;
        }
        if let Some(credential) = &credential {
            let approver = approval::approver_of(&record.rule, credential, Channel::Cli, now)
                .map_err(|fault| {
                    Failure(format!(
                        "cannot tell whose requests these are: {}",
                        match fault {
                            approval::ApproverFault::Anonymous => "no approver given".to_owned(),
                            approval::ApproverFault::Malformed(error) => error.to_string(),
                            approval::ApproverFault::Unverified(detail) => detail,
                        }
                    ))
                })?;
            let mine = countersign::approver::judge(&record.rule, &record.principal, &approver)
                .is_ok()
                && !record
                    .answers
                    .iter()
                    .any(|answer| answer.approver.id == approver.id);
            if !mine {
                continue;
            }
        }
        waiting.push(record);
    }
    if global.json {
        let listed: Vec<WithDisplay<'_>> = waiting.iter().map(WithDisplay::of).collect();
        write_json(out, &listed)?;
        return Ok(ExitCode::SUCCESS);
    }
    if waiting.is_empty() {
        writeln!(out, "no approval requests are waiting")?;
        return Ok(ExitCode::SUCCESS);
    }
    // Each request in full, as `countersign::display` renders it for every surface: nothing
    // cut, every character a person could misread escaped (case B44).
    for record in &waiting {
        writeln!(
            out,
            "approval {}: pending, {}",
            record.id,
            countersign::display::approvals_count(record.approvals_given(), record.rule.quorum)
        )?;
        render::indented(&display::render(record, None).to_text(), out)?;
        writeln!(out)?;
    }
    let flags = store_flags(global);
    // One request: its own id, ready to paste; several: the place-holder, said to be one.
    let (id, which) = match waiting.as_slice() {
        [only] => (only.id.to_string(), ""),
        _ => ("<ID>".to_owned(), " (<ID> is an `apr_…` id above)"),
    };
    writeln!(
        out,
        "answer with `countersign approve {id}{flags}` or `countersign deny {id}{flags} --note \"why\"`{which}"
    )?;
    if waiting
        .iter()
        .any(|record| record.rule.require == countersign::approver::Requirement::Authenticated)
    {
        writeln!(
            out,
            "a request that needs an authenticated approver takes your approver token: add `--token-file FILE` (from `countersign approver token`)"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Who is answering: an approver token, or a name (asserted: only for requests whose rule
/// allows it).
#[derive(Debug, Args)]
pub struct IdentityArgs {
    /// Who you are, as a name nobody verifies (asserted) [default: `human:$USER`]. Refused
    /// where the request's rule says `require: authenticated`.
    #[arg(long = "as", value_name = "WHO", env = "COUNTERSIGN_APPROVER")]
    approver: Option<String>,
    /// Prove who you are with the approver token in FILE (from `countersign approver token`):
    /// its signature, expiry, subject and groups are checked against the keys stored with the
    /// request. The token may also come from `COUNTERSIGN_APPROVER_TOKEN`.
    #[arg(long, value_name = "FILE", conflicts_with = "approver")]
    token_file: Option<std::path::PathBuf>,
}

impl IdentityArgs {
    /// The credential these options give: a token (file, then environment), else a name.
    pub(crate) fn credential(&self) -> Result<Credential, Failure> {
        if let Some(path) = &self.token_file {
            let text = std::fs::read_to_string(path).map_err(|error| {
                Failure(format!(
                    "cannot read the approver token file `{}`: {error}: check the path, or issue a token with `countersign approver token --key FILE --subject WHO`",
                    path.display()
                ))
            })?;
            let token = text.trim();
            if token.is_empty() {
                return Err(Failure(format!(
                    "the approver token file `{}` is empty: issue one with `countersign approver token`",
                    path.display()
                )));
            }
            return Ok(Credential::Token(token.to_owned()));
        }
        if self.approver.is_none()
            && let Ok(token) = std::env::var("COUNTERSIGN_APPROVER_TOKEN")
            && !token.trim().is_empty()
        {
            return Ok(Credential::Token(token.trim().to_owned()));
        }
        approver(&self.approver).map(Credential::Asserted)
    }
}

/// Say, on standard error, that an asserted identity on a shared store proves nothing.
pub(crate) fn warn_if_asserted_on_shared_store(store: &dyn Store, credential: &Credential) {
    if store.backend() == "postgres" && matches!(credential, Credential::Asserted(_)) {
        countersign::stderr_line!(
            "warning: answering as an asserted name (`--as`, or `$USER`) on a shared PostgreSQL store: asserted identity is for local use; anyone who can reach the store can type any name: give approvers tokens (`countersign approver token`) and set `require: authenticated` in the policy"
        );
    }
}

/// An approval request as `--json` prints it: the stored record's fields, plus `display`, what
/// an approver is shown ([`display::ApprovalDisplay`]).
#[derive(serde::Serialize)]
struct WithDisplay<'a> {
    #[serde(flatten)]
    record: &'a countersign::ApprovalRecord,
    display: display::ApprovalDisplay,
}

impl<'a> WithDisplay<'a> {
    fn of(record: &'a countersign::ApprovalRecord) -> WithDisplay<'a> {
        WithDisplay {
            record,
            display: display::render(record, None),
        }
    }
}

/// Arguments of `approve` and `deny`.
#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The approval request (`apr_…`, from `countersign pending`).
    id: String,
    #[command(flatten)]
    identity: IdentityArgs,
    /// The action hash you were shown (`sha256:…`, from `pending --json` or `inspect`): the
    /// answer is refused if the request is for anything else. Without it the answer is
    /// recorded with `hash_confirmed: false`.
    #[arg(long = "hash", value_name = "SHA256")]
    shown_hash: Option<String>,
    /// A note kept with the answer (shown to the agent as data; at most 4096 bytes).
    #[arg(long, value_name = "TEXT", value_parser = crate::args::NoteParser)]
    note: Option<String>,
}

pub(crate) fn approver(given: &Option<String>) -> Result<String, Failure> {
    let shaped = |who: String| {
        // The one shape of an approver id (issue #19): `human:`, `:` or `human: bob` never
        // reach a receipt.
        countersign::approver::ApproverId::parse(&who)
            .map(countersign::approver::ApproverId::into_string)
            .map_err(|error| Failure(format!("`--as`: {error}")))
    };
    match given {
        Some(who) if !who.trim().is_empty() => shaped(who.trim().to_owned()),
        Some(_) => Err(Failure(
            "`--as` is empty: say who is answering, for example `--as human:alice`".to_owned(),
        )),
        None => match std::env::var("USER").or_else(|_| std::env::var("USERNAME")) {
            Ok(user) if !user.trim().is_empty() => shaped(format!("human:{}", user.trim())),
            _ => Err(Failure(
                "nobody to record as who did this: `USER` is not set: say who you are, for example `--as human:alice`".to_owned(),
            )),
        },
    }
}

/// `countersign approve` and `countersign deny`.
pub async fn answer(
    global: &Global,
    args: &AnswerArgs,
    approve: bool,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let id = ApprovalId::parse(args.id.trim())?;
    let credential = args.identity.credential()?;
    let shown_hash = match &args.shown_hash {
        Some(text) => {
            let text = text.trim();
            match ActionHash::parse(text) {
                Ok(hash) => Some(hash),
                Err(_) => {
                    return Err(Failure(format!(
                        "`{}` is not an action hash: hashes look like `sha256:` followed by 64 lowercase hex digits, as `countersign inspect {id}` shows",
                        text.escape_debug()
                    )));
                }
            }
        }
        None => None,
    };
    let store = open_existing(global).await?;
    warn_if_asserted_on_shared_store(store.as_ref(), &credential);
    let decision = if approve {
        AnswerDecision::Approve
    } else {
        AnswerDecision::Deny
    };
    let submitted = store::RecordAnswer {
        request_id: id,
        decision: Ok(decision),
        approver: credential,
        channel: Channel::Cli,
        shown_hash,
        note: args.note.clone(),
    };
    // Read first only to tell a repeat apart in the message: an identical repeat by the same
    // approver succeeds and writes nothing, so the request comes back unchanged.
    let before = store
        .approval(&submitted.request_id)
        .await?
        .map(|record| (record.state, record.answers.len()));
    let record =
        countersign::control::submit_answer(store.as_ref(), submitted, SystemClock.now()).await?;
    if global.json {
        write_json(out, &record)?;
        return Ok(ExitCode::SUCCESS);
    }
    if before == Some((record.state, record.answers.len())) {
        writeln!(
            out,
            "you had already {} {}: nothing changed (it is `{}`, {})",
            if approve { "approved" } else { "denied" },
            record.id,
            record.state,
            countersign::display::approvals_count(record.approvals_given(), record.rule.quorum)
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    // What the approver answered about, in the one rendering every surface uses (SPEC 1.9):
    // hidden characters and look-alikes marked as `pending` and `inspect` mark them.
    let seen = display::render(&record, None);
    let mut shown = format!(
        "{}: {} {} for {}",
        record.id, seen.action.text, seen.canonical_arguments.text, seen.principal.text
    );
    if seen.finding_count > 0 {
        shown.push_str(&format!(
            " ({} hidden or look-alike character finding(s) marked; `countersign inspect {}` lists them)",
            seen.finding_count, record.id
        ));
    }
    match record.state {
        ApprovalState::Pending => {
            let needed = record.rule.quorum.saturating_sub(record.approvals_given());
            writeln!(
                out,
                "counted your approval of {shown}\n{}: it needs {needed} more from {} before it authorizes anything",
                countersign::display::approvals_count(record.approvals_given(), record.rule.quorum),
                record.rule.summary()
            )?;
        }
        ApprovalState::Denied => {
            writeln!(out, "denied {shown}")?;
            writeln!(
                out,
                "the agent will be told the call was denied and did not run"
            )?;
        }
        _ => {
            writeln!(out, "approved {shown}")?;
            writeln!(
                out,
                "it authorizes this exact call once, until {}",
                record.expires_at
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `resolve`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("outcome").required(true).args(["committed", "failed"])))]
pub struct ResolveArgs {
    /// The effect key, as `countersign effects --state ambiguous` lists it.
    key: String,
    /// The effect happened: every retry will be refused as a duplicate.
    #[arg(long)]
    committed: bool,
    /// The effect definitely did not happen: a retry may run it.
    #[arg(long)]
    failed: bool,
    #[command(flatten)]
    identity: IdentityArgs,
    /// How you found out (kept in the receipt; at most 4096 bytes).
    #[arg(long, value_name = "TEXT", value_parser = crate::args::NoteParser)]
    note: Option<String>,
}

/// `countersign resolve`.
pub async fn resolve(
    global: &Global,
    args: &ResolveArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let credential = args.identity.credential()?;
    let store = open_existing(global).await?;
    let key = match crate::store_access::effect_key_named(store.as_ref(), &args.key).await? {
        Some(key) => key,
        None => {
            let error = EffectKey::new(args.key.clone())
                .err()
                .map_or_else(String::new, |error| format!(" ({error})"));
            return Err(Failure(format!(
                "`{}` is not an effect key{error}: list them with `countersign effects --state ambiguous`",
                args.key.escape_debug()
            )));
        }
    };
    warn_if_asserted_on_shared_store(store.as_ref(), &credential);
    let to = if args.committed {
        EffectState::Committed
    } else {
        EffectState::Failed
    };
    let resolve = store::ResolveEffect {
        key,
        to,
        resolver: store::Resolver::Person {
            credential,
            channel: Channel::Cli,
        },
        note: args.note.clone(),
    };
    let record = store.resolve_effect(resolve, SystemClock.now()).await?;
    if global.json {
        write_json(out, &record)?;
    } else {
        writeln!(
            out,
            "resolved {} as {}",
            countersign::evidence::escaped(record.key.as_str()),
            record.state
        )?;
        match record.state {
            EffectState::Committed => writeln!(
                out,
                "every new attempt on this key will be refused as a duplicate"
            )?,
            _ => writeln!(out, "a new attempt on this key may run")?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `receipts`.
#[derive(Debug, Args)]
pub struct ReceiptsArgs {
    /// Show the newest N receipts.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    last: u64,
    /// Verify the whole chain instead of listing receipts.
    #[arg(long)]
    verify: bool,
    /// With --verify: also check the log still reaches this anchor (a JSON file from
    /// --export-anchor), which detects deleted newest receipts.
    #[arg(long, value_name = "FILE", requires = "verify")]
    anchor: Option<std::path::PathBuf>,
    /// Print the chain's head as an anchor (JSON); keep it somewhere else.
    #[arg(long, conflicts_with = "verify")]
    export_anchor: bool,
    /// Stream every receipt, oldest first, one per line, for a SIEM or an archive: `jsonl` (the
    /// stored receipt, byte for byte: its SHA-256 is its hash) or `ocsf` (an OCSF 1.8.0 API
    /// Activity event, class_uid 6003). Ends at the head the log had when it started; stops at a
    /// receipt that breaks the chain (exit 1). Mappings: docs/export.md.
    #[arg(long, value_name = "FORMAT", hide_possible_values = true, conflicts_with_all = ["verify", "export_anchor", "last", "bundle"])]
    export: Option<crate::export::Format>,
    /// With --export: only receipts after this place in the log (the last one a consumer saw:
    /// OCSF's metadata.sequence, a receipt's seq on a one-lane SQLite store), to resume.
    #[arg(long, value_name = "POSITION", requires = "export")]
    after: Option<u64>,
    #[command(flatten)]
    bundle: crate::transparency::BundleArgs,
}

/// `countersign receipts`.
pub async fn receipts(
    global: &Global,
    args: &ReceiptsArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    if let Some(format) = args.export {
        // Reads only: never creates or migrates a store.
        let store = crate::store_access::open_for_reading(global).await?;
        return crate::export::export(
            store.as_ref(),
            format,
            args.after.unwrap_or(0),
            &store_flags(global),
            out,
        )
        .await;
    }
    if args.bundle.bundle.is_some() {
        return crate::transparency::write_bundle(global, &args.bundle, out).await;
    }
    if args.verify {
        // Nothing to check is unverifiable (exit 3), as for `verify`: a SQLite file that does
        // not exist (it is not created), a PostgreSQL schema with none of a store's tables.
        let opened = match missing_store_file(global) {
            Some(store_file) => Err(missing_store_message(global, &store_file)),
            None => crate::store_access::open_or_nothing(global).await?,
        };
        let store = match opened {
            Ok(store) => store,
            Err(nothing) => {
                if global.json {
                    write_json(
                        out,
                        &serde_json::json!({"outcome": "unverifiable", "checked": 0, "detail": nothing}),
                    )?;
                } else {
                    writeln!(
                        out,
                        "unverifiable: no receipt was checked (exit status 3): {nothing}"
                    )?;
                }
                return Ok(ExitCode::from(crate::verify::UNVERIFIABLE));
            }
        };
        return crate::verify::verify_chain(store.as_ref(), args.anchor.as_deref(), global, out)
            .await;
    }
    let store = open_existing(global).await?;
    if args.export_anchor {
        let Some(anchor) = store.anchor().await? else {
            return Err(Failure(
                "the receipt log is empty: there is nothing to anchor yet".to_owned(),
            ));
        };
        write_json(out, &anchor)?;
        return Ok(ExitCode::SUCCESS);
    }
    let head = store.chain_head().await?.map_or(0, |head| head.seq);
    let after = head.saturating_sub(args.last);
    let limit = usize::try_from(args.last).unwrap_or(usize::MAX);
    let stored = store.receipts(after, limit).await?;
    let receipts = parse_all(&stored, &store_flags(global))?;
    if global.json {
        write_json(out, &receipts)?;
    } else if receipts.is_empty() {
        writeln!(out, "no receipts yet")?;
    } else {
        render::receipts_table(&receipts).write(out)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_all(stored: &[StoredReceipt], flags: &str) -> Result<Vec<countersign::Receipt>, Failure> {
    stored
        .iter()
        .map(|receipt| parse_receipt(receipt, flags))
        .collect()
}

/// `stored` parsed, or a [`Failure`] naming it (its lane outside lane 0) and the command that
/// checks the chain, with `flags` (`store_access::store_flags`) so it checks the same store.
pub(crate) fn parse_receipt(
    stored: &StoredReceipt,
    flags: &str,
) -> Result<countersign::Receipt, Failure> {
    stored.to_receipt().map_err(|error| {
        let name = match stored.lane {
            0 => format!("receipt {}", stored.seq),
            lane => format!("receipt {} of lane {lane}", stored.seq),
        };
        Failure(if stored.missing {
            // The message names the receipt and its place already.
            format!("{error}: run `countersign receipts --verify{flags}`")
        } else {
            format!("{name} is unreadable ({error}): run `countersign receipts --verify{flags}`")
        })
    })
}

/// Arguments of `effects`.
#[derive(Debug, Args)]
pub struct EffectsArgs {
    /// Only effects in this state: reserved, committed, failed or ambiguous.
    #[arg(long, value_name = "STATE", value_parser = ["reserved", "committed", "failed", "ambiguous"])]
    state: Option<String>,
}

/// `countersign effects`.
pub async fn effects(
    global: &Global,
    args: &EffectsArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let store = open_existing(global).await?;
    let state = args.state.as_deref().and_then(EffectState::parse);
    let records = store.effects(state).await?;
    if global.json {
        write_json(out, &records)?;
    } else if records.is_empty() {
        writeln!(out, "no effects")?;
    } else {
        let mut table = Table::new(["KEY", "STATE", "ATTEMPTS", "UPDATED", "DETAIL"]);
        let now = countersign::Clock::now(&countersign::SystemClock);
        let lapsed = |record: &countersign::EffectRecord| {
            record.state == EffectState::Reserved && record.lease_until <= now
        };
        for record in &records {
            table.row([
                countersign::evidence::escaped(record.key.as_str()).into_owned(),
                if lapsed(record) {
                    "reserved, lease lapsed".to_owned()
                } else if record.state == EffectState::Reserved {
                    // When a retry may learn what became of it, if its attempt stopped.
                    format!("reserved, lease until {}", record.lease_until)
                } else {
                    record.state.to_string()
                },
                record.attempts.to_string(),
                record.updated_at.to_string(),
                render::truncate(record.detail.as_deref().unwrap_or(""), 60),
            ]);
        }
        table.write(out)?;
        if records
            .iter()
            .any(|record| record.state == EffectState::Ambiguous)
        {
            writeln!(
                out,
                "\nambiguous effects refuse every retry: find out what happened, then run `countersign resolve <KEY> --committed` or `--failed`"
            )?;
        }
        if records.iter().any(lapsed) {
            writeln!(
                out,
                "\na lapsed lease means the attempt that reserved the key stopped reporting (its process died or lost the store): the key becomes `ambiguous` when it is next touched, and every retry is refused until someone resolves it"
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// An approval request (apr_…), an attempt (att_…), an effect key, or an action hash
    /// (sha256:…).
    id: String,
}

/// `countersign inspect`.
pub async fn inspect(
    global: &Global,
    args: &InspectArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let store = open_existing(global).await?;
    let id = args.id.trim();
    let approval = match ApprovalId::parse(id) {
        Ok(parsed) => store.approval(&parsed).await?,
        Err(_) => None,
    };
    // Ids are trimmed; an effect key is taken exactly as typed (a key may begin or end with a
    // space, and `inspect` finds what `resolve` acts on).
    let key = crate::store_access::effect_key_named(store.as_ref(), &args.id).await?;
    let effect = match &key {
        Some(key) => store.effect(key).await?,
        None => None,
    };
    let mut receipts = Vec::new();
    let mut after = 0;
    loop {
        let page = store.receipts(after, 2_000).await?;
        let Some(last) = page.last() else { break };
        after = last.position;
        for receipt in parse_all(&page, &store_flags(global))? {
            let fields = [
                receipt.attempt_id.as_deref(),
                receipt.approval_id.as_deref(),
                receipt.action_hash.as_deref(),
            ];
            if fields.contains(&Some(id))
                || (receipt.effect_key.is_some()
                    && receipt.effect_key.as_deref() == key.as_ref().map(EffectKey::as_str))
            {
                receipts.push(receipt);
            }
        }
        if page.len() < 2_000 {
            break;
        }
    }
    if approval.is_none() && effect.is_none() && receipts.is_empty() {
        return Err(Failure(format!(
            "nothing is recorded for `{}`: give an approval id (apr_…), an attempt id (att_…), an effect key (exactly as `countersign effects` prints it) or an action hash",
            countersign::evidence::escaped(&args.id)
        )));
    }
    if global.json {
        /// What `inspect --json` prints.
        #[derive(serde::Serialize)]
        struct Inspection<'a> {
            approval: Option<&'a countersign::ApprovalRecord>,
            /// What an approver is shown for `approval`.
            display: Option<display::ApprovalDisplay>,
            effect: Option<&'a countersign::EffectRecord>,
            receipts: &'a [countersign::Receipt],
        }
        let inspection = Inspection {
            approval: approval.as_ref(),
            display: approval
                .as_ref()
                .map(|record| display::render(record, None)),
            effect: effect.as_ref(),
            receipts: &receipts,
        };
        write_json(out, &inspection)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(record) = &approval {
        // A pending request past its expiry is expired, whether or not anyone has looked.
        let state = if record.is_expired_at(SystemClock.now()) {
            ApprovalState::Expired
        } else {
            record.state
        };
        writeln!(out, "approval {}: {state}", record.id)?;
        render::indented(&display::render(record, None).to_text(), out)?;
        if let Some(approver) = &record.approver {
            writeln!(
                out,
                "  answered by  {}{}",
                printable(approver),
                record
                    .note
                    .as_deref()
                    .map(|note| format!(" (note: {note:?})"))
                    .unwrap_or_default()
            )?;
        }
        writeln!(out)?;
    }
    if let Some(record) = &effect {
        writeln!(
            out,
            "effect {}: {} after {} attempt(s)",
            countersign::evidence::escaped(record.key.as_str()),
            record.state,
            record.attempts
        )?;
        if let Some(detail) = &record.detail {
            writeln!(out, "  detail      {}", printable(detail))?;
        }
        if let Some(resolver) = &record.resolved_by {
            writeln!(out, "  resolved by {resolver}")?;
        }
        writeln!(out)?;
    }
    if !receipts.is_empty() {
        render::receipts_table(&receipts).write(out)?;
    }
    Ok(ExitCode::SUCCESS)
}
