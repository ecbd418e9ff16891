//! DockerCluster and DockerClusterTemplate in the deprecated v1beta1 shape.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    APIEndpoint, DockerLoadBalancer, FailureDomains, TemplateObjectMeta, V1Beta2Status,
};
use crate::api::conditions::V1Beta1Condition;
use crate::api::is_default;

/// Desired state of a DockerCluster (v1beta1).
// Several `printcolumn(type_ = ...)` entries trip clippy's duplicated-attribute check.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DockerCluster",
    plural = "dockerclusters",
    namespaced,
    status = "DockerClusterStatus",
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
        description = "Time since the DockerCluster was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterSpec {
    /// Endpoint of the workload cluster's API server; the controller fills the host with the
    /// load balancer's address when it is empty.
    #[serde(default)]
    pub control_plane_endpoint: APIEndpoint,
    /// Failure domains to advertise, by name. The controller copies them into the status.
    #[serde(default, skip_serializing_if = "FailureDomains::is_empty")]
    pub failure_domains: FailureDomains,
    /// Settings of the load balancer container in front of the control plane.
    #[serde(default, skip_serializing_if = "is_default")]
    pub load_balancer: DockerLoadBalancer,
}

/// Observed state of a DockerCluster (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterStatus {
    /// True once the cluster infrastructure is ready.
    #[serde(default)]
    pub ready: bool,
    /// Failure domains copied from the spec, by name.
    #[serde(default, skip_serializing_if = "FailureDomains::is_empty")]
    pub failure_domains: FailureDomains,
    /// Current observations in the legacy (v1beta1) form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
    /// The v1beta2 conditions, for v1beta1 clients that already read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
}

/// Desired state of a DockerClusterTemplate (v1beta1).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DockerClusterTemplate",
    plural = "dockerclustertemplates",
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
        description = "Time since the DockerClusterTemplate was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterTemplateSpec {
    /// The DockerCluster to create from this template.
    pub template: DockerClusterTemplateResource,
}

/// Contents of a DockerClusterTemplate (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterTemplateResource {
    /// Labels and annotations given to DockerClusters created from the template.
    #[serde(default, skip_serializing_if = "is_default")]
    pub metadata: TemplateObjectMeta,
    /// Spec of DockerClusters created from the template.
    pub spec: DockerClusterSpec,
}
