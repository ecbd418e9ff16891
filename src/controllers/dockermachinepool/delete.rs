//! Deleting a DockerMachinePool or a DevMachinePool: its machines go the way core removes
//! machines (owner Machines first, so their Nodes are drained), then any container left behind;
//! the finalizer is removed only when nothing of the pool is left.

use std::collections::BTreeSet;

use kube::ResourceExt;

use super::decide::container_label;
use super::{Fetched, delete_machine, delete_pool_machine, pool_docker_machines};
use crate::controllers::context::{Context, EventKind};
use crate::controllers::error::{Error, Result, removed};
use crate::controllers::kinds::PoolView;
use crate::controllers::meta::{cluster_label, is_deleting, owner_machine};
use crate::docker::node::{cluster_selector, delete_node};

/// Deletes the pool's machines and containers.
///
/// # Errors
/// [`Error::NotFinished`] while machines are still going away (the finalizer stays), or the
/// failure of a deletion.
pub async fn reconcile(ctx: &Context, pool: &PoolView, fetched: &Fetched) -> Result<()> {
    let namespace = pool.namespace().unwrap_or_default();
    let docker_machines = pool_docker_machines(ctx, pool, fetched.cluster_name.as_deref()).await?;
    let mut clusters: BTreeSet<String> = fetched.cluster_name.iter().cloned().collect();
    clusters.extend(
        docker_machines
            .iter()
            .filter_map(|dm| cluster_label(&dm.metadata))
            .map(str::to_string),
    );
    if !docker_machines.is_empty() {
        for docker_machine in docker_machines.iter().filter(|d| !is_deleting(&d.metadata)) {
            // Through the owner Machine when there is one; directly when core never made it
            // or it is gone already.
            let through_machine = match owner_machine(&docker_machine.metadata) {
                Some(machine) => delete_machine(ctx, &namespace, machine).await?,
                None => false,
            };
            if !through_machine {
                delete_pool_machine(ctx, pool, &docker_machine.name_any()).await?;
            }
        }
        return Err(Error::NotFinished {
            what: format!(
                "{} machine(s) of {} {namespace}/{} to be deleted",
                docker_machines.len(),
                pool.served().pool_kind(),
                pool.name_any()
            ),
        });
    }
    // Containers whose machine was never made (a manager stopped in between).
    for cluster in &clusters {
        let mut selector = cluster_selector(cluster);
        selector.insert(container_label(pool.served()).to_string(), pool.name_any());
        let leftovers = ctx
            .runtime
            .list_containers(&selector)
            .await
            .map_err(Error::runtime(format!(
                "list the containers of {} {namespace}/{}",
                pool.served().pool_kind(),
                pool.name_any()
            )))?;
        for container in leftovers {
            removed(
                delete_node(ctx.runtime.as_ref(), &container.name).await?,
                format_args!("container {}", container.name),
            )?;
            tracing::info!(container = %container.name, "Deleted a pool container without a machine");
            ctx.event(
                pool,
                EventKind::Normal,
                "ContainerDeleted",
                format!(
                    "Deleted node container {} (it had no {})",
                    container.name,
                    pool.served().machine_kind()
                ),
            )
            .await;
        }
    }
    Ok(())
}
