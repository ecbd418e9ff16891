//! Scaffolding for the webhook server tests: a throw-away CA issuing serving certificates, the
//! server started on a loopback port with them, and a tiny HTTPS client that also reports which
//! certificate the server presented.

// Test scaffolding: a failure here is a test failure, so unwrap and panic are the point.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod cluster;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capd::serving::TlsMinVersion;
use capd::webhooks::{Settings, WebhookConfig, WebhookServer};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// How often the test servers look for rotated certificates.
pub const RELOAD_INTERVAL: Duration = Duration::from_millis(100);

/// A certificate authority that issues serving certificates for `localhost`.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A PEM certificate and key pair, and the certificate's DER to recognise it on the wire.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { issuer }
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// The CA certificate as PEM (what cert-manager injects as `caBundle`).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A serving certificate for `localhost` and 127.0.0.1.
    pub fn issue(&self) -> Issued {
        self.issue_for(&["localhost", "127.0.0.1"])
    }

    /// A serving certificate for `names` (DNS names or IP addresses).
    pub fn issue_for(&self, names: &[&str]) -> Issued {
        let names: Vec<String> = names.iter().map(|n| (*n).to_string()).collect();
        let params = CertificateParams::new(names).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }
}

/// Writes `issued` as `tls.crt` and `tls.key` into `dir`, each file replaced atomically (as the
/// kubelet updates a mounted Secret).
pub fn write_pair(dir: &Path, issued: &Issued) {
    write_atomically(&dir.join("tls.key"), issued.key_pem.as_bytes());
    write_atomically(&dir.join("tls.crt"), issued.cert_pem.as_bytes());
}

pub fn write_atomically(path: &Path, content: &[u8]) {
    let staging = path.with_extension("staging");
    std::fs::write(&staging, content).unwrap();
    std::fs::rename(&staging, path).unwrap();
}

/// A webhook server on a loopback port, stopped when dropped.
pub struct Running {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}

impl Running {
    /// Starts a server serving `issued`.
    pub async fn start(issued: &Issued, settings: Settings, min_version: TlsMinVersion) -> Self {
        let dir = tempfile::tempdir().unwrap();
        write_pair(dir.path(), issued);
        let server = WebhookServer::bind(WebhookConfig {
            host: Some("127.0.0.1".into()),
            port: 0,
            cert_dir: dir.path().to_path_buf(),
            cert_name: "tls.crt".into(),
            key_name: "tls.key".into(),
            tls_min_version: min_version,
            reload_interval: RELOAD_INTERVAL,
            settings,
        })
        .await
        .expect("the webhook server starts");
        let addr = server.local_addr().unwrap();
        let stop = CancellationToken::new();
        let task = tokio::spawn(server.serve(stop.clone()));
        Self {
            addr,
            dir,
            stop,
            task,
        }
    }

    /// Whether the server task is still running.
    pub fn is_serving(&self) -> bool {
        !self.task.is_finished()
    }
}

/// What came back from one HTTPS request.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: String,
    pub body: Vec<u8>,
    /// The certificate the server presented.
    pub server_cert: CertificateDer<'static>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {} body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// A TLS client configuration trusting `roots`, speaking `versions`.
pub fn client_config(
    roots: &[CertificateDer<'static>],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add(root.clone()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// One HTTP/1.1 request over a fresh TLS connection to `addr`, as `localhost`. The request is
/// written while the answer is read, so a server that answers before reading the whole body
/// (too large) does not dead-lock the test.
pub async fn request(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> Result<Answer, std::io::Error> {
    let exchange = async move {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let connector = tokio_rustls::TlsConnector::from(config);
        let name = ServerName::try_from("localhost").unwrap();
        let tls = connector.connect(name, tcp).await?;
        let server_cert = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .expect("the server presents a certificate")
            .clone()
            .into_owned();
        let (mut reader, mut writer) = tokio::io::split(tls);
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        if let Some(content_type) = content_type {
            head.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        head.push_str("\r\n");
        let writing = tokio::spawn(async move {
            writer.write_all(head.as_bytes()).await?;
            writer.write_all(&body).await?;
            writer.flush().await?;
            Ok::<_, std::io::Error>(writer)
        });
        let mut raw = Vec::new();
        // A server that stops reading may reset the connection after its answer.
        let read = reader.read_to_end(&mut raw).await;
        if raw.is_empty() {
            read?;
        }
        writing.abort();
        Ok::<_, std::io::Error>(parse_response(&raw, server_cert))
    };
    tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .expect("the HTTPS exchange finishes within 20s")
}

fn parse_response(raw: &[u8], server_cert: CertificateDer<'static>) -> Answer {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
    let headers = String::from_utf8_lossy(&raw[..split]).to_string();
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {headers}"));
    let mut body = raw[split + 4..].to_vec();
    if headers
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Answer {
        status,
        headers,
        body,
        server_cert,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&data[..end])
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[end + 2..end + 2 + size]);
        data = &data[end + 2 + size + 2..];
    }
}
