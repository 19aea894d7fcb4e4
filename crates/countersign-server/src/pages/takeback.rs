//! `POST /requests/{id}/take-back` (issue #31): the request page's "Take back my approval"
//! and "Cancel this request" buttons, through the same [`Service::withdraw_as`] as the JSON
//! API; who is the signed-in person, never a form field.

use super::forms::{RequestForm, form_note};
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
    let form =
        match service.request_form(&headers, path, &body, &["csrf", "take", "note", "confirm"]) {
            Ok(form) => form,
            Err(refused) => return *refused,
        };
    let RequestForm {
        fields,
        viewer,
        id,
        request_id,
    } = form;
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
    if fields.get("confirm").map(String::as_str) != Some("yes") {
        let problem = Problem::invalid_body(
            "a take-back cannot be undone, so it needs the box \"Yes, take it back\" ticked as well as the button: tick it and press the button again",
        );
        return request_with_refusal(&service, &viewer, &id, problem, NOT_TAKEN_BACK).await;
    }
    let note = match form_note(&fields) {
        Ok(note) => note,
        Err(problem) => {
            return request_with_refusal(&service, &viewer, &id, problem, NOT_TAKEN_BACK).await;
        }
    };
    match service
        .withdraw_as(&viewer.caller, request_id.clone(), take, note)
        .await
    {
        Ok(_) => see_other(&format!("/requests/{request_id}?taken=1")),
        Err(problem) => request_with_refusal(&service, &viewer, &id, problem, NOT_TAKEN_BACK).await,
    }
}
