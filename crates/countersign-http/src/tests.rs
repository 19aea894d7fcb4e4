use super::*;

#[test]
fn a_ca_file_must_exist_and_hold_a_certificate() {
    let folder = tempfile::tempdir().expect("a folder");
    let missing = folder.path().join("missing.pem");
    let error = Trust::pem_file(&missing).expect_err("no such file");
    assert!(
        matches!(error, HttpClientError::CaUnreadable { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("missing.pem"), "{error}");

    let empty = folder.path().join("empty.pem");
    std::fs::write(&empty, "just text, no PEM block\n").expect("write");
    let error = Trust::pem_file(&empty).expect_err("no certificate");
    assert!(
        matches!(error, HttpClientError::CaUnusable { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("BEGIN CERTIFICATE"), "{error}");

    let garbage = folder.path().join("garbage.pem");
    std::fs::write(
        &garbage,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .expect("write");
    let error = Trust::pem_file(&garbage).expect_err("not a certificate");
    assert!(
        matches!(error, HttpClientError::CaUnusable { .. }),
        "{error}"
    );
}

#[test]
fn an_origin_never_carries_credentials_paths_or_queries() {
    assert_eq!(
        origin("https://user:secret@mcp.example.com:8443/mcp?token=abc"),
        "https://mcp.example.com:8443"
    );
    assert_eq!(origin("http://127.0.0.1/hook"), "http://127.0.0.1");
    assert_eq!(origin("not a url"), "not a url");
}

#[test]
fn trust_says_what_it_trusts() {
    assert_eq!(Trust::system().describe(), "the system's trust store");
    assert_eq!(Trust::nothing().describe(), "no certificate authority");
}
