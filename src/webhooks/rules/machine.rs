//! DockerMachine and DockerMachineTemplate: validation (CAPD defaults nothing on machines), and
//! the container settings checks DockerMachinePool shares.

use std::collections::BTreeMap;

use super::{Context, TemplateParts, check_image, ratchet, validate_immutable_template};
use crate::api::duration::parse_go_duration;
use crate::api::v1beta2::{DockerMachine, DockerMachineSpec, DockerMachineTemplate, Mount};
use crate::webhooks::field::{self, FieldError};

/// Validates a DockerMachine being created (`old` is `None`) or updated.
pub fn validate_docker_machine(
    new: &DockerMachine,
    old: Option<&DockerMachine>,
) -> Vec<FieldError> {
    validate_machine_spec(&new.spec, old.map(|o| &o.spec), "spec")
}

/// The rules of a DockerMachine spec (a DevMachine's docker backend too), reported under
/// `path`: `customImage` is immutable, and the checks this provider adds.
pub(super) fn validate_machine_spec(
    new: &DockerMachineSpec,
    old: Option<&DockerMachineSpec>,
    path: &str,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(old) = old
        && old.custom_image != new.custom_image
    {
        errors.push(FieldError::invalid(
            format!("{path}.customImage"),
            new.custom_image.as_str(),
            "field is immutable",
        ));
    }
    errors.extend(ratchet(
        spec_problems(new, path),
        old.map(|o| spec_problems(o, path)),
    ));
    errors
}

/// Validates a DockerMachineTemplate being created (`old` is `None`) or updated.
pub fn validate_docker_machine_template(
    new: &DockerMachineTemplate,
    old: Option<&DockerMachineTemplate>,
    context: &Context,
) -> Vec<FieldError> {
    validate_immutable_template(
        "DockerMachineTemplate",
        template_parts!(new),
        old.map(|o| &o.spec.template.spec),
        context,
        spec_problems,
    )
}

/// The checks this provider adds: images, mounts and the bootstrap timeout.
pub(super) fn spec_problems(spec: &DockerMachineSpec, path: &str) -> Vec<FieldError> {
    let mut errors = container_problems(
        ContainerSettings {
            custom_image: &spec.custom_image,
            pre_load_images: &spec.pre_load_images,
            extra_mounts: &spec.extra_mounts,
        },
        path,
    );
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

/// The container settings DockerMachine and DockerMachinePool share.
pub(super) struct ContainerSettings<'a> {
    pub(super) custom_image: &'a str,
    pub(super) pre_load_images: &'a [String],
    pub(super) extra_mounts: &'a [Mount],
}

/// The checks of the container settings at `path`: image references and bind mounts.
pub(super) fn container_problems(settings: ContainerSettings<'_>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if !settings.custom_image.is_empty() {
        check_image(
            &format!("{path}.customImage"),
            settings.custom_image,
            &mut errors,
        );
    }
    let images = format!("{path}.preLoadImages");
    for (i, image) in settings.pre_load_images.iter().enumerate() {
        check_image(&field::index(&images, i), image, &mut errors);
    }
    let mounts = format!("{path}.extraMounts");
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, mount) in settings.extra_mounts.iter().enumerate() {
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
