//! The inbox's pages over HTTP (no browser): the headers every HTML response carries, answers
//! and resolutions through the forms on both stores, and the receipts page's chain status.

use std::sync::Arc;

use countersign::approval::AnswerDecision;
use countersign::{ActionRequest, ApprovalState, Clock, EffectKey, EffectState, ExecutorError};
use countersign_server::chain::ChainStatus;
use countersign_server::{Service, ServiceConfig, SignIn, StoreSource};
use serde_json::json;

use super::support::{Backend, Harness, Options, on_both_stores, serve};

/// The exact header the issue asks of every HTML response.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn client() -> reqwest::Client {
    countersign_http::client_builder(&countersign_http::Trust::nothing())
        .expect("an HTTP client builder")
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client")
}

fn cookie_value(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| value.strip_prefix(&format!("{name}=")))
        .and_then(|value| value.split(';').next())
        .map(str::to_owned)
}

/// The status and HTML of a page; asserts the headers every HTML response carries.
async fn page(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let url = response.url().to_string();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8", "{url}");
    assert_eq!(headers["content-security-policy"], CSP, "{url}");
    assert_eq!(headers["x-content-type-options"], "nosniff", "{url}");
    assert_eq!(headers["referrer-policy"], "same-origin", "{url}");
    assert_eq!(headers["cache-control"], "no-store", "{url}");
    (status, response.text().await.expect("html"))
}

/// The value of the hidden field `name` in the first form that has one.
fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no `{name}` field"))
        + marker.len();
    html[start..].split('"').next().expect("a value").to_owned()
}

/// Sign in through the form; the session cookie (`countersign_session=…`).
async fn sign_in(harness: &Harness, token: &str) -> String {
    let client = client();
    let form = client
        .get(harness.url("/signin"))
        .send()
        .await
        .expect("the form");
    let csrf = cookie_value(&form, "countersign_csrf").expect("a csrf cookie");
    let (status, _) = page(form).await;
    assert_eq!(status, 200);
    let response = client
        .post(harness.url("/signin"))
        .header("cookie", format!("countersign_csrf={csrf}"))
        .form(&[("csrf", csrf.as_str()), ("token", token)])
        .send()
        .await
        .expect("signed in");
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/inbox");
    format!(
        "countersign_session={}",
        cookie_value(&response, "countersign_session").expect("a session")
    )
}

async fn get(harness: &Harness, path: &str, session: &str) -> (u16, String) {
    page(
        client()
            .get(harness.url(path))
            .header("cookie", session)
            .send()
            .await
            .expect("an answer"),
    )
    .await
}

async fn post_form(
    harness: &Harness,
    path: &str,
    session: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    client()
        .post(harness.url(path))
        .header("cookie", session)
        .form(fields)
        .send()
        .await
        .expect("an answer")
}

/// Pages are never cached; the static files, which hold no data, may be for five minutes.
#[tokio::test]
async fn only_the_static_files_may_be_cached() {
    let harness = Harness::start(Backend::Sqlite, "pages_cache", Options::default()).await;
    for path in ["/static/inbox.css", "/static/inbox.js"] {
        let response = client()
            .get(harness.url(path))
            .send()
            .await
            .expect("an answer");
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.headers()["cache-control"],
            "public, max-age=300",
            "{path}"
        );
    }
    let (status, _) = harness.get("/api/v1/health", None).await;
    assert_eq!(status, 200);
    let response = client()
        .get(harness.url("/api/v1/health"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.headers()["cache-control"], "no-store");
    harness.stop().await;
}

#[tokio::test]
async fn every_html_response_carries_the_security_headers() {
    let harness = Harness::start(Backend::Sqlite, "pages_headers", Options::default()).await;
    let (id, _) = harness
        .ask("finance.small", json!({"payment_id": "pi_h"}))
        .await;
    let session = sign_in(&harness, &harness.token("human:alice", &[])).await;
    for path in [
        "/inbox".to_owned(),
        format!("/requests/{id}"),
        "/requests/apr_aaaaaaaaaaaaaaaaaaaa".to_owned(),
        "/history".to_owned(),
        "/receipts".to_owned(),
        "/effects".to_owned(),
        "/signin".to_owned(),
    ] {
        let (status, html) = get(&harness, &path, &session).await;
        assert!(status == 200 || status == 404, "{path}: {status}");
        assert!(html.starts_with("<!DOCTYPE html>"), "{path}");
        assert!(!html.contains("style=\""), "{path}: no inline style");
        assert!(!html.contains("<script>"), "{path}: no inline script");
    }
    // A refusal is a page too, with the same headers.
    let (status, html) = page(
        post_form(
            &harness,
            &format!("/requests/{id}/answer"),
            &session,
            &[("decision", "approve")],
        )
        .await,
    )
    .await;
    assert_eq!(status, 403);
    assert!(html.contains("<code>csrf</code>"), "{html}");
    // A form from another site is refused before anyone is looked up; the page leads back to
    // the inbox, not to a sign-in the user already has.
    let (status, html) = page(
        client()
            .post(harness.url(&format!("/requests/{id}/answer")))
            .header("cookie", &session)
            .header("origin", "https://elsewhere.example")
            .form(&[("decision", "approve")])
            .send()
            .await
            .expect("an answer"),
    )
    .await;
    assert_eq!(status, 403);
    assert!(html.contains("another site"), "{html}");
    assert!(html.contains("href=\"/inbox\""), "{html}");
    assert!(!html.contains(">Sign in<"), "{html}");
    // A page that does not exist is a page too, leading to the inbox; the API keeps its JSON.
    let (status, html) = page(
        client()
            .get(harness.url("/inbx"))
            .header("accept", "text/html,application/xhtml+xml")
            .send()
            .await
            .expect("an answer"),
    )
    .await;
    assert_eq!(status, 404);
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.contains("no page at <code>/inbx</code>"), "{html}");
    assert!(html.contains("href=\"/inbox\""), "{html}");
    let response = client()
        .get(harness.url("/api/v1/nope"))
        .header("accept", "text/html")
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), 404);
    let problem: serde_json::Value = response.json().await.expect("a JSON problem");
    assert_eq!(problem["reason"], "not_found", "{problem}");
    // Signed out, a page sends the browser to the sign-in form.
    let response = client()
        .get(harness.url("/inbox"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/signin");
    // The script and the style sheet are files.
    for (path, media) in [
        ("/static/inbox.js", "text/javascript; charset=utf-8"),
        ("/static/inbox.css", "text/css; charset=utf-8"),
    ] {
        let response = client()
            .get(harness.url(path))
            .send()
            .await
            .expect("a file");
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], media);
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    }
    harness.stop().await;
}

async fn answers_from_the_page_go_through_the_kernel(backend: Backend, case: &str) {
    let harness = Harness::start(backend, case, Options::default()).await;
    let (id, hash) = harness
        .ask(
            "finance.refund",
            json!({"payment_id": "pi_form", "amount": 70_000}),
        )
        .await;
    let session = sign_in(&harness, &harness.token("human:alice", &[])).await;
    let (status, html) = get(&harness, &format!("/requests/{id}"), &session).await;
    assert_eq!(status, 200);
    let csrf = hidden(&html, "csrf");
    assert_eq!(
        hidden(&html, "action_hash"),
        hash.as_str(),
        "the page posts the hash it shows"
    );
    let path = format!("/requests/{id}/answer");

    // Another hash, or none: refused on the page, nothing counted.
    let other = format!("sha256:{}", "0".repeat(64));
    for fields in [
        vec![
            ("csrf", csrf.as_str()),
            ("decision", "approve"),
            ("action_hash", other.as_str()),
        ],
        vec![("csrf", csrf.as_str()), ("decision", "approve")],
    ] {
        let (status, html) = page(post_form(&harness, &path, &session, &fields).await).await;
        assert_eq!(status, 409, "{html}");
        assert!(html.contains("Your answer was not counted"), "{html}");
        assert!(html.contains("<code>mismatch</code>"), "{html}");
    }
    // A decision that is not one: refused.
    let (status, html) = page(
        post_form(
            &harness,
            &path,
            &session,
            &[
                ("csrf", &csrf),
                ("decision", "yes"),
                ("action_hash", hash.as_str()),
            ],
        )
        .await,
    )
    .await;
    assert_eq!(status, 422, "{html}");
    // A field naming someone else is refused, as the API refuses it, and nothing is counted
    // (it was ignored): the approver is the signed-in person.
    let (status, html) = page(
        post_form(
            &harness,
            &path,
            &session,
            &[
                ("csrf", &csrf),
                ("decision", "approve"),
                ("action_hash", hash.as_str()),
                ("approver", "human:bob"),
            ],
        )
        .await,
    )
    .await;
    assert_eq!(status, 422, "{html}");
    assert!(html.contains("<code>approver</code>"), "{html}");
    let counted = harness
        .store
        .approval(&id)
        .await
        .expect("read")
        .expect("stored");
    assert!(counted.answers.is_empty(), "{counted:?}");
    let response = post_form(
        &harness,
        &path,
        &session,
        &[
            ("csrf", &csrf),
            ("decision", "approve"),
            ("action_hash", hash.as_str()),
            ("note", "ticket 7"),
        ],
    )
    .await;
    assert_eq!(response.status(), 303);
    assert_eq!(
        response.headers()["location"],
        format!("/requests/{id}?answered=1")
    );
    let record = harness
        .store
        .approval(&id)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(record.state, ApprovalState::Pending);
    assert_eq!(record.answers.len(), 1);
    let answer = &record.answers[0];
    assert_eq!(answer.approver.id, "human:alice");
    assert_eq!(answer.approver.channel.as_str(), "service");
    assert_eq!(answer.approver.authentication.as_str(), "token");
    assert_eq!(answer.decision, AnswerDecision::Approve);
    assert!(answer.hash_confirmed);
    assert_eq!(answer.note.as_deref(), Some("ticket 7"));
    let (_, html) = get(&harness, &format!("/requests/{id}?answered=1"), &session).await;
    assert!(html.contains("Your approval counted"), "{html}");
    assert!(html.contains("1 of 2 approvals"), "{html}");
    // The same form sent again (a stale second tab): an identical repeat changes nothing, and
    // the page says so instead of showing the first answer's banner again.
    let fields = [
        ("csrf", csrf.as_str()),
        ("decision", "approve"),
        ("action_hash", hash.as_str()),
    ];
    let response = post_form(&harness, &path, &session, &fields).await;
    assert_eq!(response.status(), 303);
    let again = format!("/requests/{id}?answered=again");
    assert_eq!(response.headers()["location"], again.as_str());
    let unchanged = harness.store.approval(&id).await.expect("read");
    assert_eq!(unchanged.as_ref(), Some(&record), "nothing changed");
    let (_, html) = get(&harness, &again, &session).await;
    assert!(html.contains("You had already given this answer"), "{html}");
    assert!(!html.contains("Your approval counted"), "{html}");
    harness.stop().await;
}

async fn resolves_an_ambiguous_effect_with_a_reason(backend: Backend, case: &str) {
    let harness = Harness::start(backend, case, Options::default()).await;
    let arguments = json!({"payment_id": "pi_amb"});
    let (id, hash) = harness.ask("finance.small", arguments.clone()).await;
    let alice = harness.token("human:alice", &[]);
    let (status, _) = harness.answer(&id, &alice, "approve", &hash).await;
    assert_eq!(status, 200);
    let lost = harness
        .control
        .execute(
            ActionRequest::new("finance.small", &arguments).with_approval(id.clone()),
            |_| async {
                Err::<(), _>(ExecutorError::may_have_run(
                    "the connection dropped after sending",
                ))
            },
        )
        .await;
    assert!(lost.is_err());
    let key = EffectKey::new("small:pi_amb".to_owned()).expect("a key");
    assert_eq!(
        harness
            .store
            .effect(&key)
            .await
            .expect("read")
            .expect("stored")
            .state,
        EffectState::Ambiguous
    );
    let session = sign_in(&harness, &alice).await;
    let (status, html) = get(&harness, "/effects", &session).await;
    assert_eq!(status, 200);
    assert!(html.contains("small:pi_amb"), "{html}");
    assert!(
        html.contains("action=\"/effects/small%3Api_amb/resolve\""),
        "{html}"
    );
    let csrf = hidden(&html, "csrf");
    let path = "/effects/small%3Api_amb/resolve";
    // No reason: refused, and it stays ambiguous.
    let (status, html) = page(
        post_form(
            &harness,
            path,
            &session,
            &[("csrf", &csrf), ("to", "failed"), ("note", "  ")],
        )
        .await,
    )
    .await;
    assert_eq!(status, 422, "{html}");
    assert!(html.contains("<code>note_required</code>"), "{html}");
    // No CSRF value: refused.
    let (status, _) = page(
        post_form(
            &harness,
            path,
            &session,
            &[("to", "failed"), ("note", "checked")],
        )
        .await,
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(
        harness
            .store
            .effect(&key)
            .await
            .expect("read")
            .expect("stored")
            .state,
        EffectState::Ambiguous
    );
    // A crafted link claims nothing: the effect is still ambiguous, another was never made.
    for link in [
        "/effects?resolved=small%3Api_amb",
        "/effects?resolved=refund%3Api_never_resolved",
    ] {
        let (_, html) = get(&harness, link, &session).await;
        assert!(!html.contains("id=\"resolve-result\""), "{link}: {html}");
    }
    let response = post_form(
        &harness,
        path,
        &session,
        &[
            ("csrf", &csrf),
            ("to", "failed"),
            ("note", "Stripe shows no refund for pi_amb"),
        ],
    )
    .await;
    assert_eq!(response.status(), 303);
    let effect = harness
        .store
        .effect(&key)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(effect.state, EffectState::Failed);
    assert_eq!(effect.resolved_by.as_deref(), Some("human:alice"));
    let (_, html) = get(&harness, "/effects?resolved=small%3Api_amb", &session).await;
    assert!(html.contains("id=\"resolve-result\""), "{html}");
    assert!(html.contains("No ambiguous effect you may see"), "{html}");
    harness.stop().await;
}

/// Issue #31 in the inbox: alice withdraws her counted yes from the page; sam (not a finance
/// resolver) is shown no take-back form and his forged post is refused; bob cancels the request
/// as a resolver and it leaves the inbox.
async fn takes_back_from_the_page(backend: Backend, case: &str) {
    let harness = Harness::start(backend, case, Options::default()).await;
    let (id, hash) = harness
        .ask(
            "finance.refund",
            json!({"payment_id": "pi_tb", "amount": 70_000}),
        )
        .await;
    let alice = harness.token("human:alice", &[]);
    let (status, _) = harness.answer(&id, &alice, "approve", &hash).await;
    assert_eq!(status, 200);
    let path = format!("/requests/{id}/take-back");

    let session = sign_in(&harness, &alice).await;
    let (_, html) = get(&harness, &format!("/requests/{id}"), &session).await;
    assert!(html.contains("Withdraw my approval"), "{html}");
    let csrf = hidden(&html, "csrf");
    // Without the confirming box ticked, the button alone takes nothing back.
    let (status, html) = page(
        post_form(
            &harness,
            &path,
            &session,
            &[("csrf", &csrf), ("take", "revoke"), ("note", "misread")],
        )
        .await,
    )
    .await;
    assert_eq!(status, 422, "{html}");
    assert!(html.contains("Nothing was taken back"), "{html}");
    assert!(html.contains("Yes, take it back"), "{html}");
    assert!(html.contains("1 of 2 approvals"), "{html}");
    let response = post_form(
        &harness,
        &path,
        &session,
        &[
            ("csrf", &csrf),
            ("take", "revoke"),
            ("note", "misread"),
            ("confirm", "yes"),
        ],
    )
    .await;
    assert_eq!(response.status(), 303);
    let (_, html) = get(&harness, &format!("/requests/{id}?taken=1"), &session).await;
    assert!(html.contains("Your approval was withdrawn"), "{html}");
    assert!(html.contains("0 of 2 approvals"), "{html}");
    // Anything but the two buttons' values is refused on the page.
    let (status, html) = page(
        post_form(
            &harness,
            &path,
            &session,
            &[("csrf", &csrf), ("take", "deny"), ("confirm", "yes")],
        )
        .await,
    )
    .await;
    assert_eq!(status, 422, "{html}");
    assert!(html.contains("Nothing was taken back"), "{html}");

    let sam = sign_in(&harness, &harness.token("human:sam", &[])).await;
    let (status, html) = get(&harness, &format!("/requests/{id}"), &sam).await;
    // Sam may not even see a finance request: no form to take anything back.
    assert!(!html.contains("take-back"), "{status}: {html}");
    let forged = post_form(&harness, &path, &sam, &[("take", "cancel")]).await;
    assert_eq!(forged.status(), 403);

    let bob = sign_in(&harness, &harness.token("human:bob", &[])).await;
    let (_, html) = get(&harness, &format!("/requests/{id}"), &bob).await;
    assert!(html.contains("Cancel this request"), "{html}");
    let csrf = hidden(&html, "csrf");
    let response = post_form(
        &harness,
        &path,
        &bob,
        &[("csrf", &csrf), ("take", "cancel"), ("confirm", "yes")],
    )
    .await;
    assert_eq!(response.status(), 303);
    let record = harness
        .store
        .approval(&id)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(record.state, ApprovalState::Cancelled);
    let (_, inbox) = get(&harness, "/inbox", &bob).await;
    assert!(!inbox.contains(id.as_str()), "{inbox}");
    harness.stop().await;
}

on_both_stores!(
    answers_from_the_page_go_through_the_kernel,
    resolves_an_ambiguous_effect_with_a_reason,
    takes_back_from_the_page,
);

#[tokio::test]
async fn the_receipts_page_shows_the_last_verification_not_a_new_walk() {
    let harness = Harness::start(Backend::Sqlite, "pages_chain", Options::default()).await;
    let (id, hash) = harness
        .ask("finance.small", json!({"payment_id": "pi_chain"}))
        .await;
    let alice = harness.token("human:alice", &[]);
    let (status, _) = harness.answer(&id, &alice, "approve", &hash).await;
    assert_eq!(status, 200);
    // A second service on the same store: its status changes only when it verifies.
    let service = Service::new(ServiceConfig {
        store: StoreSource::Open(Arc::clone(&harness.store)),
        sign_in: SignIn {
            approver_keys: vec![harness.key.public_key()],
            proxy: None,
            oidc: None,
        },
        directory: [("human:alice".to_owned(), vec!["finance".to_owned()])].into(),
        auditors_group: None,
        public_url: None,
        clock: Arc::new(harness.clock.clone()),
        policy: None,
    });
    assert_eq!(service.chain_status(), ChainStatus::NotYet);
    service.verify_chain_now().await;
    let head = harness
        .store
        .chain_head()
        .await
        .expect("read")
        .expect("a head");
    assert_eq!(
        service.chain_status(),
        ChainStatus::Intact {
            head_seq: head.seq,
            verified_at: harness.clock.now(),
        }
    );
    // Alter a receipt: the cached status stays until the next verification walks the chain.
    let path = harness.sqlite_path.clone().expect("SQLite");
    rusqlite::Connection::open(&path)
        .expect("the file")
        .execute(
            "UPDATE receipts SET body = replace(body, '\"human:alice\"', '\"human:mallory\"') WHERE seq = 1",
            [],
        )
        .expect("tampered");
    assert!(matches!(service.chain_status(), ChainStatus::Intact { .. }));
    // A fresh service walks the chain from receipt 1 and finds the break; its page says so.
    let fresh = Service::new(ServiceConfig {
        store: StoreSource::Open(Arc::clone(&harness.store)),
        sign_in: SignIn {
            approver_keys: vec![harness.key.public_key()],
            proxy: None,
            oidc: None,
        },
        directory: [("human:alice".to_owned(), vec!["finance".to_owned()])].into(),
        auditors_group: None,
        public_url: None,
        clock: Arc::new(harness.clock.clone()),
        policy: None,
    });
    fresh.verify_chain_now().await;
    match fresh.chain_status() {
        ChainStatus::Broken { first_break, .. } => assert_eq!(first_break.seq(), 1),
        other => panic!("expected a broken chain, got {other:?}"),
    }
    let (base, stop, server) = serve(fresh).await;
    let response = client()
        .get(format!("{base}/receipts"))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("the receipts page");
    let (status, html) = page(response).await;
    assert_eq!(status, 200);
    assert!(html.contains("Chain broken"), "{html}");
    assert!(html.contains("receipt 1 was altered"), "{html}");
    let _ = stop.send(());
    server.await.expect("ends").expect("cleanly");
    harness.stop().await;
}

#[tokio::test]
async fn pages_work_through_the_authenticating_proxy_with_a_keyed_csrf_value() {
    let harness = Harness::start(
        Backend::Sqlite,
        "pages_proxy",
        Options {
            proxy: true,
            ..Options::default()
        },
    )
    .await;
    let (id, hash) = harness
        .ask("finance.small", json!({"payment_id": "pi_proxy"}))
        .await;
    let proxied = |request: reqwest::RequestBuilder, who: &str| {
        request
            .header("x-forwarded-user", who)
            .header("x-proxy-secret", super::support::PROXY_SECRET)
    };
    let (status, html) = page(
        proxied(
            client().get(harness.url(&format!("/requests/{id}"))),
            "human:alice",
        )
        .send()
        .await
        .expect("the page"),
    )
    .await;
    assert_eq!(status, 200);
    let csrf = hidden(&html, "csrf");
    // Another person's value is not this person's.
    let (_, bob_html) = page(
        proxied(client().get(harness.url("/inbox")), "human:bob")
            .send()
            .await
            .expect("the page"),
    )
    .await;
    let bob_csrf = hidden(&bob_html, "csrf");
    assert_ne!(csrf, bob_csrf);
    let answer = |csrf: String| {
        proxied(
            client().post(harness.url(&format!("/requests/{id}/answer"))),
            "human:alice",
        )
        .form(&[
            ("csrf", csrf),
            ("decision", "approve".to_owned()),
            ("action_hash", hash.as_str().to_owned()),
        ])
        .send()
    };
    let (status, html) = page(answer(bob_csrf).await.expect("an answer")).await;
    assert_eq!(status, 403, "{html}");
    let response = answer(csrf).await.expect("an answer");
    assert_eq!(response.status(), 303);
    let record = harness
        .store
        .approval(&id)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(record.state, ApprovalState::Granted);
    assert_eq!(
        record.answers[0].approver.authentication.as_str(),
        "proxy_header"
    );
    harness.stop().await;
}

/// Issue #31 and a new user's trial: revoking the token a browser signed in with signs that
/// browser out. Every page then shows the sign-in form saying why (never the API's JSON), the
/// session cookie is removed, and the form itself still works, for another token.
#[tokio::test]
async fn a_revoked_token_signs_its_browser_out_instead_of_locking_it_out() {
    let harness = Harness::start(Backend::Sqlite, "pages_revoked", Options::default()).await;
    let alice = harness.token("human:alice", &[]);
    let session = sign_in(&harness, &alice).await;
    let (status, _) = get(&harness, "/inbox", &session).await;
    assert_eq!(status, 200);
    let jti = countersign::token::unverified_jti(&alice).expect("a jti");
    assert!(
        harness
            .store
            .revoke_token(&jti, "ops:dana", Some("leaked"), harness.clock.now())
            .await
            .expect("listed")
    );

    let response = client()
        .get(harness.url("/inbox"))
        .header("cookie", &session)
        .send()
        .await
        .expect("an answer");
    assert_eq!(
        cookie_value(&response, "countersign_session").as_deref(),
        Some(""),
        "the session cookie is removed"
    );
    let (status, html) = page(response).await;
    assert_eq!(status, 401, "{html}");
    assert!(
        html.contains("was revoked") && html.contains(&jti),
        "{html}"
    );
    assert!(html.contains("name=\"token\""), "the sign-in form: {html}");

    // The session is over: the old cookie now opens nothing, and the form takes a new token.
    let (status, html) = get(&harness, "/signin", &session).await;
    assert_eq!(status, 200, "{html}");
    let response = client()
        .get(harness.url("/history"))
        .header("cookie", &session)
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/signin");
    let bob = harness.token("human:bob", &[]);
    // Pasted as copied from an `Authorization` header, scheme and all: the token is taken.
    let again = sign_in(&harness, &format!("Bearer {bob}")).await;
    let (status, _) = get(&harness, "/inbox", &again).await;
    assert_eq!(status, 200);
    // The form refuses what the API refuses, with the reason, and opens no session (found by
    // a first-time user: a revoked token, or a subject no answer could use, got a session and
    // then an empty form without a word).
    for (token, says) in [
        (alice.clone(), "was revoked"),
        (
            harness.hand_signed_token("human:alice "),
            "is not an approver id",
        ),
    ] {
        let (status, html, session) = refused_sign_in(&harness, &token).await;
        assert_eq!(status, 401, "{html}");
        assert!(html.contains(says), "{says}: {html}");
        assert_eq!(session, None, "no session for a refused token");
    }
    harness.stop().await;
}

/// Post the sign-in form with `token`: the status, the page, and the session cookie if one was
/// set.
async fn refused_sign_in(harness: &Harness, token: &str) -> (u16, String, Option<String>) {
    let client = client();
    let form = client
        .get(harness.url("/signin"))
        .send()
        .await
        .expect("the form");
    let csrf = cookie_value(&form, "countersign_csrf").expect("a csrf cookie");
    let response = client
        .post(harness.url("/signin"))
        .header("cookie", format!("countersign_csrf={csrf}"))
        .form(&[("csrf", csrf.as_str()), ("token", token)])
        .send()
        .await
        .expect("an answer");
    let session = cookie_value(&response, "countersign_session").filter(|value| !value.is_empty());
    let (status, html) = page(response).await;
    (status, html, session)
}

/// A new user's trial: a request page for an id that is not there (or not the viewer's)
/// pointed a person in a browser at `GET /api/v1/approvals`; it leads back to the inbox.
#[tokio::test]
async fn an_unknown_request_page_leads_back_to_the_inbox() {
    let harness = Harness::start(Backend::Sqlite, "pages_unknown", Options::default()).await;
    let session = sign_in(&harness, &harness.token("human:alice", &[])).await;
    for id in ["apr_aaaaaaaaaaaaaaaaaaaa", "not-an-id"] {
        let (status, html) = get(&harness, &format!("/requests/{id}"), &session).await;
        assert_eq!(status, 404, "{html}");
        assert!(html.contains("go back to your inbox"), "{html}");
        assert!(!html.contains("/api/v1"), "{html}");
    }
    harness.stop().await;
}

/// Found by a first-time user: an answer's note holding hidden characters (a right-to-left
/// override, a zero-width space) reached the request and receipts pages as it was, where it
/// reversed what a person read. Notes are shown as every value is: escaped and marked.
#[tokio::test]
async fn notes_are_shown_with_their_hidden_characters_marked() {
    let harness = Harness::start(Backend::Sqlite, "pages_notes", Options::default()).await;
    let (id, hash) = harness
        .ask("finance.refund", json!({"payment_id": "pi_note"}))
        .await;
    let alice = harness.token("human:alice", &[]);
    let note = "ok \u{202e}gnp.exe\u{200b} \u{fff9}<b>x</b>";
    let (status, body) = harness
        .post(
            &format!("/api/v1/approvals/{id}/answer"),
            Some(&alice),
            json!({"decision": "approve", "action_hash": hash.as_str(), "note": note}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let session = sign_in(&harness, &harness.token("human:bob", &[])).await;
    for path in [format!("/requests/{id}"), "/receipts".to_owned()] {
        let (status, html) = get(&harness, &path, &session).await;
        assert_eq!(status, 200, "{path}");
        assert!(
            html.contains("gnp.exe"),
            "{path}: the note is shown: {html}"
        );
        for hidden in ['\u{202e}', '\u{200b}', '\u{fff9}'] {
            assert!(
                !html.contains(hidden),
                "{path}: U+{:04X} reached the page",
                u32::from(hidden)
            );
        }
        assert!(
            html.contains(r#"<mark class="escape">\u{202e}</mark>"#),
            "{path}: {html}"
        );
        assert!(!html.contains("<b>x</b>"), "{path}: {html}");
    }
    harness.stop().await;
}

/// Found by a first-time user: a bearer token pasted into a URL or a body was handed back in
/// the refusal's detail. Wherever a refusal quotes a path or a body, the token is redacted.
#[tokio::test]
async fn a_token_pasted_into_a_path_or_a_body_is_not_handed_back() {
    let harness = Harness::start(Backend::Sqlite, "pages_token_echo", Options::default()).await;
    let (id, _) = harness
        .ask("finance.refund", json!({"payment_id": "pi_echo"}))
        .await;
    let alice = harness.token("human:alice", &[]);
    let api = [
        harness
            .get(&format!("/api/v1/approvals/{alice}"), Some(&alice))
            .await,
        harness
            .post(
                &format!("/api/v1/approvals/{id}/answer"),
                Some(&alice),
                json!({ alice.clone(): "approve" }),
            )
            .await,
        harness
            .post(
                "/api/v1/interrupts/responses",
                Some(&alice),
                json!({"responses": { alice.clone(): {"decision": "approve"} }}),
            )
            .await,
    ];
    for (status, body) in api {
        assert!(status >= 400, "{body}");
        let text = body.to_string();
        assert!(!text.contains(&alice), "the token came back: {text}");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains("[redacted token]")),
            "{text}"
        );
    }
    let session = sign_in(&harness, &alice).await;
    let (status, html) = get(&harness, &format!("/requests/{alice}"), &session).await;
    assert_eq!(status, 404, "{html}");
    assert!(!html.contains(&alice), "the token came back: {html}");
    assert!(html.contains("[redacted token]"), "{html}");
    let response = client()
        .get(harness.url(&format!("/no/such/page/{alice}")))
        .header("accept", "text/html")
        .send()
        .await
        .expect("an answer");
    let (status, html) = page(response).await;
    assert_eq!(status, 404, "{html}");
    assert!(!html.contains(&alice), "the token came back: {html}");
    let (_, effects) = get(&harness, "/effects", &session).await;
    let csrf = hidden(&effects, "csrf");
    let (status, html) = page(
        post_form(
            &harness,
            &format!("/effects/{alice}/resolve"),
            &session,
            &[("csrf", &csrf), ("to", "failed"), ("note", "checked")],
        )
        .await,
    )
    .await;
    assert_eq!(status, 404, "{html}");
    assert!(!html.contains(&alice), "the token came back: {html}");
    harness.stop().await;
}

/// Found by a first-time user: a form past the 64 KiB the service reads got a bare `413` in
/// plain text. It gets a page saying what happened and what to do, like every other refusal.
#[tokio::test]
async fn an_oversized_form_gets_a_page_saying_what_to_do() {
    let harness = Harness::start(Backend::Sqlite, "pages_too_large", Options::default()).await;
    let (id, hash) = harness
        .ask("finance.refund", json!({"payment_id": "pi_large"}))
        .await;
    let session = sign_in(&harness, &harness.token("human:alice", &[])).await;
    let (_, html) = get(&harness, &format!("/requests/{id}"), &session).await;
    let csrf = hidden(&html, "csrf");
    let long = "a".repeat(70 * 1024);
    let (status, html) = page(
        post_form(
            &harness,
            &format!("/requests/{id}/answer"),
            &session,
            &[
                ("csrf", &csrf),
                ("decision", "approve"),
                ("action_hash", hash.as_str()),
                ("note", &long),
            ],
        )
        .await,
    )
    .await;
    assert_eq!(status, 413, "{html}");
    assert!(html.contains("the form was larger than 64 KiB"), "{html}");
    assert!(html.contains("<code>body_too_large</code>"), "{html}");
    let (status, html) = page(
        client()
            .post(harness.url("/signin"))
            .form(&[("csrf", "x"), ("token", long.as_str())])
            .send()
            .await
            .expect("an answer"),
    )
    .await;
    assert_eq!(status, 413, "{html}");
    assert!(html.contains("paste only the approver token"), "{html}");
    assert!(
        html.contains(r#"<form id="signin""#),
        "the form again: {html}"
    );
    let record = harness.store.approval(&id).await.expect("read");
    assert!(record.is_some_and(|record| record.answers.is_empty()));
    harness.stop().await;
}
