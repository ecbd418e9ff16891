//! The DockerCluster controller: the network and the haproxy load balancer of a workload
//! cluster, its control plane endpoint, failure domains and the InfraCluster contract status.
//! It serves DockerClusters and DevClusters alike, through their
//! [`ClusterView`](super::kinds::ClusterView); a DevCluster with the `inMemory` backend goes
//! through the same gates and finalizer, then to [`inmemory`] instead of Docker.

pub mod decide;
mod infra;
pub mod inmemory;

#[cfg(test)]
mod inmemory_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::runtime::finalizer::Event as Finalizer;

use crate::controllers::finalize::finalizer;
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::instrument;

use self::decide::{Gate, LoadBalancerOutcome};
use super::context::{Context, EventKind};
use super::error::{Error, Result, finalizer_gone};
use super::kinds::{Backend, ClusterView, Recorded, ServedKind};
use super::meta::{key, owner_cluster};
use super::unsupported;
use crate::api::DOCKER_CLUSTER_FINALIZER;
use crate::api::capi::Cluster;
use crate::api::v1beta2::{DockerCluster, DockerClusterStatus};
use crate::runtime::error_chain;

/// Names of the controllers (of DockerClusters, of DevClusters) in metrics and logs.
pub use super::kinds::{
    DEV_CLUSTER_CONTROLLER as DEV_CONTROLLER, DOCKER_CLUSTER_CONTROLLER as CONTROLLER,
};

/// Reconciles one DockerCluster or DevCluster; records metrics, logs and an Event when it fails.
pub async fn reconcile<K>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action>
where
    K: ServedKind<Docker = DockerCluster>,
{
    ctx.reconciled(K::CONTROLLER, object.as_ref(), reconcile_one(&object, &ctx))
        .await
}

/// Retry delay after a failure: the object's own backoff, or the API server's `Retry-After`.
pub fn error_policy<K>(object: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action
where
    K: ServedKind<Docker = DockerCluster>,
{
    ctx.requeue_after_failure(object.as_ref(), error)
}

#[instrument(skip_all, fields(kind = %K::kind(&()), object = %key(object.meta())), err)]
async fn reconcile_one<K>(object: &Arc<K>, ctx: &Context) -> Result<Action>
where
    K: ServedKind<Docker = DockerCluster>,
{
    let namespace = object.namespace().unwrap_or_default();
    let cluster = match owner_cluster(object.meta()) {
        Some(name) => ctx.cluster(&namespace, name).await?,
        None => None,
    };
    let gate = decide::gate(object.meta(), cluster.as_ref());
    let docker_cluster = match object.view() {
        Ok(view) => view,
        // Not ours to serve, but still the contract's to gate: an externally managed, unowned or
        // paused object is not written to.
        Err(backend) => {
            return match gate {
                Gate::Skip(_) | Gate::Paused => Ok(Action::await_change()),
                Gate::ReleaseFinalizer | Gate::Proceed => {
                    unsupported::reconcile(ctx, object.as_ref(), DOCKER_CLUSTER_FINALIZER, backend)
                        .await
                }
            };
        }
    };
    let docker_cluster = &docker_cluster;
    let api: Api<K> = ctx.api(&namespace);
    match gate {
        Gate::Skip(why) => {
            tracing::info!(reason = why, "Not reconciling");
            return Ok(Action::await_change());
        }
        Gate::ReleaseFinalizer => {
            finalizer(
                &ctx.finalizers,
                &api,
                DOCKER_CLUSTER_FINALIZER,
                object.clone(),
                |_| async { Ok::<_, Error>(Action::await_change()) },
            )
            .await?;
            return Ok(Action::await_change());
        }
        Gate::Paused => {
            tracing::info!("Reconciliation is paused");
            let status = decide::paused_status(&latest(ctx, docker_cluster));
            write_status(ctx, docker_cluster, &status).await?;
            return Ok(Action::await_change());
        }
        Gate::Proceed => {}
    }
    let cluster_name = owner_cluster(&docker_cluster.metadata)
        .unwrap_or_default()
        .to_string();
    let sync_period = ctx.manager.config.sync_period;
    // The finalizer helper hands back the object it was given: the view made above is its view.
    let (cluster_name, cluster) = (&cluster_name, cluster.as_ref());
    finalizer(
        &ctx.finalizers,
        &api,
        DOCKER_CLUSTER_FINALIZER,
        object.clone(),
        |event| async move {
            match event {
                Finalizer::Apply(_) => {
                    match docker_cluster.backend() {
                        Backend::Docker => {
                            reconcile_normal(ctx, docker_cluster, cluster_name, cluster).await?;
                        }
                        Backend::InMemory(_) => {
                            inmemory::reconcile_normal(ctx, docker_cluster, cluster_name).await?;
                        }
                    }
                    Ok(Action::requeue(sync_period))
                }
                Finalizer::Cleanup(_) => {
                    match docker_cluster.backend() {
                        Backend::Docker => {
                            reconcile_delete(ctx, docker_cluster, cluster_name).await?;
                        }
                        Backend::InMemory(_) => {
                            inmemory::reconcile_delete(ctx, docker_cluster, cluster_name).await?;
                        }
                    }
                    ctx.written.forget(&docker_cluster.reference());
                    Ok(Action::await_change())
                }
            }
        },
    )
    .await
    .or_else(finalizer_gone)
}

async fn reconcile_normal(
    ctx: &Context,
    docker_cluster: &ClusterView,
    cluster_name: &str,
    cluster: Option<&Cluster>,
) -> Result<()> {
    let outcome = infra::ensure(ctx, docker_cluster, cluster_name, cluster).await;
    let (lb_outcome, result) = match outcome {
        Ok(ensured) => {
            let endpoint = &docker_cluster.spec.control_plane_endpoint;
            if let Some(wanted) = decide::endpoint_update(endpoint, &ensured.ip) {
                set_endpoint(ctx, docker_cluster, &wanted).await?;
            }
            let outcome = match ensured.note {
                Some(note) => LoadBalancerOutcome::Recovered(note),
                None => LoadBalancerOutcome::Available,
            };
            (outcome, Ok(()))
        }
        Err(error) => (
            LoadBalancerOutcome::NotAvailable(format!(
                "Failed to create load balancer: {}",
                error_chain(&error)
            )),
            Err(error),
        ),
    };
    let before = latest(ctx, docker_cluster);
    let status = decide::normal_status(&before, &lb_outcome);
    let newly_provisioned = status.initialization.provisioned == Some(true)
        && before
            .status
            .as_ref()
            .and_then(|s| s.initialization.provisioned)
            != Some(true);
    write_status(ctx, docker_cluster, &status).await?;
    if newly_provisioned {
        ctx.event(
            docker_cluster,
            EventKind::Normal,
            "Provisioned",
            "The network and the load balancer are ready",
        )
        .await;
    }
    result
}

async fn set_endpoint(
    ctx: &Context,
    docker_cluster: &ClusterView,
    endpoint: &crate::api::v1beta2::APIEndpoint,
) -> Result<()> {
    let spec = json!({"controlPlaneEndpoint": {"host": endpoint.host, "port": endpoint.port}});
    docker_cluster.apply_spec(ctx, spec).await?;
    tracing::info!(host = %endpoint.host, port = endpoint.port, "Set the control plane endpoint");
    ctx.event(
        docker_cluster,
        EventKind::Normal,
        "ControlPlaneEndpointSet",
        format!("Control plane endpoint {}:{}", endpoint.host, endpoint.port),
    )
    .await;
    Ok(())
}

async fn reconcile_delete(
    ctx: &Context,
    docker_cluster: &ClusterView,
    cluster_name: &str,
) -> Result<()> {
    write_status(
        ctx,
        docker_cluster,
        &decide::deleting_status(&latest(ctx, docker_cluster)),
    )
    .await?;
    infra::delete(ctx, docker_cluster, cluster_name).await
}

/// The DockerCluster a pass computes its status from: the cached one with the status this manager
/// last wrote on it ([`WrittenStatuses::latest`](crate::controllers::written::WrittenStatuses::latest)).
pub(super) fn latest(ctx: &Context, docker_cluster: &ClusterView) -> DockerCluster {
    ctx.written
        .latest(&docker_cluster.reference(), &**docker_cluster)
}

/// Writes the status when it differs from the object's or from the one last written
/// ([`crate::controllers::written`]): a reconcile that changes nothing writes nothing. An object
/// deleted meanwhile is not an error.
pub(super) async fn write_status(
    ctx: &Context,
    docker_cluster: &ClusterView,
    status: &DockerClusterStatus,
) -> Result<()> {
    let reference = docker_cluster.reference();
    if ctx
        .written
        .unchanged(&reference, docker_cluster.status.as_ref(), status)
    {
        return Ok(());
    }
    if docker_cluster.apply_status(ctx, status).await? {
        ctx.written.record(&reference, status);
    } else {
        ctx.written.forget(&reference);
    }
    Ok(())
}
