//! DockerMachinePool and DockerMachinePoolTemplate conversions.

use super::{
    ConversionError, down_metadata, marshal_data, template_meta_down, template_meta_up, up_metadata,
};
use crate::api::{v1beta1, v1beta2};

const POOL: &str = "DockerMachinePool";
const POOL_TEMPLATE: &str = "DockerMachinePoolTemplate";

fn spec_up(spec: &v1beta1::DockerMachinePoolSpec) -> v1beta2::DockerMachinePoolSpec {
    v1beta2::DockerMachinePoolSpec {
        template: spec.template.clone(),
        provider_id: spec.provider_id.clone(),
        provider_id_list: spec.provider_id_list.clone(),
    }
}

fn spec_down(spec: &v1beta2::DockerMachinePoolSpec) -> v1beta1::DockerMachinePoolSpec {
    v1beta1::DockerMachinePoolSpec {
        template: spec.template.clone(),
        provider_id: spec.provider_id.clone(),
        provider_id_list: spec.provider_id_list.clone(),
    }
}

/// Converts a v1beta1 DockerMachinePool to the hub; the v1beta2 conditions, which v1beta1
/// cannot hold, come back from the annotation.
pub fn docker_machine_pool_to_hub(
    src: &v1beta1::DockerMachinePool,
) -> Result<v1beta2::DockerMachinePool, ConversionError> {
    let (metadata, restored) = up_metadata::<v1beta2::DockerMachinePool>(&src.metadata, POOL)?;
    let restored_conditions = restored
        .and_then(|r| r.status)
        .map(|s| s.conditions)
        .unwrap_or_default();
    let status = src
        .status
        .as_ref()
        .map(|s| v1beta2::DockerMachinePoolStatus {
            ready: s.ready,
            replicas: s.replicas,
            observed_generation: s.observed_generation,
            instances: s.instances.clone(),
            infrastructure_machine_kind: s.infrastructure_machine_kind.clone(),
            conditions: restored_conditions,
            deprecated: v1beta2::DeprecatedStatus {
                v1beta1: v1beta2::V1Beta1DeprecatedStatus {
                    conditions: s.conditions.clone(),
                },
            },
        });
    Ok(v1beta2::DockerMachinePool {
        metadata,
        spec: spec_up(&src.spec),
        status,
    })
}

/// Converts a hub DockerMachinePool to v1beta1, keeping the hub data in the annotation.
pub fn docker_machine_pool_from_hub(
    src: &v1beta2::DockerMachinePool,
) -> Result<v1beta1::DockerMachinePool, ConversionError> {
    let status = src
        .status
        .as_ref()
        .map(|s| v1beta1::DockerMachinePoolStatus {
            ready: s.ready,
            replicas: s.replicas,
            observed_generation: s.observed_generation,
            instances: s.instances.clone(),
            infrastructure_machine_kind: s.infrastructure_machine_kind.clone(),
            conditions: s.deprecated.v1beta1.conditions.clone(),
        });
    Ok(v1beta1::DockerMachinePool {
        metadata: down_metadata(&src.metadata, Some(marshal_data(src, POOL)?)),
        spec: spec_down(&src.spec),
        status,
    })
}

/// Converts a v1beta1 DockerMachinePoolTemplate to the hub.
pub fn docker_machine_pool_template_to_hub(
    src: &v1beta1::DockerMachinePoolTemplate,
) -> Result<v1beta2::DockerMachinePoolTemplate, ConversionError> {
    let (metadata, _) =
        up_metadata::<v1beta2::DockerMachinePoolTemplate>(&src.metadata, POOL_TEMPLATE)?;
    let template = &src.spec.template;
    Ok(v1beta2::DockerMachinePoolTemplate {
        metadata,
        spec: v1beta2::DockerMachinePoolTemplateSpec {
            template: v1beta2::DockerMachinePoolTemplateResource {
                metadata: template_meta_up(&template.metadata),
                spec: spec_up(&template.spec),
            },
        },
        status: src.status.clone(),
    })
}

/// Converts a hub DockerMachinePoolTemplate to v1beta1 (both versions hold the same data,
/// including the `capacity` status this provider adds to both).
pub fn docker_machine_pool_template_from_hub(
    src: &v1beta2::DockerMachinePoolTemplate,
) -> Result<v1beta1::DockerMachinePoolTemplate, ConversionError> {
    let template = &src.spec.template;
    Ok(v1beta1::DockerMachinePoolTemplate {
        metadata: down_metadata(&src.metadata, None),
        spec: v1beta1::DockerMachinePoolTemplateSpec {
            template: v1beta1::DockerMachinePoolTemplateResource {
                metadata: template_meta_down(&template.metadata),
                spec: spec_down(&template.spec),
            },
        },
        status: src.status.clone(),
    })
}
