//! The Docker side: create or adopt the nodes network of an `Infrastructure`, and remove it when
//! (and only when) we created it for that `Infrastructure` and no container uses it.
//!
//! Networks we create carry the provider's created-by label plus [`NAMESPACE_LABEL`] and
//! [`NAME_LABEL`] naming the `Infrastructure`; these labels, not the status, decide ownership, so
//! a restore in another seed (same namespace and name) finds its network again.

use ipnetwork::IpNetwork;

use super::config::{Ipv6Plan, NetworkPlan};
use super::error::Error;
use super::{NAME_LABEL, NAMESPACE_LABEL};
use crate::docker::network::{
    NetworkDeletion, default_bridge_mtu, delete_network, desired_network, is_ours, ula_subnet,
};
use crate::docker::{ContainerRuntime, Labels, NetworkInfo, RuntimeError};

/// Number of derived IPv6 subnets tried (as kind).
const IPV6_ATTEMPTS: u32 = 5;

/// The `Infrastructure` a network belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner<'a> {
    /// Namespace of the `Infrastructure` (the shoot namespace in the seed).
    pub namespace: &'a str,
    /// Name of the `Infrastructure`.
    pub name: &'a str,
}

impl Owner<'_> {
    /// The Docker labels put on networks created for this owner.
    pub fn labels(&self) -> Labels {
        Labels::from([
            (NAMESPACE_LABEL.to_string(), self.namespace.to_string()),
            (NAME_LABEL.to_string(), self.name.to_string()),
        ])
    }

    /// Whether `network` was created by this provider for this owner.
    pub fn owns(&self, network: &NetworkInfo) -> bool {
        is_ours(network)
            && network.labels.get(NAMESPACE_LABEL).map(String::as_str) == Some(self.namespace)
            && network.labels.get(NAME_LABEL).map(String::as_str) == Some(self.name)
    }
}

/// How the network came to be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetworkAction {
    /// It existed and matched the configuration.
    Adopted,
    /// It was missing and we created it.
    Created,
    /// It was ours, unused and no longer matched the configuration, so we created it again.
    Recreated,
}

/// The network in use after [`ensure`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ensured {
    /// The network as the engine reports it.
    pub network: NetworkInfo,
    /// What [`ensure`] did.
    pub action: NetworkAction,
    /// Whether we created it for this owner.
    pub managed: bool,
}

/// Why an existing network does not fit `plan` (empty when it fits). Pure.
pub fn mismatches(network: &NetworkInfo, plan: &NetworkPlan) -> Vec<String> {
    let mut problems = Vec::new();
    if network.driver != "bridge" {
        problems.push(format!(
            "its driver is {:?}, nodes need a bridge network",
            network.driver
        ));
    }
    if let Some(cidr) = plan.ipv4
        && !network.subnets.contains(&IpNetwork::V4(cidr))
    {
        problems.push(format!(
            "it has subnets {}, not {cidr}",
            list(&network.subnets)
        ));
    }
    match plan.ipv6 {
        Ipv6Plan::Disabled => {}
        Ipv6Plan::Derived if !network.enable_ipv6 => {
            problems.push("it has no IPv6, but ipv6 is enabled".to_string());
        }
        Ipv6Plan::Derived => {}
        Ipv6Plan::Subnet(cidr) => {
            if !network.enable_ipv6 || !network.subnets.contains(&IpNetwork::V6(cidr)) {
                problems.push(format!(
                    "it has subnets {}, not the IPv6 subnet {cidr}",
                    list(&network.subnets)
                ));
            }
        }
    }
    problems
}

fn list(subnets: &[IpNetwork]) -> String {
    if subnets.is_empty() {
        return "(none)".to_string();
    }
    subnets
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

async fn inspect(runtime: &dyn ContainerRuntime, name: &str) -> Result<Option<NetworkInfo>, Error> {
    runtime
        .inspect_network(name)
        .await
        .map_err(Error::docker(format!("inspect network {name}")))
}

/// Makes sure the network of `plan` exists and fits it: adopts a fitting network, creates a
/// missing one, recreates one of ours that no longer fits while no container uses it.
///
/// # Errors
/// A configuration problem ([`Error::NetworkMismatch`], [`Error::SubnetOverlap`],
/// [`Error::Ipv6Unavailable`], retryable when it can heal by itself) when the engine cannot give
/// what the configuration asks, or [`Error::Docker`] when the engine fails.
pub async fn ensure(
    runtime: &dyn ContainerRuntime,
    plan: &NetworkPlan,
    owner: Owner<'_>,
) -> Result<Ensured, Error> {
    let mut action = NetworkAction::Created;
    if let Some(existing) = inspect(runtime, &plan.name).await? {
        let problems = mismatches(&existing, plan);
        let managed = owner.owns(&existing);
        if problems.is_empty() {
            return Ok(Ensured {
                network: existing,
                action: NetworkAction::Adopted,
                managed,
            });
        }
        if !managed || !existing.containers.is_empty() {
            return Err(Error::NetworkMismatch {
                name: plan.name.clone(),
                problems,
                managed,
                attached: existing.containers.len(),
            });
        }
        tracing::info!(network = %plan.name, problems = %problems.join("; "), "Recreating our network to match the configuration");
        runtime
            .remove_network(&existing.id)
            .await
            .map_err(Error::docker(format!("remove network {}", plan.name)))?;
        action = NetworkAction::Recreated;
    }
    let network = create(runtime, plan, owner).await?;
    Ok(Ensured {
        managed: owner.owns(&network),
        network,
        action,
    })
}

/// Creates the network of `plan`, labelled for `owner`, with kind's options.
async fn create(
    runtime: &dyn ContainerRuntime,
    plan: &NetworkPlan,
    owner: Owner<'_>,
) -> Result<NetworkInfo, Error> {
    let mtu = default_bridge_mtu(runtime).await?;
    let labels = owner.labels();
    let attempts = match plan.ipv6 {
        Ipv6Plan::Disabled => vec![None],
        Ipv6Plan::Subnet(cidr) => vec![Some(cidr)],
        Ipv6Plan::Derived => (0..IPV6_ATTEMPTS)
            .map(|attempt| Some(ula_subnet(&plan.name, attempt)))
            .collect(),
    };
    let mut created = false;
    for ipv6 in attempts {
        let mut spec = desired_network(&runtime.engine(), &plan.name, mtu, ipv6, &labels);
        spec.subnets.extend(plan.ipv4.map(IpNetwork::V4));
        match runtime.create_network(&spec).await {
            // A conflict: created meanwhile (a previous answer was lost); checked below.
            Ok(_) => {
                created = true;
                break;
            }
            Err(e) if e.is_conflict() => {
                created = true;
                break;
            }
            Err(e) if e.is_ipv6_unavailable() && ipv6.is_some() => {
                return Err(Error::Ipv6Unavailable {
                    name: plan.name.clone(),
                });
            }
            Err(e) if e.is_pool_overlap() => {
                if let Some(cidr) = plan.ipv4
                    && let Some(other) = overlapping(runtime, &[IpNetwork::V4(cidr)]).await
                {
                    return Err(Error::SubnetOverlap {
                        name: plan.name.clone(),
                        subnet: cidr.to_string(),
                        other_ours: is_ours(&other),
                        other: Some(other.name),
                    });
                }
                let derived_clash = match (&plan.ipv6, ipv6) {
                    (Ipv6Plan::Derived, Some(v6)) => {
                        overlapping(runtime, &[IpNetwork::V6(v6)]).await.is_some()
                    }
                    _ => false,
                };
                if !derived_clash {
                    return Err(overlap_error(runtime, plan, &spec.subnets).await);
                }
                tracing::info!(network = %plan.name, "Derived IPv6 subnet in use, trying the next one");
            }
            Err(e) => {
                return Err(Error::docker(format!("create network {}", plan.name))(e));
            }
        }
    }
    if !created {
        return Err(Error::Ipv6Exhausted {
            name: plan.name.clone(),
        });
    }
    let created = inspect(runtime, &plan.name).await?;
    let network = created.ok_or_else(|| {
        Error::docker(format!("create network {}", plan.name))(RuntimeError::InvalidResponse {
            action: format!("inspect network {} after creating it", plan.name),
            detail: "the network is missing".to_string(),
        })
    })?;
    let problems = mismatches(&network, plan);
    if !problems.is_empty() {
        return Err(Error::NetworkMismatch {
            name: plan.name.clone(),
            problems,
            managed: owner.owns(&network),
            attached: network.containers.len(),
        });
    }
    Ok(network)
}

/// A network whose subnets overlap one of `subnets`, if any.
async fn overlapping(runtime: &dyn ContainerRuntime, subnets: &[IpNetwork]) -> Option<NetworkInfo> {
    let networks = runtime.list_networks(&Labels::new()).await.ok()?;
    networks.into_iter().find(|n| {
        n.subnets
            .iter()
            .any(|theirs| subnets.iter().any(|ours| overlaps(ours, theirs)))
    })
}

fn overlaps(a: &IpNetwork, b: &IpNetwork) -> bool {
    a.contains(b.network()) || b.contains(a.network())
}

/// The configuration problem for a subnet overlap, naming the network in the way.
async fn overlap_error(
    runtime: &dyn ContainerRuntime,
    plan: &NetworkPlan,
    subnets: &[IpNetwork],
) -> Error {
    for subnet in subnets {
        if let Some(other) = overlapping(runtime, std::slice::from_ref(subnet)).await {
            return Error::SubnetOverlap {
                name: plan.name.clone(),
                subnet: subnet.to_string(),
                other_ours: is_ours(&other),
                other: Some(other.name),
            };
        }
    }
    Error::SubnetOverlap {
        name: plan.name.clone(),
        subnet: list(subnets),
        other: None,
        other_ours: false,
    }
}

/// What [`remove_if_owned`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The network was removed.
    Removed,
    /// There was no such network.
    Absent,
    /// The network was not created for this owner and was left alone.
    NotOwned,
}

/// Removes the network `name` if it was created for `owner` and no container uses it.
///
/// # Errors
/// [`Error::NetworkInUse`] while containers are attached; [`Error::Docker`] or
/// [`Error::Network`] when the engine fails.
pub async fn remove_if_owned(
    runtime: &dyn ContainerRuntime,
    name: &str,
    owner: Owner<'_>,
) -> Result<Removal, Error> {
    let Some(network) = inspect(runtime, name).await? else {
        return Ok(Removal::Absent);
    };
    if !owner.owns(&network) {
        return Ok(Removal::NotOwned);
    }
    match delete_network(runtime, &network.id).await? {
        NetworkDeletion::Removed => Ok(Removal::Removed),
        NetworkDeletion::Absent => Ok(Removal::Absent),
        NetworkDeletion::KeptForeign => Ok(Removal::NotOwned),
        NetworkDeletion::KeptInUse(containers) => Err(Error::NetworkInUse {
            name: name.to_string(),
            containers: containers.len(),
        }),
    }
}

#[cfg(test)]
#[path = "network_tests.rs"]
mod tests;
