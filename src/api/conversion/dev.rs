//! DevCluster, DevClusterTemplate, DevMachine and DevMachineTemplate conversions. The two
//! versions differ only where the Docker kinds differ (the endpoint port, the failure domains, the
//! provider ID and the status), so the Docker kinds' converters do the work: the backends are
//! otherwise the same in both versions.

use super::cluster::{endpoint_down, endpoint_up};
use super::machine::{provider_id_down, provider_id_up};
use super::{
    ConversionError, cluster, down_metadata, failure_domains_down, failure_domains_up, machine,
    marshal_data, restore_failure_domains, template_meta_down, template_meta_up, up_metadata,
};
use crate::api::{v1beta1, v1beta2};

const CLUSTER: &str = "DevCluster";
const CLUSTER_TEMPLATE: &str = "DevClusterTemplate";
const MACHINE: &str = "DevMachine";
const MACHINE_TEMPLATE: &str = "DevMachineTemplate";

fn cluster_spec_up(
    spec: &v1beta1::DevClusterSpec,
) -> Result<v1beta2::DevClusterSpec, ConversionError> {
    let backend = &spec.backend;
    Ok(v1beta2::DevClusterSpec {
        control_plane_endpoint: endpoint_up(&spec.control_plane_endpoint)?,
        backend: v1beta2::DevClusterBackendSpec {
            docker: backend
                .docker
                .as_ref()
                .map(|docker| v1beta2::DockerClusterBackendSpec {
                    failure_domains: failure_domains_up(&docker.failure_domains),
                    load_balancer: docker.load_balancer.clone(),
                }),
            in_memory: backend.in_memory.clone(),
        },
    })
}

fn cluster_spec_down(spec: &v1beta2::DevClusterSpec) -> v1beta1::DevClusterSpec {
    let backend = &spec.backend;
    v1beta1::DevClusterSpec {
        control_plane_endpoint: endpoint_down(&spec.control_plane_endpoint),
        backend: v1beta1::DevClusterBackendSpec {
            docker: backend
                .docker
                .as_ref()
                .map(|docker| v1beta1::DockerClusterBackendSpec {
                    failure_domains: failure_domains_down(&docker.failure_domains),
                    load_balancer: docker.load_balancer.clone(),
                }),
            in_memory: backend.in_memory.clone(),
        },
    }
}

/// Restores the docker backend's failure domains (their order, an unset `controlPlane`).
fn restore_cluster_spec(spec: &mut v1beta2::DevClusterSpec, restored: &v1beta2::DevClusterSpec) {
    if let (Some(docker), Some(restored)) = (
        spec.backend.docker.as_mut(),
        restored.backend.docker.as_ref(),
    ) {
        restore_failure_domains(&mut docker.failure_domains, &restored.failure_domains);
    }
}

/// Converts a v1beta1 DevCluster to the hub, restoring data kept in the annotation.
pub fn dev_cluster_to_hub(
    src: &v1beta1::DevCluster,
) -> Result<v1beta2::DevCluster, ConversionError> {
    let (metadata, restored) = up_metadata::<v1beta2::DevCluster>(&src.metadata, CLUSTER)?;
    let mut spec = cluster_spec_up(&src.spec)?;
    let mut status = src.status.as_ref().map(cluster::status_up);
    if let Some(restored) = restored {
        restore_cluster_spec(&mut spec, &restored.spec);
        if let (Some(status), Some(restored)) = (status.as_mut(), restored.status.as_ref()) {
            cluster::restore_status(status, restored);
        }
    }
    Ok(v1beta2::DevCluster {
        metadata,
        spec,
        status,
    })
}

/// Converts a hub DevCluster to v1beta1, keeping the hub data in the annotation.
pub fn dev_cluster_from_hub(
    src: &v1beta2::DevCluster,
) -> Result<v1beta1::DevCluster, ConversionError> {
    Ok(v1beta1::DevCluster {
        metadata: down_metadata(&src.metadata, Some(marshal_data(src, CLUSTER)?)),
        spec: cluster_spec_down(&src.spec),
        status: src.status.as_ref().map(cluster::status_down),
    })
}

/// Converts a v1beta1 DevClusterTemplate to the hub, restoring data kept in the annotation.
pub fn dev_cluster_template_to_hub(
    src: &v1beta1::DevClusterTemplate,
) -> Result<v1beta2::DevClusterTemplate, ConversionError> {
    let (metadata, restored) =
        up_metadata::<v1beta2::DevClusterTemplate>(&src.metadata, CLUSTER_TEMPLATE)?;
    let template = &src.spec.template;
    let mut spec = cluster_spec_up(&template.spec)?;
    if let Some(restored) = restored {
        restore_cluster_spec(&mut spec, &restored.spec.template.spec);
    }
    Ok(v1beta2::DevClusterTemplate {
        metadata,
        spec: v1beta2::DevClusterTemplateSpec {
            template: v1beta2::DevClusterTemplateResource {
                metadata: template_meta_up(&template.metadata),
                spec,
            },
        },
    })
}

/// Converts a hub DevClusterTemplate to v1beta1; the annotation is added only when v1beta1
/// cannot represent the template exactly.
pub fn dev_cluster_template_from_hub(
    src: &v1beta2::DevClusterTemplate,
) -> Result<v1beta1::DevClusterTemplate, ConversionError> {
    let template = &src.spec.template;
    let mut down = v1beta1::DevClusterTemplate {
        metadata: down_metadata(&src.metadata, None),
        spec: v1beta1::DevClusterTemplateSpec {
            template: v1beta1::DevClusterTemplateResource {
                metadata: template_meta_down(&template.metadata),
                spec: cluster_spec_down(&template.spec),
            },
        },
    };
    if dev_cluster_template_to_hub(&down)?.spec != src.spec {
        down.metadata = down_metadata(&src.metadata, Some(marshal_data(src, CLUSTER_TEMPLATE)?));
    }
    Ok(down)
}

fn machine_spec_up(spec: &v1beta1::DevMachineSpec) -> v1beta2::DevMachineSpec {
    v1beta2::DevMachineSpec {
        provider_id: provider_id_up(spec.provider_id.as_ref()),
        backend: spec.backend.clone(),
    }
}

fn machine_spec_down(spec: &v1beta2::DevMachineSpec) -> v1beta1::DevMachineSpec {
    v1beta1::DevMachineSpec {
        provider_id: provider_id_down(&spec.provider_id),
        backend: spec.backend.clone(),
    }
}

/// The DockerMachine status a v1beta1 DevMachine status stands for.
fn docker_machine_status(status: &v1beta1::DevMachineStatus) -> v1beta1::DockerMachineStatus {
    v1beta1::DockerMachineStatus {
        ready: status.ready,
        load_balancer_configured: false,
        addresses: status.addresses.clone(),
        conditions: status.conditions.clone(),
        v1beta2: status.v1beta2.clone(),
    }
}

/// Converts a v1beta1 DevMachine to the hub through the DockerMachine status converters,
/// restoring data kept in the annotation.
pub fn dev_machine_to_hub(
    src: &v1beta1::DevMachine,
) -> Result<v1beta2::DevMachine, ConversionError> {
    let (metadata, restored) = up_metadata::<v1beta2::DevMachine>(&src.metadata, MACHINE)?;
    let restored = restored.and_then(|r| r.status);
    let status = src.status.as_ref().map(|spoke| {
        let mut docker = machine::status_up(&docker_machine_status(spoke));
        if let Some(restored) = &restored {
            machine::restore_status(&mut docker, &restored.into());
        }
        v1beta2::DevMachineStatus::from(&docker)
    });
    Ok(v1beta2::DevMachine {
        metadata,
        spec: machine_spec_up(&src.spec),
        status,
    })
}

/// Converts a hub DevMachine to v1beta1 through the DockerMachine status converters, keeping
/// the hub data in the annotation.
pub fn dev_machine_from_hub(
    src: &v1beta2::DevMachine,
) -> Result<v1beta1::DevMachine, ConversionError> {
    let status = src.status.as_ref().map(|hub| {
        let docker = machine::status_down(&hub.into());
        v1beta1::DevMachineStatus {
            ready: docker.ready,
            addresses: docker.addresses,
            conditions: docker.conditions,
            v1beta2: docker.v1beta2,
        }
    });
    Ok(v1beta1::DevMachine {
        metadata: down_metadata(&src.metadata, Some(marshal_data(src, MACHINE)?)),
        spec: machine_spec_down(&src.spec),
        status,
    })
}

/// Converts a v1beta1 DevMachineTemplate to the hub, restoring the v1beta2-only status
/// (`capacity`) from the annotation.
pub fn dev_machine_template_to_hub(
    src: &v1beta1::DevMachineTemplate,
) -> Result<v1beta2::DevMachineTemplate, ConversionError> {
    let (metadata, restored) =
        up_metadata::<v1beta2::DevMachineTemplate>(&src.metadata, MACHINE_TEMPLATE)?;
    let template = &src.spec.template;
    Ok(v1beta2::DevMachineTemplate {
        metadata,
        spec: v1beta2::DevMachineTemplateSpec {
            template: v1beta2::DevMachineTemplateResource {
                metadata: template_meta_up(&template.metadata),
                spec: machine_spec_up(&template.spec),
            },
        },
        status: restored.and_then(|r| r.status),
    })
}

/// Converts a hub DevMachineTemplate to v1beta1; the annotation is added only when v1beta1
/// cannot represent the template exactly (it has no status).
pub fn dev_machine_template_from_hub(
    src: &v1beta2::DevMachineTemplate,
) -> Result<v1beta1::DevMachineTemplate, ConversionError> {
    let template = &src.spec.template;
    let mut down = v1beta1::DevMachineTemplate {
        metadata: down_metadata(&src.metadata, None),
        spec: v1beta1::DevMachineTemplateSpec {
            template: v1beta1::DevMachineTemplateResource {
                metadata: template_meta_down(&template.metadata),
                spec: machine_spec_down(&template.spec),
            },
        },
    };
    let back = dev_machine_template_to_hub(&down)?;
    if back.spec != src.spec || back.status != src.status {
        down.metadata = down_metadata(&src.metadata, Some(marshal_data(src, MACHINE_TEMPLATE)?));
    }
    Ok(down)
}
