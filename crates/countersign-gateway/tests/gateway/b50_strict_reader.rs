//! The gateway reads every client message with the kernel's one strict reader (issue #19):
//! cases B50 (nesting), B51 (lone surrogates, bytes that are not UTF-8) and B52 (duplicate keys)
//! in `shared/cases/gateway-2026.md`. A refused message is answered under its own request id
//! whenever the id can be read, nothing reaches the upstream, and the session goes on serving.

use serde_json::{Value, json};

use super::fake::Behaviour;
use super::harness::{Harness, config, memory_store, policy, start};

async fn allowing() -> Harness {
    // An exact entry: a pattern's `allow` would be raised to `approve` for a tool that does not
    // say it is harmless (issue #27), and these tests are about reading, not deciding.
    let policy =
        policy("schema: countersign.policy/v1\nactions:\n  mcp.s.send:\n    decision: allow\n");
    start(
        config("s"),
        policy,
        memory_store(),
        &["send"],
        Behaviour::Succeed,
    )
    .await
}

/// Send `line` raw and return the gateway's answer to it (the next response).
async fn answer_to(harness: &mut Harness, line: &[u8]) -> Value {
    harness.client.send_raw(line).await;
    loop {
        let message = harness.client.next().await;
        if message.get("method").is_none() {
            return message;
        }
    }
}

/// The session still serves other ids after a refusal.
async fn still_serving(harness: &mut Harness) {
    let reply = harness.client.call("send", json!({"to": "a@x"})).await;
    assert!(reply.get("result").is_some(), "{reply}");
}

fn call_text(id: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"send","arguments":{arguments}}}}}"#
    )
}

#[tokio::test]
async fn refuses_duplicate_keys_in_arguments_under_the_request_id() {
    let mut harness = allowing().await;
    for (id, arguments) in [
        ("7", r#"{"to":"a@x","amount":1,"amount":1000}"#),
        (r#""dup-nested""#, r#"{"p":{"k":1,"k":2}}"#),
        ("8", r#"{"a":1,"\u0061":2}"#),
    ] {
        let reply = answer_to(&mut harness, call_text(id, arguments).as_bytes()).await;
        let expected_id: Value = serde_json::from_str(id).expect("id");
        assert_eq!(reply["id"], expected_id, "{reply}");
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
        assert_eq!(reply["error"]["data"]["reason"], "duplicate_key", "{reply}");
        assert_eq!(reply["error"]["data"]["did_run"], "no");
        assert_eq!(reply["error"]["data"]["may_retry"], false);
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("invalid params") && message.contains("line 1"),
            "{message}"
        );
    }
    assert_eq!(harness.fake.calls(), 0, "nothing reaches the upstream");
    still_serving(&mut harness).await;
}

#[tokio::test]
async fn a_duplicate_id_leaves_the_id_unknown() {
    let mut harness = allowing().await;
    let reply = answer_to(
        &mut harness,
        br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(reply["id"], Value::Null, "{reply}");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert_eq!(reply["error"]["data"]["reason"], "duplicate_key");
}

#[tokio::test]
async fn answers_id_7_promptly_for_arguments_nested_too_deep() {
    // B50 (a): 200, 1 000 and 100 000 levels, as arrays and as objects.
    let mut harness = allowing().await;
    for levels in [200, 1_000, 100_000] {
        for (open, close) in [("[", "]"), (r#"{"a":"#, "}")] {
            let arguments = format!(
                r#"{{"x":{}1{}}}"#,
                open.repeat(levels),
                close.repeat(levels)
            );
            let reply = answer_to(&mut harness, call_text("7", &arguments).as_bytes()).await;
            assert_eq!(reply["id"], 7, "{levels} {open}: {reply}");
            assert_eq!(reply["error"]["code"], -32602, "{reply}");
            assert_eq!(reply["error"]["data"]["reason"], "too_deep");
            let message = reply["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("64"), "{message}");
        }
    }
    assert_eq!(harness.fake.calls(), 0);
    still_serving(&mut harness).await;
}

#[tokio::test]
async fn refuses_lone_surrogates_and_bytes_that_are_not_utf8() {
    // B51, as raw bytes through the gateway.
    let mut harness = allowing().await;
    for arguments in [
        r#"{"s":"\ud800"}"#,
        r#"{"s":"\udc00"}"#,
        r#"{"s":"\ude00\ud83d"}"#,
    ] {
        let reply = answer_to(&mut harness, call_text("3", arguments).as_bytes()).await;
        assert_eq!(reply["id"], 3, "{reply}");
        assert_eq!(
            reply["error"]["data"]["reason"], "lone_surrogate",
            "{reply}"
        );
    }
    for bad in [&b"\xFF"[..], &b"\xC0\x80"[..], &b"\xED\xA0\x80"[..]] {
        let mut line = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"send","arguments":{"s":""#.to_vec();
        line.extend_from_slice(bad);
        line.extend_from_slice(br#""}}}"#);
        let reply = answer_to(&mut harness, &line).await;
        assert_eq!(reply["id"], 4, "{reply}");
        assert_eq!(reply["error"]["code"], -32700, "{reply}");
        assert_eq!(reply["error"]["data"]["reason"], "invalid_utf8", "{reply}");
        // The refusal names the raw bytes by size and digest (B51), never by echoing them.
        assert_eq!(reply["error"]["data"]["raw_bytes"], line.len(), "{reply}");
        assert_eq!(
            reply["error"]["data"]["raw_digest"],
            countersign::canonical::sha256_prefixed(&line),
            "{reply}"
        );
    }
    assert_eq!(harness.fake.calls(), 0);
    // The valid pair is the emoji itself: it reaches the upstream as the character.
    let reply = answer_to(
        &mut harness,
        call_text("5", r#"{"s":"\ud83d\ude00"}"#).as_bytes(),
    )
    .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let seen = harness.fake.seen.lock().expect("seen").calls.clone();
    assert_eq!(seen[0].2, json!({"s": "\u{1F600}"}));
}

#[tokio::test]
async fn integers_reach_the_upstream_as_integers_and_unsafe_ones_are_refused() {
    let mut harness = allowing().await;
    let reply = answer_to(
        &mut harness,
        call_text(
            "1",
            r#"{"max":9007199254740991,"min":-9007199254740991,"one":1.0}"#,
        )
        .as_bytes(),
    )
    .await;
    assert!(reply.get("result").is_some(), "{reply}");
    let seen = harness.fake.seen.lock().expect("seen").calls.clone();
    let arguments = &seen[0].2;
    assert!(
        arguments["max"].is_i64() || arguments["max"].is_u64(),
        "{arguments}"
    );
    assert_eq!(arguments["max"].as_i64(), Some(9_007_199_254_740_991));
    assert_eq!(arguments["min"].as_i64(), Some(-9_007_199_254_740_991));
    assert_eq!(arguments["one"].as_i64(), Some(1), "1.0 is the integer 1");
    for unsafe_integer in [
        "9007199254740992",
        "-9007199254740992",
        "100000000000000000000",
    ] {
        let reply = answer_to(
            &mut harness,
            call_text("2", &format!(r#"{{"n":{unsafe_integer}}}"#)).as_bytes(),
        )
        .await;
        assert_eq!(reply["id"], 2, "{reply}");
        assert_eq!(
            reply["error"]["data"]["reason"], "unsafe_integer",
            "{reply}"
        );
    }
    assert_eq!(harness.fake.calls(), 1);
}

#[tokio::test]
async fn a_result_nested_too_deep_is_committed_withheld_and_never_retryable() {
    // B50 (c): the upstream answers with a result nested 10 000 levels deep. The call ran: the
    // effect is committed with a "result not representable" note holding the result's size and
    // digest; the client is told the call completed and its result was withheld; a retry is a
    // duplicate, never a second run.
    let levels = 10_000;
    let store = memory_store();
    let policy = policy(
        "schema: countersign.policy/v1\nactions:\n  mcp.s.send:\n    effect: \"send:{to}\"\n    decision: allow\n",
    );
    let mut harness = start(
        config("s"),
        policy,
        std::sync::Arc::clone(&store),
        &["send"],
        Behaviour::DeepResult { levels },
    )
    .await;
    let reply = harness.client.call("send", json!({"to": "a@x"})).await;
    assert!(
        reply.get("error").is_none(),
        "{}",
        &reply.to_string()[..400.min(reply.to_string().len())]
    );
    let result = &reply["result"];
    assert_eq!(result["isError"], false);
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let sent = format!(
        r#"{{"content":{}1{}}}"#,
        "[".repeat(levels),
        "]".repeat(levels)
    );
    let digest = countersign::canonical::sha256_prefixed(sent.as_bytes());
    assert!(
        text.contains("the call completed, but its result was withheld")
            && text.contains(&digest)
            && text.contains(&format!("{} bytes", sent.len()))
            && text.contains("do not send the call again"),
        "{text}"
    );
    let meta = &result["_meta"]["countersign"];
    assert_eq!(meta["outcome"], "committed");
    let detail = meta["receipt"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("result not representable: ")
            && detail.contains(&digest)
            && detail.contains(&format!("{} bytes", sent.len())),
        "{detail}"
    );
    assert_eq!(harness.fake.calls(), 1);
    // The record and the receipt say the same.
    let key = countersign::EffectKey::new("send:a@x").expect("a key");
    let record = store.effect(&key).await.expect("read").expect("a record");
    assert_eq!(record.state, countersign::EffectState::Committed);
    assert_eq!(record.detail.as_deref(), Some(detail));
    let receipts = store.receipts(0, 100).await.expect("receipts");
    let last = receipts
        .last()
        .expect("a receipt")
        .to_receipt()
        .expect("parses");
    assert_eq!(last.outcome.as_str(), "committed");
    assert_eq!(last.detail.as_deref(), Some(detail));
    // Sending it again is a duplicate: never a second run.
    let again = harness.client.call("send", json!({"to": "a@x"})).await;
    assert_eq!(again["error"]["data"]["reason"], "duplicate", "{again}");
    assert_eq!(harness.fake.calls(), 1);
}

/// Well-formed JSON that is not a JSON-RPC 2.0 message is answered `-32600`, under its id when
/// it has one and a null id otherwise, and never reaches the upstream (found by a first-time
/// user: `"hello"` got no answer at all, and a `"jsonrpc": "1.0"` ping was forwarded).
#[tokio::test]
async fn json_that_is_not_json_rpc_2_is_answered_and_not_forwarded() {
    let mut harness = allowing().await;
    for (line, id) in [
        (&b"\"hello\"\n"[..], Value::Null),
        (b"42\n", Value::Null),
        (b"{}\n", Value::Null),
        (
            b"{\"jsonrpc\":\"1.0\",\"id\":80,\"method\":\"ping\"}\n",
            json!(80),
        ),
        (b"{\"id\":81,\"method\":\"ping\"}\n", json!(81)),
    ] {
        let answer = answer_to(&mut harness, line).await;
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }
    still_serving(&mut harness).await;
    let seen = harness.fake.seen.lock().expect("seen");
    assert!(
        !seen.requests.iter().any(|method| method == "ping"),
        "{:?}",
        seen.requests
    );
}
