//! The DockerMachinePool controller (InfraMachinePool contract, "MachinePool Machines"): node
//! containers first, then one DockerMachine per container. Core's MachinePool controller makes a
//! Machine for each DockerMachine, and the DockerMachine controller bootstraps the container as it
//! does any other: this controller never runs bootstrap or touches the load balancer itself.
//! Scaling down always deletes owner Machines, so that Cluster API drains their Nodes first.
//!
//! The same reconcile serves CAPD 1.14's DevMachinePool (`spec.backend.docker`) through its
//! [`PoolView`]: its machines are DevMachines (`status.infrastructureMachineKind: DevMachine`),
//! its containers carry `dev.cluster.x-k8s.io/machine-pool`, its own provider ID is
//! `dev:////<cluster>-dmp-<pool>`; everything else is the same for both kinds.

pub mod decide;
mod delete;
mod normal;

#[cfg(test)]
mod dev_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use kube::api::ListParams;
use kube::core::{DeserializeGuard, ObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::Event as Finalizer;

use crate::controllers::finalize::finalizer;
use kube::{Api, ResourceExt};
use tracing::instrument;

use super::context::Context;
use super::error::{Error, Result, finalizer_gone, is_not_found};
use super::kinds::{PoolView, Recorded, Served, ServedKind, dev_machine_as_docker};
use super::meta::{cluster_label, key, owner};
use super::unsupported;
use crate::api::capi::{CAPI_GROUP, Cluster, Machine, MachinePool, is_paused};
use crate::api::v1beta2::{DevMachine, DockerMachine, DockerMachinePool, DockerMachinePoolStatus};
use crate::api::{CLUSTER_NAME_LABEL, DOCKER_MACHINE_POOL_FINALIZER};

/// Names of the controllers in metrics and logs.
pub use super::kinds::{
    DEV_MACHINE_POOL_CONTROLLER as DEV_CONTROLLER, DOCKER_MACHINE_POOL_CONTROLLER as CONTROLLER,
};

/// Reconciles one DockerMachinePool or DevMachinePool; records metrics, logs and an Event when
/// it fails.
pub async fn reconcile<K>(pool: Arc<K>, ctx: Arc<Context>) -> Result<Action>
where
    K: ServedKind<Docker = DockerMachinePool>,
{
    ctx.reconciled(K::CONTROLLER, pool.as_ref(), reconcile_one(&pool, &ctx))
        .await
}

/// Retry delay after a failure: the object's own backoff, or the API server's `Retry-After`.
pub fn error_policy<K>(pool: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action
where
    K: ServedKind<Docker = DockerMachinePool>,
{
    ctx.requeue_after_failure(pool.as_ref(), error)
}

/// The objects around a DockerMachinePool, fetched.
#[derive(Debug, Default)]
pub struct Fetched {
    /// The owner MachinePool.
    pub machine_pool: Option<MachinePool>,
    /// The Cluster's name (from the MachinePool, else the pool's cluster-name label).
    pub cluster_name: Option<String>,
    /// The Cluster.
    pub cluster: Option<Cluster>,
}

async fn fetch(ctx: &Context, meta: &ObjectMeta) -> Result<Fetched> {
    let namespace = meta.namespace.clone().unwrap_or_default();
    let machine_pool = match owner(meta, CAPI_GROUP, "MachinePool") {
        Some(reference) => {
            ctx.capi_object(&ctx.stores.machine_pools, &namespace, &reference.name)
                .await?
        }
        None => None,
    };
    let cluster_name = machine_pool
        .as_ref()
        .and_then(MachinePool::cluster_name)
        .or_else(|| cluster_label(meta))
        .map(str::to_string);
    let cluster = match &cluster_name {
        Some(name) => ctx.cluster(&namespace, name).await?,
        None => None,
    };
    Ok(Fetched {
        machine_pool,
        cluster_name,
        cluster,
    })
}

#[instrument(skip_all, fields(kind = %K::kind(&()), object = %key(object.meta())), err)]
async fn reconcile_one<K>(object: &Arc<K>, ctx: &Context) -> Result<Action>
where
    K: ServedKind<Docker = DockerMachinePool>,
{
    let meta = object.meta();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let fetched = fetch(ctx, meta).await?;
    let deleting = meta.deletion_timestamp.is_some();
    let view = object.view();
    if !deleting {
        let Some(machine_pool) = &fetched.machine_pool else {
            tracing::info!(
                kind = %K::kind(&()),
                "Waiting for the MachinePool Controller to set OwnerRef on the pool"
            );
            return Ok(Action::await_change());
        };
        let Some(cluster) = &fetched.cluster else {
            tracing::info!(
                cluster = fetched.cluster_name.as_deref().unwrap_or_default(),
                machinepool = machine_pool.name_any(),
                "Waiting for the Cluster to exist"
            );
            return Ok(Action::await_change());
        };
        if is_paused(cluster, meta) {
            tracing::info!("Reconciliation is paused");
            if let Ok(pool) = &view {
                let status = decide::paused(
                    &pool.status.clone().unwrap_or_default(),
                    pool.metadata.generation,
                );
                write_status(ctx, pool, &status).await?;
            }
            return Ok(Action::await_change());
        }
    }
    let pool = match view {
        Ok(view) => view,
        // A DevMachinePool without `spec.backend.docker` (its defaulting bypassed): reported
        // unsupported once owned and not paused, nothing else; a finalizer left from an earlier
        // docker backend is released on deletion.
        Err(backend) => {
            return unsupported::reconcile_with(
                ctx,
                object.as_ref(),
                DOCKER_MACHINE_POOL_FINALIZER,
                unsupported::POOL_MESSAGE,
                backend,
            )
            .await;
        }
    };
    let pool = &pool;
    let api: Api<K> = ctx.api(&namespace);
    let fetched = &fetched;
    // The finalizer helper hands back the object it was given: the view made above is its view.
    finalizer(
        &ctx.finalizers,
        &api,
        DOCKER_MACHINE_POOL_FINALIZER,
        object.clone(),
        |event| async move {
            match event {
                Finalizer::Apply(_) => normal::reconcile(ctx, pool, fetched).await,
                Finalizer::Cleanup(_) => {
                    delete::reconcile(ctx, pool, fetched).await?;
                    ctx.written.forget(&pool.reference());
                    Ok(Action::await_change())
                }
            }
        },
    )
    .await
    .or_else(finalizer_gone)
}

/// Writes the status when it differs from the pool's or from the one last written
/// ([`crate::controllers::written`]). A pool deleted meanwhile is not an error.
async fn write_status(
    ctx: &Context,
    pool: &PoolView,
    status: &DockerMachinePoolStatus,
) -> Result<()> {
    // Compared in the real kind's shape: what a DevMachinePool cannot hold never differs.
    let status = &pool.as_written(status);
    let reference = pool.reference();
    if ctx
        .written
        .unchanged(&reference, pool.status.as_ref(), status)
    {
        return Ok(());
    }
    let written = pool.apply_status(ctx, status).await?;
    if written {
        ctx.written.record(&reference, status);
    } else {
        ctx.written.forget(&reference);
    }
    Ok(())
}

/// The machines of a pool (DockerMachines, or DevMachines seen as DockerMachines), read from
/// the API server (never from a cache: a stale list could scale twice): those labelled for the
/// cluster and owned by the pool.
async fn pool_docker_machines(
    ctx: &Context,
    pool: &PoolView,
    cluster: Option<&str>,
) -> Result<Vec<DockerMachine>> {
    let namespace = pool.namespace().unwrap_or_default();
    let selector = match cluster {
        Some(cluster) => format!("{CLUSTER_NAME_LABEL}={cluster}"),
        None => crate::api::MACHINE_POOL_NAME_LABEL.to_string(),
    };
    let uid = pool.uid().unwrap_or_default();
    let params = ListParams::default().labels(&selector);
    let what = || {
        format!(
            "list the {}s of {} {namespace}/{}",
            pool.served().machine_kind(),
            pool.served().pool_kind(),
            pool.name_any()
        )
    };
    let machines = match pool.served() {
        Served::Docker => {
            ctx.api::<DockerMachine>(&namespace)
                .list(&params)
                .await
                .map_err(Error::kube(what()))?
                .items
        }
        Served::Dev => ctx
            .api::<DevMachine>(&namespace)
            .list(&params)
            .await
            .map_err(Error::kube(what()))?
            .items
            .iter()
            .map(dev_machine_as_docker)
            .collect(),
    };
    Ok(machines
        .into_iter()
        .filter(|dm| {
            dm.metadata
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|o| o.uid == uid)
        })
        .collect())
}

/// The Machines of a cluster, read from the API server (their deletion must be seen at once).
async fn cluster_machines(ctx: &Context, namespace: &str, cluster: &str) -> Result<Vec<Machine>> {
    let list = ctx
        .api::<DeserializeGuard<Machine>>(namespace)
        .list(&ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}")))
        .await
        .map_err(Error::kube(format!(
            "list the Machines of cluster {namespace}/{cluster}"
        )))?;
    Ok(list.items.into_iter().filter_map(|m| m.0.ok()).collect())
}

/// Deletes a Machine; returns whether it existed.
async fn delete_machine(ctx: &Context, namespace: &str, name: &str) -> Result<bool> {
    delete_if_present::<DeserializeGuard<Machine>>(ctx, namespace, name).await
}

/// Deletes the pool machine `name` (a DockerMachine, or a DevMachine for a DevMachinePool);
/// returns whether it existed.
async fn delete_pool_machine(ctx: &Context, pool: &PoolView, name: &str) -> Result<bool> {
    let namespace = pool.namespace().unwrap_or_default();
    match pool.served() {
        Served::Docker => delete_if_present::<DockerMachine>(ctx, &namespace, name).await,
        Served::Dev => delete_if_present::<DevMachine>(ctx, &namespace, name).await,
    }
}

/// Deletes the `K` `name` of `namespace`; returns whether it existed.
async fn delete_if_present<K>(ctx: &Context, namespace: &str, name: &str) -> Result<bool>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    match ctx
        .api::<K>(namespace)
        .delete(name, &Default::default())
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(source) => Err(Error::Kube {
            action: format!("delete {} {namespace}/{name}", K::kind(&())),
            source,
        }),
    }
}
