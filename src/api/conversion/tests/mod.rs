use std::collections::BTreeMap;

use kube::core::ObjectMeta;
use proptest::prelude::*;
use serde_json::json;

use super::*;

mod dev;
mod dev_strategies;
mod legacy;
mod strategies;

use strategies::*;

const V1BETA1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const V1BETA2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";

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
    fn hub_pool_and_its_template_survive_v1beta1(
        hub in hub_pool(),
        labels in string_map(),
        capacity in prop::option::of(capacity()),
    ) {
        let down = docker_machine_pool_from_hub(&hub).unwrap();
        prop_assert_eq!(docker_machine_pool_to_hub(&down).unwrap(), hub.clone());
        prop_assert_eq!(json_round_trip(&hub, V1BETA1, V1BETA2), serde_json::to_value(&hub).unwrap());
        let template = v1beta2::DockerMachinePoolTemplate {
            metadata: hub.metadata.clone(),
            spec: v1beta2::DockerMachinePoolTemplateSpec {
                template: v1beta2::DockerMachinePoolTemplateResource {
                    metadata: v1beta2::TemplateObjectMeta { labels, annotations: BTreeMap::new() },
                    spec: hub.spec.clone(),
                },
            },
            status: capacity.map(|capacity| v1beta2::DockerMachinePoolTemplateStatus { capacity }),
        };
        let down = docker_machine_pool_template_from_hub(&template).unwrap();
        prop_assert_eq!(&down.metadata, &template.metadata);
        prop_assert_eq!(&down.status, &template.status);
        prop_assert_eq!(json_round_trip(&template, V1BETA1, V1BETA2), serde_json::to_value(&template).unwrap());
    }

    #[test]
    fn v1beta1_pool_survives_the_hub(hub in hub_pool()) {
        let mut spoke = docker_machine_pool_from_hub(&hub).unwrap();
        spoke.metadata = without_data(spoke.metadata);
        let mut back = docker_machine_pool_from_hub(&docker_machine_pool_to_hub(&spoke).unwrap()).unwrap();
        back.metadata = without_data(back.metadata);
        prop_assert_eq!(back, spoke);
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
        convert_object(cluster.clone(), "infrastructure.cluster.x-k8s.io/v1alpha2"),
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
