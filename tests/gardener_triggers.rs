//! When the Gardener `Infrastructure` controller acts, against the test Kubernetes API server and
//! the in-memory fake Docker engine: only when Gardener asks (its default predicate), every
//! attempt stamped, the ignore-operation-annotation mode, extension classes, and the heartbeat
//! Lease.

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gardener_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capd::docker::fake::Op;
use capd::docker::{ContainerRuntime, FakeRuntime, RuntimeError};
use capd::gardener::heartbeat;
use capd::gardener::trigger::Mode;
use futures::StreamExt;
use gardener_support::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How long the tests wait to be sure something does not happen.
const SETTLE: Duration = Duration::from_millis(1500);

async fn start(setup: Setup) -> (Env, Arc<FakeRuntime>) {
    let fake = Arc::new(FakeRuntime::new());
    let runtime: Arc<dyn ContainerRuntime> = fake.clone();
    (
        Env::start_with(runtime, "shoot--p--trig", setup).await,
        fake,
    )
}

fn only(key: &str) -> Vec<(String, u64)> {
    vec![(key.to_string(), 1)]
}

#[tokio::test]
async fn nothing_is_actuated_unless_gardener_asks() {
    // A short sync period: it must not start anything either.
    let (env, fake) = start(Setup {
        sync_period: Duration::from_millis(300),
        ..Setup::default()
    })
    .await;
    env.create_annotated("infra", "docker", None, Some("reconcile"))
        .await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    assert_eq!(operation(&created), None, "the annotation is consumed");

    // A label change, several sync periods, and a re-list of every watch: nothing happens.
    let calls = fake.calls().len();
    env.server.reset_write_counts();
    env.label("infra", "team", "a").await;
    tokio::time::sleep(SETTLE).await;
    env.server.drop_watches();
    tokio::time::sleep(SETTLE).await;
    assert_eq!(
        fake.calls()[calls..].len(),
        0,
        "no engine call: {:?}",
        &fake.calls()[calls..]
    );
    assert_eq!(
        env.infrastructure_writes(),
        only("patch infrastructures.extensions.gardener.cloud"),
        "only the test's label: no status write"
    );
    assert_eq!(env.get("infra").await.status, created.status);

    // gardenlet asks (its maintenance window): one attempt, visible in the status.
    env.server.reset_write_counts();
    env.annotate("infra", "reconcile").await;
    let reconciled = env
        .wait_for("infra", "the reconcile", |i| {
            last_operation(i) == Some(("Reconcile".to_string(), "Succeeded".to_string()))
        })
        .await;
    assert_eq!(operation(&reconciled), None);
    assert!(
        fake.calls().len() > calls,
        "the engine is asked about the network"
    );
    let writes = env.infrastructure_writes();
    assert!(
        writes.contains(&(
            "patch infrastructures.extensions.gardener.cloud/status".to_string(),
            2
        )),
        "Processing, then Succeeded: {writes:?}"
    );
    env.stop().await;
}

/// Records every `lastOperation` state the object goes through.
fn record_states(env: &Env, stop: CancellationToken) -> Arc<Mutex<Vec<(String, String, i64)>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let api = env.api();
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default())
            .applied_objects()
            .boxed();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                next = stream.next() => {
                    let Some(Ok(infra)) = next else { continue };
                    if let Some(last) = infra.status.and_then(|s| s.last_operation) {
                        let entry = (last.type_, last.state, last.last_update_time.0.as_second());
                        let mut seen = record.lock().unwrap();
                        if seen.last() != Some(&entry) {
                            seen.push(entry);
                        }
                    }
                }
            }
        }
    });
    seen
}

#[tokio::test]
async fn every_attempt_stamps_processing_and_its_result() {
    let (env, fake) = start(Setup::default()).await;
    let stop = CancellationToken::new();
    let states = record_states(&env, stop.clone());
    for _ in 0..3 {
        fake.fail_next(
            Op::CreateNetwork,
            RuntimeError::from_status("create network", 500, "daemon busy"),
        );
    }
    env.create_annotated("infra", "docker", None, Some("reconcile"))
        .await;
    let done = env.wait_operation("infra", "Create", "Succeeded").await;
    assert_eq!(done.status.unwrap().last_error, None);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.cancel();

    let states = states.lock().unwrap().clone();
    let sequence: Vec<&str> = states.iter().map(|(_, s, _)| s.as_str()).collect();
    assert_eq!(
        sequence.iter().filter(|s| **s == "Error").count(),
        3,
        "each failed attempt ends in Error: {states:?}"
    );
    assert!(
        sequence
            .windows(2)
            .all(|w| (w[0] == "Processing") != (w[1] == "Processing")),
        "every retry shows Processing again: {states:?}"
    );
    assert_eq!(sequence.last(), Some(&"Succeeded"));
    let times: Vec<i64> = states.iter().map(|(_, _, t)| *t).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]) && times.last() > times.first(),
        "lastUpdateTime moves with the attempts: {states:?}"
    );
    env.stop().await;
}

#[tokio::test]
async fn ignoring_the_annotation_acts_on_generations_and_repairs_drift() {
    let (env, fake) = start(Setup {
        mode: Mode::IgnoreOperationAnnotation,
        sync_period: Duration::from_millis(500),
    })
    .await;
    env.create(
        "infra",
        "docker",
        Some(config(json!({"cidr": "10.213.30.0/24"}))),
    )
    .await;
    env.wait_operation("infra", "Create", "Succeeded").await;

    // A new generation is enough; no annotation needed.
    env.set_provider_config_only("infra", config(json!({"cidr": "10.213.31.0/24"})))
        .await;
    let changed = env.wait_operation("infra", "Reconcile", "Succeeded").await;
    assert_eq!(
        changed.status.as_ref().unwrap().observed_generation,
        Some(2)
    );
    assert_eq!(
        changed.status.unwrap().nodes_cidr.as_deref(),
        Some("10.213.31.0/24")
    );

    // At rest, the periodic drift check writes nothing.
    env.server.reset_write_counts();
    tokio::time::sleep(SETTLE).await;
    assert_eq!(env.infrastructure_writes(), vec![]);

    // A network removed by hand comes back with the next drift check.
    let before = provider_status(&env.get("infra").await).network;
    fake.remove_network(&before.id).await.unwrap();
    let repaired = env
        .wait_for("infra", "the network to be recreated", |i| {
            provider_status(i).network.id != before.id
        })
        .await;
    assert_eq!(
        last_operation(&repaired),
        Some(("Reconcile".to_string(), "Succeeded".to_string()))
    );
    env.stop().await;
}

#[tokio::test]
async fn only_the_shoot_class_is_served() {
    let (env, fake) = start(Setup::default()).await;
    let seed_class = |name: &str, class: &str| {
        json!({
            "apiVersion": "extensions.gardener.cloud/v1alpha1",
            "kind": "Infrastructure",
            "metadata": {"name": name, "namespace": env.namespace,
                         "annotations": {"gardener.cloud/operation": "reconcile"}},
            "spec": {"type": "docker", "class": class, "region": "local",
                     "secretRef": {"name": "cloudprovider", "namespace": env.namespace}},
        })
    };
    for (name, class) in [("seed", "seed"), ("garden", "garden"), ("shoot", "shoot")] {
        let object = serde_json::from_value(seed_class(name, class)).unwrap();
        env.api()
            .create(&Default::default(), &object)
            .await
            .unwrap();
    }
    env.wait_operation("shoot", "Create", "Succeeded").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for name in ["seed", "garden"] {
        let other = env.get(name).await;
        assert!(
            !has_finalizer(&other),
            "{name} is left to its class's extension"
        );
        assert_eq!(other.status, None);
        assert_eq!(operation(&other).as_deref(), Some("reconcile"));
    }
    assert_eq!(fake.networks().len(), 1);
    env.stop().await;
}

#[tokio::test]
async fn the_heartbeat_lease_is_renewed_in_the_extensions_namespace() {
    let env = Env::without_controller("extension-provider-docker").await;
    let stop = CancellationToken::new();
    let task = tokio::spawn(heartbeat::run(
        env.client.clone(),
        env.namespace.clone(),
        "provider-docker".to_string(),
        Duration::from_secs(1),
        stop.clone(),
    ));
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.namespace);
    let renew_time = || async {
        let lease = leases.get_opt(heartbeat::LEASE_NAME).await.unwrap()?;
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("provider-docker"));
        assert_eq!(spec.lease_duration_seconds, Some(1));
        spec.renew_time.map(|t| t.0)
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let first = loop {
        if let Some(time) = renew_time().await {
            break time;
        }
        assert!(tokio::time::Instant::now() < deadline, "no heartbeat Lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let later = renew_time().await.unwrap();
    assert!(later > first, "renewed: {first} then {later}");
    stop.cancel();
    task.await.unwrap();
    assert_eq!(heartbeat::RENEW_INTERVAL, Duration::from_secs(30));
}
