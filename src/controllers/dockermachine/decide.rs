//! Pure decisions of the DockerMachine reconcile, one function per step, in CAPD's order:
//! gate → container → load balancer → cgroups → preloaded images → provisioned → bootstrap.
//! Each returns the condition to record and what to do; the reconcile performs it.

use std::time::Duration;

use kube::core::ObjectMeta;

use crate::api::capi::{Cluster, Machine, is_paused};
use crate::api::conditions::{
    BOOTSTRAP_COMPLETED_CONDITION, BOOTSTRAP_TIMED_OUT_REASON, CGROUPS_READY_CONDITION,
    COMPLETED_REASON, CONTAINER_PROVISIONED_CONDITION, Condition, ConditionStatus, DELETING_REASON,
    FAILED_REASON, NOT_COMPLETED_REASON, NOT_PROVISIONED_REASON, NOT_READY_REASON,
    PRELOADED_IMAGES_READY_CONDITION, PROVISIONED_REASON, READY_REASON,
    WAITING_FOR_BOOTSTRAP_DATA_REASON, WAITING_FOR_CGROUPS_REASON,
    WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON, WAITING_FOR_CONTAINER_REASON,
    WAITING_FOR_CONTROL_PLANE_INITIALIZED_REASON, WAITING_FOR_PRELOADED_IMAGES_REASON,
    find_condition,
};
use crate::api::v1beta2::{DockerCluster, DockerMachine};
use crate::api::{DOCKER_MACHINE_FINALIZER, LEGACY_WEIGHT_ANNOTATION, WEIGHT_ANNOTATION};
use crate::controllers::conditions::condition;
use crate::controllers::dockermachine::container::is_pool_machine;
use crate::controllers::meta::{is_deleting, owner_machine};
use crate::controllers::tasks::TaskState;

/// Pause before a failed cgroups or preload task is tried again (CAPD: 5 s).
pub const STEP_RETRY: Duration = Duration::from_secs(5);

/// Pause before looking again for the workload cluster or its Node (CAPD: 5 s).
pub const NODE_RETRY: Duration = Duration::from_secs(5);

/// Pause before the pass that deletes a machine whose deletion began during a pass that drained
/// it. The watch usually brings that pass sooner; the pause keeps a watch that lags behind from
/// turning the drain into a busy loop.
pub const DELETION_BEGAN_RETRY: Duration = Duration::from_secs(1);

/// What the reconcile does with a DockerMachine before touching any infrastructure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Leave it until something it watches changes; the text says why (logged).
    Skip(&'static str),
    /// Leave it and look again after [`GATE_RETRY`]: what it waits for is not watched (logged).
    Wait(&'static str),
    /// The owner Machine is unknown while deleting: only remove our finalizer.
    ReleaseFinalizer,
    /// Paused: only record the `Paused` condition.
    Paused,
    /// Reconcile (normal or delete).
    Proceed,
}

/// Pause before looking again for an object the controller does not watch (a pool machine's
/// MachinePool).
pub const GATE_RETRY: Duration = Duration::from_secs(10);

/// The objects around a DockerMachine, as found.
#[derive(Debug, Clone, Copy, Default)]
pub struct Owners<'a> {
    /// The owner Machine.
    pub machine: Option<&'a Machine>,
    /// The Cluster named by the Machine.
    pub cluster: Option<&'a Cluster>,
    /// The Cluster's DockerCluster.
    pub docker_cluster: Option<&'a DockerCluster>,
    /// A machine of a MachinePool (label `cluster.x-k8s.io/pool-name`) whose MachinePool was not
    /// found: its bootstrap data and version are unknown.
    pub machine_pool_missing: bool,
}

/// The preamble, in CAPD 1.12's order: owner Machine, Cluster, paused, `spec.infrastructureRef`,
/// DockerCluster, and a pool machine's MachinePool. A DockerMachine being deleted proceeds as soon
/// as its Machine reference exists, so its container is removed even when the other objects are
/// already gone.
pub fn gate(meta: &ObjectMeta, owners: Owners<'_>) -> Gate {
    let first = owner_gate(meta, owners.machine, owners.cluster);
    if first != Gate::Proceed || is_deleting(meta) {
        return first;
    }
    if owners
        .cluster
        .is_some_and(|c| c.spec.infrastructure_ref.is_none())
    {
        return Gate::Skip("Cluster has no infrastructureRef yet");
    }
    if owners.docker_cluster.is_none() {
        return Gate::Skip(
            "The infrastructure cluster (DockerCluster or DevCluster) is not available yet",
        );
    }
    if owners.machine_pool_missing {
        return Gate::Wait(
            "Waiting for the MachinePool named by the label cluster.x-k8s.io/pool-name",
        );
    }
    Gate::Proceed
}

/// The part of the preamble that needs only the owners: the owner Machine, its Cluster, and
/// pause. It also guards objects this provider cannot serve (a Dev* backend it does not
/// implement), which the contract leaves alone until they are owned and while they are paused.
pub fn owner_gate(meta: &ObjectMeta, machine: Option<&Machine>, cluster: Option<&Cluster>) -> Gate {
    let deleting = is_deleting(meta);
    let has_finalizer = meta
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|f| f == DOCKER_MACHINE_FINALIZER);
    if owner_machine(meta).is_none() {
        return if deleting && has_finalizer {
            Gate::ReleaseFinalizer
        } else {
            Gate::Skip(
                "Waiting for Machine Controller to set OwnerRef on the infrastructure machine",
            )
        };
    }
    let (Some(_), Some(cluster)) = (machine, cluster) else {
        return match (deleting, machine) {
            (true, _) => Gate::Proceed,
            (false, None) => Gate::Skip("Waiting for the owner Machine to exist"),
            (false, Some(_)) => Gate::Skip("Waiting for the Cluster to exist"),
        };
    };
    if is_paused(cluster, meta) {
        return Gate::Paused;
    }
    Gate::Proceed
}

/// What the container step does.
#[derive(Debug, Clone, PartialEq)]
pub enum ContainerStep {
    /// The container runs.
    Running,
    /// The machine was provisioned but its container is gone: report it and leave the machine
    /// to be remediated (a provisioned node is never silently replaced).
    Lost,
    /// Wait; the condition says for what.
    Wait(Condition),
    /// The container exists but is stopped (an engine or host restart): start it again, once
    /// [`super::restart::restart_wait`] lets it.
    Restart,
    /// Create the container.
    Create,
}

/// What the engine says about the node container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// No such container.
    Absent,
    /// It exists but does not run.
    Stopped,
    /// It runs.
    Running,
}

/// The container step (CAPD's `reconcileContainer`). Unlike CAPD, which recreates a stopped
/// container before provisioning and reports it lost after, a stopped container is started
/// again: it keeps its file system, its bootstrap and, where the engine allows, its address.
pub fn container_step(
    docker_machine: &DockerMachine,
    machine: &Machine,
    cluster: &Cluster,
    observed: Observed,
) -> ContainerStep {
    let generation = docker_machine.metadata.generation;
    let provisioned = !docker_machine.spec.provider_id.is_empty();
    match observed {
        Observed::Running if provisioned => return ContainerStep::Running,
        Observed::Stopped => return ContainerStep::Restart,
        Observed::Absent if provisioned => return ContainerStep::Lost,
        // A pool creates its containers before their DockerMachines: this one is gone, and the
        // DockerMachinePool replaces the machine (it deletes the owner Machine).
        Observed::Absent if is_pool_machine(docker_machine) => {
            return ContainerStep::Wait(not_provisioned(
                "The container of this machine pool machine does not exist; the DockerMachinePool replaces the machine",
                generation,
            ));
        }
        Observed::Absent | Observed::Running => {}
    }
    if !cluster.infrastructure_provisioned() {
        return ContainerStep::Wait(condition(
            CONTAINER_PROVISIONED_CONDITION,
            ConditionStatus::False,
            WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON,
            "Waiting for the Cluster infrastructure to be ready",
            generation,
        ));
    }
    if machine.bootstrap_data_secret_name().is_none() {
        let wait = if !machine.is_control_plane() && !cluster.control_plane_initialized() {
            (
                WAITING_FOR_CONTROL_PLANE_INITIALIZED_REASON,
                "Waiting for the control plane to be initialized",
            )
        } else {
            (
                WAITING_FOR_BOOTSTRAP_DATA_REASON,
                "Waiting for the bootstrap data secret",
            )
        };
        return ContainerStep::Wait(condition(
            CONTAINER_PROVISIONED_CONDITION,
            ConditionStatus::False,
            wait.0,
            wait.1,
            generation,
        ));
    }
    // A machine is provisioned only with its bootstrap data at hand: a pool machine's container
    // runs before its DockerMachine exists, and waits here like any other machine.
    match observed {
        Observed::Running => ContainerStep::Running,
        _ => ContainerStep::Create,
    }
}

/// `ContainerProvisioned` for a running container. `note` says what was done to it (a restart);
/// without one, the message of a `True` condition is kept, so the last restart stays visible.
pub fn provisioned(docker_machine: &DockerMachine, note: Option<String>) -> Condition {
    let message = note.unwrap_or_else(|| {
        docker_machine
            .status
            .as_ref()
            .and_then(|s| find_condition(&s.conditions, CONTAINER_PROVISIONED_CONDITION))
            .filter(|c| c.is_true())
            .map(|c| c.message.clone())
            .unwrap_or_default()
    });
    condition(
        CONTAINER_PROVISIONED_CONDITION,
        ConditionStatus::True,
        PROVISIONED_REASON,
        message,
        docker_machine.metadata.generation,
    )
}

/// `ContainerProvisioned` for a container that is not running (anymore).
pub fn not_provisioned(message: impl Into<String>, generation: Option<i64>) -> Condition {
    condition(
        CONTAINER_PROVISIONED_CONDITION,
        ConditionStatus::False,
        NOT_PROVISIONED_REASON,
        message,
        generation,
    )
}

/// A load balancer change a control plane machine asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadBalancerStep {
    /// Add the machine (weight 100), then annotate it `100`.
    Register,
    /// The Machine is being deleted: drain it (weight 0), then annotate it `0`.
    Drain,
}

/// The machine's load balancer weight as recorded: CAPD 1.14's annotation
/// ([`WEIGHT_ANNOTATION`]), else the one CAPD 1.12 and earlier builds of this provider wrote
/// ([`LEGACY_WEIGHT_ANNOTATION`]).
pub fn recorded_weight(docker_machine: &DockerMachine) -> Option<&str> {
    let annotations = docker_machine.metadata.annotations.as_ref()?;
    annotations
        .get(WEIGHT_ANNOTATION)
        .or_else(|| annotations.get(LEGACY_WEIGHT_ANNOTATION))
        .map(String::as_str)
}

/// The load balancer step of a control plane machine, with CAPD 1.14's bookkeeping: the weight
/// annotation is absent before registration, `100` once the machine is a backend, `0` once it is
/// drained. A machine CAPD 1.12 registered says so with `status.loadBalancerConfigured` (a
/// DockerMachine's; a DevMachine's `status.backend` is gone from the schema: such a machine is
/// registered once more, which rewrites the same backends), and one it drained with the old
/// annotation at `0`.
pub fn load_balancer_step(
    docker_machine: &DockerMachine,
    machine: &Machine,
    container_provisioned: bool,
) -> Option<LoadBalancerStep> {
    if !machine.is_control_plane() {
        return None;
    }
    let weight = recorded_weight(docker_machine);
    if is_deleting(&machine.metadata) {
        return (weight != Some("0")).then_some(LoadBalancerStep::Drain);
    }
    let configured = docker_machine
        .status
        .as_ref()
        .is_some_and(|s| s.load_balancer_configured);
    (container_provisioned && !configured && weight.is_none()).then_some(LoadBalancerStep::Register)
}

/// The weight annotation value a load balancer step leaves.
pub fn weight_after(step: LoadBalancerStep) -> &'static str {
    match step {
        LoadBalancerStep::Register => "100",
        LoadBalancerStep::Drain => "0",
    }
}

/// What to do about one of the slow steps.
#[derive(Debug, Clone, PartialEq)]
pub struct StepDecision {
    /// The condition to record.
    pub condition: Condition,
    /// What to do with the task.
    pub task: TaskAction,
}

/// What to do with a step's background task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskAction {
    /// Nothing.
    None,
    /// Start it.
    Start,
    /// Forget its failure and look again after a pause.
    RetryAfter(Duration),
    /// Forget its failure and look again after the machine's growing backoff (the failure
    /// needs someone to fix something, such as a missing bootstrap data secret).
    RetryWithBackoff,
}

fn is_true(docker_machine: &DockerMachine, type_: &str) -> bool {
    docker_machine
        .status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, type_))
        .is_some_and(Condition::is_true)
}

fn step(condition: Condition, task: TaskAction) -> StepDecision {
    StepDecision { condition, task }
}

/// `CGroupsReady`: the node's init reached the multi-user target (that `crictl` answers is
/// checked where it is needed, by bootstrap's launch). Done for good once true, or once
/// `spec.providerID` is set (a moved or restored machine).
pub fn cgroups_step(
    docker_machine: &DockerMachine,
    container_running: bool,
    task: Option<&TaskState>,
) -> StepDecision {
    let generation = docker_machine.metadata.generation;
    let ready = || {
        condition(
            CGROUPS_READY_CONDITION,
            ConditionStatus::True,
            READY_REASON,
            "",
            generation,
        )
    };
    if !docker_machine.spec.provider_id.is_empty()
        || is_true(docker_machine, CGROUPS_READY_CONDITION)
    {
        return step(ready(), TaskAction::None);
    }
    if !container_running {
        return step(
            condition(
                CGROUPS_READY_CONDITION,
                ConditionStatus::False,
                WAITING_FOR_CONTAINER_REASON,
                "",
                generation,
            ),
            TaskAction::None,
        );
    }
    task_step(
        CGROUPS_READY_CONDITION,
        READY_REASON,
        "Waiting for the node to boot",
        task,
        generation,
    )
}

/// `PreLoadedImagesReady`: the images of `spec.preLoadImages` are in the node's containerd.
pub fn preload_step(
    docker_machine: &DockerMachine,
    container_running: bool,
    cgroups_ready: bool,
    task: Option<&TaskState>,
) -> StepDecision {
    let generation = docker_machine.metadata.generation;
    let ready = || {
        condition(
            PRELOADED_IMAGES_READY_CONDITION,
            ConditionStatus::True,
            READY_REASON,
            "",
            generation,
        )
    };
    if !docker_machine.spec.provider_id.is_empty()
        || is_true(docker_machine, PRELOADED_IMAGES_READY_CONDITION)
    {
        return step(ready(), TaskAction::None);
    }
    let waiting = |reason| {
        step(
            condition(
                PRELOADED_IMAGES_READY_CONDITION,
                ConditionStatus::False,
                reason,
                "",
                generation,
            ),
            TaskAction::None,
        )
    };
    if !container_running {
        return waiting(WAITING_FOR_CONTAINER_REASON);
    }
    if !cgroups_ready {
        return waiting(WAITING_FOR_CGROUPS_REASON);
    }
    if docker_machine.spec.pre_load_images.is_empty() {
        return step(ready(), TaskAction::None);
    }
    task_step(
        PRELOADED_IMAGES_READY_CONDITION,
        READY_REASON,
        "Loading images",
        task,
        generation,
    )
}

fn task_step(
    type_: &str,
    done_reason: &str,
    starting: &str,
    task: Option<&TaskState>,
    generation: Option<i64>,
) -> StepDecision {
    match task {
        None => step(
            condition(
                type_,
                ConditionStatus::False,
                NOT_READY_REASON,
                starting,
                generation,
            ),
            TaskAction::Start,
        ),
        Some(TaskState::Running(progress) | TaskState::Overdue(progress)) => step(
            condition(
                type_,
                ConditionStatus::False,
                NOT_READY_REASON,
                progress.clone(),
                generation,
            ),
            TaskAction::None,
        ),
        Some(TaskState::Succeeded(_)) => step(
            condition(type_, ConditionStatus::True, done_reason, "", generation),
            TaskAction::None,
        ),
        Some(TaskState::Failed { message, .. }) => step(
            condition(
                type_,
                ConditionStatus::False,
                NOT_READY_REASON,
                message.clone(),
                generation,
            ),
            TaskAction::RetryAfter(STEP_RETRY),
        ),
    }
}

/// Whether the infrastructure is provisioned (CAPD 1.14: container, cgroups and images ready,
/// before bootstrap runs): then `spec.providerID` and `status.initialization.provisioned` are set.
pub fn infrastructure_ready(
    container_running: bool,
    cgroups_ready: bool,
    images_ready: bool,
) -> bool {
    container_running && cgroups_ready && images_ready
}

/// `BootstrapCompleted`. Bootstrap is never started twice: a `True` or `Failed` condition is
/// final, a Machine that has a Node is complete, and the task itself refuses to launch when the
/// node shows any trace of an earlier run. Past `spec.bootstrapTimeout` a bootstrap still running
/// is reported (`False/BootstrapTimedOut`), not stopped: it is still followed and accepted when
/// it completes.
pub fn bootstrap_step(
    docker_machine: &DockerMachine,
    machine: &Machine,
    prerequisites: [bool; 3],
    task: Option<&TaskState>,
) -> StepDecision {
    let generation = docker_machine.metadata.generation;
    let current = docker_machine
        .status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, BOOTSTRAP_COMPLETED_CONDITION));
    let completed = || {
        condition(
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::True,
            COMPLETED_REASON,
            "",
            generation,
        )
    };
    if let Some(current) = current
        && (current.is_true() || current.reason == FAILED_REASON)
    {
        let mut kept = current.clone();
        kept.observed_generation = generation;
        return step(kept, TaskAction::None);
    }
    // A Machine that has a Node is bootstrapped. CAPD 1.14 removed `spec.bootstrapped`; a node
    // bootstrapped earlier (by CAPD or by us) whose Machine has no Node yet is recognised by the
    // runner before it starts anything: the sentinel or CABPK's success file in the node makes
    // the task succeed without a second `kubeadm init|join`.
    if machine.node_name().is_some() {
        return step(completed(), TaskAction::None);
    }
    let [container, cgroups, images] = prerequisites;
    let waiting = |reason| {
        step(
            condition(
                BOOTSTRAP_COMPLETED_CONDITION,
                ConditionStatus::False,
                reason,
                "",
                generation,
            ),
            TaskAction::None,
        )
    };
    if !container {
        return waiting(WAITING_FOR_CONTAINER_REASON);
    }
    if !cgroups {
        return waiting(WAITING_FOR_CGROUPS_REASON);
    }
    if !images {
        return waiting(WAITING_FOR_PRELOADED_IMAGES_REASON);
    }
    let not_ready = |message: String| {
        condition(
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::False,
            NOT_READY_REASON,
            message,
            generation,
        )
    };
    let timed_out = |message: String| {
        condition(
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::False,
            BOOTSTRAP_TIMED_OUT_REASON,
            message,
            generation,
        )
    };
    match task {
        None => {
            // After a manager restart the condition still says what the runner was doing (and
            // a timeout already reported stays reported, without a second Event).
            let resumed = current
                .filter(|c| !c.message.is_empty())
                .and_then(|c| match c.reason.as_str() {
                    NOT_READY_REASON => Some(not_ready(c.message.clone())),
                    BOOTSTRAP_TIMED_OUT_REASON => Some(timed_out(c.message.clone())),
                    _ => None,
                })
                .unwrap_or_else(|| not_ready("Starting bootstrap".to_string()));
            step(resumed, TaskAction::Start)
        }
        Some(TaskState::Running(progress)) => step(not_ready(progress.clone()), TaskAction::None),
        Some(TaskState::Overdue(progress)) => step(timed_out(progress.clone()), TaskAction::None),
        Some(TaskState::Succeeded(_)) => step(completed(), TaskAction::None),
        Some(TaskState::Failed {
            message,
            terminal: true,
        }) => step(
            condition(
                BOOTSTRAP_COMPLETED_CONDITION,
                ConditionStatus::False,
                FAILED_REASON,
                message.clone(),
                generation,
            ),
            TaskAction::None,
        ),
        Some(TaskState::Failed {
            message,
            terminal: false,
        }) => step(
            condition(
                BOOTSTRAP_COMPLETED_CONDITION,
                ConditionStatus::False,
                NOT_COMPLETED_REASON,
                message.clone(),
                generation,
            ),
            TaskAction::RetryWithBackoff,
        ),
    }
}

/// `ContainerProvisioned=False/Deleting` while the machine is deleted.
pub fn deleting(generation: Option<i64>) -> Condition {
    condition(
        CONTAINER_PROVISIONED_CONDITION,
        ConditionStatus::False,
        DELETING_REASON,
        "Deleting the node container",
        generation,
    )
}
