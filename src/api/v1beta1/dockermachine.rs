//! DockerMachine and DockerMachineTemplate in the deprecated v1beta1 shape.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{MachineAddress, Mount, TemplateObjectMeta, V1Beta2Status};
use crate::api::conditions::V1Beta1Condition;
use crate::api::is_default;

/// Desired state of a DockerMachine (v1beta1).
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DockerMachine",
    plural = "dockermachines",
    namespaced,
    status = "DockerMachineStatus",
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
        description = "Machine that owns this DockerMachine"
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
        description = "Whether the machine's infrastructure is ready"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DockerMachine was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineSpec {
    /// Identifier of the node, `docker:////<container name>`; set by the controller.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// Node image to run instead of the `kindest/node` image matching the Machine's
    /// Kubernetes version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub custom_image: String,
    /// Images to copy from the Docker host into the node's containerd before bootstrap.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_load_images: Vec<String>,
    /// Host directories to bind-mount into the node container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_mounts: Vec<Mount>,
    /// How long bootstrap may take, as a Go duration (for example `5m`). Past it, a bootstrap
    /// still running is reported (condition `BootstrapCompleted` reason `BootstrapTimedOut` and a
    /// Warning Event) but not stopped; it is accepted if it completes later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_timeout: Option<String>,
}

/// Observed state of a DockerMachine (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineStatus {
    /// True once the node container runs and booted, set together with `spec.providerID` and
    /// before the bootstrap data runs in the node; the `Ready` condition turns True when
    /// bootstrap finished.
    #[serde(default)]
    pub ready: bool,
    /// Deprecated: whether the load balancer configuration was updated for this node.
    #[serde(default)]
    pub load_balancer_configured: bool,
    /// Addresses of the node: its host name, then an internal and an external address per IP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Current observations in the legacy (v1beta1) form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
    /// The v1beta2 conditions, for v1beta1 clients that already read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
}

/// Desired state of a DockerMachineTemplate (v1beta1).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DockerMachineTemplate",
    plural = "dockermachinetemplates",
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
        description = "Time since the DockerMachineTemplate was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineTemplateSpec {
    /// The DockerMachine to create from this template.
    pub template: DockerMachineTemplateResource,
}

/// Contents of a DockerMachineTemplate (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineTemplateResource {
    /// Labels and annotations given to DockerMachines created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DockerMachines created from the template.
    pub spec: DockerMachineSpec,
}
