//! DevMachine and DevMachineTemplate (v1beta2, the hub and storage version): CAPD's successor
//! API for machines. The `docker` backend holds a DockerMachine's settings; the controllers serve
//! both kinds through one view (`crate::controllers::kinds`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DeprecatedStatus, MachineAddress, Mount, TemplateObjectMeta};
use super::dockermachine::{
    DockerMachineInitializationStatus, DockerMachineSpec, DockerMachineStatus,
};
use crate::api::conditions::Condition;
use crate::api::is_default;

/// Desired state of a DevMachine: one Kubernetes node, made by the backend named in
/// `spec.backend`.
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachine",
    plural = "devmachines",
    namespaced,
    status = "DevMachineStatus",
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
        description = "Time since the DevMachine was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineSpec {
    /// Identifier of the node (`docker:////<container name>` with the docker backend); set by
    /// the controller and matched against the Node's `spec.providerID`.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: String,
    /// The backend that makes the machine; `docker` when none is set.
    pub backend: DevMachineBackendSpec,
}

/// The backends of a DevMachine: exactly one is expected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineBackendSpec {
    /// A node container, as a DockerMachine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerMachineBackendSpec>,
    /// In-memory fakes of CAPD's scale tests: a fake VM, Node, etcd member and API server in the
    /// cluster's fake workload cluster, each coming up after its startup duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_memory: Option<InMemoryMachineBackendSpec>,
}

/// The docker backend of a DevMachine: a DockerMachine's spec but the provider ID.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineBackendSpec {
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

/// The in-memory backend of a DevMachine: how long its fake parts take to start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryMachineBackendSpec {
    /// The fake VM (condition `VMProvisioned`; then `spec.providerID` is `in-memory://<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<InMemoryComponentSpec>,
    /// The fake Node (condition `NodeProvisioned`), timed from the VM's provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<InMemoryComponentSpec>,
    /// The fake API server of a control plane (condition `APIServerProvisioned`), timed from
    /// the Node's provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server: Option<InMemoryComponentSpec>,
    /// The fake etcd member of a control plane (condition `EtcdProvisioned`), timed from the
    /// Node's provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<InMemoryComponentSpec>,
}

/// One fake part of an in-memory machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryComponentSpec {
    /// How the part is provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<InMemoryProvisioningSettings>,
}

/// Timing of the provisioning of one fake part.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryProvisioningSettings {
    /// How long provisioning takes, as a Go duration (for example `10s`).
    pub startup_duration: String,
    /// Randomness added to the duration: up to this fraction of it (a float as a string).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub startup_jitter: String,
}

/// Observed state of a DevMachine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineStatus {
    /// Current observations of the DevMachine: with the docker backend, those of a
    /// DockerMachine (`Ready`, `ContainerProvisioned`, `BootstrapCompleted`, `Paused`...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Progress of the initial provisioning, as the Cluster API contract defines it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub initialization: DockerMachineInitializationStatus,
    /// Addresses of the node: its host name, then an internal and an external address per IP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Failure domain the node runs in: the owner Machine's `spec.failureDomain`. (Added after
    /// the CAPD 1.12 schema, as later CAPD releases have it.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,
    /// Fields kept for v1beta1 clients; removed together with the v1beta1 API.
    #[serde(default, skip_serializing_if = "is_default")]
    pub deprecated: DeprecatedStatus,
}

impl DevMachineSpec {
    /// The DockerMachine spec of the docker backend, `None` for any other backend.
    pub fn docker(&self) -> Option<DockerMachineSpec> {
        self.backend
            .docker
            .as_ref()
            .map(|docker| DockerMachineSpec {
                provider_id: self.provider_id.clone(),
                custom_image: docker.custom_image.clone(),
                pre_load_images: docker.pre_load_images.clone(),
                extra_mounts: docker.extra_mounts.clone(),
                bootstrap_timeout: docker.bootstrap_timeout.clone(),
            })
    }
}

impl From<&DevMachineStatus> for DockerMachineStatus {
    fn from(status: &DevMachineStatus) -> Self {
        DockerMachineStatus {
            conditions: status.conditions.clone(),
            initialization: status.initialization.clone(),
            // CAPD 1.14 removed `status.backend`: the weight annotation says it now.
            load_balancer_configured: false,
            addresses: status.addresses.clone(),
            failure_domain: status.failure_domain.clone(),
            deprecated: status.deprecated.clone(),
        }
    }
}

impl From<&DockerMachineStatus> for DevMachineStatus {
    fn from(status: &DockerMachineStatus) -> Self {
        DevMachineStatus {
            conditions: status.conditions.clone(),
            initialization: status.initialization.clone(),
            addresses: status.addresses.clone(),
            failure_domain: status.failure_domain.clone(),
            deprecated: status.deprecated.clone(),
        }
    }
}

/// Desired state of a DevMachineTemplate.
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachineTemplate",
    plural = "devmachinetemplates",
    namespaced,
    status = "DevMachineTemplateStatus",
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
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

/// Contents of a DevMachineTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineTemplateResource {
    /// Labels and annotations given to DevMachines created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DevMachines created from the template.
    pub spec: DevMachineSpec,
}

/// Observed state of a DevMachineTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineTemplateStatus {
    /// Resources (`cpu`, `memory`) one machine of this template provides, so the cluster
    /// autoscaler can scale a node group up from zero.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "crate::api::schema::quantity_map")]
    pub capacity: BTreeMap<String, Quantity>,
}
