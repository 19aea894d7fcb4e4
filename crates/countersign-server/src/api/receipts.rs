//! The receipts route: a page of the receipt chain, filtered to what the caller may see.

use super::*;

/// `GET /api/v1/receipts`: in log order (SPEC 1.5); the opaque `cursor` is the last place in
/// the log seen (a receipt's `seq` in a store of one lane).
pub(super) async fn list_receipts(
    State(service): State<Service>,
    headers: HeaderMap,
    query: Result<Query<BTreeMap<String, String>>, QueryRejection>,
) -> Answer {
    let caller = service.caller(&headers, false)?;
    let listing = listing(query, false)?;
    let after_position: u64 = match &listing.cursor {
        None => 0,
        Some(cursor) => decode_cursor(cursor)?
            .parse()
            .map_err(|_| invalid_cursor())?,
    };
    let (items, next_cursor) = service
        .visible_receipts(&caller, after_position, listing.limit)
        .await?;
    json(
        StatusCode::OK,
        &Page {
            items,
            next_cursor: next_cursor.map(|seq| encode_cursor(&seq.to_string())),
        },
    )
}

impl Service {
    /// The receipts `caller` may read after place `after_position` in the log, in log order, at
    /// most `limit`; and the place to continue after when there may be more (at most
    /// [`RECEIPT_SCAN`] receipts are read per call).
    ///
    /// # Errors
    ///
    /// The store's failure as a [`Problem`].
    ///
    /// # Cancel safety
    ///
    /// Read-only.
    pub(crate) async fn visible_receipts(
        &self,
        caller: &Caller,
        mut after_position: u64,
        limit: usize,
    ) -> Result<(Vec<Receipt>, Option<u64>), Problem> {
        let store = self.store().await?;
        let mut scope = Scope::new(caller, self.inner.clock.now());
        let mut approvals: HashMap<String, bool> = HashMap::new();
        let mut effects: HashMap<String, bool> = HashMap::new();
        let mut rules = HashMap::new();
        let mut items: Vec<Receipt> = Vec::new();
        let mut scanned = 0usize;
        let batch = 256;
        let next_cursor = 'scan: loop {
            let stored = store
                .receipts(after_position, batch)
                .await
                .map_err(|error| Problem::from_store(&error))?;
            let exhausted = stored.len() < batch;
            for row in stored {
                scanned += 1;
                after_position = row.position;
                let receipt = row.to_receipt().map_err(|detail| {
                    Problem::from_store(&countersign::StoreError::Corrupt { detail })
                })?;
                let visible = if caller.auditor {
                    true
                } else if let Some(approval_id) = &receipt.approval_id {
                    match approvals.get(approval_id.as_str()) {
                        Some(visible) => *visible,
                        None => {
                            let visible = match ApprovalId::parse(approval_id) {
                                Ok(id) => store
                                    .approval(&id)
                                    .await
                                    .map_err(|error| Problem::from_store(&error))?
                                    .is_some_and(|record| scope.sees(&record)),
                                Err(_) => false,
                            };
                            approvals.insert(approval_id.to_string(), visible);
                            visible
                        }
                    }
                } else if let Some(key) = &receipt.effect_key {
                    match effects.get(key.as_str()) {
                        Some(visible) => *visible,
                        None => {
                            let record = match EffectKey::new(key.as_str()) {
                                Ok(key) => store
                                    .effect(&key)
                                    .await
                                    .map_err(|error| Problem::from_store(&error))?,
                                Err(_) => None,
                            };
                            let visible = match record {
                                Some(record) => {
                                    let rule =
                                        effect_rule(store.as_ref(), &record, &mut rules).await?;
                                    sees_effect(&mut scope, rule.as_ref())
                                }
                                None => false,
                            };
                            effects.insert(key.to_string(), visible);
                            visible
                        }
                    }
                } else {
                    // Neither a request nor an effect: policy decisions and plain attempts are for
                    // auditors.
                    false
                };
                if visible {
                    items.push(receipt);
                    if items.len() == limit {
                        break 'scan Some(after_position);
                    }
                }
                if scanned >= RECEIPT_SCAN {
                    break 'scan Some(after_position);
                }
            }
            if exhausted {
                break None;
            }
        };
        Ok((items, next_cursor))
    }
}
