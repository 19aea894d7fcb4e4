//! One receipt as an OCSF API Activity event (class_uid 6003, category_uid 6) of OCSF
//! [`VERSION`], with the `security_control` profile.
//!
//! The field-by-field mapping, and why each choice, is the table in `docs/export.md`; change
//! both together. The tests validate every event against the vendored OCSF 1.8.0 schema
//! (`crates/countersign-cli/tests/ocsf-1.8.0/`). Only the receipt's own fields are used, so no
//! secret reaches an event: arguments are the receipt's, already redacted.

use countersign::Receipt;
use countersign::evidence::{ReceiptKind, ReceiptOutcome, StoredReceipt, printable};
use serde_json::{Map, Value, json};

use crate::Failure;

/// The OCSF version every event names in `metadata.version`.
pub const VERSION: &str = "1.8.0";

/// OCSF category "Application Activity".
const CATEGORY_UID: i64 = 6;
/// OCSF class "API Activity" (category 6, class 3).
const CLASS_UID: i64 = 6003;

/// The stored receipt as one line of OCSF JSON.
///
/// # Errors
///
/// A [`Failure`] naming the receipt when its body is not a receipt.
pub(super) fn line(stored: &StoredReceipt) -> Result<String, Failure> {
    let unreadable = |error: String| {
        Failure(format!(
            "receipt {} is unreadable ({error}): run `countersign receipts --verify`",
            stored.seq
        ))
    };
    // One parse of the body: the typed receipt is read from the same value (with its hash, as
    // `StoredReceipt::to_receipt` does), and the value is kept whole under `unmapped`.
    let body: Value =
        serde_json::from_str(&stored.body).map_err(|error| unreadable(error.to_string()))?;
    let mut with_hash = body.clone();
    if let Value::Object(fields) = &mut with_hash {
        fields.insert("hash".into(), json!(stored.hash.as_str()));
    }
    let receipt: Receipt =
        serde_json::from_value(with_hash).map_err(|error| unreadable(error.to_string()))?;
    Ok(Value::Object(event(&receipt, body, stored.position)).to_string())
}

/// The event for `receipt`, whose stored body is `body` (kept whole under `unmapped`), at
/// `position` in the log.
fn event(receipt: &Receipt, body: Value, position: u64) -> Map<String, Value> {
    let (activity_id, activity_name) = activity(receipt.kind);
    let (status_id, status) = status(receipt.kind, receipt.outcome);
    let (severity_id, severity) = severity(status_id);
    let mut event = Map::new();
    event.insert("category_uid".into(), json!(CATEGORY_UID));
    event.insert("category_name".into(), json!("Application Activity"));
    event.insert("class_uid".into(), json!(CLASS_UID));
    event.insert("class_name".into(), json!("API Activity"));
    event.insert("activity_id".into(), json!(activity_id));
    event.insert("activity_name".into(), json!(activity_name));
    event.insert("type_uid".into(), json!(CLASS_UID * 100 + activity_id));
    event.insert(
        "type_name".into(),
        json!(format!("API Activity: {activity_name}")),
    );
    event.insert("time".into(), json!(receipt.recorded_at.as_millis()));
    if let Some(started) = receipt.attempt_started_at {
        event.insert("start_time".into(), json!(started.as_millis()));
        let duration = receipt.recorded_at.as_millis() - started.as_millis();
        event.insert("duration".into(), json!(duration.max(0)));
    }
    event.insert("severity_id".into(), json!(severity_id));
    event.insert("severity".into(), json!(severity));
    event.insert("status_id".into(), json!(status_id));
    event.insert("status".into(), json!(status));
    if let Some(reason) = &receipt.reason {
        event.insert("status_code".into(), json!(reason));
    }
    if let Some(detail) = &receipt.detail {
        event.insert("status_detail".into(), json!(detail));
    }
    event.insert("message".into(), json!(message(receipt)));
    event.insert("metadata".into(), metadata(receipt, position));
    event.insert("actor".into(), actor(receipt));
    event.insert("api".into(), api(receipt));
    event.insert("src_endpoint".into(), src_endpoint(receipt));
    let resources = resources(receipt);
    if !resources.is_empty() {
        event.insert("resources".into(), Value::Array(resources));
    }
    security_control(receipt, &mut event);
    event.insert("unmapped".into(), body);
    event
}

/// `activity_id` and `activity_name`: an attempt is a call of the agent's tool, whose effect
/// Countersign cannot classify as create, read, update or delete, so Other (99) named
/// `Attempt`; every other receipt records a change to a record Countersign keeps (an approval
/// request answered, expired, voided, revoked or cancelled; an effect resolved or its lease
/// lapsed), so Update (3).
fn activity(kind: ReceiptKind) -> (i64, &'static str) {
    match kind {
        ReceiptKind::Attempt => (99, "Attempt"),
        ReceiptKind::Answer
        | ReceiptKind::ApprovalExpired
        | ReceiptKind::ApprovalVoided
        | ReceiptKind::LeaseExpired
        | ReceiptKind::Resolution
        | ReceiptKind::ApprovalRevoked
        | ReceiptKind::ApprovalCancelled => (3, "Update"),
    }
}

/// `status_id` and `status`: Failure when the recorded operation did not take effect (refused,
/// or an attempt whose executor said it did not run), Unknown when nobody can know
/// (`ambiguous`), Success otherwise (a human's denial is a recorded answer, a resolution to
/// `failed` a recorded resolution: Success).
fn status(kind: ReceiptKind, outcome: ReceiptOutcome) -> (i64, &'static str) {
    match outcome {
        ReceiptOutcome::Refused => (2, "Failure"),
        ReceiptOutcome::Failed if kind == ReceiptKind::Attempt => (2, "Failure"),
        ReceiptOutcome::Ambiguous => (0, "Unknown"),
        ReceiptOutcome::Failed
        | ReceiptOutcome::Committed
        | ReceiptOutcome::Observed
        | ReceiptOutcome::Granted
        | ReceiptOutcome::Denied
        | ReceiptOutcome::Expired
        | ReceiptOutcome::Voided
        | ReceiptOutcome::Counted
        | ReceiptOutcome::HandedOff
        | ReceiptOutcome::Revoked
        | ReceiptOutcome::Withdrawn
        | ReceiptOutcome::Cancelled => (1, "Success"),
    }
}

/// `severity_id` and `severity`, from the status: Medium for an unknown outcome (a human must
/// resolve it before the effect may run again), Low for a failure, Informational otherwise.
fn severity(status_id: i64) -> (i64, &'static str) {
    match status_id {
        0 => (3, "Medium"),
        2 => (2, "Low"),
        _ => (1, "Informational"),
    }
}

/// Who acted: the principal for an attempt; the approver for an answer, revocation,
/// cancellation or resolution; Countersign itself (`app_name`) when the receipt names nobody
/// (an expiry, a voided request, a lapsed lease).
fn actor(receipt: &Receipt) -> Value {
    let who = match receipt.kind {
        ReceiptKind::Attempt => receipt
            .principal
            .as_ref()
            .map(|principal| principal.as_str()),
        _ => receipt.approver.as_deref(),
    };
    let mut actor = Map::new();
    match who {
        Some(name) => {
            let mut user = Map::new();
            user.insert("name".into(), json!(name));
            user.insert("uid".into(), json!(name));
            if receipt.kind != ReceiptKind::Attempt
                && let Some(groups) = receipt.approver_groups.as_ref().filter(|g| !g.is_empty())
            {
                let groups: Vec<Value> = groups.iter().map(|name| json!({"name": name})).collect();
                user.insert("groups".into(), Value::Array(groups));
            }
            actor.insert("user".into(), Value::Object(user));
        }
        None => {
            actor.insert("app_name".into(), json!("Countersign"));
        }
    }
    if receipt.kind == ReceiptKind::Attempt
        && let Some(decision) = &receipt.decision
    {
        let mut authorization = Map::new();
        authorization.insert("decision".into(), json!(decision));
        if let Some(policy) = &receipt.policy_hash {
            authorization.insert("policy".into(), json!({"uid": policy.as_str()}));
        }
        actor.insert(
            "authorizations".into(),
            Value::Array(vec![Value::Object(authorization)]),
        );
    }
    Value::Object(actor)
}

/// The operation: the action's name for an attempt (what the agent called); for any other
/// receipt, the operation on Countersign's own records, with `service` Countersign.
fn operation(receipt: &Receipt) -> &str {
    match receipt.kind {
        ReceiptKind::Attempt => receipt.action.as_deref().unwrap_or("unknown"),
        ReceiptKind::Answer => "approval.answer",
        ReceiptKind::ApprovalExpired => "approval.expire",
        ReceiptKind::ApprovalVoided => "approval.void",
        ReceiptKind::ApprovalRevoked => "approval.revoke",
        ReceiptKind::ApprovalCancelled => "approval.cancel",
        ReceiptKind::LeaseExpired => "effect.lease_expire",
        ReceiptKind::Resolution => "effect.resolve",
    }
}

/// `api`: the operation, the request (its `uid` is the attempt id, else the approval id, else
/// the receipt's hash; its `data` the redacted arguments) and, for an attempt, the response.
fn api(receipt: &Receipt) -> Value {
    let mut api = Map::new();
    api.insert("operation".into(), json!(operation(receipt)));
    let request_uid = receipt
        .attempt_id
        .as_ref()
        .map(|id| id.as_str())
        .or_else(|| receipt.approval_id.as_ref().map(|id| id.as_str()))
        .unwrap_or_else(|| receipt.hash.as_str());
    let mut request = Map::new();
    request.insert("uid".into(), json!(request_uid));
    if let Some(arguments) = &receipt.arguments {
        request.insert("data".into(), arguments.clone());
    }
    api.insert("request".into(), Value::Object(request));
    if receipt.kind == ReceiptKind::Attempt {
        let mut response = Map::new();
        response.insert("message".into(), json!(receipt.outcome.as_str()));
        if let Some(code) = receipt.exit_status.and_then(|exit| exit.code) {
            response.insert("code".into(), json!(code));
        }
        if matches!(
            receipt.outcome,
            ReceiptOutcome::Refused | ReceiptOutcome::Failed | ReceiptOutcome::Ambiguous
        ) {
            if let Some(reason) = &receipt.reason {
                response.insert("error".into(), json!(reason));
            }
            if let Some(detail) = &receipt.detail {
                response.insert("error_message".into(), json!(detail));
            }
        }
        api.insert("response".into(), Value::Object(response));
    } else {
        api.insert("service".into(), json!({"name": "Countersign"}));
    }
    Value::Object(api)
}

/// `src_endpoint`, which the class requires: receipts record no network address, so the
/// service the call came through: the answer's channel (`cli`, `service`, `interrupt:…`) when
/// the receipt names one, else `countersign` (the kernel in the agent's process).
fn src_endpoint(receipt: &Receipt) -> Value {
    json!({"svc_name": receipt.channel.as_deref().unwrap_or("countersign")})
}

/// `resources`: the action (name, and its hash as `uid`), the resource, the effect key and the
/// approval request, each that the receipt names.
fn resources(receipt: &Receipt) -> Vec<Value> {
    let mut resources = Vec::new();
    if receipt.action.is_some() || receipt.action_hash.is_some() {
        let mut action = Map::new();
        action.insert("type".into(), json!("action"));
        if let Some(name) = &receipt.action {
            action.insert("name".into(), json!(name));
        }
        if let Some(hash) = &receipt.action_hash {
            action.insert("uid".into(), json!(hash.as_str()));
        }
        resources.push(Value::Object(action));
    }
    if let Some(resource) = &receipt.resource {
        resources.push(json!({"type": "resource", "uid": resource}));
    }
    if let Some(key) = &receipt.effect_key {
        resources.push(json!({"type": "effect", "uid": key.as_str()}));
    }
    if let Some(id) = &receipt.approval_id {
        resources.push(json!({"type": "approval_request", "uid": id.as_str()}));
    }
    resources
}

/// `metadata`: the OCSF version, the product, the receipt's hash as `uid`, its place in the log
/// (`position`: its `seq` in a store of one lane, SPEC 1.5) as `sequence` (when it fits OCSF's
/// 32-bit integer; the place `--after` resumes from), its kind as `event_code`, its schema as
/// `log_version`, and the approval id (else the effect key, else the action hash) as
/// `correlation_uid`.
fn metadata(receipt: &Receipt, position: u64) -> Value {
    let mut metadata = Map::new();
    metadata.insert("version".into(), json!(VERSION));
    metadata.insert(
        "product".into(),
        json!({
            "name": "Countersign",
            "vendor_name": "Countersign",
            "version": env!("CARGO_PKG_VERSION"),
        }),
    );
    metadata.insert("profiles".into(), json!(["security_control"]));
    metadata.insert("uid".into(), json!(receipt.hash.as_str()));
    if let Ok(sequence) = i32::try_from(position) {
        metadata.insert("sequence".into(), json!(sequence));
    }
    metadata.insert("log_name".into(), json!("receipts"));
    metadata.insert("log_provider".into(), json!("countersign"));
    metadata.insert("log_version".into(), json!(receipt.schema));
    metadata.insert("event_code".into(), json!(receipt.kind.as_str()));
    metadata.insert(
        "original_time".into(),
        json!(receipt.recorded_at.to_rfc3339()),
    );
    let correlation = receipt
        .approval_id
        .as_ref()
        .map(|id| id.as_str())
        .or_else(|| receipt.effect_key.as_ref().map(|key| key.as_str()))
        .or_else(|| receipt.action_hash.as_ref().map(|hash| hash.as_str()));
    if let Some(correlation) = correlation {
        metadata.insert("correlation_uid".into(), json!(correlation));
    }
    let mut labels = Vec::new();
    if let Some(environment) = &receipt.environment {
        labels.push(json!(format!("environment:{environment}")));
    }
    if let Some(mode) = &receipt.mode {
        labels.push(json!(format!("mode:{mode}")));
    }
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Array(labels));
    }
    Value::Object(metadata)
}

/// The `security_control` profile's fields: `policy` (the policy hash as `uid`; `is_applied`
/// false in observe mode) on any receipt naming a policy, and for an attempt the control's
/// `action_id` and `disposition_id`: Allowed and Allowed (Approved when it consumed an
/// approval) when the executor was let run, Denied and Blocked when refused, Observed and
/// Logged in observe mode.
fn security_control(receipt: &Receipt, event: &mut Map<String, Value>) {
    if let Some(policy) = &receipt.policy_hash {
        let mut object = Map::new();
        object.insert("uid".into(), json!(policy.as_str()));
        if let Some(mode) = &receipt.mode {
            object.insert("is_applied".into(), json!(mode == "enforce"));
        }
        event.insert("policy".into(), Value::Object(object));
    }
    if receipt.kind != ReceiptKind::Attempt {
        return;
    }
    let approved = receipt.approval_id.is_some();
    let ((action_id, action), (disposition_id, disposition)) = match receipt.outcome {
        ReceiptOutcome::Refused => ((2, "Denied"), (2, "Blocked")),
        ReceiptOutcome::Observed => ((3, "Observed"), (17, "Logged")),
        _ if approved => ((1, "Allowed"), (8, "Approved")),
        _ => ((1, "Allowed"), (1, "Allowed")),
    };
    event.insert("action_id".into(), json!(action_id));
    event.insert("action".into(), json!(action));
    event.insert("disposition_id".into(), json!(disposition_id));
    event.insert("disposition".into(), json!(disposition));
}

/// One line for a person: what happened, to what, by whom, and the outcome; every character
/// that could forge a line or reverse text is escaped ([`printable`]).
fn message(receipt: &Receipt) -> String {
    let subject = match (&receipt.action, &receipt.approval_id, &receipt.effect_key) {
        (_, Some(id), _) if receipt.kind != ReceiptKind::Attempt => match &receipt.action {
            Some(action) => format!("{id} ({action})"),
            None => id.to_string(),
        },
        (Some(action), _, _) => action.clone(),
        (None, _, Some(key)) => key.to_string(),
        (None, _, None) => "the log".to_owned(),
    };
    let by = match receipt.kind {
        ReceiptKind::Attempt => receipt.principal.as_ref().map(ToString::to_string),
        _ => receipt.approver.clone(),
    }
    .map(|who| format!(" by {who}"))
    .unwrap_or_default();
    let reason = receipt
        .reason
        .as_ref()
        .map(|reason| format!(" ({reason})"))
        .unwrap_or_default();
    let text = format!(
        "{} of {subject}{by}: {}{reason}",
        receipt.kind.as_str(),
        receipt.outcome.as_str()
    );
    printable(&text).into_owned()
}
