//! Browser sign-in: the form, its CSRF checks, the session cookie, and the session's own CSRF
//! header on calls that change something.

use serde_json::json;

use super::support::{Backend, Harness, Options, read};

/// The `name=value` of the `Set-Cookie` for `name`, with its attributes.
fn set_cookie(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no `{name}` cookie set"))
        .to_owned()
}

fn value_of(set_cookie: &str) -> String {
    set_cookie
        .split(';')
        .next()
        .and_then(|pair| pair.split_once('='))
        .map(|(_, value)| value.to_owned())
        .expect("a cookie value")
}

/// The `Set-Cookie` for `name`, if the response sets it.
fn set_cookie_named(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// The status and HTML of a page; asserts the headers every page carries.
async fn html_page(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(
        headers["content-security-policy"],
        countersign_server::pages::CONTENT_SECURITY_POLICY
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "same-origin");
    (status, response.text().await.expect("html"))
}

/// The hidden `csrf` field of a page.
fn hidden_csrf(page: &str) -> String {
    let start = page.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    page[start..].split('"').next().expect("a value").to_owned()
}

#[tokio::test]
async fn a_token_signs_a_browser_in_behind_csrf_checks() {
    let harness = Harness::start(Backend::Sqlite, "browser", Options::default()).await;
    let (id, hash) = harness
        .ask("finance.small", serde_json::json!({"payment_id": "pi_web"}))
        .await;
    let alice = harness.token("human:alice", &[]);

    let form = harness
        .client
        .get(harness.url("/signin"))
        .send()
        .await
        .expect("form");
    assert_eq!(form.status(), 200);
    let csrf_cookie = set_cookie(&form, "countersign_csrf");
    assert!(csrf_cookie.contains("HttpOnly") && csrf_cookie.contains("SameSite=Strict"));
    let csrf = value_of(&csrf_cookie);
    let page = form.text().await.expect("html");
    assert_eq!(hidden_csrf(&page), csrf);

    let post = |cookie: Option<String>,
                fields: Vec<(&'static str, String)>,
                origin: Option<&'static str>| {
        let mut request = harness.client.post(harness.url("/signin")).form(&fields);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    // No cookie, a wrong value, another site: refused, and no session.
    for (cookie, given, origin) in [
        (None, csrf.clone(), None),
        (
            Some(format!("countersign_csrf={csrf}")),
            "forged".to_owned(),
            None,
        ),
        (
            Some(format!("countersign_csrf={csrf}")),
            csrf.clone(),
            Some("https://evil.example"),
        ),
    ] {
        let response = post(
            cookie,
            vec![("csrf", given), ("token", alice.clone())],
            origin,
        )
        .await
        .expect("answer");
        assert!(
            set_cookie_named(&response, "countersign_session").is_none(),
            "no session"
        );
        let (status, page) = html_page(response).await;
        assert_eq!(status, 403, "{page}");
        assert!(page.contains("<code>csrf</code>"), "{page}");
    }
    // A bad token with a good form: 401.
    let response = post(
        Some(format!("countersign_csrf={csrf}")),
        vec![("csrf", csrf.clone()), ("token", "nope".to_owned())],
        None,
    )
    .await
    .expect("answer");
    let (status, page) = html_page(response).await;
    assert_eq!(status, 401, "{page}");
    assert!(page.contains("<code>not_authenticated</code>"), "{page}");

    // The real thing, from our own origin.
    let origin = harness.base.clone();
    let no_redirects = countersign_http::client_builder(&countersign_http::Trust::nothing())
        .expect("an HTTP client builder")
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let response = no_redirects
        .post(harness.url("/signin"))
        .header("cookie", format!("countersign_csrf={csrf}"))
        .header("origin", origin)
        .form(&[("csrf", csrf.as_str()), ("token", alice.as_str())])
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 303, "signed in: to the inbox");
    assert_eq!(response.headers()["location"], "/inbox");
    let session_cookie = set_cookie(&response, "countersign_session");
    assert!(session_cookie.contains("HttpOnly"), "{session_cookie}");
    assert!(session_cookie.contains("SameSite=Lax"), "{session_cookie}");
    assert!(
        !session_cookie.contains(&alice),
        "the cookie is not the token"
    );
    let session = format!("countersign_session={}", value_of(&session_cookie));
    let inbox = harness
        .client
        .get(harness.url("/inbox"))
        .header("cookie", &session)
        .send()
        .await
        .expect("the inbox");
    let (status, page) = html_page(inbox).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("human:alice"));
    let session_csrf = hidden_csrf(&page);

    // The session reads the API…
    let response = harness
        .client
        .get(harness.url("/api/v1/approvals"))
        .header("cookie", &session)
        .send()
        .await
        .expect("answer");
    let (status, listing) = read(response).await;
    assert_eq!(status, 200);
    assert_eq!(listing["items"][0]["id"], id.as_str());
    // …but changes nothing without its CSRF header.
    let answer = |csrf: Option<&str>| {
        let mut request = harness
            .client
            .post(harness.url(&format!("/api/v1/approvals/{id}/answer")))
            .header("cookie", &session)
            .json(&json!({"decision": "approve", "action_hash": hash.as_str()}));
        if let Some(csrf) = csrf {
            request = request.header("x-countersign-csrf", csrf);
        }
        request.send()
    };
    let (status, problem) = read(answer(None).await.expect("answer")).await;
    assert_eq!((status, problem["reason"].as_str()), (403, Some("csrf")));
    let (status, problem) = read(answer(Some(&csrf)).await.expect("answer")).await;
    assert_eq!(
        (status, problem["reason"].as_str()),
        (403, Some("csrf")),
        "the form's value is not the session's"
    );
    let (status, record) = read(answer(Some(&session_csrf)).await.expect("answer")).await;
    assert_eq!(
        (status, record["state"].as_str()),
        (200, Some("granted")),
        "{record}"
    );
    assert_eq!(record["answers"][0]["approver"]["authentication"], "token");

    // Sign out ends it.
    let response = harness
        .client
        .post(harness.url("/signout"))
        .header("cookie", &session)
        .form(&[("csrf", session_csrf.as_str())])
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    let response = harness
        .client
        .get(harness.url("/api/v1/approvals"))
        .header("cookie", &session)
        .send()
        .await
        .expect("answer");
    let (status, _) = read(response).await;
    assert_eq!(status, 401);
    harness.stop().await;
}
