//! The normal reconcile against the fake engine: what a pass costs the engine.

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

#[tokio::test]
async fn a_pass_over_a_provisioned_machine_asks_the_engine_once() {
    let fake = FakeRuntime::new();
    fake.add_image("node:test");
    let network = NetworkSpec {
        name: "kind".into(),
        driver: "bridge".into(),
        ..Default::default()
    };
    fake.create_network(&network).await.unwrap();
    let spec = NodeSpec::new("c1", "c1-m1", NodeRole::Worker, "node:test", "kind");
    create_node(&fake, &spec).await.unwrap();
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
