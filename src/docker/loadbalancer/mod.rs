//! The cluster load balancer: an haproxy container `<cluster>-lb` in front of the control planes.
//!
//! - [`LoadBalancerSpec`]: the desired container (pure).
//! - [`config`]: the haproxy configuration, rendered from the backends (pure).
//! - [`template`]: Go's `text/template` (the `gotmpl` crate) for configuration templates, with limits.
//! - [`apply_config`]: writes a configuration into the container and reloads haproxy safely.

mod apply;
pub mod config;
pub mod template;

use std::collections::BTreeMap;
use std::net::IpAddr;

pub use apply::{ApplyOutcome, CONFIG_PATH, apply_config};
pub use config::{Backend, ConfigData, DEFAULT_TEMPLATE, STATS_PORT, render_config};
pub use template::TemplateError;

use super::node::{
    DEFAULT_PUBLISH_ADDRESS, IpFamily, NodeRole, endpoint_on_network, load_balancer_container_name,
    primary_ip, role_selector,
};
use super::pinning::{Pinning, run_pinned};
use super::runtime::{ContainerRuntime, Removal, RunFailure, RuntimeError};
use super::types::{
    ContainerInfo, ContainerSpec, ContainerSummary, Labels, NetworkInfo, PortPublish,
};

/// Image repository used when `spec.loadBalancer.imageRepository` is empty.
pub const DEFAULT_IMAGE_REPOSITORY: &str = "kindest";
/// Image tag used when `spec.loadBalancer.imageTag` is empty.
pub const DEFAULT_IMAGE_TAG: &str = "v20230606-42a2262b";

/// Errors of load balancer operations.
#[derive(Debug, thiserror::Error)]
pub enum LoadBalancerError {
    /// The configuration template is invalid or does not fit the data.
    #[error("render haproxy config")]
    Template(#[source] TemplateError),
    /// The load balancer image is not available.
    #[error("prepare load balancer image {image}")]
    Image {
        /// Image reference.
        image: String,
        /// Why.
        #[source]
        source: RuntimeError,
    },
    /// The engine failed an operation on the container.
    #[error("{action} load balancer container {container}")]
    Runtime {
        /// What was being done.
        action: &'static str,
        /// Container name.
        container: String,
        /// Engine error.
        #[source]
        source: RuntimeError,
    },
    /// The container does not exist (or is not running, for config changes).
    #[error("find load balancer container {container}: not found or not running")]
    NotRunning {
        /// Container name.
        container: String,
    },
    /// Several containers claim to be the cluster's load balancer.
    #[error("find load balancer of cluster {cluster}: {count} containers match")]
    Ambiguous {
        /// Cluster name.
        cluster: String,
        /// Number of matches.
        count: usize,
    },
    /// A command in the container failed.
    #[error(
        "{action} in load balancer container {container}: exited with status {exit_code}: {output}"
    )]
    CommandFailed {
        /// What the command does.
        action: String,
        /// Container name.
        container: String,
        /// Exit code.
        exit_code: i64,
        /// Tail of its output.
        output: String,
    },
    /// haproxy rejected the new configuration; the running one was kept.
    #[error("validate haproxy config in container {container}: {output}")]
    InvalidConfig {
        /// Container name.
        container: String,
        /// haproxy's complaint.
        output: String,
    },
    /// The configuration read back differs from what was written; the previous one was restored.
    #[error(
        "write haproxy config in container {container}: read back differs from what was written"
    )]
    ReadBackMismatch {
        /// Container name.
        container: String,
    },
}

impl LoadBalancerError {
    /// A short stable word for metric labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Template(e) => e.category(),
            Self::Image { .. } => "image_unavailable",
            Self::Runtime { .. } => "runtime",
            Self::NotRunning { .. } => "load_balancer_not_running",
            Self::Ambiguous { .. } => "load_balancer_ambiguous",
            Self::CommandFailed { .. } => "command_failed",
            Self::InvalidConfig { .. } => "invalid_config",
            Self::ReadBackMismatch { .. } => "config_mismatch",
        }
    }
}

/// The load balancer image: `<repository|kindest>/haproxy:<tag|v20230606-42a2262b>`.
pub fn image(repository: Option<&str>, tag: Option<&str>) -> String {
    let repository = repository
        .map(|r| r.trim().trim_end_matches('/'))
        .filter(|r| !r.is_empty())
        .unwrap_or(DEFAULT_IMAGE_REPOSITORY);
    let tag = tag
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or(DEFAULT_IMAGE_TAG);
    format!("{repository}/haproxy:{tag}")
}

/// Everything that decides the load balancer container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerSpec {
    /// Cluster name.
    pub cluster: String,
    /// Image (see [`image`]).
    pub image: String,
    /// Network to join.
    pub network: String,
    /// IP family of the cluster.
    pub ip_family: IpFamily,
    /// Port haproxy serves the API on (`controlPlaneEndpoint.port`; 0 means 6443).
    pub frontend_port: u16,
    /// Host address the published ports are bound to ([`DEFAULT_PUBLISH_ADDRESS`]).
    pub publish_address: String,
    /// Extra labels (for example to tag test containers).
    pub extra_labels: Labels,
    /// The address to ask for: the cluster's endpoint host when it has one, so that a load
    /// balancer created again keeps it.
    pub address: Option<IpAddr>,
}

impl LoadBalancerSpec {
    /// A spec with the defaults: IPv4, frontend 6443, published on 127.0.0.1.
    pub fn new(cluster: &str, image: &str, network: &str) -> Self {
        LoadBalancerSpec {
            cluster: cluster.to_string(),
            image: image.to_string(),
            network: network.to_string(),
            ip_family: IpFamily::V4,
            frontend_port: super::node::API_SERVER_PORT,
            publish_address: DEFAULT_PUBLISH_ADDRESS.to_string(),
            extra_labels: Labels::new(),
            address: None,
        }
    }

    /// Container name `<cluster>-lb`.
    pub fn name(&self) -> String {
        load_balancer_container_name(&self.cluster)
    }

    /// The frontend port with 0 read as 6443.
    pub fn effective_frontend_port(&self) -> u16 {
        ConfigData {
            frontend_port: self.frontend_port,
            ..Default::default()
        }
        .effective_frontend_port()
    }

    /// Container ports published on the host: the frontend, 6443 for kind when the frontend is
    /// another port, and the statistics page.
    pub fn published_ports(&self) -> Vec<u16> {
        let frontend = self.effective_frontend_port();
        let mut ports = vec![frontend];
        if frontend != super::node::API_SERVER_PORT {
            ports.push(super::node::API_SERVER_PORT);
        }
        ports.push(STATS_PORT);
        ports
    }

    /// The container spec. Unlike CAPD, the published container port is the frontend port, so
    /// the host port reaches haproxy also when the endpoint port is not 6443; `6443/tcp` is
    /// published as well in that case (the default configuration binds it), because
    /// `kind get kubeconfig` reads the host port of `6443/tcp`.
    pub fn container_spec(&self) -> ContainerSpec {
        let publish = |container_port| PortPublish {
            container_port,
            host_ip: self.publish_address.clone(),
            host_port: None,
        };
        let mut labels = self.extra_labels.clone();
        labels.extend(role_selector(&self.cluster, NodeRole::ExternalLoadBalancer));
        let mut sysctls = BTreeMap::new();
        if self.ip_family != IpFamily::V4 {
            sysctls.insert(
                "net.ipv6.conf.all.disable_ipv6".to_string(),
                "0".to_string(),
            );
            sysctls.insert("net.ipv6.conf.all.forwarding".to_string(), "1".to_string());
        }
        ContainerSpec {
            labels,
            entrypoint: Some(
                ["haproxy", "-W", "-db", "-f", CONFIG_PATH]
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            ),
            ports: self.published_ports().into_iter().map(publish).collect(),
            sysctls,
            ..ContainerSpec::capd_defaults(&self.name(), &self.image, &self.network)
        }
    }
}

/// Creates and starts the load balancer container (image used when present, pulled otherwise),
/// with its address and host ports pinned ([`super::pinning`]): [`LoadBalancerSpec::address`]
/// first when it is free. `network` is the network as the caller has just read it, if it has.
///
/// # Errors
/// [`LoadBalancerError`] when the image is unavailable or the engine refuses the container.
pub async fn create_load_balancer(
    runtime: &dyn ContainerRuntime,
    spec: &LoadBalancerSpec,
    network: Option<&NetworkInfo>,
) -> Result<ContainerInfo, LoadBalancerError> {
    let name = spec.name();
    let runtime_err = |action| {
        let container = name.clone();
        move |source| LoadBalancerError::Runtime {
            action,
            container,
            source,
        }
    };
    let pinning = Pinning {
        preferred: spec.address,
        host_ports: true,
    };
    run_pinned(runtime, &spec.container_spec(), &pinning, network)
        .await
        .map_err(|failure| match failure {
            RunFailure::Image(source) => LoadBalancerError::Image {
                image: spec.image.clone(),
                source,
            },
            RunFailure::Container(source) => runtime_err("run")(source),
        })?;
    runtime
        .inspect_container(&name)
        .await
        .map_err(runtime_err("inspect"))?
        .ok_or(LoadBalancerError::NotRunning { container: name })
}

/// The cluster's load balancer container, found by its labels, or `None`.
///
/// # Errors
/// [`LoadBalancerError::Ambiguous`] when several match, [`LoadBalancerError::Runtime`] when listing fails.
pub async fn find_load_balancer(
    runtime: &dyn ContainerRuntime,
    cluster: &str,
) -> Result<Option<ContainerSummary>, LoadBalancerError> {
    let mut found = runtime
        .list_containers(&role_selector(cluster, NodeRole::ExternalLoadBalancer))
        .await
        .map_err(|source| LoadBalancerError::Runtime {
            action: "list",
            container: load_balancer_container_name(cluster),
            source,
        })?;
    match found.len() {
        0 | 1 => Ok(found.pop()),
        count => Err(LoadBalancerError::Ambiguous {
            cluster: cluster.to_string(),
            count,
        }),
    }
}

/// Removes the cluster's load balancer container (with its anonymous volumes); succeeds when
/// absent, and says whether it is gone or another removal of it is still in progress.
///
/// # Errors
/// [`LoadBalancerError::Runtime`] when the engine refuses.
pub async fn delete_load_balancer(
    runtime: &dyn ContainerRuntime,
    cluster: &str,
) -> Result<Removal, LoadBalancerError> {
    let container = load_balancer_container_name(cluster);
    runtime
        .delete_container(&container)
        .await
        .map_err(|source| LoadBalancerError::Runtime {
            action: "delete",
            container,
            source,
        })
}

/// Starts the cluster's stopped load balancer container again (its configuration file and
/// network endpoint are kept); succeeds when it already runs.
///
/// # Errors
/// [`LoadBalancerError::Runtime`] when the engine refuses (for example when it is gone).
pub async fn start_load_balancer(
    runtime: &dyn ContainerRuntime,
    cluster: &str,
) -> Result<(), LoadBalancerError> {
    let container = load_balancer_container_name(cluster);
    runtime
        .start_container(&container)
        .await
        .map_err(|source| LoadBalancerError::Runtime {
            action: "start",
            container,
            source,
        })
}

/// The load balancer's address on `network` that the cluster uses as its endpoint host
/// (IPv6 for IPv6-only clusters, else IPv4); `None` when it has none (for example when stopped).
pub fn load_balancer_ip(info: &ContainerInfo, network: &str, family: IpFamily) -> Option<IpAddr> {
    endpoint_on_network(info, network).and_then(|ep| primary_ip(&ep, family))
}

#[cfg(test)]
mod tests;
