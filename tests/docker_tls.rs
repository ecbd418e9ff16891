//! A remote engine over TLS, as `DOCKER_HOST=tcp://…` with `DOCKER_TLS_VERIFY` and
//! `DOCKER_CERT_PATH` name it: a TLS-terminating proxy that requires a client certificate stands
//! in front of the local engine's socket, and the provider's engine client talks through it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "webhook_support/mod.rs"]
mod webhook_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capd::docker::{
    ContainerRuntime, DockerEngine, EngineAddress, EngineKind, HostInfo, Labels, TlsFiles,
};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use rustls::server::WebPkiClientVerifier;
use tokio::net::{TcpListener, UnixStream};
use tokio_rustls::TlsAcceptor;
use webhook_support::{Ca, Issued};

/// The local engine's socket, from `DOCKER_HOST` when it names one.
fn local_socket() -> PathBuf {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"))
}

/// Serves TLS on a loopback port, accepting only clients whose certificate `client_ca` signed,
/// and pipes every accepted connection to the local engine. Returns the port and how many
/// handshakes it refused.
async fn tls_proxy(server: &Issued, client_ca: &Ca) -> (u16, Arc<std::sync::atomic::AtomicU32>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(client_ca.der()).unwrap();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![server.der.clone()],
            PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let refused = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = refused.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    return;
                };
                let Ok(mut engine) = UnixStream::connect(local_socket()).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut engine).await;
            });
        }
    });
    (port, refused)
}

/// Writes `ca.pem`, `cert.pem` and `key.pem` as the Docker CLI expects them in its cert path.
fn cert_dir(dir: &Path, engine_ca: &Ca, client: &Issued) -> TlsFiles {
    std::fs::write(dir.join("ca.pem"), engine_ca.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), &client.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &client.key_pem).unwrap();
    TlsFiles::in_dir(dir)
}

#[tokio::test]
async fn a_remote_engine_is_reached_over_tls_with_a_client_certificate() {
    let engine_ca = Ca::new("engine-ca");
    let client_ca = Ca::new("client-ca");
    let (port, refused) = tls_proxy(&engine_ca.issue(), &client_ca).await;
    let dir = tempfile::tempdir().unwrap();
    let files = cert_dir(
        dir.path(),
        &engine_ca,
        &client_ca.issue_for(&["capd-client"]),
    );

    // Read from the environment as the Docker CLI reads it, then used.
    let cert_path = dir.path().to_string_lossy().into_owned();
    let address = EngineAddress::from_lookup(|name| match name {
        "DOCKER_HOST" => Some(format!("tcp://127.0.0.1:{port}")),
        "DOCKER_TLS_VERIFY" => Some("1".into()),
        "DOCKER_CERT_PATH" => Some(cert_path.clone()),
        _ => None,
    })
    .unwrap();
    assert_eq!(address.tls.as_ref(), Some(&files));
    let engine = DockerEngine::connect_to(&address)
        .await
        .expect("connect over TLS");
    assert!(engine.api_version().starts_with("1."));
    // Real calls go through: what the engine reports matches the local engine's own answer.
    let local = DockerEngine::connect_to(&EngineAddress {
        host: format!("unix://{}", local_socket().display()),
        tls: None,
    })
    .await
    .unwrap();
    // Podman's own facts (its cgroup controllers) are read over plain connections only.
    let local_facts = local.host_info().await.unwrap();
    let local_facts = match engine.engine().kind {
        EngineKind::Podman => HostInfo {
            cgroup_controllers: None,
            ..local_facts
        },
        EngineKind::Docker => local_facts,
    };
    assert_eq!(engine.engine(), local.engine());
    assert_eq!(engine.host_info().await.unwrap(), local_facts);
    let all = Labels::new();
    assert_eq!(
        engine.list_networks(&all).await.unwrap().len(),
        local.list_networks(&all).await.unwrap().len()
    );
    assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_engine_or_client_that_is_not_trusted_is_refused_clearly() {
    let engine_ca = Ca::new("engine-ca");
    let client_ca = Ca::new("client-ca");
    let (port, refused) = tls_proxy(&engine_ca.issue(), &client_ca).await;
    let host = format!("tcp://127.0.0.1:{port}");

    // The client's certificate comes from a CA the proxy does not trust.
    let stranger = Ca::new("stranger-ca");
    let dir = tempfile::tempdir().unwrap();
    let tls = Some(cert_dir(
        dir.path(),
        &engine_ca,
        &stranger.issue_for(&["x"]),
    ));
    let err = DockerEngine::connect_to(&EngineAddress {
        host: host.clone(),
        tls,
    })
    .await
    .expect_err("a client certificate of another CA must be refused");
    assert_eq!(err.category(), "connect");
    assert!(err.to_string().contains(&host), "{err}");
    assert!(refused.load(std::sync::atomic::Ordering::SeqCst) >= 1);

    // The engine's certificate is not signed by the CA in ca.pem.
    let dir = tempfile::tempdir().unwrap();
    let tls = Some(cert_dir(
        dir.path(),
        &stranger,
        &client_ca.issue_for(&["y"]),
    ));
    let err = DockerEngine::connect_to(&EngineAddress { host, tls })
        .await
        .expect_err("an engine certificate of another CA must be refused");
    assert_eq!(err.category(), "connect");
}
