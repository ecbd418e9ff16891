//! Conversions of the retired versions v1alpha3 and v1alpha4, straight to and from the v1beta2
//! hub as CAPD 1.12 converts them. Our CRDs no longer list these versions (CAPD 1.13 removed
//! them), so the API server asks for them only while CAPD 1.10 to 1.12's CRDs, which still list
//! them, are installed with this manager serving their conversion webhook: our image run as a
//! drop-in behind CAPD 1.12's components, or the rollout of an upgrade before the new CRDs are
//! applied. Then the API server converts every stored object into both versions for their watch
//! caches (a failure makes them retry forever), reads objects CAPD stored in them, and the CRD
//! migrator's rewrite of such an object reads it through here. They go when this provider no
//! longer runs behind CAPD 1.12's CRDs.
//!
//! They are converted as CAPD 1.12's `api/v1alpha3` and `api/v1alpha4` packages convert them,
//! with CAPD's field mapping: `ready` and `status.initialization.provisioned`, the failure domain map and
//! the sorted list, the v1alpha conditions and `status.deprecated.v1beta1.conditions`, an empty
//! `providerID` and an absent one.
//!
//! Down-conversion always keeps the hub object in the annotation, templates included, as CAPD
//! does. Up-conversion restores from it what the retired version cannot hold, as CAPD does: the
//! v1beta2 conditions, `provisioned: false` while `ready` is still false, the load balancer
//! settings v1alpha3 lacks and the custom haproxy configuration v1alpha4 lacks,
//! `bootstrapTimeout`, a template's metadata and status, a pool's `infrastructureMachineKind`.
//! It also restores what this provider's v1beta1 conversion restores (failure domains' order
//! and an unset `controlPlane` while the map still says the same, a DockerMachine's
//! `status.failureDomain`), so that hub → retired version → hub loses nothing.

use kube::core::ObjectMeta;

use super::{
    ConversionError, cluster, down_metadata, machine, marshal_data, restore_failure_domains,
    up_metadata,
};
use crate::api::legacy::{self, NoStatus, Object, TemplateResource};
use crate::api::{GROUP, v1beta1, v1beta2};

const CLUSTER: &str = "DockerCluster";
const CLUSTER_TEMPLATE: &str = "DockerClusterTemplate";
const MACHINE: &str = "DockerMachine";
const MACHINE_TEMPLATE: &str = "DockerMachineTemplate";
const POOL: &str = "DockerMachinePool";

/// The retired object `version` of a hub object, its metadata carrying the hub in the annotation.
fn down_object<K, Spec, Status>(
    hub: &K,
    meta: &ObjectMeta,
    kind: &str,
    version: &str,
    spec: Spec,
    status: Option<Status>,
) -> Result<Object<Spec, Status>, ConversionError>
where
    K: kube::Resource<DynamicType = ()> + serde::Serialize,
{
    Ok(Object {
        api_version: format!("{GROUP}/{version}"),
        kind: kind.to_string(),
        metadata: down_metadata(meta, Some(marshal_data(hub, kind)?)),
        spec,
        status,
    })
}

// ---- DockerCluster and DockerClusterTemplate ---------------------------------------------------

fn cluster_spec_up(
    endpoint: &v1beta1::APIEndpoint,
    failure_domains: &v1beta1::FailureDomains,
    load_balancer: &legacy::ImageMeta,
) -> Result<v1beta2::DockerClusterSpec, ConversionError> {
    cluster::spec_up(&v1beta1::DockerClusterSpec {
        control_plane_endpoint: endpoint.clone(),
        failure_domains: failure_domains.clone(),
        load_balancer: v1beta2::DockerLoadBalancer {
            image_repository: load_balancer.image_repository.clone(),
            image_tag: load_balancer.image_tag.clone(),
            custom_haproxy_config_template_ref: None,
        },
    })
}

fn cluster_spec_down(spec: &v1beta2::DockerClusterSpec) -> legacy::DockerClusterSpec {
    let down = cluster::spec_down(spec);
    legacy::DockerClusterSpec {
        control_plane_endpoint: down.control_plane_endpoint,
        failure_domains: down.failure_domains,
        load_balancer: legacy::ImageMeta {
            image_repository: down.load_balancer.image_repository,
            image_tag: down.load_balancer.image_tag,
        },
    }
}

/// Restores what v1alpha4 cannot hold of a DockerCluster spec: the custom haproxy configuration
/// (and the failure domains' order).
fn restore_cluster_spec(
    spec: &mut v1beta2::DockerClusterSpec,
    restored: &v1beta2::DockerClusterSpec,
) {
    restore_failure_domains(&mut spec.failure_domains, &restored.failure_domains);
    if restored
        .load_balancer
        .custom_haproxy_config_template_ref
        .is_some()
    {
        spec.load_balancer
            .custom_haproxy_config_template_ref
            .clone_from(&restored.load_balancer.custom_haproxy_config_template_ref);
    }
}

fn cluster_status_up(status: &legacy::DockerClusterStatus) -> v1beta2::DockerClusterStatus {
    cluster::status_up(&v1beta1::DockerClusterStatus {
        ready: status.ready,
        failure_domains: status.failure_domains.clone(),
        conditions: status.conditions.clone(),
        v1beta2: None,
    })
}

fn cluster_status_down(status: &v1beta2::DockerClusterStatus) -> legacy::DockerClusterStatus {
    let down = cluster::status_down(status);
    legacy::DockerClusterStatus {
        ready: down.ready,
        failure_domains: down.failure_domains,
        conditions: down.conditions,
    }
}

/// The hub DockerCluster of a retired one whose spec converted to `spec`.
fn cluster_to_hub(
    metadata: &ObjectMeta,
    mut spec: v1beta2::DockerClusterSpec,
    status: Option<&legacy::DockerClusterStatus>,
    v1alpha3: bool,
) -> Result<v1beta2::DockerCluster, ConversionError> {
    let (metadata, restored) = up_metadata::<v1beta2::DockerCluster>(metadata, CLUSTER)?;
    let mut status = status.map(cluster_status_up);
    if let Some(restored) = restored {
        restore_cluster_spec(&mut spec, &restored.spec);
        if v1alpha3 {
            spec.load_balancer = restored.spec.load_balancer;
        }
        if let (Some(status), Some(restored)) = (status.as_mut(), restored.status) {
            cluster::restore_status(status, &restored);
            status.conditions = restored.conditions;
        }
    }
    Ok(v1beta2::DockerCluster {
        metadata,
        spec,
        status,
    })
}

/// Converts a v1alpha3 DockerCluster to the hub, restoring data kept in the annotation.
pub fn docker_cluster_v1alpha3_to_hub(
    src: &legacy::DockerClusterV1Alpha3,
) -> Result<v1beta2::DockerCluster, ConversionError> {
    let spec = cluster_spec_up(
        &src.spec.control_plane_endpoint,
        &src.spec.failure_domains,
        &legacy::ImageMeta::default(),
    )?;
    cluster_to_hub(&src.metadata, spec, src.status.as_ref(), true)
}

/// Converts a hub DockerCluster to v1alpha3, keeping the hub in the annotation.
pub fn docker_cluster_v1alpha3_from_hub(
    src: &v1beta2::DockerCluster,
) -> Result<legacy::DockerClusterV1Alpha3, ConversionError> {
    let spec = cluster_spec_down(&src.spec);
    let spec = legacy::DockerClusterSpecV1Alpha3 {
        control_plane_endpoint: spec.control_plane_endpoint,
        failure_domains: spec.failure_domains,
    };
    let status = src.status.as_ref().map(cluster_status_down);
    down_object(src, &src.metadata, CLUSTER, legacy::V1ALPHA3, spec, status)
}

/// Converts a v1alpha4 DockerCluster to the hub, restoring data kept in the annotation.
pub fn docker_cluster_v1alpha4_to_hub(
    src: &legacy::DockerCluster,
) -> Result<v1beta2::DockerCluster, ConversionError> {
    let spec = &src.spec;
    let spec = cluster_spec_up(
        &spec.control_plane_endpoint,
        &spec.failure_domains,
        &spec.load_balancer,
    )?;
    cluster_to_hub(&src.metadata, spec, src.status.as_ref(), false)
}

/// Converts a hub DockerCluster to v1alpha4, keeping the hub in the annotation.
pub fn docker_cluster_v1alpha4_from_hub(
    src: &v1beta2::DockerCluster,
) -> Result<legacy::DockerCluster, ConversionError> {
    let status = src.status.as_ref().map(cluster_status_down);
    let spec = cluster_spec_down(&src.spec);
    down_object(src, &src.metadata, CLUSTER, legacy::V1ALPHA4, spec, status)
}

/// Converts a v1alpha4 DockerClusterTemplate to the hub, restoring the template's metadata and
/// what the cluster spec cannot hold from the annotation.
pub fn docker_cluster_template_v1alpha4_to_hub(
    src: &legacy::DockerClusterTemplate,
) -> Result<v1beta2::DockerClusterTemplate, ConversionError> {
    let (metadata, restored) =
        up_metadata::<v1beta2::DockerClusterTemplate>(&src.metadata, CLUSTER_TEMPLATE)?;
    let template = &src.spec.template.spec;
    let mut spec = cluster_spec_up(
        &template.control_plane_endpoint,
        &template.failure_domains,
        &template.load_balancer,
    )?;
    let mut template_meta = v1beta2::TemplateObjectMeta::default();
    if let Some(restored) = restored {
        let restored = restored.spec.template;
        restore_cluster_spec(&mut spec, &restored.spec);
        template_meta = restored.metadata;
    }
    Ok(v1beta2::DockerClusterTemplate {
        metadata,
        spec: v1beta2::DockerClusterTemplateSpec {
            template: v1beta2::DockerClusterTemplateResource {
                metadata: template_meta,
                spec,
            },
        },
    })
}

/// Converts a hub DockerClusterTemplate to v1alpha4, keeping the hub in the annotation.
pub fn docker_cluster_template_v1alpha4_from_hub(
    src: &v1beta2::DockerClusterTemplate,
) -> Result<legacy::DockerClusterTemplate, ConversionError> {
    let spec = legacy::DockerClusterTemplateSpec {
        template: TemplateResource {
            spec: cluster_spec_down(&src.spec.template.spec),
        },
    };
    down_object(
        src,
        &src.metadata,
        CLUSTER_TEMPLATE,
        legacy::V1ALPHA4,
        spec,
        None::<NoStatus>,
    )
}

// ---- DockerMachine and DockerMachineTemplate ---------------------------------------------------

fn machine_spec_up(spec: &legacy::DockerMachineSpec) -> v1beta2::DockerMachineSpec {
    machine::spec_up(&v1beta1::DockerMachineSpec {
        provider_id: spec.provider_id.clone(),
        custom_image: spec.custom_image.clone(),
        pre_load_images: spec.pre_load_images.clone(),
        extra_mounts: spec.extra_mounts.clone(),
        bootstrap_timeout: None,
    })
}

fn machine_spec_down(spec: &v1beta2::DockerMachineSpec) -> legacy::DockerMachineSpec {
    let down = machine::spec_down(spec);
    legacy::DockerMachineSpec {
        provider_id: down.provider_id,
        custom_image: down.custom_image,
        pre_load_images: down.pre_load_images,
        extra_mounts: down.extra_mounts,
    }
}

/// Converts a v1alpha3 or v1alpha4 DockerMachine to the hub, restoring data kept in the
/// annotation.
pub fn docker_machine_legacy_to_hub(
    src: &legacy::DockerMachine,
) -> Result<v1beta2::DockerMachine, ConversionError> {
    let (metadata, restored) = up_metadata::<v1beta2::DockerMachine>(&src.metadata, MACHINE)?;
    let mut spec = machine_spec_up(&src.spec);
    let mut status = src.status.as_ref().map(|s| {
        machine::status_up(&v1beta1::DockerMachineStatus {
            ready: s.ready,
            load_balancer_configured: s.load_balancer_configured,
            addresses: s.addresses.clone(),
            conditions: s.conditions.clone(),
            v1beta2: None,
        })
    });
    if let Some(restored) = restored {
        if restored.spec.bootstrap_timeout.is_some() {
            spec.bootstrap_timeout = restored.spec.bootstrap_timeout;
        }
        if let (Some(status), Some(restored)) = (status.as_mut(), restored.status) {
            machine::restore_status(status, &restored);
            status.conditions = restored.conditions;
        }
    }
    Ok(v1beta2::DockerMachine {
        metadata,
        spec,
        status,
    })
}

/// Converts a hub DockerMachine to `version` (v1alpha3 or v1alpha4), keeping the hub in the
/// annotation.
pub fn docker_machine_legacy_from_hub(
    src: &v1beta2::DockerMachine,
    version: &str,
) -> Result<legacy::DockerMachine, ConversionError> {
    let status = src.status.as_ref().map(|s| {
        let down = machine::status_down(s);
        legacy::DockerMachineStatus {
            ready: down.ready,
            load_balancer_configured: down.load_balancer_configured,
            addresses: down.addresses,
            conditions: down.conditions,
        }
    });
    let spec = machine_spec_down(&src.spec);
    down_object(src, &src.metadata, MACHINE, version, spec, status)
}

/// Converts a v1alpha3 or v1alpha4 DockerMachineTemplate to the hub, restoring the template's
/// metadata, `bootstrapTimeout` and the status from the annotation.
pub fn docker_machine_template_legacy_to_hub(
    src: &legacy::DockerMachineTemplate,
) -> Result<v1beta2::DockerMachineTemplate, ConversionError> {
    let (metadata, restored) =
        up_metadata::<v1beta2::DockerMachineTemplate>(&src.metadata, MACHINE_TEMPLATE)?;
    let mut template = v1beta2::DockerMachineTemplateResource {
        metadata: v1beta2::TemplateObjectMeta::default(),
        spec: machine_spec_up(&src.spec.template.spec),
    };
    let mut status = None;
    if let Some(restored) = restored {
        let restored_template = restored.spec.template;
        template.metadata = restored_template.metadata;
        template.spec.bootstrap_timeout = restored_template.spec.bootstrap_timeout;
        status = restored.status;
    }
    Ok(v1beta2::DockerMachineTemplate {
        metadata,
        spec: v1beta2::DockerMachineTemplateSpec { template },
        status,
    })
}

/// Converts a hub DockerMachineTemplate to `version` (v1alpha3 or v1alpha4), keeping the hub in
/// the annotation.
pub fn docker_machine_template_legacy_from_hub(
    src: &v1beta2::DockerMachineTemplate,
    version: &str,
) -> Result<legacy::DockerMachineTemplate, ConversionError> {
    let spec = legacy::DockerMachineTemplateSpec {
        template: TemplateResource {
            spec: machine_spec_down(&src.spec.template.spec),
        },
    };
    down_object(
        src,
        &src.metadata,
        MACHINE_TEMPLATE,
        version,
        spec,
        None::<NoStatus>,
    )
}

// ---- DockerMachinePool ---------------------------------------------------------------------------

/// Converts a v1alpha3 or v1alpha4 DockerMachinePool to the hub; the v1beta2 conditions and
/// `infrastructureMachineKind` come back from the annotation.
pub fn docker_machine_pool_legacy_to_hub(
    src: &legacy::DockerMachinePool,
) -> Result<v1beta2::DockerMachinePool, ConversionError> {
    let (metadata, restored) = up_metadata::<v1beta2::DockerMachinePool>(&src.metadata, POOL)?;
    let restored = restored.and_then(|r| r.status).unwrap_or_default();
    let status = src
        .status
        .as_ref()
        .map(|s| v1beta2::DockerMachinePoolStatus {
            ready: s.ready,
            replicas: s.replicas,
            observed_generation: s.observed_generation,
            instances: s.instances.clone(),
            infrastructure_machine_kind: restored.infrastructure_machine_kind.clone(),
            conditions: restored.conditions.clone(),
            deprecated: v1beta2::DeprecatedStatus {
                v1beta1: v1beta2::V1Beta1DeprecatedStatus {
                    conditions: s.conditions.clone(),
                },
            },
        });
    Ok(v1beta2::DockerMachinePool {
        metadata,
        spec: src.spec.clone(),
        status,
    })
}

/// Converts a hub DockerMachinePool to `version` (v1alpha3 or v1alpha4), keeping the hub in the
/// annotation.
pub fn docker_machine_pool_legacy_from_hub(
    src: &v1beta2::DockerMachinePool,
    version: &str,
) -> Result<legacy::DockerMachinePool, ConversionError> {
    let status = src
        .status
        .as_ref()
        .map(|s| legacy::DockerMachinePoolStatus {
            ready: s.ready,
            replicas: s.replicas,
            observed_generation: s.observed_generation,
            instances: s.instances.clone(),
            conditions: s.deprecated.v1beta1.conditions.clone(),
        });
    down_object(src, &src.metadata, POOL, version, src.spec.clone(), status)
}
