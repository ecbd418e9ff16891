//! proptest strategies producing valid hub (v1beta2) objects of every kind.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::ObjectMeta;
use proptest::prelude::*;

use crate::api::conditions::{Condition, ConditionStatus, V1Beta1Condition};
use crate::api::v1beta2;

pub(super) fn word() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,8}"
}

pub(super) fn time() -> impl Strategy<Value = Time> {
    (0i64..4_000_000_000).prop_map(|s| Time(jiff::Timestamp::from_second(s).unwrap()))
}

pub(super) fn string_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(word(), "[ -~]{0,12}", 0..3)
}

pub(super) fn metadata() -> impl Strategy<Value = ObjectMeta> {
    (
        word(),
        word(),
        string_map(),
        string_map(),
        prop::option::of(1i64..100),
    )
        .prop_map(
            |(name, namespace, labels, annotations, generation)| ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                labels: (!labels.is_empty()).then_some(labels),
                annotations: (!annotations.is_empty()).then_some(annotations),
                generation,
                ..Default::default()
            },
        )
}

pub(super) fn conditions() -> impl Strategy<Value = Vec<Condition>> {
    let status = prop_oneof![
        Just(ConditionStatus::True),
        Just(ConditionStatus::False),
        Just(ConditionStatus::Unknown)
    ];
    prop::collection::btree_map(
        "[A-Z][a-zA-Z]{0,10}",
        (
            status,
            prop::option::of(0i64..50),
            time(),
            "[A-Z][a-zA-Z]{0,10}",
            "[ -~]{0,20}",
        ),
        0..4,
    )
    .prop_map(|m| {
        m.into_iter()
            .map(
                |(type_, (status, observed_generation, last_transition_time, reason, message))| {
                    Condition {
                        type_,
                        status,
                        observed_generation,
                        last_transition_time,
                        reason,
                        message,
                    }
                },
            )
            .collect()
    })
}

pub(super) fn legacy_conditions() -> impl Strategy<Value = Vec<V1Beta1Condition>> {
    let status = prop_oneof![Just("True"), Just("False"), Just("Unknown")];
    prop::collection::vec(
        (
            "[A-Z][a-zA-Z]{0,10}",
            status,
            prop_oneof![Just(""), Just("Warning")],
            time(),
            "[A-Za-z]{0,8}",
            "[ -~]{0,12}",
        ),
        0..3,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(
                |(type_, status, severity, last_transition_time, reason, message)| {
                    V1Beta1Condition {
                        type_,
                        status: status.into(),
                        severity: severity.into(),
                        last_transition_time,
                        reason,
                        message,
                    }
                },
            )
            .collect()
    })
}

pub(super) fn failure_domains() -> impl Strategy<Value = Vec<v1beta2::FailureDomain>> {
    prop::collection::btree_map(
        word(),
        (prop::option::of(any::<bool>()), string_map()),
        0..4,
    )
    .prop_map(|m| {
        m.into_iter()
            .map(
                |(name, (control_plane, attributes))| v1beta2::FailureDomain {
                    name,
                    control_plane,
                    attributes,
                },
            )
            .collect::<Vec<_>>()
    })
    .prop_shuffle()
}

pub(super) fn load_balancer() -> impl Strategy<Value = v1beta2::DockerLoadBalancer> {
    ("[a-z/]{0,8}", "[a-z0-9.]{0,6}", prop::option::of(word())).prop_map(|(repo, tag, cm)| {
        v1beta2::DockerLoadBalancer {
            image_repository: repo,
            image_tag: tag,
            custom_haproxy_config_template_ref: cm
                .map(|name| v1beta2::LocalObjectReference { name }),
        }
    })
}

pub(super) fn cluster_spec() -> impl Strategy<Value = v1beta2::DockerClusterSpec> {
    (
        prop::option::of(word()),
        prop_oneof![Just(0), 1..65535i32],
        failure_domains(),
        load_balancer(),
    )
        .prop_map(
            |(host, port, failure_domains, load_balancer)| v1beta2::DockerClusterSpec {
                control_plane_endpoint: v1beta2::APIEndpoint {
                    host: host.unwrap_or_default(),
                    port,
                },
                failure_domains,
                load_balancer,
            },
        )
}

pub(super) fn provisioned() -> impl Strategy<Value = Option<bool>> {
    prop::option::of(any::<bool>())
}

/// A DockerCluster's status (a DevCluster's too).
pub(super) fn cluster_status() -> impl Strategy<Value = v1beta2::DockerClusterStatus> {
    (
        conditions(),
        provisioned(),
        failure_domains(),
        legacy_conditions(),
    )
        .prop_map(|(conditions, provisioned, failure_domains, legacy)| {
            v1beta2::DockerClusterStatus {
                conditions,
                initialization: v1beta2::DockerClusterInitializationStatus { provisioned },
                failure_domains,
                deprecated: v1beta2::DeprecatedStatus {
                    v1beta1: v1beta2::V1Beta1DeprecatedStatus { conditions: legacy },
                },
            }
        })
}

pub(super) fn hub_cluster() -> impl Strategy<Value = v1beta2::DockerCluster> {
    (
        metadata(),
        cluster_spec(),
        prop::option::of(cluster_status()),
    )
        .prop_map(|(metadata, spec, status)| v1beta2::DockerCluster {
            metadata,
            spec,
            status,
        })
}

pub(super) fn hub_cluster_template() -> impl Strategy<Value = v1beta2::DockerClusterTemplate> {
    (metadata(), string_map(), string_map(), cluster_spec()).prop_map(
        |(metadata, labels, annotations, spec)| v1beta2::DockerClusterTemplate {
            metadata,
            spec: v1beta2::DockerClusterTemplateSpec {
                template: v1beta2::DockerClusterTemplateResource {
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

pub(super) fn machine_spec() -> impl Strategy<Value = v1beta2::DockerMachineSpec> {
    let mount = ("/[a-z]{1,6}", "/[a-z]{1,6}", any::<bool>()).prop_map(|(c, h, read_only)| {
        v1beta2::Mount {
            container_path: c,
            host_path: h,
            read_only,
        }
    });
    (
        prop_oneof![
            Just(String::new()),
            word().prop_map(|w| format!("docker:////{w}"))
        ],
        "[a-z:./0-9]{0,10}",
        prop::collection::vec(word(), 0..3),
        prop::collection::vec(mount, 0..2),
        prop::option::of(prop_oneof![Just("5m".to_string()), Just("90s".to_string())]),
    )
        .prop_map(
            |(provider_id, custom_image, pre_load_images, extra_mounts, bootstrap_timeout)| {
                v1beta2::DockerMachineSpec {
                    provider_id,
                    custom_image,
                    pre_load_images,
                    extra_mounts,
                    bootstrap_timeout,
                }
            },
        )
}

pub(super) fn addresses() -> impl Strategy<Value = Vec<v1beta2::MachineAddress>> {
    let kind = prop_oneof![
        Just(v1beta2::MachineAddressType::Hostname),
        Just(v1beta2::MachineAddressType::InternalIP),
        Just(v1beta2::MachineAddressType::ExternalIP),
    ];
    prop::collection::vec(
        (kind, word()).prop_map(|(type_, address)| v1beta2::MachineAddress { type_, address }),
        0..3,
    )
}

/// A DockerMachine's status (from which a DevMachine's is made).
pub(super) fn machine_status() -> impl Strategy<Value = v1beta2::DockerMachineStatus> {
    (
        conditions(),
        provisioned(),
        any::<bool>(),
        addresses(),
        prop::option::of(word()),
        legacy_conditions(),
    )
        .prop_map(
            |(
                conditions,
                provisioned,
                load_balancer_configured,
                addresses,
                failure_domain,
                legacy,
            )| {
                v1beta2::DockerMachineStatus {
                    conditions,
                    initialization: v1beta2::DockerMachineInitializationStatus { provisioned },
                    load_balancer_configured,
                    addresses,
                    failure_domain,
                    deprecated: v1beta2::DeprecatedStatus {
                        v1beta1: v1beta2::V1Beta1DeprecatedStatus { conditions: legacy },
                    },
                }
            },
        )
}

pub(super) fn hub_machine() -> impl Strategy<Value = v1beta2::DockerMachine> {
    (
        metadata(),
        machine_spec(),
        prop::option::of(machine_status()),
    )
        .prop_map(|(metadata, spec, status)| v1beta2::DockerMachine {
            metadata,
            spec,
            status,
        })
}

/// A template's `status.capacity`: some of cpu and memory.
pub(super) fn capacity() -> impl Strategy<Value = BTreeMap<String, Quantity>> {
    prop::collection::btree_map(
        prop_oneof![Just("cpu".to_string()), Just("memory".to_string())],
        prop_oneof![Just("4"), Just("16Gi")].prop_map(|q| Quantity(q.to_string())),
        0..3,
    )
}

pub(super) fn hub_machine_template() -> impl Strategy<Value = v1beta2::DockerMachineTemplate> {
    let status = prop::option::of(
        capacity().prop_map(|capacity| v1beta2::DockerMachineTemplateStatus { capacity }),
    );
    (metadata(), string_map(), machine_spec(), status).prop_map(
        |(metadata, labels, spec, status)| v1beta2::DockerMachineTemplate {
            metadata,
            spec: v1beta2::DockerMachineTemplateSpec {
                template: v1beta2::DockerMachineTemplateResource {
                    metadata: v1beta2::TemplateObjectMeta {
                        labels,
                        annotations: BTreeMap::new(),
                    },
                    spec,
                },
            },
            status,
        },
    )
}

pub(super) fn hub_pool() -> impl Strategy<Value = v1beta2::DockerMachinePool> {
    let template = ("[a-z:./0-9]{0,10}", prop::collection::vec(word(), 0..3)).prop_map(
        |(custom_image, pre_load_images)| v1beta2::DockerMachinePoolMachineTemplate {
            custom_image,
            pre_load_images,
            extra_mounts: Vec::new(),
        },
    );
    let spec = (template, word(), prop::collection::vec(word(), 0..3)).prop_map(
        |(template, provider_id, provider_id_list)| v1beta2::DockerMachinePoolSpec {
            template,
            provider_id,
            provider_id_list,
        },
    );
    let instance = (
        addresses(),
        word(),
        prop::option::of(word()),
        prop::option::of(word()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(addresses, instance_name, provider_id, version, ready, bootstrapped)| {
                v1beta2::DockerMachinePoolInstanceStatus {
                    addresses,
                    instance_name,
                    provider_id,
                    version,
                    ready,
                    bootstrapped,
                }
            },
        );
    let status = (
        any::<bool>(),
        0..10i32,
        0..10i64,
        prop::collection::vec(instance, 0..2),
        prop_oneof![Just(String::new()), Just("DockerMachine".to_string())],
        conditions(),
        legacy_conditions(),
    )
        .prop_map(
            |(ready, replicas, observed_generation, instances, kind, conditions, legacy)| {
                v1beta2::DockerMachinePoolStatus {
                    ready,
                    replicas,
                    observed_generation,
                    instances,
                    infrastructure_machine_kind: kind,
                    conditions,
                    deprecated: v1beta2::DeprecatedStatus {
                        v1beta1: v1beta2::V1Beta1DeprecatedStatus { conditions: legacy },
                    },
                }
            },
        );
    (metadata(), spec, prop::option::of(status)).prop_map(|(metadata, spec, status)| {
        v1beta2::DockerMachinePool {
            metadata,
            spec,
            status,
        }
    })
}
