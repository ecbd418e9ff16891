//! The serving certificate: read from `--webhook-cert-dir` at start, re-read when the files
//! change (cert-manager rotates them through the mounted Secret), and handed to every new TLS
//! handshake through a rustls certificate resolver, so rotation needs no restart.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use crate::runtime::error_chain;
use crate::serving::tls::{TlsMinVersion, server_config_builder};

/// How often the certificate files are checked for changes.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// Why the serving certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// A file could not be read.
    #[error("failed to read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate file holds no PEM certificate.
    #[error("failed to find a PEM certificate in {}", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A PEM section could not be decoded.
    #[error("failed to decode the PEM in {}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The key is unusable or does not belong to the certificate.
    #[error("failed to pair the key in {} with the certificate in {}", key.display(), cert.display())]
    KeyPair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// rustls refused the server configuration.
    #[error("failed to configure TLS for the webhook server")]
    Config(#[source] rustls::Error),
}

/// The certificate and key files, and the pair currently served.
pub struct ServingCertificate {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// File contents the current pair was made from, to notice changes.
    loaded_from: Mutex<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for ServingCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServingCertificate")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

impl ServingCertificate {
    /// Loads the pair from `cert_path` and `key_path` (PEM; the certificate file may hold a
    /// chain, the key may be PKCS#1, PKCS#8 or SEC1).
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Arc<Self>, CertificateError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (cert_pem, key_pem) = read_pair(cert_path, key_path)?;
        let pair = certified_key(cert_path, &cert_pem, key_path, &key_pem, &provider)?;
        Ok(Arc::new(Self {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            provider,
            current: RwLock::new(Arc::new(pair)),
            loaded_from: Mutex::new((cert_pem, key_pem)),
        }))
    }

    /// A TLS server configuration that serves the current pair to every new connection,
    /// accepting `min_version` and newer (TLS 1.2 at the least), speaking HTTP/1.1.
    pub fn server_config(
        self: &Arc<Self>,
        min_version: TlsMinVersion,
    ) -> Result<Arc<rustls::ServerConfig>, CertificateError> {
        let mut config = server_config_builder(self.provider.clone(), min_version)
            .map_err(CertificateError::Config)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// Re-reads the files; serves the new pair when they changed and form a valid pair.
    /// Returns whether the served pair changed. On error the previous pair stays in use.
    pub fn reload(&self) -> Result<bool, CertificateError> {
        let (cert_pem, key_pem) = read_pair(&self.cert_path, &self.key_path)?;
        let mut loaded_from = self
            .loaded_from
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if loaded_from.0 == cert_pem && loaded_from.1 == key_pem {
            return Ok(false);
        }
        let pair = certified_key(
            &self.cert_path,
            &cert_pem,
            &self.key_path,
            &key_pem,
            &self.provider,
        )?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(pair);
        *loaded_from = (cert_pem, key_pem);
        Ok(true)
    }

    /// Calls [`ServingCertificate::reload`] every `interval` until `stop` is cancelled. A failed
    /// reload (for example a half-written rotation) is logged and retried on the next tick.
    pub async fn watch(self: Arc<Self>, interval: Duration, stop: CancellationToken) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            match self.reload() {
                Ok(true) => {
                    failing = false;
                    tracing::info!(cert = %self.cert_path.display(), "Reloaded the webhook serving certificate");
                }
                Ok(false) => failing = false,
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(
                        error = %error_chain(&error),
                        "Cannot reload the webhook serving certificate; still serving the previous one"
                    );
                }
                Err(_) => {}
            }
        }
    }

    /// The pair served right now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn read_pair(cert_path: &Path, key_path: &Path) -> Result<(Vec<u8>, Vec<u8>), CertificateError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| CertificateError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    Ok((read(cert_path)?, read(key_path)?))
}

fn certified_key(
    cert_path: &Path,
    cert_pem: &[u8],
    key_path: &Path,
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, CertificateError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| CertificateError::Pem {
            path: cert_path.to_path_buf(),
            source,
        })?;
    if chain.is_empty() {
        return Err(CertificateError::NoCertificate {
            path: cert_path.to_path_buf(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| CertificateError::Pem {
        path: key_path.to_path_buf(),
        source,
    })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|source| CertificateError::KeyPair {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        source,
    })
}
