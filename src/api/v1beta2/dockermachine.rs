//! DockerMachine and DockerMachineTemplate (v1beta2, the hub and storage version).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DeprecatedStatus, MachineAddress, Mount, TemplateObjectMeta};
use crate::api::conditions::Condition;
use crate::api::is_default;

/// Desired state of a DockerMachine: one Kubernetes node run as a container.
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerMachine",
    plural = "dockermachines",
    namespaced,
    status = "DockerMachineStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster this object belongs to"
    ),
    printcolumn(
        name = "Provider ID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID of the node",
        priority = 10
    ),
    printcolumn(
        name = "Failure domain",
        type_ = "string",
        json_path = ".status.failureDomain",
        description = "Failure domain the node runs in"
    ),
    printcolumn(
        name = "IP",
        type_ = "string",
        json_path = ".status.addresses[?(@.type==\"InternalIP\")].address",
        description = "Internal IP address of the node",
        priority = 10
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        description = "Whether reconciliation is paused",
        priority = 10
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "Whether the machine's infrastructure is provisioned"
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
    /// Identifier of the node, `docker:////<container name>`; set by the controller and
    /// matched against the Node's `spec.providerID`.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: String,
    /// Node image to run instead of the `kindest/node` image matching the Machine's
    /// Kubernetes version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub custom_image: String,
    /// Images to copy from the Docker host into the node's containerd before bootstrap, so
    /// the node does not need to pull them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_load_images: Vec<String>,
    /// Host directories to bind-mount into the node container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_mounts: Vec<Mount>,
    /// How long bootstrap may take, as a Go duration (for example `5m`). Past it, a bootstrap
    /// still running is reported (condition `BootstrapCompleted` reason `BootstrapTimedOut` and a
    /// Warning Event) but not stopped; it is accepted if it completes later. Defaults to five
    /// minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_timeout: Option<String>,
}

/// Prefix of every DockerMachine provider ID; the container name follows.
pub const PROVIDER_ID_PREFIX: &str = "docker:////";

/// Bootstrap timeout when `spec.bootstrapTimeout` is not set.
pub const DEFAULT_BOOTSTRAP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5 * 60);

impl DockerMachineSpec {
    /// `spec.bootstrapTimeout` as a duration, or [`DEFAULT_BOOTSTRAP_TIMEOUT`] when unset.
    pub fn bootstrap_timeout_duration(
        &self,
    ) -> Result<std::time::Duration, crate::api::duration::DurationError> {
        match self.bootstrap_timeout.as_deref() {
            None => Ok(DEFAULT_BOOTSTRAP_TIMEOUT),
            Some(text) => crate::api::duration::parse_go_duration(text),
        }
    }
}

/// The provider ID of the node running in the container `container_name`.
pub fn provider_id(container_name: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{container_name}")
}

/// Observed state of a DockerMachine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineStatus {
    /// Current observations of the DockerMachine: `Ready`, `ContainerProvisioned`,
    /// `BootstrapCompleted`, `Paused` and the steps in between.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Progress of the initial provisioning, as the Cluster API contract defines it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub initialization: DockerMachineInitializationStatus,
    /// Deprecated: whether the load balancer configuration was updated for this node.
    #[serde(default)]
    pub load_balancer_configured: bool,
    /// Addresses of the node: its host name, then an internal and an external address per IP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Failure domain the node container runs in: the owner Machine's `spec.failureDomain`, also
    /// recorded on the container as the label `io.x-k8s.cluster.failureDomain`. (Added after the
    /// CAPD 1.12 schema, as later CAPD releases have it; v1beta1 keeps it in the conversion data.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,
    /// Fields kept for v1beta1 clients; removed together with the v1beta1 API.
    #[serde(default, skip_serializing_if = "is_default")]
    pub deprecated: DeprecatedStatus,
}

/// Initial-provisioning progress of a DockerMachine (Cluster API contract fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct DockerMachineInitializationStatus {
    /// True once the node container runs and booted (its preloaded images loaded), set
    /// together with `spec.providerID` and `status.addresses` and before the bootstrap data runs
    /// in the node; the `BootstrapCompleted` and `Ready` conditions turn True when bootstrap
    /// finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// Desired state of a DockerMachineTemplate.
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerMachineTemplate",
    plural = "dockermachinetemplates",
    namespaced,
    status = "DockerMachineTemplateStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
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

/// Contents of a DockerMachineTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineTemplateResource {
    /// Labels and annotations given to DockerMachines created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DockerMachines created from the template.
    pub spec: DockerMachineSpec,
}

/// Observed state of a DockerMachineTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineTemplateStatus {
    /// Resources (`cpu`, `memory`) one machine of this template provides, so the cluster
    /// autoscaler can scale a node group up from zero.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "crate::api::schema::quantity_map")]
    pub capacity: BTreeMap<String, Quantity>,
}
