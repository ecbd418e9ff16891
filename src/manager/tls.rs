//! TLS for the diagnostics endpoint: a self-signed certificate made at start-up (as
//! controller-runtime's secure metrics server does without a cert dir) and an axum listener that
//! completes TLS handshakes off the accept loop (the webhook server uses it too).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::args::TlsMinVersion;

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
    let versions: &[&'static rustls::SupportedProtocolVersion] = match min_version {
        TlsMinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsMinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
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

/// An [`axum::serve::Listener`] yielding TLS streams. A background task accepts TCP connections
/// and runs each handshake in its own task, so one slow client cannot stall the others. The task
/// ends when the listener is dropped.
pub struct TlsListener {
    incoming: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: SocketAddr,
}

impl TlsListener {
    /// Serves TLS with `config` on the bound `listener`.
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let (sender, incoming) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(accept_loop(listener, acceptor, sender));
        Ok(Self {
            incoming,
            local_addr,
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    sender: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let accepted = tokio::select! {
            () = sender.closed() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(peer = %peer, error = %error, "TLS handshake failed");
                        }
                        Err(_) => tracing::debug!(peer = %peer, "TLS handshake timed out"),
                    }
                });
            }
            Err(error) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %error, "Accepting a TLS connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(connection) => connection,
            // The accept loop only ends once this listener is gone; never reached in practice.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}
