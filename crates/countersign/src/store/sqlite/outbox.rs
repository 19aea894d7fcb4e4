//! The outbox (issue #17) in SQLite: the `outbox` and `deliveries` tables schema version 4
//! added. Every function runs inside a transaction the store opened (`BEGIN IMMEDIATE` for
//! writes), so a claim's fan-out, choice and leases are one unit.

use super::*;

use crate::outbox::{
    ClaimedDelivery, Delivery, DeliveryState, EventKind, OutboxEvent, Settlement, StoredEvent,
};
use crate::store::DeliveryClaim;

/// The columns [`delivery_from_row`] reads, from `deliveries d JOIN outbox o`.
const DELIVERY_COLUMNS: &str = "d.id, o.id, o.kind, d.request_id, d.endpoint, d.state, d.attempts, d.next_at, d.window_start, d.last_error, d.delivered_at, o.created_at, d.reference";

fn millis(timestamp: Timestamp) -> i64 {
    timestamp.as_millis()
}

fn delivery_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Delivery> {
    let kind: String = row.get(2)?;
    let state: String = row.get(5)?;
    Ok(Delivery {
        id: u64::try_from(row.get::<_, i64>(0)?).map_err(|_| corrupt("delivery id".into()))?,
        event_id: row.get(1)?,
        kind: EventKind::parse(&kind).ok_or_else(|| corrupt(format!("event kind `{kind}`")))?,
        request_id: crate::outbox::read_request_id(row.get(3)?),
        endpoint: row.get(4)?,
        state: DeliveryState::parse(&state)
            .ok_or_else(|| corrupt(format!("delivery state `{state}`")))?,
        attempts: u32::try_from(row.get::<_, i64>(6)?).unwrap_or(u32::MAX),
        next_attempt_at: Timestamp::from_millis(row.get(7)?),
        window_start: Timestamp::from_millis(row.get(8)?),
        last_error: row.get(9)?,
        delivered_at: row.get::<_, Option<i64>>(10)?.map(Timestamp::from_millis),
        event_at: Timestamp::from_millis(row.get(11)?),
        reference: row.get(12)?,
    })
}

fn event_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEvent> {
    let kind: String = row.get(2)?;
    Ok(StoredEvent {
        seq: u64::try_from(row.get::<_, i64>(0)?).map_err(|_| corrupt("event seq".into()))?,
        event: OutboxEvent {
            id: row.get(1)?,
            kind: EventKind::parse(&kind).ok_or_else(|| corrupt(format!("event kind `{kind}`")))?,
            request_id: crate::outbox::read_request_id(row.get(3)?),
            created_at: Timestamp::from_millis(row.get(4)?),
            body: row.get(5)?,
        },
    })
}

/// Append one event (inside the change's own transaction).
pub(super) fn insert_event(connection: &Connection, event: &OutboxEvent) -> rusqlite::Result<()> {
    connection
        .prepare_cached(
            "INSERT INTO outbox (id, kind, request_id, created_at, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            event.id,
            event.kind.as_str(),
            crate::outbox::stored_request_id(event.request_id.as_ref()),
            millis(event.created_at),
            event.body
        ])
        .map(drop)
}

/// The newest event of `kind` (the index `outbox_by_kind`, schema version 5).
pub(super) fn last_event(
    connection: &Connection,
    kind: EventKind,
) -> rusqlite::Result<Option<StoredEvent>> {
    connection
        .prepare_cached(
            "SELECT seq, id, kind, request_id, created_at, body FROM outbox WHERE kind = ?1 ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(params![kind.as_str()], event_from_row)
        .optional()
}

/// Events after `after_seq`, in order.
pub(super) fn events(
    connection: &Connection,
    after_seq: u64,
    limit: usize,
) -> rusqlite::Result<Vec<StoredEvent>> {
    let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    connection
        .prepare_cached(
            "SELECT seq, id, kind, request_id, created_at, body FROM outbox WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )?
        .query_map(params![after, limit], event_from_row)?
        .collect()
}

/// [`crate::Store::claim_deliveries`]: fan out, choose the due deliveries, lease them.
pub(super) fn claim(
    connection: &Connection,
    claim: &DeliveryClaim,
    now: Timestamp,
) -> rusqlite::Result<Vec<ClaimedDelivery>> {
    let limit = i64::try_from(claim.limit).unwrap_or(i64::MAX);
    let mut due: Vec<(i64, i64)> = Vec::new();
    for endpoint in &claim.endpoints {
        connection
            .prepare_cached(
                "INSERT INTO deliveries (event_seq, endpoint, request_id, state, attempts, next_at, window_start)
                 SELECT seq, ?1, request_id, 'pending', 0, created_at, created_at FROM outbox
                 WHERE created_at >= ?2
                   AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = outbox.seq AND d.endpoint = ?1)
                 ORDER BY seq
                 ON CONFLICT (event_seq, endpoint) DO NOTHING",
            )?
            .execute(params![endpoint, millis(claim.since)])?;
        // INVARIANT (request-order): an earlier event of the same request still pending for
        // this endpoint holds the later ones back.
        let found = connection
            .prepare_cached(
                "SELECT d.id, d.event_seq FROM deliveries d
                 WHERE d.endpoint = ?1 AND d.state = 'pending' AND d.next_at <= ?2
                   AND (d.lease_until IS NULL OR d.lease_until <= ?2)
                   AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.endpoint = d.endpoint
                       AND e.request_id = d.request_id AND e.event_seq < d.event_seq AND e.state = 'pending')
                 ORDER BY d.event_seq LIMIT ?3",
            )?
            .query_map(params![endpoint, millis(now), limit], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        due.extend(found);
    }
    due.sort_by_key(|&(id, seq)| (seq, id));
    due.truncate(claim.limit);
    let lease_until = now.plus(claim.lease);
    let mut claimed = Vec::with_capacity(due.len());
    for (id, _) in due {
        connection
            .prepare_cached(
                "UPDATE deliveries SET lease_owner = ?2, lease_until = ?3 WHERE id = ?1",
            )?
            .execute(params![id, claim.owner, millis(lease_until)])?;
        let (delivery, body) = connection
            .prepare_cached(&format!(
                "SELECT {DELIVERY_COLUMNS}, o.body FROM deliveries d JOIN outbox o ON o.seq = d.event_seq WHERE d.id = ?1"
            ))?
            .query_row(params![id], |row| Ok((delivery_from_row(row)?, row.get(13)?)))?;
        claimed.push(ClaimedDelivery {
            delivery,
            body,
            lease_until,
        });
    }
    Ok(claimed)
}

/// [`crate::Store::settle_delivery`]: a compare-and-set on the lease's owner.
pub(super) fn settle(
    connection: &Connection,
    id: u64,
    owner: &str,
    settlement: &Settlement,
    now: Timestamp,
) -> rusqlite::Result<bool> {
    let id = i64::try_from(id).unwrap_or(i64::MAX);
    let (state, next_at, error, delivered_at, reference) = match settlement {
        Settlement::Delivered { reference } => (
            DeliveryState::Delivered,
            None,
            None,
            Some(millis(now)),
            reference.as_deref(),
        ),
        Settlement::Retry { at, error } => (
            DeliveryState::Pending,
            Some(millis(*at)),
            Some(error),
            None,
            None,
        ),
        Settlement::Failed { error } => (DeliveryState::Failed, None, Some(error), None, None),
    };
    let changed = connection
        .prepare_cached(
            "UPDATE deliveries SET state = ?3, attempts = attempts + 1, next_at = COALESCE(?4, next_at),
                 last_error = ?5, delivered_at = ?6, reference = ?7,
                 lease_owner = NULL, lease_until = NULL
             WHERE id = ?1 AND state = 'pending' AND lease_owner = ?2",
        )?
        .execute(params![id, owner, state.as_str(), next_at, error, delivered_at, reference])?;
    Ok(changed == 1)
}

/// [`crate::Store::deliveries`], newest first.
pub(super) fn deliveries(
    connection: &Connection,
    state: Option<DeliveryState>,
    limit: usize,
) -> rusqlite::Result<Vec<Delivery>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    connection
        .prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries d JOIN outbox o ON o.seq = d.event_seq
             WHERE (?1 IS NULL OR d.state = ?1) ORDER BY d.id DESC LIMIT ?2"
        ))?
        .query_map(
            params![state.map(DeliveryState::as_str), limit],
            delivery_from_row,
        )?
        .collect()
}

/// [`crate::Store::delivery_reference`].
pub(super) fn reference(
    connection: &Connection,
    request_id: &ApprovalId,
    endpoint: &str,
) -> rusqlite::Result<Option<String>> {
    connection
        .prepare_cached(
            "SELECT reference FROM deliveries WHERE request_id = ?1 AND endpoint = ?2 AND reference IS NOT NULL ORDER BY event_seq LIMIT 1",
        )?
        .query_row(params![request_id.as_str(), endpoint], |row| row.get(0))
        .optional()
}

/// [`crate::Store::redeliver`].
pub(super) fn redeliver(
    connection: &Connection,
    id: u64,
    now: Timestamp,
) -> rusqlite::Result<Option<Delivery>> {
    let id = i64::try_from(id).unwrap_or(i64::MAX);
    connection
        .prepare_cached(
            "UPDATE deliveries SET state = 'pending', next_at = ?2, window_start = ?2, lease_owner = NULL, lease_until = NULL WHERE id = ?1",
        )?
        .execute(params![id, millis(now)])?;
    connection
        .prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries d JOIN outbox o ON o.seq = d.event_seq WHERE d.id = ?1"
        ))?
        .query_row(params![id], delivery_from_row)
        .optional()
}

/// [`crate::Store::prune_outbox`].
pub(super) fn prune(connection: &Connection, before: Timestamp) -> rusqlite::Result<u64> {
    connection
        .prepare_cached(
            "DELETE FROM deliveries WHERE event_seq IN (SELECT seq FROM outbox WHERE created_at < ?1
                 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = outbox.seq AND d.state <> 'delivered'))",
        )?
        .execute(params![millis(before)])?;
    let gone = connection
        .prepare_cached(
            "DELETE FROM outbox WHERE created_at < ?1 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = outbox.seq)",
        )?
        .execute(params![millis(before)])?;
    Ok(gone as u64)
}
