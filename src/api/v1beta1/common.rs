//! Sub-types of the v1beta1 kinds. Types whose shape did not change are the v1beta2 ones.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::conditions::Condition;
use crate::api::is_default;

pub use crate::api::v1beta2::{
    DockerLoadBalancer, LocalObjectReference, MachineAddress, MachineAddressType, Mount,
};

/// Address and port of the workload cluster's API server (v1beta1: both always present).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::upper_case_acronyms)]
pub struct APIEndpoint {
    /// Host name or IP address of the API server; empty until known.
    #[serde(default)]
    pub host: String,
    /// TCP port of the API server; 0 until known.
    #[serde(default)]
    #[schemars(schema_with = "crate::api::schema::plain_integer")]
    pub port: i64,
}

/// A failure domain in the v1beta1 map form (the map key is its name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainSpec {
    /// Whether control plane machines may be placed in this failure domain.
    #[serde(default, skip_serializing_if = "is_default")]
    pub control_plane: bool,
    /// Free-form key/value data about the failure domain for infrastructure providers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// Failure domains by name (v1beta1 form).
pub type FailureDomains = BTreeMap<String, FailureDomainSpec>;

/// Labels and annotations that a template stamps onto the objects created from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateObjectMeta {
    /// Labels copied onto created objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations copied onto created objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The v1beta2 conditions, carried inside a v1beta1 status for clients that read them early.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta2Status {
    /// Current observations in the v1beta2 (metav1) form, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
