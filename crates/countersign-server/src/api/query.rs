//! What every route refuses in a query, before any route reads it.

use axum::http::{Method, StatusCode, Uri};

use crate::problem::Problem;

/// The refusal of a request's query, if it has one no route should read: any query on a route
/// that writes (every `POST`: `?approver=` or `?as=` would otherwise be ignored, and the
/// signed-in person answers), or a parameter given twice (a route's reader would silently keep
/// one of the values: `?state=pending&state=all`). `400 invalid_query`.
pub(super) fn refusal(method: &Method, uri: &Uri) -> Option<Problem> {
    let invalid = |detail: String| Problem::new(StatusCode::BAD_REQUEST, "invalid_query", detail);
    if *method == Method::POST && uri.query().is_some_and(|query| !query.is_empty()) {
        return Some(invalid(
            "this route takes no query parameters: send what it takes in the body; there is no parameter that names who answers, the signed-in person does".to_owned(),
        ));
    }
    repeated_key(uri).map(|name| {
        invalid(format!(
            "the query gives `{}` more than once, so which value was meant is unknown: give each query parameter once",
            name.escape_debug()
        ))
    })
}

/// The first query parameter `uri` gives more than once, if any.
fn repeated_key(uri: &Uri) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    form_urlencoded::parse(uri.query()?.as_bytes())
        .map(|(name, _)| name.into_owned())
        .find(|name| !seen.insert(name.clone()))
}
