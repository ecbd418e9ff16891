//! The normal reconcile against the fake engine: what a pass costs the engine, and a deletion
//! that begins while a pass runs.

use super::{Fetched, normal};
use crate::api::capi::{Cluster, Machine};
use crate::api::conditions::{
    BOOTSTRAP_COMPLETED_CONDITION, CGROUPS_READY_CONDITION, ConditionStatus,
    PRELOADED_IMAGES_READY_CONDITION,
};
use crate::api::v1beta2::{DockerCluster, DockerMachine};
use crate::controllers::fixtures::*;
use crate::controllers::kinds::View;
use crate::docker::fake::Call;
use crate::docker::node::{NodeRole, NodeSpec, create_node};
use crate::docker::{ContainerRuntime, FakeRuntime, NetworkSpec};

/// A fake engine with the `kind` network and one running worker node container of cluster `c1`.
async fn engine_running(container: &str) -> FakeRuntime {
    let fake = FakeRuntime::new();
    fake.add_image("node:test");
    let network = NetworkSpec {
        name: "kind".into(),
        driver: "bridge".into(),
        ..Default::default()
    };
    fake.create_network(&network).await.unwrap();
    let spec = NodeSpec::new("c1", container, NodeRole::Worker, "node:test", "kind");
    create_node(&fake, &spec, None).await.unwrap();
    fake
}

#[tokio::test]
async fn a_pass_over_a_provisioned_machine_asks_the_engine_once() {
    let fake = engine_running("c1-m1").await;
    let before = fake.calls().len();

    let ctx = test_context(fake.clone());
    let docker_machine = DockerMachine::test("m1")
        .owned_by("m1")
        .with_finalizer()
        .provisioned_as("c1-m1")
        .with_condition(CGROUPS_READY_CONDITION, ConditionStatus::True, "Ready")
        .with_condition(
            PRELOADED_IMAGES_READY_CONDITION,
            ConditionStatus::True,
            "Ready",
        )
        .with_condition(
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::True,
            "Completed",
        );
    let fetched = Fetched {
        machine: Some(Machine::test("m1")),
        cluster_name: Some("c1".into()),
        cluster: Some(Cluster::test("c1").with_infrastructure_provisioned()),
        docker_cluster: Some(View::docker(DockerCluster::test("c1"))),
        machine_pool_missing: false,
    };
    // The test context's API server is unreachable, so the pass ends in an error after its
    // Docker side, which is what is counted: whether the container runs, its labels and its
    // addresses all come from one inspect.
    let _ = normal::reconcile(&ctx, &View::docker(docker_machine), &fetched).await;
    assert_eq!(
        fake.calls()[before..],
        [Call::InspectContainer("c1-m1".into())]
    );
}

/// The API server of a test, serving the DockerMachine CRD; its client.
async fn api_with_docker_machines() -> (testapiserver::Handle, kube::Client) {
    crate::controllers::fixtures::test_api_server_serving::<DockerMachine>(
        crate::api::crd::docker_machine().unwrap(),
    )
    .await
}

#[tokio::test]
async fn a_pool_machine_whose_pool_has_no_bootstrap_data_yet_is_not_provisioned() {
    use kube::api::{Api, PostParams};

    let (_server, client) = api_with_docker_machines().await;
    // The pool made the container (it runs) and the DockerMachine named after it.
    let fake = engine_running("c1-worker-abc123").await;
    let mut docker_machine = DockerMachine::test("worker-abc123")
        .owned_by("worker-abc123")
        .with_finalizer();
    docker_machine.metadata.uid = None;
    docker_machine
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(crate::api::MACHINE_POOL_NAME_LABEL.into(), "mp-0".into());
    let machines: Api<DockerMachine> = Api::namespaced(client.clone(), NAMESPACE);
    let docker_machine = machines
        .create(&PostParams::default(), &docker_machine)
        .await
        .unwrap();
    // Core 1.12's pool Machine has an empty bootstrap data secret name, and so has the
    // MachinePool until its bootstrap provider wrote one.
    let machine_pool = crate::api::capi::MachinePool::default();
    let fetched = Fetched {
        machine: Some(Machine::test("worker-abc123").in_pool(&machine_pool)),
        cluster_name: Some("c1".into()),
        cluster: Some(
            Cluster::test("c1")
                .with_infrastructure_provisioned()
                .with_control_plane_initialized(),
        ),
        docker_cluster: Some(View::docker(DockerCluster::test("c1"))),
        machine_pool_missing: false,
    };
    let ctx = crate::controllers::fixtures::test_context_on(fake.clone(), client);

    normal::reconcile(&ctx, &View::docker(docker_machine), &fetched)
        .await
        .unwrap();

    let written = machines.get("worker-abc123").await.unwrap();
    assert_eq!(written.spec.provider_id, "", "no providerID yet");
    let status = written.status.unwrap_or_default();
    assert_eq!(status.initialization.provisioned, None, "not provisioned");
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.reason == "WaitingForBootstrapData"),
        "{:?}",
        status.conditions
    );
    assert!(
        !fake
            .calls()
            .iter()
            .any(|call| matches!(call, Call::Exec(..))),
        "nothing ran in the container: {:?}",
        fake.calls()
    );
}

#[tokio::test]
async fn a_control_plane_whose_deletion_began_while_it_was_drained_is_not_left_for_the_sync_period()
{
    use kube::ResourceExt;
    use kube::api::{Api, DeleteParams, PostParams};
    use kube::runtime::controller::Action;

    use super::decide::DELETION_BEGAN_RETRY;
    use crate::docker::loadbalancer::{LoadBalancerSpec, create_load_balancer};

    let (_server, client) = api_with_docker_machines().await;
    let fake = engine_running("c1-md").await;
    let spec = NodeSpec::new("c1", "c1-cp1", NodeRole::ControlPlane, "node:test", "kind");
    create_node(&fake, &spec, None).await.unwrap();
    fake.add_image("kindest/haproxy:v1");
    let lb = LoadBalancerSpec::new("c1", "kindest/haproxy:v1", "kind");
    create_load_balancer(&fake, &lb, None).await.unwrap();

    // The pass reads the DockerMachine; then core deletes it (our finalizer holds it) while the
    // pass drains it, because its Machine is being deleted.
    let mut docker_machine = DockerMachine::test("cp1")
        .owned_by("cp1")
        .with_finalizer()
        .provisioned_as("c1-cp1");
    docker_machine.metadata.uid = None;
    let machines: Api<DockerMachine> = Api::namespaced(client.clone(), NAMESPACE);
    let read = machines
        .create(&PostParams::default(), &docker_machine)
        .await
        .unwrap();
    machines
        .delete("cp1", &DeleteParams::default())
        .await
        .unwrap();
    let fetched = Fetched {
        machine: Some(Machine::test("cp1").control_plane().deleting()),
        cluster_name: Some("c1".into()),
        cluster: Some(
            Cluster::test("c1")
                .with_infrastructure_provisioned()
                .with_control_plane_initialized(),
        ),
        docker_cluster: Some(View::docker(DockerCluster::test("c1"))),
        machine_pool_missing: false,
    };
    let ctx = crate::controllers::fixtures::test_context_on(fake.clone(), client);

    let action = normal::reconcile(&ctx, &View::docker(read), &fetched)
        .await
        .unwrap();

    let now = machines.get("cp1").await.unwrap();
    assert_eq!(
        now.annotations().get(crate::api::WEIGHT_ANNOTATION),
        Some(&"0".to_string()),
        "drained"
    );
    assert_eq!(
        action,
        Action::requeue(DELETION_BEGAN_RETRY),
        "the deletion is taken up by the next pass, without waiting for a watch event"
    );
}

#[tokio::test]
async fn a_restart_seen_through_a_stale_cache_is_still_written() {
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use serde_json::json;

    use crate::api::conditions::{CONTAINER_PROVISIONED_CONDITION, find_condition};
    use crate::docker::loadbalancer::{LoadBalancerSpec, create_load_balancer};

    let (_server, client) = api_with_docker_machines().await;
    let fake = engine_running("c1-w1").await;
    fake.add_image("kindest/haproxy:v1");
    let lb = LoadBalancerSpec::new("c1", "kindest/haproxy:v1", "kind");
    create_load_balancer(&fake, &lb, None).await.unwrap();

    // A provisioned worker.
    let note = "Container c1-w1 was stopped; started it again";
    let mut docker_machine = DockerMachine::test("w1")
        .owned_by("w1")
        .with_finalizer()
        .provisioned_as("c1-w1")
        .with_condition(CGROUPS_READY_CONDITION, ConditionStatus::True, "Ready")
        .with_condition(
            PRELOADED_IMAGES_READY_CONDITION,
            ConditionStatus::True,
            "Ready",
        )
        .with_condition(
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::True,
            "Completed",
        );
    docker_machine.metadata.uid = None;
    let status = docker_machine.status.take();
    let machines: Api<DockerMachine> = Api::namespaced(client.clone(), NAMESPACE);
    machines
        .create(&PostParams::default(), &docker_machine)
        .await
        .unwrap();
    let patch = Patch::Merge(json!({ "status": status }));
    let created = machines
        .patch_status("w1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let fetched = Fetched {
        machine: Some(Machine::test("w1")),
        cluster_name: Some("c1".into()),
        cluster: Some(
            Cluster::test("c1")
                .with_infrastructure_provisioned()
                .with_control_plane_initialized(),
        ),
        docker_cluster: Some(View::docker(DockerCluster::test("c1"))),
        machine_pool_missing: false,
    };
    let ctx = crate::controllers::fixtures::test_context_on(fake.clone(), client);
    let container_provisioned = || async {
        let now = machines.get("w1").await.unwrap().status.unwrap_or_default();
        let c = find_condition(&now.conditions, CONTAINER_PROVISIONED_CONDITION).unwrap();
        (c.status, c.reason.clone(), c.message.clone())
    };

    // Its container stopped once, and was started again: the condition says so, and that is
    // the object the cache holds from now on.
    fake.stop_container("c1-w1");
    let _ = normal::reconcile(&ctx, &View::docker(created), &fetched).await;
    assert_eq!(container_provisioned().await.2, note);
    let cached = machines.get("w1").await.unwrap();

    // The engine restarts: everything stops. The first pass waits for the load balancer.
    fake.stop_container("c1-lb").stop_container("c1-w1");
    let _ = normal::reconcile(&ctx, &View::docker(cached.clone()), &fetched).await;
    assert_eq!(
        container_provisioned().await.1,
        crate::api::conditions::WAITING_FOR_LOAD_BALANCER_REASON
    );

    // The load balancer runs again; the next pass starts the worker, working on the object as
    // the cache still shows it (the watch has not delivered the first pass's write): the note
    // it computes equals that stale status, and must be written all the same.
    fake.start_container("c1-lb").await.unwrap();
    let _ = normal::reconcile(&ctx, &View::docker(cached), &fetched).await;
    assert!(
        fake.containers()
            .iter()
            .any(|c| c.name == "c1-w1" && c.running)
    );
    assert_eq!(
        container_provisioned().await,
        (
            ConditionStatus::True,
            "Provisioned".to_string(),
            note.into()
        )
    );
}
