//! The DockerMachine status assembled from the step conditions: the `Ready` summary, `Paused`,
//! and the legacy (v1beta1) conditions derived from the v1beta2 ones.

use crate::api::conditions::{
    BOOTSTRAP_COMPLETED_CONDITION, BOOTSTRAP_TIMED_OUT_REASON, CGROUPS_READY_CONDITION,
    CONTAINER_PROVISIONED_CONDITION, Condition, DELETING_REASON, FAILED_REASON,
    PRELOADED_IMAGES_READY_CONDITION, WAITING_FOR_BOOTSTRAP_DATA_REASON,
    WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON, WAITING_FOR_CONTROL_PLANE_INITIALIZED_REASON,
    WAITING_FOR_CONTROL_PLANE_REASON, WAITING_FOR_LOAD_BALANCER_REASON, find_condition, legacy,
    set_condition,
};
use crate::api::v1beta2::{DockerMachine, DockerMachineStatus};
use crate::controllers::conditions::{
    Legacy, paused_condition, set_legacy_condition, set_legacy_ready_summary, set_ready_summary,
};

/// Completes the status: `Ready` summary, `Paused=False`, and the legacy (v1beta1) conditions
/// derived from the v1beta2 ones.
pub fn summarize(status: &mut DockerMachineStatus, generation: Option<i64>) {
    set_condition(&mut status.conditions, paused_condition(false, generation));
    set_ready_summary(
        &mut status.conditions,
        &[
            CONTAINER_PROVISIONED_CONDITION,
            CGROUPS_READY_CONDITION,
            PRELOADED_IMAGES_READY_CONDITION,
            BOOTSTRAP_COMPLETED_CONDITION,
        ],
        generation,
    );
    let container = find_condition(&status.conditions, CONTAINER_PROVISIONED_CONDITION).cloned();
    let bootstrap = find_condition(&status.conditions, BOOTSTRAP_COMPLETED_CONDITION).cloned();
    let legacy_conditions = &mut status.deprecated.v1beta1.conditions;
    if let Some(container) = &container {
        set_legacy_condition(legacy_conditions, legacy_container(container));
    }
    if container.as_ref().is_some_and(Condition::is_true)
        && let Some(bootstrap) = &bootstrap
    {
        set_legacy_condition(legacy_conditions, legacy_bootstrap(bootstrap));
    }
    set_legacy_ready_summary(
        legacy_conditions,
        &[
            legacy::CONTAINER_PROVISIONED_CONDITION,
            legacy::BOOTSTRAP_EXEC_SUCCEEDED_CONDITION,
        ],
    );
}

fn legacy_container(current: &Condition) -> Legacy {
    let type_ = legacy::CONTAINER_PROVISIONED_CONDITION;
    if current.is_true() {
        return Legacy::ok(type_);
    }
    let (reason, severity) = match current.reason.as_str() {
        // A stopped container waiting for its load balancer or a control plane to run again
        // waits for the cluster's infrastructure, in v1beta1 words.
        WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON
        | WAITING_FOR_LOAD_BALANCER_REASON
        | WAITING_FOR_CONTROL_PLANE_REASON => (
            legacy::WAITING_FOR_CLUSTER_INFRASTRUCTURE_REASON,
            legacy::SEVERITY_INFO,
        ),
        WAITING_FOR_BOOTSTRAP_DATA_REASON | WAITING_FOR_CONTROL_PLANE_INITIALIZED_REASON => (
            legacy::WAITING_FOR_BOOTSTRAP_DATA_REASON,
            legacy::SEVERITY_INFO,
        ),
        DELETING_REASON => (legacy::DELETING_REASON, legacy::SEVERITY_INFO),
        _ if current.message.contains("not running anymore") => {
            (legacy::CONTAINER_DELETED_REASON, legacy::SEVERITY_ERROR)
        }
        _ => (
            legacy::CONTAINER_PROVISIONING_FAILED_REASON,
            legacy::SEVERITY_WARNING,
        ),
    };
    Legacy::not_ok(type_, reason, severity, current.message.clone())
}

fn legacy_bootstrap(current: &Condition) -> Legacy {
    let type_ = legacy::BOOTSTRAP_EXEC_SUCCEEDED_CONDITION;
    if current.is_true() {
        return Legacy::ok(type_);
    }
    if current.reason == FAILED_REASON {
        return Legacy::not_ok(
            type_,
            legacy::BOOTSTRAP_FAILED_REASON,
            legacy::SEVERITY_WARNING,
            current.message.clone(),
        );
    }
    // Past its timeout, bootstrap is still running: still `Bootstrapping`, now a warning.
    let severity = if current.reason == BOOTSTRAP_TIMED_OUT_REASON {
        legacy::SEVERITY_WARNING
    } else {
        legacy::SEVERITY_INFO
    };
    Legacy::not_ok(
        type_,
        legacy::BOOTSTRAPPING_REASON,
        severity,
        current.message.clone(),
    )
}

/// The status while paused: only `Paused` changes.
pub fn paused_status(docker_machine: &DockerMachine) -> DockerMachineStatus {
    let mut status = docker_machine.status.clone().unwrap_or_default();
    set_condition(
        &mut status.conditions,
        paused_condition(true, docker_machine.metadata.generation),
    );
    status
}
