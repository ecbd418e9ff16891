//! Sub-types shared by the v1beta2 kinds.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::conditions::V1Beta1Condition;
use crate::api::is_default;

/// Address and port at which the workload cluster's API server is reachable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
#[allow(clippy::upper_case_acronyms)]
pub struct APIEndpoint {
    /// Host name or IP address of the API server endpoint.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 512))]
    pub host: String,
    /// TCP port of the API server endpoint.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

impl APIEndpoint {
    /// True when neither host nor port is set.
    pub fn is_zero(&self) -> bool {
        self.host.is_empty() && self.port == 0
    }
}

/// A failure domain (a zone of the infrastructure) that machines can be spread across.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// Unique name of the failure domain.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Whether control plane machines may be placed in this failure domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Free-form key/value data about the failure domain for infrastructure providers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// Kind of a machine address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum MachineAddressType {
    /// The node's host name.
    #[default]
    Hostname,
    /// An IP address reachable from outside the cluster.
    #[serde(rename = "ExternalIP")]
    ExternalIP,
    /// An IP address reachable only inside the cluster.
    #[serde(rename = "InternalIP")]
    InternalIP,
    /// A DNS name reachable from outside the cluster.
    #[serde(rename = "ExternalDNS")]
    ExternalDNS,
    /// A DNS name resolvable only inside the cluster.
    #[serde(rename = "InternalDNS")]
    InternalDNS,
}

/// One address of a machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineAddress {
    /// What kind of address this is: Hostname, ExternalIP, InternalIP, ExternalDNS or
    /// InternalDNS.
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
    /// The address itself (a host name or an IP address).
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
}

/// A host directory bind-mounted into a node container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    /// Absolute path inside the container where the directory appears.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_path: String,
    /// Absolute path on the Docker host of the directory to mount.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host_path: String,
    /// Mount the directory read-only.
    #[serde(default, skip_serializing_if = "is_default")]
    pub read_only: bool,
}

/// Reference to an object in the same namespace, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct LocalObjectReference {
    /// Name of the referenced object. Required in practice, though an empty value is accepted
    /// for compatibility.
    #[serde(default)]
    #[schemars(extend("x-capd-default" = ""))]
    pub name: String,
}

/// Settings of the haproxy container that load-balances the control plane.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerLoadBalancer {
    /// Registry and repository to pull the haproxy image from; `kindest` when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_repository: String,
    /// Tag of the haproxy image; the provider's built-in default when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_tag: String,
    /// ConfigMap (key `value`) holding a Go-template that replaces the default haproxy
    /// configuration. The template receives `.IPv6` (bool), `.FrontendControlPlanePort`,
    /// `.BackendControlPlanePort` (strings) and `.BackendServers` (server name to address), and
    /// may call `JoinHostPort`. Nothing checks the result: use with care.
    #[serde(
        default,
        rename = "customHAProxyConfigTemplateRef",
        skip_serializing_if = "Option::is_none"
    )]
    pub custom_haproxy_config_template_ref: Option<LocalObjectReference>,
}

/// Labels and annotations that a template stamps onto the objects created from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TemplateObjectMeta {
    /// Labels copied onto created objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations copied onto created objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Status fields kept only for clients of the v1beta1 API; they go away with v1beta1.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeprecatedStatus {
    /// Status fields that v1beta1 clients read.
    #[serde(default, skip_serializing_if = "is_default")]
    pub v1beta1: V1Beta1DeprecatedStatus,
}

/// Status fields of the v1beta1 API, still maintained for its clients.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta1DeprecatedStatus {
    /// Legacy (v1beta1) conditions. Deprecated: read `status.conditions` instead; this list
    /// disappears together with the v1beta1 API.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
}
