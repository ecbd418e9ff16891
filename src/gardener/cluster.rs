//! A read view of Gardener's `Cluster` (`extensions.gardener.cloud/v1alpha1`, cluster-scoped,
//! named after the shoot's namespace in the seed) and of the few fields of the `Shoot` embedded in
//! it that this extension acts on, as Gardener's `GetCluster` reads them
//! (gardener/gardener `pkg/extensions/cluster.go`).
//!
//! - `status.lastOperation.state: Failed`: the shoot failed, nothing is done
//!   (`extensions/pkg/controller/shoot.go`, `IsShootFailed`).
//! - `metadata.annotations["confirmation.gardener.cloud/force-deletion"]`: the deletion is forced
//!   (`ShootNeedsForceDeletion`).
//! - `spec.networking.nodes` and `spec.networking.ipFamilies`: defaults of the nodes network.

use std::collections::BTreeMap;

use kube::{Api, Client, CustomResource};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::FORCE_DELETION_ANNOTATION;
use super::config::ShootNetwork;
use super::error::Error;
use crate::runtime::error_chain;

/// `spec` of a `Cluster`: the Shoot, Seed and CloudProfile, each embedded whole as raw JSON.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "extensions.gardener.cloud",
    version = "v1alpha1",
    kind = "Cluster",
    plural = "clusters",
    schema = "disabled",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// The `Shoot` (`core.gardener.cloud/v1beta1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shoot: Option<Value>,
    /// The `Seed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<Value>,
    /// The `CloudProfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_profile: Option<Value>,
}

/// The fields of a `Shoot` this extension reads; every other field is ignored.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Shoot {
    /// Metadata: only the annotations.
    #[serde(default)]
    pub metadata: ShootMetadata,
    /// Spec: only the networking.
    #[serde(default)]
    pub spec: ShootSpec,
    /// Status: only the last operation.
    #[serde(default)]
    pub status: ShootStatus,
}

/// The Shoot's annotations.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ShootMetadata {
    /// `metadata.annotations`.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// The Shoot's spec.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ShootSpec {
    /// `spec.networking`.
    #[serde(default)]
    pub networking: Option<ShootNetworking>,
}

/// `spec.networking` of a Shoot.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShootNetworking {
    /// The nodes CIDR.
    #[serde(default)]
    pub nodes: Option<String>,
    /// `IPv4`, `IPv6` or both.
    #[serde(default)]
    pub ip_families: Vec<String>,
}

/// The Shoot's status.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShootStatus {
    /// `status.lastOperation`.
    #[serde(default)]
    pub last_operation: Option<ShootLastOperation>,
}

/// The Shoot's last operation.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ShootLastOperation {
    /// `Processing`, `Succeeded`, `Error`, `Failed`, ...
    #[serde(default)]
    pub state: String,
}

/// Go's `strconv.ParseBool` for true.
fn go_true(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True")
}

impl Shoot {
    /// Decodes the Shoot embedded in `cluster`; `None` when the `Cluster` holds none.
    ///
    /// # Errors
    /// When the embedded Shoot does not decode.
    pub fn from_cluster(cluster: &Cluster) -> Result<Option<Self>, serde_json::Error> {
        cluster
            .spec
            .shoot
            .as_ref()
            .filter(|shoot| !shoot.is_null())
            .map(|shoot| serde_json::from_value(shoot.clone()))
            .transpose()
    }

    /// Gardener's `IsShootFailed`: the last operation of the shoot is `Failed`.
    pub fn is_failed(&self) -> bool {
        self.status
            .last_operation
            .as_ref()
            .is_some_and(|l| l.state == "Failed")
    }

    /// Gardener's `ShootNeedsForceDeletion`: the force-deletion annotation parses as true.
    pub fn needs_force_deletion(&self) -> bool {
        self.metadata
            .annotations
            .get(FORCE_DELETION_ANNOTATION)
            .is_some_and(|v| go_true(v))
    }

    /// What the Shoot says about the nodes network.
    pub fn network(&self) -> ShootNetwork {
        let networking = self.spec.networking.clone().unwrap_or_default();
        ShootNetwork {
            nodes: networking.nodes.filter(|n| !n.trim().is_empty()),
            ipv6: networking.ip_families.iter().any(|f| f == "IPv6"),
        }
    }
}

/// Reads the Shoot of the shoot namespace `namespace` from its `Cluster`. `None` when there is no
/// such `Cluster` (or the seed serves no `Cluster` resource, as outside Gardener): the object is
/// then handled without shoot information, where Gardener's reconciler would wait for it.
///
/// # Errors
/// [`Error::Kube`] when the `Cluster` cannot be read, [`Error::ShootUndecodable`] when its
/// Shoot does not decode.
pub async fn shoot_of(client: &Client, namespace: &str) -> Result<Option<Shoot>, Error> {
    let clusters: Api<Cluster> = Api::all(client.clone());
    let cluster = clusters
        .get_opt(namespace)
        .await
        .map_err(Error::kube(format!("read Cluster {namespace}")))?;
    let Some(cluster) = cluster else {
        tracing::debug!(cluster = namespace, "No Cluster for this namespace");
        return Ok(None);
    };
    Shoot::from_cluster(&cluster).map_err(|source| Error::ShootUndecodable {
        cluster: namespace.to_string(),
        source,
    })
}

/// Gardener's `ShootNotFailedPredicate` (`extensions/pkg/predicate/preconditions.go`): whether
/// an event of an object in the shoot namespace `namespace` may start an attempt. Not when the
/// shoot has failed, and not when its `Cluster` cannot be read: the event is dropped (and
/// logged), so nothing is written and the operation annotation stays. A namespace without a
/// `Cluster` is no shoot's (as outside Gardener): its events pass.
pub async fn shoot_not_failed(client: &Client, namespace: &str) -> bool {
    match shoot_of(client, namespace).await {
        Ok(shoot) if shoot.as_ref().is_some_and(Shoot::is_failed) => {
            tracing::info!(
                cluster = namespace,
                "Ignoring the event: the shoot has failed"
            );
            false
        }
        Ok(_) => true,
        Err(error) => {
            tracing::warn!(cluster = namespace, error = %error_chain(&error), "Ignoring the event: the shoot's Cluster cannot be read");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster(shoot: Value) -> Cluster {
        Cluster::new(
            "shoot--p--s",
            ClusterSpec {
                shoot: Some(shoot),
                ..Default::default()
            },
        )
    }

    #[test]
    fn a_shoot_is_failed_only_when_its_last_operation_failed() {
        let failed = json!({"status": {"lastOperation": {"type": "Reconcile", "state": "Failed"}}});
        let error = json!({"status": {"lastOperation": {"type": "Reconcile", "state": "Error"}}});
        let shoot = |v| Shoot::from_cluster(&cluster(v)).unwrap().unwrap();
        assert!(shoot(failed).is_failed());
        assert!(!shoot(error).is_failed());
        assert!(!shoot(json!({})).is_failed());
    }

    #[test]
    fn force_deletion_needs_the_annotation_set_to_a_go_true() {
        let annotated = |value: &str| {
            Shoot::from_cluster(&cluster(json!({
                "metadata": {"annotations": {FORCE_DELETION_ANNOTATION: value}},
            })))
            .unwrap()
            .unwrap()
        };
        assert!(annotated("true").needs_force_deletion());
        assert!(annotated("T").needs_force_deletion());
        assert!(!annotated("false").needs_force_deletion());
        assert!(!annotated("yes").needs_force_deletion());
        assert!(!Shoot::default().needs_force_deletion());
    }

    #[test]
    fn the_network_comes_from_spec_networking() {
        let shoot = Shoot::from_cluster(&cluster(json!({
            "apiVersion": "core.gardener.cloud/v1beta1",
            "kind": "Shoot",
            "spec": {"networking": {"type": "calico", "nodes": "10.250.0.0/16",
                                    "ipFamilies": ["IPv4", "IPv6"]}},
        })))
        .unwrap()
        .unwrap();
        assert_eq!(
            shoot.network(),
            ShootNetwork {
                nodes: Some("10.250.0.0/16".into()),
                ipv6: true,
            }
        );
        assert_eq!(Shoot::default().network(), ShootNetwork::default());
    }

    #[test]
    fn a_cluster_without_a_shoot_has_none_and_a_broken_one_is_an_error() {
        let empty = Cluster::new("ns", ClusterSpec::default());
        assert_eq!(Shoot::from_cluster(&empty).unwrap(), None);
        assert!(Shoot::from_cluster(&cluster(json!({"spec": {"networking": 3}}))).is_err());
    }
}
