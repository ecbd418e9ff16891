//! Read-only views of the Cluster API core objects the controllers read (`Cluster`, `Machine`,
//! group `cluster.x-k8s.io`, v1beta2 shapes). Every field is optional and unknown fields are
//! ignored, so a newer or partial object still decodes. These types are never turned into CRDs.

use std::borrow::Cow;
use std::net::IpAddr;

use base64::Engine as _;
use kube::core::{NamespaceResourceScope, ObjectMeta};
use kube::{Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, PAUSED_ANNOTATION};

/// API group of the Cluster API core kinds.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// Version of the Cluster API core kinds these views decode.
pub const CAPI_VERSION: &str = "v1beta2";
/// Condition type Cluster API sets on a Cluster once the control plane answers.
pub const CONTROL_PLANE_INITIALIZED_CONDITION: &str = "ControlPlaneInitialized";

/// Failure to work out something from a Cluster API object.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CapiError {
    /// More than two CIDR blocks for pods or services.
    #[error("failed to determine the IP family of {network}: more than two CIDR blocks")]
    TooManyCidrs {
        /// `pods` or `services`.
        network: &'static str,
    },
    /// A CIDR block does not parse.
    #[error("failed to parse {network} CIDR block {cidr:?}")]
    InvalidCidr {
        /// `pods` or `services`.
        network: &'static str,
        /// The offending block.
        cidr: String,
    },
    /// Pods and services use different IP families.
    #[error("failed to determine the IP family: pods and services use different families")]
    FamilyMismatch,
}

/// Reference to an object in the same namespace, by API group, kind and name (CAPI v1beta2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractVersionedObjectReference {
    /// API group of the referenced object, without version.
    #[serde(default)]
    pub api_group: String,
    /// Kind of the referenced object.
    #[serde(default)]
    pub kind: String,
    /// Name of the referenced object.
    #[serde(default)]
    pub name: String,
}

/// CIDR blocks of one network.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRanges {
    /// The CIDR blocks.
    #[serde(default)]
    pub cidr_blocks: Vec<String>,
}

/// Network settings of a workload cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetwork {
    /// Pod network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NetworkRanges>,
    /// Service network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<NetworkRanges>,
}

/// The parts of `Cluster.spec` we read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Whether reconciliation of the cluster and its objects is paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// The cluster's infrastructure object (our DockerCluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractVersionedObjectReference>,
    /// The cluster's control plane object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ContractVersionedObjectReference>,
    /// Pod and service networks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_network: Option<ClusterNetwork>,
}

/// Initial-provisioning progress of a Cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitializationStatus {
    /// The infrastructure provider reported the cluster infrastructure ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// The control plane answers and nodes can join.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// A condition as read from a foreign object: every field optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView {
    /// Condition type.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// Why the condition has its status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The parts of `Cluster.status` we read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Initial-provisioning progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitializationStatus>,
    /// Conditions of the Cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ConditionView>,
}

/// A Cluster API `Cluster`, reduced to what the controllers read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: ClusterSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ClusterStatus>,
}

/// IP family of a workload cluster, from its pod and service CIDR blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpFamily {
    /// IPv4 only (also when no CIDR block is given).
    IPv4,
    /// IPv6 only.
    IPv6,
    /// Both.
    Dual,
}

impl Cluster {
    /// True when `spec.paused` is set.
    pub fn is_paused(&self) -> bool {
        self.spec.paused == Some(true)
    }

    /// True once Cluster API reports the infrastructure provisioned.
    pub fn infrastructure_provisioned(&self) -> bool {
        self.initialization()
            .and_then(|i| i.infrastructure_provisioned)
            == Some(true)
    }

    /// True once the control plane is initialized: `status.initialization.controlPlaneInitialized`,
    /// or else the `ControlPlaneInitialized` condition.
    pub fn control_plane_initialized(&self) -> bool {
        if let Some(initialized) = self
            .initialization()
            .and_then(|i| i.control_plane_initialized)
        {
            return initialized;
        }
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == CONTROL_PLANE_INITIALIZED_CONDITION && c.status == "True")
        })
    }

    fn initialization(&self) -> Option<&ClusterInitializationStatus> {
        self.status.as_ref().and_then(|s| s.initialization.as_ref())
    }

    /// IP family of the cluster, as CAPD decides it: no CIDR blocks means IPv4; pods and
    /// services must agree unless the pods are dual-stack; more than two blocks is an error.
    pub fn ip_family(&self) -> Result<IpFamily, CapiError> {
        let network = self.spec.cluster_network.as_ref();
        let blocks = |ranges: Option<&NetworkRanges>| {
            ranges.map(|r| r.cidr_blocks.clone()).unwrap_or_default()
        };
        let pods = blocks(network.and_then(|n| n.pods.as_ref()));
        let services = blocks(network.and_then(|n| n.services.as_ref()));
        if pods.is_empty() && services.is_empty() {
            return Ok(IpFamily::IPv4);
        }
        let pods_family = family_of("pods", &pods)?;
        if services.is_empty() {
            return pods_family.ok_or(CapiError::FamilyMismatch);
        }
        let services_family = family_of("services", &services)?;
        match pods_family {
            Some(IpFamily::Dual) => Ok(IpFamily::Dual),
            Some(family) if Some(family) == services_family => Ok(family),
            _ => Err(CapiError::FamilyMismatch),
        }
    }
}

/// Family of a list of CIDR blocks; `None` for an empty list.
fn family_of(network: &'static str, cidrs: &[String]) -> Result<Option<IpFamily>, CapiError> {
    if cidrs.len() > 2 {
        return Err(CapiError::TooManyCidrs { network });
    }
    let (mut v4, mut v6) = (false, false);
    for cidr in cidrs {
        let invalid = || CapiError::InvalidCidr {
            network,
            cidr: cidr.clone(),
        };
        let (address, prefix) = cidr.split_once('/').ok_or_else(invalid)?;
        let address: IpAddr = address.parse().map_err(|_| invalid())?;
        let prefix: u8 = prefix.parse().map_err(|_| invalid())?;
        match address {
            IpAddr::V4(_) if prefix <= 32 => v4 = true,
            IpAddr::V6(a) if prefix <= 128 => {
                // Go treats IPv4-mapped IPv6 addresses as IPv4.
                if a.to_ipv4_mapped().is_some() {
                    v4 = true
                } else {
                    v6 = true
                }
            }
            _ => return Err(invalid()),
        }
    }
    Ok(match (v4, v6) {
        (true, true) => Some(IpFamily::Dual),
        (true, false) => Some(IpFamily::IPv4),
        (false, true) => Some(IpFamily::IPv6),
        (false, false) => None,
    })
}

/// How a Machine gets its bootstrap data.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// Secret (key `value`) holding the bootstrap data, once the bootstrap provider made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// The parts of `Machine.spec` we read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// Name of the Cluster the Machine belongs to.
    #[serde(default)]
    pub cluster_name: String,
    /// Bootstrap data source.
    #[serde(default)]
    pub bootstrap: Bootstrap,
    /// Kubernetes version of the node, for example `v1.34.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Failure domain the Machine is placed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// The Machine's infrastructure object (our DockerMachine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractVersionedObjectReference>,
}

/// The Node a Machine became.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineNodeReference {
    /// Name of the Node.
    #[serde(default)]
    pub name: String,
}

/// The parts of `Machine.status` we read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// The Node this Machine became, once it joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<MachineNodeReference>,
}

/// A Cluster API `Machine`, reduced to what the controllers read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Standard object metadata (labels tell control plane machines apart).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: MachineSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MachineStatus>,
}

impl Machine {
    /// True for control plane machines (label `cluster.x-k8s.io/control-plane`).
    pub fn is_control_plane(&self) -> bool {
        self.labels().contains_key(CONTROL_PLANE_LABEL)
    }

    /// Name of the bootstrap data secret, once set.
    pub fn bootstrap_data_secret_name(&self) -> Option<&str> {
        self.spec
            .bootstrap
            .data_secret_name
            .as_deref()
            .filter(|s| !s.is_empty())
    }

    /// The Machine of a MachinePool as its infrastructure machine reads it: core 1.12 creates a
    /// pool's Machines with an empty `spec.bootstrap.dataSecretName` and a `spec.version` taken
    /// from the Node once one exists, so, as CAPD 1.12 does, the bootstrap data secret and the
    /// Kubernetes version are the MachinePool's (`spec.template.spec`).
    pub fn in_pool(mut self, machine_pool: &MachinePool) -> Machine {
        let template = &machine_pool.spec.template.spec;
        self.spec.bootstrap = template.bootstrap.clone();
        self.spec.version.clone_from(&template.version);
        self
    }

    /// Name of the Node, once the Machine joined.
    pub fn node_name(&self) -> Option<&str> {
        self.status
            .as_ref()?
            .node_ref
            .as_ref()
            .map(|n| n.name.as_str())
            .filter(|s| !s.is_empty())
    }
}

/// What a MachinePool's machines are made from (the parts we read).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolMachineSpec {
    /// Bootstrap data source of every machine of the pool.
    #[serde(default)]
    pub bootstrap: Bootstrap,
    /// Kubernetes version of the pool's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The pool's infrastructure object (our DockerMachinePool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractVersionedObjectReference>,
}

/// `MachinePool.spec.template`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolTemplate {
    /// The machine spec of the pool.
    #[serde(default)]
    pub spec: MachinePoolMachineSpec,
}

/// The parts of `MachinePool.spec` we read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolSpec {
    /// Name of the Cluster the pool belongs to.
    #[serde(default)]
    pub cluster_name: String,
    /// Wanted number of machines; Cluster API defaults it to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Failure domains the pool's machines are spread over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_domains: Vec<String>,
    /// What the machines are made from.
    #[serde(default)]
    pub template: MachinePoolTemplate,
}

/// A Cluster API `MachinePool`, reduced to what the DockerMachinePool controller reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachinePool {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: MachinePoolSpec,
}

impl MachinePool {
    /// The wanted number of machines (`spec.replicas`, 1 when unset as Cluster API defaults it).
    pub fn replicas(&self) -> usize {
        usize::try_from(self.spec.replicas.unwrap_or(1)).unwrap_or(0)
    }

    /// Name of the pool's bootstrap data secret, once set.
    pub fn bootstrap_data_secret_name(&self) -> Option<&str> {
        self.spec
            .template
            .spec
            .bootstrap
            .data_secret_name
            .as_deref()
            .filter(|s| !s.is_empty())
    }

    /// Name of the Cluster: `spec.clusterName`, else the cluster-name label.
    pub fn cluster_name(&self) -> Option<&str> {
        Some(self.spec.cluster_name.as_str())
            .filter(|n| !n.is_empty())
            .or_else(|| self.labels().get(CLUSTER_NAME_LABEL).map(String::as_str))
            .filter(|n| !n.is_empty())
    }
}

/// A name as Cluster API core writes it into a label value (`util/labels/format`,
/// `MustFormatValue`): the name itself when it is a valid label value, else `hash_<FNV-32a of
/// the name, unpadded URL-safe base64>_z`. Core labels a MachinePool's Machines and
/// infrastructure machines `cluster.x-k8s.io/pool-name` with this value, and selects them by it.
pub fn label_value(name: &str) -> String {
    if is_label_value(name) {
        return name.to_string();
    }
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.to_be_bytes());
    format!("hash_{encoded}_z")
}

/// Whether `value` is a valid label value: at most 63 characters, alphanumerics, `-`, `_` and
/// `.`, beginning and ending with an alphanumeric (or empty).
fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    if bytes.is_empty() {
        return true;
    }
    bytes.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// True when the Cluster is paused or `object` carries the paused annotation (CAPI's rule).
pub fn is_paused(cluster: &Cluster, object: &ObjectMeta) -> bool {
    cluster.is_paused()
        || object
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION))
}

macro_rules! capi_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }

            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(CAPI_GROUP)
            }

            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(CAPI_VERSION)
            }

            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

capi_resource!(Cluster, "Cluster", "clusters");
capi_resource!(Machine, "Machine", "machines");
capi_resource!(MachinePool, "MachinePool", "machinepools");

#[cfg(test)]
mod tests;
