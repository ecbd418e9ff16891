//! DockerCluster and DockerClusterTemplate conversions.

use super::{
    ConversionError, down_metadata, failure_domains_down, failure_domains_up, marshal_data,
    restore_failure_domains, restore_if_unchanged, template_meta_down, template_meta_up,
    up_metadata,
};
use crate::api::{v1beta1, v1beta2};

const CLUSTER: &str = "DockerCluster";
const CLUSTER_TEMPLATE: &str = "DockerClusterTemplate";

/// The control plane endpoint in v1beta2 (its port is 32 bits there).
pub(super) fn endpoint_up(
    endpoint: &v1beta1::APIEndpoint,
) -> Result<v1beta2::APIEndpoint, ConversionError> {
    let port = i32::try_from(endpoint.port).map_err(|_| ConversionError::PortOutOfRange {
        port: endpoint.port,
    })?;
    Ok(v1beta2::APIEndpoint {
        host: endpoint.host.clone(),
        port,
    })
}

/// The control plane endpoint in v1beta1.
pub(super) fn endpoint_down(endpoint: &v1beta2::APIEndpoint) -> v1beta1::APIEndpoint {
    v1beta1::APIEndpoint {
        host: endpoint.host.clone(),
        port: i64::from(endpoint.port),
    }
}

pub(super) fn spec_up(
    spec: &v1beta1::DockerClusterSpec,
) -> Result<v1beta2::DockerClusterSpec, ConversionError> {
    Ok(v1beta2::DockerClusterSpec {
        control_plane_endpoint: endpoint_up(&spec.control_plane_endpoint)?,
        failure_domains: failure_domains_up(&spec.failure_domains),
        load_balancer: spec.load_balancer.clone(),
    })
}

pub(super) fn spec_down(spec: &v1beta2::DockerClusterSpec) -> v1beta1::DockerClusterSpec {
    v1beta1::DockerClusterSpec {
        control_plane_endpoint: endpoint_down(&spec.control_plane_endpoint),
        failure_domains: failure_domains_down(&spec.failure_domains),
        load_balancer: spec.load_balancer.clone(),
    }
}

/// The status of a DockerCluster (and of a DevCluster, which has the same) in v1beta2.
pub(super) fn status_up(status: &v1beta1::DockerClusterStatus) -> v1beta2::DockerClusterStatus {
    v1beta2::DockerClusterStatus {
        conditions: status
            .v1beta2
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default(),
        initialization: v1beta2::DockerClusterInitializationStatus {
            provisioned: status.ready.then_some(true),
        },
        failure_domains: failure_domains_up(&status.failure_domains),
        deprecated: v1beta2::DeprecatedStatus {
            v1beta1: v1beta2::V1Beta1DeprecatedStatus {
                conditions: status.conditions.clone(),
            },
        },
    }
}

/// The status of a DockerCluster (and of a DevCluster) in v1beta1.
pub(super) fn status_down(status: &v1beta2::DockerClusterStatus) -> v1beta1::DockerClusterStatus {
    v1beta1::DockerClusterStatus {
        ready: status.initialization.provisioned.unwrap_or(false),
        failure_domains: failure_domains_down(&status.failure_domains),
        conditions: status.deprecated.v1beta1.conditions.clone(),
        v1beta2: (!status.conditions.is_empty()).then(|| v1beta1::V1Beta2Status {
            conditions: status.conditions.clone(),
        }),
    }
}

/// Restores what v1beta1 cannot hold of a DockerCluster (or DevCluster) status.
pub(super) fn restore_status(
    status: &mut v1beta2::DockerClusterStatus,
    restored: &v1beta2::DockerClusterStatus,
) {
    restore_if_unchanged(&mut status.initialization, &restored.initialization, |i| {
        i.provisioned.unwrap_or(false)
    });
    restore_failure_domains(&mut status.failure_domains, &restored.failure_domains);
}

/// Converts a v1beta1 DockerCluster to the hub, restoring data kept in the annotation.
pub fn docker_cluster_to_hub(
    src: &v1beta1::DockerCluster,
) -> Result<v1beta2::DockerCluster, ConversionError> {
    let (metadata, restored) = up_metadata::<v1beta2::DockerCluster>(&src.metadata, CLUSTER)?;
    let mut spec = spec_up(&src.spec)?;
    let mut status = src.status.as_ref().map(status_up);
    if let Some(restored) = restored {
        restore_failure_domains(&mut spec.failure_domains, &restored.spec.failure_domains);
        if let (Some(status), Some(restored)) = (status.as_mut(), restored.status.as_ref()) {
            restore_status(status, restored);
        }
    }
    Ok(v1beta2::DockerCluster {
        metadata,
        spec,
        status,
    })
}

/// Converts a hub DockerCluster to v1beta1, keeping the hub data in the annotation.
pub fn docker_cluster_from_hub(
    src: &v1beta2::DockerCluster,
) -> Result<v1beta1::DockerCluster, ConversionError> {
    Ok(v1beta1::DockerCluster {
        metadata: down_metadata(&src.metadata, Some(marshal_data(src, CLUSTER)?)),
        spec: spec_down(&src.spec),
        status: src.status.as_ref().map(status_down),
    })
}

/// Converts a v1beta1 DockerClusterTemplate to the hub, restoring data kept in the annotation.
pub fn docker_cluster_template_to_hub(
    src: &v1beta1::DockerClusterTemplate,
) -> Result<v1beta2::DockerClusterTemplate, ConversionError> {
    let (metadata, restored) =
        up_metadata::<v1beta2::DockerClusterTemplate>(&src.metadata, CLUSTER_TEMPLATE)?;
    let template = &src.spec.template;
    let mut spec = spec_up(&template.spec)?;
    if let Some(restored) = restored {
        let restored = &restored.spec.template.spec;
        restore_failure_domains(&mut spec.failure_domains, &restored.failure_domains);
    }
    Ok(v1beta2::DockerClusterTemplate {
        metadata,
        spec: v1beta2::DockerClusterTemplateSpec {
            template: v1beta2::DockerClusterTemplateResource {
                metadata: template_meta_up(&template.metadata),
                spec,
            },
        },
    })
}

/// Converts a hub DockerClusterTemplate to v1beta1; the annotation is added only when v1beta1
/// cannot represent the template exactly.
pub fn docker_cluster_template_from_hub(
    src: &v1beta2::DockerClusterTemplate,
) -> Result<v1beta1::DockerClusterTemplate, ConversionError> {
    let template = &src.spec.template;
    let mut down = v1beta1::DockerClusterTemplate {
        metadata: down_metadata(&src.metadata, None),
        spec: v1beta1::DockerClusterTemplateSpec {
            template: v1beta1::DockerClusterTemplateResource {
                metadata: template_meta_down(&template.metadata),
                spec: spec_down(&template.spec),
            },
        },
    };
    if docker_cluster_template_to_hub(&down)?.spec != src.spec {
        down.metadata = down_metadata(&src.metadata, Some(marshal_data(src, CLUSTER_TEMPLATE)?));
    }
    Ok(down)
}
