use serde_json::json;

use super::*;

#[test]
fn docker_machine_serializes_like_capd() {
    let mut machine = DockerMachine::new(
        "m1",
        DockerMachineSpec {
            provider_id: provider_id("c1-m1"),
            extra_mounts: vec![Mount {
                container_path: "/var/run/docker.sock".into(),
                host_path: "/var/run/docker.sock".into(),
                read_only: false,
            }],
            ..Default::default()
        },
    );
    machine.status = Some(DockerMachineStatus {
        initialization: DockerMachineInitializationStatus {
            provisioned: Some(true),
        },
        addresses: vec![MachineAddress {
            type_: MachineAddressType::InternalIP,
            address: "172.18.0.4".into(),
        }],
        ..Default::default()
    });
    let value = serde_json::to_value(&machine).unwrap();
    assert_eq!(
        value,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DockerMachine",
            "metadata": {"name": "m1"},
            "spec": {
                "providerID": "docker:////c1-m1",
                "extraMounts": [{"containerPath": "/var/run/docker.sock", "hostPath": "/var/run/docker.sock"}]
            },
            "status": {
                "initialization": {"provisioned": true},
                "loadBalancerConfigured": false,
                "addresses": [{"type": "InternalIP", "address": "172.18.0.4"}]
            }
        })
    );
}

#[test]
fn quick_start_templates_decode() {
    let cluster_template: DockerClusterTemplate = serde_saphyr::from_str(
        r#"
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerClusterTemplate
metadata:
  name: quick-start-cluster
spec:
  template:
    spec:
      failureDomains:
      - name: fd1
        controlPlane: true
      loadBalancer:
        customHAProxyConfigTemplateRef:
          name: haproxy
"#,
    )
    .unwrap();
    let spec = &cluster_template.spec.template.spec;
    assert_eq!(spec.failure_domains[0].control_plane, Some(true));
    assert_eq!(
        spec.load_balancer
            .custom_haproxy_config_template_ref
            .as_ref()
            .unwrap()
            .name,
        "haproxy"
    );

    let machine_template: DockerMachineTemplate = serde_saphyr::from_str(
        r#"
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachineTemplate
metadata:
  name: quick-start-control-plane
spec:
  template:
    spec:
      customImage: kindest/node:v1.34.0
      preLoadImages: [registry.k8s.io/pause:3.10]
      bootstrapTimeout: 2m
status:
  capacity:
    cpu: "8"
    memory: 32Gi
"#,
    )
    .unwrap();
    let spec = &machine_template.spec.template.spec;
    assert_eq!(spec.custom_image, "kindest/node:v1.34.0");
    assert_eq!(
        spec.bootstrap_timeout_duration(),
        Ok(std::time::Duration::from_secs(120))
    );
    assert_eq!(
        machine_template.status.unwrap().capacity["memory"].0,
        "32Gi"
    );
}

#[test]
fn bootstrap_timeout_defaults_to_five_minutes_and_rejects_garbage() {
    let mut spec = DockerMachineSpec::default();
    assert_eq!(
        spec.bootstrap_timeout_duration(),
        Ok(DEFAULT_BOOTSTRAP_TIMEOUT)
    );
    spec.bootstrap_timeout = Some("soon".into());
    assert!(spec.bootstrap_timeout_duration().is_err());
}

#[test]
fn empty_spec_and_endpoint_are_omitted() {
    let cluster = DockerCluster::new("c1", DockerClusterSpec::default());
    let value = serde_json::to_value(&cluster).unwrap();
    assert_eq!(value["spec"], json!({}));
    let endpoint = APIEndpoint {
        host: String::new(),
        port: 6443,
    };
    assert_eq!(
        serde_json::to_value(endpoint).unwrap(),
        json!({"port": 6443})
    );
}

/// CAPD 1.14's quick-start DevMachinePool reads as a DockerMachinePool with the same settings,
/// and what the pool controller writes in the Docker shape comes back in the Dev shape.
#[test]
fn dev_machine_pool_has_a_docker_machine_pool_view() {
    let pool: DevMachinePool = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "DevMachinePool",
        "metadata": {"name": "p1"},
        "spec": {
            "providerIDList": ["docker:////c1-p1-a"],
            "backend": {"docker": {
                "customImage": "kindest/node:v1.31.0",
                "preLoadImages": ["nginx"],
                "extraMounts": [{"containerPath": "/a", "hostPath": "/b", "readOnly": true}],
            }},
        },
    }))
    .unwrap();
    let docker = pool.spec.docker().expect("docker backend");
    assert_eq!(docker.template.custom_image, "kindest/node:v1.31.0");
    assert_eq!(docker.template.pre_load_images, ["nginx"]);
    assert_eq!(docker.template.extra_mounts[0].host_path, "/b");
    assert_eq!(docker.provider_id_list, ["docker:////c1-p1-a"]);
    assert_eq!(
        DevMachinePoolSpec::from(&docker),
        pool.spec,
        "spec round trip"
    );
    assert_eq!(
        DevMachinePoolSpec::default().docker(),
        None,
        "no backend, no view"
    );

    let written = DockerMachinePoolStatus {
        ready: true,
        replicas: 2,
        observed_generation: 3,
        infrastructure_machine_kind: "DevMachine".into(),
        instances: vec![DockerMachinePoolInstanceStatus {
            instance_name: "c1-p1-a".into(),
            ready: true,
            bootstrapped: true,
            ..Default::default()
        }],
        ..Default::default()
    };
    let status = DevMachinePoolStatus::from(&written);
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        json!({
            "ready": true,
            "replicas": 2,
            "observedGeneration": 3,
            "infrastructureMachineKind": "DevMachine",
            "instances": [{"instanceName": "c1-p1-a", "ready": true}],
        }),
        "no `bootstrapped`, no `deprecated`: DevMachinePool has neither"
    );
    let mut back = DockerMachinePoolStatus::from(&status);
    back.instances[0].bootstrapped = true;
    assert_eq!(back, written, "the rest survives the round trip");
}
