//! The inbox's markup (maud: every interpolated value is HTML-escaped).
//!
//! What a person reads about a request comes from [`countersign::display`] (the one rendering
//! every surface uses): its `\u{…}` escapes are shown inside `<mark>` so that a hidden, reordering
//! or look-alike character is seen, and each finding is listed under its value. Nothing is
//! truncated. maud escapes `<`, `>`, `&`, `"` and `'` in every interpolated text on top of that,
//! so arguments holding markup render as text.

use axum::http::StatusCode;
use countersign::ApprovalState;
use countersign::Timestamp;

use super::prose::prose;
use countersign::approval::{AnswerDecision, ApprovalRecord};
use countersign::display::{FindingKind, ShownText, ValueKind};
use countersign::evidence::Receipt;
use maud::{DOCTYPE, Markup, html};

use super::{EffectRow, InboxRow, RequestView, Viewer, time_left};
use crate::chain::ChainStatus;
use crate::problem::Problem;

/// Which section of the navigation a page belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Inbox,
    History,
    Receipts,
    Effects,
    None,
}

/// The frame of every page: skip link, navigation, who is signed in, sign-out, then `main`.
fn layout(title: &str, viewer: Option<&Viewer>, section: Section, main: Markup) -> Markup {
    let link = |href: &str, label: &str, this: Section| {
        html! {
            li { a href=(href) aria-current=[(section == this).then_some("page")] { (label) } }
        }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Countersign" }
                link rel="stylesheet" href="/static/inbox.css";
                script src="/static/inbox.js" defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    p.brand { "Countersign approvals" }
                    @if let Some(viewer) = viewer {
                        nav aria-label="Main" {
                            ul {
                                (link("/inbox", "Inbox", Section::Inbox))
                                (link("/history", "History", Section::History))
                                (link("/receipts", "Receipts", Section::Receipts))
                                (link("/effects", "Ambiguous effects", Section::Effects))
                            }
                        }
                        div.who {
                            "Signed in as " strong id="signed-in-as" { (viewer.caller.id) }
                            @if !viewer.caller.groups.is_empty() {
                                " (" (viewer.caller.groups.join(", ")) ")"
                            }
                            form.inline method="post" action="/signout" {
                                input type="hidden" name="csrf" value=(viewer.csrf);
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main id="main" tabindex="-1" { (main) }
            }
        }
    }
}

/// The pieces of a shown text: plain runs, and the `\u{…}` escapes the display wrote.
fn pieces(text: &str) -> Vec<(bool, &str)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("\\u{") {
        let Some(length) = rest[start..].find('}') else {
            break;
        };
        if start > 0 {
            out.push((false, &rest[..start]));
        }
        out.push((true, &rest[start..=start + length]));
        rest = &rest[start + length + 1..];
    }
    if !rest.is_empty() {
        out.push((false, rest));
    }
    out
}

/// A shown text with every escape marked. (A literal `\u{` in a value is itself shown as
/// `\u{5c}u{`, so every `\u{…}` here is one the display wrote.)
fn marked(text: &ShownText) -> Markup {
    let empty = text
        .findings
        .iter()
        .any(|finding| finding.kind == FindingKind::Empty);
    html! {
        @if empty {
            mark.empty { "(empty string)" }
        }
        @for (escape, piece) in pieces(&text.text) {
            @if escape {
                mark.escape { (piece) }
            } @else {
                (piece)
            }
        }
    }
}

/// The findings of a shown text, as a list under it.
fn findings(text: &ShownText) -> Markup {
    html! {
        @if !text.findings.is_empty() {
            ul.findings {
                @for finding in &text.findings {
                    li {
                        strong { (finding.kind.description()) }
                        @if !finding.code_points.is_empty() {
                            ": " code { (finding.code_points.join(" ")) }
                        }
                        @if let Some(note) = &finding.note {
                            " (" (note) ")"
                        }
                    }
                }
            }
        }
    }
}

/// Free text a person or an agent typed (an answer's note, a receipt's note, what is known about
/// an effect), as every value on the page is shown ([`countersign::display::shown`]: each hidden,
/// reordering or look-alike character written as `\u{…}`, to be marked, with its findings);
/// anything else [`countersign::evidence::printable`] escapes is escaped too. Found by a
/// first-time user: a note's right-to-left override reached the page and reversed it.
fn typed(text: &str) -> ShownText {
    let mut shown = countersign::display::shown(text);
    if let std::borrow::Cow::Owned(escaped) = countersign::evidence::printable(&shown.text) {
        shown.text = escaped;
    }
    shown
}

/// A shown text followed by its findings.
fn shown(text: &ShownText) -> Markup {
    html! { span.value { (marked(text)) } (findings(text)) }
}

/// A `<time>` that counts down to `expires_at` (the script updates it every second).
fn countdown(now: Timestamp, expires_at: Timestamp) -> Markup {
    html! {
        time.countdown datetime=(expires_at.to_rfc3339())
            data-expires=(expires_at.as_millis()) data-now=(now.as_millis()) {
            (time_left(now, expires_at))
        }
    }
}

/// A value's JSON type, in words.
fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::String => "string",
        ValueKind::Number => "number",
        ValueKind::Bool => "boolean",
        ValueKind::Null => "null",
        ValueKind::EmptyObject => "empty object",
        ValueKind::EmptyArray => "empty array",
    }
}

/// The name a value is serialized as (the stable snake_case name of a receipt's kind).
fn serialized_name(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::new(),
    }
}

fn approvals_count(record: &ApprovalRecord) -> String {
    countersign::display::approvals_count(record.approvals_given(), record.rule.quorum)
}

/// `1`-based pagination links.
fn pager(base: &str, page: usize, total: usize, per_page: usize) -> Markup {
    let pages = total.div_ceil(per_page).max(1);
    html! {
        @if pages > 1 {
            nav.pager aria-label="Pages" {
                @if page > 1 {
                    a href=(format!("{base}?page={}", page - 1)) rel="prev" { "Previous page" }
                }
                span { "Page " (page) " of " (pages) }
                @if page < pages {
                    a href=(format!("{base}?page={}", page + 1)) rel="next" { "Next page" }
                }
            }
        }
    }
}

/// The inbox.
pub(crate) fn inbox(
    viewer: &Viewer,
    rows: &[InboxRow],
    total: usize,
    page: usize,
    per_page: usize,
    now: Timestamp,
) -> Markup {
    let main = html! {
        h1 { "Waiting for you" }
        @if total == 0 {
            p id="empty-inbox" { "Nothing is waiting for your answer." }
        } @else {
            p { (total) " " (if total == 1 { "request waits" } else { "requests wait" })
                " for an answer you may give, the soonest to expire first." }
            table id="inbox" {
                caption.visually-hidden { "Requests waiting for your answer" }
                thead {
                    tr {
                        th scope="col" { "Action" }
                        th scope="col" { "Principal" }
                        th scope="col" { "Resource" }
                        th scope="col" { "Approvals" }
                        th scope="col" { "Expires" }
                    }
                }
                tbody {
                    @for row in rows {
                        tr data-request=(row.record.id.as_str()) {
                            td {
                                a href=(format!("/requests/{}", row.record.id)) { (marked(&row.display.action)) }
                                @if row.display.finding_count > 0 {
                                    " " span.badge { (row.display.finding_count) " marked" }
                                }
                            }
                            td { (marked(&row.display.principal)) }
                            td {
                                @if let Some(resource) = &row.display.resource { (marked(resource)) } @else { "—" }
                            }
                            td {
                                span.approvals { (approvals_count(&row.record)) }
                                @if row.answered { br; span.note { "you approved; waiting for others" } }
                            }
                            td { (countdown(now, row.record.expires_at)) }
                        }
                    }
                }
            }
            (pager("/inbox", page, total, per_page))
        }
    };
    layout("Inbox", Some(viewer), Section::Inbox, main)
}

fn state_words(record: &ApprovalRecord, now: Timestamp) -> &'static str {
    match record.state {
        ApprovalState::Pending if record.is_expired_at(now) => "expired",
        ApprovalState::Pending => "waiting",
        ApprovalState::Granted => "approved, not yet used",
        ApprovalState::Denied => "denied",
        ApprovalState::Consumed => "approved and used",
        ApprovalState::Expired => "expired",
        ApprovalState::Void => "void (the policy or the tool changed)",
        ApprovalState::Revoked => "approved, then revoked",
        ApprovalState::Cancelled => "cancelled (its receipt names by whom)",
    }
}

fn decision_words(decision: AnswerDecision) -> &'static str {
    match decision {
        AnswerDecision::Approve => "approved",
        AnswerDecision::Deny => "denied",
    }
}

/// Why the answer form is not shown.
fn no_form_reason(view: &RequestView, now: Timestamp) -> &'static str {
    let record = &view.record;
    if record.state == ApprovalState::Pending && record.is_expired_at(now)
        || record.state == ApprovalState::Expired
    {
        "This request has expired: it can no longer be answered. The agent must ask again."
    } else if record.state != ApprovalState::Pending {
        "This request is decided: it can no longer be answered."
    } else if view.answered {
        "You have answered this request; it waits for the other approvals it needs."
    } else {
        "Your sign-in is not one this request's rule lets answer: you may read it, not answer it."
    }
}

/// One request in full, with the answer form when the viewer may answer.
pub(crate) fn request(viewer: &Viewer, view: &RequestView, now: Timestamp) -> Markup {
    let record = &view.record;
    let display = &view.display;
    let rule = &record.rule;
    let main = html! {
        h1 { "Request " code { (record.id.as_str()) } }
        @if view.answered_again {
            div.banner.ok role="status" id="answer-result" {
                "You had already given this answer (from another tab or window): nothing changed. "
                "The request is " strong { (record.state.as_str()) } "."
            }
        } @else if view.just_answered {
            div.banner.ok role="status" id="answer-result" {
                @match record.state {
                    ApprovalState::Pending => {
                        "Your approval counted: " strong { (approvals_count(record)) } ". It needs "
                        (rule.quorum.saturating_sub(record.approvals_given()))
                        " more from " (rule.summary()) " before it authorizes anything."
                    }
                    ApprovalState::Denied => { "Denied: the agent will be told the call was denied and did not run." }
                    ApprovalState::Granted | ApprovalState::Consumed => {
                        "Approved: " strong { (approvals_count(record)) } ". It authorizes this exact call once."
                    }
                    _ => { "Your answer was recorded." }
                }
            }
        }
        @if view.just_taken_back {
            div.banner.ok role="status" id="take-back-result" {
                @match record.state {
                    ApprovalState::Revoked => { "Revoked: the grant authorizes nothing now; an attempt presenting it is refused " code { "revoked" } "." }
                    ApprovalState::Cancelled => { "Cancelled: it has left every inbox, and a late answer is refused " code { "cancelled" } "." }
                    ApprovalState::Pending => { "Your approval was withdrawn: " strong { (approvals_count(record)) } "." }
                    _ => { "Recorded." }
                }
            }
        }
        @if let Some(problem) = &view.refusal {
            div.banner.error role="alert" id="answer-refused" {
                p { strong { (view.refusal_heading) } " " (prose(&problem.detail)) }
                @if problem.reason == "mismatch" {
                    p { "The hash your form sent is not this request's. This page shows the request as it is now: read it again, then answer." }
                }
                p.reason { "Reason: " code { (problem.reason) } }
            }
        }
        p.state {
            "State: " strong id="state" { (state_words(record, now)) }
            " · " span.approvals id="approvals" { (approvals_count(record)) }
            @if record.state == ApprovalState::Pending && !record.is_expired_at(now) {
                " · " (countdown(now, record.expires_at))
            } @else {
                " · expires at " time datetime=(record.expires_at.to_rfc3339()) { (record.expires_at.to_rfc3339()) }
            }
        }
        @if display.finding_count > 0 {
            div.banner.warn role="note" id="marked-warning" {
                strong { (display.finding_count) " marked "
                    (if display.finding_count == 1 { "character or span" } else { "characters or spans" }) }
                ": they are shown as " code { "\\u{…}" } " and listed under their value. Read them before you answer."
            }
        }
        h2 { "The action" }
        dl.fields {
            dt { "Action" } dd id="action" { (shown(&display.action)) }
            dt { "Principal" } dd id="principal" { (shown(&display.principal)) }
            dt { "Resource" } dd id="resource" {
                @if let Some(resource) = &display.resource { (shown(resource)) } @else { "none" }
            }
            dt { "Environment" } dd id="environment" { (shown(&display.environment)) }
            dt { "Effect key" } dd id="effect-key" {
                @if let Some(key) = &display.effect_key { (shown(key)) } @else { "none" }
            }
            dt { "Action hash" } dd { code id="action-hash" { (display.action_hash) } }
        }
        h2 { "Arguments" }
        table id="arguments" {
            caption.visually-hidden { "Each argument value, in canonical key order" }
            thead { tr { th scope="col" { "Where" } th scope="col" { "Type" } th scope="col" { "Value" } } }
            tbody {
                @for argument in &display.arguments {
                    tr {
                        td { code { (marked(&argument.path)) } (findings(&argument.path)) }
                        td { (kind_name(argument.kind)) }
                        td.argument-value { code { (marked(&argument.value)) } (findings(&argument.value)) }
                    }
                }
            }
        }
        h3 { "Canonical arguments, exactly as hashed" }
        pre id="canonical" { code { (marked(&display.canonical_arguments)) } }
        (findings(&display.canonical_arguments))
        h2 { "Why it needs approval" }
        dl.fields id="rule" {
            @if let Some(policy_rule) = &view.policy_rule {
                dt { "Policy rule" } dd id="policy-rule" { (prose(policy_rule)) }
            }
            dt { "Who may approve" } dd id="who-may-approve" {
                @if let Some(who) = &display.who_may_approve { (shown(who)) }
            }
            dt { "Approvals needed" } dd { (rule.quorum) }
            dt { "Identity required" } dd { (rule.require.as_str()) }
            dt { "Requester's groups excluded" } dd { (if rule.distinct_from_requester { "yes" } else { "no" }) }
            dt { "Who may resolve an ambiguous outcome" } dd { (rule.resolver_summary()) }
            dt { "Policy hash" } dd { code { (record.policy_hash) } }
            dt { "Policy entry fingerprint" } dd { code { (record.entry_fingerprint) } }
        }
        @if !record.answers.is_empty() {
            h2 { "Answers so far" }
            ul id="answers" {
                @for answer in &record.answers {
                    li {
                        strong { (answer.approver.id) } " " (decision_words(answer.decision))
                        " at " time datetime=(answer.answered_at.to_rfc3339()) { (answer.answered_at.to_rfc3339()) }
                        " (" (answer.approver.authentication.as_str()) ", " (answer.approver.channel.as_str()) ")"
                        @if let Some(note) = &answer.note {
                            @let note = typed(note);
                            ": " q { (marked(&note)) } (findings(&note))
                        }
                    }
                }
            }
        }
        h2 { "Your answer" }
        @if view.may_answer {
            form id="answer" method="post" action=(format!("/requests/{}/answer", record.id)) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                input type="hidden" name="action_hash" value=(display.action_hash);
                p.help { "You answer about exactly what this page shows: the form sends its action hash, "
                    code { (display.action_hash) } ", and an answer about anything else is refused." }
                label for="note" { "Note (optional, kept in the receipt)" }
                textarea id="note" name="note" rows="3" maxlength="4096" {}
                div.buttons {
                    button id="approve" type="submit" name="decision" value="approve" { "Approve" }
                    button id="deny".deny type="submit" name="decision" value="deny" { "Deny" }
                }
            }
        } @else {
            p id="no-answer" { (no_form_reason(view, now)) }
        }
        @if view.may_revoke || view.may_cancel {
            h2 { "Take it back" }
            form id="take-back" method="post" action=(format!("/requests/{}/take-back", record.id)) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                p.help {
                    @if view.may_revoke { "Revoking takes back your approval (or, as a resolver, the grant) before it is used. " }
                    @if view.may_cancel { "Cancelling ends the request for everyone: it leaves every inbox and no answer changes it. " }
                    "A grant already used cannot be taken back."
                }
                label for="take-back-note" { "Reason (optional, kept in the receipt)" }
                textarea id="take-back-note" name="note" rows="2" maxlength="4096" {}
                // A take-back cannot be undone: it needs this box as well as a button, so one
                // stray Enter on the button where "Approve" was never revokes or cancels
                // (found by a first-time user).
                p {
                    input id="take-back-confirm" type="checkbox" name="confirm" value="yes" required;
                    " "
                    label for="take-back-confirm" { "Yes, take it back: this cannot be undone" }
                }
                div.buttons {
                    @if view.may_revoke {
                        button id="revoke".deny type="submit" name="take" value="revoke" {
                            (if record.state == ApprovalState::Granted { "Revoke the grant" } else { "Withdraw my approval" })
                        }
                    }
                    @if view.may_cancel {
                        button id="cancel".deny type="submit" name="take" value="cancel" { "Cancel this request" }
                    }
                }
            }
        }
        p { a href="/inbox" { "Back to the inbox" } }
    };
    layout(
        &format!("Request {}", record.id),
        Some(viewer),
        Section::Inbox,
        main,
    )
}

/// Answered, expired, consumed and void requests.
pub(crate) fn history(
    viewer: &Viewer,
    records: &[ApprovalRecord],
    total: usize,
    page: usize,
    per_page: usize,
    now: Timestamp,
) -> Markup {
    let main = html! {
        h1 { "History" }
        p { "Requests you may see that no longer wait: answered, expired, used or void, the latest first." }
        @if !viewer.caller.auditor {
            // Why some requests are missing (a new user's trial: the demo's earlier requests,
            // opened before its policy named the user's key, never showed, unexplained).
            p.help id="history-scope" { "Each request keeps the approvers and resolvers its policy rule named when it was opened, and you see those that name you (and accept how you signed in). A request opened before the policy named you is not shown; an auditor (a member of the service's auditors group) sees every request." }
        }
        @if records.is_empty() {
            p { "Nothing yet." }
        } @else {
            table id="history" {
                caption.visually-hidden { "Requests that no longer wait" }
                thead { tr {
                    th scope="col" { "Request" } th scope="col" { "Action" } th scope="col" { "Principal" }
                    th scope="col" { "State" } th scope="col" { "Approvals" } th scope="col" { "Decided by" }
                    th scope="col" { "When" }
                } }
                tbody {
                    @for record in records {
                        @let display = countersign::display::render(record, None);
                        tr data-request=(record.id.as_str()) {
                            td { a href=(format!("/requests/{}", record.id)) { code { (record.id.as_str()) } } }
                            td { (marked(&display.action)) }
                            td { (marked(&display.principal)) }
                            td.state { (state_words(record, now)) }
                            td { (approvals_count(record)) }
                            td { @if let Some(approver) = &record.approver { (approver) } @else { "—" } }
                            td {
                                // A cancelled, revoked or void request keeps no time of that
                                // change in its row (its receipt has it): show none rather than
                                // its expiry as if it were when it happened.
                                @let when = match record.state {
                                    ApprovalState::Expired => Some(record.expires_at),
                                    ApprovalState::Pending if record.is_expired_at(now) => Some(record.expires_at),
                                    _ => record.consumed_at.or(record.answered_at),
                                };
                                @if let Some(when) = when {
                                    time datetime=(when.to_rfc3339()) { (when.to_rfc3339()) }
                                } @else { "—" }
                            }
                        }
                    }
                }
            }
            (pager("/history", page, total, per_page))
        }
    };
    layout("History", Some(viewer), Section::History, main)
}

fn chain_status(status: &ChainStatus) -> Markup {
    html! {
        @match status {
            ChainStatus::NotYet => {
                div.banner.warn id="chain-status" role="status" {
                    "The receipt chain has not been verified since the service started; it is checked every few seconds. Reload in a moment."
                }
            }
            ChainStatus::Intact { head_seq, verified_at } => {
                div.banner.ok id="chain-status" role="status" {
                    @if *head_seq == 0 {
                        strong { "No receipts yet" } ": the log is empty"
                    } @else {
                        strong { "Chain intact" } " from receipt 1 to receipt " (head_seq)
                    }
                    ", last verified at " time datetime=(verified_at.to_rfc3339()) { (verified_at.to_rfc3339()) } "."
                }
            }
            ChainStatus::Broken { first_break, verified_at } => {
                div.banner.error id="chain-status" role="alert" {
                    strong { "Chain broken" } " at receipt " (first_break.seq()) ": " (first_break.to_string())
                    ". Found at " time datetime=(verified_at.to_rfc3339()) { (verified_at.to_rfc3339()) }
                    ". Run " code { "countersign verify" } " and investigate before trusting these receipts."
                }
            }
            ChainStatus::Unreadable { detail, at, previous } => {
                div.banner.warn id="chain-status" role="status" {
                    "The last verification, at " time datetime=(at.to_rfc3339()) { (at.to_rfc3339()) }
                    ", could not read the store: " (detail) "."
                }
                @if let Some(previous) = previous { (chain_status(previous)) }
            }
        }
    }
}

/// The receipt log.
pub(crate) fn receipts(
    viewer: &Viewer,
    items: &[Receipt],
    after: u64,
    next: Option<u64>,
    status: &ChainStatus,
) -> Markup {
    let main = html! {
        h1 { "Receipts" }
        (chain_status(status))
        p { "The receipts you may read, oldest first. The chain's status above is from the service's last verification, not from this page view." }
        @if items.is_empty() {
            p { "No receipts " @if after > 0 { "after receipt " (after) } @else { "yet" } "." }
        } @else {
            table id="receipts" {
                caption.visually-hidden { "Receipts" }
                thead { tr {
                    th scope="col" { "#" } th scope="col" { "Recorded" } th scope="col" { "Kind" }
                    th scope="col" { "Outcome" } th scope="col" { "Action" } th scope="col" { "Request" }
                    th scope="col" { "Who" } th scope="col" { "Note" }
                } }
                tbody {
                    @for receipt in items {
                        tr {
                            td { (receipt.seq) }
                            td { time datetime=(receipt.recorded_at.to_rfc3339()) { (receipt.recorded_at.to_rfc3339()) } }
                            td { (serialized_name(&receipt.kind)) }
                            td {
                                (receipt.outcome.as_str())
                                @if let Some(reason) = &receipt.reason { " (" code { (reason) } ")" }
                            }
                            td { @if let Some(action) = &receipt.action { (action) } }
                            td {
                                @if let Some(id) = &receipt.approval_id {
                                    a href=(format!("/requests/{id}")) { code { (id) } }
                                }
                            }
                            td { @if let Some(approver) = &receipt.approver { (approver) } }
                            td {
                                @if let Some(note) = &receipt.note {
                                    @let note = typed(note);
                                    q { (marked(&note)) } (findings(&note))
                                }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(next) = next {
            nav.pager aria-label="Pages" { a href=(format!("/receipts?after={next}")) rel="next" { "Later receipts" } }
        }
    };
    layout("Receipts", Some(viewer), Section::Receipts, main)
}

/// A value for a URL query or path segment: everything but unreserved characters percent-encoded.
pub(crate) fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Ambiguous effects, with a resolve form for each the viewer may resolve.
pub(crate) fn effects(
    viewer: &Viewer,
    rows: &[EffectRow],
    refusal: Option<&(String, Problem)>,
    resolved: Option<&str>,
) -> Markup {
    let main = html! {
        h1 { "Ambiguous effects" }
        p { "Nobody knows whether these happened: every retry is refused until someone who checked says what happened." }
        @if let Some(key) = resolved {
            div.banner.ok role="status" id="resolve-result" { "Resolved " code { (key) } "." }
        }
        @if let Some((key, problem)) = refusal {
            div.banner.error role="alert" id="resolve-refused" {
                p { strong { "Not resolved: " code { (key) } "." } " " (prose(&problem.detail)) }
                p.reason { "Reason: " code { (problem.reason) } }
            }
        }
        @if rows.is_empty() {
            p id="no-effects" { "No ambiguous effect you may see." }
        }
        @for (index, row) in rows.iter().enumerate() {
            section.effect aria-labelledby=(format!("effect-{index}")) {
                h2 id=(format!("effect-{index}")) { code { (row.record.key.as_str()) } }
                dl.fields {
                    @if let Some(attempt) = &row.record.attempt {
                        dt { "Action" } dd { (attempt.action) }
                        dt { "Principal" } dd { (attempt.principal) }
                        dt { "Started" } dd { time datetime=(attempt.started_at.to_rfc3339()) { (attempt.started_at.to_rfc3339()) } }
                        @if let Some(id) = &attempt.approval_id {
                            dt { "Approved by request" } dd { a href=(format!("/requests/{id}")) { code { (id) } } }
                        }
                    }
                    dt { "Action hash" } dd { code { (row.record.action_hash) } }
                    dt { "What is known" } dd { @if let Some(detail) = &row.record.detail { (shown(&typed(detail))) } @else { "nothing more" } }
                    dt { "Who may resolve" } dd { (row.resolvers) }
                }
                @if row.may_resolve {
                    form.resolve method="post" action=(format!("/effects/{}/resolve", query_value(row.record.key.as_str()))) {
                        input type="hidden" name="csrf" value=(viewer.csrf);
                        fieldset {
                            legend { "What happened?" }
                            div {
                                input type="radio" name="to" value="committed" id=(format!("committed-{index}")) required;
                                label for=(format!("committed-{index}")) { "It happened (committed): every retry will be refused" }
                            }
                            div {
                                input type="radio" name="to" value="failed" id=(format!("failed-{index}"));
                                label for=(format!("failed-{index}")) { "It definitely did not happen (failed): a retry may run it" }
                            }
                        }
                        label for=(format!("note-{index}")) { "How you found out (required, kept in the receipt)" }
                        textarea id=(format!("note-{index}")) name="note" rows="2" maxlength="4096" required {}
                        div.buttons { button type="submit" { "Resolve " (row.record.key.as_str()) } }
                    }
                } @else {
                    p { "You may not resolve this one." }
                }
            }
        }
    };
    layout("Ambiguous effects", Some(viewer), Section::Effects, main)
}

/// A refusal as a page.
pub(crate) fn problem(viewer: Option<&Viewer>, problem: &Problem) -> Markup {
    let main = html! {
        h1 { (problem.status.canonical_reason().unwrap_or("Error")) }
        div.banner.error role="alert" id="problem" {
            p { (prose(&problem.detail)) }
            p.reason { "Reason: " code { (problem.reason) } }
        }
        p {
            // Only a refusal for want of a sign-in leads to the sign-in form; any other (a
            // form from another site, a page that does not exist) leads to the inbox, which
            // asks for a sign-in itself when there is none.
            @if viewer.is_none() && problem.status == StatusCode::UNAUTHORIZED {
                a href="/signin" { "Sign in" }
            } @else { a href="/inbox" { "Back to the inbox" } }
        }
    };
    layout(
        problem.status.canonical_reason().unwrap_or("Error"),
        viewer,
        Section::None,
        main,
    )
}

/// The sign-in form, with an error from the last attempt if there was one.
pub(crate) fn signin(csrf: &str, error: Option<&Problem>, signed_out: bool) -> Markup {
    let main = html! {
        h1 { "Sign in to answer approvals" }
        @if signed_out {
            div.banner.ok role="status" { "You are signed out." }
        }
        @if let Some(problem) = error {
            div.banner.error role="alert" id="signin-refused" {
                p { strong { "Not signed in." } " " (prose(&problem.detail)) }
                p.reason { "Reason: " code { (problem.reason) } }
            }
        }
        form id="signin" method="post" action="/signin" {
            input type="hidden" name="csrf" value=(csrf);
            label for="token" { "Approver token (from " code { "countersign approver token" } ")" }
            textarea id="token" name="token" rows="6" autocomplete="off" spellcheck="false" required {}
            div.buttons { button type="submit" { "Sign in" } }
        }
    };
    layout("Sign in", None, Section::None, main)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_out_every_escape() {
        assert_eq!(
            pieces("e\\u{301}x\\u{200b}"),
            vec![
                (false, "e"),
                (true, "\\u{301}"),
                (false, "x"),
                (true, "\\u{200b}")
            ]
        );
        assert_eq!(pieces("plain"), vec![(false, "plain")]);
        assert_eq!(pieces(""), Vec::<(bool, &str)>::new());
    }

    #[test]
    fn markup_in_a_value_is_text() {
        let text = ShownText {
            text: "<script>alert(1)</script>".to_owned(),
            findings: Vec::new(),
        };
        let out = marked(&text).into_string();
        assert_eq!(out, "&lt;script&gt;alert(1)&lt;/script&gt;");
    }

    #[test]
    fn typed_text_shows_every_hidden_character() {
        // A right-to-left override, a zero-width space and an interlinear annotation anchor
        // (which `printable` escapes, and the display does not mark).
        let note = typed("ok\u{202e}kcab\u{200b} \u{fff9}<b>");
        assert_eq!(note.text, "ok\\u{202e}kcab\\u{200b} \\u{fff9}<b>");
        assert!(
            note.findings
                .iter()
                .any(|finding| finding.kind == FindingKind::BidiControl)
        );
        let out = html! { (marked(&note)) (findings(&note)) }.into_string();
        assert!(
            out.contains("<mark class=\"escape\">\\u{202e}</mark>"),
            "{out}"
        );
        assert!(
            out.contains("<mark class=\"escape\">\\u{fff9}</mark>"),
            "{out}"
        );
        assert!(out.contains("&lt;b&gt;"), "{out}");
        for hidden in ['\u{202e}', '\u{200b}', '\u{fff9}'] {
            assert!(!out.contains(hidden), "{out}");
        }
        assert_eq!(typed("ticket 7").text, "ticket 7");
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("refund:pi_1/a b"), "refund%3Api_1%2Fa%20b");
    }
}
