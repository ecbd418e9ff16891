//! The admission endpoints: decode an AdmissionReview, run the defaulting or validation rules of
//! the endpoint's kind, and answer with a JSON Patch or a verdict. Pure (no I/O), so every path
//! is unit-tested without a server.

use base64::Engine;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::field::{FieldError, invalid_status};
use super::review::{
    ADMISSION_API_VERSION, AdmissionRequest, AdmissionResponse, AdmissionReviewRequest,
    AdmissionReviewResponse, failure_status,
};
use super::rules::{self, Context};
use super::{Endpoint, Kind, Reply, Settings};
use crate::api::{GROUP, v1beta2};
use crate::runtime::error_chain;

/// Why an admission request could not be judged (answered as a 400 denial).
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The body is not an AdmissionReview.
    #[error("failed to decode the AdmissionReview")]
    Decode(#[source] serde_json::Error),
    /// The review is of another version or kind.
    #[error(
        "unsupported review {api_version}/{kind}: this webhook speaks {ADMISSION_API_VERSION} AdmissionReview"
    )]
    UnsupportedReview {
        /// `apiVersion` of the review.
        api_version: String,
        /// `kind` of the review.
        kind: String,
    },
    /// The review has no `request`.
    #[error("the AdmissionReview has no request")]
    MissingRequest,
    /// The object is not the kind and version this endpoint handles.
    #[error(
        "this endpoint handles {expected} {GROUP}/{version}, got {got_kind} {got_group}/{got_version} \
         (register it with matchPolicy: Equivalent so the API server converts)",
        version = v1beta2::VERSION
    )]
    WrongKind {
        /// Kind of the endpoint.
        expected: &'static str,
        /// Group of the request.
        got_group: String,
        /// Version of the request.
        got_version: String,
        /// Kind of the request.
        got_kind: String,
    },
    /// The operation is not one admission knows.
    #[error("unknown operation {0:?}")]
    UnknownOperation(String),
    /// `object` (or `oldObject` on update) is missing.
    #[error("the request has no {0}")]
    MissingObject(&'static str),
    /// The object does not decode as the endpoint's kind.
    #[error("failed to decode {which} as {kind} {version}", version = v1beta2::VERSION)]
    DecodeObject {
        /// `object` or `oldObject`.
        which: &'static str,
        /// Kind expected.
        kind: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The defaulted object could not be encoded.
    #[error("failed to encode the defaulted {0}")]
    Encode(&'static str, #[source] serde_json::Error),
}

/// Answers one request to `endpoint`. Never fails: a malformed request gets a denial with code
/// 400, and HTTP status 400 when not even its uid could be read.
pub fn review(endpoint: Endpoint, settings: &Settings, body: &[u8]) -> Reply {
    let request = match parse(body) {
        Ok(request) => request,
        Err(error) => return refuse(400, error_chain(&error)),
    };
    let response = match admit(endpoint, settings, &request) {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(
                endpoint = %endpoint.path(),
                uid = %request.uid,
                error = %error_chain(&error),
                "Refusing malformed admission request"
            );
            AdmissionResponse::deny(&request.uid, failure_status(400, error_chain(&error)))
        }
    };
    Reply::json(200, &AdmissionReviewResponse::new(response))
}

/// A review refusing a request whose uid could not be read, with HTTP `status` (400 for a body
/// that is no AdmissionReview, 413 for one too large).
pub fn refuse(status: u16, message: String) -> Reply {
    tracing::warn!(status, error = %message, "Refusing unreadable admission request");
    let response = AdmissionResponse::deny("", failure_status(status, message));
    Reply::json(status, &AdmissionReviewResponse::new(response))
}

fn parse(body: &[u8]) -> Result<AdmissionRequest, AdmissionError> {
    let review: AdmissionReviewRequest =
        serde_json::from_slice(body).map_err(AdmissionError::Decode)?;
    if review.api_version != ADMISSION_API_VERSION || review.kind != "AdmissionReview" {
        return Err(AdmissionError::UnsupportedReview {
            api_version: review.api_version,
            kind: review.kind,
        });
    }
    review.request.ok_or(AdmissionError::MissingRequest)
}

fn admit(
    endpoint: Endpoint,
    settings: &Settings,
    request: &AdmissionRequest,
) -> Result<AdmissionResponse, AdmissionError> {
    let kind = endpoint.kind();
    let gvk = &request.kind;
    if gvk.group != GROUP || gvk.version != v1beta2::VERSION || gvk.kind != kind.name() {
        return Err(AdmissionError::WrongKind {
            expected: kind.name(),
            got_group: gvk.group.clone(),
            got_version: gvk.version.clone(),
            got_kind: gvk.kind.clone(),
        });
    }
    let update = match request.operation.as_str() {
        "CREATE" => false,
        "UPDATE" => true,
        // Not registered for these; nothing to check.
        "DELETE" | "CONNECT" => return Ok(AdmissionResponse::allow(&request.uid)),
        other => return Err(AdmissionError::UnknownOperation(other.to_string())),
    };
    let context = Context {
        cluster_topology: settings.cluster_topology,
        dry_run: request.dry_run.unwrap_or(false),
    };
    // Where a Dev kind's spec keeps `backend`, which the CRD requires: mutating webhooks run
    // before schema validation, so a manifest without it is defaulted rather than refused.
    const BACKEND: &[&str] = &["spec", "backend"];
    const TEMPLATE_BACKEND: &[&str] = &["spec", "template", "spec", "backend"];
    match endpoint {
        Endpoint::Mutate(Kind::DockerCluster) => {
            mutate(request, kind.name(), &[], rules::default_docker_cluster)
        }
        Endpoint::Mutate(Kind::DockerClusterTemplate) => mutate(
            request,
            kind.name(),
            &[],
            rules::default_docker_cluster_template,
        ),
        Endpoint::Mutate(Kind::DevCluster) => {
            mutate(request, kind.name(), BACKEND, rules::default_dev_cluster)
        }
        Endpoint::Mutate(Kind::DevClusterTemplate) => mutate(
            request,
            kind.name(),
            TEMPLATE_BACKEND,
            rules::default_dev_cluster_template,
        ),
        Endpoint::Mutate(Kind::DevMachine) => {
            mutate(request, kind.name(), BACKEND, rules::default_dev_machine)
        }
        Endpoint::Mutate(Kind::DevMachineTemplate) => mutate(
            request,
            kind.name(),
            TEMPLATE_BACKEND,
            rules::default_dev_machine_template,
        ),
        // Machines and pools have nothing to default (CAPD registers no defaulting for them).
        Endpoint::Mutate(
            Kind::DockerMachine
            | Kind::DockerMachineTemplate
            | Kind::DockerMachinePool
            | Kind::DockerMachinePoolTemplate
            | Kind::DevMachinePool
            | Kind::DevMachinePoolTemplate,
        ) => Ok(AdmissionResponse::allow(&request.uid)),
        Endpoint::Validate(Kind::DockerCluster) => {
            validate(request, kind.name(), update, rules::validate_docker_cluster)
        }
        Endpoint::Validate(Kind::DockerClusterTemplate) => {
            validate(request, kind.name(), update, |new, old| {
                rules::validate_docker_cluster_template(new, old, &context)
            })
        }
        Endpoint::Validate(Kind::DockerMachine) => {
            validate(request, kind.name(), update, rules::validate_docker_machine)
        }
        Endpoint::Validate(Kind::DockerMachineTemplate) => {
            validate(request, kind.name(), update, |new, old| {
                rules::validate_docker_machine_template(new, old, &context)
            })
        }
        Endpoint::Validate(Kind::DockerMachinePool) => validate(
            request,
            kind.name(),
            update,
            rules::validate_docker_machine_pool,
        ),
        Endpoint::Validate(Kind::DockerMachinePoolTemplate) => {
            validate(request, kind.name(), update, |new, old| {
                rules::validate_docker_machine_pool_template(new, old, &context)
            })
        }
        Endpoint::Validate(Kind::DevCluster) => {
            validate(request, kind.name(), update, rules::validate_dev_cluster)
        }
        Endpoint::Validate(Kind::DevClusterTemplate) => {
            validate(request, kind.name(), update, |new, old| {
                rules::validate_dev_cluster_template(new, old, &context)
            })
        }
        Endpoint::Validate(Kind::DevMachine) => {
            validate(request, kind.name(), update, rules::validate_dev_machine)
        }
        Endpoint::Validate(Kind::DevMachineTemplate) => {
            validate(request, kind.name(), update, |new, old| {
                rules::validate_dev_machine_template(new, old, &context)
            })
        }
        Endpoint::Validate(Kind::DevMachinePool) => validate(
            request,
            kind.name(),
            update,
            rules::validate_dev_machine_pool,
        ),
        Endpoint::Validate(Kind::DevMachinePoolTemplate) => {
            validate(request, kind.name(), update, |new, old| {
                rules::validate_dev_machine_pool_template(new, old, &context)
            })
        }
    }
}

fn decode<K: DeserializeOwned>(
    value: Option<&Value>,
    which: &'static str,
    kind: &'static str,
) -> Result<K, AdmissionError> {
    let value = value.ok_or(AdmissionError::MissingObject(which))?;
    K::deserialize(value).map_err(|source| AdmissionError::DecodeObject {
        which,
        kind,
        source,
    })
}

/// Defaults the object and answers with the JSON Patch from the object as sent to the defaulted
/// one. `required` is the path of an object the type requires that defaulting fills in: it is
/// added empty (with the objects above it) when the request lacks it.
fn mutate<K: DeserializeOwned + Serialize>(
    request: &AdmissionRequest,
    kind: &'static str,
    required: &[&str],
    default: fn(&mut K) -> Vec<String>,
) -> Result<AdmissionResponse, AdmissionError> {
    let raw = request
        .object
        .as_ref()
        .ok_or(AdmissionError::MissingObject("object"))?;
    let mut sent = raw.clone();
    insert_empty_objects(&mut sent, required);
    let mut object: K = decode(Some(&sent), "object", kind)?;
    let encode = |o: &K| serde_json::to_value(o).map_err(|e| AdmissionError::Encode(kind, e));
    let before = encode(&object)?;
    let warnings = default(&mut object);
    let after = encode(&object)?;
    // Diffing the typed forms limits the patch to what defaulting changed (after adding what
    // was missing); should the sent object differ in shape so that this patch does not apply,
    // diff against it directly.
    let mut patch = json_patch::diff(raw, &sent);
    patch.0.extend(json_patch::diff(&before, &after).0);
    if json_patch::patch(&mut raw.clone(), &patch).is_err() {
        patch = json_patch::diff(raw, &after);
    }
    let mut response = AdmissionResponse::allow(&request.uid);
    response.warnings = warnings;
    if !patch.is_empty() {
        let bytes = serde_json::to_vec(&patch).map_err(|e| AdmissionError::Encode(kind, e))?;
        response.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
        response.patch_type = Some("JSONPatch");
    }
    Ok(response)
}

/// Adds an empty object at each level of `path` that `value` lacks (or has as `null`); stops at
/// a value that is not an object (decoding then reports it).
fn insert_empty_objects(value: &mut Value, path: &[&str]) {
    let mut at = value;
    for key in path {
        let Value::Object(map) = at else {
            return;
        };
        at = map.entry(key.to_string()).or_insert(Value::Null);
        if at.is_null() {
            *at = Value::Object(Default::default());
        }
    }
}

/// Runs `rule` on the new object (and the old one on update); denies with every error found.
fn validate<K: DeserializeOwned + kube::Resource<DynamicType = ()>>(
    request: &AdmissionRequest,
    kind: &'static str,
    update: bool,
    rule: impl FnOnce(&K, Option<&K>) -> Vec<FieldError>,
) -> Result<AdmissionResponse, AdmissionError> {
    let new: K = decode(request.object.as_ref(), "object", kind)?;
    let old: Option<K> = if update {
        Some(decode(request.old_object.as_ref(), "oldObject", kind)?)
    } else {
        None
    };
    let errors = rule(&new, old.as_ref());
    if errors.is_empty() {
        return Ok(AdmissionResponse::allow(&request.uid));
    }
    let name = if request.name.is_empty() {
        new.meta().name.clone().unwrap_or_default()
    } else {
        request.name.clone()
    };
    let status = invalid_status(kind, &name, &errors);
    tracing::info!(
        kind,
        namespace = %request.namespace,
        name = %name,
        operation = %request.operation,
        reason = status.message.as_deref().unwrap_or(""),
        "Denied"
    );
    Ok(AdmissionResponse::deny(&request.uid, status))
}
