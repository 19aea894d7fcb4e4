//! TLS to a Streamable HTTP upstream (issue #32), against a local certificate authority made
//! with the `openssl` command: a trusted CA (`GatewayConfig::upstream_trust`, the CLI's
//! `--upstream-ca FILE`) works end to end; an unknown CA and a certificate for another host
//! name fail closed before anything reaches the upstream, with a message that names the
//! upstream and says what to do, and the call is `not_executed`.

use countersign::EffectState;
use countersign_gateway::{Gateway, Upstream};
use countersign_http::Trust;
use countersign_http::testing::{LocalCa, server_config, terminate_tls};
use serde_json::json;

use super::faulty_http::{self, Faulty, Mode};
use super::harness::{config, connect, memory_store, policy, refusal};

const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.billing.create_invoice:\n    effect: \"invoice:{customer}\"\n    decision: allow\n";

struct TlsUpstream {
    _folder: tempfile::TempDir,
    ca: LocalCa,
    other: LocalCa,
    /// `https://localhost:PORT/mcp`; the certificate names `localhost` and 127.0.0.1.
    url: String,
    port: u16,
    upstream: std::sync::Arc<Faulty>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for TlsUpstream {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The sessions upstream of `faulty_http`, behind a TLS terminator with a leaf of a local CA.
async fn tls_upstream(names: &[&str]) -> TlsUpstream {
    let folder = tempfile::tempdir().expect("a folder");
    let ca = LocalCa::new(folder.path(), "ca").expect("a CA (needs the openssl command)");
    let other = LocalCa::new(folder.path(), "other").expect("another CA");
    let leaf = ca.leaf("upstream", names).expect("a leaf");
    let (plain_url, upstream, server) = faulty_http::start_in(Mode::Sessions).await;
    let plain = plain_url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("the plain upstream's address");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let terminator = terminate_tls(listener, server_config(&leaf).expect("TLS config"), plain);
    TlsUpstream {
        _folder: folder,
        ca,
        other,
        url: format!("https://localhost:{port}/mcp"),
        port,
        upstream,
        tasks: vec![server, terminator],
    }
}

#[tokio::test]
async fn a_trusted_local_ca_carries_a_call_end_to_end() {
    let tls = tls_upstream(&["DNS:localhost", "IP:127.0.0.1"]).await;
    let store = memory_store();
    let mut config = config("billing");
    config.upstream_trust = Some(Trust::pem_file(&tls.ca.certificate()).expect("the CA"));
    let gateway = Gateway::new(config, policy(POLICY), store.clone()).expect("gateway");
    let (mut client, task) = connect(&gateway, Upstream::Url(tls.url.clone()));
    client.initialize(json!({})).await;
    let reply = client
        .call("create_invoice", json!({"customer": "c1"}))
        .await;
    assert_eq!(
        reply["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{reply}"
    );
    assert_eq!(tls.upstream.calls_of("create_invoice"), 1);
    let effects = store.effects(None).await.expect("effects");
    assert_eq!(effects.len(), 1);
    assert_eq!(effects[0].state, EffectState::Committed);
    task.abort();
}

/// Initialize and call through a gateway trusting `trust` at `url`: both refused, and the
/// call's refusal message.
async fn refused(url: &str, trust: Trust) -> (String, String, Vec<countersign::EffectRecord>) {
    let store = memory_store();
    let mut config = config("billing");
    config.upstream_trust = Some(trust);
    let gateway = Gateway::new(config, policy(POLICY), store.clone()).expect("gateway");
    let (mut client, task) = connect(&gateway, Upstream::Url(url.to_owned()));
    let initialize = client
        .request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        )
        .await;
    let initialize_message = initialize["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("initialize is refused: {initialize}"))
        .to_owned();
    let call = client
        .call("create_invoice", json!({"customer": "c1"}))
        .await;
    assert_eq!(
        refusal(&call),
        (-32098, "not_executed".to_owned()),
        "{call}"
    );
    let call_message = call["error"]["message"]
        .as_str()
        .expect("message")
        .to_owned();
    task.abort();
    assert!(!initialize_message.is_empty());
    (
        initialize_message,
        call_message,
        store.effects(None).await.expect("effects"),
    )
}

#[tokio::test]
async fn an_unknown_ca_fails_closed_naming_the_upstream_and_what_to_do() {
    let tls = tls_upstream(&["DNS:localhost", "IP:127.0.0.1"]).await;
    for trust in [
        Trust::pem_file(&tls.other.certificate()).expect("the other CA"),
        Trust::nothing(),
    ] {
        let (initialize, call, effects) = refused(&tls.url, trust).await;
        for message in [&initialize, &call] {
            assert!(
                message.contains(&format!("`https://localhost:{}`", tls.port)),
                "{message}"
            );
            assert!(
                message.contains("does not trust") && message.contains("--upstream-ca FILE"),
                "{message}"
            );
        }
        assert!(call.contains("nothing was sent"), "{call}");
        // Never ambiguous: the handshake failed before any byte left, so the call is refused
        // before it is attempted, and nothing is recorded.
        assert!(effects.is_empty(), "{effects:?}");
    }
    assert!(
        tls.upstream.received.lock().expect("received").is_empty(),
        "nothing reached the upstream"
    );
}

#[tokio::test]
async fn a_certificate_for_another_host_name_fails_closed() {
    let tls = tls_upstream(&["DNS:mcp.internal.test"]).await;
    let trust = Trust::pem_file(&tls.ca.certificate()).expect("the CA");
    let (initialize, call, _) = refused(&tls.url, trust).await;
    for message in [&initialize, &call] {
        assert!(
            message.contains("not valid for the host name") && message.contains("--upstream-url"),
            "{message}"
        );
    }
    assert!(tls.upstream.received.lock().expect("received").is_empty());
}

#[tokio::test]
async fn an_upstream_url_that_is_not_http_is_refused_at_connect() {
    let gateway = Gateway::new(config("billing"), policy(POLICY), memory_store()).expect("gateway");
    let error = gateway
        .serve_io(
            tokio::io::empty(),
            tokio::io::sink(),
            Upstream::Url("ftp://127.0.0.1/mcp".to_owned()),
        )
        .await
        .expect_err("not an HTTP URL");
    assert!(
        error.to_string().contains("not an http:// or https:// URL"),
        "{error}"
    );
}
