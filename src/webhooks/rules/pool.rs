//! DockerMachinePool, DevMachinePool and their templates: validation. CAPD registers no
//! admission webhooks for pools; these apply the checks DockerMachine and DockerMachineTemplate
//! have to the pool's container settings (a DockerMachinePool's `spec.template`, a
//! DevMachinePool's `spec.backend.docker`, checked on its docker view), and keep a pool
//! template's `spec.template.spec` immutable except for the topology controller's dry runs, as
//! DockerMachineTemplate does. A pool's own container settings stay mutable: changing its image
//! is how a pool is rolled out.

use super::machine::{ContainerSettings, container_problems};
use super::{Context, TemplateParts, ratchet, validate_immutable_template};
use crate::api::v1beta2::{
    DevMachinePool, DevMachinePoolSpec, DevMachinePoolTemplate, DockerMachinePool,
    DockerMachinePoolMachineTemplate, DockerMachinePoolSpec, DockerMachinePoolTemplate,
};
use crate::webhooks::field::FieldError;

/// Validates a DockerMachinePool being created (`old` is `None`) or updated.
pub fn validate_docker_machine_pool(
    new: &DockerMachinePool,
    old: Option<&DockerMachinePool>,
) -> Vec<FieldError> {
    ratchet(
        pool_problems(&new.spec, "spec"),
        old.map(|o| pool_problems(&o.spec, "spec")),
    )
}

/// Validates a DockerMachinePoolTemplate being created (`old` is `None`) or updated.
pub fn validate_docker_machine_pool_template(
    new: &DockerMachinePoolTemplate,
    old: Option<&DockerMachinePoolTemplate>,
    context: &Context,
) -> Vec<FieldError> {
    validate_immutable_template(
        "DockerMachinePoolTemplate",
        template_parts!(new),
        old.map(|o| &o.spec.template.spec),
        context,
        pool_problems,
    )
}

/// Validates a DevMachinePool being created (`old` is `None`) or updated. An update may not
/// remove `spec.backend.docker`: the controller would then know no backend for the pool, and its
/// deletion would leave the pool's containers behind (as a DevMachine may not change backend).
pub fn validate_dev_machine_pool(
    new: &DevMachinePool,
    old: Option<&DevMachinePool>,
) -> Vec<FieldError> {
    let mut errors = ratchet(
        dev_pool_problems(&new.spec, "spec"),
        old.map(|o| dev_pool_problems(&o.spec, "spec")),
    );
    if old.is_some_and(|o| o.spec.backend.docker.is_some()) && new.spec.backend.docker.is_none() {
        errors.push(FieldError::forbidden(
            "spec.backend.docker",
            "the docker backend cannot be removed: the pool's containers would be left behind; \
             delete the pool instead",
        ));
    }
    errors
}

/// Validates a DevMachinePoolTemplate being created (`old` is `None`) or updated.
pub fn validate_dev_machine_pool_template(
    new: &DevMachinePoolTemplate,
    old: Option<&DevMachinePoolTemplate>,
    context: &Context,
) -> Vec<FieldError> {
    validate_immutable_template(
        "DevMachinePoolTemplate",
        template_parts!(new),
        old.map(|o| &o.spec.template.spec),
        context,
        dev_pool_problems,
    )
}

/// The checks of a DockerMachinePool spec at `path`: its container settings,
/// `<path>.template`.
fn pool_problems(spec: &DockerMachinePoolSpec, path: &str) -> Vec<FieldError> {
    settings_problems(&spec.template, &format!("{path}.template"))
}

/// The checks of a DevMachinePool spec at `path`: those of a DockerMachinePool on its docker
/// view, reported at `<path>.backend.docker`. A pool without the docker backend has nothing to
/// check (its controller reports it unsupported).
fn dev_pool_problems(spec: &DevMachinePoolSpec, path: &str) -> Vec<FieldError> {
    spec.docker().map_or_else(Vec::new, |docker| {
        settings_problems(&docker.template, &format!("{path}.backend.docker"))
    })
}

/// The checks of a pool's container settings at `path`.
fn settings_problems(template: &DockerMachinePoolMachineTemplate, path: &str) -> Vec<FieldError> {
    container_problems(
        ContainerSettings {
            custom_image: &template.custom_image,
            pre_load_images: &template.pre_load_images,
            extra_mounts: &template.extra_mounts,
        },
        path,
    )
}
