use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::ObjectMeta;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::api::conditions::{Condition, ConditionStatus, V1Beta1Condition};

const V1BETA1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const V1BETA2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";

// ---- strategies --------------------------------------------------------------------------

fn word() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,8}"
}

fn time() -> impl Strategy<Value = Time> {
    (0i64..4_000_000_000).prop_map(|s| Time(jiff::Timestamp::from_second(s).unwrap()))
}

fn string_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(word(), "[ -~]{0,12}", 0..3)
}

fn metadata() -> impl Strategy<Value = ObjectMeta> {
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

fn conditions() -> impl Strategy<Value = Vec<Condition>> {
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

fn legacy_conditions() -> impl Strategy<Value = Vec<V1Beta1Condition>> {
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

fn failure_domains() -> impl Strategy<Value = Vec<v1beta2::FailureDomain>> {
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

fn load_balancer() -> impl Strategy<Value = v1beta2::DockerLoadBalancer> {
    ("[a-z/]{0,8}", "[a-z0-9.]{0,6}", prop::option::of(word())).prop_map(|(repo, tag, cm)| {
        v1beta2::DockerLoadBalancer {
            image_repository: repo,
            image_tag: tag,
            custom_haproxy_config_template_ref: cm
                .map(|name| v1beta2::LocalObjectReference { name }),
        }
    })
}

fn cluster_spec() -> impl Strategy<Value = v1beta2::DockerClusterSpec> {
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

fn provisioned() -> impl Strategy<Value = Option<bool>> {
    prop::option::of(any::<bool>())
}

fn hub_cluster() -> impl Strategy<Value = v1beta2::DockerCluster> {
    let status = (
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
        });
    (metadata(), cluster_spec(), prop::option::of(status)).prop_map(|(metadata, spec, status)| {
        v1beta2::DockerCluster {
            metadata,
            spec,
            status,
        }
    })
}

fn hub_cluster_template() -> impl Strategy<Value = v1beta2::DockerClusterTemplate> {
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

fn machine_spec() -> impl Strategy<Value = v1beta2::DockerMachineSpec> {
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
        any::<bool>(),
        prop::option::of(prop_oneof![Just("5m".to_string()), Just("90s".to_string())]),
    )
        .prop_map(
            |(
                provider_id,
                custom_image,
                pre_load_images,
                extra_mounts,
                bootstrapped,
                bootstrap_timeout,
            )| {
                v1beta2::DockerMachineSpec {
                    provider_id,
                    custom_image,
                    pre_load_images,
                    extra_mounts,
                    bootstrapped,
                    bootstrap_timeout,
                }
            },
        )
}

fn addresses() -> impl Strategy<Value = Vec<v1beta2::MachineAddress>> {
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

fn hub_machine() -> impl Strategy<Value = v1beta2::DockerMachine> {
    let status = (
        conditions(),
        provisioned(),
        any::<bool>(),
        addresses(),
        legacy_conditions(),
    )
        .prop_map(
            |(conditions, provisioned, load_balancer_configured, addresses, legacy)| {
                v1beta2::DockerMachineStatus {
                    conditions,
                    initialization: v1beta2::DockerMachineInitializationStatus { provisioned },
                    load_balancer_configured,
                    addresses,
                    deprecated: v1beta2::DeprecatedStatus {
                        v1beta1: v1beta2::V1Beta1DeprecatedStatus { conditions: legacy },
                    },
                }
            },
        );
    (metadata(), machine_spec(), prop::option::of(status)).prop_map(|(metadata, spec, status)| {
        v1beta2::DockerMachine {
            metadata,
            spec,
            status,
        }
    })
}

fn hub_machine_template() -> impl Strategy<Value = v1beta2::DockerMachineTemplate> {
    let capacity = prop::collection::btree_map(
        prop_oneof![Just("cpu".to_string()), Just("memory".to_string())],
        prop_oneof![Just("4"), Just("16Gi")].prop_map(|q| Quantity(q.to_string())),
        0..3,
    );
    let status = prop::option::of(
        capacity.prop_map(|capacity| v1beta2::DockerMachineTemplateStatus { capacity }),
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

/// Drops the conversion-data annotation (and an annotation map it leaves empty).
fn without_data(mut meta: ObjectMeta) -> ObjectMeta {
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(CONVERSION_DATA_ANNOTATION);
    }
    if meta.annotations.as_ref().is_some_and(BTreeMap::is_empty) {
        meta.annotations = None;
    }
    meta
}

/// Round trip through the JSON entry point, as the webhook will drive it.
fn json_round_trip<T: Serialize + DeserializeOwned>(
    obj: &T,
    via: &str,
    back: &str,
) -> serde_json::Value {
    let down = convert_object(serde_json::to_value(obj).unwrap(), via).unwrap();
    assert_eq!(down["apiVersion"], via);
    convert_object(down, back).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn hub_cluster_survives_v1beta1(hub in hub_cluster()) {
        let down = docker_cluster_from_hub(&hub).unwrap();
        prop_assert_eq!(docker_cluster_to_hub(&down).unwrap(), hub.clone());
        prop_assert_eq!(json_round_trip(&hub, V1BETA1, V1BETA2), serde_json::to_value(&hub).unwrap());
    }

    #[test]
    fn hub_cluster_template_survives_v1beta1(hub in hub_cluster_template()) {
        let down = docker_cluster_template_from_hub(&hub).unwrap();
        prop_assert_eq!(docker_cluster_template_to_hub(&down).unwrap(), hub.clone());
        prop_assert_eq!(json_round_trip(&hub, V1BETA1, V1BETA2), serde_json::to_value(&hub).unwrap());
    }

    #[test]
    fn hub_machine_survives_v1beta1(hub in hub_machine()) {
        let down = docker_machine_from_hub(&hub).unwrap();
        prop_assert_eq!(docker_machine_to_hub(&down).unwrap(), hub.clone());
        prop_assert_eq!(json_round_trip(&hub, V1BETA1, V1BETA2), serde_json::to_value(&hub).unwrap());
    }

    #[test]
    fn hub_machine_template_survives_v1beta1(hub in hub_machine_template()) {
        let down = docker_machine_template_from_hub(&hub).unwrap();
        prop_assert_eq!(docker_machine_template_to_hub(&down).unwrap(), hub.clone());
        prop_assert_eq!(json_round_trip(&hub, V1BETA1, V1BETA2), serde_json::to_value(&hub).unwrap());
    }

    #[test]
    fn v1beta1_cluster_survives_the_hub(hub in hub_cluster()) {
        // Any v1beta1 object is the down-conversion of some hub object, minus the annotation.
        let mut spoke = docker_cluster_from_hub(&hub).unwrap();
        spoke.metadata = without_data(spoke.metadata);
        let mut back = docker_cluster_from_hub(&docker_cluster_to_hub(&spoke).unwrap()).unwrap();
        back.metadata = without_data(back.metadata);
        prop_assert_eq!(back, spoke);
    }

    #[test]
    fn v1beta1_machine_survives_the_hub(hub in hub_machine()) {
        let mut spoke = docker_machine_from_hub(&hub).unwrap();
        spoke.metadata = without_data(spoke.metadata);
        let mut back = docker_machine_from_hub(&docker_machine_to_hub(&spoke).unwrap()).unwrap();
        back.metadata = without_data(back.metadata);
        prop_assert_eq!(back, spoke);
    }

    #[test]
    fn v1beta1_templates_survive_the_hub_without_annotation(
        cluster in hub_cluster_template(),
        machine in hub_machine_template(),
    ) {
        let mut spoke = docker_cluster_template_from_hub(&cluster).unwrap();
        spoke.metadata = without_data(spoke.metadata);
        let back = docker_cluster_template_from_hub(&docker_cluster_template_to_hub(&spoke).unwrap()).unwrap();
        prop_assert_eq!(back, spoke);
        let mut spoke = docker_machine_template_from_hub(&machine).unwrap();
        spoke.metadata = without_data(spoke.metadata);
        let back = docker_machine_template_from_hub(&docker_machine_template_to_hub(&spoke).unwrap()).unwrap();
        prop_assert_eq!(back, spoke);
    }
}

// ---- table tests ---------------------------------------------------------------------------

fn v1beta1_cluster_json() -> serde_json::Value {
    json!({
        "apiVersion": V1BETA1,
        "kind": "DockerCluster",
        "metadata": {"name": "c1", "namespace": "default"},
        "spec": {
            "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
            "failureDomains": {"fd2": {"controlPlane": true}, "fd1": {"attributes": {"zone": "a"}}}
        },
        "status": {
            "ready": true,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
            "v1beta2": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "Ready", "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z"
            }]}
        }
    })
}

#[test]
fn v1beta1_cluster_moves_fields_to_their_v1beta2_places() {
    let hub = convert_object(v1beta1_cluster_json(), V1BETA2).unwrap();
    assert_eq!(hub["apiVersion"], V1BETA2);
    assert_eq!(
        hub["spec"]["failureDomains"],
        json!([{"name": "fd1", "controlPlane": false, "attributes": {"zone": "a"}}, {"name": "fd2", "controlPlane": true}])
    );
    assert_eq!(
        hub["status"]["initialization"],
        json!({"provisioned": true})
    );
    assert_eq!(hub["status"]["conditions"][0]["reason"], "Ready");
    assert_eq!(
        hub["status"]["deprecated"]["v1beta1"]["conditions"][0]["type"],
        "Ready"
    );
    assert!(hub["status"].get("ready").is_none());
    assert!(hub["metadata"].get("annotations").is_none());
}

#[test]
fn down_conversion_keeps_hub_data_in_the_annotation() {
    let hub = json!({
        "apiVersion": V1BETA2, "kind": "DockerMachine",
        "metadata": {"name": "m1", "namespace": "default"},
        "spec": {"providerID": "docker:////c1-m1"},
        "status": {"initialization": {"provisioned": false}, "loadBalancerConfigured": false}
    });
    let down = convert_object(hub.clone(), V1BETA1).unwrap();
    assert_eq!(down["spec"]["providerID"], "docker:////c1-m1");
    assert_eq!(down["status"]["ready"], false);
    let data = down["metadata"]["annotations"][CONVERSION_DATA_ANNOTATION]
        .as_str()
        .unwrap();
    let data: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(
        data["status"]["initialization"],
        json!({"provisioned": false})
    );
    assert!(data.get("metadata").is_none());
    assert_eq!(convert_object(down, V1BETA2).unwrap(), hub);
}

#[test]
fn edits_made_through_v1beta1_win_over_the_annotation() {
    let hub = json!({
        "apiVersion": V1BETA2, "kind": "DockerMachine",
        "metadata": {"name": "m1"},
        "spec": {},
        "status": {"initialization": {"provisioned": false}}
    });
    let mut down = convert_object(hub, V1BETA1).unwrap();
    down["status"]["ready"] = json!(true);
    let up = convert_object(down, V1BETA2).unwrap();
    assert_eq!(up["status"]["initialization"], json!({"provisioned": true}));
}

#[test]
fn same_version_is_returned_unchanged() {
    let obj = v1beta1_cluster_json();
    assert_eq!(convert_object(obj.clone(), V1BETA1).unwrap(), obj);
}

#[test]
fn bad_requests_are_errors_not_panics() {
    let cluster = v1beta1_cluster_json();
    let mut unknown_kind = cluster.clone();
    unknown_kind["kind"] = json!("DockerMachinePoolX");
    assert!(matches!(
        convert_object(unknown_kind, V1BETA2),
        Err(ConversionError::UnknownKind { .. })
    ));
    assert!(matches!(
        convert_object(cluster.clone(), "infrastructure.cluster.x-k8s.io/v1alpha4"),
        Err(ConversionError::UnknownVersion { .. })
    ));
    assert!(matches!(
        convert_object(cluster.clone(), "cluster.x-k8s.io/v1beta2"),
        Err(ConversionError::ForeignGroup { .. })
    ));
    assert!(matches!(
        convert_object(json!({"kind": "DockerCluster"}), V1BETA2),
        Err(ConversionError::MissingTypeMeta)
    ));
    let mut broken = cluster.clone();
    broken["spec"] = json!("not an object");
    let error = convert_object(broken, V1BETA2).unwrap_err();
    assert_eq!(error.to_string(), "failed to decode DockerCluster v1beta1");
    let mut huge_port = cluster.clone();
    huge_port["spec"]["controlPlaneEndpoint"]["port"] = json!(1_i64 << 40);
    assert!(matches!(
        convert_object(huge_port, V1BETA2),
        Err(ConversionError::PortOutOfRange { .. })
    ));
    let mut bad_data = cluster;
    bad_data["metadata"]["annotations"] = json!({CONVERSION_DATA_ANNOTATION: "{not json"});
    assert!(matches!(
        convert_object(bad_data, V1BETA2),
        Err(ConversionError::ConversionData { .. })
    ));
}

#[test]
fn templates_get_the_annotation_only_when_needed() {
    let exact = json!({
        "apiVersion": V1BETA2, "kind": "DockerClusterTemplate",
        "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"failureDomains": [{"name": "a", "controlPlane": true}]}}}
    });
    let down = convert_object(exact, V1BETA1).unwrap();
    assert!(down["metadata"].get("annotations").is_none(), "{down}");
    let lossy = json!({
        "apiVersion": V1BETA2, "kind": "DockerMachineTemplate",
        "metadata": {"name": "t"},
        "spec": {"template": {"spec": {}}},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi"}}
    });
    let down = convert_object(lossy.clone(), V1BETA1).unwrap();
    assert!(down["metadata"]["annotations"][CONVERSION_DATA_ANNOTATION].is_string());
    assert!(down.get("status").is_none());
    assert_eq!(convert_object(down, V1BETA2).unwrap(), lossy);
}
