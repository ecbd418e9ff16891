//! proptest strategies producing valid hub (v1beta2) Dev* objects, built from the Docker kinds'
//! strategies: a Dev* object is a Docker one with the settings under a backend.

use proptest::prelude::*;

use super::strategies::*;
use crate::api::v1beta2;

/// Which backends are set: docker, in-memory, both (admission refuses that, conversion keeps
/// it) or none (as sent before defaulting).
fn backends() -> impl Strategy<Value = (bool, bool)> {
    (any::<bool>(), any::<bool>())
}

fn dev_cluster_spec() -> impl Strategy<Value = v1beta2::DevClusterSpec> {
    (cluster_spec(), backends()).prop_map(|(docker, (has_docker, has_in_memory))| {
        v1beta2::DevClusterSpec {
            control_plane_endpoint: docker.control_plane_endpoint,
            backend: v1beta2::DevClusterBackendSpec {
                docker: has_docker.then_some(v1beta2::DockerClusterBackendSpec {
                    failure_domains: docker.failure_domains,
                    load_balancer: docker.load_balancer,
                }),
                in_memory: has_in_memory.then_some(v1beta2::InMemoryClusterBackendSpec {}),
            },
        }
    })
}

pub(super) fn hub_dev_cluster() -> impl Strategy<Value = v1beta2::DevCluster> {
    (
        metadata(),
        dev_cluster_spec(),
        prop::option::of(cluster_status()),
    )
        .prop_map(|(metadata, spec, status)| v1beta2::DevCluster {
            metadata,
            spec,
            status,
        })
}

pub(super) fn hub_dev_cluster_template() -> impl Strategy<Value = v1beta2::DevClusterTemplate> {
    (metadata(), string_map(), string_map(), dev_cluster_spec()).prop_map(
        |(metadata, labels, annotations, spec)| v1beta2::DevClusterTemplate {
            metadata,
            spec: v1beta2::DevClusterTemplateSpec {
                template: v1beta2::DevClusterTemplateResource {
                    metadata: v1beta2::TemplateObjectMeta {
                        labels,
                        annotations,
                    },
                    spec,
                },
            },
        },
    )
}

fn in_memory_machine() -> impl Strategy<Value = v1beta2::InMemoryMachineBackendSpec> {
    let component = prop::option::of(
        (
            prop_oneof![Just("10s"), Just("1m")],
            prop_oneof![Just(""), Just("0.2")],
        )
            .prop_map(|(duration, jitter)| v1beta2::InMemoryComponentSpec {
                provisioning: Some(v1beta2::InMemoryProvisioningSettings {
                    startup_duration: duration.into(),
                    startup_jitter: jitter.into(),
                }),
            }),
    );
    (component.clone(), component).prop_map(|(vm, etcd)| v1beta2::InMemoryMachineBackendSpec {
        vm,
        node: None,
        api_server: None,
        etcd,
    })
}

fn dev_machine_spec() -> impl Strategy<Value = v1beta2::DevMachineSpec> {
    (machine_spec(), backends(), in_memory_machine()).prop_map(
        |(docker, (has_docker, has_in_memory), in_memory)| v1beta2::DevMachineSpec {
            provider_id: docker.provider_id,
            backend: v1beta2::DevMachineBackendSpec {
                docker: has_docker.then_some(v1beta2::DockerMachineBackendSpec {
                    custom_image: docker.custom_image,
                    pre_load_images: docker.pre_load_images,
                    extra_mounts: docker.extra_mounts,
                    bootstrap_timeout: docker.bootstrap_timeout,
                }),
                in_memory: has_in_memory.then_some(in_memory),
            },
        },
    )
}

/// A DevMachine status: a DockerMachine's but `loadBalancerConfigured`.
fn dev_machine_status() -> impl Strategy<Value = v1beta2::DevMachineStatus> {
    machine_status().prop_map(|docker| v1beta2::DevMachineStatus::from(&docker))
}

pub(super) fn hub_dev_machine() -> impl Strategy<Value = v1beta2::DevMachine> {
    (
        metadata(),
        dev_machine_spec(),
        prop::option::of(dev_machine_status()),
    )
        .prop_map(|(metadata, spec, status)| v1beta2::DevMachine {
            metadata,
            spec,
            status,
        })
}

pub(super) fn hub_dev_machine_template() -> impl Strategy<Value = v1beta2::DevMachineTemplate> {
    let status = prop::option::of(
        capacity().prop_map(|capacity| v1beta2::DevMachineTemplateStatus { capacity }),
    );
    (metadata(), string_map(), dev_machine_spec(), status).prop_map(
        |(metadata, labels, spec, status)| v1beta2::DevMachineTemplate {
            metadata,
            spec: v1beta2::DevMachineTemplateSpec {
                template: v1beta2::DevMachineTemplateResource {
                    metadata: v1beta2::TemplateObjectMeta {
                        labels,
                        annotations: Default::default(),
                    },
                    spec,
                },
            },
            status,
        },
    )
}
