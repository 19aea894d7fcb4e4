//! Broken streams (MCP 2026-07-28 clients re-issue a request whose stream broke): for an action
//! with an effect key, an upstream stream cut after the `tools/call` reached it makes the effect
//! `ambiguous`, and the re-issued request is refused `ambiguous`, never sent again; without an
//! effect key the re-issued request is a new attempt. The fault-injecting upstream's own count
//! of what it received is the proof.

use countersign::EffectState;
use countersign_gateway::{Gateway, Upstream};
use serde_json::json;

use super::faulty_http;
use super::harness::{config, connect, memory_store, policy, refusal};

const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.billing.create_invoice:\n    effect: \"invoice:{customer}\"\n    decision: allow\n  mcp.billing.note:\n    decision: allow\n";

#[tokio::test]
async fn a_stream_cut_after_the_call_makes_the_effect_ambiguous_and_the_reissued_call_is_never_resent()
 {
    let (url, upstream, server) = faulty_http::start().await;
    let store = memory_store();
    let gateway = Gateway::new(config("billing"), policy(POLICY), store.clone()).expect("gateway");
    let (mut client, task) = connect(&gateway, Upstream::Url(url));
    let invoice = json!({"name": "create_invoice", "arguments": {"customer": "c2"}});
    let first = client
        .modern("tools/call", invoice.clone(), json!({}))
        .await;
    assert_eq!(
        refusal(&first),
        (-32097, "outcome_unknown".to_owned()),
        "{first}"
    );
    assert_eq!(first["error"]["data"]["did_run"], "maybe");
    let effects = store.effects(None).await.expect("effects");
    assert_eq!(
        (effects[0].key.as_str(), effects[0].state),
        ("invoice:c2", EffectState::Ambiguous)
    );
    // The client re-issues the request (a new id, as 2026-07-28 clients do).
    let again = client.modern("tools/call", invoice, json!({})).await;
    assert_eq!(refusal(&again), (-32096, "ambiguous".to_owned()), "{again}");
    assert_eq!(upstream.calls_of("create_invoice"), 1, "never re-sent");

    // Without an effect key a re-issued request is a new attempt (documented).
    let note = json!({"name": "note", "arguments": {"text": "hi"}});
    for _ in 0..2 {
        let reply = client.modern("tools/call", note.clone(), json!({})).await;
        assert_eq!(
            refusal(&reply),
            (-32097, "outcome_unknown".to_owned()),
            "{reply}"
        );
    }
    assert_eq!(upstream.calls_of("note"), 2);

    // What the upstream saw: the revision's headers mirroring the body, no session.
    let received = upstream.received.lock().expect("received").clone();
    assert_eq!(received[0].method, "server/discover");
    let call = received
        .iter()
        .find(|request| request.method == "tools/call")
        .expect("a call");
    assert_eq!(call.header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(call.header("mcp-method"), Some("tools/call"));
    assert_eq!(call.header("mcp-name"), Some("create_invoice"));
    assert!(received.iter().all(|request| {
        request.header("mcp-session-id").is_none() && request.header("authorization").is_none()
    }));
    task.abort();
    server.abort();
}
