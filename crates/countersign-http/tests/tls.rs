//! HTTPS through the one constructor against a local CA made with `openssl` (issue #32): a
//! trusted CA works end to end; an unknown CA, a wrong host name and an empty trust fail
//! closed with the reason; plain HTTP needs no roots.

use std::net::SocketAddr;

use countersign_http::testing::{Leaf, LocalCa, server_config, terminate_tls};
use countersign_http::{TlsFailure, Trust, client, tls_failure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A plain HTTP server that answers every request `200 hello` and counts requests.
async fn plain_server() -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = std::sync::Arc::clone(&seen);
            tokio::spawn(async move {
                let mut buffer = vec![0_u8; 8192];
                let mut read = 0;
                while !buffer[..read]
                    .windows(4)
                    .any(|window| window == b"\r\n\r\n")
                {
                    match socket.read(&mut buffer[read..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read += n,
                    }
                }
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
                    )
                    .await;
            });
        }
    });
    (address, count)
}

struct Fixture {
    _folder: tempfile::TempDir,
    ca: LocalCa,
    other_ca: LocalCa,
    port: u16,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    plain: SocketAddr,
}

/// A TLS terminator presenting a leaf for `localhost` and 127.0.0.1 only, signed by `ca`.
async fn fixture() -> Fixture {
    let folder = tempfile::tempdir().expect("a folder");
    let ca = LocalCa::new(folder.path(), "ca").expect("a CA");
    let other_ca = LocalCa::new(folder.path(), "other").expect("another CA");
    let leaf: Leaf = ca
        .leaf("upstream", &["DNS:localhost", "IP:127.0.0.1"])
        .expect("a leaf");
    let (plain, requests) = plain_server().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    terminate_tls(listener, server_config(&leaf).expect("config"), plain);
    Fixture {
        _folder: folder,
        ca,
        other_ca,
        port,
        requests,
        plain,
    }
}

#[tokio::test]
async fn a_trusted_local_ca_works_end_to_end() {
    let fixture = fixture().await;
    let trust = Trust::pem_file(&fixture.ca.certificate()).expect("the CA");
    let client = client(&trust).expect("a client");
    for host in ["localhost", "127.0.0.1"] {
        let response = client
            .get(format!("https://{host}:{}/", fixture.port))
            .send()
            .await
            .expect("a TLS exchange");
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.expect("body"), "hello");
    }
    assert_eq!(
        fixture.requests.load(std::sync::atomic::Ordering::SeqCst),
        2
    );
}

#[tokio::test]
async fn an_unknown_ca_fails_closed_before_any_request_is_sent() {
    let fixture = fixture().await;
    for trust in [
        Trust::pem_file(&fixture.other_ca.certificate()).expect("the other CA"),
        Trust::nothing(),
    ] {
        let error = client(&trust)
            .expect("a client")
            .get(format!("https://localhost:{}/", fixture.port))
            .send()
            .await
            .expect_err("an untrusted certificate");
        assert!(error.is_connect(), "{error:?}");
        assert_eq!(
            tls_failure(&error, &trust),
            Some(TlsFailure::UnknownAuthority {
                no_system_roots: None
            }),
            "{error:?}"
        );
    }
    assert_eq!(
        fixture.requests.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing reached the server"
    );
}

#[tokio::test]
async fn a_certificate_for_another_host_name_fails() {
    let fixture = fixture().await;
    let trust = Trust::pem_file(&fixture.ca.certificate()).expect("the CA");
    // 127.0.0.2 is loopback too, but not a name the certificate holds.
    let listener = TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind 127.0.0.2");
    let port = listener.local_addr().expect("address").port();
    let leaf = fixture
        .ca
        .leaf("elsewhere", &["DNS:elsewhere.test"])
        .expect("a leaf");
    terminate_tls(
        listener,
        server_config(&leaf).expect("config"),
        fixture.plain,
    );
    let error = client(&trust)
        .expect("a client")
        .get(format!("https://127.0.0.2:{port}/"))
        .send()
        .await
        .expect_err("a certificate for another name");
    assert_eq!(
        tls_failure(&error, &trust),
        Some(TlsFailure::WrongHost),
        "{error:?}"
    );
    assert_eq!(
        fixture.requests.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

#[tokio::test]
async fn plain_http_needs_no_roots() {
    let fixture = fixture().await;
    let response = client(&Trust::nothing())
        .expect("a client")
        .get(format!("http://{}/", fixture.plain))
        .send()
        .await
        .expect("plain HTTP");
    assert_eq!(response.text().await.expect("body"), "hello");
    assert!(
        tls_failure(
            &client(&Trust::nothing())
                .expect("a client")
                .get("http://127.0.0.1:9/")
                .send()
                .await
                .expect_err("nothing listens on port 9"),
            &Trust::nothing()
        )
        .is_none()
    );
}
