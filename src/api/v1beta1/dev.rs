//! The Dev* kinds in the deprecated v1beta1 shape: DevCluster, DevClusterTemplate, DevMachine and
//! DevMachineTemplate. Their backend settings have the v1beta2 shape but for the failure domains
//! (a map, as in a v1beta1 DockerCluster).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    APIEndpoint, DockerLoadBalancer, FailureDomains, MachineAddress, TemplateObjectMeta,
    V1Beta2Status,
};
use super::dockercluster::DockerClusterStatus;
use crate::api::conditions::V1Beta1Condition;
use crate::api::is_default;

pub use crate::api::v1beta2::{
    DevMachineBackendSpec, DockerMachineBackendSpec, InMemoryClusterBackendSpec,
    InMemoryComponentSpec, InMemoryMachineBackendSpec, InMemoryProvisioningSettings,
};

/// Desired state of a DevCluster (v1beta1).
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DevCluster",
    plural = "devclusters",
    namespaced,
    status = "DevClusterStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    deprecated,
    storage = false,
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster this object belongs to"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DevCluster was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterSpec {
    /// Endpoint of the workload cluster's API server; with the docker backend the controller
    /// fills the host with the load balancer's address when it is empty.
    #[serde(default)]
    pub control_plane_endpoint: APIEndpoint,
    /// The backend that makes the infrastructure; `docker` when none is set.
    pub backend: DevClusterBackendSpec,
}

/// The backends of a DevCluster (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterBackendSpec {
    /// Docker containers: a network and an haproxy load balancer, as a DockerCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerClusterBackendSpec>,
    /// In-memory fakes of CAPD's scale tests: a fake workload cluster served by the manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_memory: Option<InMemoryClusterBackendSpec>,
}

/// The docker backend of a DevCluster (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterBackendSpec {
    /// Failure domains to advertise, by name. The controller copies them into the status.
    #[serde(default, skip_serializing_if = "FailureDomains::is_empty")]
    pub failure_domains: FailureDomains,
    /// Settings of the load balancer container in front of the control plane.
    #[serde(default, skip_serializing_if = "is_default")]
    pub load_balancer: DockerLoadBalancer,
}

/// Observed state of a DevCluster (v1beta1): a DockerCluster's.
pub type DevClusterStatus = DockerClusterStatus;

/// Desired state of a DevClusterTemplate (v1beta1).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DevClusterTemplate",
    plural = "devclustertemplates",
    namespaced,
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    deprecated,
    storage = false,
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DevClusterTemplate was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterTemplateSpec {
    /// The DevCluster to create from this template.
    pub template: DevClusterTemplateResource,
}

/// Contents of a DevClusterTemplate (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterTemplateResource {
    /// Labels and annotations given to DevClusters created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DevClusters created from the template.
    pub spec: DevClusterSpec,
}

/// Desired state of a DevMachine (v1beta1).
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DevMachine",
    plural = "devmachines",
    namespaced,
    status = "DevMachineStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    deprecated,
    storage = false,
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster this object belongs to"
    ),
    printcolumn(
        name = "Machine",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"Machine\")].name",
        description = "Machine that owns this DevMachine"
    ),
    printcolumn(
        name = "ProviderID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID of the node"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.ready",
        description = "Whether the machine is ready"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DevMachine was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineSpec {
    /// Identifier of the node; set by the controller.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The backend that makes the machine; `docker` when none is set.
    pub backend: DevMachineBackendSpec,
}

/// Observed state of a DevMachine (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineStatus {
    /// True once the machine is provisioned.
    #[serde(default)]
    pub ready: bool,
    /// Addresses of the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Current observations in the legacy (v1beta1) form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
    /// The v1beta2 conditions, for v1beta1 clients that already read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
}

/// Desired state of a DevMachineTemplate (v1beta1).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DevMachineTemplate",
    plural = "devmachinetemplates",
    namespaced,
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    deprecated,
    storage = false,
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DevMachineTemplate was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineTemplateSpec {
    /// The DevMachine to create from this template.
    pub template: DevMachineTemplateResource,
}

/// Contents of a DevMachineTemplate (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineTemplateResource {
    /// Labels and annotations given to DevMachines created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DevMachines created from the template.
    pub spec: DevMachineSpec,
}
