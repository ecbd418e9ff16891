//! The retired versions `v1alpha3` and `v1alpha4`, in CAPD 1.12's shapes. They are never served
//! and our CRDs do not list them (CAPD 1.13 removed them); they exist for CAPD 1.10 to 1.12's
//! CRDs, which list them unserved, while this manager serves their conversion webhook: the API
//! server keeps a watch cache for every version a CRD lists, served or not, and fills it by
//! converting every stored object into that version, and an installation upgraded from CAPD may
//! still hold objects stored in them (see [`super::conversion`]). [`super::conversion`] converts them straight to and from the
//! v1beta2 hub, as CAPD 1.12 does.
//!
//! The two versions have the same shapes except the DockerCluster spec (`loadBalancer` came in
//! v1alpha4) and DockerClusterTemplate (v1alpha4 only). Their sub-types are those of v1beta1
//! without the fields v1beta1 added.

use kube::core::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::conditions::V1Beta1Condition;
use super::is_default;
use super::v1beta1::{APIEndpoint, FailureDomains};
use super::v1beta2::{
    DockerMachinePoolInstanceStatus, DockerMachinePoolSpec, MachineAddress, Mount,
};

/// The first retired version.
pub const V1ALPHA3: &str = "v1alpha3";
/// The second retired version.
pub const V1ALPHA4: &str = "v1alpha4";

/// One object of a retired version: `apiVersion` says which.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Object<Spec, Status> {
    /// `infrastructure.cluster.x-k8s.io/v1alpha3` or `.../v1alpha4`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: Spec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

/// A kind without a status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NoStatus {}

/// DockerCluster spec in v1alpha3 (no load balancer settings yet).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterSpecV1Alpha3 {
    /// Endpoint of the workload cluster's API server.
    #[serde(default)]
    pub control_plane_endpoint: APIEndpoint,
    /// Failure domains, by name.
    #[serde(default, skip_serializing_if = "FailureDomains::is_empty")]
    pub failure_domains: FailureDomains,
}

/// DockerCluster spec in v1alpha4.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterSpec {
    /// Endpoint of the workload cluster's API server.
    #[serde(default)]
    pub control_plane_endpoint: APIEndpoint,
    /// Failure domains, by name.
    #[serde(default, skip_serializing_if = "FailureDomains::is_empty")]
    pub failure_domains: FailureDomains,
    /// The load balancer's image (v1alpha4 has no custom haproxy configuration).
    #[serde(default, skip_serializing_if = "is_default")]
    pub load_balancer: ImageMeta,
}

/// The load balancer's image in v1alpha4.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageMeta {
    /// Image repository.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_repository: String,
    /// Image tag.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_tag: String,
}

/// DockerCluster status (both versions): v1beta1's without `v1beta2`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterStatus {
    /// True once the cluster infrastructure is ready.
    #[serde(default)]
    pub ready: bool,
    /// Failure domains, by name.
    #[serde(default, skip_serializing_if = "FailureDomains::is_empty")]
    pub failure_domains: FailureDomains,
    /// Conditions in the Cluster API v1alpha shape (the v1beta1 one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
}

/// DockerClusterTemplate spec (v1alpha4 only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterTemplateSpec {
    /// The DockerCluster to create (no template metadata in v1alpha4).
    #[serde(default)]
    pub template: TemplateResource<DockerClusterSpec>,
}

/// A template's `spec.template`: only a spec in the retired versions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateResource<Spec> {
    /// Spec of the objects made from the template.
    #[serde(default)]
    pub spec: Spec,
}

/// DockerMachine spec (both versions): v1beta1's without `bootstrapTimeout`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineSpec {
    /// Provider ID of the node.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// Node image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub custom_image: String,
    /// Images to load into the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_load_images: Vec<String>,
    /// Extra mounts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_mounts: Vec<Mount>,
}

/// DockerMachine status (both versions): v1beta1's without `v1beta2`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineStatus {
    /// True once the machine's infrastructure is ready.
    #[serde(default)]
    pub ready: bool,
    /// True once the load balancer routes to this control plane machine.
    #[serde(default, skip_serializing_if = "is_default")]
    pub load_balancer_configured: bool,
    /// The node's addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Conditions in the Cluster API v1alpha shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
}

/// DockerMachineTemplate spec (both versions).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineTemplateSpec {
    /// The DockerMachine to create (no template metadata in the retired versions).
    #[serde(default)]
    pub template: TemplateResource<DockerMachineSpec>,
}

/// DockerMachinePool status (both versions): v1beta2's without `infrastructureMachineKind`,
/// with the conditions in the v1alpha shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolStatus {
    /// True once every instance is ready.
    #[serde(default)]
    pub ready: bool,
    /// Number of instances.
    #[serde(default)]
    pub replicas: i32,
    /// Generation last reconciled.
    #[serde(default, skip_serializing_if = "is_default")]
    pub observed_generation: i64,
    /// The instances.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<DockerMachinePoolInstanceStatus>,
    /// Conditions in the Cluster API v1alpha shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
}

/// A DockerCluster in v1alpha3.
pub type DockerClusterV1Alpha3 = Object<DockerClusterSpecV1Alpha3, DockerClusterStatus>;
/// A DockerCluster in v1alpha4.
pub type DockerCluster = Object<DockerClusterSpec, DockerClusterStatus>;
/// A DockerClusterTemplate in v1alpha4.
pub type DockerClusterTemplate = Object<DockerClusterTemplateSpec, NoStatus>;
/// A DockerMachine in v1alpha3 or v1alpha4.
pub type DockerMachine = Object<DockerMachineSpec, DockerMachineStatus>;
/// A DockerMachineTemplate in v1alpha3 or v1alpha4.
pub type DockerMachineTemplate = Object<DockerMachineTemplateSpec, NoStatus>;
/// A DockerMachinePool in v1alpha3 or v1alpha4 (the spec is v1beta2's: it never changed).
pub type DockerMachinePool = Object<DockerMachinePoolSpec, DockerMachinePoolStatus>;
