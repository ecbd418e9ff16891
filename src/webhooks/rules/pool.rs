//! DockerMachinePool and DockerMachinePoolTemplate: validation. CAPD registers no admission
//! webhooks for pools; these apply the checks DockerMachine and DockerMachineTemplate have to
//! the pool's container settings (`spec.template`), and keep a pool template's
//! `spec.template.spec` immutable except for the topology controller's dry runs, as
//! DockerMachineTemplate does. A pool's own `spec.template` stays mutable: changing its image
//! is how a pool is rolled out.

use super::machine::{ContainerSettings, container_problems};
use super::{Context, TemplateParts, ratchet, validate_immutable_template};
use crate::api::v1beta2::{DockerMachinePool, DockerMachinePoolSpec, DockerMachinePoolTemplate};
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

/// The checks of a pool spec at `path`: its container settings, `<path>.template`.
fn pool_problems(spec: &DockerMachinePoolSpec, path: &str) -> Vec<FieldError> {
    let template = &spec.template;
    container_problems(
        ContainerSettings {
            custom_image: &template.custom_image,
            pre_load_images: &template.pre_load_images,
            extra_mounts: &template.extra_mounts,
        },
        &format!("{path}.template"),
    )
}
