//! The admission rules, as pure functions over the v1beta2 types: defaulting (what the mutating
//! webhooks apply) and validation (what the validating webhooks refuse).
//!
//! CAPD's rules (capd-behaviour.md §1):
//! - DockerCluster(Template): `controlPlaneEndpoint.port` defaults to 6443, a failure domain's
//!   `controlPlane` to `false`; failure domains must be sorted by name.
//! - DockerClusterTemplate: creation is refused unless the `ClusterTopology` feature gate is on;
//!   `spec.template.spec` is immutable (compared after defaulting both sides).
//! - DockerMachine: `spec.customImage` is immutable.
//! - DockerMachineTemplate: `spec.template.spec` is immutable except for the topology
//!   controller's dry-run requests.
//! - Templates: `spec.template.metadata` labels and annotations must be valid.
//! - DockerMachinePool(Template): CAPD has no admission webhooks for pools. This provider checks
//!   the pool's container settings like a DockerMachine's, and keeps a pool template's
//!   `spec.template.spec` immutable like DockerMachineTemplate's.
//! - DevCluster(Template), DevMachine(Template) (CAPD's successor kinds): with no backend set,
//!   `backend.docker` defaults to `{}`; the docker backend gets the rules of the Docker kind, at
//!   the Dev paths (`spec.backend.docker.customImage`). This provider also refuses both backends
//!   set at once (see [`dev`]).
//!
//! Deliberate differences:
//! - Defaulting also *sorts* failure domains by name. CAPD refuses an unsorted list, which makes
//!   users reorder a list whose order carries no meaning; sorting gives the same stored result
//!   without the round trip, and the response warns the user (`kubectl` prints it). The
//!   sorted-order check stays, for requests that bypass defaulting.
//! - The topology dry-run exception also applies to DockerClusterTemplate: a dry run persists
//!   nothing, and the topology controller dry-runs cluster templates as well.
//! - Added checks (CAPD has none): image references (`customImage`, `preLoadImages`, load
//!   balancer `imageRepository`/`imageTag`) must parse as Docker references; extra mounts need
//!   absolute, colon-free `containerPath` and `hostPath` and distinct container paths;
//!   `bootstrapTimeout` must be a positive Go duration; a custom haproxy ConfigMap name must be a
//!   valid object name. On update these only blame what the update changes (see
//!   [`field::only_new`]), so objects stored before the checks existed stay editable.

/// The [`TemplateParts`] of a template object (every template kind keeps them in the same
/// places).
macro_rules! template_parts {
    ($template:expr) => {
        TemplateParts {
            annotations: $template.metadata.annotations.as_ref(),
            metadata: &$template.spec.template.metadata,
            spec: &$template.spec.template.spec,
        }
    };
}

mod cluster;
mod dev;
mod machine;
mod pool;

#[cfg(test)]
mod tests;

pub use cluster::*;
pub use dev::*;
pub use machine::*;
pub use pool::*;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::field::{self, FieldError};
use super::meta::validate_template_metadata;
use super::reference::{REFERENCE_FORMAT, reference_problem};
use crate::api::v1beta2::TemplateObjectMeta;

/// Annotation the Cluster API topology controller puts on objects it sends in dry-run requests.
pub const TOPOLOGY_DRY_RUN_ANNOTATION: &str = "topology.cluster.x-k8s.io/dry-run";

/// What the rules know about the request besides the objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// The `ClusterTopology` feature gate is on.
    pub cluster_topology: bool,
    /// The request is a dry run (`dryRun: true` in the AdmissionRequest).
    pub dry_run: bool,
}

impl Context {
    /// Whether the immutability checks are skipped for an object with `annotations`: only for
    /// the topology controller's dry runs (a `kubectl apply --dry-run=server` is still checked).
    pub fn skips_immutability(&self, annotations: Option<&BTreeMap<String, String>>) -> bool {
        self.dry_run && annotations.is_some_and(|a| a.contains_key(TOPOLOGY_DRY_RUN_ANNOTATION))
    }
}

/// What the template rules read of a template object.
struct TemplateParts<'a, S> {
    /// `metadata.annotations` of the template object (the topology dry-run marker).
    annotations: Option<&'a BTreeMap<String, String>>,
    /// `spec.template.metadata`.
    metadata: &'a TemplateObjectMeta,
    /// `spec.template.spec`.
    spec: &'a S,
}

/// The rules of the machine templates (DockerMachineTemplate, DockerMachinePoolTemplate):
/// `spec.template.spec` is immutable except for the topology controller's dry runs, the
/// template metadata must be valid, and `problems` found in the spec (ratcheted on update) are
/// refused.
fn validate_immutable_template<S: PartialEq + Serialize>(
    kind: &str,
    new: TemplateParts<'_, S>,
    old: Option<&S>,
    context: &Context,
    problems: impl Fn(&S, &str) -> Vec<FieldError>,
) -> Vec<FieldError> {
    let spec_path = "spec.template.spec";
    let mut errors = Vec::new();
    if let Some(old) = old
        && old != new.spec
        && !context.skips_immutability(new.annotations)
    {
        errors.push(template_spec_immutable(kind, old, new.spec));
    }
    errors.extend(validate_template_metadata(
        new.metadata,
        "spec.template.metadata",
    ));
    errors.extend(ratchet(
        problems(new.spec, spec_path),
        old.map(|o| problems(o, spec_path)),
    ));
    errors
}

/// The error for a changed immutable template spec, naming what changed.
fn template_spec_immutable<T: Serialize>(kind: &str, old: &T, new: &T) -> FieldError {
    let changed = changed_fields(old, new);
    FieldError::invalid_without_value(
        "spec.template.spec",
        format!(
            "{kind} spec.template.spec field is immutable. Please create a new resource \
             instead. Changed: {}",
            changed.join(", ")
        ),
    )
}

/// Paths (relative to the compared values, `extraMounts[0].hostPath`) that differ.
fn changed_fields<T: Serialize>(old: &T, new: &T) -> Vec<String> {
    let (Ok(old), Ok(new)) = (serde_json::to_value(old), serde_json::to_value(new)) else {
        return vec!["(unknown)".into()];
    };
    let patch = json_patch::diff(&old, &new);
    let Ok(Value::Array(ops)) = serde_json::to_value(&patch) else {
        return vec!["(unknown)".into()];
    };
    let mut paths: Vec<String> = ops
        .iter()
        .filter_map(|op| op.get("path").and_then(Value::as_str))
        .map(pointer_to_field_path)
        .collect();
    paths.dedup();
    paths
}

/// `/extraMounts/0/hostPath` → `extraMounts[0].hostPath`.
fn pointer_to_field_path(pointer: &str) -> String {
    let mut path = String::new();
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            path.push_str(&format!("[{token}]"));
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&token);
        }
    }
    if path.is_empty() {
        "(the whole spec)".into()
    } else {
        path
    }
}

/// An image reference at `path` that must parse.
fn check_image(path: &str, value: &str, errors: &mut Vec<FieldError>) {
    if let Some(problem) = reference_problem(value) {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("must be an image reference ({REFERENCE_FORMAT}): {problem}"),
        ));
    }
}

/// Keeps the errors of `new` that `old` (the object before an update) did not already have.
fn ratchet(new: Vec<FieldError>, old: Option<Vec<FieldError>>) -> Vec<FieldError> {
    match old {
        Some(old) => field::only_new(new, &old),
        None => new,
    }
}
