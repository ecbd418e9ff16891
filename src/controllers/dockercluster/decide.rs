//! Pure decisions of the DockerCluster reconcile: whether to act at all, the endpoint to record,
//! and the status to publish.

use kube::core::ObjectMeta;

use crate::api::DOCKER_CLUSTER_FINALIZER;
use crate::api::capi::Cluster;
use crate::api::conditions::{
    AVAILABLE_REASON, ConditionStatus, DELETING_REASON, LOAD_BALANCER_AVAILABLE_CONDITION,
    NOT_AVAILABLE_REASON, find_condition, legacy, set_condition,
};
use crate::api::v1beta2::{APIEndpoint, DockerCluster, DockerClusterStatus};
use crate::controllers::conditions::{
    Legacy, condition, paused_condition, set_legacy_condition, set_legacy_ready_summary,
    set_ready_summary,
};
use crate::controllers::meta::{is_deleting, is_externally_managed, owner_cluster};
use crate::docker::node::API_SERVER_PORT;

/// What the reconcile does with a DockerCluster before touching any infrastructure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Leave the object alone; the text says why (logged).
    Skip(&'static str),
    /// The owner is gone while the object is being deleted: only remove our finalizer.
    ReleaseFinalizer,
    /// The object or its Cluster is paused: only record the `Paused` condition.
    Paused,
    /// Reconcile (normal or delete, as the object says).
    Proceed,
}

/// The gate, in CAPD's order: externally managed, owner Cluster, Cluster found, paused.
/// `cluster` is the owner Cluster when it was found.
pub fn gate(meta: &ObjectMeta, cluster: Option<&Cluster>) -> Gate {
    if is_externally_managed(meta) {
        return Gate::Skip("externally managed");
    }
    let has_finalizer = meta
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|f| f == DOCKER_CLUSTER_FINALIZER);
    if owner_cluster(meta).is_none() {
        return if is_deleting(meta) && has_finalizer {
            Gate::ReleaseFinalizer
        } else {
            Gate::Skip("Waiting for Cluster Controller to set OwnerRef on DockerCluster")
        };
    }
    match cluster {
        None if is_deleting(meta) => Gate::Proceed,
        None => Gate::Skip("Waiting for the owner Cluster to exist"),
        Some(cluster) if crate::api::capi::is_paused(cluster, meta) => Gate::Paused,
        Some(_) => Gate::Proceed,
    }
}

/// The endpoint to write into `spec.controlPlaneEndpoint`, or `None` when it is already right:
/// an empty host gets the load balancer address, a zero port gets 6443. A host set by the user is
/// never changed.
pub fn endpoint_update(current: &APIEndpoint, load_balancer_ip: &str) -> Option<APIEndpoint> {
    let host = if current.host.is_empty() {
        load_balancer_ip.to_string()
    } else {
        current.host.clone()
    };
    let port = if current.port == 0 {
        i32::from(API_SERVER_PORT)
    } else {
        current.port
    };
    let wanted = APIEndpoint { host, port };
    (wanted != *current).then_some(wanted)
}

/// How the load balancer step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadBalancerOutcome {
    /// The load balancer runs and has an address.
    Available,
    /// The load balancer runs again after it was found stopped or missing; the message says
    /// what was done. It stays on the condition until the next change.
    Recovered(String),
    /// It could not be created or has no address; the message says why.
    NotAvailable(String),
}

/// The status after a normal reconcile: failure domains copied, `LoadBalancerAvailable`,
/// provisioned once available (never reset), `Ready` summary, `Paused=False`, legacy conditions.
pub fn normal_status(
    docker_cluster: &DockerCluster,
    outcome: &LoadBalancerOutcome,
) -> DockerClusterStatus {
    let generation = docker_cluster.metadata.generation;
    let mut status = docker_cluster.status.clone().unwrap_or_default();
    status
        .failure_domains
        .clone_from(&docker_cluster.spec.failure_domains);
    set_condition(&mut status.conditions, paused_condition(false, generation));
    let legacy_conditions = &mut status.deprecated.v1beta1.conditions;
    match outcome {
        LoadBalancerOutcome::Available | LoadBalancerOutcome::Recovered(_) => {
            let message = match outcome {
                LoadBalancerOutcome::Recovered(note) => note.clone(),
                // The last recovery stays visible while the load balancer keeps running.
                _ => find_condition(&status.conditions, LOAD_BALANCER_AVAILABLE_CONDITION)
                    .filter(|c| c.is_true())
                    .map(|c| c.message.clone())
                    .unwrap_or_default(),
            };
            status.initialization.provisioned = Some(true);
            set_condition(
                &mut status.conditions,
                condition(
                    LOAD_BALANCER_AVAILABLE_CONDITION,
                    ConditionStatus::True,
                    AVAILABLE_REASON,
                    message,
                    generation,
                ),
            );
            set_legacy_condition(
                legacy_conditions,
                Legacy::ok(legacy::LOAD_BALANCER_AVAILABLE_CONDITION),
            );
        }
        LoadBalancerOutcome::NotAvailable(message) => {
            set_condition(
                &mut status.conditions,
                condition(
                    LOAD_BALANCER_AVAILABLE_CONDITION,
                    ConditionStatus::False,
                    NOT_AVAILABLE_REASON,
                    message.clone(),
                    generation,
                ),
            );
            set_legacy_condition(
                legacy_conditions,
                Legacy::not_ok(
                    legacy::LOAD_BALANCER_AVAILABLE_CONDITION,
                    legacy::LOAD_BALANCER_PROVISIONING_FAILED_REASON,
                    legacy::SEVERITY_WARNING,
                    message.clone(),
                ),
            );
        }
    }
    summarize(&mut status, generation);
    status
}

/// The status while deleting: `LoadBalancerAvailable=False/Deleting`.
pub fn deleting_status(docker_cluster: &DockerCluster) -> DockerClusterStatus {
    let generation = docker_cluster.metadata.generation;
    let mut status = docker_cluster.status.clone().unwrap_or_default();
    set_condition(
        &mut status.conditions,
        condition(
            LOAD_BALANCER_AVAILABLE_CONDITION,
            ConditionStatus::False,
            DELETING_REASON,
            "Deleting the load balancer",
            generation,
        ),
    );
    set_legacy_condition(
        &mut status.deprecated.v1beta1.conditions,
        Legacy::not_ok(
            legacy::LOAD_BALANCER_AVAILABLE_CONDITION,
            legacy::DELETING_REASON,
            legacy::SEVERITY_INFO,
            "",
        ),
    );
    summarize(&mut status, generation);
    status
}

/// The status while paused: only `Paused` changes.
pub fn paused_status(docker_cluster: &DockerCluster) -> DockerClusterStatus {
    let mut status = docker_cluster.status.clone().unwrap_or_default();
    set_condition(
        &mut status.conditions,
        paused_condition(true, docker_cluster.metadata.generation),
    );
    status
}

fn summarize(status: &mut DockerClusterStatus, generation: Option<i64>) {
    set_ready_summary(
        &mut status.conditions,
        &[LOAD_BALANCER_AVAILABLE_CONDITION],
        generation,
    );
    set_legacy_ready_summary(
        &mut status.deprecated.v1beta1.conditions,
        &[legacy::LOAD_BALANCER_AVAILABLE_CONDITION],
    );
}
