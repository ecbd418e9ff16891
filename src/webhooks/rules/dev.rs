//! DevCluster, DevClusterTemplate, DevMachine and DevMachineTemplate: defaulting and validation.
//!
//! The backend: none set defaults to `docker: {}` (as CAPD); both set is refused, and so is an
//! update that moves a DevCluster or DevMachine to another backend (CAPD allows it, and leaves
//! the old backend's containers behind). The docker
//! backend gets the DockerCluster and DockerMachine rules, run on the docker view of the spec
//! ([`DevClusterSpec::docker`], [`DevMachineSpec::docker`]) and reported at the Dev paths
//! (`spec.backend.docker.customImage`). An in-memory object is accepted as it is: this provider
//! does not implement that backend, and its controllers say so in the object's conditions.

use super::cluster::{
    ClusterSpecRules, default_docker_cluster_spec, failure_domains_sorted, validate_cluster_spec,
    validate_cluster_template,
};
use super::machine::validate_machine_spec;
use super::{Context, TemplateParts, cluster, machine, ratchet, validate_immutable_template};
use crate::api::v1beta2::{
    DevCluster, DevClusterSpec, DevClusterTemplate, DevMachine, DevMachineSpec, DevMachineTemplate,
    DockerClusterBackendSpec,
};
use crate::webhooks::field::FieldError;

/// Sets `docker` to its empty default when neither backend is set.
fn default_backend<D: Default, M>(docker: &mut Option<D>, in_memory: &Option<M>) {
    if docker.is_none() && in_memory.is_none() {
        *docker = Some(D::default());
    }
}

/// Refuses a backend (at `path`) with both docker and in-memory set.
fn backend_problems<D, M>(
    docker: &Option<D>,
    in_memory: &Option<M>,
    path: &str,
) -> Vec<FieldError> {
    if docker.is_none() || in_memory.is_none() {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        format!("{path}.backend"),
        "docker and inMemory are both set: set only one backend",
    )]
}

/// The name of the backend set, when exactly one is.
fn backend_name<D, M>(docker: &Option<D>, in_memory: &Option<M>) -> Option<&'static str> {
    match (docker.is_some(), in_memory.is_some()) {
        (true, false) => Some("docker"),
        (false, true) => Some("inMemory"),
        _ => None,
    }
}

/// Refuses an update (at `path`) that moves an object from one backend to another: what the
/// old backend made (containers, the load balancer) would be left behind, since the controllers
/// only know the backend the object names now.
fn backend_switch<D, M>(
    new: (&Option<D>, &Option<M>),
    old: (&Option<D>, &Option<M>),
    path: &str,
) -> Vec<FieldError> {
    match (backend_name(new.0, new.1), backend_name(old.0, old.1)) {
        (Some(new), Some(old)) if new != old => vec![FieldError::forbidden(
            format!("{path}.backend"),
            format!(
                "the backend cannot change from {old} to {new}: what the {old} backend made would be left behind; create a new object instead"
            ),
        )],
        _ => Vec::new(),
    }
}

/// Where a Dev spec at `path` keeps its docker settings.
fn docker_path(path: &str) -> String {
    format!("{path}.backend.docker")
}

/// Defaults a DevCluster spec at `path`: the backend, then, for the docker backend, what a
/// DockerCluster gets (port 6443, failure domains' `controlPlane`, their order, with a warning).
pub fn default_dev_cluster_spec(spec: &mut DevClusterSpec, path: &str) -> Vec<String> {
    default_backend(&mut spec.backend.docker, &spec.backend.in_memory);
    let Some(mut docker) = spec.docker() else {
        return Vec::new();
    };
    let warnings = default_docker_cluster_spec(&mut docker, &docker_path(path));
    spec.control_plane_endpoint = docker.control_plane_endpoint;
    spec.backend.docker = Some(DockerClusterBackendSpec {
        failure_domains: docker.failure_domains,
        load_balancer: docker.load_balancer,
    });
    warnings
}

/// Defaults a DevCluster; returns warnings for the user.
pub fn default_dev_cluster(cluster: &mut DevCluster) -> Vec<String> {
    default_dev_cluster_spec(&mut cluster.spec, "spec")
}

/// Defaults a DevClusterTemplate (its `spec.template.spec`); returns warnings for the user.
pub fn default_dev_cluster_template(template: &mut DevClusterTemplate) -> Vec<String> {
    default_dev_cluster_spec(&mut template.spec.template.spec, "spec.template.spec")
}

/// Defaults a DevMachine: the backend (nothing of the docker backend has a default).
pub fn default_dev_machine(machine: &mut DevMachine) -> Vec<String> {
    let backend = &mut machine.spec.backend;
    default_backend(&mut backend.docker, &backend.in_memory);
    Vec::new()
}

/// Defaults a DevMachineTemplate's `spec.template.spec` as a DevMachine's.
pub fn default_dev_machine_template(template: &mut DevMachineTemplate) -> Vec<String> {
    let backend = &mut template.spec.template.spec.backend;
    default_backend(&mut backend.docker, &backend.in_memory);
    Vec::new()
}

/// Validates a DevCluster being created (`old` is `None`) or updated.
pub fn validate_dev_cluster(new: &DevCluster, old: Option<&DevCluster>) -> Vec<FieldError> {
    let backend = |spec: &DevClusterSpec| {
        backend_problems(&spec.backend.docker, &spec.backend.in_memory, "spec")
    };
    let mut errors = ratchet(backend(&new.spec), old.map(|o| backend(&o.spec)));
    if let Some(old) = old {
        let (new, old) = (&new.spec.backend, &old.spec.backend);
        errors.extend(backend_switch(
            (&new.docker, &new.in_memory),
            (&old.docker, &old.in_memory),
            "spec",
        ));
    }
    if let Some(docker) = new.spec.docker() {
        let old = old.and_then(|o| o.spec.docker());
        errors.extend(validate_cluster_spec(
            &docker,
            old.as_ref(),
            &docker_path("spec"),
        ));
    }
    errors
}

/// Validates a DevClusterTemplate being created (`old` is `None`) or updated: the
/// DockerClusterTemplate rules.
pub fn validate_dev_cluster_template(
    new: &DevClusterTemplate,
    old: Option<&DevClusterTemplate>,
    context: &Context,
) -> Vec<FieldError> {
    validate_cluster_template(
        "DevClusterTemplate",
        template_parts!(new),
        old.map(|old| template_parts!(old)),
        context,
        ClusterSpecRules {
            default: default_dev_cluster_spec,
            sorted: |spec, path| {
                spec.docker()
                    .map(|docker| failure_domains_sorted(&docker, &docker_path(path)))
                    .unwrap_or_default()
            },
            problems: cluster_spec_problems,
        },
    )
}

/// The checks of a DevCluster spec at `path` that ratchet on update: the backend, and those
/// this provider adds to a DockerCluster's.
fn cluster_spec_problems(spec: &DevClusterSpec, path: &str) -> Vec<FieldError> {
    let mut errors = backend_problems(&spec.backend.docker, &spec.backend.in_memory, path);
    if let Some(docker) = spec.docker() {
        errors.extend(cluster::spec_problems(&docker, &docker_path(path)));
    }
    errors
}

/// Validates a DevMachine being created (`old` is `None`) or updated.
pub fn validate_dev_machine(new: &DevMachine, old: Option<&DevMachine>) -> Vec<FieldError> {
    let backend = |spec: &DevMachineSpec| {
        backend_problems(&spec.backend.docker, &spec.backend.in_memory, "spec")
    };
    let mut errors = ratchet(backend(&new.spec), old.map(|o| backend(&o.spec)));
    if let Some(old) = old {
        let (new, old) = (&new.spec.backend, &old.spec.backend);
        errors.extend(backend_switch(
            (&new.docker, &new.in_memory),
            (&old.docker, &old.in_memory),
            "spec",
        ));
    }
    if let Some(docker) = new.spec.docker() {
        let old = old.and_then(|o| o.spec.docker());
        errors.extend(validate_machine_spec(
            &docker,
            old.as_ref(),
            &docker_path("spec"),
        ));
    }
    errors
}

/// Validates a DevMachineTemplate being created (`old` is `None`) or updated: the
/// DockerMachineTemplate rules.
pub fn validate_dev_machine_template(
    new: &DevMachineTemplate,
    old: Option<&DevMachineTemplate>,
    context: &Context,
) -> Vec<FieldError> {
    validate_immutable_template(
        "DevMachineTemplate",
        template_parts!(new),
        old.map(|o| &o.spec.template.spec),
        context,
        machine_spec_problems,
    )
}

/// The checks of a DevMachine spec at `path` that ratchet on update: the backend, and those
/// this provider adds to a DockerMachine's.
fn machine_spec_problems(spec: &DevMachineSpec, path: &str) -> Vec<FieldError> {
    let mut errors = backend_problems(&spec.backend.docker, &spec.backend.in_memory, path);
    if let Some(docker) = spec.docker() {
        errors.extend(machine::spec_problems(&docker, &docker_path(path)));
    }
    errors
}
