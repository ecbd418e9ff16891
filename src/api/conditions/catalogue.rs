//! Condition types and reasons written by the provider (the same strings CAPD writes, so
//! Cluster API and users see the same vocabulary).

// ---- v1beta2 condition types -------------------------------------------------------------

/// Summary condition of every object: `True` when all the object's other conditions are.
pub const READY_CONDITION: &str = "Ready";
/// Set on every object: `True` while the object or its Cluster is paused.
pub const PAUSED_CONDITION: &str = "Paused";
/// DockerCluster: the haproxy load balancer container runs and answers.
pub const LOAD_BALANCER_AVAILABLE_CONDITION: &str = "LoadBalancerAvailable";
/// DockerMachine: the node container exists and runs.
pub const CONTAINER_PROVISIONED_CONDITION: &str = "ContainerProvisioned";
/// DockerMachine: cgroup set-up inside the node container is done.
pub const CGROUPS_READY_CONDITION: &str = "CGroupsReady";
/// DockerMachine: images listed in `spec.preLoadImages` were imported into the node.
pub const PRELOADED_IMAGES_READY_CONDITION: &str = "PreLoadedImagesReady";
/// DockerMachine: the bootstrap data (cloud-init or Ignition) ran to completion.
pub const BOOTSTRAP_COMPLETED_CONDITION: &str = "BootstrapCompleted";
/// DockerMachine (CAPD 1.13 and earlier): the bootstrap commands succeeded.
pub const BOOTSTRAP_EXEC_SUCCEEDED_CONDITION: &str = "BootstrapExecSucceeded";
/// DockerMachinePool: all replicas are ready.
pub const REPLICAS_READY_CONDITION: &str = "ReplicasReady";

// ---- v1beta2 reasons -----------------------------------------------------------------------

/// `Ready` is `True`.
pub const READY_REASON: &str = "Ready";
/// `Ready` is `False`, or a step is not ready yet.
pub const NOT_READY_REASON: &str = "NotReady";
/// `Ready` is `Unknown`.
pub const READY_UNKNOWN_REASON: &str = "ReadyUnknown";
/// `Paused` is `True`.
pub const PAUSED_REASON: &str = "Paused";
/// `Paused` is `False`.
pub const NOT_PAUSED_REASON: &str = "NotPaused";
/// The object is being deleted.
pub const DELETING_REASON: &str = "Deleting";
/// An unexpected error prevented computing the condition.
pub const INTERNAL_ERROR_REASON: &str = "InternalError";
/// `LoadBalancerAvailable` is `True`.
pub const AVAILABLE_REASON: &str = "Available";
/// `LoadBalancerAvailable` is `False` (message says what failed).
pub const NOT_AVAILABLE_REASON: &str = "NotAvailable";
/// Waiting for `Cluster.status.initialization.infrastructureProvisioned`.
pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON: &str =
    "WaitingForClusterInfrastructureReady";
/// A worker waits for the control plane to be initialized before it can get bootstrap data.
pub const WAITING_FOR_CONTROL_PLANE_INITIALIZED_REASON: &str = "WaitingForControlPlaneInitialized";
/// Waiting for the Machine's bootstrap data secret.
pub const WAITING_FOR_BOOTSTRAP_DATA_REASON: &str = "WaitingForBootstrapData";
/// A stopped node container waits for its cluster's load balancer to run again before it is
/// started (not in CAPD, which never starts a stopped container).
pub const WAITING_FOR_LOAD_BALANCER_REASON: &str = "WaitingForLoadBalancer";
/// A stopped worker container waits for a control plane container to run again before it is
/// started (not in CAPD).
pub const WAITING_FOR_CONTROL_PLANE_REASON: &str = "WaitingForControlPlane";
/// `ContainerProvisioned` is `False` (creating, or the container stopped running).
pub const NOT_PROVISIONED_REASON: &str = "NotProvisioned";
/// `ContainerProvisioned` is `True`.
pub const PROVISIONED_REASON: &str = "Provisioned";
/// A step waits for the node container.
pub const WAITING_FOR_CONTAINER_REASON: &str = "WaitingForContainer";
/// A step waits for cgroup set-up.
pub const WAITING_FOR_CGROUPS_REASON: &str = "WaitingForCGroups";
/// Bootstrap waits for the image pre-load.
pub const WAITING_FOR_PRELOADED_IMAGES_REASON: &str = "WaitingForPreloadedImages";
/// `BootstrapCompleted` is `True`.
pub const COMPLETED_REASON: &str = "Completed";
/// `BootstrapCompleted` is `False` because a command failed (message carries the output tail).
pub const FAILED_REASON: &str = "Failed";
/// `BootstrapCompleted` is `False` without a failure (for example the task was lost).
pub const NOT_COMPLETED_REASON: &str = "NotCompleted";
/// `BootstrapCompleted` is `False` because `spec.bootstrapTimeout` passed while bootstrap is
/// still running: not a failure, bootstrap goes on and is accepted when it completes.
pub const BOOTSTRAP_TIMED_OUT_REASON: &str = "BootstrapTimedOut";
/// `BootstrapExecSucceeded` is `True` (CAPD 1.13 and earlier).
pub const SUCCEEDED_REASON: &str = "Succeeded";
/// `BootstrapExecSucceeded` is `False` (CAPD 1.13 and earlier).
pub const NOT_SUCCEEDED_REASON: &str = "NotSucceeded";
/// Bootstrap waits for systemd's multi-user target inside the node (CAPD 1.13 and earlier).
pub const WAITING_FOR_MULTI_USER_TARGET_REASON: &str = "WaitingForMultiUserTarget";

/// Legacy (v1beta1) condition types, reasons and severities, written to
/// `status.deprecated.v1beta1.conditions`.
pub mod legacy {
    /// Summary condition.
    pub const READY_CONDITION: &str = "Ready";
    /// DockerCluster: the load balancer is available.
    pub const LOAD_BALANCER_AVAILABLE_CONDITION: &str = "LoadBalancerAvailable";
    /// DockerMachine: the node container exists.
    pub const CONTAINER_PROVISIONED_CONDITION: &str = "ContainerProvisioned";
    /// DockerMachine: bootstrap commands succeeded.
    pub const BOOTSTRAP_EXEC_SUCCEEDED_CONDITION: &str = "BootstrapExecSucceeded";
    /// DockerMachinePool: all replicas are ready.
    pub const REPLICAS_READY_CONDITION: &str = "ReplicasReady";
    /// DockerMachinePool: the pool has the requested size.
    pub const RESIZED_CONDITION: &str = "Resized";
    /// DockerMachinePool: the child DockerMachines were created.
    pub const MACHINES_CREATED_CONDITION: &str = "MachinesCreated";

    /// Waiting for the Cluster's infrastructure.
    pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE_REASON: &str = "WaitingForClusterInfrastructure";
    /// Waiting for the bootstrap data secret.
    pub const WAITING_FOR_BOOTSTRAP_DATA_REASON: &str = "WaitingForBootstrapData";
    /// A stopped node container waits for its cluster's load balancer to run again before it is
    /// started (not in CAPD, which never starts a stopped container).
    pub const WAITING_FOR_LOAD_BALANCER_REASON: &str = "WaitingForLoadBalancer";
    /// A stopped worker container waits for a control plane container to run again before it is
    /// started (not in CAPD).
    pub const WAITING_FOR_CONTROL_PLANE_REASON: &str = "WaitingForControlPlane";
    /// Creating the node container failed.
    pub const CONTAINER_PROVISIONING_FAILED_REASON: &str = "ContainerProvisioningFailed";
    /// The node container disappeared.
    pub const CONTAINER_DELETED_REASON: &str = "ContainerDeleted";
    /// The object is being deleted.
    pub const DELETING_REASON: &str = "Deleting";
    /// Bootstrap commands are running.
    pub const BOOTSTRAPPING_REASON: &str = "Bootstrapping";
    /// A bootstrap command failed.
    pub const BOOTSTRAP_FAILED_REASON: &str = "BootstrapFailed";
    /// Creating the load balancer failed.
    pub const LOAD_BALANCER_PROVISIONING_FAILED_REASON: &str = "LoadBalancerProvisioningFailed";
    /// The pool is adding replicas.
    pub const SCALING_UP_REASON: &str = "ScalingUp";
    /// The pool is removing replicas.
    pub const SCALING_DOWN_REASON: &str = "ScalingDown";

    /// Severity of a `False` condition that needs a human.
    pub const SEVERITY_ERROR: &str = "Error";
    /// Severity of a `False` condition that may resolve by itself.
    pub const SEVERITY_WARNING: &str = "Warning";
    /// Severity of a `False` condition that is expected (for example while waiting).
    pub const SEVERITY_INFO: &str = "Info";
}
