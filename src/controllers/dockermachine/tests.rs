//! Unit tests of the DockerMachine decisions.

use super::decide::*;
use crate::api::capi::{Cluster, Machine};
use crate::api::conditions::{
    BOOTSTRAP_COMPLETED_CONDITION, CGROUPS_READY_CONDITION, Condition, ConditionStatus,
    NOT_PROVISIONED_REASON,
};
use crate::api::v1beta2::{DockerCluster, DockerMachine, DockerMachineStatus};
use crate::controllers::fixtures::*;
use crate::controllers::tasks::TaskState;

fn owners<'a>(machine: &'a Machine, cluster: &'a Cluster, dc: &'a DockerCluster) -> Owners<'a> {
    Owners {
        machine: Some(machine),
        cluster: Some(cluster),
        docker_cluster: Some(dc),
        machine_pool_missing: false,
    }
}

fn ready_cluster() -> Cluster {
    Cluster::test("c1").with_infrastructure_provisioned()
}

// ---- gate ---------------------------------------------------------------------------------

#[test]
fn a_machine_without_owner_waits_for_the_machine_controller() {
    let dm = DockerMachine::test("m1");
    assert_eq!(
        gate(&dm.metadata, Owners::default()),
        Gate::Skip("Waiting for Machine Controller to set OwnerRef on the infrastructure machine")
    );
}

#[test]
fn a_deleting_machine_without_owner_only_releases_its_finalizer() {
    let dm = DockerMachine::test("m1").with_finalizer().deleting();
    assert_eq!(
        gate(&dm.metadata, Owners::default()),
        Gate::ReleaseFinalizer
    );
}

#[test]
fn a_machine_waits_for_its_cluster_and_docker_cluster() {
    let dm = DockerMachine::test("m1").owned_by("m1");
    let machine = Machine::test("m1");
    let cluster = ready_cluster();
    assert!(matches!(
        gate(
            &dm.metadata,
            Owners {
                machine: Some(&machine),
                ..Default::default()
            }
        ),
        Gate::Skip("Waiting for the Cluster to exist")
    ));
    assert_eq!(
        gate(
            &dm.metadata,
            Owners {
                machine: Some(&machine),
                cluster: Some(&cluster),
                ..Default::default()
            }
        ),
        Gate::Skip("The infrastructure cluster (DockerCluster or DevCluster) is not available yet")
    );
}

#[test]
fn a_paused_cluster_or_annotation_pauses_the_machine() {
    let machine = Machine::test("m1");
    let dc = DockerCluster::test("c1");
    let paused_cluster = ready_cluster().paused();
    let dm = DockerMachine::test("m1").owned_by("m1");
    assert_eq!(
        gate(&dm.metadata, owners(&machine, &paused_cluster, &dc)),
        Gate::Paused
    );
    let annotated = DockerMachine::test("m1").owned_by("m1").paused();
    let cluster = ready_cluster();
    assert_eq!(
        gate(&annotated.metadata, owners(&machine, &cluster, &dc)),
        Gate::Paused
    );
    assert_eq!(
        gate(&dm.metadata, owners(&machine, &cluster, &dc)),
        Gate::Proceed
    );
}

#[test]
fn a_pool_machine_without_its_machine_pool_waits_and_looks_again() {
    let dm = DockerMachine::test("m1").owned_by("m1");
    let (machine, cluster, dc) = (
        Machine::test("m1"),
        ready_cluster(),
        DockerCluster::test("c1"),
    );
    let owners = Owners {
        machine_pool_missing: true,
        ..owners(&machine, &cluster, &dc)
    };
    assert!(matches!(gate(&dm.metadata, owners), Gate::Wait(_)));
    // Deleting needs neither its bootstrap data nor its version.
    let deleting = dm.with_finalizer().deleting();
    assert_eq!(gate(&deleting.metadata, owners), Gate::Proceed);
}

#[test]
fn objects_this_provider_cannot_serve_are_gated_by_owner_and_pause_alone() {
    let dm = DockerMachine::test("m1").owned_by("m1");
    let machine = Machine::test("m1");
    // No DockerCluster (an unsupported backend's cluster is none of ours): still Proceed.
    assert_eq!(
        owner_gate(&dm.metadata, Some(&machine), Some(&ready_cluster())),
        Gate::Proceed
    );
    assert_eq!(
        owner_gate(
            &dm.metadata,
            Some(&machine),
            Some(&ready_cluster().paused())
        ),
        Gate::Paused
    );
    assert!(matches!(
        owner_gate(&DockerMachine::test("m1").metadata, None, None),
        Gate::Skip(_)
    ));
}

#[test]
fn a_deleting_machine_proceeds_even_when_its_cluster_is_gone() {
    let dm = DockerMachine::test("m1")
        .owned_by("m1")
        .with_finalizer()
        .deleting();
    assert_eq!(gate(&dm.metadata, Owners::default()), Gate::Proceed);
}

// ---- container ----------------------------------------------------------------------------

#[test]
fn no_container_is_created_before_the_cluster_infrastructure_is_ready() {
    let dm = DockerMachine::test("m1").owned_by("m1");
    let machine = Machine::test("m1").with_bootstrap_secret("s");
    let step = container_step(&dm, &machine, &Cluster::test("c1"), Observed::Absent);
    let ContainerStep::Wait(condition) = step else {
        panic!("expected a wait, got {step:?}");
    };
    assert_eq!(condition.reason, "WaitingForClusterInfrastructureReady");
    assert_eq!(condition.status, ConditionStatus::False);
}

#[test]
fn a_worker_waits_for_the_control_plane_then_for_bootstrap_data() {
    let dm = DockerMachine::test("m1").owned_by("m1");
    let worker = Machine::test("m1");
    let reason = |cluster: &Cluster, machine: &Machine| match container_step(
        &dm,
        machine,
        cluster,
        Observed::Absent,
    ) {
        ContainerStep::Wait(c) => c.reason,
        other => panic!("expected a wait, got {other:?}"),
    };
    assert_eq!(
        reason(&ready_cluster(), &worker),
        "WaitingForControlPlaneInitialized"
    );
    assert_eq!(
        reason(&ready_cluster().with_control_plane_initialized(), &worker),
        "WaitingForBootstrapData"
    );
    assert_eq!(
        reason(&ready_cluster(), &Machine::test("m1").control_plane()),
        "WaitingForBootstrapData",
        "a control plane does not wait for itself"
    );
}

#[test]
fn a_machine_with_bootstrap_data_gets_its_container_created_or_started_again() {
    let dm = DockerMachine::test("m1").owned_by("m1");
    let machine = Machine::test("m1").with_bootstrap_secret("s");
    let cluster = ready_cluster();
    assert_eq!(
        container_step(&dm, &machine, &cluster, Observed::Absent),
        ContainerStep::Create
    );
    assert_eq!(
        container_step(&dm, &machine, &cluster, Observed::Stopped),
        ContainerStep::Restart,
        "a stopped container is started again, never recreated"
    );
    assert_eq!(
        container_step(&dm, &machine, &cluster, Observed::Running),
        ContainerStep::Running
    );
}

#[test]
fn a_running_pool_container_is_not_provisioned_before_its_bootstrap_data_exists() {
    // Core 1.12's pool Machine: no bootstrap data secret; the pool's has none yet either.
    let machine = Machine::test("worker-abc123");
    let mut dm = DockerMachine::test("worker-abc123").owned_by("worker-abc123");
    dm.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(crate::api::MACHINE_POOL_NAME_LABEL.into(), "mp-0".into());
    let cluster = ready_cluster().with_control_plane_initialized();
    match container_step(&dm, &machine, &cluster, Observed::Running) {
        ContainerStep::Wait(c) => assert_eq!(c.reason, "WaitingForBootstrapData"),
        other => panic!("expected a wait for bootstrap data, got {other:?}"),
    }
    let machine = machine.with_bootstrap_secret("pool-bootstrap");
    assert_eq!(
        container_step(&dm, &machine, &cluster, Observed::Running),
        ContainerStep::Running
    );
}

#[test]
fn a_machine_pool_machine_never_creates_its_container() {
    let machine = Machine::test("worker-abc123").with_bootstrap_secret("s");
    let mut dm = DockerMachine::test("worker-abc123").owned_by("worker-abc123");
    dm.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(crate::api::MACHINE_POOL_NAME_LABEL.into(), "mp-0".into());
    match container_step(&dm, &machine, &ready_cluster(), Observed::Absent) {
        ContainerStep::Wait(c) => {
            assert_eq!(c.reason, NOT_PROVISIONED_REASON);
            assert!(c.message.contains("DockerMachinePool replaces"), "{c:?}");
        }
        other => panic!("a pool machine must wait for its pool, got {other:?}"),
    }
    // Its container is the one the pool named the DockerMachine after, whatever the Machine's name.
    let renamed = Machine::test("mp-0-x7k2p").with_bootstrap_secret("s");
    assert_eq!(
        crate::controllers::dockermachine::container::container_name("c1", &renamed, &dm),
        "c1-worker-abc123"
    );
    assert_eq!(
        container_step(&dm, &machine, &ready_cluster(), Observed::Running),
        ContainerStep::Running
    );
}

#[test]
fn a_provisioned_machine_whose_container_is_gone_is_reported_not_replaced() {
    let dm = DockerMachine::test("m1")
        .owned_by("m1")
        .provisioned_as("c1-m1");
    let machine = Machine::test("m1").with_bootstrap_secret("s");
    assert_eq!(
        container_step(&dm, &machine, &ready_cluster(), Observed::Stopped),
        ContainerStep::Restart,
        "a stopped one is started again"
    );
    assert_eq!(
        container_step(&dm, &machine, &ready_cluster(), Observed::Absent),
        ContainerStep::Lost
    );
}

// ---- load balancer ------------------------------------------------------------------------

#[test]
fn a_provisioned_control_plane_is_registered_once() {
    let cp = Machine::test("m1").control_plane();
    let dm = DockerMachine::test("m1");
    assert_eq!(
        load_balancer_step(&dm, &cp, false),
        None,
        "not before its container runs"
    );
    assert_eq!(
        load_balancer_step(&dm, &cp, true),
        Some(LoadBalancerStep::Register)
    );
    assert_eq!(
        weight_after(LoadBalancerStep::Register),
        "100",
        "registering annotates the machine 100, as CAPD 1.14"
    );
    assert_eq!(
        load_balancer_step(&dm.clone().weighted("100"), &cp, true),
        None,
        "registered: CAPD 1.14's annotation at 100"
    );
    let mut configured = dm.clone();
    configured
        .status
        .get_or_insert_with(Default::default)
        .load_balancer_configured = true;
    assert_eq!(
        load_balancer_step(&configured, &cp, true),
        None,
        "registered: status.loadBalancerConfigured, as CAPD 1.12 records it"
    );
    assert_eq!(
        load_balancer_step(&dm.clone().legacy_weighted("100"), &cp, true),
        None,
        "registered by an earlier capd-rs build (the old annotation)"
    );
    assert_eq!(
        load_balancer_step(&dm, &Machine::test("m1"), true),
        None,
        "workers are not backends"
    );
}

#[test]
fn a_deleting_control_plane_is_drained_as_soon_as_its_machine_deletes() {
    let cp = Machine::test("m1").control_plane().deleting();
    let mut registered = DockerMachine::test("m1");
    registered
        .status
        .get_or_insert_with(Default::default)
        .load_balancer_configured = true;
    assert_eq!(
        load_balancer_step(&registered, &cp, true),
        Some(LoadBalancerStep::Drain)
    );
    assert_eq!(
        load_balancer_step(&DockerMachine::test("m1").weighted("100"), &cp, true),
        Some(LoadBalancerStep::Drain)
    );
    assert_eq!(weight_after(LoadBalancerStep::Drain), "0");
    assert_eq!(
        load_balancer_step(&DockerMachine::test("m1").weighted("0"), &cp, true),
        None,
        "drained already (by us or by CAPD 1.14)"
    );
    assert_eq!(
        load_balancer_step(&DockerMachine::test("m1").legacy_weighted("0"), &cp, true),
        None,
        "drained already by CAPD 1.12 or an earlier capd-rs build (the old annotation)"
    );
    assert_eq!(
        load_balancer_step(&DockerMachine::test("m1").legacy_weighted("100"), &cp, true),
        Some(LoadBalancerStep::Drain),
        "registered under the old annotation: drained"
    );
    let mut both = DockerMachine::test("m1")
        .legacy_weighted("0")
        .weighted("100");
    assert_eq!(
        load_balancer_step(&both, &cp, true),
        Some(LoadBalancerStep::Drain),
        "CAPD 1.14's annotation wins over the old one"
    );
    both = both.weighted("0");
    assert_eq!(load_balancer_step(&both, &cp, true), None);
}

// ---- slow steps ---------------------------------------------------------------------------

#[test]
fn the_boot_wait_starts_once_the_container_runs_and_follows_its_task() {
    let dm = DockerMachine::test("m1");
    let waiting = cgroups_step(&dm, false, None);
    assert_eq!(waiting.condition.reason, "WaitingForContainer");
    assert_eq!(waiting.task, TaskAction::None);
    let start = cgroups_step(&dm, true, None);
    assert_eq!(start.task, TaskAction::Start);
    let running = cgroups_step(
        &dm,
        true,
        Some(&TaskState::Running("Waiting for the runtime".into())),
    );
    assert_eq!(running.condition.message, "Waiting for the runtime");
    let done = cgroups_step(&dm, true, Some(&TaskState::Succeeded(String::new())));
    assert!(done.condition.is_true());
    let failed = cgroups_step(
        &dm,
        true,
        Some(&TaskState::Failed {
            message: "timed out".into(),
            terminal: false,
        }),
    );
    assert_eq!(failed.task, TaskAction::RetryAfter(STEP_RETRY));
    assert_eq!(failed.condition.message, "timed out");
}

#[test]
fn a_provisioned_or_already_ready_machine_never_waits_for_boot_again() {
    let moved = DockerMachine::test("m1").provisioned_as("c1-m1");
    assert!(cgroups_step(&moved, true, None).condition.is_true());
    assert_eq!(cgroups_step(&moved, true, None).task, TaskAction::None);
    let restarted = DockerMachine::test("m1").with_condition(
        CGROUPS_READY_CONDITION,
        ConditionStatus::True,
        "Ready",
    );
    assert_eq!(cgroups_step(&restarted, true, None).task, TaskAction::None);
}

#[test]
fn images_are_preloaded_after_boot_and_an_empty_list_is_ready_at_once() {
    let dm = DockerMachine::test("m1");
    assert_eq!(
        preload_step(&dm, true, false, None).condition.reason,
        "WaitingForCGroups"
    );
    assert!(preload_step(&dm, true, true, None).condition.is_true());
    let with_images = DockerMachine::test("m1").preloading(&["busybox:1"]);
    assert_eq!(
        preload_step(&with_images, true, true, None).task,
        TaskAction::Start
    );
}

#[test]
fn infrastructure_is_ready_before_bootstrap() {
    assert!(infrastructure_ready(true, true, true));
    assert!(!infrastructure_ready(true, true, false));
}

// ---- bootstrap ----------------------------------------------------------------------------

#[test]
fn bootstrap_waits_for_each_prerequisite_in_order() {
    let dm = DockerMachine::test("m1");
    let machine = Machine::test("m1");
    let reason = |p| bootstrap_step(&dm, &machine, p, None).condition.reason;
    assert_eq!(reason([false, false, false]), "WaitingForContainer");
    assert_eq!(reason([true, false, false]), "WaitingForCGroups");
    assert_eq!(reason([true, true, false]), "WaitingForPreloadedImages");
    let start = bootstrap_step(&dm, &machine, [true, true, true], None);
    assert_eq!(start.task, TaskAction::Start);
    assert_eq!(start.condition.reason, "NotReady");
}

#[test]
fn bootstrap_never_starts_again_once_completed_or_failed() {
    let machine = Machine::test("m1");
    for (status, reason) in [
        (ConditionStatus::True, "Completed"),
        (ConditionStatus::False, "Failed"),
    ] {
        let dm =
            DockerMachine::test("m1").with_condition(BOOTSTRAP_COMPLETED_CONDITION, status, reason);
        let step = bootstrap_step(&dm, &machine, [true, true, true], None);
        assert_eq!(step.task, TaskAction::None, "{reason}");
        assert_eq!(step.condition.reason, reason);
    }
}

#[test]
fn a_machine_that_has_a_node_is_bootstrapped() {
    let dm = DockerMachine::test("m1");
    let joined = Machine::test("m1").with_node("c1-m1");
    let step = bootstrap_step(&dm, &joined, [true, true, true], None);
    assert!(step.condition.is_true());
    assert_eq!(step.task, TaskAction::None);
}

/// A DockerMachine CAPD 1.13 or earlier bootstrapped still carries `spec.bootstrapped: true`
/// (stored, or brought by `clusterctl move`): it decodes, and with its Node it is bootstrapped
/// without a task. Without a Node the runner is started, which finds the node's sentinel or
/// CABPK's success file and starts nothing (`bootstrap_tests`:
/// `a_node_bootstrapped_by_another_provider_is_not_bootstrapped_again`,
/// `a_node_with_cabpk_success_file_is_never_bootstrapped_again`).
#[test]
fn a_machine_bootstrapped_by_capd_1_13_is_recognised_by_its_node() {
    let dm: DockerMachine = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "DockerMachine",
        "metadata": {"name": "m1", "namespace": "ns"},
        "spec": {"providerID": "docker:////c1-m1", "bootstrapped": true},
    }))
    .expect("CAPD 1.13's DockerMachine decodes");
    let joined = Machine::test("m1").with_node("c1-m1");
    let step = bootstrap_step(&dm, &joined, [true, true, true], None);
    assert!(step.condition.is_true());
    assert_eq!(step.task, TaskAction::None);
    let step = bootstrap_step(&dm, &Machine::test("m1"), [true, true, true], None);
    assert_eq!(step.task, TaskAction::Start, "the runner looks at the node");
}

#[test]
fn a_restarted_manager_resumes_following_bootstrap_with_the_last_progress() {
    let mut dm = DockerMachine::test("m1");
    dm.status = Some(DockerMachineStatus {
        conditions: vec![Condition::new(
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::False,
            "NotReady",
            "Running bootstrap command [run kubeadm join] (9 of 12)",
        )],
        ..Default::default()
    });
    let step = bootstrap_step(&dm, &Machine::test("m1"), [true, true, true], None);
    assert_eq!(
        step.task,
        TaskAction::Start,
        "the task only observes a runner already launched"
    );
    assert_eq!(
        step.condition.message,
        "Running bootstrap command [run kubeadm join] (9 of 12)"
    );
}

#[test]
fn a_failed_command_is_terminal_and_other_failures_retry_with_backoff() {
    let dm = DockerMachine::test("m1");
    let machine = Machine::test("m1");
    let terminal = bootstrap_step(
        &dm,
        &machine,
        [true, true, true],
        Some(&TaskState::Failed {
            message: "Bootstrap command [run kubeadm init] (7 of 9) failed with exit code 1".into(),
            terminal: true,
        }),
    );
    assert_eq!(terminal.condition.reason, "Failed");
    assert_eq!(terminal.task, TaskAction::None);
    let missing_secret = bootstrap_step(
        &dm,
        &machine,
        [true, true, true],
        Some(&TaskState::Failed {
            message: "Bootstrap data secret default/s not found".into(),
            terminal: false,
        }),
    );
    assert_eq!(missing_secret.condition.reason, "NotCompleted");
    assert_eq!(
        missing_secret.condition.message,
        "Bootstrap data secret default/s not found"
    );
    assert_eq!(missing_secret.task, TaskAction::RetryWithBackoff);
}

/// The message of a bootstrap still running past its timeout.
pub(super) const OVERDUE: &str = "Bootstrap did not complete within 300s (spec.bootstrapTimeout) and is still running command [run kubeadm join] (9 of 12)";

#[test]
fn a_bootstrap_past_its_timeout_is_reported_and_still_followed_until_it_completes() {
    let machine = Machine::test("m1");
    let overdue = bootstrap_step(
        &DockerMachine::test("m1"),
        &machine,
        [true, true, true],
        Some(&TaskState::Overdue(OVERDUE.into())),
    );
    assert_eq!(overdue.condition.status, ConditionStatus::False);
    assert_eq!(overdue.condition.reason, "BootstrapTimedOut");
    assert_eq!(overdue.condition.message, OVERDUE);
    assert_eq!(overdue.task, TaskAction::None, "the task is left running");

    let timed_out = DockerMachine::test("m1").with_condition(
        BOOTSTRAP_COMPLETED_CONDITION,
        ConditionStatus::False,
        "BootstrapTimedOut",
    );
    let completed = bootstrap_step(
        &timed_out,
        &machine,
        [true, true, true],
        Some(&TaskState::Succeeded("ran 12 bootstrap commands".into())),
    );
    assert!(completed.condition.is_true(), "a timeout is not final");
}

#[test]
fn a_restarted_manager_keeps_a_reported_timeout_and_follows_bootstrap_again() {
    let mut dm = DockerMachine::test("m1");
    dm.status = Some(DockerMachineStatus {
        conditions: vec![Condition::new(
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::False,
            "BootstrapTimedOut",
            OVERDUE,
        )],
        ..Default::default()
    });
    let step = bootstrap_step(&dm, &Machine::test("m1"), [true, true, true], None);
    assert_eq!(step.task, TaskAction::Start);
    assert_eq!(step.condition.reason, "BootstrapTimedOut");
    assert_eq!(step.condition.message, OVERDUE);
}
