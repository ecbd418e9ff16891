//! DevMachinePool and DevMachinePoolTemplate (v1beta2 only, as in CAPD 1.14): the successor of
//! DockerMachinePool. The `docker` backend (the only one CAPD 1.14 has for pools) holds a
//! DockerMachinePool's container settings; [`DevMachinePoolSpec::docker`] and the status
//! conversions below give the pool controller a DockerMachinePool-shaped view, as
//! [`super::DevMachineSpec::docker`] does for machines.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{MachineAddress, Mount, TemplateObjectMeta};
use super::dockermachinepool::{
    DockerMachinePoolInstanceStatus, DockerMachinePoolMachineTemplate, DockerMachinePoolSpec,
    DockerMachinePoolStatus,
};
use crate::api::conditions::Condition;
use crate::api::is_default;

/// Desired state of a DevMachinePool: a group of identical machines, made by the backend named
/// in `spec.backend`, that a Cluster API MachinePool scales.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachinePool",
    plural = "devmachinepools",
    namespaced,
    status = "DevMachinePoolStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DevMachinePool was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolSpec {
    /// Identifier of the pool itself, `dev:////<cluster>-dmp-<pool>` with the docker backend;
    /// set by the controller.
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
    /// The backend that makes the pool's machines. CAPD 1.14 has only `docker` for pools; a
    /// pool without it is reported unsupported.
    #[serde(default, skip_serializing_if = "is_default")]
    pub backend: DevMachinePoolBackendSpec,
}

/// The backends of a DevMachinePool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolBackendSpec {
    /// Node containers, as the machines of a DockerMachinePool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerMachinePoolBackendSpec>,
}

/// The docker backend of a DevMachinePool: the container settings of every machine in the pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolBackendSpec {
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

/// Observed state of a DevMachinePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolStatus {
    /// Current observations of the pool, keyed by type: `Ready`, `ReplicasReady`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// True when the pool's infrastructure is ready.
    #[serde(default)]
    pub ready: bool,
    /// Number of machines the pool currently has.
    // Always written, 0 included, as CAPD does (see DockerMachinePoolStatus::replicas).
    #[serde(default)]
    pub replicas: i32,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "is_default")]
    pub observed_generation: i64,
    /// Kind of the per-machine objects the pool creates (`DevMachine`); Cluster API expects
    /// Machines for the pool only once it is set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub infrastructure_machine_kind: String,
    /// Per-machine details (as CAPD, not filled: the pool's Machines carry them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<DevMachinePoolInstanceStatus>,
}

/// State of one machine of a DevMachinePool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolInstanceStatus {
    /// Addresses of the machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Name of the machine within the pool.
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
}

impl DevMachinePoolSpec {
    /// The DockerMachinePool spec of the docker backend, `None` for a pool without it.
    pub fn docker(&self) -> Option<DockerMachinePoolSpec> {
        self.backend
            .docker
            .as_ref()
            .map(|docker| DockerMachinePoolSpec {
                template: DockerMachinePoolMachineTemplate {
                    custom_image: docker.custom_image.clone(),
                    pre_load_images: docker.pre_load_images.clone(),
                    extra_mounts: docker.extra_mounts.clone(),
                },
                provider_id: self.provider_id.clone(),
                provider_id_list: self.provider_id_list.clone(),
            })
    }
}

impl From<&DockerMachinePoolSpec> for DevMachinePoolSpec {
    /// The DevMachinePool spec with the docker backend that has `spec`'s settings.
    fn from(spec: &DockerMachinePoolSpec) -> Self {
        DevMachinePoolSpec {
            provider_id: spec.provider_id.clone(),
            provider_id_list: spec.provider_id_list.clone(),
            backend: DevMachinePoolBackendSpec {
                docker: Some(DockerMachinePoolBackendSpec {
                    custom_image: spec.template.custom_image.clone(),
                    pre_load_images: spec.template.pre_load_images.clone(),
                    extra_mounts: spec.template.extra_mounts.clone(),
                }),
            },
        }
    }
}

impl From<&DevMachinePoolInstanceStatus> for DockerMachinePoolInstanceStatus {
    fn from(instance: &DevMachinePoolInstanceStatus) -> Self {
        DockerMachinePoolInstanceStatus {
            addresses: instance.addresses.clone(),
            instance_name: instance.instance_name.clone(),
            provider_id: instance.provider_id.clone(),
            version: instance.version.clone(),
            ready: instance.ready,
            bootstrapped: false,
        }
    }
}

impl From<&DockerMachinePoolInstanceStatus> for DevMachinePoolInstanceStatus {
    /// Drops `bootstrapped`, which DevMachinePool does not have.
    fn from(instance: &DockerMachinePoolInstanceStatus) -> Self {
        DevMachinePoolInstanceStatus {
            addresses: instance.addresses.clone(),
            instance_name: instance.instance_name.clone(),
            provider_id: instance.provider_id.clone(),
            version: instance.version.clone(),
            ready: instance.ready,
        }
    }
}

impl From<&DevMachinePoolStatus> for DockerMachinePoolStatus {
    fn from(status: &DevMachinePoolStatus) -> Self {
        DockerMachinePoolStatus {
            ready: status.ready,
            replicas: status.replicas,
            observed_generation: status.observed_generation,
            instances: status.instances.iter().map(Into::into).collect(),
            infrastructure_machine_kind: status.infrastructure_machine_kind.clone(),
            conditions: status.conditions.clone(),
            deprecated: Default::default(),
        }
    }
}

impl From<&DockerMachinePoolStatus> for DevMachinePoolStatus {
    /// Drops `deprecated` (DevMachinePool has no v1beta1 version to keep it for) and each
    /// instance's `bootstrapped`.
    fn from(status: &DockerMachinePoolStatus) -> Self {
        DevMachinePoolStatus {
            conditions: status.conditions.clone(),
            ready: status.ready,
            replicas: status.replicas,
            observed_generation: status.observed_generation,
            infrastructure_machine_kind: status.infrastructure_machine_kind.clone(),
            instances: status.instances.iter().map(Into::into).collect(),
        }
    }
}

/// Desired state of a DevMachinePoolTemplate.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachinePoolTemplate",
    plural = "devmachinepooltemplates",
    namespaced,
    status = "DevMachinePoolTemplateStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DevMachinePoolTemplate was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolTemplateSpec {
    /// The DevMachinePool to create from this template.
    pub template: DevMachinePoolTemplateResource,
}

/// Contents of a DevMachinePoolTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolTemplateResource {
    /// Labels and annotations given to DevMachinePools created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DevMachinePools created from the template.
    pub spec: DevMachinePoolSpec,
}

/// Observed state of a DevMachinePoolTemplate. CAPD 1.14 has no status on this kind; this
/// provider adds `capacity` as its DockerMachinePoolTemplate and DevMachineTemplate have it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolTemplateStatus {
    /// Resources (`cpu`, `memory`) one machine of a pool made from this template provides, so
    /// the cluster autoscaler can scale a MachinePool up from zero.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "crate::api::schema::quantity_map")]
    pub capacity: BTreeMap<String, Quantity>,
}
