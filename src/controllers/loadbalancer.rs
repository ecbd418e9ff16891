//! The load balancer's backends: every control plane container of a cluster, weighted 100, or 0
//! while its Machine is being deleted (and another control plane remains). Shared by the
//! DockerMachine controller (which registers and drains control planes) and the DockerCluster
//! controller (which re-applies the backends after recreating a vanished load balancer).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::context::Context;
use super::error::{Error, Result};
use super::meta::{cluster_label, is_deleting};
use crate::api::capi::{self, Cluster, Machine};
use crate::api::v1beta2::DockerCluster;
use crate::docker::loadbalancer::{ApplyOutcome, Backend, ConfigData, apply_config, render_config};
use crate::docker::node::{
    IpFamily, NodeRole, endpoint_on_network, load_balancer_container_name, machine_container_name,
    primary_ip, role_selector,
};
use crate::docker::types::{ContainerInfo, ContainerSummary};

/// Weight of a serving control plane.
pub const SERVING_WEIGHT: u32 = 100;

/// Weight of a control plane being drained.
pub const DRAINED_WEIGHT: u32 = 0;

/// The container runtime's IP family for a Cluster (IPv4 when unknown).
///
/// # Errors
/// [`Error::ClusterNetwork`] when the Cluster's CIDR blocks are inconsistent.
pub fn ip_family(cluster: Option<&Cluster>) -> Result<IpFamily> {
    let Some(cluster) = cluster else {
        return Ok(IpFamily::V4);
    };
    match cluster.ip_family() {
        Ok(capi::IpFamily::IPv4) => Ok(IpFamily::V4),
        Ok(capi::IpFamily::IPv6) => Ok(IpFamily::V6),
        Ok(capi::IpFamily::Dual) => Ok(IpFamily::Dual),
        Err(source) => Err(Error::ClusterNetwork {
            namespace: cluster.metadata.namespace.clone().unwrap_or_default(),
            name: cluster.metadata.name.clone().unwrap_or_default(),
            source,
        }),
    }
}

/// The name of the Cluster a Machine belongs to (`spec.clusterName`, else its label).
pub fn machine_cluster(machine: &Machine) -> Option<&str> {
    Some(machine.spec.cluster_name.as_str())
        .filter(|n| !n.is_empty())
        .or_else(|| cluster_label(&machine.metadata))
}

/// Load balancer weights per control plane container name, from the cluster's control plane
/// Machines (CAPD's rule: 0 for a deleting Machine when more than one control plane exists).
pub fn weights<'a>(
    cluster: &str,
    control_planes: impl IntoIterator<Item = &'a Machine>,
) -> BTreeMap<String, u32> {
    let machines: Vec<&Machine> = control_planes.into_iter().collect();
    let several = machines.len() > 1;
    machines
        .into_iter()
        .filter_map(|m| {
            let name = m.metadata.name.as_deref()?;
            let weight = if several && is_deleting(&m.metadata) {
                DRAINED_WEIGHT
            } else {
                SERVING_WEIGHT
            };
            Some((machine_container_name(cluster, name), weight))
        })
        .collect()
}

/// The backends: each control plane container with an address on `network`, weighted from
/// `weights` (100 when its Machine is unknown), ordered by name.
pub fn backends(
    containers: &[ContainerInfo],
    network: &str,
    family: IpFamily,
    weights: &BTreeMap<String, u32>,
) -> Vec<Backend> {
    let mut out: Vec<Backend> = containers
        .iter()
        .filter_map(|c| {
            let address = endpoint_on_network(c, network).and_then(|ep| primary_ip(&ep, family))?;
            Some(Backend {
                name: c.name.clone(),
                address: address.to_string(),
                weight: weights.get(&c.name).copied().unwrap_or(SERVING_WEIGHT),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The control plane containers of a cluster, running or not.
///
/// # Errors
/// [`Error`] when the engine cannot list them.
pub async fn control_plane_containers(
    ctx: &Context,
    cluster_name: &str,
) -> Result<Vec<ContainerSummary>> {
    ctx.runtime
        .list_containers(&role_selector(cluster_name, NodeRole::ControlPlane))
        .await
        .map_err(Error::runtime(format!(
            "list control plane containers of cluster {cluster_name}"
        )))
}

/// Renders the backends of `cluster` into its load balancer and reloads haproxy when the
/// configuration changed.
///
/// # Errors
/// [`Error`] when the containers cannot be listed, the template is unusable or the load balancer
/// refuses the configuration.
pub async fn sync_backends(
    ctx: &Context,
    namespace: &str,
    cluster_name: &str,
    cluster: Option<&Cluster>,
    docker_cluster: Option<&DockerCluster>,
) -> Result<ApplyOutcome> {
    let family = ip_family(cluster)?;
    let network = ctx.network();
    let lock = ctx.load_balancer_locks.lock_for(namespace, cluster_name);
    let _serialized = lock.lock().await;
    let control_planes: Vec<Machine> = ctx
        .stores
        .machines
        .state()
        .iter()
        .filter_map(|guarded| guarded.0.as_ref().ok())
        .filter(|m| {
            m.metadata.namespace.as_deref() == Some(namespace)
                && machine_cluster(m) == Some(cluster_name)
                && m.is_control_plane()
        })
        .cloned()
        .collect();
    let weights = weights(cluster_name, &control_planes);

    let summaries = control_plane_containers(ctx, cluster_name).await?;
    let mut containers = Vec::new();
    for summary in summaries.iter().filter(|s| s.running) {
        if let Some(info) =
            ctx.runtime
                .inspect_container(&summary.name)
                .await
                .map_err(Error::runtime(format!(
                    "inspect container {}",
                    summary.name
                )))?
        {
            containers.push(info);
        }
    }
    let template = custom_template(ctx, namespace, docker_cluster).await?;
    let frontend_port = docker_cluster
        .and_then(|dc| u16::try_from(dc.spec.control_plane_endpoint.port).ok())
        .unwrap_or(0);
    let data = ConfigData {
        frontend_port,
        backends: backends(&containers, network, family, &weights),
        ipv6: family == IpFamily::V6,
    };
    let config = render_config(&data, template.as_deref()).map_err(|e| {
        Error::LoadBalancer(crate::docker::loadbalancer::LoadBalancerError::Template(e))
    })?;
    let outcome = apply_config(
        ctx.runtime.as_ref(),
        &load_balancer_container_name(cluster_name),
        &config,
    )
    .await?;
    if outcome != ApplyOutcome::Unchanged {
        tracing::info!(
            cluster = cluster_name,
            namespace,
            backends = data.backends.len(),
            "Updated the load balancer configuration"
        );
    }
    Ok(outcome)
}

/// The user's haproxy template (ConfigMap key `value`), when the DockerCluster names one.
async fn custom_template(
    ctx: &Context,
    namespace: &str,
    docker_cluster: Option<&DockerCluster>,
) -> Result<Option<String>> {
    let Some(reference) = docker_cluster
        .and_then(|dc| {
            dc.spec
                .load_balancer
                .custom_haproxy_config_template_ref
                .as_ref()
        })
        .filter(|r| !r.name.is_empty())
    else {
        return Ok(None);
    };
    let config_map = ctx
        .api::<ConfigMap>(namespace)
        .get(&reference.name)
        .await
        .map_err(Error::kube(format!(
            "get haproxy template ConfigMap {namespace}/{}",
            reference.name
        )))?;
    config_map
        .data
        .and_then(|mut d| d.remove("value"))
        .map(Some)
        .ok_or_else(|| Error::HaproxyTemplateKey {
            namespace: namespace.to_string(),
            name: reference.name.clone(),
        })
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::controllers::fixtures::*;
    use crate::docker::types::EndpointAddresses;

    fn container(name: &str, ip: [u8; 4]) -> ContainerInfo {
        ContainerInfo {
            name: name.into(),
            running: true,
            networks: [(
                "kind".to_string(),
                EndpointAddresses {
                    ipv4: Some(Ipv4Addr::from(ip)),
                    ipv6: None,
                },
            )]
            .into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_deleting_control_plane_is_drained_only_when_another_remains() {
        let cp1 = Machine::test("cp1").control_plane();
        let cp2 = Machine::test("cp2").control_plane().deleting();
        let both = weights("c1", [&cp1, &cp2]);
        assert_eq!(both.get("c1-cp1"), Some(&100));
        assert_eq!(both.get("c1-cp2"), Some(&0));
        let last = weights("c1", [&cp2]);
        assert_eq!(
            last.get("c1-cp2"),
            Some(&100),
            "the last control plane keeps serving"
        );
    }

    #[test]
    fn backends_use_the_address_on_the_provider_network() {
        let containers = [
            container("c1-cp2", [172, 18, 0, 4]),
            container("c1-cp1", [172, 18, 0, 3]),
            ContainerInfo {
                name: "c1-cp3".into(),
                ..Default::default()
            },
        ];
        let weights = BTreeMap::from([("c1-cp2".to_string(), 0)]);
        let got = backends(&containers, "kind", IpFamily::V4, &weights);
        assert_eq!(
            got,
            vec![
                Backend {
                    name: "c1-cp1".into(),
                    address: "172.18.0.3".into(),
                    weight: 100
                },
                Backend {
                    name: "c1-cp2".into(),
                    address: "172.18.0.4".into(),
                    weight: 0
                },
            ],
            "containers without an address are left out"
        );
    }

    #[test]
    fn ip_family_follows_the_cluster_network() {
        assert_eq!(ip_family(None).unwrap(), IpFamily::V4);
        let v6 = Cluster::test("c1")
            .pods(&["fd00::/48"])
            .services(&["fd01::/108"]);
        assert_eq!(ip_family(Some(&v6)).unwrap(), IpFamily::V6);
        let bad = Cluster::test("c1")
            .pods(&["10.0.0.0/8"])
            .services(&["fd01::/108"]);
        assert!(matches!(
            ip_family(Some(&bad)),
            Err(Error::ClusterNetwork { .. })
        ));
    }
}
