//! The in-memory backend of a DevCluster: a fake workload cluster ([`crate::inmemory`]) whose
//! listener port is reserved at once (the next free one of 20000–24000, or the one its endpoint
//! already names after a restart); the control plane endpoint is the manager's address and that
//! port. The listener itself opens when the first control plane's API server starts (see the
//! DevMachine side), and closes when the DevCluster goes.

use serde_json::json;

use crate::api::conditions::{
    ConditionStatus, DELETING_REASON, READY_CONDITION, READY_REASON, set_condition,
};
use crate::api::v1beta2::{APIEndpoint, DockerCluster, DockerClusterStatus};
use crate::controllers::conditions::{condition, paused_condition};
use crate::controllers::context::{Context, EventKind};
use crate::controllers::error::Result;
use crate::controllers::fake_clusters::{cluster_key, reserve};
use crate::controllers::kinds::ClusterView;

/// The endpoint of a fake cluster listening on `port` at `host`.
pub fn endpoint(host: &str, port: u16) -> APIEndpoint {
    APIEndpoint {
        host: host.to_string(),
        port: i32::from(port),
    }
}

/// The status of a DevCluster whose fake cluster exists, observed at `generation`: provisioned
/// and Ready.
pub fn normal_status(cluster: &DockerCluster, generation: Option<i64>) -> DockerClusterStatus {
    let mut status = cluster.status.clone().unwrap_or_default();
    set_condition(&mut status.conditions, paused_condition(false, generation));
    set_condition(
        &mut status.conditions,
        condition(
            READY_CONDITION,
            ConditionStatus::True,
            READY_REASON,
            "",
            generation,
        ),
    );
    status.initialization.provisioned = Some(true);
    status
}

/// The status of a DevCluster being deleted.
pub fn deleting_status(cluster: &DockerCluster) -> DockerClusterStatus {
    let generation = cluster.metadata.generation;
    let mut status = cluster.status.clone().unwrap_or_default();
    set_condition(
        &mut status.conditions,
        condition(
            READY_CONDITION,
            ConditionStatus::False,
            DELETING_REASON,
            "Deleting the fake cluster",
            generation,
        ),
    );
    status
}

/// Makes (or finds) the fake cluster, sets the endpoint and the status.
///
/// # Errors
/// [`Error::InMemory`](crate::controllers::error::Error::InMemory) when no port is free, [`Error::Kube`](crate::controllers::error::Error::Kube) when a write is refused.
pub async fn reconcile_normal(ctx: &Context, view: &ClusterView, cluster_name: &str) -> Result<()> {
    let namespace = view.metadata.namespace.clone().unwrap_or_default();
    let key = cluster_key(&namespace, cluster_name);
    let current = &view.spec.control_plane_endpoint;
    let fake = reserve(ctx, &key, current.port)?;
    let wanted = endpoint(&ctx.in_memory.host, fake.port);
    let mut generation = view.metadata.generation;
    if *current != wanted {
        let applied = view
            .apply_spec(
                ctx,
                json!({"controlPlaneEndpoint": {"host": wanted.host, "port": wanted.port}}),
            )
            .await?;
        // The endpoint is spec: the status is observed at the generation it made.
        generation = applied.generation;
        tracing::info!(host = %wanted.host, port = wanted.port, "Set the control plane endpoint of the fake cluster");
        ctx.event(
            view,
            EventKind::Normal,
            "ControlPlaneEndpointSet",
            format!("Control plane endpoint {}:{}", wanted.host, wanted.port),
        )
        .await;
    }
    super::write_status(
        ctx,
        view,
        &normal_status(&super::latest(ctx, view), generation),
    )
    .await
}

/// Drops the fake cluster (its listener closes, its port is free again).
///
/// # Errors
/// [`Error::Kube`](crate::controllers::error::Error::Kube) when the status write is refused.
pub async fn reconcile_delete(ctx: &Context, view: &ClusterView, cluster_name: &str) -> Result<()> {
    super::write_status(ctx, view, &deleting_status(&super::latest(ctx, view))).await?;
    let namespace = view.metadata.namespace.clone().unwrap_or_default();
    ctx.in_memory.remove(&cluster_key(&namespace, cluster_name));
    Ok(())
}
