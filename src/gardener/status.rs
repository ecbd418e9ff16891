//! What the extension publishes: `status.providerStatus` ([`InfrastructureStatus`]),
//! `status.nodesCIDR` and `status.state` ([`InfrastructureState`]), built from the Docker network
//! (pure).

use std::net::IpAddr;

use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::API_VERSION;
use super::config::NetworkPlan;
use crate::docker::NetworkInfo;

/// `kind` of [`InfrastructureStatus`].
pub const STATUS_KIND: &str = "InfrastructureStatus";

/// `kind` of [`InfrastructureState`].
pub const STATE_KIND: &str = "InfrastructureState";

/// `status.providerStatus` of an `Infrastructure` of type `docker`: the network the Worker
/// controller attaches node containers to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureStatus {
    /// `docker.provider.extensions.gardener.cloud/v1alpha1`.
    pub api_version: String,
    /// `InfrastructureStatus`.
    pub kind: String,
    /// The nodes network.
    pub network: NetworkStatus,
}

/// The nodes network as the Docker engine reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// Docker network name.
    pub name: String,
    /// Docker network id.
    pub id: String,
    /// Whether the extension created the network for this `Infrastructure` (then it is removed
    /// with it); an adopted network is never removed.
    pub managed: bool,
    /// Subnets, IPv4 first.
    #[serde(default)]
    pub subnets: Vec<SubnetStatus>,
}

/// One subnet of the nodes network.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    /// `IPv4` or `IPv6`.
    pub ip_family: String,
    /// The subnet, for example `10.213.0.0/24`.
    pub cidr: String,
    /// The gateway address of the subnet (Docker's default, the first address, when the engine
    /// does not report one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

/// `status.state` of an `Infrastructure` of type `docker`: what another seed needs to adopt the
/// Docker resources after a control plane migration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureState {
    /// `docker.provider.extensions.gardener.cloud/v1alpha1`.
    pub api_version: String,
    /// `InfrastructureState`.
    pub kind: String,
    /// The network to adopt.
    pub network: NetworkState,
}

/// The network recorded for a migration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkState {
    /// Docker network name.
    pub name: String,
    /// Docker network id when it was recorded.
    pub id: String,
    /// Whether the extension created it for this `Infrastructure`.
    pub managed: bool,
}

impl InfrastructureStatus {
    /// The provider status of `network`; `managed` says whether we created it for this object.
    pub fn of(network: &NetworkInfo, managed: bool) -> Self {
        let mut subnets: Vec<&IpNetwork> = network.subnets.iter().collect();
        // Stable: IPv4 first, engine order within a family.
        subnets.sort_by_key(|s| s.is_ipv6());
        let subnets = subnets
            .into_iter()
            .map(|subnet| SubnetStatus {
                ip_family: if subnet.is_ipv4() { "IPv4" } else { "IPv6" }.to_string(),
                cidr: subnet.to_string(),
                gateway: gateway_in(subnet, &network.gateways).map(|g| g.to_string()),
            })
            .collect();
        Self {
            api_version: API_VERSION.to_string(),
            kind: STATUS_KIND.to_string(),
            network: NetworkStatus {
                name: network.name.clone(),
                id: network.id.clone(),
                managed,
                subnets,
            },
        }
    }

    /// Decodes a `status.providerStatus`; `None` when absent or not ours.
    pub fn from_value(value: Option<&Value>) -> Option<Self> {
        value
            .and_then(|v| serde_json::from_value::<Self>(v.clone()).ok())
            .filter(|s| s.api_version == API_VERSION && s.kind == STATUS_KIND)
    }

    /// The state to record for a migration.
    pub fn state(&self) -> InfrastructureState {
        InfrastructureState {
            api_version: API_VERSION.to_string(),
            kind: STATE_KIND.to_string(),
            network: NetworkState {
                name: self.network.name.clone(),
                id: self.network.id.clone(),
                managed: self.network.managed,
            },
        }
    }
}

impl InfrastructureState {
    /// Decodes a `status.state`; `None` when absent or not ours.
    pub fn from_value(value: Option<&Value>) -> Option<Self> {
        value
            .and_then(|v| serde_json::from_value::<Self>(v.clone()).ok())
            .filter(|s| s.api_version == API_VERSION && s.kind == STATE_KIND)
    }
}

/// The gateway among `gateways` that lies in `subnet`, else the first address of the subnet:
/// Docker's default IPAM gives that one but does not report it for subnets set at creation.
fn gateway_in(subnet: &IpNetwork, gateways: &[IpAddr]) -> Option<IpAddr> {
    gateways
        .iter()
        .copied()
        .find(|g| subnet.contains(*g))
        .or_else(|| match subnet {
            IpNetwork::V4(net) => net.nth(1).map(IpAddr::V4),
            IpNetwork::V6(net) => Some(IpAddr::V6((u128::from(net.network()) + 1).into())),
        })
}

/// `status.nodesCIDR`: the configured IPv4 subnet, else the network's first IPv4 subnet.
pub fn nodes_cidr(network: &NetworkInfo, plan: &NetworkPlan) -> Option<String> {
    match plan.ipv4 {
        Some(cidr) => Some(cidr.to_string()),
        None => network
            .subnets
            .iter()
            .find(|s| s.is_ipv4())
            .map(ToString::to_string),
    }
}

/// What a successful reconcile publishes besides `lastOperation`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Published {
    /// `status.providerStatus`.
    pub provider_status: Option<Value>,
    /// `status.nodesCIDR`.
    pub nodes_cidr: Option<String>,
    /// `status.state`.
    pub state: Option<Value>,
    /// `status.networking.nodes`: every subnet of the network, IPv4 first.
    pub nodes: Vec<String>,
}

impl Published {
    /// The fields published for `network`.
    pub fn of(network: &NetworkInfo, managed: bool, plan: &NetworkPlan) -> Self {
        let status = InfrastructureStatus::of(network, managed);
        Self {
            provider_status: serde_json::to_value(&status).ok(),
            nodes_cidr: nodes_cidr(network, plan),
            state: serde_json::to_value(status.state()).ok(),
            nodes: status
                .network
                .subnets
                .iter()
                .map(|s| s.cidr.clone())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gardener::config::Ipv6Plan;

    fn network() -> NetworkInfo {
        NetworkInfo {
            id: "net-id".into(),
            name: "gardener-shoot--a--b-b".into(),
            driver: "bridge".into(),
            enable_ipv6: true,
            subnets: vec![
                "fc00:1::/64".parse().unwrap(),
                "10.213.4.0/24".parse().unwrap(),
            ],
            gateways: vec!["10.213.4.1".parse().unwrap(), "fc00:1::1".parse().unwrap()],
            ..Default::default()
        }
    }

    fn plan(ipv4: Option<&str>) -> NetworkPlan {
        NetworkPlan {
            name: "n".into(),
            ipv4: ipv4.map(|c| c.parse().unwrap()),
            ipv6: Ipv6Plan::Disabled,
        }
    }

    #[test]
    fn provider_status_lists_ipv4_first_with_gateways() {
        let status = InfrastructureStatus::of(&network(), true);
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            serde_json::json!({
                "apiVersion": "docker.provider.extensions.gardener.cloud/v1alpha1",
                "kind": "InfrastructureStatus",
                "network": {
                    "name": "gardener-shoot--a--b-b",
                    "id": "net-id",
                    "managed": true,
                    "subnets": [
                        {"ipFamily": "IPv4", "cidr": "10.213.4.0/24", "gateway": "10.213.4.1"},
                        {"ipFamily": "IPv6", "cidr": "fc00:1::/64", "gateway": "fc00:1::1"},
                    ],
                },
            })
        );
    }

    #[test]
    fn unreported_gateways_are_the_first_address() {
        let set_at_creation = NetworkInfo {
            gateways: Vec::new(),
            ..network()
        };
        let status = InfrastructureStatus::of(&set_at_creation, false);
        let gateways: Vec<Option<&str>> = status
            .network
            .subnets
            .iter()
            .map(|s| s.gateway.as_deref())
            .collect();
        assert_eq!(gateways, [Some("10.213.4.1"), Some("fc00:1::1")]);
        assert!(!status.network.managed);
    }

    #[test]
    fn nodes_cidr_is_the_ipv4_subnet() {
        assert_eq!(
            nodes_cidr(&network(), &plan(None)).as_deref(),
            Some("10.213.4.0/24")
        );
        let v6_only = NetworkInfo {
            subnets: vec!["fc00:1::/64".parse().unwrap()],
            ..network()
        };
        assert_eq!(nodes_cidr(&v6_only, &plan(None)), None);
        assert_eq!(
            nodes_cidr(&network(), &plan(Some("10.213.4.0/24"))).as_deref(),
            Some("10.213.4.0/24")
        );
    }

    #[test]
    fn networking_nodes_lists_every_family_ipv4_first() {
        let published = Published::of(&network(), true, &plan(None));
        assert_eq!(published.nodes, ["10.213.4.0/24", "fc00:1::/64"]);
    }

    #[test]
    fn state_round_trips_and_foreign_values_are_ignored() {
        let published = Published::of(&network(), true, &plan(None));
        let state = InfrastructureState::from_value(published.state.as_ref()).unwrap();
        assert_eq!(state.network.name, "gardener-shoot--a--b-b");
        assert_eq!(state.network.id, "net-id");
        assert!(state.network.managed);
        let status = InfrastructureStatus::from_value(published.provider_status.as_ref()).unwrap();
        assert_eq!(status.state(), state);

        let terraform = serde_json::json!({"version": 3, "serial": 2});
        assert_eq!(InfrastructureState::from_value(Some(&terraform)), None);
        assert_eq!(InfrastructureStatus::from_value(None), None);
    }
}
