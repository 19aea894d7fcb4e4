//! Taking it back through the service (issue #31): `POST /api/v1/approvals/{id}/revoke` and
//! `POST /api/v1/approvals/{id}/cancel`. The caller is the signed-in person, judged by the
//! kernel against the request's stored rule; the inbox's buttons come through
//! [`Service::withdraw_as`] too.

use countersign::approval::withdraw::{Withdrawal, WithdrawalKind};

use super::*;

/// `POST /api/v1/approvals/{id}/revoke`: `{note}` (optional, the reason). The signed-in caller
/// takes back a grant not yet used, or their counted yes from a pending quorum; judged by the
/// kernel (an approver who gave a yes, or an entitled resolver). A used grant is refused
/// `consumed` (409) and nothing changes.
pub(super) async fn revoke(
    State(service): State<Service>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    take_back(service, headers, path, body, Take::Revoke).await
}

/// `POST /api/v1/approvals/{id}/cancel`: `{note}` (optional, the reason). The signed-in caller
/// cancels a waiting (or granted, unused) request, which leaves every inbox; only the
/// request's resolvers may (the entry's `resolvers:`, by default its approvers), since the
/// service's callers are people, not the operator's deployment. Anyone else is refused
/// `not_entitled` (403) with a receipt; a cancelled request is returned unchanged.
pub(super) async fn cancel(
    State(service): State<Service>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    take_back(service, headers, path, body, Take::Cancel).await
}

/// Which way something is taken back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Revoke a grant, or withdraw a counted yes.
    Revoke,
    /// Cancel the request as one of its resolvers.
    Cancel,
}

async fn take_back(
    service: Service,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
    take: Take,
) -> Answer {
    let caller = service.caller(&headers, true)?;
    let request_id = request_id_in(path)?;
    let object = body_object(&headers, body, &["note"])?;
    let note = note_of(&object)?;
    let record = service.withdraw_as(&caller, request_id, take, note).await?;
    let mut scope = Scope::new(&caller, service.inner.clock.now());
    json(StatusCode::OK, &item(&record, &mut scope))
}

impl Service {
    /// Hand the kernel `caller`'s revocation or cancellation of `request_id` (channel
    /// `service`); the identity is the signed-in caller's credential, never anything submitted.
    ///
    /// # Errors
    ///
    /// The kernel's refusal (or the store's failure) as a [`Problem`].
    ///
    /// # Cancel safety
    ///
    /// One store transaction, or none.
    pub(crate) async fn withdraw_as(
        &self,
        caller: &Caller,
        request_id: ApprovalId,
        take: Take,
        note: Option<String>,
    ) -> Result<ApprovalRecord, Problem> {
        let store = self.store().await?;
        let kind = match take {
            Take::Revoke => WithdrawalKind::Revoke {
                approver: caller.credential.clone(),
                channel: Channel::Service,
            },
            Take::Cancel => WithdrawalKind::CancelAsResolver {
                resolver: caller.credential.clone(),
                channel: Channel::Service,
            },
        };
        let withdrawal = Withdrawal {
            request_id,
            kind,
            reason: note,
        };
        store
            .withdraw_approval(withdrawal, self.inner.clock.now())
            .await
            .map_err(|error| Problem::from_answer(&error))
    }
}
