//! Stopped node containers come back: after an engine or host restart every container of a
//! cluster is stopped (their restart policy, `on-failure:1`, does not start them again). A
//! stopped node container is started again rather than recreated, so it keeps its file system,
//! its bootstrap and, where the engine allows, its address; the order across a cluster is the
//! load balancer first (the DockerCluster controller starts it), then the control planes, then
//! the workers.

use std::time::Duration;

use crate::api::capi::Machine;
use crate::api::conditions::{
    BOOTSTRAP_COMPLETED_CONDITION, BOOTSTRAP_TIMED_OUT_REASON, CONTAINER_PROVISIONED_CONDITION,
    Condition, ConditionStatus, FAILED_REASON, NOT_COMPLETED_REASON, NOT_READY_REASON,
    WAITING_FOR_CONTROL_PLANE_REASON, WAITING_FOR_LOAD_BALANCER_REASON, find_condition,
};
use crate::api::v1beta2::DockerMachine;
use crate::controllers::conditions::condition;
use crate::controllers::context::{Context, EventKind};
use crate::controllers::error::{Error, Result};
use crate::controllers::kinds::MachineView;
use crate::controllers::loadbalancer::control_plane_containers;
use crate::controllers::tasks::TaskState;
use crate::docker::ContainerInfo;
use crate::docker::loadbalancer::find_load_balancer;
use crate::docker::node::is_running;

/// Pause before a stopped container that waits for its load balancer or a control plane is
/// looked at again.
pub const RESTART_RETRY: Duration = Duration::from_secs(5);

/// What runs of the machine's cluster, for the order in which stopped containers start again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterRunning {
    /// The load balancer: `None` when it has no container (it is created by the DockerCluster
    /// controller, or the DockerCluster is externally managed), else whether it runs.
    pub load_balancer: Option<bool>,
    /// Control plane containers of the cluster (running or not).
    pub control_planes: usize,
    /// Those of them that run.
    pub control_planes_running: usize,
}

/// The order stopped containers of a cluster start again in (after an engine or host restart
/// every container is stopped): the load balancer first (started by the DockerCluster
/// controller), then the control planes, then the workers. `Some` is the condition of a
/// container that waits: for a stopped load balancer, or (a worker) for a control plane to run
/// when the cluster has control plane containers and none runs.
pub fn restart_wait(
    machine: &Machine,
    container: &str,
    running: ClusterRunning,
    generation: Option<i64>,
) -> Option<Condition> {
    let (reason, message) = if running.load_balancer == Some(false) {
        (
            WAITING_FOR_LOAD_BALANCER_REASON,
            format!(
                "Container {container} is stopped; waiting for the load balancer to run again before starting it"
            ),
        )
    } else if !machine.is_control_plane()
        && running.control_planes > 0
        && running.control_planes_running == 0
    {
        (
            WAITING_FOR_CONTROL_PLANE_REASON,
            format!(
                "Container {container} is stopped; waiting for a control plane to run again before starting it"
            ),
        )
    } else {
        return None;
    };
    Some(condition(
        CONTAINER_PROVISIONED_CONDITION,
        ConditionStatus::False,
        reason,
        message,
        generation,
    ))
}

/// `BootstrapCompleted=False/Failed` for a container that stopped while bootstrap was under way
/// (launched, or maybe launched), or `None` when its bootstrap had not started or is final.
/// The runner's state lives on the node's `/run` tmpfs, which a restart empties: the restarted
/// node would look fresh, and kubeadm must never run twice on a node, so such a machine is left
/// for remediation.
pub fn interrupted_bootstrap(
    docker_machine: &DockerMachine,
    container: &str,
    task: Option<&TaskState>,
) -> Option<Condition> {
    let current = docker_machine
        .status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, BOOTSTRAP_COMPLETED_CONDITION));
    if current.is_some_and(|c| c.is_true() || c.reason == FAILED_REASON) {
        return None;
    }
    let under_way = match task {
        Some(TaskState::Succeeded(_)) => false,
        Some(TaskState::Running(_) | TaskState::Overdue(_) | TaskState::Failed { .. }) => true,
        None => current.is_some_and(|c| {
            [
                NOT_READY_REASON,
                NOT_COMPLETED_REASON,
                BOOTSTRAP_TIMED_OUT_REASON,
            ]
            .contains(&c.reason.as_str())
        }),
    };
    under_way.then(|| {
        condition(
            BOOTSTRAP_COMPLETED_CONDITION,
            ConditionStatus::False,
            FAILED_REASON,
            format!("Container {container} stopped while bootstrap was running; bootstrap is not run twice on a node, so the machine needs remediation"),
            docker_machine.metadata.generation,
        )
    })
}

/// What runs of a cluster, as the engine says.
///
/// # Errors
/// [`Error`] when the engine cannot list the containers.
pub async fn cluster_running(ctx: &Context, cluster_name: &str) -> Result<ClusterRunning> {
    let load_balancer = find_load_balancer(ctx.runtime.as_ref(), cluster_name)
        .await?
        .map(|lb| lb.running);
    let control_planes = control_plane_containers(ctx, cluster_name).await?;
    Ok(ClusterRunning {
        load_balancer,
        control_planes: control_planes.len(),
        control_planes_running: control_planes.iter().filter(|c| c.running).count(),
    })
}

/// Starts the stopped node container again and publishes an Event; returns it as inspected
/// when it runs.
///
/// # Errors
/// [`Error`] when the engine refuses to start or inspect it.
pub async fn start_node(
    ctx: &Context,
    docker_machine: &MachineView,
    name: &str,
) -> Result<Option<ContainerInfo>> {
    ctx.runtime
        .start_container(name)
        .await
        .map_err(Error::runtime(format!("start container {name}")))?;
    let running = ctx
        .runtime
        .inspect_container(name)
        .await
        .map_err(Error::runtime(format!("inspect container {name}")))?
        .filter(is_running);
    if running.is_some() {
        tracing::info!(container = name, "Started the stopped node container again");
        ctx.event(
            docker_machine,
            EventKind::Normal,
            "ContainerRestarted",
            format!("Node container {name} was stopped; started it again"),
        )
        .await;
    }
    Ok(running)
}
