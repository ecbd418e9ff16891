//! The retired versions v1alpha3 and v1alpha4 convert as CAPD 1.12's do: every kind and version
//! its CRDs list round-trips both ways (as CAPD's fuzz tests check), and the fields land where
//! CAPD puts them.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::api::legacy::{V1ALPHA3, V1ALPHA4};

const V1ALPHA3_API: &str = "infrastructure.cluster.x-k8s.io/v1alpha3";
const V1ALPHA4_API: &str = "infrastructure.cluster.x-k8s.io/v1alpha4";

fn api(version: &str) -> String {
    format!("{GROUP}/{version}")
}

/// hub → spoke → hub is lossless (typed, and through [`convert_object`]), and spoke → hub → spoke
/// is lossless for any spoke object (the down-conversion of some hub, without the annotation).
macro_rules! round_trips {
    ($hub_test:ident, $spoke_test:ident, $strategy:expr, $version:expr, $to_hub:expr, $from_hub:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]

            #[test]
            fn $hub_test(hub in $strategy) {
                let down = $from_hub(&hub).unwrap();
                prop_assert_eq!(&down.api_version, &api($version));
                prop_assert!(down.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(CONVERSION_DATA_ANNOTATION)));
                prop_assert_eq!($to_hub(&down).unwrap(), hub.clone());
                prop_assert_eq!(
                    json_round_trip(&hub, &api($version), V1BETA2),
                    serde_json::to_value(&hub).unwrap()
                );
            }

            #[test]
            fn $spoke_test(hub in $strategy) {
                let mut spoke = $from_hub(&hub).unwrap();
                spoke.metadata = without_data(spoke.metadata);
                let mut back = $from_hub(&$to_hub(&spoke).unwrap()).unwrap();
                back.metadata = without_data(back.metadata);
                prop_assert_eq!(back, spoke);
            }
        }
    };
}

round_trips!(
    hub_cluster_survives_v1alpha3,
    v1alpha3_cluster_survives_the_hub,
    hub_cluster(),
    V1ALPHA3,
    docker_cluster_v1alpha3_to_hub,
    docker_cluster_v1alpha3_from_hub
);
round_trips!(
    hub_cluster_survives_v1alpha4,
    v1alpha4_cluster_survives_the_hub,
    hub_cluster(),
    V1ALPHA4,
    docker_cluster_v1alpha4_to_hub,
    docker_cluster_v1alpha4_from_hub
);
round_trips!(
    hub_cluster_template_survives_v1alpha4,
    v1alpha4_cluster_template_survives_the_hub,
    hub_cluster_template(),
    V1ALPHA4,
    docker_cluster_template_v1alpha4_to_hub,
    docker_cluster_template_v1alpha4_from_hub
);
round_trips!(
    hub_machine_survives_v1alpha3,
    v1alpha3_machine_survives_the_hub,
    hub_machine(),
    V1ALPHA3,
    docker_machine_legacy_to_hub,
    |h: &v1beta2::DockerMachine| docker_machine_legacy_from_hub(h, V1ALPHA3)
);
round_trips!(
    hub_machine_survives_v1alpha4,
    v1alpha4_machine_survives_the_hub,
    hub_machine(),
    V1ALPHA4,
    docker_machine_legacy_to_hub,
    |h: &v1beta2::DockerMachine| docker_machine_legacy_from_hub(h, V1ALPHA4)
);
round_trips!(
    hub_machine_template_survives_v1alpha3,
    v1alpha3_machine_template_survives_the_hub,
    hub_machine_template(),
    V1ALPHA3,
    docker_machine_template_legacy_to_hub,
    |h: &v1beta2::DockerMachineTemplate| docker_machine_template_legacy_from_hub(h, V1ALPHA3)
);
round_trips!(
    hub_machine_template_survives_v1alpha4,
    v1alpha4_machine_template_survives_the_hub,
    hub_machine_template(),
    V1ALPHA4,
    docker_machine_template_legacy_to_hub,
    |h: &v1beta2::DockerMachineTemplate| docker_machine_template_legacy_from_hub(h, V1ALPHA4)
);
round_trips!(
    hub_pool_survives_v1alpha3,
    v1alpha3_pool_survives_the_hub,
    hub_pool(),
    V1ALPHA3,
    docker_machine_pool_legacy_to_hub,
    |h: &v1beta2::DockerMachinePool| docker_machine_pool_legacy_from_hub(h, V1ALPHA3)
);
round_trips!(
    hub_pool_survives_v1alpha4,
    v1alpha4_pool_survives_the_hub,
    hub_pool(),
    V1ALPHA4,
    docker_machine_pool_legacy_to_hub,
    |h: &v1beta2::DockerMachinePool| docker_machine_pool_legacy_from_hub(h, V1ALPHA4)
);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The API server converts an object it holds in v1beta1 to a retired version and back
    /// through the hub: a v1beta1 client sees its object unchanged.
    #[test]
    fn v1beta1_objects_survive_the_retired_versions(
        cluster in hub_cluster(),
        machine in hub_machine(),
        template in hub_machine_template(),
        pool in hub_pool(),
    ) {
        let objects = [
            serde_json::to_value(&cluster).unwrap(),
            serde_json::to_value(&machine).unwrap(),
            serde_json::to_value(&template).unwrap(),
            serde_json::to_value(&pool).unwrap(),
        ];
        for hub in objects {
            let mut v1beta1 = convert_object(hub, V1BETA1).unwrap();
            strip_data(&mut v1beta1);
            for retired in [V1ALPHA3_API, V1ALPHA4_API] {
                let mut back = json_round_trip(&v1beta1, retired, V1BETA1);
                strip_data(&mut back);
                prop_assert_eq!(&back, &v1beta1);
            }
        }
    }
}

/// Drops the conversion-data annotation from a JSON object.
fn strip_data(obj: &mut serde_json::Value) {
    let meta: ObjectMeta = serde_json::from_value(obj["metadata"].clone()).unwrap();
    obj["metadata"] = serde_json::to_value(without_data(meta)).unwrap();
}

// ---- table tests ---------------------------------------------------------------------------

#[test]
fn a_v1alpha3_cluster_as_capd_stored_it_moves_to_its_v1beta2_places() {
    let stored = json!({
        "apiVersion": V1ALPHA3_API,
        "kind": "DockerCluster",
        "metadata": {"name": "c1", "namespace": "default"},
        "spec": {
            "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
            "failureDomains": {"fd2": {"controlPlane": true}, "fd1": {"attributes": {"zone": "a"}}}
        },
        "status": {
            "ready": true,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2021-01-01T00:00:00Z"}]
        }
    });
    let hub = convert_object(stored, V1BETA2).unwrap();
    assert_eq!(
        hub["spec"],
        json!({
            "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
            "failureDomains": [
                {"name": "fd1", "controlPlane": false, "attributes": {"zone": "a"}},
                {"name": "fd2", "controlPlane": true}
            ]
        })
    );
    assert_eq!(
        hub["status"]["initialization"],
        json!({"provisioned": true})
    );
    assert_eq!(
        hub["status"]["deprecated"]["v1beta1"]["conditions"][0]["type"],
        "Ready"
    );
    assert!(hub["status"].get("conditions").is_none());
    assert!(hub["metadata"].get("annotations").is_none());
}

#[test]
fn v1alpha4_keeps_what_it_cannot_hold_in_the_annotation() {
    let hub = json!({
        "apiVersion": V1BETA2, "kind": "DockerMachine",
        "metadata": {"name": "m1", "namespace": "default"},
        "spec": {"bootstrapTimeout": "15m", "customImage": "kindest/node:v1.34.0"},
        "status": {
            "initialization": {"provisioned": false},
            "loadBalancerConfigured": false,
            "conditions": [{"type": "Ready", "status": "False", "reason": "NotReady", "message": "",
                            "lastTransitionTime": "2025-01-01T00:00:00Z"}]
        }
    });
    let down = convert_object(hub.clone(), V1ALPHA4_API).unwrap();
    assert_eq!(down["apiVersion"], V1ALPHA4_API);
    assert_eq!(down["spec"], json!({"customImage": "kindest/node:v1.34.0"}));
    assert_eq!(down["status"], json!({"ready": false}));
    let data = down["metadata"]["annotations"][CONVERSION_DATA_ANNOTATION]
        .as_str()
        .unwrap();
    let data: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(data["spec"]["bootstrapTimeout"], "15m");
    assert_eq!(convert_object(down, V1BETA2).unwrap(), hub);
}

#[test]
fn a_v1alpha3_cluster_gets_its_load_balancer_back_from_the_annotation() {
    let hub = json!({
        "apiVersion": V1BETA2, "kind": "DockerCluster",
        "metadata": {"name": "c1"},
        "spec": {"loadBalancer": {"imageTag": "v2.4", "customHAProxyConfigTemplateRef": {"name": "cm"}}}
    });
    let v1alpha3 = convert_object(hub.clone(), V1ALPHA3_API).unwrap();
    assert!(v1alpha3["spec"].get("loadBalancer").is_none(), "{v1alpha3}");
    let v1alpha4 = convert_object(hub.clone(), V1ALPHA4_API).unwrap();
    assert_eq!(
        v1alpha4["spec"]["loadBalancer"],
        json!({"imageTag": "v2.4"})
    );
    for down in [v1alpha3, v1alpha4] {
        assert_eq!(convert_object(down, V1BETA2).unwrap(), hub);
    }
}

#[test]
fn a_retired_version_converts_to_v1beta1_through_the_hub() {
    let stored = json!({
        "apiVersion": V1ALPHA4_API, "kind": "DockerMachine",
        "metadata": {"name": "m1"},
        "spec": {"providerID": "docker:////c1-m1", "bootstrapped": true},
        "status": {"ready": true, "addresses": [{"type": "InternalIP", "address": "172.18.0.4"}]}
    });
    let v1beta1 = convert_object(stored, V1BETA1).unwrap();
    assert_eq!(v1beta1["apiVersion"], V1BETA1);
    assert_eq!(v1beta1["spec"]["providerID"], "docker:////c1-m1");
    assert_eq!(v1beta1["status"]["ready"], true);
    assert_eq!(v1beta1["status"]["addresses"][0]["address"], "172.18.0.4");
}

#[test]
fn only_the_versions_a_kind_lists_convert() {
    let object = |kind: &str| {
        json!({"apiVersion": V1BETA2, "kind": kind, "metadata": {"name": "x"},
               "spec": {"template": {"spec": {}}}})
    };
    for (kind, version) in [
        ("DockerClusterTemplate", V1ALPHA3_API),
        ("DockerMachinePoolTemplate", V1ALPHA4_API),
        ("DevMachine", V1ALPHA4_API),
        ("DockerMachine", "infrastructure.cluster.x-k8s.io/v1alpha2"),
    ] {
        let error = convert_object(object(kind), version).unwrap_err();
        assert!(
            matches!(error, ConversionError::UnknownVersion { .. }),
            "{kind} {version}: {error}"
        );
    }
    for (kind, version) in [
        ("DockerClusterTemplate", V1ALPHA4_API),
        ("DockerMachineTemplate", V1ALPHA3_API),
    ] {
        let down = convert_object(object(kind), version).unwrap();
        assert_eq!(down["apiVersion"], version, "{kind}");
    }
}
