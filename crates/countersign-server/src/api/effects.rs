//! The effects routes: listing the effects a caller may resolve, and resolving one (through
//! the store's `resolve_effect`, judged by the stored resolver rule).

use super::*;

/// What governs who may see and resolve an effect: the consumed approval's rule, else the
/// attempt's `resolvers`, else none (the kernel's default: anyone but the principal).
pub(crate) async fn effect_rule(
    store: &dyn Store,
    record: &EffectRecord,
    approvals: &mut HashMap<String, Option<ApprovalRule>>,
) -> Result<Option<ApprovalRule>, Problem> {
    let Some(context) = &record.attempt else {
        return Ok(None);
    };
    if let Some(approval_id) = &context.approval_id {
        if let Some(cached) = approvals.get(approval_id.as_str()) {
            return Ok(cached.clone().or_else(|| context.resolvers.clone()));
        }
        let rule = match ApprovalId::parse(approval_id) {
            Ok(id) => store
                .approval(&id)
                .await
                .map_err(|error| Problem::from_store(&error))?
                .map(|approval| approval.rule),
            Err(_) => None,
        };
        approvals.insert(approval_id.to_string(), rule.clone());
        if rule.is_some() {
            return Ok(rule);
        }
    }
    Ok(context.resolvers.clone())
}

pub(crate) fn sees_effect(scope: &mut Scope<'_>, rule: Option<&ApprovalRule>) -> bool {
    match rule {
        Some(rule) => scope.sees_rule(rule),
        // No stored rule: the kernel lets anyone but the principal resolve it.
        None => true,
    }
}

/// `GET /api/v1/effects`.
pub(super) async fn list_effects(
    State(service): State<Service>,
    headers: HeaderMap,
    query: Result<Query<BTreeMap<String, String>>, QueryRejection>,
) -> Answer {
    let caller = service.caller(&headers, false)?;
    let listing = listing(query, true)?;
    let state = match listing.state.as_deref() {
        None | Some("all") => None,
        Some(text) => Some(EffectState::parse(text).ok_or_else(|| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!(
                    "`state` must be one of reserved, committed, failed, ambiguous or all, not `{}`",
                    text.escape_debug()
                ),
            )
        })?),
    };
    let after = listing.cursor.as_deref().map(decode_cursor).transpose()?;
    let store = service.store().await?;
    let mut records = store
        .effects(state)
        .await
        .map_err(|error| Problem::from_store(&error))?;
    records.sort_by(|a, b| a.key.cmp(&b.key));
    let mut scope = Scope::new(&caller, service.inner.clock.now());
    let mut approvals = HashMap::new();
    let mut items: Vec<&EffectRecord> = Vec::new();
    let mut next_cursor = None;
    for record in &records {
        if after
            .as_deref()
            .is_some_and(|after| record.key.as_str() <= after)
        {
            continue;
        }
        let rule = effect_rule(store.as_ref(), record, &mut approvals).await?;
        if !sees_effect(&mut scope, rule.as_ref()) {
            continue;
        }
        if items.len() == listing.limit {
            next_cursor = items.last().map(|last| encode_cursor(last.key.as_str()));
            break;
        }
        items.push(record);
    }
    json(StatusCode::OK, &Page { items, next_cursor })
}

/// `POST /api/v1/effects/{key}/resolve`: `{to: committed|failed, note}`, note required.
pub(super) async fn resolve(
    State(service): State<Service>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let caller = service.caller(&headers, true)?;
    let Path(key) = path.map_err(|error| path_problem(&error))?;
    let unknown = || {
        Problem::new(
            StatusCode::NOT_FOUND,
            "unknown_effect",
            format!(
                "no effect `{}` that you may see: list them with `GET /api/v1/effects?state=ambiguous`",
                key.escape_debug()
            ),
        )
    };
    let effect_key = EffectKey::new(key.clone()).map_err(|_| unknown())?;
    let object = body_object(&headers, body, &["to", "note"])?;
    let to = match object.get("to").and_then(serde_json::Value::as_str) {
        Some("committed") => EffectState::Committed,
        Some("failed") => EffectState::Failed,
        _ => {
            return Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_target",
                "`to` must be \"committed\" (it happened: retries are refused) or \"failed\" (it definitely did not happen: a retry may run)",
            ));
        }
    };
    let note = note_of(&object)?
        .filter(|note| !note.trim().is_empty())
        .ok_or_else(|| {
            Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "note_required",
                "say how you found out in `note`: it is kept in the resolution's receipt",
            )
        })?;
    let resolved = service
        .resolve_as(&caller, effect_key, to, note, unknown)
        .await?;
    json(StatusCode::OK, &resolved)
}

impl Service {
    /// Hand the store `caller`'s resolution of the ambiguous effect `effect_key` (the store's
    /// `resolve_effect` judges the caller against the effect's resolvers): the JSON API and the
    /// effects page both come here. `unknown` is the problem for an effect that does not exist.
    ///
    /// # Errors
    ///
    /// The refusal (or the store's failure) as a [`Problem`].
    ///
    /// # Cancel safety
    ///
    /// As the store's `resolve_effect`: one transaction, or nothing.
    pub(crate) async fn resolve_as(
        &self,
        caller: &Caller,
        effect_key: EffectKey,
        to: EffectState,
        note: String,
        unknown: impl FnOnce() -> Problem,
    ) -> Result<EffectRecord, Problem> {
        let store = self.store().await?;
        let record = store
            .effect(&effect_key)
            .await
            .map_err(|error| Problem::from_store(&error))?
            .ok_or_else(unknown)?;
        let rule = effect_rule(store.as_ref(), &record, &mut HashMap::new()).await?;
        let credential = match (&rule, &caller.credential) {
            // No stored rule and so no stored keys to verify a token against: the service's own
            // verification at sign-in (against the policy's keys) vouches for the caller.
            (None, Credential::Token(_)) => Credential::Verified {
                id: caller.id.clone(),
                groups: caller.groups.clone(),
                authentication: Authentication::Token,
            },
            (_, credential) => credential.clone(),
        };
        let resolved = store
            .resolve_effect(
                store::ResolveEffect {
                    key: effect_key,
                    to,
                    resolver: store::Resolver::Person {
                        credential,
                        channel: Channel::Service,
                    },
                    note: Some(note),
                },
                self.inner.clock.now(),
            )
            .await
            .map_err(|error| {
                let problem = Problem::from_resolve(&error);
                self.inner.metrics.record_resolution(problem.reason);
                problem
            })?;
        self.inner
            .metrics
            .record_resolution(resolved.state.as_str());
        Ok(resolved)
    }
}
