//! CAPD 1.12's in-memory templates: the `in-memory` flavor is a Cluster of ClusterClass
//! `in-memory`, whose DevClusterTemplate and DevMachineTemplates have the in-memory backend with
//! CAPD's delays; and every infrastructure object of every template passes this provider's
//! admission webhooks (defaulting, then validation) as the API server would call them.

use base64::Engine;
use capd::api::v1beta2::DevMachineSpec;
use capd::controllers::dockermachine::inmemory_stages::delays;
use capd::webhooks::admission::review;
use capd::webhooks::{Endpoint, Kind, Settings};
use serde_json::{Value, json};

use super::*;

const CLASS: &str = "clusterclass-in-memory.yaml";

#[test]
fn clusterctl_adds_class_in_memory_to_the_in_memory_flavor() {
    let objects = generate("in-memory", &demo());
    let kinds: Vec<String> = objects.iter().map(describe).collect();
    assert_eq!(
        kinds,
        [
            "Cluster demo (cluster.x-k8s.io/v1beta2)",
            "ClusterClass in-memory (cluster.x-k8s.io/v1beta2)",
            "DevClusterTemplate in-memory-cluster (infrastructure.cluster.x-k8s.io/v1beta2)",
            "KubeadmControlPlaneTemplate in-memory-control-plane (controlplane.cluster.x-k8s.io/v1beta2)",
            "DevMachineTemplate in-memory-control-plane (infrastructure.cluster.x-k8s.io/v1beta2)",
            "DevMachineTemplate in-memory-default-worker-machinetemplate (infrastructure.cluster.x-k8s.io/v1beta2)",
            "KubeadmConfigTemplate in-memory-default-worker-bootstraptemplate (bootstrap.cluster.x-k8s.io/v1beta2)",
        ]
    );
    let topology = &find(&objects, "Cluster", "demo")["spec"]["topology"];
    assert_eq!(
        topology["classRef"],
        json!({"name": "in-memory", "namespace": "default"}),
        "the class in the cluster's namespace, as CAPD's template names it"
    );
    assert_eq!(topology["version"], "v1.34.0");
    assert_eq!(topology["controlPlane"]["replicas"], 1);
    assert_eq!(
        topology["workers"],
        json!({"machineDeployments": [{"class": "default-worker", "name": "md-0", "replicas": 1}]})
    );
    assert_clean("in-memory references", &refs::check(&objects));

    // The same variables as the other topology flavors, with the same defaults, but no
    // ClusterClass variable (the class has neither variables nor patches).
    let variables = |file: &str| -> Vec<String> {
        envsubst::variables(&template_text(file))
            .unwrap()
            .into_iter()
            .map(|v| v.name)
            .collect()
    };
    let mut expected = variables("cluster-template-dev.yaml");
    expected.sort();
    let mut in_memory = variables("cluster-template-in-memory.yaml");
    in_memory.sort();
    in_memory.dedup();
    expected.dedup();
    assert_eq!(in_memory, expected);
    let class = find(&objects, "ClusterClass", "in-memory");
    assert!(class["spec"].get("variables").is_none(), "{class}");
    assert!(class["spec"].get("patches").is_none(), "{class}");
}

#[test]
fn class_in_memory_has_capds_backend_and_delays() {
    let objects = render(CLASS, &demo());
    assert_eq!(
        find(&objects, "DevClusterTemplate", "in-memory-cluster")["spec"],
        json!({"template": {"spec": {"backend": {"inMemory": {}}}}}),
        "the manager picks the endpoint"
    );
    for name in [
        "in-memory-control-plane",
        "in-memory-default-worker-machinetemplate",
    ] {
        let spec = &find(&objects, "DevMachineTemplate", name)["spec"]["template"]["spec"];
        let spec: DevMachineSpec = serde_json::from_value(spec.clone())
            .unwrap_or_else(|e| panic!("{name} is no DevMachine spec: {e}"));
        let backend = spec.backend.in_memory.expect("the in-memory backend");
        assert!(spec.backend.docker.is_none(), "{name}");
        // What the manager makes of them: CAPD's 10 s VM and 2 s Node, etcd and API server,
        // each with up to 20% more.
        for seed in ["uid-a", "uid-b", "uid-c"] {
            let d = delays(&backend, seed).unwrap();
            for (stage, delay, nominal) in [
                ("vm", d.vm, 10.0),
                ("node", d.node, 2.0),
                ("etcd", d.etcd, 2.0),
                ("apiServer", d.api_server, 2.0),
            ] {
                let seconds = delay.as_secs_f64();
                assert!(
                    (nominal..nominal * 1.2).contains(&seconds),
                    "{name} {stage}: {seconds} s"
                );
            }
        }
    }
}

/// The object after `endpoint`'s answer to a create of `object`: refused with its message, or
/// allowed, with the defaulting patch applied.
fn admit(endpoint: Endpoint, object: &Value) -> Result<Value, String> {
    let request = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {
                "group": "infrastructure.cluster.x-k8s.io",
                "version": "v1beta2",
                "kind": endpoint.kind().name()
            },
            "name": str_at(object, "/metadata/name"),
            "namespace": str_at(object, "/metadata/namespace"),
            "operation": "CREATE",
            "object": object
        }
    });
    let settings = Settings {
        cluster_topology: true,
    };
    let reply = review(endpoint, &settings, &serde_json::to_vec(&request).unwrap());
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let response: Value = serde_json::from_slice(&reply.body).unwrap();
    let response = &response["response"];
    if response["allowed"] != json!(true) {
        return Err(response["status"]["message"].to_string());
    }
    let mut object = object.clone();
    if let Some(patch) = response["patch"].as_str() {
        let patch = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
    }
    Ok(object)
}

#[test]
fn every_infrastructure_object_of_every_template_passes_the_admission_webhooks() {
    let mut checked = Vec::new();
    for file in template_files() {
        for object in render(&file, &demo()) {
            if group_of(str_at(&object, "/apiVersion")) != "infrastructure.cluster.x-k8s.io" {
                continue;
            }
            let kind = Kind::ALL
                .into_iter()
                .find(|k| k.name() == str_at(&object, "/kind"))
                .unwrap_or_else(|| panic!("{file}: no webhook for {}", describe(&object)));
            let what = format!("{file}: {}", describe(&object));
            let defaulted = if Endpoint::ALL.contains(&Endpoint::Mutate(kind)) {
                admit(Endpoint::Mutate(kind), &object)
                    .unwrap_or_else(|e| panic!("{what}: defaulting refused it: {e}"))
            } else {
                object.clone()
            };
            if let Err(e) = admit(Endpoint::Validate(kind), &defaulted) {
                panic!("{what}: refused: {e}");
            }
            // Defaulting of a template as written changes nothing that was set.
            assert_eq!(
                defaulted["spec"].pointer("/template/spec/backend"),
                object["spec"].pointer("/template/spec/backend"),
                "{what}"
            );
            checked.push(what);
        }
    }
    assert!(
        checked
            .iter()
            .any(|o| o.contains("DevMachineTemplate in-memory-control-plane")),
        "{checked:#?}"
    );

    // A mistake in the in-memory class is refused with the field named: a docker block added to
    // a machine that has the in-memory backend.
    let objects = render(CLASS, &demo());
    let mut template = find(&objects, "DevMachineTemplate", "in-memory-control-plane").clone();
    template["spec"]["template"]["spec"]["backend"]["docker"] = json!({});
    let refused =
        admit(Endpoint::Validate(Kind::DevMachineTemplate), &template).expect_err("two backends");
    assert!(
        refused.contains("spec.template.spec.backend") && refused.contains("set only one backend"),
        "{refused}"
    );
}
