//! Control plane migration as gardenlet plays it, between two seeds (two test API servers) that
//! share one Docker engine (the in-memory fake): the source seed migrates its `Infrastructure`
//! and then deletes it; the destination seed creates it with `wait-for-state`, writes
//! `status.state` from the ShootState, and only then asks for `restore`
//! (gardener/gardener `docs/extensions/migration.md`, `pkg/extensions/customresources.go`).

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod gardener_support;

use std::sync::Arc;
use std::time::Duration;

use capd::docker::fake::Call;
use capd::docker::{ContainerRuntime, FakeRuntime};
use capd::gardener::InfrastructureState;
use gardener_support::*;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

/// How long the tests wait to be sure something does not happen.
const SETTLE: Duration = Duration::from_millis(1500);

fn engine_changes(calls: &[Call]) -> Vec<&Call> {
    calls
        .iter()
        .filter(|c| matches!(c, Call::CreateNetwork(_) | Call::RemoveNetwork(_)))
        .collect()
}

async fn reasons(env: &Env) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.namespace);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

#[tokio::test]
async fn gardenlets_migration_sequence_adopts_the_network_once_and_never_removes_it() {
    let fake = Arc::new(FakeRuntime::new());
    let runtime: Arc<dyn ContainerRuntime> = fake.clone();
    let source = Env::start(runtime.clone(), "shoot--p--moving").await;
    let destination = Env::start(runtime, "shoot--p--moving").await;
    let provider_config = config(json!({"cidr": "10.213.7.0/24"}));

    // The shoot runs on the source seed.
    source
        .create_annotated(
            "infra",
            "docker",
            Some(provider_config.clone()),
            Some("reconcile"),
        )
        .await;
    let created = source.wait_operation("infra", "Create", "Succeeded").await;
    let network = provider_status(&created).network;

    // Source seed: migrate, then delete the migrated object.
    source.annotate("infra", "migrate").await;
    let migrated = source.wait_migrated("infra").await;
    let state = migrated
        .status
        .unwrap()
        .state
        .expect("the state is recorded");
    let recorded = InfrastructureState::from_value(Some(&state)).unwrap();
    assert_eq!(recorded.network.id, network.id);
    source.delete("infra").await;
    source.wait_gone("infra").await;
    assert!(
        fake.networks().iter().any(|n| n.id == network.id),
        "the source's deletion leaves the network to the destination"
    );

    // Destination seed: the object appears waiting for its state, which gardenlet then writes.
    let calls_before = fake.calls().len();
    destination
        .create_annotated(
            "infra",
            "docker",
            Some(provider_config),
            Some("wait-for-state"),
        )
        .await;
    destination.write_state("infra", &state).await;
    tokio::time::sleep(SETTLE).await;
    let waiting = destination.get("infra").await;
    assert!(
        !has_finalizer(&waiting),
        "nothing is done before restore: {waiting:?}"
    );
    let status = waiting.status.clone().unwrap();
    assert_eq!(status.last_operation, None, "no Create before restore");
    assert_eq!(
        status.state.as_ref(),
        Some(&state),
        "gardenlet's state is left as written"
    );
    assert_eq!(
        fake.calls()[calls_before..].len(),
        0,
        "no engine call before restore"
    );
    assert_eq!(
        destination.infrastructure_writes(),
        vec![
            (
                "create infrastructures.extensions.gardener.cloud".to_string(),
                1
            ),
            (
                "patch infrastructures.extensions.gardener.cloud/status".to_string(),
                1
            ),
        ],
        "only gardenlet's writes"
    );

    // gardenlet asks for the restore.
    destination.annotate("infra", "restore").await;
    let restored = destination
        .wait_for("infra", "the restore to complete", |i| {
            last_operation(i) == Some(("Restore".to_string(), "Succeeded".to_string()))
                && operation(i).is_none()
        })
        .await;
    assert!(has_finalizer(&restored));
    let adopted = provider_status(&restored).network;
    assert_eq!(adopted.id, network.id, "the recorded network is adopted");
    assert!(adopted.managed, "and stays ours to delete");
    assert!(
        restored
            .status
            .as_ref()
            .unwrap()
            .last_operation
            .as_ref()
            .unwrap()
            .description
            .contains("recorded in the state")
    );
    assert_eq!(fake.networks().len(), 1);
    assert!(
        engine_changes(&fake.calls()[calls_before..]).is_empty(),
        "no network created or removed by the destination: {:?}",
        &fake.calls()[calls_before..]
    );

    // Adopted once: the restore's own writes do not start another attempt.
    destination.server.reset_write_counts();
    tokio::time::sleep(SETTLE).await;
    assert_eq!(destination.infrastructure_writes(), vec![]);
    assert_eq!(
        last_operation(&destination.get("infra").await),
        Some(("Restore".to_string(), "Succeeded".to_string()))
    );
    let restores = reasons(&destination)
        .await
        .into_iter()
        .filter(|r| r == "Restored")
        .count();
    assert_eq!(restores, 1, "one restore");

    source.stop().await;
    destination.stop().await;
}

#[tokio::test]
async fn a_migrated_object_is_never_deleted_by_us_even_with_our_finalizer() {
    let fake = Arc::new(FakeRuntime::new());
    let env = Env::start(fake.clone(), "shoot--p--left").await;
    env.create_annotated("infra", "docker", None, Some("reconcile"))
        .await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    let network = provider_status(&created).network;
    env.annotate("infra", "migrate").await;
    env.wait_migrated("infra").await;

    // Our finalizer is back (another writer, an old copy); the deletion of the migrated object
    // must still leave the network alone (Gardener's ShouldSkipOperation comes first).
    let patch = json!({"metadata": {"finalizers": [capd::gardener::FINALIZER]}});
    env.api()
        .patch("infra", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    env.delete("infra").await;
    tokio::time::sleep(SETTLE).await;
    let deleting = env.get("infra").await;
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(
        last_operation(&deleting),
        Some(("Migrate".to_string(), "Succeeded".to_string())),
        "no Delete on a migrated object"
    );
    assert!(fake.networks().iter().any(|n| n.id == network.id));

    let release = json!({"metadata": {"finalizers": null}});
    env.api()
        .patch("infra", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    env.wait_gone("infra").await;
    assert!(fake.networks().iter().any(|n| n.id == network.id));
    env.stop().await;
}

/// How often the status of Infrastructure objects was written.
fn status_writes(env: &Env) -> u64 {
    env.infrastructure_writes()
        .into_iter()
        .filter(|(key, _)| key == "patch infrastructures.extensions.gardener.cloud/status")
        .map(|(_, count)| count)
        .sum()
}

#[tokio::test]
async fn migrate_on_a_migrated_object_stamps_processing_and_succeeded_again() {
    let fake = Arc::new(FakeRuntime::new());
    let env = Env::start(fake.clone(), "shoot--p--twice").await;
    env.create_annotated("infra", "docker", None, Some("reconcile"))
        .await;
    env.wait_operation("infra", "Create", "Succeeded").await;
    env.annotate("infra", "migrate").await;
    let first = env.wait_migrated("infra").await;
    let before = status_writes(&env);

    // gardenlet asks again (a migration flow retried): Gardener's reconciler runs it again.
    env.annotate("infra", "migrate").await;
    let again = env.wait_migrated("infra").await;
    assert_eq!(
        status_writes(&env) - before,
        2,
        "Processing, then Succeeded, written again"
    );
    let state = |infra: &capd::gardener::Infrastructure| {
        InfrastructureState::from_value(infra.status.as_ref().and_then(|s| s.state.as_ref()))
    };
    assert!(state(&again).is_some(), "the state is still recorded");
    assert_eq!(state(&again), state(&first));
    assert!(
        engine_changes(&fake.calls()).len() == 1,
        "the network is kept: only its creation reached the engine"
    );
    env.stop().await;
}
