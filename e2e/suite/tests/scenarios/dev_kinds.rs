//! The Dev* kinds (issue 13): a DevCluster and DevMachines with the docker backend are served by
//! the same reconcilers as DockerCluster and DockerMachines, so the quick start runs unchanged
//! with them; a Dev* object with the inMemory backend is reported unsupported and nothing else
//! happens.

use std::time::Duration;

use capd_e2e::*;
use serde_json::json;

use super::quick_start::quick_start;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_kinds_quick_start_then_deletion_leaves_nothing_behind() {
    if !capd_e2e::installed::runs_with_stand_in(
        "dev_kinds_quick_start_then_deletion_leaves_nothing_behind",
    ) {
        return;
    }
    let mut env = Env::scenario("devquick", &[]).await;
    env.use_dev_kinds();
    quick_start(env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_memory_backend_is_reported_unsupported_and_provisions_nothing() {
    if !capd_e2e::installed::runs_with_stand_in(
        "the_in_memory_backend_is_reported_unsupported_and_provisions_nothing",
    ) {
        return;
    }
    let mut env = Env::scenario("inmemory", &[]).await;
    env.use_dev_kinds();
    let name = env.cluster_name();
    let cluster = env.create_cluster(&name, false).await;
    env.create(
        &infra("DevCluster"),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DevCluster",
            "metadata": {
                "name": name,
                "labels": env.labels(&name),
                "ownerReferences": [owner("Cluster", &cluster)]
            },
            "spec": {"backend": {"inMemory": {}}}
        }),
    )
    .await;
    // The same, paused: not written to, as the contract asks of a paused object.
    env.create(
        &infra("DevCluster"),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DevCluster",
            "metadata": {
                "name": format!("{name}-paused"),
                "labels": env.labels(&name),
                "annotations": {"cluster.x-k8s.io/paused": ""},
                "ownerReferences": [owner("Cluster", &cluster)]
            },
            "spec": {"backend": {"inMemory": {}}}
        }),
    )
    .await;
    let machine = env
        .create(
            &capi("Machine"),
            env.machine(&name, "m1", &MachineSpec::default()),
        )
        .await;
    env.create(
        &infra("DevMachine"),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DevMachine",
            "metadata": {
                "name": "m1",
                "labels": machine.metadata.labels,
                "ownerReferences": [owner("Machine", &machine)]
            },
            "spec": {"backend": {"inMemory": {"vm": {"provisioning": {"startupDuration": "10s"}}}}}
        }),
    )
    .await;

    for (kind, object) in [("DevCluster", name.as_str()), ("DevMachine", "m1")] {
        let found = eventually(
            Duration::from_secs(60),
            &format!("{kind} {object} to be reported unsupported"),
            || async {
                let found = env.get(&infra(kind), object).await?;
                (condition_state(&found, "Ready")
                    == Some(("False".into(), "BackendNotSupported".into())))
                .then_some(found)
            },
        )
        .await;
        let message = condition(&found, "Ready").unwrap()["message"].clone();
        assert!(
            message.as_str().unwrap().contains("inMemory"),
            "the message names the backend: {message}"
        );
        assert_eq!(
            found.metadata.finalizers, None,
            "no finalizer on an unsupported {kind}"
        );
        assert_eq!(
            found.data["status"]["initialization"],
            json!(null),
            "an unsupported {kind} is never provisioned"
        );
        env.wait_event(kind, object, ("Warning", "BackendNotSupported"), "inMemory")
            .await;
    }
    assert_eq!(
        cluster_containers(&name),
        Vec::<String>::new(),
        "no container for an inMemory cluster"
    );
    // Both were there from the start; the unpaused one was written to long ago.
    let paused = env
        .get(&infra("DevCluster"), &format!("{name}-paused"))
        .await
        .unwrap();
    assert_eq!(
        paused.data["status"],
        json!(null),
        "a paused unsupported DevCluster is left alone"
    );
    env.delete(&infra("DevCluster"), &format!("{name}-paused"))
        .await;

    // Deletion is not held up: nothing of ours is there to clean up.
    for (kind, object) in [("DevMachine", "m1"), ("DevCluster", name.as_str())] {
        env.delete(&infra(kind), object).await;
        env.wait_gone(&infra(kind), object, Duration::from_secs(30))
            .await;
    }
    env.delete(&capi("Machine"), "m1").await;
    env.delete(&capi("Cluster"), &name).await;
    env.wait_gone(&capi("Cluster"), &name, Duration::from_secs(30))
        .await;
    assert_eq!(cluster_containers(&name), Vec::<String>::new());
}
