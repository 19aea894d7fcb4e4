//! [`Unsealed`]: a plan's receipts and reply, sealed onto the chain head after its row writes
//! are applied, so a backend locks the head last (issue #21).

use super::*;

/// The receipts and reply of a [`Plan`] whose writes were taken out ([`Plan::split`]).
#[derive(Debug)]
pub(crate) struct Unsealed {
    pub(super) receipts: Vec<ReceiptDraft>,
    pub(super) reply: Reply,
    pub(super) now: Timestamp,
}

impl Unsealed {
    /// Does it append receipts (so the backend must read, and lock, the chain head)?
    pub(crate) fn has_receipts(&self) -> bool {
        !self.receipts.is_empty()
    }

    /// [`Plan::seal`] for the receipts alone (same errors): their rows, and the result.
    pub(crate) fn seal(self, head: Option<ChainHead>) -> Result<Sealing, StoreError> {
        self.seal_in_lane(0, head)
    }

    /// [`Unsealed::seal`] onto `head`, the head of lane `lane` ([`evidence::seal_in_lane`]).
    pub(crate) fn seal_in_lane(
        self,
        lane: u32,
        head: Option<ChainHead>,
    ) -> Result<Sealing, StoreError> {
        let mut head = head;
        let mut stored = Vec::with_capacity(self.receipts.len());
        let mut last = None;
        for draft in self.receipts {
            let (receipt, row) = evidence::seal_in_lane(lane, draft, head.as_ref(), self.now)
                .map_err(|error| StoreError::Corrupt {
                    detail: format!("unsealable receipt: {error}"),
                })?;
            head = Some(ChainHead {
                seq: row.seq,
                hash: row.hash.clone(),
            });
            stored.push(row);
            last = Some(receipt);
        }
        let receipt = || {
            last.ok_or_else(|| StoreError::Internal {
                detail: "a plan replied with a receipt it did not write".to_owned(),
            })
        };
        let done = match self.reply {
            Reply::Ready(done) => done,
            Reply::BeginRefused(refusal) => Done::Begun(BeginOutcome::Refused {
                refusal,
                receipt: Box::new(receipt()?),
            }),
            Reply::HandOffRefused(refusal) => Done::HandedOff(HandOffOutcome::Refused {
                refusal,
                receipt: Box::new(receipt()?),
            }),
            Reply::HandedOff(approval) => Done::HandedOff(HandOffOutcome::HandedOff {
                approval,
                receipt: Box::new(receipt()?),
            }),
            Reply::Receipt => Done::Receipt(Box::new(receipt()?)),
        };
        Ok((stored, done))
    }
}
