//! A read view of Gardener's `Infrastructure` (`extensions.gardener.cloud/v1alpha1`) and the
//! `status` fields this extension owns.
//!
//! The CRD is Gardener's, not ours: these types carry only the fields the contract documents and
//! ignore the rest, so a newer Gardener adding fields never breaks the watch. The controller reads
//! them through [`kube::core::DeserializeGuard`], so one undecodable object cannot stop it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::OPERATION_ANNOTATION;

/// `spec` of an `Infrastructure`: what Gardener asks the provider to set up.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "extensions.gardener.cloud",
    version = "v1alpha1",
    kind = "Infrastructure",
    plural = "infrastructures",
    namespaced,
    status = "InfrastructureObjectStatus",
    schema = "disabled",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureSpec {
    /// Provider type; this extension acts only on [`super::EXTENSION_TYPE`].
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Extension class (`shoot`, `seed`, `garden`); not used by this provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Region; Docker has none, so it is not used.
    #[serde(default)]
    pub region: String,
    /// Reference to the cloud provider credentials; the Docker engine needs none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    /// Our [`InfrastructureConfig`](super::InfrastructureConfig), embedded as raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_config: Option<Value>,
}

/// A reference to a Secret by namespace and name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretReference {
    /// Secret name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Secret namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The `status` of an `Infrastructure`: the fields written by this extension, and the others
/// (conditions, resources, ...) as read. Every status write carries all of ours (server-side
/// apply removes owned fields a later apply omits) and none of the others: they are kept only to
/// compare whole statuses, as Gardener's predicate does.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureObjectStatus {
    /// Our [`InfrastructureStatus`](super::InfrastructureStatus), embedded as raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_status: Option<Value>,
    /// The IPv4 subnet of the nodes network.
    #[serde(default, rename = "nodesCIDR", skip_serializing_if = "Option::is_none")]
    pub nodes_cidr: Option<String>,
    /// The last operation on the object and how it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperation>,
    /// The last error, cleared by the next success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// The `metadata.generation` the last finished operation acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// What a migration to another seed needs: our [`InfrastructureState`](super::InfrastructureState).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// The node network's ranges, every IP family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<InfrastructureStatusNetworking>,
    /// The fields written by others, as read; never written.
    #[serde(flatten, skip_serializing)]
    pub others: BTreeMap<String, Value>,
}

/// `status.networking` of an `Infrastructure`: only `nodes` is ours (pods and services are left
/// to their writers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InfrastructureStatusNetworking {
    /// Every subnet of the nodes network, IPv4 first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The fields written by others (`pods`, `services`, ...), as read; never written.
    #[serde(flatten, skip_serializing)]
    pub others: BTreeMap<String, Value>,
}

/// Gardener's `LastOperation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastOperation {
    /// What happened, for humans.
    #[serde(default)]
    pub description: String,
    /// When the operation last changed (state, type, progress or description); the Unix epoch
    /// when another writer left it out.
    #[serde(default = "epoch")]
    pub last_update_time: Time,
    /// Progress in percent.
    #[serde(default)]
    pub progress: i32,
    /// `Processing`, `Succeeded`, `Error`, ...
    #[serde(default)]
    pub state: String,
    /// `Create`, `Reconcile`, `Delete`, `Migrate` or `Restore`.
    #[serde(default, rename = "type")]
    pub type_: String,
}

/// Gardener's `LastError`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    /// What went wrong, for humans.
    #[serde(default)]
    pub description: String,
    /// Well-known error codes such as `ERR_CONFIGURATION_PROBLEM`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<String>,
    /// When the latest failure was reported (every failed attempt moves it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// The fields written by others (`taskID`, ...), as read; never written.
    #[serde(flatten, skip_serializing)]
    pub others: BTreeMap<String, Value>,
}

fn epoch() -> Time {
    Time(jiff::Timestamp::UNIX_EPOCH)
}

impl Infrastructure {
    /// The object's status, or an empty one.
    pub fn status_or_default(&self) -> InfrastructureObjectStatus {
        self.status.clone().unwrap_or_default()
    }
}

/// The value of the `gardener.cloud/operation` annotation.
pub fn operation_annotation(infra: &Infrastructure) -> Option<&str> {
    infra
        .annotations()
        .get(OPERATION_ANNOTATION)
        .map(String::as_str)
}
