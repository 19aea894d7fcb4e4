//! Rows of the `approvals`, `effects` and `receipts` tables decoded into kernel records; an
//! undecodable row is `StoreError::Corrupt`.

use super::*;

pub(super) const APPROVAL_COLUMNS: &str = "id, action_hash, action, arguments, principal, resource, environment, effect_key, policy_hash, entry_fingerprint, state, created_at, expires_at, answered_at, approver, note, consumed_at, consumed_by, rule, answers, run";

pub(super) fn corrupt(detail: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, detail.into())
}

pub(super) fn approval_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRecord> {
    let arguments: String = row.get(3)?;
    let state: String = row.get(10)?;
    let state =
        ApprovalState::parse(&state).ok_or_else(|| corrupt(format!("approval state `{state}`")))?;
    let approver: Option<String> = row.get(14)?;
    let note: Option<String> = row.get(15)?;
    let answered_at = row.get::<_, Option<i64>>(13)?.map(Timestamp::from_millis);
    let (rule, answers) = stored::rule_and_answers(
        row.get::<_, Option<String>>(18)?.as_deref(),
        row.get::<_, Option<String>>(19)?.as_deref(),
        (state, approver.as_deref(), note.as_deref(), answered_at),
    )
    .map_err(corrupt)?;
    Ok(ApprovalRecord {
        id: ApprovalId::from_stored(row.get(0)?),
        action_hash: ActionHash::from_stored(row.get::<_, String>(1)?),
        action: row.get(2)?,
        arguments: canonical::reparse_canonical(&arguments)
            .map_err(|error| corrupt(format!("approval arguments: {error}")))?,
        principal: row.get(4)?,
        resource: row.get(5)?,
        environment: row.get(6)?,
        effect_key: row.get(7)?,
        policy_hash: row.get(8)?,
        entry_fingerprint: row.get(9)?,
        state,
        created_at: Timestamp::from_millis(row.get(11)?),
        expires_at: Timestamp::from_millis(row.get(12)?),
        answered_at,
        approver,
        note,
        consumed_at: row.get::<_, Option<i64>>(16)?.map(Timestamp::from_millis),
        consumed_by: row.get(17)?,
        run: row.get(20)?,
        rule,
        answers,
    })
}

pub(super) const EFFECT_COLUMNS: &str = "key, state, action_hash, attempt_id, attempts, lease_until, updated_at, resolved_by, detail, attempt";

pub(super) fn effect_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<EffectRecord> {
    let key: String = row.get(0)?;
    let state: String = row.get(1)?;
    Ok(EffectRecord {
        key: EffectKey::new(key).map_err(|error| corrupt(format!("effect key: {error}")))?,
        state: EffectState::parse(&state)
            .ok_or_else(|| corrupt(format!("effect state `{state}`")))?,
        action_hash: row.get(2)?,
        attempt_id: row.get(3)?,
        attempts: row.get(4)?,
        lease_until: Timestamp::from_millis(row.get(5)?),
        updated_at: Timestamp::from_millis(row.get(6)?),
        resolved_by: row.get(7)?,
        detail: row.get(8)?,
        attempt: stored::attempt(row.get::<_, Option<String>>(9)?.as_deref()).map_err(corrupt)?,
    })
}

/// Who holds an effect key, from `SELECT state, attempt_id`.
pub(super) fn effect_holder_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<EffectVersion> {
    let state: String = row.get(0)?;
    Ok(EffectVersion {
        state: EffectState::parse(&state)
            .ok_or_else(|| corrupt(format!("effect state `{state}`")))?,
        attempt_id: row.get(1)?,
    })
}

pub(super) fn receipt_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredReceipt> {
    let seq: u64 = row
        .get::<_, i64>(0)?
        .try_into()
        .map_err(|_| corrupt("negative seq".to_owned()))?;
    Ok(StoredReceipt {
        // SQLite keeps one lane, its one writer at a time taking the one head (issue #21): a
        // body naming another is refused by `check_alone`, and a receipt's place in the log is
        // its `seq`.
        lane: 0,
        position: seq,
        seq,
        // A NULL column (a row written outside Countersign) reads as empty, so verification
        // names the receipt (case B58) instead of failing to read the log.
        prev_hash: ReceiptHash::from_stored(stored_text(row, 1)?),
        hash: ReceiptHash::from_stored(stored_text(row, 2)?),
        body: stored_text(row, 3)?,
        // Its place is its `seq`: a deleted receipt leaves no row to name it, only a gap.
        missing: false,
    })
}

/// A receipt's text column `index` as whatever was stored there: NULL as empty, a BLOB or a
/// number as its text. Only Countersign writes these columns, always as text; anything else
/// was written outside it, and is read so that verification names the receipt (case B58; found
/// by a first-time user: a BLOB failed the whole read without naming the receipt).
fn stored_text(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<String> {
    use rusqlite::types::ValueRef;
    Ok(match row.get_ref(index)? {
        ValueRef::Null => String::new(),
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            String::from_utf8_lossy(bytes).into_owned()
        }
        ValueRef::Integer(number) => number.to_string(),
        ValueRef::Real(number) => number.to_string(),
    })
}

/// An effect record as its columns, in [`EFFECT_COLUMNS`] order (borrowed but for the
/// `attempt` JSON text).
pub(super) struct EffectRow<'a> {
    key: &'a str,
    state: &'static str,
    action_hash: &'a str,
    attempt_id: &'a str,
    attempts: u32,
    lease_until: i64,
    updated_at: i64,
    resolved_by: Option<&'a str>,
    detail: Option<&'a str>,
    attempt: Option<String>,
}

impl<'a> EffectRow<'a> {
    pub(super) fn of(record: &'a EffectRecord) -> EffectRow<'a> {
        EffectRow {
            key: record.key.as_str(),
            state: record.state.as_str(),
            action_hash: &record.action_hash,
            attempt_id: &record.attempt_id,
            attempts: record.attempts,
            lease_until: record.lease_until.as_millis(),
            updated_at: record.updated_at.as_millis(),
            resolved_by: record.resolved_by.as_deref(),
            detail: record.detail.as_deref(),
            attempt: stored::attempt_text(record.attempt.as_ref()),
        }
    }

    /// The columns as SQL parameters `?1` to `?10`.
    pub(super) fn params(&self) -> [&dyn rusqlite::ToSql; 10] {
        [
            &self.key,
            &self.state,
            &self.action_hash,
            &self.attempt_id,
            &self.attempts,
            &self.lease_until,
            &self.updated_at,
            &self.resolved_by,
            &self.detail,
            &self.attempt,
        ]
    }
}
