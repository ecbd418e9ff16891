//! Wire types of the webhook protocols: `admission.k8s.io/v1` AdmissionReview and
//! `apiextensions.k8s.io/v1` ConversionReview. Only the fields this provider reads are decoded;
//! responses carry exactly what the API server expects.
//!
//! The ConversionReview types are not kube's [`kube::core::conversion`] ones, because those change
//! what this server writes: kube's `Status` drops the `apiVersion`, `kind` and `metadata` of the
//! response's `result`, and a review kube's types refuse gets another message (its `apiVersion`
//! and `kind` are required fields, a flattened `TypeMeta`, so a review without them is a decode
//! error rather than "unsupported review", and a truncated body reads "invalid type: sequence"
//! instead of "EOF while parsing"). `webhooks::tests::conversion` pins our bytes and shows the
//! differences.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `apiVersion` of the AdmissionReview this server speaks.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";
/// `apiVersion` of the ConversionReview this server speaks.
pub const CONVERSION_API_VERSION: &str = "apiextensions.k8s.io/v1";

/// An AdmissionReview as the API server sends it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewRequest {
    /// Must be [`ADMISSION_API_VERSION`].
    #[serde(default)]
    pub api_version: String,
    /// Must be `AdmissionReview`.
    #[serde(default)]
    pub kind: String,
    /// The request; absent in a malformed review.
    #[serde(default)]
    pub request: Option<AdmissionRequest>,
}

/// Group, version and kind of the object under review.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionKind {
    /// API group (`infrastructure.cluster.x-k8s.io`).
    #[serde(default)]
    pub group: String,
    /// API version (`v1beta2`).
    #[serde(default)]
    pub version: String,
    /// Kind (`DockerCluster`).
    #[serde(default)]
    pub kind: String,
}

/// The part of an AdmissionRequest the rules need.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Identifies the request; echoed in the response.
    pub uid: String,
    /// Type of the object (after conversion to the version the webhook registered for).
    pub kind: GroupVersionKind,
    /// Name of the object (empty on create with `generateName`).
    #[serde(default)]
    pub name: String,
    /// Namespace of the object.
    #[serde(default)]
    pub namespace: String,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// The object as it will be stored (absent on delete).
    #[serde(default)]
    pub object: Option<Value>,
    /// The object before an update or delete.
    #[serde(default)]
    pub old_object: Option<Value>,
    /// Nothing will be persisted.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// An AdmissionReview as this server answers it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewResponse {
    /// Always [`ADMISSION_API_VERSION`].
    pub api_version: &'static str,
    /// Always `AdmissionReview`.
    pub kind: &'static str,
    /// The verdict.
    pub response: AdmissionResponse,
}

impl AdmissionReviewResponse {
    /// Wraps `response` in a review.
    pub fn new(response: AdmissionResponse) -> Self {
        Self {
            api_version: ADMISSION_API_VERSION,
            kind: "AdmissionReview",
            response,
        }
    }
}

/// The verdict on one admission request.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// Base64 of a JSON Patch to apply to the object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// `JSONPatch` when `patch` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// Messages `kubectl` shows the user (`Warning: ...`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl AdmissionResponse {
    /// Lets request `uid` through unchanged.
    pub fn allow(uid: &str) -> Self {
        Self {
            uid: uid.to_string(),
            allowed: true,
            status: None,
            patch: None,
            patch_type: None,
            warnings: Vec::new(),
        }
    }

    /// Refuses request `uid` with `status`.
    pub fn deny(uid: &str, status: Status) -> Self {
        Self {
            uid: uid.to_string(),
            allowed: false,
            status: Some(status),
            patch: None,
            patch_type: None,
            warnings: Vec::new(),
        }
    }
}

/// A ConversionReview as the API server sends it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionReviewRequest {
    /// Must be [`CONVERSION_API_VERSION`].
    #[serde(default)]
    pub api_version: String,
    /// Must be `ConversionReview`.
    #[serde(default)]
    pub kind: String,
    /// The request; absent in a malformed review.
    #[serde(default)]
    pub request: Option<ConversionRequest>,
}

/// Objects to convert and the version wanted.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionRequest {
    /// Identifies the request; echoed in the response.
    pub uid: String,
    /// `group/version` every object must be converted to.
    #[serde(rename = "desiredAPIVersion")]
    pub desired_api_version: String,
    /// The objects, each with its own `apiVersion`.
    #[serde(default)]
    pub objects: Vec<Value>,
}

/// A ConversionReview as this server answers it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionReviewResponse {
    /// Always [`CONVERSION_API_VERSION`].
    pub api_version: &'static str,
    /// Always `ConversionReview`.
    pub kind: &'static str,
    /// The outcome.
    pub response: ConversionResponse,
}

/// The outcome of one conversion request: every object converted, or a failure.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionResponse {
    /// The request's uid.
    pub uid: String,
    /// The objects in the desired version, in request order (empty on failure).
    pub converted_objects: Vec<Value>,
    /// `Success`, or `Failure` with a message.
    pub result: Status,
}

impl ConversionReviewResponse {
    /// Every object of request `uid` converted.
    pub fn success(uid: &str, converted_objects: Vec<Value>) -> Self {
        Self::new(ConversionResponse {
            uid: uid.to_string(),
            converted_objects,
            result: Status {
                status: Some("Success".into()),
                ..Default::default()
            },
        })
    }

    /// Request `uid` failed because of `message`.
    pub fn failure(uid: &str, message: String) -> Self {
        Self::new(ConversionResponse {
            uid: uid.to_string(),
            converted_objects: Vec::new(),
            result: Status {
                status: Some("Failure".into()),
                message: Some(message),
                ..Default::default()
            },
        })
    }

    fn new(response: ConversionResponse) -> Self {
        Self {
            api_version: CONVERSION_API_VERSION,
            kind: "ConversionReview",
            response,
        }
    }
}

/// A `Failure` status with HTTP-like `code` (400 for malformed requests, 500 for our faults).
pub fn failure_status(code: u16, message: String) -> Status {
    let reason = match code {
        400 => "BadRequest",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        _ => "InternalError",
    };
    Status {
        status: Some("Failure".into()),
        code: Some(i32::from(code)),
        reason: Some(reason.into()),
        message: Some(message),
        ..Default::default()
    }
}
