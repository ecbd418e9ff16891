//! DockerCluster and DockerClusterTemplate (v1beta2, the hub and storage version).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::TemplateObjectMeta;
use super::common::{APIEndpoint, DeprecatedStatus, DockerLoadBalancer, FailureDomain};
use crate::api::conditions::Condition;
use crate::api::is_default;

/// Desired state of a DockerCluster: the infrastructure (network and load balancer) shared by
/// the machines of one workload cluster.
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerCluster",
    plural = "dockerclusters",
    namespaced,
    status = "DockerClusterStatus",
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
        description = "Time since the DockerCluster was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterSpec {
    /// Endpoint of the workload cluster's API server. Left empty, the controller fills the host
    /// with the load balancer's address; the port defaults to 6443.
    #[serde(default, skip_serializing_if = "APIEndpoint::is_zero")]
    pub control_plane_endpoint: APIEndpoint,
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

/// Observed state of a DockerCluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterStatus {
    /// Current observations of the DockerCluster: `Ready`, `LoadBalancerAvailable` and
    /// `Paused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Progress of the initial provisioning, as the Cluster API contract defines it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub initialization: DockerClusterInitializationStatus,
    /// Failure domains copied from the spec, for Cluster API to spread machines over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 100))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub failure_domains: Vec<FailureDomain>,
    /// Fields kept for v1beta1 clients; removed together with the v1beta1 API.
    #[serde(default, skip_serializing_if = "is_default")]
    pub deprecated: DeprecatedStatus,
}

/// Initial-provisioning progress of a DockerCluster (Cluster API contract fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct DockerClusterInitializationStatus {
    /// True once the cluster infrastructure (network, load balancer, endpoint) is ready.
    /// Cluster API waits for it before creating machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// Desired state of a DockerClusterTemplate.
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerClusterTemplate",
    plural = "dockerclustertemplates",
    namespaced,
    category = "cluster-api",
    schema = "disabled",
    derive = "PartialEq",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DockerClusterTemplate was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterTemplateSpec {
    /// The DockerCluster to create from this template.
    pub template: DockerClusterTemplateResource,
}

/// Contents of a DockerClusterTemplate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterTemplateResource {
    /// Labels and annotations given to DockerClusters created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DockerClusters created from the template.
    pub spec: DockerClusterSpec,
}
