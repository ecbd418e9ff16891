//! The in-memory backend of a DevCluster: a fake workload cluster ([`crate::inmemory`]) whose
//! listener port is reserved at once (the next free one of 20000–24000, or the one its endpoint
//! already names after a restart); the control plane endpoint is the manager's address and that
//! port. The listener itself opens when the first control plane's API server starts (see the
//! DevMachine side), and closes when the DevCluster goes.
//!
//! When the manager's address changes (a restart on another pod IP), the endpoint follows it,
//! and, as CAPD 1.14 does, so does the `server` of the cluster's entry in the
//! `<cluster>-kubeconfig` Secret that core wrote from the old endpoint.

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::api::conditions::{
    ConditionStatus, DELETING_REASON, READY_CONDITION, READY_REASON, set_condition,
};
use crate::api::v1beta2::{APIEndpoint, DockerCluster, DockerClusterStatus};
use crate::controllers::conditions::{condition, paused_condition};
use crate::controllers::context::{Context, EventKind};
use crate::controllers::error::{Error, Result};
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

/// The kubeconfig `yaml` with the `server` of the cluster entry named `cluster` set to `server`;
/// `None` when it is already that.
///
/// # Errors
/// A message when the kubeconfig does not parse or has no entry for the cluster.
pub fn with_server(
    yaml: &str,
    cluster: &str,
    server: &str,
) -> std::result::Result<Option<String>, String> {
    let mut config: Value =
        serde_saphyr::from_str(yaml).map_err(|e| format!("the kubeconfig does not parse: {e}"))?;
    let entry = config
        .get_mut("clusters")
        .and_then(Value::as_array_mut)
        .and_then(|clusters| {
            clusters
                .iter_mut()
                .find(|c| c.get("name").and_then(Value::as_str) == Some(cluster))
        })
        .and_then(|c| c.get_mut("cluster"))
        .ok_or_else(|| format!("the kubeconfig has no cluster entry {cluster:?}"))?;
    if entry.get("server").and_then(Value::as_str) == Some(server) {
        return Ok(None);
    }
    entry["server"] = json!(server);
    serde_saphyr::to_string(&config)
        .map(Some)
        .map_err(|e| format!("the kubeconfig does not serialize: {e}"))
}

/// Points the `<cluster>-kubeconfig` Secret (key `value`) at `endpoint`; a missing Secret is left
/// to core, which writes it from the endpoint.
async fn rewrite_kubeconfig(
    ctx: &Context,
    namespace: &str,
    cluster_name: &str,
    endpoint: &APIEndpoint,
) -> Result<()> {
    let name = format!("{cluster_name}-kubeconfig");
    let secrets = ctx.api::<Secret>(namespace);
    let Some(secret) = secrets
        .get_opt(&name)
        .await
        .map_err(Error::kube(format!("read Secret {namespace}/{name}")))?
    else {
        return Ok(());
    };
    let invalid = |detail: String| Error::InvalidObject {
        kind: "Secret",
        namespace: namespace.to_string(),
        name: name.clone(),
        detail,
    };
    let yaml = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .and_then(|v| String::from_utf8(v.0.clone()).ok())
        .ok_or_else(|| invalid("no key \"value\"".into()))?;
    let server = format!("https://{}:{}", endpoint.host, endpoint.port);
    let Some(rewritten) = with_server(&yaml, cluster_name, &server).map_err(invalid)? else {
        return Ok(());
    };
    let value = base64::engine::general_purpose::STANDARD.encode(rewritten);
    secrets
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": value}})),
        )
        .await
        .map_err(Error::kube(format!(
            "rewrite the server of Secret {namespace}/{name}"
        )))?;
    tracing::info!(secret = %name, %server, "Pointed the kubeconfig at the fake cluster's new address");
    Ok(())
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
        if !current.host.is_empty() {
            // The Secret first: if its write fails, the endpoint still differs and the next
            // pass tries again.
            rewrite_kubeconfig(ctx, &namespace, cluster_name, &wanted).await?;
        }
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
