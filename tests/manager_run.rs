//! The manager's `run`, in-process, against a fake Kubernetes API: health and readiness, the CRD
//! wait, leader election (acquire, wait for another holder, lose, release), controller start and
//! stop, secure metrics, and start-up failures.

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod manager_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use capd::manager::{self, Args, RunError, Wiring};
use capd::runtime::{ControllerTask, error_chain};
use clap::Parser;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use manager_support::{
    ALLOWED_TOKEN, DENIED_TOKEN, FakeApi, REVOKED_TOKEN, eventually, free_port, http_get, https_get,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LEASE_NAMESPACE: &str = "capd-system";
const LEASE_NAME: &str = "controller-leader-election-capd";
const SOON: Duration = Duration::from_secs(10);

/// What the probe controller saw.
#[derive(Default)]
struct Probe {
    starts: AtomicUsize,
    stops: AtomicUsize,
}

impl Probe {
    /// Waits until the controller has been started (once).
    async fn wait_started(&self) {
        eventually(SOON, "the controller to start", || async {
            (self.starts.load(Ordering::SeqCst) == 1).then_some(())
        })
        .await;
    }
}

/// Wiring with one controller, `probe`, that requires and then passes its readiness check, and
/// runs until told to stop.
fn probe_wiring(probe: Arc<Probe>) -> Wiring {
    Wiring {
        engine_check: Some(Box::pin(async { Ok("fake engine 1.0".to_owned()) })),
        start_controllers: Box::new(move |context, stop: CancellationToken| {
            context.metrics.register_controller("probe", 1);
            context.readiness.require("probe");
            vec![ControllerTask {
                name: "probe",
                future: Box::pin(async move {
                    probe.starts.fetch_add(1, Ordering::SeqCst);
                    context.readiness.mark_ready("probe");
                    stop.cancelled().await;
                    probe.stops.fetch_add(1, Ordering::SeqCst);
                }),
            }]
        }),
    }
}

struct Running {
    health_port: u16,
    metrics_port: u16,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), RunError>>,
    _dir: tempfile::TempDir,
}

fn start(api: &FakeApi, extra: &[&str], wiring: Wiring) -> Running {
    start_as(api, "manager-token", extra, wiring)
}

/// Starts the manager authenticating with `token`.
fn start_as(api: &FakeApi, token: &str, extra: &[&str], wiring: Wiring) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.kubeconfig_with_token(dir.path(), token);
    let (health_port, metrics_port) = (free_port(), free_port());
    let mut argv = vec![
        "manager".to_owned(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--health-addr=127.0.0.1:{health_port}"),
        format!("--diagnostics-address=127.0.0.1:{metrics_port}"),
        "--leader-elect-lease-duration=2s".to_owned(),
        "--leader-elect-renew-deadline=1s".to_owned(),
        "--leader-elect-retry-period=200ms".to_owned(),
    ];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    let args = Args::try_parse_from(argv).unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(manager::run(args, wiring, shutdown.clone()));
    Running {
        health_port,
        metrics_port,
        shutdown,
        task,
        _dir: dir,
    }
}

async fn readyz(port: u16) -> Option<(u16, String)> {
    http_get(port, "/readyz").await.ok()
}

fn holder(api: &FakeApi) -> Option<String> {
    api.lease(LEASE_NAMESPACE, LEASE_NAME)?
        .spec?
        .holder_identity
}

fn lease_held_by(holder: &str, seconds: i32) -> Lease {
    let now = MicroTime(Timestamp::now());
    Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(5),
            ..LeaseSpec::default()
        }),
        ..Lease::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_until_crds_are_served_then_leads_runs_controllers_and_releases_on_shutdown() {
    let api = FakeApi::start(false).await;
    let probe = Arc::new(Probe::default());
    let manager = start(
        &api,
        &["--leader-elect", "--insecure-diagnostics"],
        probe_wiring(probe.clone()),
    );

    let (code, body) = eventually(SOON, "readyz to answer", || readyz(manager.health_port)).await;
    assert_eq!((code, body.as_str()), (503, "not ready: waiting for crds"));
    assert_eq!(
        http_get(manager.health_port, "/healthz").await.unwrap(),
        (200, "ok".to_owned())
    );
    assert_eq!(
        probe.starts.load(Ordering::SeqCst),
        0,
        "no controller before the CRDs are served"
    );
    assert!(
        holder(&api).is_none(),
        "no campaign before the CRDs are served"
    );

    api.serve_crds();
    eventually(SOON, "readyz to pass", || async {
        readyz(manager.health_port)
            .await
            .filter(|(code, _)| *code == 200)
    })
    .await;
    // Readiness does not wait for leadership (a standby is ready too): the controllers start
    // once the Lease is won, a moment later.
    probe.wait_started().await;
    assert_eq!(probe.starts.load(Ordering::SeqCst), 1);
    let leader = holder(&api).expect("the Lease is created");
    assert!(
        leader.contains('_'),
        "identity has a random suffix: {leader}"
    );

    // Renewals keep the same holder.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(holder(&api).as_deref(), Some(leader.as_str()));
    let (code, metrics) = http_get(manager.metrics_port, "/metrics").await.unwrap();
    assert_eq!(code, 200);
    assert!(
        metrics
            .contains("leader_election_master_status{name=\"controller-leader-election-capd\"} 1"),
        "{metrics}"
    );

    manager.shutdown.cancel();
    let result = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        probe.stops.load(Ordering::SeqCst),
        1,
        "the controller was told to stop"
    );
    assert_eq!(
        holder(&api).as_deref(),
        Some(""),
        "the Lease is released for a fast hand-over"
    );
    assert!(
        http_get(manager.health_port, "/healthz").await.is_err(),
        "health server stopped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_is_ready_but_runs_no_controller_until_the_lease_expires() {
    let api = FakeApi::start(true).await;
    api.put_lease(
        LEASE_NAMESPACE,
        LEASE_NAME,
        lease_held_by("go-capd-pod_123", 2),
    );
    let probe = Arc::new(Probe::default());
    let manager = start(
        &api,
        &["--leader-elect", "--insecure-diagnostics"],
        probe_wiring(probe.clone()),
    );

    let (code, _) = eventually(SOON, "readyz to pass", || async {
        readyz(manager.health_port)
            .await
            .filter(|(code, _)| *code == 200)
    })
    .await;
    assert_eq!(
        code, 200,
        "a standby must be ready or rolling updates stall"
    );
    assert_eq!(probe.starts.load(Ordering::SeqCst), 0);
    assert_eq!(holder(&api).as_deref(), Some("go-capd-pod_123"));

    // Nobody renews the other holder's Lease: after its 2s the manager takes over.
    probe.wait_started().await;
    let lease = api
        .lease(LEASE_NAMESPACE, LEASE_NAME)
        .unwrap()
        .spec
        .unwrap();
    assert_ne!(lease.holder_identity.as_deref(), Some("go-capd-pod_123"));
    assert_eq!(lease.lease_transitions, Some(6));

    manager.shutdown.cancel();
    let result = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_lease_stops_the_controllers_and_fails() {
    let api = FakeApi::start(true).await;
    let probe = Arc::new(Probe::default());
    let manager = start(
        &api,
        &["--leader-elect", "--insecure-diagnostics"],
        probe_wiring(probe.clone()),
    );
    probe.wait_started().await;

    api.put_lease(LEASE_NAMESPACE, LEASE_NAME, lease_held_by("thief_1", 15));
    let result = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap();
    let error = result.unwrap_err();
    assert!(
        matches!(error, RunError::LeaderElectionLost(_)),
        "{error:?}"
    );
    assert_eq!(
        error_chain(&error),
        "leader election lost: the Lease is now held by thief_1"
    );
    assert_eq!(
        probe.stops.load(Ordering::SeqCst),
        1,
        "controllers stopped before exiting"
    );
    assert_eq!(
        holder(&api).as_deref(),
        Some("thief_1"),
        "a lost Lease is not released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_within_the_deadline_stops_and_fails() {
    let api = FakeApi::start(true).await;
    let probe = Arc::new(Probe::default());
    let manager = start(
        &api,
        &["--leader-elect", "--insecure-diagnostics"],
        probe_wiring(probe.clone()),
    );
    probe.wait_started().await;

    api.state.lock().unwrap().lease_api_down = true;
    let went_down = std::time::Instant::now();
    let error = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(
        error_chain(&error),
        "leader election lost: could not renew the Lease within 1s"
    );
    // The renew deadline is 1s: no sooner, and not much later (one retry period of slack).
    let waited = went_down.elapsed();
    assert!(
        waited >= Duration::from_millis(800),
        "gave up after {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "gave up after {waited:?}");
    assert_eq!(
        probe.stops.load(Ordering::SeqCst),
        1,
        "controllers stopped before exiting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_credentials_stop_start_up_instead_of_waiting_forever() {
    let api = FakeApi::start(true).await;
    let manager = start_as(
        &api,
        REVOKED_TOKEN,
        &["--insecure-diagnostics"],
        Wiring::without_controllers(),
    );
    let error = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    let message = error_chain(&error);
    assert!(
        message.starts_with(&format!(
            "the Kubernetes API server at {}/ rejected the manager's credentials",
            api.url
        )),
        "{message}"
    );
    assert!(
        !message.contains(REVOKED_TOKEN),
        "the token is not in the message: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_leader_election_controllers_start_once_crds_are_served() {
    let api = FakeApi::start(true).await;
    let probe = Arc::new(Probe::default());
    let manager = start(
        &api,
        &["--insecure-diagnostics"],
        probe_wiring(probe.clone()),
    );
    probe.wait_started().await;
    assert!(holder(&api).is_none(), "no Lease without --leader-elect");
    manager.shutdown.cancel();
    assert!(
        tokio::time::timeout(SOON, manager.task)
            .await
            .unwrap()
            .unwrap()
            .is_ok()
    );
    assert_eq!(probe.stops.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_metrics_need_a_token_allowed_to_get_metrics() {
    let api = FakeApi::start(true).await;
    let probe = Arc::new(Probe::default());
    let manager = start(&api, &[], probe_wiring(probe.clone()));
    probe.wait_started().await;
    let tls12 = &[&rustls::version::TLS12];

    let (code, _) = eventually(SOON, "metrics to answer", || async {
        https_get(manager.metrics_port, "/metrics", None, tls12)
            .await
            .ok()
    })
    .await;
    assert_eq!(code, 401, "no token");
    let (code, _) = https_get(manager.metrics_port, "/metrics", Some("forged"), tls12)
        .await
        .unwrap();
    assert_eq!(code, 401, "a token the API server does not know");
    let (code, body) = https_get(manager.metrics_port, "/metrics", Some(DENIED_TOKEN), tls12)
        .await
        .unwrap();
    assert_eq!(code, 403);
    assert!(
        body.contains("user \"alice\" may not get /metrics"),
        "{body}"
    );
    let (code, body) = https_get(manager.metrics_port, "/metrics", Some(ALLOWED_TOKEN), tls12)
        .await
        .unwrap();
    assert_eq!(code, 200);
    assert!(
        body.contains("# TYPE controller_runtime_reconcile_total counter")
            && body.contains(
                r#"controller_runtime_reconcile_total{controller="probe",result="success"} 0"#
            ),
        "{body}"
    );
    assert_eq!(api.state.lock().unwrap().token_reviews, 3);

    assert!(
        http_get(manager.metrics_port, "/metrics")
            .await
            .map_or(true, |(code, _)| code != 200),
        "plain HTTP is not served on the secure port"
    );
    manager.shutdown.cancel();
    assert!(
        tokio::time::timeout(SOON, manager.task)
            .await
            .unwrap()
            .unwrap()
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_min_version_13_refuses_tls_12_clients() {
    let api = FakeApi::start(true).await;
    let manager = start(
        &api,
        &["--tls-min-version=VersionTLS13"],
        Wiring::without_controllers(),
    );
    let (code, _) = eventually(SOON, "metrics to answer", || async {
        https_get(
            manager.metrics_port,
            "/metrics",
            Some(ALLOWED_TOKEN),
            &[&rustls::version::TLS13],
        )
        .await
        .ok()
    })
    .await;
    assert_eq!(code, 200);
    let refused = https_get(
        manager.metrics_port,
        "/metrics",
        Some(ALLOWED_TOKEN),
        &[&rustls::version::TLS12],
    )
    .await;
    assert!(refused.is_err(), "TLS 1.2 accepted: {refused:?}");
    manager.shutdown.cancel();
    assert!(
        tokio::time::timeout(SOON, manager.task)
            .await
            .unwrap()
            .unwrap()
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_docker_engine_stops_start_up_with_a_clear_error() {
    let api = FakeApi::start(true).await;
    let wiring = Wiring {
        engine_check: Some(Box::pin(async {
            Err("connect to unix:///var/run/docker.sock: connection refused".into())
        })),
        start_controllers: Box::new(|_, _| Vec::new()),
    };
    let manager = start(&api, &["--insecure-diagnostics"], wiring);
    let error = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(
        error_chain(&error),
        "cannot use the container engine: connect to unix:///var/run/docker.sock: connection refused"
    );
    assert!(
        http_get(manager.health_port, "/healthz").await.is_err(),
        "nothing was served"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_that_returns_early_stops_the_manager() {
    let api = FakeApi::start(true).await;
    let wiring = Wiring {
        engine_check: None,
        start_controllers: Box::new(|_, _| {
            vec![ControllerTask {
                name: "dockermachine",
                future: Box::pin(async {}),
            }]
        }),
    };
    let manager = start(&api, &["--insecure-diagnostics"], wiring);
    let error = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "controller dockermachine stopped unexpectedly"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_that_panics_stops_the_manager_naming_it() {
    let api = FakeApi::start(true).await;
    let wiring = Wiring {
        engine_check: None,
        start_controllers: Box::new(|_, stop: CancellationToken| {
            let healthy = ControllerTask {
                name: "dockercluster",
                future: Box::pin(async move { stop.cancelled().await }),
            };
            let broken = ControllerTask {
                name: "dockermachine",
                future: Box::pin(async { panic!("bug in a reconciler") }),
            };
            vec![healthy, broken]
        }),
    };
    let manager = start(&api, &["--insecure-diagnostics"], wiring);
    let error = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(error.to_string(), "controller dockermachine panicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_during_the_crd_wait_stops_cleanly() {
    let api = FakeApi::start(false).await;
    let manager = start(
        &api,
        &["--insecure-diagnostics"],
        Wiring::without_controllers(),
    );
    eventually(SOON, "readyz to answer", || readyz(manager.health_port)).await;
    manager.shutdown.cancel();
    let result = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_is_a_start_up_error_naming_it() {
    let api = FakeApi::start(true).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let address = format!("--health-addr=127.0.0.1:{port}");
    let manager = start(&api, &[address.as_str()], Wiring::without_controllers());
    let error = tokio::time::timeout(SOON, manager.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(
        error_chain(&error).starts_with(&format!("cannot listen on 127.0.0.1:{port}: ")),
        "{error:?}"
    );
}
