//! What the Gardener `Infrastructure` controller takes from the shoot's `Cluster` and how it
//! reports what can heal, against the test Kubernetes API server and the in-memory fake Docker
//! engine: the events of failed shoots, and of shoots whose `Cluster` cannot be read, are
//! dropped before anything else (Gardener's `ShootNotFailedPredicate`), the Shoot's nodes CIDR and IP families shape the network,
//! a force deletion lets go of what it cannot remove, a leftover network in the way is a
//! retryable problem that heals, and an engine refusing us is coded as Gardener knows it.

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gardener_support;

use std::sync::Arc;
use std::time::Duration;

use capd::docker::fake::Op;
use capd::docker::{ContainerRuntime, ContainerSpec, FakeRuntime, RuntimeError};
use capd::gardener::Infrastructure;
use gardener_support::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testapiserver::faults::Fault;

async fn start(namespace: &str) -> (Env, Arc<FakeRuntime>) {
    let fake = Arc::new(FakeRuntime::new());
    let runtime: Arc<dyn ContainerRuntime> = fake.clone();
    (Env::start(runtime, namespace).await, fake)
}

/// A Shoot as gardenlet embeds it in the `Cluster`.
fn shoot(networking: Value, last_state: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "core.gardener.cloud/v1beta1",
        "kind": "Shoot",
        "metadata": {"name": "s", "namespace": "garden-p", "annotations": annotations},
        "spec": {"provider": {"type": "docker"}, "networking": networking},
        "status": {"lastOperation": {"type": "Reconcile", "state": last_state, "progress": 100}},
    })
}

fn run_node(fake: &FakeRuntime, name: &str, network: &str) {
    fake.add_image("node");
    let spec = ContainerSpec {
        name: name.into(),
        image: "node".into(),
        network: network.into(),
        ..Default::default()
    };
    futures::executor::block_on(fake.run_container(&spec)).unwrap();
}

/// Waits until the controller has judged every event before this call: an object created now in
/// `namespace` (no `Cluster`, so not a failed shoot's) is reconciled after them, the watch's
/// events being judged one after the other.
async fn events_judged(env: &Env, namespace: &str) {
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let api: Api<Infrastructure> = Api::namespaced(env.client.clone(), namespace);
    let marker: Infrastructure = serde_json::from_value(json!({
        "apiVersion": "extensions.gardener.cloud/v1alpha1",
        "kind": "Infrastructure",
        "metadata": {"name": "marker", "annotations": {"gardener.cloud/operation": "reconcile"}},
        "spec": {"type": "docker", "region": "local",
                 "secretRef": {"name": "cloudprovider", "namespace": namespace}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &marker).await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let current = api.get("marker").await.unwrap();
        if last_operation(&current).is_some_and(|(_, state)| state == "Succeeded") {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the marker in {namespace} is not reconciled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asks for a reconcile again as gardenlet does when it retries the shoot: the operation
/// annotation with a new `gardener.cloud/timestamp`.
async fn gardenlet_asks_again(env: &Env, name: &str, timestamp: &str) {
    let patch = json!({"metadata": {"annotations": {
        "gardener.cloud/operation": "reconcile",
        "gardener.cloud/timestamp": timestamp,
    }}});
    env.api()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Nothing was done for `name`: the reconcile annotation stays, and no finalizer, status or
/// network.
async fn left_alone(env: &Env, fake: &FakeRuntime, name: &str) {
    let skipped = env.get(name).await;
    assert_eq!(
        operation(&skipped).as_deref(),
        Some("reconcile"),
        "the event is dropped before anything else: the annotation stays"
    );
    assert!(!has_finalizer(&skipped));
    assert_eq!(skipped.status, None);
    let networks: Vec<String> = fake.networks().into_iter().map(|n| n.name).collect();
    assert!(
        networks.iter().all(|n| n.contains("marker")),
        "no network but the markers': {networks:?}"
    );
}

#[tokio::test]
async fn a_failed_shoot_is_left_alone_until_it_recovers() {
    let (env, fake) = start("shoot--p--failed").await;
    env.set_shoot(shoot(json!({}), "Failed", json!({}))).await;
    env.create_annotated("infra", "docker", None, Some("reconcile"))
        .await;
    events_judged(&env, "marker-1").await;
    left_alone(&env, &fake, "infra").await;

    // A later event of the failed shoot is dropped too.
    gardenlet_asks_again(&env, "infra", "t1").await;
    events_judged(&env, "marker-2").await;
    left_alone(&env, &fake, "infra").await;

    env.set_shoot(shoot(json!({}), "Succeeded", json!({})))
        .await;
    gardenlet_asks_again(&env, "infra", "t2").await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    assert_eq!(operation(&created), None, "the reconcile consumed it");
    assert_eq!(fake.networks().len(), 3, "the markers' and the shoot's");
    env.stop().await;
}

#[tokio::test]
async fn an_event_whose_cluster_cannot_be_read_is_dropped() {
    let (env, fake) = start("shoot--p--unreadable").await;
    env.set_shoot(shoot(json!({}), "Succeeded", json!({})))
        .await;
    let fault = env.server.inject(Fault::status(
        "get",
        "clusters.extensions.gardener.cloud",
        500,
        1,
    ));
    env.create_annotated("infra", "docker", None, Some("reconcile"))
        .await;
    events_judged(&env, "marker-1").await;
    assert!(
        env.server
            .fault_hits(fault)
            .first()
            .is_some_and(|h| h.faulted),
        "the Cluster read failed"
    );
    left_alone(&env, &fake, "infra").await;

    gardenlet_asks_again(&env, "infra", "t1").await;
    env.wait_operation("infra", "Create", "Succeeded").await;
    env.stop().await;
}

#[tokio::test]
async fn the_shoots_nodes_cidr_and_families_shape_the_network_and_the_status() {
    let (env, fake) = start("shoot--p--dual").await;
    env.set_shoot(shoot(
        json!({"type": "calico", "nodes": "10.213.20.0/24", "ipFamilies": ["IPv4", "IPv6"]}),
        "Processing",
        json!({}),
    ))
    .await;
    env.create_annotated("infra", "docker", None, Some("reconcile"))
        .await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    let network = fake
        .networks()
        .into_iter()
        .next()
        .expect("a network is created");
    let subnets: Vec<String> = network.subnets.iter().map(ToString::to_string).collect();
    assert!(
        subnets.contains(&"10.213.20.0/24".to_string()),
        "the Shoot's nodes CIDR: {subnets:?}"
    );
    assert!(network.enable_ipv6, "a dual-stack shoot gets IPv6");
    let status = created.status.unwrap();
    assert_eq!(status.nodes_cidr.as_deref(), Some("10.213.20.0/24"));
    let nodes = status.networking.unwrap().nodes;
    assert_eq!(nodes.len(), 2, "every family: {nodes:?}");
    assert_eq!(nodes[0], "10.213.20.0/24");
    assert!(nodes[1].contains(':'), "then the IPv6 subnet: {nodes:?}");
    env.stop().await;
}

#[tokio::test]
async fn a_force_deletion_removes_what_it_can_then_the_finalizer() {
    let (env, fake) = start("shoot--p--forced").await;
    env.set_shoot(shoot(json!({}), "Succeeded", json!({})))
        .await;
    env.create_annotated("infra", "docker", None, Some("reconcile"))
        .await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    let network = provider_status(&created).network.name;
    run_node(&fake, "stuck-node", &network);

    env.set_shoot(shoot(
        json!({}),
        "Processing",
        json!({"confirmation.gardener.cloud/force-deletion": "true"}),
    ))
    .await;
    env.delete("infra").await;
    env.wait_gone("infra").await;
    assert!(
        fake.networks().iter().any(|n| n.name == network),
        "a network still in use is left behind, not waited for"
    );
    env.stop().await;
}

#[tokio::test]
async fn a_leftover_network_in_the_way_is_retryable_and_heals() {
    let (env, fake) = start("shoot--p--heal").await;
    let cidr = json!({"cidr": "10.213.40.0/24"});
    env.create_annotated(
        "old",
        "docker",
        Some(config(cidr.clone())),
        Some("reconcile"),
    )
    .await;
    let old = env.wait_operation("old", "Create", "Succeeded").await;
    let old_network = provider_status(&old).network.name;
    run_node(&fake, "old-node", &old_network);

    env.create_annotated("new", "docker", Some(config(cidr)), Some("reconcile"))
        .await;
    let blocked = env.wait_operation("new", "Create", "Error").await;
    assert_eq!(
        error_codes(&blocked),
        ["ERR_RETRYABLE_CONFIGURATION_PROBLEM"]
    );

    // The old shoot goes away; the new one's retries get through without anyone asking.
    fake.delete_container("old-node").await.unwrap();
    env.delete("old").await;
    env.wait_gone("old").await;
    let healed = env.wait_operation("new", "Create", "Succeeded").await;
    assert_eq!(
        healed.status.unwrap().nodes_cidr.as_deref(),
        Some("10.213.40.0/24")
    );
    env.stop().await;
}

#[tokio::test]
async fn a_new_network_name_on_the_same_subnet_replaces_the_previous_network() {
    let (env, fake) = start("shoot--p--rename").await;
    env.create_annotated(
        "infra",
        "docker",
        Some(config(json!({"name": "net-a", "cidr": "10.213.41.0/24"}))),
        Some("reconcile"),
    )
    .await;
    env.wait_operation("infra", "Create", "Succeeded").await;
    env.set_provider_config(
        "infra",
        config(json!({"name": "net-b", "cidr": "10.213.41.0/24"})),
    )
    .await;
    let moved = env.wait_operation("infra", "Reconcile", "Succeeded").await;
    assert_eq!(provider_status(&moved).network.name, "net-b");
    let names: Vec<String> = fake.networks().into_iter().map(|n| n.name).collect();
    assert_eq!(names, ["net-b"], "the previous network made room");
    env.stop().await;
}

#[tokio::test]
async fn an_engine_that_refuses_us_is_reported_with_gardeners_auth_codes() {
    let (env, fake) = start("shoot--p--denied").await;
    fake.fail_next(
        Op::InspectNetwork,
        RuntimeError::from_status(
            "inspect network",
            403,
            "authorization denied by plugin opa-docker-authz: request rejected by policy",
        ),
    );
    env.create_annotated("infra", "docker", None, Some("reconcile"))
        .await;
    let denied = env.wait_operation("infra", "Create", "Error").await;
    assert_eq!(error_codes(&denied), ["ERR_INFRA_UNAUTHORIZED"]);
    assert!(
        denied
            .status
            .unwrap()
            .last_error
            .unwrap()
            .description
            .contains("authorization denied by plugin")
    );
    env.stop().await;
}
