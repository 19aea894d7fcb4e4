//! Rows of the `approvals`, `effects` and `receipts` tables decoded into kernel records; an
//! undecodable row is `StoreError::Corrupt`.

use super::*;

pub(super) fn corrupt(detail: String) -> StoreError {
    StoreError::Corrupt { detail }
}

pub(super) fn decode(error: sqlx::Error) -> StoreError {
    corrupt(error.to_string())
}

/// The raw `answers` text of an approval row (NULL for a row an older build wrote), which an
/// update's compare-and-set checks as read.
pub(super) fn raw_answers(row: &PgRow) -> Result<Option<String>, StoreError> {
    row.try_get(19).map_err(decode)
}

/// Who holds an effect key, from `SELECT state, attempt_id`.
pub(super) fn effect_holder_from_row(row: &PgRow) -> Result<EffectVersion, StoreError> {
    let state: String = row.try_get(0).map_err(decode)?;
    Ok(EffectVersion {
        state: EffectState::parse(&state)
            .ok_or_else(|| corrupt(format!("effect state `{state}`")))?,
        attempt_id: row.try_get(1).map_err(decode)?,
    })
}

pub(super) fn approval_from_row(row: &PgRow) -> Result<ApprovalRecord, StoreError> {
    let arguments: String = row.try_get(3).map_err(decode)?;
    let state: String = row.try_get(10).map_err(decode)?;
    let state =
        ApprovalState::parse(&state).ok_or_else(|| corrupt(format!("approval state `{state}`")))?;
    let approver: Option<String> = row.try_get(14).map_err(decode)?;
    let note: Option<String> = row.try_get(15).map_err(decode)?;
    let answered_at = row
        .try_get::<Option<i64>, _>(13)
        .map_err(decode)?
        .map(Timestamp::from_millis);
    let (rule, answers) = stored::rule_and_answers(
        row.try_get::<Option<String>, _>(18)
            .map_err(decode)?
            .as_deref(),
        row.try_get::<Option<String>, _>(19)
            .map_err(decode)?
            .as_deref(),
        (state, approver.as_deref(), note.as_deref(), answered_at),
    )
    .map_err(corrupt)?;
    let millis = |index: usize| -> Result<Option<Timestamp>, StoreError> {
        Ok(row
            .try_get::<Option<i64>, _>(index)
            .map_err(decode)?
            .map(Timestamp::from_millis))
    };
    Ok(ApprovalRecord {
        id: ApprovalId::from_stored(row.try_get(0).map_err(decode)?),
        action_hash: ActionHash::from_stored(row.try_get::<String, _>(1).map_err(decode)?),
        action: row.try_get(2).map_err(decode)?,
        arguments: canonical::reparse_canonical(&arguments)
            .map_err(|error| corrupt(format!("approval arguments: {error}")))?,
        principal: row.try_get(4).map_err(decode)?,
        resource: row.try_get(5).map_err(decode)?,
        environment: row.try_get(6).map_err(decode)?,
        effect_key: row.try_get(7).map_err(decode)?,
        policy_hash: row.try_get(8).map_err(decode)?,
        entry_fingerprint: row.try_get(9).map_err(decode)?,
        state,
        created_at: Timestamp::from_millis(row.try_get(11).map_err(decode)?),
        expires_at: Timestamp::from_millis(row.try_get(12).map_err(decode)?),
        answered_at,
        approver,
        note,
        consumed_at: millis(16)?,
        consumed_by: row.try_get(17).map_err(decode)?,
        run: row.try_get(20).map_err(decode)?,
        rule,
        answers,
    })
}

pub(super) fn effect_from_row(row: &PgRow) -> Result<EffectRecord, StoreError> {
    let key: String = row.try_get(0).map_err(decode)?;
    let state: String = row.try_get(1).map_err(decode)?;
    let attempts: i32 = row.try_get(4).map_err(decode)?;
    Ok(EffectRecord {
        key: EffectKey::new(key).map_err(|error| corrupt(format!("effect key: {error}")))?,
        state: EffectState::parse(&state)
            .ok_or_else(|| corrupt(format!("effect state `{state}`")))?,
        action_hash: row.try_get(2).map_err(decode)?,
        attempt_id: row.try_get(3).map_err(decode)?,
        attempts: u32::try_from(attempts)
            .map_err(|_| corrupt(format!("effect attempts {attempts}")))?,
        lease_until: Timestamp::from_millis(row.try_get(5).map_err(decode)?),
        updated_at: Timestamp::from_millis(row.try_get(6).map_err(decode)?),
        resolved_by: row.try_get(7).map_err(decode)?,
        detail: row.try_get(8).map_err(decode)?,
        attempt: stored::attempt(
            row.try_get::<Option<String>, _>(9)
                .map_err(decode)?
                .as_deref(),
        )
        .map_err(corrupt)?,
    })
}

/// A receipt read with its place: columns `position, lane, seq, prev_hash, hash, body,
/// missing`, the last true when the place names a receipt whose row is gone
/// ([`StoredReceipt::missing`]).
pub(super) fn receipt_from_row(row: &PgRow) -> Result<StoredReceipt, StoreError> {
    let position: i64 = row.try_get(0).map_err(decode)?;
    let lane: i32 = row.try_get(1).map_err(decode)?;
    let seq: i64 = row.try_get(2).map_err(decode)?;
    let missing: bool = row.try_get(6).map_err(decode)?;
    Ok(StoredReceipt {
        lane: u32::try_from(lane).map_err(|_| corrupt(format!("negative lane {lane}")))?,
        position: u64::try_from(position).map_err(|_| corrupt("negative position".to_owned()))?,
        seq: u64::try_from(seq).map_err(|_| corrupt("negative seq".to_owned()))?,
        // A NULL column (a row written outside Countersign) reads as empty, so verification
        // names the receipt (case B58) instead of failing to read the log.
        prev_hash: ReceiptHash::from_stored(
            row.try_get::<Option<String>, _>(3)
                .map_err(decode)?
                .unwrap_or_default(),
        ),
        hash: ReceiptHash::from_stored(
            row.try_get::<Option<String>, _>(4)
                .map_err(decode)?
                .unwrap_or_default(),
        ),
        body: row
            .try_get::<Option<String>, _>(5)
            .map_err(decode)?
            .unwrap_or_default(),
        missing,
    })
}
