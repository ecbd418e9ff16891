//! The DockerMachine controller: one node container per Machine, booted and bootstrapped by
//! background tasks, registered in the load balancer, and reported through the InfraMachine
//! contract (`spec.providerID`, `status.initialization.provisioned`, addresses, conditions).
//! It serves DockerMachines and DevMachines alike, through their
//! [`MachineView`](super::kinds::MachineView); a DevMachine with the `inMemory` backend goes
//! through the same gates and finalizer, then to [`inmemory`] instead of the engine.

pub mod bootstrap;
pub mod container;
pub mod decide;
mod delete;
pub mod inmemory;
pub mod inmemory_stages;
pub mod node;
mod normal;
pub mod restart;
pub mod status;
pub mod steps;

#[cfg(test)]
mod bootstrap_tests;
#[cfg(test)]
mod inmemory_tests;
#[cfg(test)]
mod normal_tests;
#[cfg(test)]
mod restart_tests;
#[cfg(test)]
mod status_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use kube::core::ObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::Event as Finalizer;

use crate::controllers::finalize::finalizer;
use kube::{Api, ResourceExt};
use serde_json::{Map, json};
use tracing::instrument;

use self::decide::{Gate, Owners};
use super::context::{Context, EventKind};
use super::error::{Error, Result, finalizer_gone};
use super::kinds::{Applied, Backend, ClusterView, MachineView, Recorded, ServedKind};
use super::loadbalancer::machine_cluster;
use super::meta::{cluster_label, key, owner_machine};
use super::unsupported;
use crate::api::conditions::{
    BOOTSTRAP_COMPLETED_CONDITION, BOOTSTRAP_TIMED_OUT_REASON, CONTAINER_PROVISIONED_CONDITION,
    Condition, ConditionStatus, FAILED_REASON, find_condition,
};
use crate::api::v1beta2::{DockerMachine, DockerMachineStatus};
use crate::api::{DOCKER_MACHINE_FINALIZER, MACHINE_POOL_NAME_LABEL, WEIGHT_ANNOTATION};

/// Names of the controllers (of DockerMachines, of DevMachines) in metrics and logs.
pub use super::kinds::{
    DEV_MACHINE_CONTROLLER as DEV_CONTROLLER, DOCKER_MACHINE_CONTROLLER as CONTROLLER,
};

/// Reconciles one DockerMachine or DevMachine; records metrics, logs and an Event when it fails.
pub async fn reconcile<K>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action>
where
    K: ServedKind<Docker = DockerMachine>,
{
    ctx.reconciled(K::CONTROLLER, object.as_ref(), reconcile_one(&object, &ctx))
        .await
}

/// Retry delay after a failure: the object's own backoff, or the API server's `Retry-After`.
pub fn error_policy<K>(object: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action
where
    K: ServedKind<Docker = DockerMachine>,
{
    ctx.requeue_after_failure(object.as_ref(), error)
}

/// The objects around a DockerMachine, fetched.
pub struct Fetched {
    /// Owner Machine; a pool machine's with its MachinePool's bootstrap data and version
    /// ([`Machine::in_pool`](crate::api::capi::Machine::in_pool)).
    pub machine: Option<crate::api::capi::Machine>,
    /// Name of the Cluster.
    pub cluster_name: Option<String>,
    /// The Cluster.
    pub cluster: Option<crate::api::capi::Cluster>,
    /// The DockerCluster or DevCluster the Cluster points to, as a DockerCluster.
    pub docker_cluster: Option<ClusterView>,
    /// A pool machine whose MachinePool was not found.
    pub machine_pool_missing: bool,
}

impl Fetched {
    fn owners(&self) -> Owners<'_> {
        Owners {
            machine: self.machine.as_ref(),
            cluster: self.cluster.as_ref(),
            docker_cluster: self.docker_cluster.as_deref(),
            machine_pool_missing: self.machine_pool_missing,
        }
    }
}

/// Fetches what a machine's metadata names: its Machine (for a machine of a MachinePool, label
/// `cluster.x-k8s.io/pool-name`, read together with the MachinePool, as CAPD 1.12 does), the
/// Cluster and its infrastructure cluster.
async fn fetch(ctx: &Context, meta: &ObjectMeta) -> Result<Fetched> {
    let namespace = meta.namespace.clone().unwrap_or_default();
    let mut machine = match owner_machine(meta) {
        Some(name) => ctx.machine(&namespace, name).await?,
        None => None,
    };
    let mut machine_pool_missing = false;
    if let Some(label) = pool_label(meta)
        && machine.is_some()
    {
        match ctx.labelled_machine_pool(&namespace, label).await? {
            Some(pool) => machine = machine.map(|m| m.in_pool(&pool)),
            None => machine_pool_missing = true,
        }
    }
    let cluster_name = machine
        .as_ref()
        .and_then(machine_cluster)
        .or_else(|| cluster_label(meta))
        .map(str::to_string);
    let cluster = match &cluster_name {
        Some(name) => ctx.cluster(&namespace, name).await?,
        None => None,
    };
    let docker_cluster = match cluster
        .as_ref()
        .and_then(|c| c.spec.infrastructure_ref.as_ref())
    {
        Some(reference) => ctx.infra_cluster(&namespace, reference).await?,
        None => None,
    };
    Ok(Fetched {
        machine,
        cluster_name,
        cluster,
        docker_cluster,
        machine_pool_missing,
    })
}

/// The `cluster.x-k8s.io/pool-name` label of a machine of a MachinePool.
fn pool_label(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()?
        .get(MACHINE_POOL_NAME_LABEL)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

#[instrument(skip_all, fields(kind = %K::kind(&()), object = %key(object.meta())), err)]
async fn reconcile_one<K>(object: &Arc<K>, ctx: &Context) -> Result<Action>
where
    K: ServedKind<Docker = DockerMachine>,
{
    let fetched = fetch(ctx, object.meta()).await?;
    let docker_machine = match object.view() {
        Ok(view) => view,
        Err(backend) => {
            // Not ours to serve, but still the contract's to gate: nothing is written before the
            // object is owned, nor while it is paused.
            return match decide::owner_gate(
                object.meta(),
                fetched.machine.as_ref(),
                fetched.cluster.as_ref(),
            ) {
                Gate::Skip(_) | Gate::Wait(_) | Gate::Paused => Ok(Action::await_change()),
                Gate::ReleaseFinalizer | Gate::Proceed => {
                    unsupported::reconcile(ctx, object.as_ref(), DOCKER_MACHINE_FINALIZER, backend)
                        .await
                }
            };
        }
    };
    let docker_machine = &docker_machine;
    let namespace = docker_machine.namespace().unwrap_or_default();
    let api: Api<K> = ctx.api(&namespace);
    match decide::gate(&docker_machine.metadata, fetched.owners()) {
        Gate::Skip(why) => {
            tracing::info!(reason = why, "Not reconciling");
            return Ok(Action::await_change());
        }
        Gate::Wait(why) => {
            tracing::info!(reason = why, "Not reconciling yet");
            return Ok(Action::requeue(decide::GATE_RETRY));
        }
        Gate::ReleaseFinalizer => {
            ctx.tasks.cancel_all(&docker_machine.key());
            finalizer(
                &ctx.finalizers,
                &api,
                DOCKER_MACHINE_FINALIZER,
                object.clone(),
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
    // The finalizer helper hands back the object it was given: the view made above is its view.
    finalizer(
        &ctx.finalizers,
        &api,
        DOCKER_MACHINE_FINALIZER,
        object.clone(),
        |event| async move {
            match event {
                Finalizer::Apply(_) => match docker_machine.backend() {
                    Backend::Docker => normal::reconcile(ctx, docker_machine, fetched).await,
                    Backend::InMemory(spec) => {
                        inmemory::reconcile_normal(ctx, docker_machine, spec, fetched).await
                    }
                },
                Finalizer::Cleanup(_) => {
                    match docker_machine.backend() {
                        Backend::Docker => delete::reconcile(ctx, docker_machine, fetched).await?,
                        Backend::InMemory(_) => {
                            inmemory::reconcile_delete(ctx, docker_machine, fetched).await?;
                        }
                    }
                    ctx.written.forget(&docker_machine.reference());
                    Ok(Action::await_change())
                }
            }
        },
    )
    .await
    .or_else(finalizer_gone)
}

/// Writes the status when it differs from the object's or from the one last written
/// ([`crate::controllers::written`]); publishes Events for the condition changes users care
/// about. An object deleted meanwhile is not an error.
pub(crate) async fn write_status(
    ctx: &Context,
    docker_machine: &MachineView,
    status: &DockerMachineStatus,
) -> Result<()> {
    let reference = docker_machine.reference();
    if ctx
        .written
        .unchanged(&reference, docker_machine.status.as_ref(), status)
    {
        return Ok(());
    }
    // What the object carried before this write: the status last written here is newer than a
    // cache that has not seen it yet.
    let before = ctx
        .written
        .latest(&reference, &**docker_machine)
        .status
        .map(|s| s.conditions)
        .unwrap_or_default();
    if !docker_machine.apply_status(ctx, status).await? {
        ctx.written.forget(&reference);
        return Ok(());
    }
    ctx.written.record(&reference, status);
    for (kind, reason, note) in transition_events(&before, &status.conditions) {
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
/// balancer weight annotation (always together, see [`super::apply`]); returns what the write
/// returned.
pub(crate) async fn apply_owned_fields(
    ctx: &Context,
    docker_machine: &MachineView,
    provider_id: &str,
    weight: Option<&str>,
) -> Result<Applied> {
    let mut fields = Map::new();
    if let Some(weight) = weight {
        fields.insert(
            "metadata".into(),
            json!({"annotations": {WEIGHT_ANNOTATION: weight}}),
        );
    }
    if !provider_id.is_empty() {
        fields.insert("spec".into(), json!({"providerID": provider_id}));
    }
    docker_machine.apply_owned(ctx, fields).await
}
