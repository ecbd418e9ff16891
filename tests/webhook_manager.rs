//! The webhook server inside the manager: `run` serves `/convert` and the admission endpoints on
//! `--webhook-port` with the certificate from `--webhook-cert-dir` (and its flag-named files), and
//! a manager started before its certificate exists serves webhooks once it appears.

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod manager_support;
mod webhook_support;

use std::time::Duration;

use capd::manager::{self, Args, Wiring};
use capd::webhooks::{CONVERT_PATH, Endpoint, Kind};
use clap::Parser;
use manager_support::{FakeApi, eventually, free_port};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use webhook_support::{Ca, Issued, client_config, request, write_atomically};

const SOON: Duration = Duration::from_secs(15);

fn write_named(dir: &std::path::Path, issued: &Issued) {
    write_atomically(&dir.join("serving.key"), issued.key_pem.as_bytes());
    write_atomically(&dir.join("serving.crt"), issued.cert_pem.as_bytes());
}

/// Starts the manager with webhook flags; returns the webhook port and the shutdown token.
fn start(
    api: &FakeApi,
    dir: &std::path::Path,
    cert_dir: &std::path::Path,
    extra: &[&str],
) -> (
    u16,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), manager::RunError>>,
) {
    let port = free_port();
    let mut argv = vec![
        "manager".to_owned(),
        format!("--kubeconfig={}", api.kubeconfig(dir).display()),
        "--health-addr=0".to_owned(),
        "--diagnostics-address=0".to_owned(),
        format!("--webhook-port={port}"),
        format!("--webhook-cert-dir={}", cert_dir.display()),
        "--webhook-cert-name=serving.crt".to_owned(),
        "--webhook-key-name=serving.key".to_owned(),
    ];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    let args = Args::try_parse_from(argv).unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(manager::run(
        args,
        Wiring::without_controllers(),
        shutdown.clone(),
    ));
    (port, shutdown, task)
}

fn cluster_template_review() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta2", "kind": "DockerClusterTemplate"},
            "operation": "CREATE",
            "name": "ct1",
            "object": {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "DockerClusterTemplate",
                "metadata": {"name": "ct1", "namespace": "default"},
                "spec": {"template": {"spec": {}}},
            },
        },
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_serves_webhooks_with_the_flagged_certificate_and_feature_gates() {
    let api = FakeApi::start(true).await;
    let (dir, certs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ca = Ca::new("manager-webhook-ca");
    write_named(certs.path(), &ca.issue());
    let (port, shutdown, task) = start(
        &api,
        dir.path(),
        certs.path(),
        &["--feature-gates=ClusterTopology=true"],
    );
    let addr = ([127, 0, 0, 1], port).into();
    let config = client_config(
        &[ca.der()],
        &[&rustls::version::TLS13, &rustls::version::TLS12],
    );
    let path = Endpoint::Validate(Kind::DockerClusterTemplate).path();
    let answer = eventually(SOON, "the webhook server to answer", || {
        let config = config.clone();
        let path = path.clone();
        async move {
            request(
                addr,
                config,
                "POST",
                &path,
                Some("application/json"),
                cluster_template_review(),
            )
            .await
            .ok()
        }
    })
    .await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.json()["response"]["allowed"],
        true,
        "ClusterTopology=true lets DockerClusterTemplates be created"
    );
    shutdown.cancel();
    let result = tokio::time::timeout(SOON, task).await.unwrap().unwrap();
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_written_after_start_is_picked_up() {
    let api = FakeApi::start(true).await;
    let (dir, certs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (port, shutdown, task) = start(&api, dir.path(), certs.path(), &[]);
    let addr = ([127, 0, 0, 1], port).into();
    let ca = Ca::new("late-ca");
    let config = client_config(&[ca.der()], &[&rustls::version::TLS13]);
    let review = serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c1", "desiredAPIVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "objects": []},
    }))
    .unwrap();

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "nothing listens before the certificate exists"
    );
    assert!(
        !task.is_finished(),
        "a missing certificate is waited for, not fatal"
    );

    write_named(certs.path(), &ca.issue());
    let answer = eventually(SOON, "the webhook server to start", || {
        let (config, review) = (config.clone(), review.clone());
        async move {
            request(
                addr,
                config,
                "POST",
                CONVERT_PATH,
                Some("application/json"),
                review,
            )
            .await
            .ok()
        }
    })
    .await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["response"]["result"]["status"], "Success");
    shutdown.cancel();
    let result = tokio::time::timeout(SOON, task).await.unwrap().unwrap();
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_certificate_stops_the_start() {
    let api = FakeApi::start(true).await;
    let (dir, certs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_atomically(&certs.path().join("serving.crt"), b"not a certificate");
    write_atomically(&certs.path().join("serving.key"), b"not a key");
    let (_port, _shutdown, task) = start(&api, dir.path(), certs.path(), &[]);
    let error = tokio::time::timeout(SOON, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    let chain = capd::runtime::error_chain(&error);
    assert!(
        chain.starts_with(
            "failed to load the webhook serving certificate: failed to find a PEM certificate in "
        ),
        "{chain}"
    );
}
