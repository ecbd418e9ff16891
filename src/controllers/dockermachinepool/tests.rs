//! Tests of the pool decisions: scale up with an even spread, scale down through owner Machines
//! in the documented order, rollouts, vanished containers, and the status; and what differs for
//! a DevMachinePool (its view, machine kind, container label and provider ID).

use super::decide::{self, Instance, docker_machine_name, instances, plan, pool_provider_id};
use crate::api::DELETE_MACHINE_ANNOTATION;
use crate::api::capi::Machine;
use crate::api::conditions::{
    ConditionStatus, READY_CONDITION, REPLICAS_READY_CONDITION, find_condition, legacy,
};
use crate::api::v1beta2::{DockerMachine, DockerMachinePoolStatus};
use crate::controllers::fixtures::*;
use crate::controllers::kinds::Served;
use crate::docker::node::FAILURE_DOMAIN_LABEL;
use crate::docker::types::ContainerSummary;

const IMAGE: &str = "kindest/node:v1.31.2";

fn container(name: &str, fd: &str, image: &str) -> ContainerSummary {
    let mut summary = ContainerSummary {
        name: format!("c1-{name}"),
        image: image.into(),
        running: true,
        ..Default::default()
    };
    summary
        .labels
        .insert(FAILURE_DOMAIN_LABEL.into(), fd.into());
    summary
}

fn docker_machine(name: &str) -> DockerMachine {
    DockerMachine::test(name)
        .owned_by(&format!("m-{name}"))
        .provisioned_as(&format!("c1-{name}"))
        .with_condition(READY_CONDITION, ConditionStatus::True, "Ready")
}

fn provisioned(mut dm: DockerMachine) -> DockerMachine {
    dm.status
        .get_or_insert_with(Default::default)
        .initialization
        .provisioned = Some(true);
    dm
}

fn machine(name: &str) -> Machine {
    Machine::test(&format!("m-{name}"))
}

fn marked(mut machine: Machine) -> Machine {
    machine
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(DELETE_MACHINE_ANNOTATION.into(), String::new());
    machine
}

fn fds() -> Vec<String> {
    vec!["fd1".into(), "fd2".into(), "fd3".into()]
}

/// A pool of complete instances `(name, failure domain)`.
fn pool(names: &[(&str, &str)]) -> (Vec<ContainerSummary>, Vec<DockerMachine>, Vec<Machine>) {
    (
        names
            .iter()
            .map(|(n, fd)| container(n, fd, IMAGE))
            .collect(),
        names
            .iter()
            .map(|(n, _)| provisioned(docker_machine(n)))
            .collect(),
        names.iter().map(|(n, _)| machine(n)).collect(),
    )
}

fn deleted(plan: &decide::Plan) -> Vec<&str> {
    plan.delete_machines
        .iter()
        .map(|(m, _)| m.as_str())
        .collect()
}

#[test]
fn scaling_up_from_zero_spreads_new_containers_evenly_over_the_failure_domains() {
    let plan = plan(&[], 5, IMAGE, &fds());
    let placed: Vec<_> = plan
        .create
        .iter()
        .map(|fd| fd.as_deref().unwrap())
        .collect();
    assert_eq!(placed, ["fd1", "fd2", "fd3", "fd1", "fd2"]);
    assert!(plan.delete_machines.is_empty());
}

#[test]
fn scaling_up_fills_the_emptiest_failure_domain_first() {
    let (containers, dms, machines) = pool(&[("a", "fd1"), ("b", "fd1"), ("c", "fd2")]);
    let found = instances("c1", &containers, &dms, &machines);
    let plan = plan(&found, 5, IMAGE, &fds());
    assert_eq!(
        plan.create,
        [Some("fd3".to_string()), Some("fd2".to_string())]
    );
}

#[test]
fn a_pool_without_failure_domains_places_containers_nowhere() {
    assert_eq!(plan(&[], 2, IMAGE, &[]).create, [None, None]);
}

#[test]
fn containers_without_their_docker_machine_get_one_and_are_not_created_again() {
    // A manager killed between the container and its DockerMachine.
    let containers = vec![container("a", "fd1", IMAGE), container("b", "fd2", IMAGE)];
    let dms = vec![provisioned(docker_machine("a"))];
    let machines = vec![machine("a")];
    let found = instances("c1", &containers, &dms, &machines);
    let plan = plan(&found, 2, IMAGE, &fds());
    assert!(plan.create.is_empty(), "no duplicate container: {plan:?}");
    assert_eq!(plan.docker_machines, ["c1-b"]);
    assert_eq!(
        docker_machine_name("c1", "c1-worker-x1y2z3"),
        "worker-x1y2z3"
    );
}

#[test]
fn scaling_down_prefers_annotated_then_outdated_then_unprovisioned_then_the_crowded_domain() {
    let (mut containers, mut dms, mut machines) = pool(&[
        ("a", "fd1"),
        ("b", "fd1"),
        ("c", "fd2"),
        ("d", "fd3"),
        ("e", "fd2"),
    ]);
    machines[3] = marked(machine("d"));
    containers[2].image = "kindest/node:v1.30.0".into();
    dms[4] = docker_machine("e"); // not provisioned
    let found = instances("c1", &containers, &dms, &machines);
    let order: Vec<Vec<String>> = (1..=4)
        .map(|cut| {
            plan(&found, 5 - cut, IMAGE, &fds())
                .delete_machines
                .into_iter()
                .map(|(machine, _)| machine)
                .collect()
        })
        .collect();
    assert_eq!(order[0], ["m-d"]);
    assert_eq!(order[1], ["m-d", "m-c"]);
    assert_eq!(order[2], ["m-d", "m-c", "m-e"]);
    // Left: a and b, both in fd1, which is now the crowded one: the newer name goes first.
    assert_eq!(order[3], ["m-d", "m-c", "m-e", "m-b"]);
    let plan = plan(&found, 3, IMAGE, &fds());
    let why: Vec<&str> = plan.delete_machines.iter().map(|(_, why)| *why).collect();
    assert_eq!(
        why,
        [
            "marked with the delete-machine annotation",
            "its image is outdated"
        ]
    );
}

#[test]
fn machines_already_going_away_are_not_counted_or_deleted_twice() {
    let (containers, mut dms, mut machines) = pool(&[("a", "fd1"), ("b", "fd2"), ("c", "fd3")]);
    machines[2] = machine("c").deleting();
    dms[1] = provisioned(docker_machine("b")).deleting();
    let found = instances("c1", &containers, &dms, &machines);
    let plan = plan(&found, 1, IMAGE, &fds());
    assert!(plan.create.is_empty());
    assert!(plan.delete_machines.is_empty(), "{plan:?}");
}

#[test]
fn a_rollout_creates_machines_of_the_new_image_and_deletes_the_outdated_ones() {
    let (mut containers, dms, machines) = pool(&[("a", "fd1"), ("b", "fd2")]);
    for c in &mut containers {
        c.image = "kindest/node:v1.30.0".into();
    }
    let found = instances("c1", &containers, &dms, &machines);
    let plan = plan(&found, 2, IMAGE, &fds());
    assert_eq!(plan.create.len(), 2);
    // The new containers are not listed yet; the next look removes the outdated ones.
    assert!(plan.delete_machines.is_empty());
    let mut newer = containers.clone();
    newer.push(container("c", "fd3", IMAGE));
    newer.push(container("d", "fd1", IMAGE));
    let found = instances("c1", &newer, &dms, &machines);
    let plan = decide::plan(&found, 2, IMAGE, &fds());
    assert!(plan.create.is_empty());
    // Both outdated; fd1 holds two machines, so its one goes first.
    assert_eq!(deleted(&plan), ["m-a", "m-b"]);
}

#[test]
fn a_vanished_container_has_its_machine_replaced() {
    let (mut containers, dms, machines) = pool(&[("a", "fd1"), ("b", "fd2")]);
    containers.remove(1);
    let found = instances("c1", &containers, &dms, &machines);
    let plan = plan(&found, 2, IMAGE, &fds());
    assert_eq!(deleted(&plan), ["m-b"]);
    assert_eq!(plan.delete_machines[0].1, "its container is gone");
    assert_eq!(plan.create, [Some("fd2".to_string())]);
}

#[test]
fn instances_without_a_machine_yet_wait_instead_of_being_deleted() {
    let containers = vec![container("a", "fd1", IMAGE), container("b", "fd2", IMAGE)];
    let dms = vec![DockerMachine::test("a"), DockerMachine::test("b")];
    let found = instances("c1", &containers, &dms, &[]);
    let plan = plan(&found, 0, IMAGE, &fds());
    assert!(plan.delete_machines.is_empty());
    assert_eq!(plan.waiting_for_machines, 2);
}

#[test]
fn provider_ids_are_sorted_and_skip_machines_being_deleted_or_not_provisioned() {
    let (containers, mut dms, machines) = pool(&[("c", "fd1"), ("a", "fd2"), ("b", "fd3")]);
    dms[2] = dms[2].clone().deleting();
    dms.push(DockerMachine::test("z"));
    let found = instances("c1", &containers, &dms, &machines);
    assert_eq!(
        decide::provider_ids(&found),
        ["docker:////c1-a", "docker:////c1-c"]
    );
    assert_eq!(
        pool_provider_id(Served::Docker, "c1", "pool-0"),
        "docker:////c1-dmp-pool-0"
    );
}

fn replicas_ready(status: &DockerMachinePoolStatus) -> (ConditionStatus, String) {
    let c = find_condition(&status.conditions, REPLICAS_READY_CONDITION).unwrap();
    (c.status, c.reason.clone())
}

#[test]
fn the_status_counts_replicas_and_says_when_the_pool_is_complete() {
    let (containers, dms, machines) = pool(&[("a", "fd1"), ("b", "fd2")]);
    let found: Vec<Instance<'_>> = instances("c1", &containers, &dms, &machines);
    let scaling = decide::status(Served::Docker, &Default::default(), &found, 3, Some(2));
    assert_eq!(scaling.replicas, 2);
    assert!(!scaling.ready);
    assert_eq!(scaling.infrastructure_machine_kind, "DockerMachine");
    assert_eq!(
        replicas_ready(&scaling),
        (ConditionStatus::False, "ScalingUp".into())
    );
    let complete = decide::status(Served::Docker, &scaling, &found, 2, Some(3));
    assert!(complete.ready);
    assert_eq!(complete.instances.len(), 2);
    assert_eq!(complete.instances[0].instance_name, "a");
    assert_eq!(
        replicas_ready(&complete),
        (ConditionStatus::True, "ReplicasReady".into())
    );
    let ready = find_condition(&complete.conditions, READY_CONDITION).unwrap();
    assert!(ready.is_true());
    let legacy_ready = complete
        .deprecated
        .v1beta1
        .conditions
        .iter()
        .find(|c| c.type_ == legacy::READY_CONDITION)
        .unwrap();
    assert_eq!(legacy_ready.status, "True");
    // Scaling down again: not ready replicas, but `ready` stays true as in CAPD.
    let shrinking = decide::status(Served::Docker, &complete, &found, 1, Some(4));
    assert!(shrinking.ready);
    assert_eq!(
        replicas_ready(&shrinking),
        (ConditionStatus::False, "ScalingDown".into())
    );
}

#[test]
fn a_paused_pool_only_says_so() {
    let status = decide::paused(&Default::default(), Some(1));
    let paused = find_condition(&status.conditions, "Paused").unwrap();
    assert!(paused.is_true());
    assert_eq!(status.replicas, 0);
}

#[test]
fn random_suffixes_are_six_lowercase_alphanumerics() {
    for _ in 0..100 {
        let suffix = decide::random_suffix();
        assert_eq!(suffix.len(), 6);
        assert!(
            suffix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
    }
}

#[test]
fn a_pool_scaled_to_zero_reports_zero_replicas_in_its_status_apply() {
    // Core keeps its last count when `status.replicas` is absent, so an omitted zero would leave
    // the MachinePool showing its old size (and its old providerIDList) for ever.
    let (containers, dms, machines) = pool(&[("a", "fd1")]);
    let found = instances("c1", &containers, &dms, &machines);
    let one = decide::status(Served::Docker, &Default::default(), &found, 1, Some(1));
    let empty = decide::status(Served::Docker, &one, &[], 0, Some(2));
    let body = crate::controllers::apply::body::<crate::api::v1beta2::DockerMachinePool>(
        "status",
        serde_json::to_value(&empty).unwrap(),
    );
    assert_eq!(body["status"]["replicas"], 0);

    let v1beta1 = crate::api::v1beta1::DockerMachinePoolStatus::default();
    assert_eq!(serde_json::to_value(&v1beta1).unwrap()["replicas"], 0);
}
