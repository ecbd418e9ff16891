//! DockerMachine and DockerMachineTemplate conversions.

use super::{
    ConversionError, down_metadata, marshal_data, restore_if_unchanged, template_meta_down,
    template_meta_up, up_metadata,
};
use crate::api::{v1beta1, v1beta2};

const MACHINE: &str = "DockerMachine";
const MACHINE_TEMPLATE: &str = "DockerMachineTemplate";

/// A machine's `spec.providerID` in v1beta2 (empty when unset).
pub(super) fn provider_id_up(provider_id: Option<&String>) -> String {
    provider_id.cloned().unwrap_or_default()
}

/// A machine's `spec.providerID` in v1beta1 (absent when empty).
pub(super) fn provider_id_down(provider_id: &str) -> Option<String> {
    (!provider_id.is_empty()).then(|| provider_id.to_string())
}

pub(super) fn spec_up(spec: &v1beta1::DockerMachineSpec) -> v1beta2::DockerMachineSpec {
    v1beta2::DockerMachineSpec {
        provider_id: provider_id_up(spec.provider_id.as_ref()),
        custom_image: spec.custom_image.clone(),
        pre_load_images: spec.pre_load_images.clone(),
        extra_mounts: spec.extra_mounts.clone(),
        bootstrap_timeout: spec.bootstrap_timeout.clone(),
    }
}

pub(super) fn spec_down(spec: &v1beta2::DockerMachineSpec) -> v1beta1::DockerMachineSpec {
    v1beta1::DockerMachineSpec {
        provider_id: provider_id_down(&spec.provider_id),
        custom_image: spec.custom_image.clone(),
        pre_load_images: spec.pre_load_images.clone(),
        extra_mounts: spec.extra_mounts.clone(),
        bootstrap_timeout: spec.bootstrap_timeout.clone(),
    }
}

/// The status of a DockerMachine in v1beta2 (a DevMachine's goes through it too).
pub(super) fn status_up(status: &v1beta1::DockerMachineStatus) -> v1beta2::DockerMachineStatus {
    v1beta2::DockerMachineStatus {
        conditions: status
            .v1beta2
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default(),
        initialization: v1beta2::DockerMachineInitializationStatus {
            provisioned: status.ready.then_some(true),
        },
        load_balancer_configured: status.load_balancer_configured,
        addresses: status.addresses.clone(),
        failure_domain: None,
        deprecated: v1beta2::DeprecatedStatus {
            v1beta1: v1beta2::V1Beta1DeprecatedStatus {
                conditions: status.conditions.clone(),
            },
        },
    }
}

/// The status of a DockerMachine in v1beta1 (a DevMachine's goes through it too).
pub(super) fn status_down(status: &v1beta2::DockerMachineStatus) -> v1beta1::DockerMachineStatus {
    v1beta1::DockerMachineStatus {
        ready: status.initialization.provisioned.unwrap_or(false),
        load_balancer_configured: status.load_balancer_configured,
        addresses: status.addresses.clone(),
        conditions: status.deprecated.v1beta1.conditions.clone(),
        v1beta2: (!status.conditions.is_empty()).then(|| v1beta1::V1Beta2Status {
            conditions: status.conditions.clone(),
        }),
    }
}

/// Restores what v1beta1 cannot hold of a DockerMachine status (or a DevMachine's, as a
/// DockerMachine's).
pub(super) fn restore_status(
    status: &mut v1beta2::DockerMachineStatus,
    restored: &v1beta2::DockerMachineStatus,
) {
    restore_if_unchanged(&mut status.initialization, &restored.initialization, |i| {
        i.provisioned.unwrap_or(false)
    });
    // v1beta1 has no field for it: always restored.
    status.failure_domain.clone_from(&restored.failure_domain);
}

/// Converts a v1beta1 DockerMachine to the hub, restoring data kept in the annotation.
pub fn docker_machine_to_hub(
    src: &v1beta1::DockerMachine,
) -> Result<v1beta2::DockerMachine, ConversionError> {
    let (metadata, restored) = up_metadata::<v1beta2::DockerMachine>(&src.metadata, MACHINE)?;
    let mut status = src.status.as_ref().map(status_up);
    if let (Some(status), Some(restored)) = (
        status.as_mut(),
        restored.as_ref().and_then(|r| r.status.as_ref()),
    ) {
        restore_status(status, restored);
    }
    Ok(v1beta2::DockerMachine {
        metadata,
        spec: spec_up(&src.spec),
        status,
    })
}

/// Converts a hub DockerMachine to v1beta1, keeping the hub data in the annotation.
pub fn docker_machine_from_hub(
    src: &v1beta2::DockerMachine,
) -> Result<v1beta1::DockerMachine, ConversionError> {
    Ok(v1beta1::DockerMachine {
        metadata: down_metadata(&src.metadata, Some(marshal_data(src, MACHINE)?)),
        spec: spec_down(&src.spec),
        status: src.status.as_ref().map(status_down),
    })
}

/// Converts a v1beta1 DockerMachineTemplate to the hub, restoring the v1beta2-only status
/// (`capacity`) from the annotation.
pub fn docker_machine_template_to_hub(
    src: &v1beta1::DockerMachineTemplate,
) -> Result<v1beta2::DockerMachineTemplate, ConversionError> {
    let (metadata, restored) =
        up_metadata::<v1beta2::DockerMachineTemplate>(&src.metadata, MACHINE_TEMPLATE)?;
    let template = &src.spec.template;
    Ok(v1beta2::DockerMachineTemplate {
        metadata,
        spec: v1beta2::DockerMachineTemplateSpec {
            template: v1beta2::DockerMachineTemplateResource {
                metadata: template_meta_up(&template.metadata),
                spec: spec_up(&template.spec),
            },
        },
        status: restored.and_then(|r| r.status),
    })
}

/// Converts a hub DockerMachineTemplate to v1beta1; the annotation is added only when v1beta1
/// cannot represent the template exactly (it has no status).
pub fn docker_machine_template_from_hub(
    src: &v1beta2::DockerMachineTemplate,
) -> Result<v1beta1::DockerMachineTemplate, ConversionError> {
    let template = &src.spec.template;
    let mut down = v1beta1::DockerMachineTemplate {
        metadata: down_metadata(&src.metadata, None),
        spec: v1beta1::DockerMachineTemplateSpec {
            template: v1beta1::DockerMachineTemplateResource {
                metadata: template_meta_down(&template.metadata),
                spec: spec_down(&template.spec),
            },
        },
    };
    let back = docker_machine_template_to_hub(&down)?;
    if back.spec != src.spec || back.status != src.status {
        down.metadata = down_metadata(&src.metadata, Some(marshal_data(src, MACHINE_TEMPLATE)?));
    }
    Ok(down)
}
