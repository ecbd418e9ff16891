//! DevCluster and DevClusterTemplate (v1beta2, the hub and storage version): CAPD's successor
//! API, where the infrastructure is chosen per object by `spec.backend`. The `docker` backend
//! is a DockerCluster under another name; the controllers serve both through one view
//! (`crate::controllers::kinds`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{APIEndpoint, DockerLoadBalancer, FailureDomain, TemplateObjectMeta};
use super::dockercluster::{DockerClusterSpec, DockerClusterStatus};
use crate::api::is_default;

/// Desired state of a DevCluster: the infrastructure of one workload cluster, made by the
/// backend named in `spec.backend`.
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevCluster",
    plural = "devclusters",
    namespaced,
    status = "DevClusterStatus",
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
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DevCluster was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterSpec {
    /// Endpoint of the workload cluster's API server. With the docker backend, left empty, the
    /// controller fills the host with the load balancer's address; the port defaults to 6443.
    #[serde(default, skip_serializing_if = "APIEndpoint::is_zero")]
    pub control_plane_endpoint: APIEndpoint,
    /// The backend that makes the infrastructure; `docker` when none is set.
    pub backend: DevClusterBackendSpec,
}

/// The backends of a DevCluster: exactly one is expected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterBackendSpec {
    /// Docker containers: a network and an haproxy load balancer, as a DockerCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerClusterBackendSpec>,
    /// In-memory fakes of CAPD's scale tests: a fake workload cluster served by the manager,
    /// whose control plane endpoint is the manager's address (`POD_IP`) and a port of
    /// 20000-24000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_memory: Option<InMemoryClusterBackendSpec>,
}

/// The docker backend of a DevCluster: the settings of a DockerCluster's spec but the endpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterBackendSpec {
    /// Failure domains to advertise. Docker has no real zones, so the controller only copies
    /// this list into the status, where Cluster API uses it to spread machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 100))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub failure_domains: Vec<FailureDomain>,
    /// Settings of the load balancer container in front of the control plane.
    #[serde(default, skip_serializing_if = "is_default")]
    pub load_balancer: DockerLoadBalancer,
}

/// The in-memory backend of a DevCluster (no settings).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InMemoryClusterBackendSpec {}

/// Observed state of a DevCluster: the same fields as a DockerCluster's.
pub type DevClusterStatus = DockerClusterStatus;

impl DevClusterSpec {
    /// The DockerCluster spec of the docker backend, `None` for any other backend.
    pub fn docker(&self) -> Option<DockerClusterSpec> {
        self.backend
            .docker
            .as_ref()
            .map(|docker| DockerClusterSpec {
                control_plane_endpoint: self.control_plane_endpoint.clone(),
                failure_domains: docker.failure_domains.clone(),
                load_balancer: docker.load_balancer.clone(),
            })
    }
}

/// Desired state of a DevClusterTemplate.
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevClusterTemplate",
    plural = "devclustertemplates",
    namespaced,
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
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

/// Contents of a DevClusterTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterTemplateResource {
    /// Labels and annotations given to DevClusters created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DevClusters created from the template.
    pub spec: DevClusterSpec,
}
