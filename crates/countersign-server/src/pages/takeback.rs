//! `POST /requests/{id}/take-back` (issue #31): the request page's "Take back my approval"
//! and "Cancel this request" buttons, through the same [`Service::withdraw_as`] as the JSON
//! API; who is the signed-in person, never a form field.

use super::*;
use crate::api::Take;

/// The refusal banner's heading for a revocation or cancellation.
const NOT_TAKEN_BACK: &str = "Nothing was taken back.";

/// The form's `take` (`revoke` or `cancel`) and `note`, from the signed-in person.
pub(super) async fn take_back(
    State(service): State<Service>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Response {
    let fields = match browser::form_fields(&headers, &body) {
        Ok(fields) => fields,
        Err(problem) => return service.refused_page(None, problem, false),
    };
    let viewer = match service.poster(&headers, &fields) {
        Ok(viewer) => viewer,
        Err(problem) => return service.refused_page(None, problem, false),
    };
    let id = path.map(|Path(id)| id).unwrap_or_default();
    let Ok(request_id) = ApprovalId::parse(&id) else {
        return service.refused_page(Some(&viewer), unknown_request(&id), false);
    };
    let take = match fields.get("take").map(String::as_str) {
        Some("revoke") => Take::Revoke,
        Some("cancel") => Take::Cancel,
        other => {
            let problem = Problem::invalid_body(format!(
                "`take` must be `revoke` or `cancel`, not {}: use the page's buttons",
                other.map_or_else(
                    || "nothing".to_owned(),
                    |text| format!("`{}`", text.escape_debug())
                )
            ));
            return request_with_refusal(&service, &viewer, &id, problem, NOT_TAKEN_BACK).await;
        }
    };
    let note = fields
        .get("note")
        .map(|note| note.trim().to_owned())
        .filter(|note| !note.is_empty());
    if note.as_ref().is_some_and(|note| note.len() > MAX_NOTE) {
        let problem = Problem::invalid_body(format!("the note is longer than {MAX_NOTE} bytes"));
        return request_with_refusal(&service, &viewer, &id, problem, NOT_TAKEN_BACK).await;
    }
    match service
        .withdraw_as(&viewer.caller, request_id.clone(), take, note)
        .await
    {
        Ok(_) => see_other(&format!("/requests/{request_id}?taken=1")),
        Err(problem) => request_with_refusal(&service, &viewer, &id, problem, NOT_TAKEN_BACK).await,
    }
}
