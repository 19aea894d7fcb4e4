//! The layers every request passes, outside the routes: the request log (every request, one
//! line), the tracking of routed calls (a revoked token, a query no route reads, a body too
//! large for the route, the metrics), and the answers for no route and the wrong method.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{MAX_BODY, query};
use crate::problem::Problem;
use crate::{Service, browser};

/// Write the request log's line for every request, when the log is on
/// ([`Service::with_request_log`]): method, path (tokens redacted, at most 200 characters,
/// hidden characters escaped), status, the refusal's reason code, and the time taken.
pub(super) async fn log_request(
    State(service): State<Service>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if !service
        .inner
        .request_log
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return next.run(request).await;
    }
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let reason = response
        .extensions()
        .get::<crate::problem::LoggedReason>()
        .map_or_else(String::new, |logged| format!(" {}", logged.0));
    // Redacted before it is cut: a token cut short would no longer look like one.
    let path: String = crate::redact_tokens(&path).chars().take(200).collect();
    let line = format!(
        "countersign serve: {method} {} -> {}{reason} ({} ms)",
        countersign::evidence::printable(&path),
        response.status().as_u16(),
        started.elapsed().as_millis()
    );
    #[cfg(test)]
    if let Ok(mut logged) = service.inner.logged.lock() {
        logged.push(line);
        return response;
    }
    countersign::stderr_line!("{line}");
    response
}

/// Count every routed call by its route template and status, after refusing a revoked token
/// and a query no route reads, and answering a body too large for the route like any refusal.
pub(super) async fn track(
    State(service): State<Service>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let started = std::time::Instant::now();
    // Issue #31: an approver token on the store's deny-list signs in nowhere, by header or by
    // the browser session it opened. Answers are also refused inside their own transaction.
    let response = match revoked_token(&service, request.headers()).await {
        Ok(None) if let Some(problem) = query::refusal(request.method(), request.uri()) => {
            problem.into_response()
        }
        Ok(None) => next.run(request).await,
        // A browser whose session holds the revoked token is signed out, not locked out: the
        // session ends, the sign-in form works, and every other page shows that form with why.
        Ok(Some(Revoked {
            problem,
            session: Some(id),
        })) => {
            service.inner.sessions.close(&id);
            let path = request.uri().path();
            if path == "/signin" {
                next.run(request).await
            } else if path.starts_with("/api/") {
                browser::clear_session_cookie(&service, problem.into_response())
            } else {
                browser::clear_session_cookie(
                    &service,
                    browser::signin_page(&service, problem.status, Some(&problem), false),
                )
            }
        }
        Ok(Some(Revoked { problem, .. })) | Err(problem) => problem.into_response(),
    };
    // axum refuses a body past `MAX_BODY` with a bare `413` in plain text, before the handler
    // runs: answer it the way every other refusal is answered.
    let response = if response.status() == StatusCode::PAYLOAD_TOO_LARGE
        && response
            .extensions()
            .get::<crate::problem::LoggedReason>()
            .is_none()
    {
        body_too_large(&service, &path)
    } else {
        response
    };
    service.inner.metrics.record_request(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// `413 body_too_large` for a request to `path`: problem details for the API (and Slack);
/// for the inbox's forms an HTML page saying the form was too large and what to do (the
/// sign-in form again, for a sign-in).
pub(super) fn body_too_large(service: &Service, path: &str) -> Response {
    if path.starts_with("/api/") || path.starts_with("/slack/") {
        return Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body is larger than {MAX_BODY} bytes: send at most {MAX_BODY} bytes"),
        )
        .into_response();
    }
    if path == "/signin" {
        let problem = Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "the sign-in form was larger than {} KiB, the most this service reads: paste only the approver token (a few hundred characters) and sign in again",
                MAX_BODY / 1024
            ),
        );
        return browser::signin_page(service, problem.status, Some(&problem), false);
    }
    let problem = Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!(
            "the form was larger than {} KiB, the most this service reads, so nothing was done: go back, shorten what you typed (a note holds at most 4,096 bytes) and send it again",
            MAX_BODY / 1024
        ),
    );
    crate::problem::LoggedReason::mark(
        &problem,
        crate::pages::html(
            problem.status,
            crate::pages::views::problem(None, &problem),
            &[],
        ),
    )
}

/// A request presenting a revoked approver token: the refusal, and the browser session that
/// presented it (`None` for an `Authorization` header).
struct Revoked {
    problem: Problem,
    session: Option<String>,
}

/// The refusal for a request presenting a revoked approver token, if it does (issue #31).
/// Reading the deny-list fails closed: a store that cannot be read refuses the call.
async fn revoked_token(service: &Service, headers: &HeaderMap) -> Result<Option<Revoked>, Problem> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(|token| (token.trim().to_owned(), None));
    let presented = bearer.or_else(|| {
        let id = browser::cookie(headers, browser::SESSION_COOKIE)?;
        let session = service.inner.sessions.find(id, service.inner.clock.now())?;
        Some((session.token, Some(id.to_owned())))
    });
    let Some((jti, session)) = presented.and_then(|(token, session)| {
        countersign::token::unverified_jti(&token).map(|jti| (jti, session))
    }) else {
        return Ok(None);
    };
    let store = service.store().await?;
    if store
        .token_revoked(&jti)
        .await
        .map_err(|error| Problem::from_store(&error))?
    {
        return Ok(Some(Revoked {
            problem: Problem::not_authenticated(format!(
                "the approver token `{jti}` was revoked (`countersign approver revoke`): ask for a new one"
            ))
            .with("token_reason", "revoked"),
            session,
        }));
    }
    Ok(None)
}

/// No route: a browser asking for a page gets an HTML page that leads back to the inbox; an API
/// client (anything under `/api/`, or not asking for HTML) gets the JSON problem.
pub(super) async fn not_found(uri: axum::http::Uri, headers: HeaderMap) -> Response {
    let wants_page = !uri.path().starts_with("/api/")
        && headers
            .get(header::ACCEPT)
            .and_then(|accept| accept.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html"));
    if wants_page {
        let problem = Problem::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "there is no page at `{}`: the approvals waiting for you are in the inbox",
                uri.path().escape_debug()
            ),
        );
        return crate::problem::LoggedReason::mark(
            &problem,
            crate::pages::html(
                StatusCode::NOT_FOUND,
                crate::pages::views::problem(None, &problem),
                &[],
            ),
        );
    }
    Problem::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route: the API lives under `/api/v1/` (see docs/approval-service.openapi.yaml)",
    )
    .into_response()
}

pub(super) async fn method_not_allowed() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method (see docs/approval-service.openapi.yaml)",
    )
}
