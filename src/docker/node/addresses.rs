//! IP family of a cluster and the addresses reported for a machine (pure).

use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::error::NodeError;
use crate::docker::types::{ContainerInfo, EndpointAddresses};

/// IP family of a cluster, from its pod and service CIDRs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// IPv4 only (also when no CIDR is set).
    #[default]
    V4,
    /// IPv6 only.
    V6,
    /// Both.
    Dual,
}

fn family_of(cidrs: &[String], what: &str) -> Result<Option<IpFamily>, NodeError> {
    if cidrs.len() > 2 {
        return Err(NodeError::InvalidClusterNetwork {
            detail: format!("{what}: too many CIDRs specified"),
        });
    }
    let mut v4 = false;
    let mut v6 = false;
    for cidr in cidrs {
        let net: IpNetwork = cidr
            .trim()
            .parse()
            .map_err(|_| NodeError::InvalidClusterNetwork {
                detail: format!("{what}: could not parse CIDR {cidr:?}"),
            })?;
        match net {
            IpNetwork::V4(_) => v4 = true,
            IpNetwork::V6(_) => v6 = true,
        }
    }
    Ok(match (v4, v6) {
        (true, true) => Some(IpFamily::Dual),
        (true, false) => Some(IpFamily::V4),
        (false, true) => Some(IpFamily::V6),
        (false, false) => None,
    })
}

/// The cluster's IP family from `spec.clusterNetwork.pods.cidrBlocks` and `services.cidrBlocks`,
/// as Cluster API decides it: none → IPv4; otherwise both lists must agree unless pods are
/// dual-stack; more than two CIDRs in a list is invalid.
///
/// # Errors
/// [`NodeError::InvalidClusterNetwork`] for unparsable CIDRs, too many CIDRs, or mismatching families.
pub fn ip_family_from_cidrs(pods: &[String], services: &[String]) -> Result<IpFamily, NodeError> {
    let pods_family = family_of(pods, "pods")?;
    let services_family = family_of(services, "services")?;
    Ok(match (pods_family, services_family) {
        (None, None) => IpFamily::V4,
        (Some(p), None) => p,
        (None, Some(s)) => s,
        (Some(IpFamily::Dual), Some(_)) => IpFamily::Dual,
        (Some(p), Some(s)) if p == s => p,
        (Some(_), Some(_)) => {
            return Err(NodeError::InvalidClusterNetwork {
                detail: "pods and services IP family mismatch".to_string(),
            });
        }
    })
}

/// Kind of a machine address (Cluster API `MachineAddressType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressType {
    /// `Hostname`.
    Hostname,
    /// `InternalIP`.
    InternalIp,
    /// `ExternalIP`.
    ExternalIp,
}

impl AddressType {
    /// The Cluster API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressType::Hostname => "Hostname",
            AddressType::InternalIp => "InternalIP",
            AddressType::ExternalIp => "ExternalIP",
        }
    }
}

/// One machine address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineAddress {
    /// Address type.
    pub kind: AddressType,
    /// Address text.
    pub address: String,
}

/// A container's addresses on `network` (never those of another network it is attached to).
pub fn endpoint_on_network(info: &ContainerInfo, network: &str) -> Option<EndpointAddresses> {
    info.networks.get(network).copied()
}

/// The IP the cluster uses for a container: IPv6 for IPv6-only clusters, else IPv4.
pub fn primary_ip(endpoint: &EndpointAddresses, family: IpFamily) -> Option<IpAddr> {
    match family {
        IpFamily::V6 => endpoint.ipv6.map(IpAddr::V6),
        IpFamily::V4 | IpFamily::Dual => endpoint.ipv4.map(IpAddr::V4),
    }
}

/// Addresses of a machine: `Hostname` = container name, then per IP (IPv4 first) an
/// `InternalIP` and an `ExternalIP`.
///
/// # Errors
/// [`NodeError::MissingAddress`] when the container lacks an address the family needs.
pub fn machine_addresses(
    container: &str,
    endpoint: &EndpointAddresses,
    family: IpFamily,
) -> Result<Vec<MachineAddress>, NodeError> {
    let missing = |family: &str| NodeError::MissingAddress {
        container: container.to_string(),
        family: family.to_string(),
    };
    let ips: Vec<IpAddr> = match family {
        IpFamily::V4 => vec![IpAddr::V4(endpoint.ipv4.ok_or_else(|| missing("IPv4"))?)],
        IpFamily::V6 => vec![IpAddr::V6(endpoint.ipv6.ok_or_else(|| missing("IPv6"))?)],
        IpFamily::Dual => vec![
            IpAddr::V4(endpoint.ipv4.ok_or_else(|| missing("IPv4"))?),
            IpAddr::V6(endpoint.ipv6.ok_or_else(|| missing("IPv6"))?),
        ],
    };
    let mut out = vec![MachineAddress {
        kind: AddressType::Hostname,
        address: container.to_string(),
    }];
    for ip in ips {
        for kind in [AddressType::InternalIp, AddressType::ExternalIp] {
            out.push(MachineAddress {
                kind,
                address: ip.to_string(),
            });
        }
    }
    Ok(out)
}
