//! Test support (feature `_test-tls`, internal): a local certificate authority made with the
//! `openssl` command at test time, and a TLS terminator in front of a plain TCP server that
//! uses the same RustCrypto provider as every client. No ring or aws-lc, not even for tests.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};

/// A certificate authority in a folder: `ca.pem` (its certificate) and `ca.key`.
#[derive(Clone, Debug)]
pub struct LocalCa {
    folder: PathBuf,
    name: String,
}

/// A server certificate signed by a [`LocalCa`]: `<name>.pem` and `<name>.key` (PKCS#8).
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The certificate, PEM.
    pub certificate: PathBuf,
    /// Its private key, PKCS#8 PEM.
    pub key: PathBuf,
}

fn openssl(folder: &Path, args: &[&str]) -> io::Result<()> {
    let output = std::process::Command::new("openssl")
        .current_dir(folder)
        .args(args)
        .output()
        .map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("cannot run `openssl` (the tests make their CA with it): {error}"),
            )
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "`openssl {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        )))
    }
}

impl LocalCa {
    /// A new P-256 authority named `name` (its files start with `name`) in `folder`.
    ///
    /// # Errors
    ///
    /// `openssl` is missing or fails.
    pub fn new(folder: &Path, name: &str) -> io::Result<LocalCa> {
        let key = format!("{name}.key");
        let certificate = format!("{name}.pem");
        openssl(
            folder,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &certificate,
                "-days",
                "2",
                "-subj",
                &format!("/CN={name} test authority"),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        )?;
        Ok(LocalCa {
            folder: folder.to_path_buf(),
            name: name.to_owned(),
        })
    }

    /// The authority's certificate (PEM), what `--upstream-ca` names.
    pub fn certificate(&self) -> PathBuf {
        self.folder.join(format!("{}.pem", self.name))
    }

    /// A server certificate for `names` (`DNS:localhost`, `IP:127.0.0.1`, …), files named
    /// after `leaf`.
    ///
    /// # Errors
    ///
    /// `openssl` fails.
    pub fn leaf(&self, leaf: &str, names: &[&str]) -> io::Result<Leaf> {
        let raw_key = format!("{leaf}.raw.key");
        let key = format!("{leaf}.key");
        let request = format!("{leaf}.csr");
        let certificate = format!("{leaf}.pem");
        let extensions = format!("{leaf}.ext");
        std::fs::write(
            self.folder.join(&extensions),
            format!(
                "subjectAltName={}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
                names.join(",")
            ),
        )?;
        openssl(
            &self.folder,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &raw_key,
                "-out",
                &request,
                "-subj",
                &format!("/CN={leaf}"),
            ],
        )?;
        openssl(
            &self.folder,
            &[
                "x509",
                "-req",
                "-in",
                &request,
                "-CA",
                &format!("{}.pem", self.name),
                "-CAkey",
                &format!("{}.key", self.name),
                "-CAcreateserial",
                "-out",
                &certificate,
                "-days",
                "2",
                "-extfile",
                &extensions,
            ],
        )?;
        openssl(
            &self.folder,
            &["pkcs8", "-topk8", "-nocrypt", "-in", &raw_key, "-out", &key],
        )?;
        Ok(Leaf {
            certificate: self.folder.join(certificate),
            key: self.folder.join(key),
        })
    }
}

/// A rustls server configuration presenting `leaf`, with [`crate::provider`].
///
/// # Errors
///
/// The files cannot be read or rustls refuses them.
pub fn server_config(leaf: &Leaf) -> io::Result<rustls::ServerConfig> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&leaf.certificate)
        .map_err(io::Error::other)?
        .collect::<Result<_, _>>()
        .map_err(io::Error::other)?;
    let key = PrivateKeyDer::from_pem_file(&leaf.key).map_err(io::Error::other)?;
    rustls::ServerConfig::builder_with_provider(crate::provider())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(io::Error::other)
}

/// Terminate TLS on `listener` with `config` and pass each connection's bytes to the plain
/// TCP server at `plain`, until the task is aborted. A failed handshake just ends that
/// connection.
pub fn terminate_tls(
    listener: TcpListener,
    config: rustls::ServerConfig,
    plain: SocketAddr,
) -> tokio::task::JoinHandle<()> {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let Ok(mut inner) = TcpStream::connect(plain).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut inner).await;
            });
        }
    })
}
