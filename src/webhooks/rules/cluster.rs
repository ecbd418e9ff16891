//! DockerCluster and DockerClusterTemplate: defaulting and validation.

use serde_json::Value;

use super::{Context, ratchet, template_spec_immutable};
use crate::api::v1beta2::{DockerCluster, DockerClusterSpec, DockerClusterTemplate, FailureDomain};
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
    let mut errors = failure_domains_sorted(&new.spec.failure_domains, "spec.failureDomains");
    errors.extend(ratchet(
        spec_problems(&new.spec, "spec"),
        old.map(|o| spec_problems(&o.spec, "spec")),
    ));
    errors
}

/// Validates a DockerClusterTemplate being created (`old` is `None`) or updated.
pub fn validate_docker_cluster_template(
    new: &DockerClusterTemplate,
    old: Option<&DockerClusterTemplate>,
    context: &Context,
) -> Vec<FieldError> {
    let resource = &new.spec.template;
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
        let mut errors = failure_domains_sorted(
            &resource.spec.failure_domains,
            "spec.template.spec.failureDomains",
        );
        errors.extend(validate_template_metadata(
            &resource.metadata,
            metadata_path,
        ));
        errors.extend(spec_problems(&resource.spec, spec_path));
        return errors;
    };

    let mut errors = Vec::new();
    let (mut old_spec, mut new_spec) = (old.spec.template.spec.clone(), resource.spec.clone());
    default_docker_cluster_spec(&mut old_spec, spec_path);
    default_docker_cluster_spec(&mut new_spec, spec_path);
    if old_spec != new_spec && !context.skips_immutability(new.metadata.annotations.as_ref()) {
        errors.push(template_spec_immutable(
            "DockerClusterTemplate",
            &old_spec,
            &new_spec,
        ));
    }
    errors.extend(ratchet(
        validate_template_metadata(&resource.metadata, metadata_path),
        Some(validate_template_metadata(
            &old.spec.template.metadata,
            metadata_path,
        )),
    ));
    errors.extend(ratchet(
        spec_problems(&resource.spec, spec_path),
        Some(spec_problems(&old.spec.template.spec, spec_path)),
    ));
    errors
}

/// CAPD's rule: failure domains listed in name order.
fn failure_domains_sorted(domains: &[FailureDomain], path: &str) -> Vec<FieldError> {
    if domains.is_sorted_by(|a, b| a.name <= b.name) {
        return Vec::new();
    }
    let names: Vec<Value> = domains.iter().map(|d| d.name.clone().into()).collect();
    vec![FieldError::invalid(
        path,
        names,
        "failure domains must be sorted by name",
    )]
}

/// The checks this provider adds: load balancer image and custom haproxy template reference.
fn spec_problems(spec: &DockerClusterSpec, path: &str) -> Vec<FieldError> {
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
