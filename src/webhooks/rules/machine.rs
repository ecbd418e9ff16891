//! DockerMachine and DockerMachineTemplate: validation (CAPD defaults nothing on machines).

use std::collections::BTreeMap;

use super::{Context, check_image, ratchet, template_spec_immutable};
use crate::api::duration::parse_go_duration;
use crate::api::v1beta2::{DockerMachine, DockerMachineSpec, DockerMachineTemplate};
use crate::webhooks::field::{self, FieldError};
use crate::webhooks::meta::validate_template_metadata;

/// Validates a DockerMachine being created (`old` is `None`) or updated.
pub fn validate_docker_machine(
    new: &DockerMachine,
    old: Option<&DockerMachine>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(old) = old
        && old.spec.custom_image != new.spec.custom_image
    {
        errors.push(FieldError::invalid(
            "spec.customImage",
            new.spec.custom_image.as_str(),
            "field is immutable",
        ));
    }
    errors.extend(ratchet(
        spec_problems(&new.spec, "spec"),
        old.map(|o| spec_problems(&o.spec, "spec")),
    ));
    errors
}

/// Validates a DockerMachineTemplate being created (`old` is `None`) or updated.
pub fn validate_docker_machine_template(
    new: &DockerMachineTemplate,
    old: Option<&DockerMachineTemplate>,
    context: &Context,
) -> Vec<FieldError> {
    let resource = &new.spec.template;
    let spec_path = "spec.template.spec";
    let mut errors = Vec::new();
    if let Some(old) = old
        && old.spec.template.spec != resource.spec
        && !context.skips_immutability(new.metadata.annotations.as_ref())
    {
        errors.push(template_spec_immutable(
            "DockerMachineTemplate",
            &old.spec.template.spec,
            &resource.spec,
        ));
    }
    errors.extend(validate_template_metadata(
        &resource.metadata,
        "spec.template.metadata",
    ));
    errors.extend(ratchet(
        spec_problems(&resource.spec, spec_path),
        old.map(|o| spec_problems(&o.spec.template.spec, spec_path)),
    ));
    errors
}

/// The checks this provider adds: images, mounts and the bootstrap timeout.
fn spec_problems(spec: &DockerMachineSpec, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if !spec.custom_image.is_empty() {
        check_image(
            &format!("{path}.customImage"),
            &spec.custom_image,
            &mut errors,
        );
    }
    let images = format!("{path}.preLoadImages");
    for (i, image) in spec.pre_load_images.iter().enumerate() {
        check_image(&field::index(&images, i), image, &mut errors);
    }
    let mounts = format!("{path}.extraMounts");
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, mount) in spec.extra_mounts.iter().enumerate() {
        let at = field::index(&mounts, i);
        check_mount_path(
            &format!("{at}.containerPath"),
            &mount.container_path,
            &mut errors,
        );
        check_mount_path(&format!("{at}.hostPath"), &mount.host_path, &mut errors);
        if mount.container_path.is_empty() {
            continue;
        }
        let normalized = mount.container_path.trim_end_matches('/');
        if let Some(first) = seen.insert(normalized, i) {
            let mut duplicate =
                FieldError::duplicate(format!("{at}.containerPath"), mount.container_path.as_str());
            duplicate.detail = format!(
                "{} already mounts this container path; each container path can be mounted once",
                field::index(&mounts, first)
            );
            errors.push(duplicate);
        }
    }
    if let Some(timeout) = &spec.bootstrap_timeout {
        let problem = match parse_go_duration(timeout) {
            Ok(duration) if duration.is_zero() => Some("must be longer than zero".to_string()),
            Ok(_) => None,
            Err(error) => Some(error.to_string()),
        };
        if let Some(problem) = problem {
            errors.push(FieldError::invalid(
                format!("{path}.bootstrapTimeout"),
                timeout.as_str(),
                format!("must be a duration such as 5m or 90s: {problem}"),
            ));
        }
    }
    errors
}

/// A bind mount path: required, absolute, and without ':' (Docker's bind syntax cannot carry it).
fn check_mount_path(path: &str, value: &str, errors: &mut Vec<FieldError>) {
    if value.is_empty() {
        errors.push(FieldError::required(path, "an absolute path is required"));
    } else if !value.starts_with('/') {
        errors.push(FieldError::invalid(path, value, "must be an absolute path"));
    } else if value.contains(':') {
        errors.push(FieldError::invalid(
            path,
            value,
            "must not contain ':' (Docker bind mounts cannot express it)",
        ));
    }
}
