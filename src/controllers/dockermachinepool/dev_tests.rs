//! Tests of the pool reconcile's view of CAPD 1.14's DevMachinePool: the same decisions as for a
//! DockerMachinePool (`tests.rs`), on DevMachines; what differs is the machines' kind, where
//! their settings sit, the label on the pool's containers and the pool's own provider ID.

use kube::ResourceExt;
use serde_json::json;

use super::decide::{self, container_label, instances, machine_body, plan, pool_provider_id};
use crate::api::DELETE_MACHINE_ANNOTATION;
use crate::api::capi::Machine;
use crate::api::conditions::{ConditionStatus, READY_CONDITION, REPLICAS_READY_CONDITION};
use crate::api::v1beta2::{
    DevMachine, DevMachineBackendSpec, DevMachinePool, DevMachinePoolBackendSpec,
    DevMachinePoolSpec, DevMachinePoolStatus, DevMachineSpec, DevMachineStatus, DockerMachine,
    DockerMachineBackendSpec, DockerMachinePoolBackendSpec, Mount,
};
use crate::controllers::fixtures::*;
use crate::controllers::kinds::{
    PoolView, Recorded, Served, ServedKind, UnsupportedBackend, dev_machine_as_docker,
};
use crate::docker::node::FAILURE_DOMAIN_LABEL;
use crate::docker::types::ContainerSummary;

const IMAGE: &str = "kindest/node:v1.31.2";

/// A DevMachinePool `pool-0` of namespace `ns` with the docker backend `docker`.
fn dev_pool(docker: Option<DockerMachinePoolBackendSpec>) -> DevMachinePool {
    let mut pool = DevMachinePool::new(
        "pool-0",
        DevMachinePoolSpec {
            provider_id: String::new(),
            provider_id_list: Vec::new(),
            backend: DevMachinePoolBackendSpec { docker },
        },
    );
    pool.metadata.namespace = Some("ns".into());
    pool.metadata.uid = Some("uid-pool-0".into());
    pool
}

fn view(pool: &DevMachinePool) -> PoolView {
    pool.view().expect("the docker backend")
}

/// A DevMachine of the pool: a provisioned, ready machine of container `c1-<name>` owned by
/// Machine `m-<name>`, its settings under `backend.docker`.
fn dev_machine(name: &str) -> DevMachine {
    let docker = DockerMachine::test(name)
        .owned_by(&format!("m-{name}"))
        .provisioned_as(&format!("c1-{name}"))
        .with_condition(READY_CONDITION, ConditionStatus::True, "Ready");
    let mut status = DevMachineStatus::from(&docker.status.clone().unwrap_or_default());
    status.initialization.provisioned = Some(true);
    DevMachine {
        metadata: docker.metadata,
        spec: DevMachineSpec {
            provider_id: docker.spec.provider_id,
            backend: DevMachineBackendSpec {
                docker: Some(DockerMachineBackendSpec::default()),
                in_memory: None,
            },
        },
        status: Some(status),
    }
}

fn container(name: &str, fd: &str) -> ContainerSummary {
    let mut summary = ContainerSummary {
        name: format!("c1-{name}"),
        image: IMAGE.into(),
        running: true,
        ..Default::default()
    };
    summary
        .labels
        .insert(FAILURE_DOMAIN_LABEL.into(), fd.into());
    summary
}

#[test]
fn a_dev_machine_pool_is_viewed_as_a_docker_machine_pool_with_its_own_identity() {
    let mut pool = dev_pool(Some(DockerMachinePoolBackendSpec {
        custom_image: IMAGE.into(),
        pre_load_images: vec!["busybox:1.36".into()],
        extra_mounts: vec![Mount {
            container_path: "/var/run/docker.sock".into(),
            host_path: "/var/run/docker.sock".into(),
            ..Default::default()
        }],
    }));
    pool.spec.provider_id_list = vec!["docker:////c1-a".into()];
    pool.status = Some(DevMachinePoolStatus {
        replicas: 1,
        infrastructure_machine_kind: "DevMachine".into(),
        ..Default::default()
    });
    let view = view(&pool);
    assert_eq!(view.served(), Served::Dev);
    assert_eq!(view.spec.template.custom_image, IMAGE);
    assert_eq!(view.spec.template.pre_load_images, ["busybox:1.36"]);
    assert_eq!(view.spec.template.extra_mounts.len(), 1);
    assert_eq!(view.spec.provider_id_list, ["docker:////c1-a"]);
    assert_eq!(view.status.as_ref().map(|s| s.replicas), Some(1));
    let reference = view.reference();
    assert_eq!(reference.kind.as_deref(), Some("DevMachinePool"));
    assert_eq!(reference.uid.as_deref(), Some("uid-pool-0"));
}

#[test]
fn a_dev_machine_pool_without_the_docker_backend_has_no_view() {
    // CAPD 1.14 has no other backend for pools: the reconcile reports it unsupported.
    assert_eq!(dev_pool(None).view().err(), Some(UnsupportedBackend));
    let message = crate::controllers::unsupported::POOL_MESSAGE;
    assert!(message.contains("spec.backend.docker") && !message.contains("inMemory"));
}

#[test]
fn what_differs_for_a_dev_machine_pool_is_named_by_its_generation() {
    assert_eq!(
        pool_provider_id(Served::Dev, "c1", "pool-0"),
        "dev:////c1-dmp-pool-0"
    );
    assert_eq!(
        container_label(Served::Dev),
        "dev.cluster.x-k8s.io/machine-pool"
    );
    assert_eq!(
        container_label(Served::Docker),
        "docker.cluster.x-k8s.io/machine-pool"
    );
}

#[test]
fn the_machine_of_a_dev_pool_container_is_a_dev_machine_labelled_and_owned_as_capd_makes_it() {
    let mut pool = dev_pool(Some(DockerMachinePoolBackendSpec {
        custom_image: IMAGE.into(),
        ..Default::default()
    }));
    pool.labels_mut()
        .insert("cluster.x-k8s.io/watch-filter".into(), "team-a".into());
    let long = "a-machine-pool-name-that-is-much-longer-than-sixty-three-characters-x";
    let body = machine_body(&view(&pool), long, "c1", "worker-abc123");
    assert_eq!(body["kind"], "DevMachine");
    assert_eq!(
        body["spec"],
        json!({"backend": {"docker": {"customImage": IMAGE}}})
    );
    let labels = &body["metadata"]["labels"];
    assert_eq!(labels["cluster.x-k8s.io/cluster-name"], "c1");
    assert_eq!(
        labels["cluster.x-k8s.io/pool-name"],
        crate::api::capi::label_value(long),
        "formatted as core formats names into labels"
    );
    assert_eq!(labels["cluster.x-k8s.io/watch-filter"], "team-a");
    assert_eq!(
        body["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DevMachinePool",
            "name": "pool-0",
            "uid": "uid-pool-0",
        }]),
        "owned by the pool, not as controller: core makes the Machine the controller"
    );
    // The same pool as a DockerMachinePool: a DockerMachine with the settings at the top.
    let docker = crate::controllers::kinds::View::docker((*view(&pool)).clone());
    let body = machine_body(&docker, "pool-0", "c1", "worker-abc123");
    assert_eq!(body["kind"], "DockerMachine");
    assert_eq!(body["spec"], json!({"customImage": IMAGE}));
    assert_eq!(
        body["metadata"]["ownerReferences"][0]["kind"],
        "DockerMachinePool"
    );
}

#[test]
fn a_dev_pool_scales_down_through_the_owner_machines_of_its_dev_machines() {
    let names = [("a", "fd1"), ("b", "fd1"), ("c", "fd2")];
    let containers: Vec<ContainerSummary> = names.iter().map(|(n, fd)| container(n, fd)).collect();
    let dev_machines: Vec<DevMachine> = names.iter().map(|(n, _)| dev_machine(n)).collect();
    let seen: Vec<DockerMachine> = dev_machines.iter().map(dev_machine_as_docker).collect();
    let mut machines: Vec<Machine> = names
        .iter()
        .map(|(n, _)| Machine::test(&format!("m-{n}")))
        .collect();
    machines[0]
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(DELETE_MACHINE_ANNOTATION.into(), String::new());
    let found = instances("c1", &containers, &seen, &machines);
    assert!(found.iter().all(|i| i.provisioned() && i.ready()));
    let fds: Vec<String> = vec!["fd1".into(), "fd2".into()];
    let plan = plan(&found, 1, IMAGE, &fds);
    let deleted: Vec<&str> = plan
        .delete_machines
        .iter()
        .map(|(m, _)| m.as_str())
        .collect();
    // The annotated Machine first, then the crowded domain's newest: never the DevMachines.
    assert_eq!(deleted, ["m-a", "m-b"]);
    assert!(plan.create.is_empty());
    assert_eq!(
        decide::provider_ids(&found),
        ["docker:////c1-a", "docker:////c1-b", "docker:////c1-c"]
    );
}

#[test]
fn a_dev_pool_reports_its_machines_kind_replicas_and_conditions_in_its_own_shape() {
    let names = [("a", "fd1"), ("b", "fd2")];
    let containers: Vec<ContainerSummary> = names.iter().map(|(n, fd)| container(n, fd)).collect();
    let seen: Vec<DockerMachine> = names
        .iter()
        .map(|(n, _)| dev_machine_as_docker(&dev_machine(n)))
        .collect();
    let machines: Vec<Machine> = names
        .iter()
        .map(|(n, _)| Machine::test(&format!("m-{n}")))
        .collect();
    let found = instances("c1", &containers, &seen, &machines);
    let scaling = decide::status(Served::Dev, &Default::default(), &found, 3, Some(1));
    assert_eq!(scaling.infrastructure_machine_kind, "DevMachine");
    assert!(!scaling.ready);
    // CAPD 1.14 never writes ReplicasReady=False; this provider says why the pool is not ready.
    let replicas_ready = |status: &crate::api::v1beta2::DockerMachinePoolStatus| {
        crate::api::conditions::find_condition(&status.conditions, REPLICAS_READY_CONDITION)
            .map(|c| (c.status, c.reason.clone()))
    };
    assert_eq!(
        replicas_ready(&scaling),
        Some((ConditionStatus::False, "ScalingUp".into()))
    );
    let complete = decide::status(Served::Dev, &scaling, &found, 2, Some(2));
    assert!(complete.ready);
    assert_eq!(complete.replicas, 2);
    assert_eq!(
        replicas_ready(&complete),
        Some((ConditionStatus::True, "ReplicasReady".into()))
    );
    // As written to the DevMachinePool: no v1beta1 conditions (it has no v1beta1 version), the
    // instances kept, the kind named.
    let written = serde_json::to_value(DevMachinePoolStatus::from(&complete)).unwrap();
    assert!(written.get("deprecated").is_none(), "{written}");
    assert_eq!(written["infrastructureMachineKind"], "DevMachine");
    assert_eq!(written["replicas"], 2);
    assert_eq!(written["ready"], true);
    assert_eq!(written["instances"][0]["instanceName"], "a");
    assert_eq!(written["instances"][0]["providerID"], "docker:////c1-a");
    let types: Vec<&str> = written["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    for type_ in ["Ready", "ReplicasReady", "Paused"] {
        assert!(types.contains(&type_), "{types:?}");
    }
    // Scaled to zero: a zero count written, not left out (core would keep its old one).
    let empty = decide::status(Served::Dev, &complete, &[], 0, Some(3));
    let written = serde_json::to_value(DevMachinePoolStatus::from(&empty)).unwrap();
    assert_eq!(written["replicas"], 0);
}

#[test]
fn a_dev_pool_whose_status_is_written_reads_back_unchanged() {
    // The status a pass computes has v1beta1 conditions a DevMachinePool cannot hold: compared as
    // written, the next pass over the written object finds nothing to write.
    let names = [("a", "fd1")];
    let containers: Vec<ContainerSummary> = names.iter().map(|(n, fd)| container(n, fd)).collect();
    let seen: Vec<DockerMachine> = names
        .iter()
        .map(|(n, _)| dev_machine_as_docker(&dev_machine(n)))
        .collect();
    let machines = vec![Machine::test("m-a")];
    let found = instances("c1", &containers, &seen, &machines);
    let mut pool = dev_pool(Some(DockerMachinePoolBackendSpec::default()));
    let computed = decide::status(Served::Dev, &Default::default(), &found, 1, Some(1));
    assert!(!computed.deprecated.v1beta1.conditions.is_empty());
    let written = view(&pool).as_written(&computed);
    assert!(written.deprecated.v1beta1.conditions.is_empty());
    pool.status = Some(DevMachinePoolStatus::from(&written));
    let again = view(&pool);
    assert_eq!(again.status.as_ref(), Some(&written));
    let next = decide::status(Served::Dev, &written, &found, 1, Some(1));
    assert_eq!(again.as_written(&next), written, "nothing to write");
    // A DockerMachinePool keeps everything.
    let docker = crate::controllers::kinds::View::docker((*view(&pool)).clone());
    assert_eq!(docker.as_written(&computed), computed);
}

#[test]
fn a_dev_machine_naming_no_backend_still_counts_as_a_machine_of_its_pool() {
    let mut machine = dev_machine("a");
    machine.spec.backend = DevMachineBackendSpec::default();
    let seen = dev_machine_as_docker(&machine);
    assert_eq!(seen.metadata.name.as_deref(), Some("a"));
    assert_eq!(seen.spec.provider_id, "docker:////c1-a");
    assert_eq!(
        seen.status.and_then(|s| s.initialization.provisioned),
        Some(true)
    );
}
