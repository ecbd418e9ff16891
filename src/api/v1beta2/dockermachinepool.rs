//! DockerMachinePool and DockerMachinePoolTemplate (v1beta2, the hub and storage version).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DeprecatedStatus, MachineAddress, Mount, TemplateObjectMeta};
use crate::api::conditions::Condition;
use crate::api::is_default;

/// Desired state of a DockerMachinePool: a group of identical node containers that a Cluster
/// API MachinePool scales.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerMachinePool",
    plural = "dockermachinepools",
    namespaced,
    status = "DockerMachinePoolStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DockerMachinePool was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolSpec {
    /// Container settings of every machine in the pool.
    #[serde(default, skip_serializing_if = "is_default")]
    pub template: DockerMachinePoolMachineTemplate,
    /// Identifier of the pool itself, `docker:////<cluster>-dmp-<pool>`; set by the controller.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "String::is_empty"
    )]
    pub provider_id: String,
    /// Provider IDs of the pool's machines, sorted; set by the controller.
    #[serde(
        default,
        rename = "providerIDList",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub provider_id_list: Vec<String>,
}

/// Container settings shared by the machines of a pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolMachineTemplate {
    /// Node image to run instead of the `kindest/node` image matching the pool's Kubernetes
    /// version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub custom_image: String,
    /// Images to copy from the Docker host into each node's containerd before bootstrap.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_load_images: Vec<String>,
    /// Host directories to bind-mount into each node container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_mounts: Vec<Mount>,
}

/// Observed state of a DockerMachinePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolStatus {
    /// True when the pool's infrastructure is ready.
    #[serde(default)]
    pub ready: bool,
    /// Number of machines the pool currently has.
    // Always written, 0 included, as CAPD does: core keeps its last count when the field is
    // absent, so a pool scaled to zero would go on reporting its old size.
    #[serde(default)]
    pub replicas: i32,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "is_default")]
    pub observed_generation: i64,
    /// Per-machine details (legacy, not filled by current controllers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<DockerMachinePoolInstanceStatus>,
    /// Kind of the per-machine objects the pool creates (`DockerMachine`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub infrastructure_machine_kind: String,
    /// Current observations of the pool, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Fields kept for v1beta1 clients; removed together with the v1beta1 API.
    #[serde(default, skip_serializing_if = "is_default")]
    pub deprecated: DeprecatedStatus,
}

/// State of one machine of a pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolInstanceStatus {
    /// Addresses of the machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Name of the machine's container.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_name: String,
    /// Provider ID of the machine.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// Kubernetes version of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether the machine is ready.
    #[serde(default)]
    pub ready: bool,
    /// Whether bootstrap ran on the machine.
    #[serde(default, skip_serializing_if = "is_default")]
    pub bootstrapped: bool,
}

/// Desired state of a DockerMachinePoolTemplate.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerMachinePoolTemplate",
    plural = "dockermachinepooltemplates",
    namespaced,
    status = "DockerMachinePoolTemplateStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DockerMachinePoolTemplate was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolTemplateSpec {
    /// The DockerMachinePool to create from this template.
    pub template: DockerMachinePoolTemplateResource,
}

/// Contents of a DockerMachinePoolTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolTemplateResource {
    /// Labels and annotations given to DockerMachinePools created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DockerMachinePools created from the template.
    pub spec: DockerMachinePoolSpec,
}

/// Observed state of a DockerMachinePoolTemplate. CAPD 1.12 has no status on this kind; this
/// provider adds `capacity` as DockerMachineTemplate has it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolTemplateStatus {
    /// Resources (`cpu`, `memory`) one machine of a pool made from this template provides, so
    /// the cluster autoscaler can scale a MachinePool up from zero.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "crate::api::schema::quantity_map")]
    pub capacity: BTreeMap<String, Quantity>,
}
