//! Deleting a DockerMachine: stop its tasks, remove its container, take it out of the load
//! balancer. The finalizer is removed only once the container is really gone.

use kube::ResourceExt;

use super::container::container_name;
use super::{Fetched, decide, status, write_status};
use crate::api::conditions::set_condition;
use crate::controllers::context::Context;
use crate::controllers::error::{Result, removed};
use crate::controllers::kinds::MachineView;
use crate::controllers::loadbalancer::sync_backends;
use crate::docker::loadbalancer::find_load_balancer;
use crate::docker::node::{
    NodeRole, ROLE_LABEL, delete_node, inspect_node, machine_container_name,
};

/// Deletes the machine's infrastructure. The status says `Deleting` only when that does not
/// finish in this pass (an error, a removal still in progress): a deletion that finishes
/// releases the finalizer at once, and the object is gone before anyone could read it.
///
/// # Errors
/// [`Error`] when the container cannot be removed (the finalizer stays).
pub async fn reconcile(
    ctx: &Context,
    docker_machine: &MachineView,
    fetched: &Fetched,
) -> Result<()> {
    ctx.tasks.cancel_all(&docker_machine.key());
    let Err(error) = delete(ctx, docker_machine, fetched).await else {
        return Ok(());
    };
    let generation = docker_machine.metadata.generation;
    let mut status = docker_machine.status.clone().unwrap_or_default();
    set_condition(&mut status.conditions, decide::deleting(generation));
    status::summarize(&mut status, generation);
    if let Err(write) = write_status(ctx, docker_machine, &status).await {
        tracing::warn!(error = %write, "Writing the Deleting status failed");
    }
    Err(error)
}

async fn delete(ctx: &Context, docker_machine: &MachineView, fetched: &Fetched) -> Result<()> {
    let Some(cluster_name) = fetched.cluster_name.as_deref() else {
        tracing::warn!(
            "No cluster name on the DockerMachine or its Machine; no container to delete"
        );
        return Ok(());
    };
    let name = match &fetched.machine {
        Some(machine) => container_name(cluster_name, machine, docker_machine),
        None => machine_container_name(cluster_name, &docker_machine.name_any()),
    };
    let runtime = ctx.runtime.as_ref();
    let Some(found) = inspect_node(runtime, cluster_name, &name).await? else {
        return Ok(());
    };
    let control_plane =
        found.labels.get(ROLE_LABEL).map(String::as_str) == Some(NodeRole::ControlPlane.as_str());
    removed(
        delete_node(runtime, &name).await?,
        format_args!("container {name}"),
    )?;
    tracing::info!(container = %name, "Deleted the node container");
    if control_plane && find_load_balancer(runtime, cluster_name).await?.is_some() {
        let namespace = docker_machine.namespace().unwrap_or_default();
        sync_backends(
            ctx,
            &namespace,
            cluster_name,
            fetched.cluster.as_ref(),
            fetched.docker_cluster.as_deref(),
        )
        .await?;
    }
    Ok(())
}
