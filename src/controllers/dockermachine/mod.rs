//! The DockerMachine controller: one node container per Machine, booted and bootstrapped by
//! background tasks, registered in the load balancer, and reported through the InfraMachine
//! contract (`spec.providerID`, `status.initialization.provisioned`, addresses, conditions).

pub mod bootstrap;
pub mod container;
pub mod decide;
mod delete;
pub mod node;
mod normal;
pub mod restart;
pub mod status;
pub mod steps;

#[cfg(test)]
mod bootstrap_tests;
#[cfg(test)]
mod restart_tests;
#[cfg(test)]
mod status_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::{Api, ResourceExt};
use serde_json::{Map, Value, json};
use tracing::instrument;

use self::decide::{Gate, Owners};
use super::apply::{apply_object, apply_status_unless_gone};
use super::context::{Context, EventKind};
use super::error::{Error, Result, finalizer_gone};
use super::loadbalancer::machine_cluster;
use super::meta::{cluster_label, key, owner_machine, refers_to};
use crate::api::conditions::{
    BOOTSTRAP_COMPLETED_CONDITION, BOOTSTRAP_TIMED_OUT_REASON, CONTAINER_PROVISIONED_CONDITION,
    Condition, ConditionStatus, FAILED_REASON, find_condition,
};
use crate::api::v1beta2::{DockerMachine, DockerMachineStatus};
use crate::api::{DOCKER_MACHINE_FINALIZER, WEIGHT_ANNOTATION};

/// Name of the controller in metrics and logs.
pub const CONTROLLER: &str = "dockermachine";

/// Reconciles one DockerMachine; records metrics, logs and an Event when it fails.
pub async fn reconcile(docker_machine: Arc<DockerMachine>, ctx: Arc<Context>) -> Result<Action> {
    ctx.reconciled(
        CONTROLLER,
        docker_machine.as_ref(),
        reconcile_one(&docker_machine, &ctx),
    )
    .await
}

/// Retry delay after a failure: the object's own backoff.
pub fn error_policy(
    docker_machine: Arc<DockerMachine>,
    _error: &Error,
    ctx: Arc<Context>,
) -> Action {
    ctx.requeue_after_failure(docker_machine.as_ref())
}

/// The objects around a DockerMachine, fetched.
pub struct Fetched {
    /// Owner Machine.
    pub machine: Option<crate::api::capi::Machine>,
    /// Name of the Cluster.
    pub cluster_name: Option<String>,
    /// The Cluster.
    pub cluster: Option<crate::api::capi::Cluster>,
    /// The DockerCluster.
    pub docker_cluster: Option<crate::api::v1beta2::DockerCluster>,
}

async fn fetch(ctx: &Context, docker_machine: &DockerMachine) -> Result<Fetched> {
    let namespace = docker_machine.namespace().unwrap_or_default();
    let machine = match owner_machine(&docker_machine.metadata) {
        Some(name) => ctx.machine(&namespace, name).await?,
        None => None,
    };
    let cluster_name = machine
        .as_ref()
        .and_then(machine_cluster)
        .or_else(|| cluster_label(&docker_machine.metadata))
        .map(str::to_string);
    let cluster = match &cluster_name {
        Some(name) => ctx.cluster(&namespace, name).await?,
        None => None,
    };
    let docker_cluster = match cluster
        .as_ref()
        .and_then(|c| c.spec.infrastructure_ref.as_ref())
        .filter(|r| refers_to(r, "DockerCluster"))
    {
        Some(reference) => ctx.docker_cluster(&namespace, &reference.name).await?,
        None => None,
    };
    Ok(Fetched {
        machine,
        cluster_name,
        cluster,
        docker_cluster,
    })
}

#[instrument(skip_all, fields(dockermachine = %key(&docker_machine.metadata)), err)]
async fn reconcile_one(docker_machine: &Arc<DockerMachine>, ctx: &Context) -> Result<Action> {
    let namespace = docker_machine.namespace().unwrap_or_default();
    let fetched = fetch(ctx, docker_machine).await?;
    let owners = Owners {
        machine: fetched.machine.as_ref(),
        cluster: fetched.cluster.as_ref(),
        docker_cluster: fetched.docker_cluster.as_ref(),
    };
    let api: Api<DockerMachine> = ctx.api(&namespace);
    match decide::gate(docker_machine, owners) {
        Gate::Skip(why) => {
            tracing::info!(reason = why, "Not reconciling");
            return Ok(Action::await_change());
        }
        Gate::ReleaseFinalizer => {
            ctx.tasks
                .cancel_all(&kube::runtime::reflector::ObjectRef::from_obj(
                    docker_machine.as_ref(),
                ));
            finalizer(
                &api,
                DOCKER_MACHINE_FINALIZER,
                docker_machine.clone(),
                |_| async { Ok::<_, Error>(Action::await_change()) },
            )
            .await?;
            return Ok(Action::await_change());
        }
        Gate::Paused => {
            tracing::info!("Reconciliation is paused");
            write_status(ctx, docker_machine, &status::paused_status(docker_machine)).await?;
            return Ok(Action::await_change());
        }
        Gate::Proceed => {}
    }
    let fetched = &fetched;
    finalizer(
        &api,
        DOCKER_MACHINE_FINALIZER,
        docker_machine.clone(),
        |event| async move {
            match event {
                Finalizer::Apply(dm) => normal::reconcile(ctx, &dm, fetched).await,
                Finalizer::Cleanup(dm) => {
                    delete::reconcile(ctx, &dm, fetched).await?;
                    Ok(Action::await_change())
                }
            }
        },
    )
    .await
    .or_else(finalizer_gone)
}

/// Writes the status when it differs from the object's; publishes Events for the condition
/// changes users care about. A DockerMachine deleted meanwhile is not an error.
pub(crate) async fn write_status(
    ctx: &Context,
    docker_machine: &DockerMachine,
    status: &DockerMachineStatus,
) -> Result<()> {
    if docker_machine.status.as_ref() == Some(status) {
        return Ok(());
    }
    let namespace = docker_machine.namespace().unwrap_or_default();
    if !apply_status_unless_gone(
        &ctx.api::<DockerMachine>(&namespace),
        &docker_machine.name_any(),
        status,
    )
    .await?
    {
        return Ok(());
    }
    let before = docker_machine
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    for (kind, reason, note) in transition_events(before, &status.conditions) {
        ctx.event(docker_machine, kind, reason, note).await;
    }
    Ok(())
}

/// Events for condition changes: the container provisioned or lost, bootstrap completed,
/// failed or past its timeout.
pub fn transition_events(
    before: &[Condition],
    after: &[Condition],
) -> Vec<(EventKind, &'static str, String)> {
    let changed = |type_: &str| -> Option<&Condition> {
        let new = find_condition(after, type_)?;
        let old = find_condition(before, type_);
        (old.map(|o| (&o.status, &o.reason)) != Some((&new.status, &new.reason))).then_some(new)
    };
    let mut events = Vec::new();
    if let Some(c) = changed(CONTAINER_PROVISIONED_CONDITION) {
        if c.is_true() {
            events.push((
                EventKind::Normal,
                "ContainerProvisioned",
                "The node container runs".to_string(),
            ));
        } else if c.message.contains("not running anymore") {
            events.push((EventKind::Warning, "ContainerLost", c.message.clone()));
        }
    }
    if let Some(c) = changed(BOOTSTRAP_COMPLETED_CONDITION) {
        if c.is_true() {
            events.push((
                EventKind::Normal,
                "BootstrapCompleted",
                "Bootstrap completed".to_string(),
            ));
        } else if c.reason == FAILED_REASON {
            events.push((EventKind::Warning, "BootstrapFailed", c.message.clone()));
        } else if c.reason == BOOTSTRAP_TIMED_OUT_REASON {
            events.push((EventKind::Warning, "BootstrapTimedOut", c.message.clone()));
        } else if c.status == ConditionStatus::False
            && c.reason == crate::api::conditions::NOT_COMPLETED_REASON
        {
            events.push((
                EventKind::Warning,
                "BootstrapNotCompleted",
                c.message.clone(),
            ));
        }
    }
    events
}

/// Applies what this controller owns on the main resource: `spec.providerID` and the load
/// balancer weight annotation (always together, see [`super::apply`]).
pub(crate) async fn apply_owned_fields(
    ctx: &Context,
    docker_machine: &DockerMachine,
    provider_id: &str,
    weight: Option<&str>,
) -> Result<()> {
    let mut body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "DockerMachine",
    });
    if let Value::Object(map) = &mut body {
        if let Some(weight) = weight {
            map.insert(
                "metadata".into(),
                json!({"annotations": {WEIGHT_ANNOTATION: weight}}),
            );
        }
        if !provider_id.is_empty() {
            let mut spec = Map::new();
            spec.insert("providerID".into(), json!(provider_id));
            map.insert("spec".into(), Value::Object(spec));
        }
    }
    let namespace = docker_machine.namespace().unwrap_or_default();
    apply_object(
        &ctx.api::<DockerMachine>(&namespace),
        &docker_machine.name_any(),
        body,
    )
    .await?;
    Ok(())
}
