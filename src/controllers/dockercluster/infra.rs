//! The DockerCluster's infrastructure in the container engine: the network and the load
//! balancer container.

use crate::api::capi::Cluster;
use crate::api::v1beta2::DockerCluster;
use crate::controllers::context::{Context, EventKind};
use crate::controllers::error::{Error, Result, removed};
use crate::controllers::kinds::ClusterView;
use crate::controllers::loadbalancer::{control_plane_containers, ip_family, sync_backends};
use crate::docker::loadbalancer::{
    LoadBalancerError, LoadBalancerSpec, create_load_balancer, delete_load_balancer,
    find_load_balancer, image, load_balancer_ip, start_load_balancer,
};
use crate::docker::network::{NetworkDeletion, delete_network, ensure_network};
use crate::docker::node::load_balancer_container_name;
use crate::docker::types::{ContainerInfo, Labels, NetworkInfo};

/// The load balancer container spec of a DockerCluster.
pub fn load_balancer_spec(
    docker_cluster: &DockerCluster,
    cluster_name: &str,
    network: &str,
    family: crate::docker::node::IpFamily,
) -> LoadBalancerSpec {
    let settings = &docker_cluster.spec.load_balancer;
    let image = image(
        Some(settings.image_repository.as_str()),
        Some(settings.image_tag.as_str()),
    );
    let mut spec = LoadBalancerSpec::new(cluster_name, &image, network);
    spec.ip_family = family;
    spec.frontend_port =
        u16::try_from(docker_cluster.spec.control_plane_endpoint.port).unwrap_or(0);
    spec.address = docker_cluster.spec.control_plane_endpoint.host.parse().ok();
    spec
}

/// Makes sure the network exists and the load balancer runs: a stopped one is started again
/// (keeping the address the endpoint was made from), a vanished one created again; returns the
/// load balancer's address and what happened.
///
/// # Errors
/// [`Error`] when the engine refuses, or the load balancer has no address.
pub async fn ensure(
    ctx: &Context,
    docker_cluster: &ClusterView,
    cluster_name: &str,
    cluster: Option<&Cluster>,
) -> Result<Ensured> {
    let runtime = ctx.runtime.as_ref();
    let network = ctx.network();
    let family = ip_family(cluster)?;
    let found = runtime
        .inspect_network(network)
        .await
        .map_err(Error::runtime(format!("inspect network {network}")))?;
    let existed = found.is_some();
    let network_info = match found {
        Some(found) => found,
        None => ensure_network(runtime, network, &Labels::new()).await?,
    };
    if !existed {
        ctx.event(
            docker_cluster,
            EventKind::Normal,
            "NetworkCreated",
            format!("Created Docker network {network}"),
        )
        .await;
    }

    let mut spec = load_balancer_spec(docker_cluster, cluster_name, network, family);
    spec.publish_address = ctx.publish_address();
    let name = spec.name();
    let (info, change) = running_load_balancer(ctx, docker_cluster, &spec, &network_info).await?;
    let ip =
        load_balancer_ip(&info, network, family).ok_or_else(|| Error::LoadBalancerAddress {
            container: name.clone(),
            network: network.to_string(),
        })?;
    // A restarted load balancer keeps its configuration file, but the control planes may have
    // come back with other addresses; a new one has none. Control planes that do not run yet
    // are left to the DockerMachine controller, which re-applies the backends when it starts
    // each of them (a configuration rendered now would have no backend).
    if change != LoadBalancerChange::Kept && has_running_control_planes(ctx, cluster_name).await? {
        let namespace = docker_cluster
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default();
        sync_backends(
            ctx,
            namespace,
            cluster_name,
            cluster,
            Some(&**docker_cluster),
        )
        .await?;
    }
    let ip = ip.to_string();
    let endpoint_host = &docker_cluster.spec.control_plane_endpoint.host;
    if change != LoadBalancerChange::Kept && endpoint_moved(endpoint_host, &ip) {
        tracing::warn!(
            endpoint = %endpoint_host,
            address = %ip,
            "The load balancer has another address than the control plane endpoint"
        );
        ctx.event(
            docker_cluster,
            EventKind::Warning,
            "LoadBalancerAddressChanged",
            format!(
                "The load balancer {name} has address {ip}, but the control plane endpoint is {endpoint_host}; the endpoint cannot change"
            ),
        )
        .await;
    }
    Ok(Ensured {
        ip,
        note: change.note(&name),
    })
}

/// What [`ensure`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ensured {
    /// The load balancer's address on the network.
    pub ip: String,
    /// What happened to the load balancer container when it was not running, for the
    /// `LoadBalancerAvailable` condition; `None` when it was running or created the first time.
    pub note: Option<String>,
}

/// What had to be done for the load balancer to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoadBalancerChange {
    /// It was running.
    Kept,
    /// It did not exist yet.
    Created,
    /// It was provisioned once, but its container was gone: a new one was created.
    Recreated,
    /// Its container existed but was stopped (an engine or host restart): it was started again,
    /// keeping its configuration and its pinned address and host port.
    Restarted,
    /// Its container was stopped and could not start again because something else took its
    /// host port meanwhile: a new one was created, with the same address and this host port.
    PortMoved(u16),
}

impl LoadBalancerChange {
    fn note(self, name: &str) -> Option<String> {
        match self {
            Self::Kept | Self::Created => None,
            Self::Recreated => Some(format!(
                "Load balancer container {name} was missing; created it again"
            )),
            Self::Restarted => Some(format!(
                "Load balancer container {name} was stopped; started it again"
            )),
            Self::PortMoved(port) => Some(format!(
                "Load balancer container {name} was stopped and its host port is taken; created it again with host port {port}"
            )),
        }
    }
}

/// The running load balancer container: kept when it runs, started again when it is stopped
/// (also when it was stopping while listed), created only when there is none. Publishes an Event
/// for what it did.
async fn running_load_balancer(
    ctx: &Context,
    docker_cluster: &ClusterView,
    spec: &LoadBalancerSpec,
    network: &NetworkInfo,
) -> Result<(ContainerInfo, LoadBalancerChange)> {
    let runtime = ctx.runtime.as_ref();
    let name = spec.name();
    if let Some(summary) = find_load_balancer(runtime, &spec.cluster).await? {
        let inspect = || async {
            runtime
                .inspect_container(&summary.name)
                .await
                .map_err(Error::runtime(format!(
                    "inspect container {}",
                    summary.name
                )))
        };
        let mut info = inspect().await?;
        let stopped = info.as_ref().is_some_and(|i| !i.running);
        if stopped {
            match start_load_balancer(runtime, &spec.cluster).await {
                Err(LoadBalancerError::Runtime { source, .. }) if source.is_host_port_taken() => {
                    return moved_load_balancer(ctx, docker_cluster, spec, &source, network).await;
                }
                started => started?,
            }
            info = inspect().await?;
        }
        match info {
            Some(info) if info.running && !stopped => return Ok((info, LoadBalancerChange::Kept)),
            Some(info) if info.running => {
                tracing::info!(container = %name, "Started the stopped load balancer again");
                ctx.event(
                    docker_cluster,
                    EventKind::Normal,
                    "LoadBalancerRestarted",
                    format!("Load balancer container {name} was stopped; started it again with its configuration"),
                )
                .await;
                return Ok((info, LoadBalancerChange::Restarted));
            }
            // It stopped again at once: an error, so that it is started again after a backoff.
            Some(_) => {
                return Err(LoadBalancerError::NotRunning { container: name }.into());
            }
            // Gone meanwhile: created anew below.
            None => {}
        }
    }
    let info = create_load_balancer(runtime, spec, Some(network)).await?;
    tracing::info!(container = %name, image = %spec.image, "Created the load balancer");
    let provisioned_before = docker_cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.provisioned)
        == Some(true);
    let (change, reason, note) = if provisioned_before {
        (
            LoadBalancerChange::Recreated,
            "LoadBalancerRecreated",
            format!("Load balancer container {name} was missing; created it again"),
        )
    } else {
        (
            LoadBalancerChange::Created,
            "LoadBalancerCreated",
            format!("Created load balancer container {name} ({})", spec.image),
        )
    };
    ctx.event(docker_cluster, EventKind::Normal, reason, note)
        .await;
    Ok((info, change))
}

/// Replaces a stopped load balancer that cannot start because its host port was taken while it
/// was stopped: the same address, the next free pinned host port, and a Warning that names it
/// (kubeconfigs that use the old port stop working).
async fn moved_load_balancer(
    ctx: &Context,
    docker_cluster: &ClusterView,
    spec: &LoadBalancerSpec,
    refusal: &crate::docker::RuntimeError,
    network: &NetworkInfo,
) -> Result<(ContainerInfo, LoadBalancerChange)> {
    let runtime = ctx.runtime.as_ref();
    let name = spec.name();
    removed(
        delete_load_balancer(runtime, &spec.cluster).await?,
        format_args!("load balancer container {name}"),
    )?;
    let info = create_load_balancer(runtime, spec, Some(network)).await?;
    let frontend = spec.effective_frontend_port();
    let port = info.host_port(frontend).unwrap_or_default();
    let refused = refusal.engine_message().unwrap_or("its host port is taken");
    tracing::warn!(container = %name, port, "The load balancer's host port was taken; created it again with another");
    ctx.event(
        docker_cluster,
        EventKind::Warning,
        "LoadBalancerHostPortChanged",
        format!(
            "Load balancer container {name} could not start again ({refused}); created it again with host port {port}: kubeconfigs that use the old host port must be fetched again"
        ),
    )
    .await;
    Ok((info, LoadBalancerChange::PortMoved(port)))
}

/// Whether an IP-literal endpoint host differs from the load balancer's address (a host name is
/// the user's business and never compared).
pub fn endpoint_moved(endpoint_host: &str, address: &str) -> bool {
    endpoint_host.parse::<std::net::IpAddr>().is_ok() && endpoint_host != address
}

async fn has_running_control_planes(ctx: &Context, cluster_name: &str) -> Result<bool> {
    Ok(control_plane_containers(ctx, cluster_name)
        .await?
        .iter()
        .any(|c| c.running))
}

/// Deletes the load balancer, then the network when this provider created it and nothing uses
/// it any more.
///
/// # Errors
/// [`Error`] when the engine refuses, or while another removal of the load balancer is in
/// progress.
pub async fn delete(ctx: &Context, docker_cluster: &ClusterView, cluster_name: &str) -> Result<()> {
    let runtime = ctx.runtime.as_ref();
    let name = load_balancer_container_name(cluster_name);
    let existed = find_load_balancer(runtime, cluster_name).await?.is_some();
    removed(
        delete_load_balancer(runtime, cluster_name).await?,
        format_args!("load balancer container {name}"),
    )?;
    if existed {
        tracing::info!(container = %name, "Deleted the load balancer");
        ctx.event(
            docker_cluster,
            EventKind::Normal,
            "LoadBalancerDeleted",
            format!("Deleted load balancer container {name}"),
        )
        .await;
    }
    let network = ctx.network();
    match delete_network(runtime, network).await? {
        NetworkDeletion::Removed => {
            tracing::info!(network, "Deleted the Docker network");
            ctx.event(
                docker_cluster,
                EventKind::Normal,
                "NetworkDeleted",
                format!("Deleted Docker network {network}, which this provider created and nothing uses any more"),
            )
            .await;
        }
        NetworkDeletion::KeptInUse(containers) => {
            tracing::debug!(
                network,
                users = containers.len(),
                "Keeping the network: containers use it"
            );
        }
        NetworkDeletion::Absent | NetworkDeletion::KeptForeign => {}
    }
    Ok(())
}
