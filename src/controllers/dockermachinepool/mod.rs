//! The DockerMachinePool controller (InfraMachinePool contract, "MachinePool Machines"): node
//! containers first, then one DockerMachine per container. Core's MachinePool controller makes a
//! Machine for each DockerMachine, and the DockerMachine controller bootstraps the container as it
//! does any other: this controller never runs bootstrap or touches the load balancer itself.
//! Scaling down always deletes owner Machines, so that Cluster API drains their Nodes first.

pub mod decide;
mod delete;
mod normal;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use kube::api::ListParams;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::Event as Finalizer;

use crate::controllers::finalize::finalizer;
use kube::{Api, ResourceExt};
use tracing::instrument;

use super::apply::apply_status_unless_gone;
use super::context::Context;
use super::error::{Error, Result, finalizer_gone, is_not_found};
use super::kinds::Recorded;
use super::meta::{cluster_label, key, owner};
use crate::api::capi::{CAPI_GROUP, Cluster, Machine, MachinePool, is_paused};
use crate::api::v1beta2::{DockerMachine, DockerMachinePool, DockerMachinePoolStatus};
use crate::api::{CLUSTER_NAME_LABEL, DOCKER_MACHINE_POOL_FINALIZER};

/// Name of the controller in metrics and logs.
pub use super::kinds::DOCKER_MACHINE_POOL_CONTROLLER as CONTROLLER;

/// Reconciles one DockerMachinePool; records metrics, logs and an Event when it fails.
pub async fn reconcile(pool: Arc<DockerMachinePool>, ctx: Arc<Context>) -> Result<Action> {
    ctx.reconciled(CONTROLLER, pool.as_ref(), reconcile_one(&pool, &ctx))
        .await
}

/// Retry delay after a failure: the object's own backoff, or the API server's `Retry-After`.
pub fn error_policy(pool: Arc<DockerMachinePool>, error: &Error, ctx: Arc<Context>) -> Action {
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

async fn fetch(ctx: &Context, pool: &DockerMachinePool) -> Result<Fetched> {
    let namespace = pool.namespace().unwrap_or_default();
    let machine_pool = match owner(&pool.metadata, CAPI_GROUP, "MachinePool") {
        Some(reference) => {
            ctx.capi_object(&ctx.stores.machine_pools, &namespace, &reference.name)
                .await?
        }
        None => None,
    };
    let cluster_name = machine_pool
        .as_ref()
        .and_then(MachinePool::cluster_name)
        .or_else(|| cluster_label(&pool.metadata))
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

#[instrument(skip_all, fields(dockermachinepool = %key(&pool.metadata)), err)]
async fn reconcile_one(pool: &Arc<DockerMachinePool>, ctx: &Context) -> Result<Action> {
    let namespace = pool.namespace().unwrap_or_default();
    let fetched = fetch(ctx, pool).await?;
    let deleting = pool.metadata.deletion_timestamp.is_some();
    if !deleting {
        let Some(machine_pool) = &fetched.machine_pool else {
            tracing::info!(
                "Waiting for the MachinePool Controller to set OwnerRef on DockerMachinePool"
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
        if is_paused(cluster, &pool.metadata) {
            tracing::info!("Reconciliation is paused");
            let status = decide::paused(
                &pool.status.clone().unwrap_or_default(),
                pool.metadata.generation,
            );
            write_status(ctx, pool, &status).await?;
            return Ok(Action::await_change());
        }
    }
    let api: Api<DockerMachinePool> = ctx.api(&namespace);
    let fetched = &fetched;
    finalizer(
        &ctx.finalizers,
        &api,
        DOCKER_MACHINE_POOL_FINALIZER,
        pool.clone(),
        |event| async move {
            match event {
                Finalizer::Apply(pool) => normal::reconcile(ctx, &pool, fetched).await,
                Finalizer::Cleanup(pool) => {
                    delete::reconcile(ctx, &pool, fetched).await?;
                    ctx.written.forget(&pool.as_ref().reference());
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
    pool: &DockerMachinePool,
    status: &DockerMachinePoolStatus,
) -> Result<()> {
    let reference = pool.reference();
    if ctx
        .written
        .unchanged(&reference, pool.status.as_ref(), status)
    {
        return Ok(());
    }
    let namespace = pool.namespace().unwrap_or_default();
    let written = apply_status_unless_gone(
        &ctx.api::<DockerMachinePool>(&namespace),
        &pool.name_any(),
        status,
    )
    .await?;
    if written {
        ctx.written.record(&reference, status);
    } else {
        ctx.written.forget(&reference);
    }
    Ok(())
}

/// The DockerMachines of a pool, read from the API server (never from a cache: a stale list
/// could scale twice): those labelled for the cluster and owned by the pool.
async fn pool_docker_machines(
    ctx: &Context,
    pool: &DockerMachinePool,
    cluster: Option<&str>,
) -> Result<Vec<DockerMachine>> {
    let namespace = pool.namespace().unwrap_or_default();
    let selector = match cluster {
        Some(cluster) => format!("{CLUSTER_NAME_LABEL}={cluster}"),
        None => crate::api::MACHINE_POOL_NAME_LABEL.to_string(),
    };
    let uid = pool.uid().unwrap_or_default();
    let list = ctx
        .api::<DockerMachine>(&namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::kube(format!(
            "list the DockerMachines of DockerMachinePool {namespace}/{}",
            pool.name_any()
        )))?;
    Ok(list
        .items
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
