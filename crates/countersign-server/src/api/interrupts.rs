//! The chat-surface contract (issue #17): `GET /api/v1/interrupts` lists the pending requests
//! the caller may answer as `countersign.interrupt/v1` objects, and `POST
//! /api/v1/interrupts/responses` takes their answers.
//!
//! Both halves of the contract are the kernel's ([`countersign::display::interrupt_object`],
//! [`countersign::display::parse_interrupt_response`]); this route only signs the caller in
//! and hands each response to [`Service::answer_as`] (the one answer path). The approver is
//! always the signed-in caller: a response that names anyone (an `approver` field) is not the
//! closed shape and is refused `invalid_decision`.

use countersign::display::{InterruptObject, interrupt_object, parse_interrupt_response};

use super::*;

/// The most responses one body may carry.
pub(super) const MAX_RESPONSES: usize = 100;

/// `GET /api/v1/interrupts`: the pending, unexpired requests the caller could still answer,
/// oldest first, each as a `countersign.interrupt/v1` object; `?run=` keeps one run's.
pub(super) async fn list_interrupts(
    State(service): State<Service>,
    headers: HeaderMap,
    query: Result<Query<BTreeMap<String, String>>, QueryRejection>,
) -> Answer {
    let caller = service.caller(&headers, false)?;
    let Query(mut query) = query.map_err(|error| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("unreadable query: {error}"),
        )
    })?;
    let run = query.remove("run");
    if let Some(unknown) = query.keys().next() {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!(
                "unknown query parameter `{}`: this route takes `run`",
                unknown.escape_debug()
            ),
        ));
    }
    let store = service.store().await?;
    let now = service.inner.clock.now();
    let mut records = store
        .approvals(Some(ApprovalState::Pending))
        .await
        .map_err(|error| Problem::from_store(&error))?;
    records.sort_by(|a, b| {
        (a.created_at.as_millis(), a.id.as_str()).cmp(&(b.created_at.as_millis(), b.id.as_str()))
    });
    let mut scope = Scope::new(&caller, now);
    let items: Vec<InterruptObject> = records
        .iter()
        .filter(|record| run.is_none() || record.run == run)
        .filter(|record| scope.may_answer(record))
        .map(interrupt_object)
        .collect();
    json(StatusCode::OK, &serde_json::json!({ "items": items }))
}

/// What happened to one response of a batch.
#[derive(Serialize)]
struct Outcome {
    /// `recorded`, `refused` or `not_applied`.
    status: &'static str,
    /// The request's state after a recorded answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'static str>,
    /// Yes answers counted so far, after a recorded answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    approvals_given: Option<u32>,
    /// The refusal's reason code.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    /// What happened and what to do next, for a refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    /// The HTTP status this response alone would have got.
    #[serde(skip)]
    http: StatusCode,
}

impl Outcome {
    fn recorded(record: &ApprovalRecord) -> Outcome {
        Outcome {
            status: "recorded",
            state: Some(record.state.as_str()),
            approvals_given: Some(record.approvals_given()),
            reason: None,
            detail: None,
            http: StatusCode::OK,
        }
    }

    fn refused(problem: Problem) -> Outcome {
        Outcome {
            status: "refused",
            state: None,
            approvals_given: None,
            reason: Some(problem.reason),
            detail: Some(problem.detail),
            http: problem.status,
        }
    }

    fn not_applied() -> Outcome {
        Outcome {
            status: "not_applied",
            state: None,
            approvals_given: None,
            reason: Some("batch_refused"),
            detail: Some(
                "not submitted: another response in this body was refused before any was applied; fix it and send the body again"
                    .to_owned(),
            ),
            http: StatusCode::UNPROCESSABLE_ENTITY,
        }
    }
}

/// `POST /api/v1/interrupts/responses`: `{"responses": {"<request id>": {"decision":
/// "approve"|"deny", "action_hash": "sha256:…", "note": "…"}}}` from a signed-in caller.
///
/// Read in two passes, in request id order. First every entry is read: an id of no request
/// (malformed or unknown) is refused `unknown_request`, and a response of any other shape is refused
/// `invalid_decision` — handed to the kernel as such, so the refusal and who sent it are
/// recorded and the request stays pending. If any entry was refused there, no other entry is
/// submitted (`not_applied`). Otherwise each response goes to the kernel, which judges it on
/// its own (entitlement, hash echo, state, expiry). `200` with `results` when every response
/// was recorded; else problem details with the first refusal's status and reason, and the same
/// `results`.
pub(super) async fn post_responses(
    State(service): State<Service>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let caller = service.caller(&headers, true)?;
    let object = body_object(&headers, body, &["responses"])?;
    let Some(serde_json::Value::Object(responses)) = object.get("responses") else {
        return Err(Problem::invalid_body(
            "`responses` must be an object of request ids to responses: {\"responses\": {\"apr_…\": {\"decision\": \"approve\", \"action_hash\": \"sha256:…\"}}}",
        ));
    };
    if responses.is_empty() || responses.len() > MAX_RESPONSES {
        return Err(Problem::invalid_body(format!(
            "`responses` holds {} entries: send 1 to {MAX_RESPONSES}",
            responses.len()
        )));
    }
    let mut entries: Vec<(&String, &serde_json::Value)> = responses.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));

    // First pass: read every entry and find its request, submitting nothing yet. An id of no
    // request is refused as a malformed one is, so that no other response in the body is
    // applied under a 404. (A request the caller may not answer goes to the kernel, which
    // records the refusal and who sent it.)
    let store = service.store().await?;
    let mut read = Vec::with_capacity(entries.len());
    let mut any_unreadable = false;
    for (id, value) in &entries {
        let unknown = || {
            Problem::new(
                StatusCode::NOT_FOUND,
                "unknown_request",
                format!(
                    "`{}` is not the id of an approval request: key each response by the `request_id` of its countersign.interrupt/v1 object",
                    id.escape_debug()
                ),
            )
        };
        let request_id = match ApprovalId::parse(id) {
            Err(_) => Err(unknown()),
            Ok(request_id) => match store.approval(&request_id).await {
                Ok(Some(_)) => Ok(request_id),
                Ok(None) => Err(unknown()),
                Err(error) => return Err(Problem::from_store(&error)),
            },
        };
        let response = parse_interrupt_response(value);
        any_unreadable |= request_id.is_err() || response.is_err();
        read.push((*id, request_id, response));
    }

    let mut results = serde_json::Map::new();
    let mut first_refusal: Option<(String, StatusCode, &'static str, String)> = None;
    let mut note_refusal = |id: &str, outcome: &Outcome| {
        if first_refusal.is_none() && outcome.status == "refused" {
            first_refusal = Some((
                id.to_owned(),
                outcome.http,
                outcome.reason.unwrap_or("refused"),
                outcome.detail.clone().unwrap_or_default(),
            ));
        }
    };
    for (id, request_id, response) in read {
        let outcome = match (request_id, response) {
            (Err(unknown), _) => Outcome::refused(unknown),
            (Ok(request_id), Err(invalid)) => {
                // Recorded by the kernel as a refused answer naming the caller.
                match service
                    .answer_as(&caller, request_id, Err(invalid), None, None)
                    .await
                {
                    Ok(record) => Outcome::recorded(&record),
                    Err(problem) => Outcome::refused(problem),
                }
            }
            (Ok(_), Ok(_)) if any_unreadable => Outcome::not_applied(),
            (Ok(request_id), Ok(response)) => {
                match service
                    .answer_as(
                        &caller,
                        request_id,
                        Ok(response.decision),
                        Some(response.action_hash),
                        response.note,
                    )
                    .await
                {
                    Ok(record) => Outcome::recorded(&record),
                    Err(problem) => Outcome::refused(problem),
                }
            }
        };
        note_refusal(id, &outcome);
        let value = serde_json::to_value(&outcome).map_err(|error| {
            Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("cannot write the answer as JSON: {error}: please report it"),
            )
        })?;
        results.insert(id.clone(), value);
    }
    match first_refusal {
        None => json(StatusCode::OK, &serde_json::json!({ "results": results })),
        Some((id, status, reason, detail)) => {
            let refused = results
                .values()
                .filter(|value| value["status"] == "refused")
                .count();
            Err(Problem::new(
                status,
                reason,
                format!(
                    "{refused} of {} responses were refused; the first, `{}`: {detail}",
                    results.len(),
                    id.escape_debug()
                ),
            )
            .with("results", serde_json::Value::Object(results)))
        }
    }
}
