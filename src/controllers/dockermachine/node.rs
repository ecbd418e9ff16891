//! Standing in for a cloud controller manager: the workload cluster's Node named after the
//! container gets our `spec.providerID`; in external cloud-provider mode (the Node carries the
//! `node.cloudprovider.kubernetes.io/uninitialized` taint) it also gets the machine's InternalIP
//! addresses and loses the taint.

use k8s_openapi::api::core::v1::{Node, NodeAddress, Taint};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use crate::api::v1beta2::{MachineAddress, MachineAddressType};
use crate::controllers::apply::FIELD_MANAGER;
use crate::controllers::error::{Error, Result};

/// The taint kubelet sets in external cloud-provider mode until a cloud provider initializes the
/// Node.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// What to change on a Node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeChange {
    /// The provider ID to set (the Node has none).
    pub provider_id: Option<String>,
    /// The taints to keep, when the uninitialized taint must go.
    pub taints: Option<Vec<Taint>>,
    /// The full address list, when addresses must be added.
    pub addresses: Option<Vec<NodeAddress>>,
}

fn is_uninitialized(taint: &Taint) -> bool {
    taint.key == UNINITIALIZED_TAINT && taint.effect == "NoSchedule"
}

/// The change a Node needs, or `None` when it already has a provider ID and no uninitialized
/// taint.
pub fn node_change(
    node: &Node,
    provider_id: &str,
    machine_addresses: &[MachineAddress],
) -> Option<NodeChange> {
    let spec = node.spec.clone().unwrap_or_default();
    let current_id = spec.provider_id.unwrap_or_default();
    let taints = spec.taints.unwrap_or_default();
    let tainted = taints.iter().any(is_uninitialized);
    if !current_id.is_empty() && !tainted {
        return None;
    }
    let mut change = NodeChange::default();
    if current_id.is_empty() {
        change.provider_id = Some(provider_id.to_string());
    }
    if tainted {
        change.taints = Some(
            taints
                .into_iter()
                .filter(|t| !is_uninitialized(t))
                .collect(),
        );
        let mut addresses = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default();
        let before = addresses.len();
        for address in machine_addresses
            .iter()
            .filter(|a| a.type_ == MachineAddressType::InternalIP)
        {
            let present = addresses
                .iter()
                .any(|n| n.type_ == "InternalIP" && n.address == address.address);
            if !present {
                addresses.push(NodeAddress {
                    type_: "InternalIP".to_string(),
                    address: address.address.clone(),
                });
            }
        }
        if addresses.len() != before {
            change.addresses = Some(addresses);
        }
    }
    Some(change)
}

/// The provider ID a Node carries when it is set and not ours. A Node's provider ID can only go
/// from empty to a value (kube-apiserver refuses any other change), so such a Node is not ours to
/// initialize.
pub fn foreign_provider_id(node: &Node, ours: &str) -> Option<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .filter(|id| !id.is_empty() && id != ours)
}

/// What [`sync_node`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeSync {
    /// The Node has not registered yet.
    Missing,
    /// The Node was already right.
    Unchanged,
    /// The Node was patched.
    Patched,
    /// The Node carries another provider ID (this one); it was left alone.
    ForeignProviderId(String),
}

/// Reads the Node `name` in the workload cluster and applies [`node_change`], unless the Node
/// carries another provider ID.
///
/// # Errors
/// [`Error::Kube`] when the workload API server refuses.
pub async fn sync_node(
    client: Client,
    name: &str,
    provider_id: &str,
    machine_addresses: &[MachineAddress],
) -> Result<NodeSync> {
    let nodes: Api<Node> = Api::all(client);
    let Some(node) = nodes.get_opt(name).await.map_err(Error::kube(format!(
        "get Node {name} in the workload cluster"
    )))?
    else {
        return Ok(NodeSync::Missing);
    };
    if let Some(theirs) = foreign_provider_id(&node, provider_id) {
        return Ok(NodeSync::ForeignProviderId(theirs));
    }
    let Some(change) = node_change(&node, provider_id, machine_addresses) else {
        return Ok(NodeSync::Unchanged);
    };
    apply_node_change(&nodes, &node, &change).await?;
    Ok(NodeSync::Patched)
}

/// Writes `change` to `node` as it was read. A write of `spec.taints` replaces the whole list, so
/// the writes that remove the uninitialized taint (the addresses first, as a cloud provider
/// initializes a Node, then the taints) carry the read's `resourceVersion`, each the one the
/// write before returned: a taint that Cluster API core (Machine taints, 1.13 and later) or
/// anyone else added since the read is never overwritten. The API server answers Conflict
/// instead, and the next pass reads the Node again.
async fn apply_node_change(nodes: &Api<Node>, node: &Node, change: &NodeChange) -> Result<()> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    // Named, so that the Node's managedFields say which fields the provider owns (kubelet owns
    // the rest).
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let mut version = node.metadata.resource_version.clone();
    if let Some(addresses) = &change.addresses {
        let body = json!({
            "metadata": {"resourceVersion": version},
            "status": {"addresses": addresses},
        });
        let patched = nodes
            .patch_status(name, &params, &Patch::Merge(body))
            .await
            .map_err(Error::kube(format!("patch the addresses of Node {name}")))?;
        version = patched.metadata.resource_version;
    }
    let mut spec = serde_json::Map::new();
    if let Some(id) = &change.provider_id {
        spec.insert("providerID".into(), json!(id));
    }
    let mut body = json!({});
    if let Some(taints) = &change.taints {
        spec.insert("taints".into(), json!(taints));
        body["metadata"] = json!({"resourceVersion": version});
    }
    if !spec.is_empty() {
        body["spec"] = json!(spec);
        nodes
            .patch(name, &params, &Patch::Merge(body))
            .await
            .map_err(Error::kube(format!("patch Node {name}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};

    use super::*;

    fn node(provider_id: &str, taints: Vec<Taint>, addresses: &[(&str, &str)]) -> Node {
        Node {
            spec: Some(NodeSpec {
                provider_id: Some(provider_id.to_string()).filter(|p| !p.is_empty()),
                taints: Some(taints),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(
                    addresses
                        .iter()
                        .map(|(t, a)| NodeAddress {
                            type_: t.to_string(),
                            address: a.to_string(),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn taint(key: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }
    }

    fn machine_addresses() -> Vec<MachineAddress> {
        vec![
            MachineAddress {
                type_: MachineAddressType::Hostname,
                address: "c1-m1".into(),
            },
            MachineAddress {
                type_: MachineAddressType::InternalIP,
                address: "172.18.0.5".into(),
            },
            MachineAddress {
                type_: MachineAddressType::ExternalIP,
                address: "172.18.0.5".into(),
            },
        ]
    }

    #[test]
    fn a_node_without_provider_id_gets_ours() {
        let change = node_change(
            &node("", vec![], &[]),
            "docker:////c1-m1",
            &machine_addresses(),
        );
        assert_eq!(
            change,
            Some(NodeChange {
                provider_id: Some("docker:////c1-m1".into()),
                ..Default::default()
            })
        );
    }

    #[test]
    fn an_initialized_node_is_left_alone() {
        assert_eq!(
            node_change(
                &node("docker:////c1-m1", vec![taint("other")], &[]),
                "docker:////c1-m1",
                &machine_addresses()
            ),
            None
        );
    }

    #[test]
    fn a_node_with_another_provider_id_is_foreign() {
        let ours = "docker:////c1-m1";
        let theirs = node(
            "docker:////elsewhere",
            vec![taint(UNINITIALIZED_TAINT)],
            &[],
        );
        assert_eq!(
            foreign_provider_id(&theirs, ours).as_deref(),
            Some("docker:////elsewhere")
        );
        assert_eq!(foreign_provider_id(&node(ours, vec![], &[]), ours), None);
        assert_eq!(foreign_provider_id(&node("", vec![], &[]), ours), None);
    }

    #[tokio::test]
    async fn sync_node_leaves_a_foreign_node_alone_and_initializes_ours() {
        use kube::api::PostParams;
        let (_server, client) = crate::controllers::fixtures::test_api_server().await;
        let nodes: Api<Node> = Api::all(client.clone());
        for (name, id) in [("c1-m1", ""), ("c1-m2", "docker:////elsewhere")] {
            let mut n = node(id, vec![taint(UNINITIALIZED_TAINT)], &[]);
            n.metadata.name = Some(name.into());
            nodes.create(&PostParams::default(), &n).await.unwrap();
        }
        let sync = |name: &'static str| {
            let client = client.clone();
            async move {
                let ours = format!("docker:////{name}");
                sync_node(client, name, &ours, &machine_addresses())
                    .await
                    .unwrap()
            }
        };

        for _ in 0..2 {
            assert_eq!(
                sync("c1-m2").await,
                NodeSync::ForeignProviderId("docker:////elsewhere".into())
            );
        }
        let foreign = nodes.get("c1-m2").await.unwrap().spec.unwrap();
        assert_eq!(foreign.provider_id.as_deref(), Some("docker:////elsewhere"));
        assert_eq!(foreign.taints.unwrap().len(), 1, "the Node is left alone");

        assert_eq!(sync("c1-m1").await, NodeSync::Patched);
        assert_eq!(sync("c1-m1").await, NodeSync::Unchanged);
        let ours = nodes.get("c1-m1").await.unwrap();
        assert_eq!(
            ours.spec.unwrap().provider_id.as_deref(),
            Some("docker:////c1-m1")
        );
        // Written under the provider's field manager (kubelet writes the rest of the Node).
        let owners: Vec<_> = ours
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter(|e| {
                e.fields_v1
                    .as_ref()
                    .is_some_and(|f| f.0["f:spec"].get("f:providerID").is_some())
            })
            .filter_map(|e| e.manager.as_deref())
            .collect();
        assert_eq!(owners, [FIELD_MANAGER]);
    }

    #[tokio::test]
    async fn removing_the_uninitialized_taint_never_overwrites_a_taint_added_since_the_read() {
        use kube::api::PostParams;
        let (_server, client) = crate::controllers::fixtures::test_api_server().await;
        let nodes: Api<Node> = Api::all(client.clone());
        let mut n = node("", vec![taint(UNINITIALIZED_TAINT)], &[]);
        n.metadata.name = Some("c1-m1".into());
        nodes.create(&PostParams::default(), &n).await.unwrap();
        let read = nodes.get("c1-m1").await.unwrap();
        let ours = "docker:////c1-m1";
        let change = node_change(&read, ours, &machine_addresses()).unwrap();

        // Core propagates a Machine taint between our read and our write.
        let tainted = json!({"spec": {"taints": [
            {"key": UNINITIALIZED_TAINT, "effect": "NoSchedule"},
            {"key": "example.com/core", "effect": "NoSchedule"},
        ]}});
        nodes
            .patch("c1-m1", &PatchParams::default(), &Patch::Merge(tainted))
            .await
            .unwrap();
        let stale = apply_node_change(&nodes, &read, &change).await;
        assert!(stale.is_err(), "a stale taint list is refused: {stale:?}");

        // The next pass reads the Node again and keeps core's taint.
        assert_eq!(
            sync_node(client.clone(), "c1-m1", ours, &machine_addresses())
                .await
                .unwrap(),
            NodeSync::Patched
        );
        let spec = nodes.get("c1-m1").await.unwrap().spec.unwrap();
        let keys: Vec<String> = spec.taints.unwrap().into_iter().map(|t| t.key).collect();
        assert_eq!(keys, ["example.com/core"]);
        assert_eq!(spec.provider_id.as_deref(), Some(ours));
    }

    #[test]
    fn external_cloud_provider_mode_adds_internal_ips_and_removes_the_taint() {
        let n = node(
            "",
            vec![taint(UNINITIALIZED_TAINT), taint("keep-me")],
            &[("Hostname", "c1-m1")],
        );
        let change = node_change(&n, "docker:////c1-m1", &machine_addresses()).unwrap();
        assert_eq!(
            change
                .taints
                .unwrap()
                .iter()
                .map(|t| t.key.as_str())
                .collect::<Vec<_>>(),
            ["keep-me"]
        );
        let addresses = change.addresses.unwrap();
        assert_eq!(addresses.len(), 2, "only the InternalIP is appended");
        assert_eq!(addresses[0].type_, "Hostname");
        assert_eq!(addresses[1].address, "172.18.0.5");
    }

    #[test]
    fn addresses_already_present_are_not_duplicated() {
        let n = node(
            "docker:////c1-m1",
            vec![taint(UNINITIALIZED_TAINT)],
            &[("InternalIP", "172.18.0.5")],
        );
        let change = node_change(&n, "docker:////c1-m1", &machine_addresses()).unwrap();
        assert_eq!(change.provider_id, None);
        assert_eq!(change.addresses, None);
        assert_eq!(change.taints, Some(vec![]));
    }
}
