//! The forms posted about one request: how the inbox reads them (who posted, the request id,
//! the note), and `POST /requests/{id}/answer`. The take-back form is `takeback`'s.

use super::*;

/// A form posted about one request: its fields, who posted it (signed in, same origin, CSRF
/// checked), and the request id from the path.
pub(super) struct RequestForm {
    pub fields: HashMap<String, String>,
    pub viewer: Viewer,
    pub id: String,
    pub request_id: ApprovalId,
}

impl Service {
    /// Read a form posted to `/requests/{id}/…` with only the `allowed` fields; the refusal
    /// page when it is not one.
    pub(super) fn request_form(
        &self,
        headers: &HeaderMap,
        path: Result<Path<String>, PathRejection>,
        body: &Bytes,
        allowed: &[&str],
    ) -> Result<RequestForm, Box<Response>> {
        let fields = browser::any_form_fields(headers, body)
            .map_err(|problem| Box::new(self.refused_page(None, problem, false)))?;
        let viewer = self
            .poster(headers, &fields)
            .map_err(|problem| Box::new(self.refused_page(None, problem, false)))?;
        browser::only_fields(&fields, allowed)
            .map_err(|problem| Box::new(self.refused_page(Some(&viewer), problem, false)))?;
        let id = path.map(|Path(id)| id).unwrap_or_default();
        let Ok(request_id) = ApprovalId::parse(&id) else {
            return Err(Box::new(self.refused_page(
                Some(&viewer),
                unknown_request(&id),
                false,
            )));
        };
        Ok(RequestForm {
            fields,
            viewer,
            id,
            request_id,
        })
    }
}

/// The form's `note`, trimmed (`None` when empty); refused `note_too_long` past the kernel's
/// limit ([`Problem::check_note`]).
pub(super) fn form_note(fields: &HashMap<String, String>) -> Result<Option<String>, Problem> {
    let note = fields
        .get("note")
        .map(|note| note.trim().to_owned())
        .filter(|note| !note.is_empty());
    Problem::check_note(note.as_deref())?;
    Ok(note)
}

/// `POST /requests/{id}/answer`: the form's `decision`, `action_hash` and `note`, from the
/// signed-in person, through the kernel.
pub(super) async fn answer(
    State(service): State<Service>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Response {
    let form = match service.request_form(
        &headers,
        path,
        &body,
        &["csrf", "decision", "action_hash", "note"],
    ) {
        Ok(form) => form,
        Err(refused) => return *refused,
    };
    let RequestForm {
        fields,
        viewer,
        id,
        request_id,
    } = form;
    // Strictly as the API reads it: only `approve`, `deny` and `reject` are decisions.
    let decision = AnswerDecision::from_submitted(
        fields
            .get("decision")
            .map(|text| serde_json::Value::String(text.clone()))
            .as_ref(),
    );
    // The hash the page showed, echoed as given: anything else is refused `mismatch`.
    let shown_hash = fields
        .get("action_hash")
        .map(|text| ActionHash::from_stored(text.trim().to_owned()));
    let note = match form_note(&fields) {
        Ok(note) => note,
        Err(problem) => {
            return request_with_refusal(&service, &viewer, &id, problem, NOT_COUNTED).await;
        }
    };
    // An identical repeat of the viewer's own answer succeeds and writes nothing (case B30):
    // the record before and after tell the page to say so rather than repeat the banner.
    let before = match service.store().await {
        Ok(store) => store.approval(&request_id).await.ok().flatten(),
        Err(_) => None,
    };
    match service
        .answer_as(
            &viewer.caller,
            request_id.clone(),
            decision,
            shown_hash,
            note,
        )
        .await
    {
        Ok(after) if before.as_ref() == Some(&after) => {
            see_other(&format!("/requests/{request_id}?answered=again"))
        }
        Ok(_) => see_other(&format!("/requests/{request_id}?answered=1")),
        Err(problem) => request_with_refusal(&service, &viewer, &id, problem, NOT_COUNTED).await,
    }
}
