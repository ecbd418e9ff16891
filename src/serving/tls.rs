//! TLS shared by the manager's two HTTPS servers, the diagnostics endpoint and the webhook server:
//! the `--tls-min-version` floor, the self-signed certificate the diagnostics endpoint makes at
//! start-up (as controller-runtime's secure metrics server does without a cert dir), and an axum
//! listener that completes TLS handshakes concurrently, off the accept loop (`tls-listener`).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;
use rustls::ConfigBuilder;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Lowest TLS version a server accepts (Go's constant names, as the `--tls-min-version` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TlsMinVersion {
    /// TLS 1.2 and 1.3.
    #[value(name = "VersionTLS12")]
    Tls12,
    /// TLS 1.3 only.
    #[value(name = "VersionTLS13")]
    Tls13,
}

/// A server configuration builder on `provider` accepting `min_version` and newer; both servers
/// start from it.
pub fn server_config_builder(
    provider: Arc<CryptoProvider>,
    min_version: TlsMinVersion,
) -> Result<ConfigBuilder<ServerConfig, rustls::WantsVerifier>, rustls::Error> {
    let versions: &[&'static rustls::SupportedProtocolVersion] = match min_version {
        TlsMinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsMinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    ServerConfig::builder_with_provider(provider).with_protocol_versions(versions)
}

/// How long a client may take to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the TLS configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating the key or certificate failed.
    #[error("generate the self-signed diagnostics certificate")]
    Certificate(#[source] rcgen::Error),
    /// rustls rejected the configuration.
    #[error("configure TLS for the diagnostics endpoint")]
    Config(#[source] rustls::Error),
}

/// A TLS server configuration and the self-signed certificate it presents.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    /// The configuration to serve with.
    pub config: Arc<ServerConfig>,
    /// The certificate (DER), for clients that want to pin it.
    pub certificate: CertificateDer<'static>,
}

/// A server configuration with a fresh self-signed certificate for `names` (DNS names or IP
/// literals), accepting `min_version` and newer, speaking HTTP/1.1.
pub fn self_signed_server_config(
    names: Vec<String>,
    min_version: TlsMinVersion,
) -> Result<SelfSigned, TlsError> {
    let certified = rcgen::generate_simple_self_signed(names).map_err(TlsError::Certificate)?;
    let certificate: CertificateDer<'static> = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let mut config = server_config_builder(
        Arc::new(rustls::crypto::ring::default_provider()),
        min_version,
    )
    .map_err(TlsError::Config)?
    .with_no_client_auth()
    .with_single_cert(vec![certificate.clone()], key)
    .map_err(TlsError::Config)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(SelfSigned {
        config: Arc::new(config),
        certificate,
    })
}

/// An [`axum::serve::Listener`] yielding TLS streams: `tls-listener` runs the handshakes
/// concurrently, so one slow client cannot stall the others, and drops those that take longer
/// than [`HANDSHAKE_TIMEOUT`].
pub struct TlsListener {
    inner: tls_listener::TlsListener<TcpListener, TlsAcceptor>,
    local_addr: SocketAddr,
}

impl TlsListener {
    /// Serves TLS with `config` on the bound `listener`.
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let inner = tls_listener::builder(TlsAcceptor::from(config))
            .handshake_timeout(HANDSHAKE_TIMEOUT)
            .listen(listener);
        Ok(Self { inner, local_addr })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok(connection) => return connection,
                Err(tls_listener::Error::ListenerError(error)) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %error, "Accepting a TLS connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                // A client that cannot or does not finish its handshake (a probe, a port scan)
                // is its own problem, not the server's.
                Err(error) => tracing::debug!(
                    peer = ?error.peer_addr(),
                    error = %error,
                    "TLS handshake failed"
                ),
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::TlsConnector;

    /// One GET over TLS to `address`, trusting only `certificate`; the response text.
    async fn get(address: SocketAddr, certificate: CertificateDer<'static>) -> String {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(certificate).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let tcp = TcpStream::connect(address).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .unwrap();
        tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        tls.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test]
    async fn a_client_stuck_in_its_handshake_does_not_hold_up_the_others() {
        let self_signed =
            self_signed_server_config(vec!["localhost".into()], TlsMinVersion::Tls12).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let listener = TlsListener::new(tcp, self_signed.config).unwrap();
        let address = axum::serve::Listener::local_addr(&listener).unwrap();
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "served" }));
        let server = tokio::spawn(async move { axum::serve(listener, app).await });

        // Connects and never says a word, and a second one sends garbage instead of a hello.
        let _silent = TcpStream::connect(address).await.unwrap();
        let mut garbage = TcpStream::connect(address).await.unwrap();
        garbage.write_all(b"not TLS\r\n\r\n").await.unwrap();

        let response = tokio::time::timeout(
            Duration::from_secs(5),
            get(address, self_signed.certificate),
        )
        .await
        .expect("served while another client is mid-handshake");
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.ends_with("served"), "{response}");
        server.abort();
    }
}
