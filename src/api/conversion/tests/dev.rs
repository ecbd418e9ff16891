//! The Dev* kinds convert with the Docker kinds' conventions.

use proptest::prelude::*;
use serde_json::json;

use super::dev_strategies::*;
use super::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn hub_dev_cluster_survives_v1beta1(hub in hub_dev_cluster()) {
        let down = dev_cluster_from_hub(&hub).unwrap();
        prop_assert_eq!(dev_cluster_to_hub(&down).unwrap(), hub.clone());
        prop_assert_eq!(json_round_trip(&hub, V1BETA1, V1BETA2), serde_json::to_value(&hub).unwrap());
    }

    #[test]
    fn hub_dev_cluster_template_survives_v1beta1(hub in hub_dev_cluster_template()) {
        let down = dev_cluster_template_from_hub(&hub).unwrap();
        prop_assert_eq!(dev_cluster_template_to_hub(&down).unwrap(), hub.clone());
        prop_assert_eq!(json_round_trip(&hub, V1BETA1, V1BETA2), serde_json::to_value(&hub).unwrap());
    }

    #[test]
    fn hub_dev_machine_survives_v1beta1(hub in hub_dev_machine()) {
        let down = dev_machine_from_hub(&hub).unwrap();
        prop_assert_eq!(dev_machine_to_hub(&down).unwrap(), hub.clone());
        prop_assert_eq!(json_round_trip(&hub, V1BETA1, V1BETA2), serde_json::to_value(&hub).unwrap());
    }

    #[test]
    fn hub_dev_machine_template_survives_v1beta1(hub in hub_dev_machine_template()) {
        let down = dev_machine_template_from_hub(&hub).unwrap();
        prop_assert_eq!(dev_machine_template_to_hub(&down).unwrap(), hub.clone());
        prop_assert_eq!(json_round_trip(&hub, V1BETA1, V1BETA2), serde_json::to_value(&hub).unwrap());
    }

    #[test]
    fn v1beta1_dev_cluster_and_machine_survive_the_hub(
        cluster in hub_dev_cluster(),
        machine in hub_dev_machine(),
    ) {
        // Any v1beta1 object is the down-conversion of some hub object, minus the annotation.
        let mut spoke = dev_cluster_from_hub(&cluster).unwrap();
        spoke.metadata = without_data(spoke.metadata);
        let mut back = dev_cluster_from_hub(&dev_cluster_to_hub(&spoke).unwrap()).unwrap();
        back.metadata = without_data(back.metadata);
        prop_assert_eq!(back, spoke);
        let mut spoke = dev_machine_from_hub(&machine).unwrap();
        spoke.metadata = without_data(spoke.metadata);
        let mut back = dev_machine_from_hub(&dev_machine_to_hub(&spoke).unwrap()).unwrap();
        back.metadata = without_data(back.metadata);
        prop_assert_eq!(back, spoke);
    }

    #[test]
    fn v1beta1_dev_templates_survive_the_hub_without_annotation(
        cluster in hub_dev_cluster_template(),
        machine in hub_dev_machine_template(),
    ) {
        let mut spoke = dev_cluster_template_from_hub(&cluster).unwrap();
        spoke.metadata = without_data(spoke.metadata);
        let back = dev_cluster_template_from_hub(&dev_cluster_template_to_hub(&spoke).unwrap()).unwrap();
        prop_assert_eq!(back, spoke);
        let mut spoke = dev_machine_template_from_hub(&machine).unwrap();
        spoke.metadata = without_data(spoke.metadata);
        let back = dev_machine_template_from_hub(&dev_machine_template_to_hub(&spoke).unwrap()).unwrap();
        prop_assert_eq!(back, spoke);
    }
}

#[test]
fn v1beta1_dev_cluster_failure_domain_map_becomes_a_sorted_list() {
    let spoke = json!({
        "apiVersion": V1BETA1, "kind": "DevCluster",
        "metadata": {"name": "c1", "namespace": "default"},
        "spec": {
            "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
            "backend": {"docker": {
                "failureDomains": {"fd2": {"controlPlane": true}, "fd1": {"attributes": {"zone": "a"}}},
                "loadBalancer": {"imageTag": "v2"}
            }}
        },
        "status": {"ready": true, "failureDomains": {"fd1": {}}}
    });
    let hub = convert_object(spoke, V1BETA2).unwrap();
    assert_eq!(
        hub["spec"],
        json!({
            "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
            "backend": {"docker": {
                "failureDomains": [
                    {"name": "fd1", "controlPlane": false, "attributes": {"zone": "a"}},
                    {"name": "fd2", "controlPlane": true}
                ],
                "loadBalancer": {"imageTag": "v2"}
            }}
        })
    );
    assert_eq!(
        hub["status"],
        json!({"initialization": {"provisioned": true}, "failureDomains": [{"name": "fd1", "controlPlane": false}]})
    );
    assert!(hub["metadata"].get("annotations").is_none());
}

#[test]
fn dev_machine_down_conversion_keeps_the_hub_data() {
    let hub = json!({
        "apiVersion": V1BETA2, "kind": "DevMachine",
        "metadata": {"name": "m1", "namespace": "default"},
        "spec": {"providerID": "docker:////c1-m1", "backend": {"docker": {"customImage": "kindest/node:v1.31.0"}}},
        "status": {
            "initialization": {"provisioned": false},
            "failureDomain": "fd1"
        }
    });
    let down = convert_object(hub.clone(), V1BETA1).unwrap();
    assert_eq!(
        down["spec"], hub["spec"],
        "the spec has one shape in both versions"
    );
    // CAPD 1.14 removed `status.backend` from both versions.
    assert_eq!(down["status"], json!({"ready": false}));
    assert!(down["metadata"]["annotations"][CONVERSION_DATA_ANNOTATION].is_string());
    assert_eq!(convert_object(down.clone(), V1BETA2).unwrap(), hub);

    // What a v1beta1 client changes wins over the annotation.
    let mut edited = down;
    edited["status"]["ready"] = json!(true);
    let up = convert_object(edited, V1BETA2).unwrap();
    assert_eq!(up["status"]["initialization"], json!({"provisioned": true}));
    assert_eq!(up["status"]["failureDomain"], "fd1");
}

#[test]
fn dev_templates_get_the_annotation_only_when_needed() {
    let exact = json!({
        "apiVersion": V1BETA2, "kind": "DevClusterTemplate",
        "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"backend": {"docker": {"failureDomains": [{"name": "a", "controlPlane": true}]}}}}}
    });
    let down = convert_object(exact.clone(), V1BETA1).unwrap();
    assert!(down["metadata"].get("annotations").is_none(), "{down}");
    assert_eq!(convert_object(down, V1BETA2).unwrap(), exact);
    let lossy = json!({
        "apiVersion": V1BETA2, "kind": "DevMachineTemplate",
        "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"backend": {"inMemory": {}}}}},
        "status": {"capacity": {"cpu": "8"}}
    });
    let down = convert_object(lossy.clone(), V1BETA1).unwrap();
    assert!(down["metadata"]["annotations"][CONVERSION_DATA_ANNOTATION].is_string());
    assert!(down.get("status").is_none());
    assert_eq!(convert_object(down, V1BETA2).unwrap(), lossy);
}
