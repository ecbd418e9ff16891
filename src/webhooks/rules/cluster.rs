//! DockerCluster and DockerClusterTemplate: defaulting and validation.

use serde::Serialize;
use serde_json::Value;

use super::{Context, TemplateParts, ratchet, template_spec_immutable};
use crate::api::v1beta2::{DockerCluster, DockerClusterSpec, DockerClusterTemplate};
use crate::webhooks::field::FieldError;
use crate::webhooks::meta::{dns_subdomain_problems, validate_template_metadata};
use crate::webhooks::reference::{repository_problem, tag_problem};

/// Port of the workload cluster's API server when the user gives none.
pub const DEFAULT_API_SERVER_PORT: i32 = 6443;

/// Defaults a DockerCluster spec: port 6443, `controlPlane: false` on failure domains that do
/// not say, failure domains sorted by name. Returns a warning for the user when the order of the
/// failure domains changed (`path` is where the spec is).
pub fn default_docker_cluster_spec(spec: &mut DockerClusterSpec, path: &str) -> Vec<String> {
    if spec.control_plane_endpoint.port == 0 {
        spec.control_plane_endpoint.port = DEFAULT_API_SERVER_PORT;
    }
    for domain in &mut spec.failure_domains {
        domain.control_plane.get_or_insert(false);
    }
    if spec.failure_domains.is_sorted_by(|a, b| a.name <= b.name) {
        return Vec::new();
    }
    spec.failure_domains.sort_by(|a, b| a.name.cmp(&b.name));
    vec![format!("{path}.failureDomains were sorted by name")]
}

/// Defaults a DockerCluster; returns warnings for the user.
pub fn default_docker_cluster(cluster: &mut DockerCluster) -> Vec<String> {
    default_docker_cluster_spec(&mut cluster.spec, "spec")
}

/// Defaults a DockerClusterTemplate (its `spec.template.spec`); returns warnings for the user.
pub fn default_docker_cluster_template(template: &mut DockerClusterTemplate) -> Vec<String> {
    default_docker_cluster_spec(&mut template.spec.template.spec, "spec.template.spec")
}

/// Validates a DockerCluster being created (`old` is `None`) or updated.
pub fn validate_docker_cluster(
    new: &DockerCluster,
    old: Option<&DockerCluster>,
) -> Vec<FieldError> {
    validate_cluster_spec(&new.spec, old.map(|o| &o.spec), "spec")
}

/// The rules of a DockerCluster spec (a DevCluster's docker backend too), its failure domains
/// and load balancer reported under `path`.
pub(super) fn validate_cluster_spec(
    new: &DockerClusterSpec,
    old: Option<&DockerClusterSpec>,
    path: &str,
) -> Vec<FieldError> {
    let mut errors = failure_domains_sorted(new, path);
    errors.extend(ratchet(
        spec_problems(new, path),
        old.map(|o| spec_problems(o, path)),
    ));
    errors
}

/// Validates a DockerClusterTemplate being created (`old` is `None`) or updated.
pub fn validate_docker_cluster_template(
    new: &DockerClusterTemplate,
    old: Option<&DockerClusterTemplate>,
    context: &Context,
) -> Vec<FieldError> {
    validate_cluster_template(
        "DockerClusterTemplate",
        template_parts!(new),
        old.map(|old| template_parts!(old)),
        context,
        ClusterSpecRules {
            default: default_docker_cluster_spec,
            sorted: failure_domains_sorted,
            problems: spec_problems,
        },
    )
}

/// What the cluster template rules do with a kind's `spec.template.spec`: each function takes
/// the spec and the path it is at.
pub(super) struct ClusterSpecRules<S> {
    /// Defaulting (compared specs are defaulted first).
    pub(super) default: fn(&mut S, &str) -> Vec<String>,
    /// The failure domains must be sorted (checked on creation; the spec is immutable after).
    pub(super) sorted: fn(&S, &str) -> Vec<FieldError>,
    /// The checks this provider adds (ratcheted on update).
    pub(super) problems: fn(&S, &str) -> Vec<FieldError>,
}

/// The rules of the cluster templates (DockerClusterTemplate, DevClusterTemplate): creation only
/// with the ClusterTopology feature gate, `spec.template.spec` immutable (compared after
/// defaulting both sides) except for the topology controller's dry runs, and valid template
/// metadata.
pub(super) fn validate_cluster_template<S: Clone + PartialEq + Serialize>(
    kind: &str,
    new: TemplateParts<'_, S>,
    old: Option<TemplateParts<'_, S>>,
    context: &Context,
    rules: ClusterSpecRules<S>,
) -> Vec<FieldError> {
    let spec_path = "spec.template.spec";
    let metadata_path = "spec.template.metadata";
    let Some(old) = old else {
        if !context.cluster_topology {
            return vec![FieldError::forbidden(
                "spec",
                "can be set only if the ClusterTopology feature flag is enabled (start the \
                 manager with --feature-gates=ClusterTopology=true, e.g. run `export \
                 CLUSTER_TOPOLOGY=true` before `clusterctl init`)",
            )];
        }
        let mut errors = (rules.sorted)(new.spec, spec_path);
        errors.extend(validate_template_metadata(new.metadata, metadata_path));
        errors.extend((rules.problems)(new.spec, spec_path));
        return errors;
    };

    let mut errors = Vec::new();
    let (mut old_spec, mut new_spec) = (old.spec.clone(), new.spec.clone());
    (rules.default)(&mut old_spec, spec_path);
    (rules.default)(&mut new_spec, spec_path);
    if old_spec != new_spec && !context.skips_immutability(new.annotations) {
        errors.push(template_spec_immutable(kind, &old_spec, &new_spec));
    }
    errors.extend(ratchet(
        validate_template_metadata(new.metadata, metadata_path),
        Some(validate_template_metadata(old.metadata, metadata_path)),
    ));
    errors.extend(ratchet(
        (rules.problems)(new.spec, spec_path),
        Some((rules.problems)(old.spec, spec_path)),
    ));
    errors
}

/// CAPD's rule: failure domains (of the spec at `path`) listed in name order.
pub(super) fn failure_domains_sorted(spec: &DockerClusterSpec, path: &str) -> Vec<FieldError> {
    let domains = &spec.failure_domains;
    if domains.is_sorted_by(|a, b| a.name <= b.name) {
        return Vec::new();
    }
    let names: Vec<Value> = domains.iter().map(|d| d.name.clone().into()).collect();
    vec![FieldError::invalid(
        format!("{path}.failureDomains"),
        names,
        "failure domains must be sorted by name",
    )]
}

/// The checks this provider adds: load balancer image and custom haproxy template reference.
pub(super) fn spec_problems(spec: &DockerClusterSpec, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let lb = &spec.load_balancer;
    let lb_path = format!("{path}.loadBalancer");
    if !lb.image_repository.is_empty() {
        // The controller runs `<imageRepository>/haproxy:<imageTag>`.
        let repository = lb.image_repository.trim_end_matches('/');
        if let Some(problem) = repository_problem(&format!("{repository}/haproxy")) {
            errors.push(FieldError::invalid(
                format!("{lb_path}.imageRepository"),
                lb.image_repository.as_str(),
                format!(
                    "must be a registry and repository prefix such as \"kindest\" or \
                     \"registry.example.com:5000/mirror\" (the image is \
                     <imageRepository>/haproxy:<imageTag>): {problem}"
                ),
            ));
        }
    }
    if !lb.image_tag.is_empty()
        && let Some(problem) = tag_problem(&lb.image_tag)
    {
        errors.push(FieldError::invalid(
            format!("{lb_path}.imageTag"),
            lb.image_tag.as_str(),
            problem,
        ));
    }
    if let Some(reference) = &lb.custom_haproxy_config_template_ref
        && !reference.name.is_empty()
    {
        for problem in dns_subdomain_problems(&reference.name) {
            errors.push(FieldError::invalid(
                format!("{lb_path}.customHAProxyConfigTemplateRef.name"),
                reference.name.as_str(),
                format!("must be the name of a ConfigMap: {problem}"),
            ));
        }
    }
    errors
}
