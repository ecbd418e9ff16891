//! Node containers: names, labels, the desired container spec (pure), addresses, and the
//! operations that create, inspect and delete them.
//!
//! The spec matches what CAPD (and kind) run: a privileged container with seccomp and AppArmor
//! unconfined, tmpfs `/tmp` and `/run`, an anonymous `/var` volume, `/lib/modules` read-only,
//! restart on-failure:1, a private cgroup namespace for kind ≥ 0.20 images, IPv6 sysctls when
//! needed, proxy variables passed through, and for control planes `127.0.0.1:<random>` → 6443.

mod addresses;
mod error;
mod ops;
mod proxy;

use std::collections::BTreeMap;

use ipnetwork::IpNetwork;

pub use addresses::{
    AddressType, IpFamily, MachineAddress, endpoint_on_network, ip_family_from_cidrs,
    machine_addresses, primary_ip,
};
pub use error::NodeError;
pub use ops::{
    MULTI_USER_PATTERN, addresses_on_network, create_node, delete_node, exec_checked,
    find_container, inspect_node, is_multi_user_line, is_running, node_addresses, preload_image,
    wait_for_log_line, wait_for_multi_user,
};
pub use proxy::{ProxyEnv, no_proxy_list};

use super::kind::KindMode;
use super::types::{BindMount, ContainerSpec, DeviceMapping, Labels, PortPublish};

/// Label naming the cluster a container belongs to (kind's, so kind tooling sees CAPD clusters).
pub const CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";
/// Label naming the container's role.
pub const ROLE_LABEL: &str = "io.x-k8s.kind.role";
/// Label carrying the machine's failure domain.
pub const FAILURE_DOMAIN_LABEL: &str = "io.x-k8s.cluster.failureDomain";
/// Label naming the DockerMachinePool a container belongs to.
pub const MACHINE_POOL_LABEL: &str = "docker.cluster.x-k8s.io/machine-pool";
/// Label naming the DevMachinePool a container belongs to.
pub const DEV_MACHINE_POOL_LABEL: &str = "dev.cluster.x-k8s.io/machine-pool";

/// Port the Kubernetes API server listens on inside a node.
pub const API_SERVER_PORT: u16 = 6443;
/// Host address published ports are bound to unless told otherwise.
pub const DEFAULT_PUBLISH_ADDRESS: &str = "127.0.0.1";
/// Prefix of provider IDs.
pub const PROVIDER_ID_PREFIX: &str = "docker:////";

/// Role of a container in a cluster (value of [`ROLE_LABEL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeRole {
    /// A control-plane machine.
    ControlPlane,
    /// A worker machine.
    Worker,
    /// The cluster's haproxy load balancer.
    ExternalLoadBalancer,
}

impl NodeRole {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeRole::ControlPlane => "control-plane",
            NodeRole::Worker => "worker",
            NodeRole::ExternalLoadBalancer => "external-load-balancer",
        }
    }
}

/// Container name of a machine: `machine` when it already starts with the cluster name,
/// else `<cluster>-<machine>`.
pub fn machine_container_name(cluster: &str, machine: &str) -> String {
    if machine.starts_with(cluster) {
        machine.to_string()
    } else {
        format!("{cluster}-{machine}")
    }
}

/// Container name of a cluster's load balancer: `<cluster>-lb`.
pub fn load_balancer_container_name(cluster: &str) -> String {
    format!("{cluster}-lb")
}

/// Provider ID of a machine: `docker:////<container>`.
pub fn provider_id(container: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{container}")
}

/// The container name inside a provider ID, if it is one of ours.
pub fn container_from_provider_id(provider_id: &str) -> Option<&str> {
    provider_id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .filter(|name| !name.is_empty())
}

/// Labels selecting a cluster's containers of one role.
pub fn role_selector(cluster: &str, role: NodeRole) -> Labels {
    Labels::from([
        (CLUSTER_LABEL.to_string(), cluster.to_string()),
        (ROLE_LABEL.to_string(), role.as_str().to_string()),
    ])
}

/// Labels selecting all containers of a cluster.
pub fn cluster_selector(cluster: &str) -> Labels {
    Labels::from([(CLUSTER_LABEL.to_string(), cluster.to_string())])
}

/// A host path mounted into a node (the DockerMachine `extraMounts` entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtraMount {
    /// Path inside the container.
    pub container_path: String,
    /// Path on the host.
    pub host_path: String,
    /// Mount read-only.
    pub read_only: bool,
}

/// Facts about the engine host that change how containers run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostQuirks {
    /// The storage driver is btrfs or zfs: `/dev/mapper` must be visible.
    pub needs_dev_mapper: bool,
    /// The engine remaps user namespaces: run in the host's.
    pub userns_remap: bool,
    /// The engine is rootless: `/dev/fuse` must be passed.
    pub rootless: bool,
    /// SELinux is enforcing on the host: relabel bind mounts (`:Z`).
    pub selinux_enforcing: bool,
}

impl HostQuirks {
    /// Reads the quirks from the engine facts and, for SELinux, from `/sys/fs/selinux/enforce`.
    pub fn detect(host: &super::types::HostInfo) -> Self {
        let selinux_enforcing = std::fs::read_to_string("/sys/fs/selinux/enforce")
            .map(|s| s.trim() == "1")
            .unwrap_or(false);
        HostQuirks {
            needs_dev_mapper: matches!(host.storage_driver.as_str(), "btrfs" | "zfs"),
            userns_remap: host.userns_remap(),
            rootless: host.rootless(),
            selinux_enforcing,
        }
    }
}

/// Everything that decides a node container's spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Cluster name.
    pub cluster: String,
    /// Container name (see [`machine_container_name`]).
    pub name: String,
    /// Role of the node.
    pub role: NodeRole,
    /// Image to run.
    pub image: String,
    /// How to run the image (see [`super::kind::mapping`]).
    pub mode: KindMode,
    /// Network to join.
    pub network: String,
    /// Subnets of that network (for `NO_PROXY`).
    pub network_subnets: Vec<IpNetwork>,
    /// Failure domain, when the machine has one.
    pub failure_domain: Option<String>,
    /// Machine pool label `(key, value)`, for pool machines.
    pub machine_pool: Option<(String, String)>,
    /// Host paths to mount.
    pub extra_mounts: Vec<ExtraMount>,
    /// IP family of the cluster.
    pub ip_family: IpFamily,
    /// Proxy variables of the controller, passed through.
    pub proxy: ProxyEnv,
    /// Host quirks.
    pub host: HostQuirks,
    /// Host address the API server port is published on ([`DEFAULT_PUBLISH_ADDRESS`]).
    pub publish_address: String,
    /// Extra labels (for example to tag test containers).
    pub extra_labels: Labels,
}

impl NodeSpec {
    /// A spec with the defaults: kind 0.20 mode, IPv4, no proxy, no quirks, published on 127.0.0.1.
    pub fn new(cluster: &str, name: &str, role: NodeRole, image: &str, network: &str) -> Self {
        NodeSpec {
            cluster: cluster.to_string(),
            name: name.to_string(),
            role,
            image: image.to_string(),
            mode: KindMode::LATEST,
            network: network.to_string(),
            network_subnets: Vec::new(),
            failure_domain: None,
            machine_pool: None,
            extra_mounts: Vec::new(),
            ip_family: IpFamily::V4,
            proxy: ProxyEnv::default(),
            host: HostQuirks::default(),
            publish_address: DEFAULT_PUBLISH_ADDRESS.to_string(),
            extra_labels: Labels::new(),
        }
    }

    /// The container labels: cluster, role, failure domain, machine pool and extra labels.
    pub fn labels(&self) -> Labels {
        let mut labels = self.extra_labels.clone();
        labels.extend(role_selector(&self.cluster, self.role));
        if let Some(fd) = self.failure_domain.as_ref().filter(|fd| !fd.is_empty()) {
            labels.insert(FAILURE_DOMAIN_LABEL.to_string(), fd.clone());
        }
        if let Some((key, value)) = &self.machine_pool {
            labels.insert(key.clone(), value.clone());
        }
        labels
    }

    /// The container spec to run.
    pub fn container_spec(&self) -> ContainerSpec {
        let mut mounts = vec![BindMount {
            host_path: "/lib/modules".to_string(),
            container_path: "/lib/modules".to_string(),
            read_only: true,
            selinux_relabel: false,
        }];
        if self.host.needs_dev_mapper {
            mounts.push(BindMount {
                host_path: "/dev/mapper".to_string(),
                container_path: "/dev/mapper".to_string(),
                read_only: true,
                selinux_relabel: false,
            });
        }
        mounts.extend(self.extra_mounts.iter().map(|m| BindMount {
            host_path: m.host_path.clone(),
            container_path: m.container_path.clone(),
            read_only: m.read_only,
            selinux_relabel: self.host.selinux_enforcing,
        }));

        let mut env = Vec::new();
        if self.role == NodeRole::ControlPlane {
            env.push((
                "KUBECONFIG".to_string(),
                "/etc/kubernetes/admin.conf".to_string(),
            ));
        }
        env.extend(self.proxy.container_env(&self.network_subnets, &self.name));

        let mut sysctls = BTreeMap::new();
        if self.ip_family != IpFamily::V4 {
            sysctls.insert(
                "net.ipv6.conf.all.disable_ipv6".to_string(),
                "0".to_string(),
            );
            sysctls.insert("net.ipv6.conf.all.forwarding".to_string(), "1".to_string());
        }

        let ports = if self.role == NodeRole::ControlPlane {
            vec![PortPublish {
                container_port: API_SERVER_PORT,
                host_ip: self.publish_address.clone(),
                host_port: None,
            }]
        } else {
            Vec::new()
        };

        let devices = if self.host.rootless {
            vec![DeviceMapping {
                host_path: "/dev/fuse".to_string(),
                container_path: "/dev/fuse".to_string(),
                permissions: "rwm".to_string(),
            }]
        } else {
            Vec::new()
        };

        ContainerSpec {
            labels: self.labels(),
            env,
            mounts,
            ports,
            private_cgroupns: self.mode.private_cgroupns(),
            sysctls,
            devices,
            userns_host: self.host.userns_remap,
            ..ContainerSpec::capd_defaults(&self.name, &self.image, &self.network)
        }
    }
}

#[cfg(test)]
mod tests;
