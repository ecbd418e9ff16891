//! The serving certificates of a fake API server and of its fake etcd members, signed by the
//! cluster's CA and etcd CA (the `tls.crt` and `tls.key` of the `<cluster>-ca` and
//! `<cluster>-etcd` Secrets Cluster API makes: an RSA key in PKCS#1, or any key in PKCS#8).

use std::sync::Arc;

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair,
    PublicKeyData, SignatureAlgorithm, SigningKey,
};
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::InMemoryError;

/// An RSA CA key in PKCS#1 (`RSA PRIVATE KEY`), which rcgen's ring backend does not read.
struct RsaSigner {
    key: RsaKeyPair,
}

impl PublicKeyData for RsaSigner {
    fn der_bytes(&self) -> &[u8] {
        self.key.public().as_ref()
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        &rcgen::PKCS_RSA_SHA256
    }
}

impl SigningKey for RsaSigner {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        let mut signature = vec![0; self.key.public().modulus_len()];
        self.key
            .sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), msg, &mut signature)
            .map_err(|_| rcgen::Error::RingUnspecified)?;
        Ok(signature)
    }
}

fn cert_error(error: rcgen::Error) -> InMemoryError {
    InMemoryError::Certificate(error.to_string())
}

/// Who a serving certificate names, and the one ALPN protocol offered.
#[derive(Debug, Clone)]
pub struct Identity<'a> {
    /// Subject common name.
    pub common_name: &'a str,
    /// DNS names or IP literals.
    pub names: Vec<String>,
    /// Also good for client auth (etcd certificates are).
    pub client_auth: bool,
    /// `http/1.1` or `h2`.
    pub alpn: &'static [u8],
}

/// A TLS configuration presenting a fresh certificate for `identity`, signed by the CA
/// `ca_cert_pem` / `ca_key_pem`.
///
/// # Errors
/// [`InMemoryError::Certificate`] when the CA does not parse or signing fails,
/// [`InMemoryError::Tls`] when rustls refuses the result.
pub fn server_config(
    ca_cert_pem: &str,
    ca_key_pem: &str,
    identity: Identity<'_>,
) -> Result<Arc<ServerConfig>, InMemoryError> {
    let key = KeyPair::generate().map_err(cert_error)?;
    let mut params = CertificateParams::new(identity.names).map_err(cert_error)?;
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, identity.common_name);
    params.distinguished_name = subject;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    if identity.client_auth {
        params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ClientAuth);
    }
    let certificate = match KeyPair::from_pem(ca_key_pem) {
        Ok(ca_key) => {
            let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, ca_key).map_err(cert_error)?;
            params.signed_by(&key, &issuer).map_err(cert_error)?
        }
        Err(_) => {
            let pem = pem_contents(ca_key_pem, "RSA PRIVATE KEY")?;
            let rsa = RsaKeyPair::from_der(&pem)
                .map_err(|e| InMemoryError::Certificate(format!("read the CA key: {e}")))?;
            let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, RsaSigner { key: rsa })
                .map_err(cert_error)?;
            params.signed_by(&key, &issuer).map_err(cert_error)?
        }
    };
    let chain: Vec<CertificateDer<'static>> = vec![certificate.der().clone()];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(InMemoryError::Tls)?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(InMemoryError::Tls)?;
    config.alpn_protocols = vec![identity.alpn.to_vec()];
    Ok(Arc::new(config))
}

/// The DER inside the first PEM block labelled `label`.
fn pem_contents(text: &str, label: &str) -> Result<Vec<u8>, InMemoryError> {
    use base64::Engine;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let body = text
        .split_once(&begin)
        .and_then(|(_, rest)| rest.split_once(&end))
        .map(|(body, _)| body)
        .ok_or_else(|| {
            InMemoryError::Certificate(format!("the CA key is neither PKCS#8 nor {label}"))
        })?;
    let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|e| InMemoryError::Certificate(format!("read the CA key: {e}")))
}
