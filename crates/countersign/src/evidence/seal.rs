//! Sealing: a draft becomes the next receipt of the chain, its canonical body hashed with the
//! previous receipt's hash.

use super::*;

/// Seal a draft into the next receipt of the chain whose head is `head`, at `now`, in lane 0
/// (the one lane of a store that keeps one: [`seal_in_lane`]).
///
/// Returns the receipt and its stored form.
///
/// # Errors
///
/// A [`canonical::CanonicalError`] if the draft holds an unrepresentable value (it cannot: its
/// arguments are already canonical; kept so a bug surfaces as an error, not a panic).
pub fn seal(
    draft: ReceiptDraft,
    head: Option<&ChainHead>,
    now: Timestamp,
) -> Result<(Receipt, StoredReceipt), canonical::CanonicalError> {
    seal_in_lane(0, draft, head, now)
}

/// Seal a draft into the next receipt of lane `lane`'s chain, whose head is `head` (`None`: the
/// lane is empty, so the receipt is its `seq` 1 and points at [`GENESIS_HASH`]), at `now`. A
/// receipt of lane 0 carries no `lane` field ([`Receipt::lane`]).
///
/// # Errors
///
/// As [`seal`].
pub fn seal_in_lane(
    lane: u32,
    draft: ReceiptDraft,
    head: Option<&ChainHead>,
    now: Timestamp,
) -> Result<(Receipt, StoredReceipt), canonical::CanonicalError> {
    let (seq, prev_hash) = match head {
        Some(head) => (head.seq + 1, head.hash.clone()),
        None => (1, ReceiptHash::genesis()),
    };
    let arguments = draft.arguments;
    let mut receipt = Receipt {
        schema: RECEIPT_SCHEMA.to_owned(),
        seq,
        lane,
        prev_hash,
        recorded_at: now,
        kind: draft.kind.unwrap_or(ReceiptKind::Attempt),
        outcome: draft.outcome.unwrap_or(ReceiptOutcome::Refused),
        reason: draft.reason,
        attempt_id: draft.attempt_id,
        action: draft.action,
        action_hash: draft.action_hash,
        principal: draft.principal,
        resource: draft.resource,
        environment: draft.environment,
        effect_key: draft.effect_key,
        arguments: arguments.as_ref().map(canonical::CanonicalJson::to_value),
        decision: draft.decision,
        mode: draft.mode,
        approval_id: draft.approval_id,
        approver: draft.approver,
        note: draft.note,
        policy_hash: draft.policy_hash,
        approval_policy_hash: draft.approval_policy_hash,
        detail: draft.detail,
        approvals_given: draft.approvals_given,
        approvals_needed: draft.approvals_needed,
        approver_groups: draft.approver_groups,
        channel: draft.channel,
        authentication: draft.authentication,
        hash_confirmed: draft.hash_confirmed,
        approvers: draft.approvers,
        attempt_started_at: draft.attempt_started_at,
        exit_status: draft.exit_status,
        raised_by: draft.raised_by,
        tool_schema: draft.tool_schema,
        hash: ReceiptHash::default(),
    };
    let body = body_of(&receipt, arguments.as_ref())?;
    receipt.hash = ReceiptHash::computed(canonical::sha256_prefixed(body.as_bytes()));
    let stored = StoredReceipt {
        lane,
        // Placed by the store that appends it.
        position: 0,
        seq,
        prev_hash: receipt.prev_hash.clone(),
        hash: receipt.hash.clone(),
        body,
        missing: false,
    };
    Ok((receipt, stored))
}

/// The largest `seq` RFC 8785 writes exactly (2^53 − 1).
pub(super) const MAX_EXACT_SEQ: u64 = (1 << 53) - 1;

/// The canonical body of a receipt whose `hash` is still empty (an empty hash is not
/// serialized): every field except `hash`. `arguments` is the canonical text of
/// `receipt.arguments`.
///
/// The RFC 8785 text is written field by field, in sorted key order, with the arguments copied
/// in as the canonical text they already are, instead of serializing the receipt through the
/// generic canonicalizer (which would walk the arguments again and sort every key on every
/// call). `body_matches_the_generic_canonical_form` pins the two together.
pub(super) fn body_of(
    receipt: &Receipt,
    arguments: Option<&canonical::CanonicalJson>,
) -> Result<String, canonical::CanonicalError> {
    debug_assert!(receipt.hash.is_unset());
    if receipt.seq > MAX_EXACT_SEQ {
        // Not reachable in practice; the generic path names the refusal.
        return Ok(canonical::to_canonical(receipt)?.into_string());
    }
    let mut out = String::with_capacity(640 + arguments.map_or(0, |text| text.as_str().len()));
    fn optional<T: AsRef<str>>(out: &mut String, key: &str, value: &Option<T>) {
        out.push_str(key);
        match value {
            Some(text) => canonical::write_string(text.as_ref(), out),
            None => out.push_str("null"),
        }
    }
    // v2 fields: written only when set (then as canonical JSON), in their sorted place.
    let present = |out: &mut String, key: &str, value: Option<String>| {
        if let Some(text) = value {
            out.push_str(key);
            out.push_str(&text);
        }
    };
    let number = |value: Option<u32>| value.map(|number| number.to_string());
    let text = |value: &Option<String>| {
        value.as_ref().map(|text| {
            let mut quoted = String::new();
            canonical::write_string(text, &mut quoted);
            quoted
        })
    };
    optional(&mut out, "{\"action\":", &receipt.action);
    optional(&mut out, ",\"action_hash\":", &receipt.action_hash);
    optional(&mut out, ",\"approval_id\":", &receipt.approval_id);
    optional(
        &mut out,
        ",\"approval_policy_hash\":",
        &receipt.approval_policy_hash,
    );
    present(
        &mut out,
        ",\"approvals_given\":",
        number(receipt.approvals_given),
    );
    present(
        &mut out,
        ",\"approvals_needed\":",
        number(receipt.approvals_needed),
    );
    optional(&mut out, ",\"approver\":", &receipt.approver);
    present(
        &mut out,
        ",\"approver_groups\":",
        canonical_of(receipt.approver_groups.as_ref())?,
    );
    present(
        &mut out,
        ",\"approvers\":",
        canonical_of(receipt.approvers.as_ref())?,
    );
    out.push_str(",\"arguments\":");
    out.push_str(arguments.map_or("null", canonical::CanonicalJson::as_str));
    optional(&mut out, ",\"attempt_id\":", &receipt.attempt_id);
    present(
        &mut out,
        ",\"attempt_started_at\":",
        text(&receipt.attempt_started_at.map(Timestamp::to_rfc3339)),
    );
    present(
        &mut out,
        ",\"authentication\":",
        text(&receipt.authentication),
    );
    present(&mut out, ",\"channel\":", text(&receipt.channel));
    optional(&mut out, ",\"decision\":", &receipt.decision);
    optional(&mut out, ",\"detail\":", &receipt.detail);
    optional(&mut out, ",\"effect_key\":", &receipt.effect_key);
    optional(&mut out, ",\"environment\":", &receipt.environment);
    present(
        &mut out,
        ",\"exit_status\":",
        canonical_of(receipt.exit_status.as_ref())?,
    );
    present(
        &mut out,
        ",\"hash_confirmed\":",
        receipt.hash_confirmed.map(|flag| flag.to_string()),
    );
    out.push_str(",\"kind\":");
    canonical::write_string(receipt.kind.as_str(), &mut out);
    present(
        &mut out,
        ",\"lane\":",
        (receipt.lane != 0).then(|| receipt.lane.to_string()),
    );
    optional(&mut out, ",\"mode\":", &receipt.mode);
    optional(&mut out, ",\"note\":", &receipt.note);
    out.push_str(",\"outcome\":");
    canonical::write_string(receipt.outcome.as_str(), &mut out);
    optional(&mut out, ",\"policy_hash\":", &receipt.policy_hash);
    out.push_str(",\"prev_hash\":");
    canonical::write_string(receipt.prev_hash.as_str(), &mut out);
    optional(&mut out, ",\"principal\":", &receipt.principal);
    present(&mut out, ",\"raised_by\":", text(&receipt.raised_by));
    optional(&mut out, ",\"reason\":", &receipt.reason);
    out.push_str(",\"recorded_at\":");
    canonical::write_string(&receipt.recorded_at.to_rfc3339(), &mut out);
    optional(&mut out, ",\"resource\":", &receipt.resource);
    out.push_str(",\"schema\":");
    canonical::write_string(&receipt.schema, &mut out);
    out.push_str(",\"seq\":");
    out.push_str(&receipt.seq.to_string());
    present(&mut out, ",\"tool_schema\":", text(&receipt.tool_schema));
    out.push('}');
    Ok(out)
}

/// The canonical JSON text of a structured receipt field, if set.
pub(super) fn canonical_of<T: Serialize>(
    value: Option<&T>,
) -> Result<Option<String>, canonical::CanonicalError> {
    value
        .map(|value| canonical::to_canonical(value).map(canonical::CanonicalJson::into_string))
        .transpose()
}
