//! The web inbox in real Chromium, used as a person would: sign in, read, approve and deny with
//! the mouse and with the keyboard alone, on a real service over a real SQLite store, with the
//! agent's `Control` on the same store. axe-core checks the inbox and request pages; every
//! scenario saves screenshots under `<target>/browser-artifacts/`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign::{ActionRequest, ApprovalId, ApprovalState, ControlError};
use fantoccini::{Client, Locator};
use serde_json::{Value, json};

use super::chromium::{
    focused_id, in_chromium, path, press, screenshot, serious_accessibility_violations, tab_to,
    text, texts, type_text,
};
use super::support::{Backend, Harness, Options};

const ENTER: char = '\u{e007}';
const SPACE: char = ' ';

async fn start(case: &str) -> Harness {
    Harness::start(Backend::Sqlite, case, Options::default()).await
}

/// Sign in through the form with `token`; lands on the inbox.
async fn sign_in(client: &Client, base: &str, token: &str) {
    client
        .goto(&format!("{base}/signin"))
        .await
        .expect("the sign-in page");
    client
        .find(Locator::Id("token"))
        .await
        .expect("the token field")
        .send_keys(token)
        .await
        .expect("typed");
    client
        .find(Locator::Css("#signin button[type=submit]"))
        .await
        .expect("the sign-in button")
        .click()
        .await
        .expect("clicked");
    client
        .wait()
        .for_element(Locator::Id("signed-in-as"))
        .await
        .expect("signed in");
    assert_eq!(path(client).await, "/inbox");
}

async fn sign_out(client: &Client) {
    client
        .find(Locator::Css("form.inline button"))
        .await
        .expect("the sign-out button")
        .click()
        .await
        .expect("clicked");
    client
        .wait()
        .for_element(Locator::Id("signin"))
        .await
        .expect("the sign-in form again");
}

async fn open_request(client: &Client, base: &str, id: &ApprovalId) {
    client
        .goto(&format!("{base}/requests/{id}"))
        .await
        .expect("the request page");
}

async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|error| panic!("no `{css}`: {error}"))
        .click()
        .await
        .expect("clicked");
}

/// The agent presents approval `id` for `action` with `arguments`; counts executions.
async fn retry(
    harness: &Harness,
    action: &str,
    arguments: &Value,
    id: &ApprovalId,
    runs: &Arc<AtomicUsize>,
) -> Result<(), ControlError> {
    let runs = Arc::clone(runs);
    harness
        .control
        .execute(
            ActionRequest::new(action, arguments).with_approval(id.clone()),
            |_| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
        )
        .await
        .map(|_| ())
}

async fn state_of(harness: &Harness, id: &ApprovalId) -> ApprovalState {
    harness
        .store
        .approval(id)
        .await
        .expect("read")
        .expect("stored")
        .state
}

#[tokio::test]
async fn a_person_signs_in_and_sees_only_what_they_may_answer() {
    let harness = start("inbox_scope").await;
    in_chromium(|client| async move {
        let (finance, _) = harness
            .ask("finance.refund", json!({"payment_id": "pi_scope", "amount": 75_000}))
            .await;
        let (ops, _) = harness
            .ask("ops.restart", json!({"host": "db-1"}))
            .await;
        // Signed out, the inbox sends the browser to the sign-in form.
        client
            .goto(&harness.url("/inbox"))
            .await
            .expect("the inbox");
        assert_eq!(path(&client).await, "/signin");
        // A wrong token is refused on the page.
        client
            .find(Locator::Id("token"))
            .await
            .expect("the token field")
            .send_keys("not-a-token")
            .await
            .expect("typed");
        click(&client, "#signin button[type=submit]").await;
        assert!(
            text(&client, "#signin-refused").await.contains("Not signed in"),
            "the refusal is shown"
        );

        let alice = harness.token("human:alice", &[]);
        sign_in(&client, &harness.base, &alice).await;
        let rows = texts(&client, "#inbox tbody tr").await;
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert!(rows[0].contains("finance.refund"), "{rows:?}");
        assert!(rows[0].contains("0 of 2 approvals"), "{rows:?}");
        assert!(rows[0].contains("expires in 1"), "{rows:?}");
        let listed: Vec<String> = {
            let mut ids = Vec::new();
            for row in client
                .find_all(Locator::Css("#inbox tbody tr"))
                .await
                .expect("rows")
            {
                ids.push(row.attr("data-request").await.expect("attr").unwrap_or_default());
            }
            ids
        };
        assert_eq!(listed, vec![finance.to_string()]);
        assert!(!listed.contains(&ops.to_string()), "ops is not alice's to answer");
        // The countdown runs in the page (its only script).
        let before = text(&client, "time.countdown").await;
        tokio::time::sleep(Duration::from_millis(2_100)).await;
        let after = text(&client, "time.countdown").await;
        assert_ne!(before, after, "the countdown moves");
        screenshot(&client, "inbox").await;
        let violations = serious_accessibility_violations(&client).await;
        assert!(violations.is_empty(), "inbox: {violations:#?}");

        // The request page, and another team's request is not found.
        click(&client, "#inbox tbody a").await;
        assert_eq!(path(&client).await, format!("/requests/{finance}"));
        assert!(text(&client, "#action").await.contains("finance.refund"));
        assert_eq!(text(&client, "#principal").await, "agent:bot");
        assert_eq!(text(&client, "#resource").await, "none");
        assert_eq!(text(&client, "#environment").await, "test");
        assert!(
            text(&client, "#policy-rule").await.contains("policy entry finance.refund"),
            "the rule that required approval"
        );
        assert!(text(&client, "#who-may-approve").await.contains("group:finance (2 of them)"));
        assert!(text(&client, "#action-hash").await.starts_with("sha256:"));
        assert!(
            text(&client, "#canonical").await.contains(r#"{"amount":75000,"payment_id":"pi_scope"}"#)
        );
        screenshot(&client, "request").await;
        let violations = serious_accessibility_violations(&client).await;
        assert!(violations.is_empty(), "request page: {violations:#?}");

        // The check can fail: an image without a text alternative is a critical violation.
        client
            .execute(
                "const img = document.createElement('img'); img.src = '/static/none.png'; document.querySelector('main').append(img);",
                vec![],
            )
            .await
            .expect("an image is added");
        let violations = serious_accessibility_violations(&client).await;
        assert!(
            violations.iter().any(|line| line.contains("image-alt")),
            "axe finds the image without alt: {violations:#?}"
        );

        open_request(&client, &harness.base, &ops).await;
        assert!(text(&client, "#problem").await.contains("unknown_request"));
        harness.stop().await;
    })
    .await;
}

#[tokio::test]
async fn two_approvers_complete_a_quorum_and_the_retry_runs_once() {
    let harness = start("inbox_quorum").await;
    in_chromium(|client| async move {
        let arguments = json!({"payment_id": "pi_quorum", "amount": 90_000});
        let (id, _) = harness.ask("finance.refund", arguments.clone()).await;
        let alice = harness.token("human:alice", &[]);
        let bob = harness.token("human:bob", &[]);

        sign_in(&client, &harness.base, &alice).await;
        open_request(&client, &harness.base, &id).await;
        client
            .find(Locator::Id("note"))
            .await
            .expect("the note")
            .send_keys("matches ticket 4411")
            .await
            .expect("typed");
        click(&client, "#approve").await;
        assert_eq!(path(&client).await, format!("/requests/{id}"));
        let result = text(&client, "#answer-result").await;
        assert!(result.contains("1 of 2 approvals"), "{result}");
        assert_eq!(text(&client, "#approvals").await, "1 of 2 approvals");
        assert!(
            text(&client, "#no-answer")
                .await
                .contains("You have answered")
        );
        screenshot(&client, "quorum-1-of-2").await;
        // Still pending: the agent's call is not authorized yet.
        assert_eq!(state_of(&harness, &id).await, ApprovalState::Pending);
        client.goto(&harness.url("/inbox")).await.expect("inbox");
        assert!(text(&client, "#inbox").await.contains("1 of 2 approvals"));

        sign_out(&client).await;
        sign_in(&client, &harness.base, &bob).await;
        open_request(&client, &harness.base, &id).await;
        click(&client, "#approve").await;
        let result = text(&client, "#answer-result").await;
        assert!(result.contains("Approved"), "{result}");
        assert!(result.contains("2 of 2 approvals"), "{result}");
        screenshot(&client, "quorum-2-of-2").await;
        assert_eq!(state_of(&harness, &id).await, ApprovalState::Granted);

        // The agent's retry runs once; a second retry is refused.
        let runs = Arc::new(AtomicUsize::new(0));
        retry(&harness, "finance.refund", &arguments, &id, &runs)
            .await
            .expect("the approved call runs");
        let again = retry(&harness, "finance.refund", &arguments, &id, &runs).await;
        assert!(again.is_err(), "a second run is refused: {again:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(state_of(&harness, &id).await, ApprovalState::Consumed);
        // History shows it used.
        client
            .goto(&harness.url("/history"))
            .await
            .expect("history");
        let row = text(&client, &format!("#history tr[data-request='{id}']")).await;
        assert!(row.contains("approved and used"), "{row}");
        // And says why a request may be missing from it.
        let scope = text(&client, "#history-scope").await;
        assert!(
            scope.contains("opened before the policy named you"),
            "{scope}"
        );
        harness.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_person_denies_and_the_agent_is_told() {
    let harness = start("inbox_deny").await;
    in_chromium(|client| async move {
        let arguments = json!({"payment_id": "pi_deny"});
        let (id, _) = harness.ask("finance.small", arguments.clone()).await;
        sign_in(&client, &harness.base, &harness.token("human:alice", &[])).await;
        open_request(&client, &harness.base, &id).await;
        client
            .find(Locator::Id("note"))
            .await
            .expect("the note")
            .send_keys("no ticket for this")
            .await
            .expect("typed");
        click(&client, "#deny").await;
        assert!(text(&client, "#answer-result").await.contains("Denied"));
        assert_eq!(text(&client, "#state").await, "denied");
        assert!(
            text(&client, "#answers")
                .await
                .contains("no ticket for this")
        );
        screenshot(&client, "denied").await;
        assert_eq!(state_of(&harness, &id).await, ApprovalState::Denied);
        let runs = Arc::new(AtomicUsize::new(0));
        let refused = retry(&harness, "finance.small", &arguments, &id, &runs).await;
        assert!(
            matches!(refused, Err(ControlError::ApprovalDenied { .. })),
            "{refused:?}"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        client
            .goto(&harness.url("/history"))
            .await
            .expect("history");
        assert!(
            text(&client, &format!("#history tr[data-request='{id}']"))
                .await
                .contains("denied")
        );
        client
            .goto(&harness.url("/receipts"))
            .await
            .expect("receipts");
        let receipts = text(&client, "#receipts").await;
        assert!(receipts.contains("no ticket for this"), "{receipts}");
        screenshot(&client, "receipts").await;
        harness.stop().await;
    })
    .await;
}

#[tokio::test]
async fn an_expired_request_cannot_be_answered() {
    let harness = start("inbox_expired").await;
    in_chromium(|client| async move {
        let (id, _) = harness
            .ask("finance.small", json!({"payment_id": "pi_late"}))
            .await;
        sign_in(&client, &harness.base, &harness.token("human:alice", &[])).await;
        open_request(&client, &harness.base, &id).await;
        // The page is open with its form; then the request's 15 minutes pass.
        harness.advance(Duration::from_secs(16 * 60));
        click(&client, "#approve").await;
        let refused = text(&client, "#answer-refused").await;
        assert!(refused.contains("not counted"), "{refused}");
        assert!(refused.contains("expired"), "{refused}");
        assert!(text(&client, "#no-answer").await.contains("expired"));
        assert!(
            client.find(Locator::Id("approve")).await.is_err(),
            "no answer form on an expired request"
        );
        screenshot(&client, "expired").await;
        assert_ne!(state_of(&harness, &id).await, ApprovalState::Granted);
        client.goto(&harness.url("/inbox")).await.expect("inbox");
        assert!(client.find(Locator::Id("empty-inbox")).await.is_ok());
        client
            .goto(&harness.url("/history"))
            .await
            .expect("history");
        assert!(
            text(&client, &format!("#history tr[data-request='{id}']"))
                .await
                .contains("expired")
        );
        harness.stop().await;
    })
    .await;
}

#[tokio::test]
async fn hidden_characters_are_marked_and_markup_is_text() {
    let harness = start("inbox_marks").await;
    in_chromium(|client| async move {
        let (id, _) = harness
            .ask(
                "finance.small",
                json!({
                    "payment_id": "pi_marks",
                    "payee": "Jose\u{301}",
                    "account": "pay\u{200b}pal",
                    "file": "invoice\u{202e}fdp.exe",
                    "memo": "<script>document.title='owned'</script><img src=x onerror=\"document.title='owned'\">",
                }),
            )
            .await;
        sign_in(&client, &harness.base, &harness.token("human:alice", &[])).await;
        open_request(&client, &harness.base, &id).await;
        let marks = texts(&client, "#arguments mark.escape").await;
        for expected in [r"\u{301}", r"\u{200b}", r"\u{202e}"] {
            assert!(marks.iter().any(|mark| mark == expected), "{expected} in {marks:?}");
        }
        let arguments = text(&client, "#arguments").await;
        assert!(arguments.contains(r"Jose\u{301}"), "{arguments}");
        assert!(arguments.contains(r"pay\u{200b}pal"), "{arguments}");
        assert!(arguments.contains(r"invoice\u{202e}fdp.exe"), "{arguments}");
        assert!(arguments.contains("not in NFC"), "{arguments}");
        assert!(arguments.contains("invisible character"), "{arguments}");
        assert!(arguments.contains("bidirectional control"), "{arguments}");
        assert!(arguments.contains("U+202E"), "{arguments}");
        assert!(text(&client, "#marked-warning").await.contains("marked"));
        let canonical = text(&client, "#canonical").await;
        assert!(canonical.contains(r"\u{202e}"), "{canonical}");
        // The markup is shown as text and never ran.
        assert!(
            arguments.contains("<script>document.title='owned'</script><img src=x"),
            "{arguments}"
        );
        assert_eq!(client.title().await.expect("a title"), format!("Request {id} · Countersign"));
        let scripts = client
            .execute("return document.scripts.length;", vec![])
            .await
            .expect("a script");
        assert_eq!(scripts, json!(1), "only the page's own script");
        assert!(client.find(Locator::Css("#arguments img")).await.is_err());
        client
            .execute("document.getElementById('arguments').scrollIntoView();", vec![])
            .await
            .expect("scrolled");
        screenshot(&client, "marks-and-markup").await;
        harness.stop().await;
    })
    .await;
}

#[tokio::test]
async fn forms_without_the_csrf_value_or_with_another_hash_are_refused() {
    let harness = start("inbox_csrf").await;
    in_chromium(|client| async move {
        let (id, _) = harness
            .ask("finance.small", json!({"payment_id": "pi_csrf"}))
            .await;
        sign_in(&client, &harness.base, &harness.token("human:alice", &[])).await;
        open_request(&client, &harness.base, &id).await;
        client
            .execute("document.querySelector('#answer input[name=csrf]').remove();", vec![])
            .await
            .expect("the field is removed");
        click(&client, "#approve").await;
        let problem = text(&client, "#problem").await;
        assert!(problem.contains("csrf"), "{problem}");
        screenshot(&client, "csrf-refused").await;
        assert_eq!(state_of(&harness, &id).await, ApprovalState::Pending);

        // A hash other than the one shown: refused, said on the page, nothing counted.
        open_request(&client, &harness.base, &id).await;
        client
            .execute(
                "document.querySelector('#answer input[name=action_hash]').value = 'sha256:' + '0'.repeat(64);",
                vec![],
            )
            .await
            .expect("the hash is changed");
        click(&client, "#approve").await;
        let refused = text(&client, "#answer-refused").await;
        assert!(refused.contains("not counted"), "{refused}");
        assert!(refused.contains("mismatch"), "{refused}");
        screenshot(&client, "hash-mismatch").await;
        assert_eq!(state_of(&harness, &id).await, ApprovalState::Pending);
        harness.stop().await;
    })
    .await;
}

#[tokio::test]
async fn approves_and_denies_by_keyboard_alone() {
    let harness = start("inbox_keyboard").await;
    in_chromium(|client| async move {
        let (first, _) = harness
            .ask("finance.small", json!({"payment_id": "pi_key_1"}))
            .await;
        let (second, _) = harness
            .ask("finance.small", json!({"payment_id": "pi_key_2"}))
            .await;
        // Sign in by keyboard: Tab to the token field, type, Enter on the button.
        client
            .goto(&harness.url("/signin"))
            .await
            .expect("the sign-in page");
        tab_to(&client, "token").await;
        type_text(&client, &harness.token("human:alice", &[])).await;
        press(&client, '\u{e004}').await;
        press(&client, ENTER).await;
        client
            .wait()
            .for_element(Locator::Id("signed-in-as"))
            .await
            .expect("signed in");

        // From the inbox, Tab to the first request's link and follow it with Enter.
        let link = client
            .find(Locator::Css(&format!(
                "#inbox tr[data-request='{first}'] a"
            )))
            .await
            .expect("the link");
        let mut reached = false;
        for _ in 0..40 {
            press(&client, '\u{e004}').await;
            let focused = client.active_element().await.expect("focus");
            if focused.attr("href").await.expect("attr").as_deref()
                == link.attr("href").await.expect("attr").as_deref()
            {
                reached = true;
                break;
            }
        }
        assert!(reached, "Tab reaches the request link");
        press(&client, ENTER).await;
        client
            .wait()
            .for_element(Locator::Id("answer"))
            .await
            .expect("the request page");
        tab_to(&client, "note").await;
        type_text(&client, "by keyboard").await;
        tab_to(&client, "approve").await;
        press(&client, ENTER).await;
        client
            .wait()
            .for_element(Locator::Id("answer-result"))
            .await
            .expect("the result");
        assert!(text(&client, "#answer-result").await.contains("Approved"));
        assert_eq!(state_of(&harness, &first).await, ApprovalState::Granted);

        open_request(&client, &harness.base, &second).await;
        tab_to(&client, "deny").await;
        assert_eq!(focused_id(&client).await, "deny");
        screenshot(&client, "keyboard-focus-deny").await;
        press(&client, SPACE).await;
        client
            .wait()
            .for_element(Locator::Id("answer-result"))
            .await
            .expect("the result");
        assert!(text(&client, "#answer-result").await.contains("Denied"));
        assert_eq!(state_of(&harness, &second).await, ApprovalState::Denied);
        harness.stop().await;
    })
    .await;
}
