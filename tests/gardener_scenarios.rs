//! The Gardener `Infrastructure` controller against the test Kubernetes API server and the
//! in-memory fake Docker engine: what Gardener (gardenlet) and a user see in the object, for
//! create, changes Gardener did not ask for, other types, invalid configuration, the reconcile
//! annotation, deletion blocked by containers, migrate followed by restore, and drift repaired on
//! Gardener's request.

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gardener_support;

use std::sync::Arc;
use std::time::Duration;

use capd::docker::{ContainerRuntime, ContainerSpec, FakeRuntime};
use capd::gardener::InfrastructureState;
use gardener_support::*;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

async fn start() -> (Env, Arc<FakeRuntime>) {
    let fake = Arc::new(FakeRuntime::new());
    let runtime: Arc<dyn ContainerRuntime> = fake.clone();
    (Env::start(runtime, "shoot--p--s").await, fake)
}

#[tokio::test]
async fn create_publishes_the_network_and_a_resync_writes_nothing() {
    let (env, fake) = start().await;
    env.create(
        "infra",
        "docker",
        Some(config(json!({"cidr": "10.213.1.0/24"}))),
    )
    .await;
    let infra = env.wait_operation("infra", "Create", "Succeeded").await;

    let network = fake
        .networks()
        .into_iter()
        .find(|n| n.name == "gardener-shoot--p--s-infra")
        .expect("the default network name is derived from the Infrastructure");
    assert!(has_finalizer(&infra));
    let published = provider_status(&infra);
    assert_eq!(published.network.name, network.name);
    assert_eq!(published.network.id, network.id);
    assert!(published.network.managed);
    assert_eq!(published.network.subnets[0].cidr, "10.213.1.0/24");
    assert_eq!(
        published.network.subnets[0].gateway.as_deref(),
        Some("10.213.1.1")
    );
    let status = infra.status.clone().unwrap();
    assert_eq!(status.nodes_cidr.as_deref(), Some("10.213.1.0/24"));
    assert_eq!(
        status.networking.as_ref().unwrap().nodes,
        ["10.213.1.0/24"],
        "status.networking.nodes lists the network's subnets"
    );
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.last_error, None);
    let state = InfrastructureState::from_value(status.state.as_ref()).unwrap();
    assert_eq!(state.network.id, network.id);

    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.namespace);
    let notes: Vec<(String, String)> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect();
    for (reason, note) in [
        ("Reconciling", "Reconciling the infrastructure"),
        (
            "NetworkCreated",
            "Created Docker network gardener-shoot--p--s-infra",
        ),
        (
            "Reconciled",
            "Docker network gardener-shoot--p--s-infra is ready",
        ),
    ] {
        assert!(
            notes
                .iter()
                .any(|(r, n)| r == reason && n.starts_with(note)),
            "an Event {reason}: {note}... is published; got {notes:?}"
        );
    }

    // A metadata-only change is not Gardener asking for anything.
    env.server.reset_write_counts();
    let label = json!({"metadata": {"labels": {"touched": "yes"}}});
    env.api()
        .patch("infra", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        env.infrastructure_writes(),
        vec![(
            "patch infrastructures.extensions.gardener.cloud".to_string(),
            1
        )],
        "only the test's own patch: nothing is written without Gardener's request"
    );
    assert_eq!(env.get("infra").await.status, infra.status);
    env.stop().await;
}

#[tokio::test]
async fn other_types_are_left_untouched() {
    let (env, fake) = start().await;
    env.create("aws", "aws", Some(json!({"anything": true})))
        .await;
    env.create("docker", "docker", None).await;
    env.wait_operation("docker", "Create", "Succeeded").await;
    let aws = env.get("aws").await;
    assert!(!has_finalizer(&aws));
    assert_eq!(aws.status, None);
    assert_eq!(
        fake.networks().len(),
        1,
        "only the docker Infrastructure got a network"
    );
    env.stop().await;
}

#[tokio::test]
async fn an_invalid_config_is_a_configuration_problem_until_fixed() {
    let (env, fake) = start().await;
    env.create(
        "infra",
        "docker",
        Some(config(json!({"cidr": "10.213.2.1/24", "name": "host"}))),
    )
    .await;
    let broken = env.wait_operation("infra", "Create", "Error").await;
    assert_eq!(error_codes(&broken), ["ERR_CONFIGURATION_PROBLEM"]);
    let description = broken.status.unwrap().last_error.unwrap().description;
    assert!(
        description.contains("providerConfig.networks.cidr")
            && description.contains("the network address is 10.213.2.0/24")
            && description.contains("providerConfig.networks.name"),
        "every problem is described: {description}"
    );
    assert!(
        fake.networks().is_empty(),
        "nothing is created from an invalid config"
    );

    // A merge patch: `null` removes the bad name.
    env.set_provider_config(
        "infra",
        config(json!({"cidr": "10.213.2.0/24", "name": null})),
    )
    .await;
    let fixed = env.wait_operation("infra", "Create", "Succeeded").await;
    let status = fixed.status.unwrap();
    assert_eq!(status.last_error, None);
    assert_eq!(status.observed_generation, Some(2));
    assert_eq!(status.nodes_cidr.as_deref(), Some("10.213.2.0/24"));
    env.stop().await;
}

#[tokio::test]
async fn the_reconcile_annotation_is_removed_and_reconciles() {
    let (env, _fake) = start().await;
    env.create("infra", "docker", None).await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    env.annotate("infra", "reconcile").await;
    let reconciled = env.wait_operation("infra", "Reconcile", "Succeeded").await;
    assert_eq!(operation(&reconciled), None);
    assert_eq!(
        provider_status(&reconciled).network.id,
        provider_status(&created).network.id
    );
    env.stop().await;
}

#[tokio::test]
async fn deletion_waits_for_the_containers_on_the_network() {
    let (env, fake) = start().await;
    env.create("infra", "docker", None).await;
    let infra = env.wait_operation("infra", "Create", "Succeeded").await;
    let network = provider_status(&infra).network.name;
    fake.add_image("node");
    let node = ContainerSpec {
        name: "shoot-node".into(),
        image: "node".into(),
        network: network.clone(),
        ..Default::default()
    };
    fake.run_container(&node).await.unwrap();

    env.delete("infra").await;
    let blocked = env.wait_operation("infra", "Delete", "Error").await;
    assert_eq!(error_codes(&blocked), ["ERR_RETRYABLE_INFRA_DEPENDENCIES"]);
    assert!(has_finalizer(&blocked));
    assert!(fake.networks().iter().any(|n| n.name == network));

    fake.delete_container("shoot-node").await.unwrap();
    env.wait_gone("infra").await;
    assert!(
        fake.networks().iter().all(|n| n.name != network),
        "the network we created is removed with the Infrastructure"
    );
    env.stop().await;
}

#[tokio::test]
async fn migrate_keeps_the_network_and_restore_adopts_it_again() {
    let (env, fake) = start().await;
    env.create(
        "infra",
        "docker",
        Some(config(
            json!({"name": "shoot-net", "cidr": "10.213.3.0/24"}),
        )),
    )
    .await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    let id = provider_status(&created).network.id;

    env.annotate("infra", "migrate").await;
    let migrated = env.wait_migrated("infra").await;
    assert!(!has_finalizer(&migrated));
    assert_eq!(operation(&migrated), None);
    let state = migrated.status.as_ref().unwrap().state.clone();
    let recorded = InfrastructureState::from_value(state.as_ref()).unwrap();
    assert_eq!(
        (recorded.network.name.as_str(), recorded.network.id.as_str()),
        ("shoot-net", id.as_str())
    );

    // The source seed deletes its copy: the network must survive.
    env.delete("infra").await;
    env.wait_gone("infra").await;
    assert!(fake.networks().iter().any(|n| n.id == id));

    // The destination seed creates the object waiting for its state, writes the state, then
    // asks for the restore.
    env.create_annotated(
        "infra",
        "docker",
        Some(config(
            json!({"name": "shoot-net", "cidr": "10.213.3.0/24"}),
        )),
        Some("wait-for-state"),
    )
    .await;
    env.write_state("infra", state.as_ref().unwrap()).await;
    env.annotate("infra", "restore").await;
    let restored = env.wait_operation("infra", "Restore", "Succeeded").await;
    assert_eq!(
        provider_status(&restored).network.id,
        id,
        "the same network is adopted"
    );
    assert!(provider_status(&restored).network.managed);
    assert!(has_finalizer(&restored));
    assert_eq!(operation(&restored), None);
    assert_eq!(fake.networks().len(), 1);

    env.delete("infra").await;
    env.wait_gone("infra").await;
    assert!(
        fake.networks().is_empty(),
        "after a restore the network is ours to delete"
    );
    env.stop().await;
}

#[tokio::test]
async fn a_network_removed_by_hand_is_recreated_on_the_next_reconcile() {
    let (env, fake) = start().await;
    env.create("infra", "docker", None).await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    let before = provider_status(&created).network;
    fake.remove_network(&before.id).await.unwrap();

    // Drift repair is Gardener's to ask for: a label changes nothing, the reconcile annotation
    // (its maintenance window) finds the network missing and creates it again.
    env.label("infra", "nudge", "1").await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!fake.networks().iter().any(|n| n.name == before.name));
    env.annotate("infra", "reconcile").await;
    let repaired = env
        .wait_for("infra", "the network to be recreated", |i| {
            provider_status(i).network.id != before.id
        })
        .await;
    assert_eq!(
        last_operation(&repaired),
        Some(("Reconcile".to_string(), "Succeeded".to_string()))
    );
    let after = provider_status(&repaired).network;
    assert_eq!(after.name, before.name);
    assert!(fake.networks().iter().any(|n| n.id == after.id));
    env.stop().await;
}
