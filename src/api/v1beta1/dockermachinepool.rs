//! DockerMachinePool and DockerMachinePoolTemplate in the deprecated v1beta1 shape.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::TemplateObjectMeta;
use crate::api::conditions::V1Beta1Condition;
use crate::api::is_default;

pub use crate::api::v1beta2::{
    DockerMachinePoolInstanceStatus, DockerMachinePoolMachineTemplate,
    DockerMachinePoolTemplateStatus,
};

/// Desired state of a DockerMachinePool (v1beta1).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DockerMachinePool",
    plural = "dockermachinepools",
    namespaced,
    status = "DockerMachinePoolStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    deprecated,
    storage = false,
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
    /// Identifier of the pool itself; set by the controller.
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

/// Observed state of a DockerMachinePool (v1beta1).
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
    /// Current observations in the legacy (v1beta1) form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
}

/// Desired state of a DockerMachinePoolTemplate (v1beta1).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DockerMachinePoolTemplate",
    plural = "dockermachinepooltemplates",
    namespaced,
    status = "DockerMachinePoolTemplateStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    deprecated,
    storage = false,
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

/// Contents of a DockerMachinePoolTemplate (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolTemplateResource {
    /// Labels and annotations given to DockerMachinePools created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DockerMachinePools created from the template.
    pub spec: DockerMachinePoolSpec,
}
