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
    DockerClusterBackendSpec, DockerClusterSpec, DockerMachineSpec,
};
use crate::webhooks::field::FieldError;

/// Sets `docker` to its empty default when neither backend is set.
fn default_backend<D: Default, M>(docker: &mut Option<D>, in_memory: &Option<M>) {
    if docker.is_none() && in_memory.is_none() {
        *docker = Some(D::default());
    }
}

/// What the rules read of a Dev* spec: the backends it names and its docker view.
trait DevSpec {
    /// The Docker* spec the docker backend stands for.
    type Docker;

    /// Whether `backend.docker` and `backend.inMemory` are set.
    fn backends(&self) -> (bool, bool);

    /// The docker view, `None` for another backend.
    fn docker_view(&self) -> Option<Self::Docker>;
}

impl DevSpec for DevClusterSpec {
    type Docker = DockerClusterSpec;

    fn backends(&self) -> (bool, bool) {
        (
            self.backend.docker.is_some(),
            self.backend.in_memory.is_some(),
        )
    }

    fn docker_view(&self) -> Option<DockerClusterSpec> {
        self.docker()
    }
}

impl DevSpec for DevMachineSpec {
    type Docker = DockerMachineSpec;

    fn backends(&self) -> (bool, bool) {
        (
            self.backend.docker.is_some(),
            self.backend.in_memory.is_some(),
        )
    }

    fn docker_view(&self) -> Option<DockerMachineSpec> {
        self.docker()
    }
}

/// Refuses a backend (at `path`) with both docker and in-memory set.
fn backend_problems(backends: (bool, bool), path: &str) -> Vec<FieldError> {
    if backends != (true, true) {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        format!("{path}.backend"),
        "docker and inMemory are both set: set only one backend",
    )]
}

/// The name of the backend set, when exactly one is.
fn backend_name(backends: (bool, bool)) -> Option<&'static str> {
    match backends {
        (true, false) => Some("docker"),
        (false, true) => Some("inMemory"),
        _ => None,
    }
}

/// Refuses an update (at `path`) that moves an object from one backend to another: what the
/// old backend made (containers, the load balancer) would be left behind, since the controllers
/// only know the backend the object names now.
fn backend_switch(new: (bool, bool), old: (bool, bool), path: &str) -> Vec<FieldError> {
    match (backend_name(new), backend_name(old)) {
        (Some(new), Some(old)) if new != old => vec![FieldError::forbidden(
            format!("{path}.backend"),
            format!(
                "the backend cannot change from {old} to {new}: what the {old} backend made would be left behind; create a new object instead"
            ),
        )],
        _ => Vec::new(),
    }
}

/// The validation rules of a Docker* spec: new, old (on update), path.
type DockerRules<D> = fn(&D, Option<&D>, &str) -> Vec<FieldError>;

/// Validates a Dev* spec being created (`old` is `None`) or updated: the backend checks, then
/// `docker_rules` (a Docker* kind's) on the docker view, reported at the Dev path.
fn validate_dev_spec<S: DevSpec>(
    new: &S,
    old: Option<&S>,
    docker_rules: DockerRules<S::Docker>,
) -> Vec<FieldError> {
    let backend = |spec: &S| backend_problems(spec.backends(), "spec");
    let mut errors = ratchet(backend(new), old.map(backend));
    if let Some(old) = old {
        errors.extend(backend_switch(new.backends(), old.backends(), "spec"));
    }
    if let Some(docker) = new.docker_view() {
        let old = old.and_then(DevSpec::docker_view);
        errors.extend(docker_rules(&docker, old.as_ref(), &docker_path("spec")));
    }
    errors
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
    validate_dev_spec(&new.spec, old.map(|o| &o.spec), validate_cluster_spec)
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
    let mut errors = backend_problems(spec.backends(), path);
    if let Some(docker) = spec.docker() {
        errors.extend(cluster::spec_problems(&docker, &docker_path(path)));
    }
    errors
}

/// Validates a DevMachine being created (`old` is `None`) or updated.
pub fn validate_dev_machine(new: &DevMachine, old: Option<&DevMachine>) -> Vec<FieldError> {
    validate_dev_spec(&new.spec, old.map(|o| &o.spec), validate_machine_spec)
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
    let mut errors = backend_problems(spec.backends(), path);
    if let Some(docker) = spec.docker() {
        errors.extend(machine::spec_problems(&docker, &docker_path(path)));
    }
    errors
}
