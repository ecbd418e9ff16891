//! The templates on the Dev kinds: the `dev` flavor is the default flavor with a DevCluster and
//! DevMachineTemplates, ClusterClass quick-start-dev is quick-start with a DevClusterTemplate (CAPD
//! 1.14's failure domains) and DevMachineTemplates, the `development-dev` flavor is the
//! `development` flavor on class quick-start-dev (so clusterctl adds that class), and the class's
//! patches write the image where a DevMachineTemplate has it (`backend.docker.customImage`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::class_tests::{assert_valid, of, patched_objects, roles};
use super::*;

const DEV_CLASS: &str = "clusterclass-quick-start-dev.yaml";

/// Moves the Docker settings at `pointer` under `backend.docker`, as a Dev kind has them.
fn into_backend(object: &mut Value, pointer: &str) {
    let spec = object.pointer_mut(pointer).unwrap();
    *spec = json!({"backend": {"docker": spec.take()}});
}

/// What `objects` become on the Dev kinds: DockerCluster(Template) and DockerMachineTemplate
/// settings under `backend.docker`, class patches writing there, the pool class and its template
/// left out (there is no DevMachinePool), the quick-start names suffixed `-dev`.
fn on_dev_kinds(objects: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for object in objects {
        let mut o = object.clone();
        match str_at(object, "/kind") {
            "DockerCluster" => into_backend(&mut o, "/spec"),
            "DockerClusterTemplate" | "DockerMachineTemplate" => {
                into_backend(&mut o, "/spec/template/spec")
            }
            "DockerMachinePoolTemplate" => continue,
            "ClusterClass" => {
                o["spec"]["workers"]
                    .as_object_mut()
                    .unwrap()
                    .remove("machinePools");
                for patch in o["spec"]["patches"].as_array_mut().unwrap() {
                    let definitions = patch["definitions"].as_array_mut().unwrap();
                    definitions.retain(|d| d["selector"]["kind"] != "DockerMachinePoolTemplate");
                    for d in definitions {
                        if d["selector"]["kind"] != "DockerMachineTemplate" {
                            continue;
                        }
                        for p in d["jsonPatches"].as_array_mut().unwrap() {
                            let path = str_at(p, "/path").replace(
                                "/spec/template/spec/",
                                "/spec/template/spec/backend/docker/",
                            );
                            p["path"] = json!(path);
                        }
                    }
                }
            }
            _ => {}
        }
        let text = serde_json::to_string(&o)
            .unwrap()
            .replace("\"DockerCluster", "\"DevCluster")
            .replace("\"DockerMachineTemplate\"", "\"DevMachineTemplate\"")
            .replace("quick-start", "quick-start-dev");
        out.push(serde_json::from_str(&text).unwrap());
    }
    out
}

#[test]
fn the_dev_flavor_is_the_default_flavor_on_the_dev_kinds() {
    let dev = render("cluster-template-dev.yaml", &demo());
    assert_eq!(dev, on_dev_kinds(&render("cluster-template.yaml", &demo())));
    let cluster = find(&dev, "Cluster", "demo");
    assert_eq!(
        cluster["spec"]["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevCluster", "name": "demo"})
    );
    assert_eq!(
        find(&dev, "DevCluster", "demo")["spec"],
        json!({"backend": {"docker": {}}}),
        "the docker backend, set explicitly"
    );
    assert_clean("dev references", &refs::check(&generate("dev", &demo())));

    // A reference to the Docker kind it replaced resolves to nothing.
    let mut objects = generate("dev", &demo());
    objects[2]["spec"]["machineTemplate"]["spec"]["infrastructureRef"]["kind"] =
        json!("DockerMachineTemplate");
    let found = refs::check(&objects);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("KubeadmControlPlane demo-control-plane")
            && found[0].contains("DockerMachineTemplate \"demo-control-plane\""),
        "{found:?}"
    );
}

#[test]
fn quick_start_dev_is_quick_start_on_the_dev_kinds_with_capd_failure_domains() {
    let dev = render(DEV_CLASS, &demo());
    let mut expected = on_dev_kinds(&render("clusterclass-quick-start.yaml", &demo()));
    let failure_domains: Vec<Value> = (1..=8)
        .map(|i| json!({"name": format!("fd{i}"), "controlPlane": i <= 5}))
        .collect();
    let cluster = expected
        .iter_mut()
        .find(|o| o["kind"] == "DevClusterTemplate")
        .unwrap();
    cluster["spec"]["template"]["spec"]["backend"]["docker"]["failureDomains"] =
        json!(failure_domains);
    let order = |objects: &[Value]| -> BTreeMap<String, Value> {
        objects.iter().map(|o| (describe(o), o.clone())).collect()
    };
    assert_eq!(order(&dev), order(&expected));
    assert!(
        find(&dev, "ClusterClass", "quick-start-dev")["spec"]["workers"]
            .get("machinePools")
            .is_none(),
        "no machine pool class without a DevMachinePool"
    );
}

#[test]
fn the_development_dev_flavor_is_the_development_flavor_on_class_quick_start_dev() {
    let file = "cluster-template-development-dev.yaml";
    let mut custom = demo();
    custom.insert("POD_SECURITY_STANDARD_ENABLED".into(), "false".into());
    for values in [demo(), custom] {
        let mut expected = render("cluster-template-development.yaml", &values);
        expected[0]["spec"]["topology"]["classRef"]["name"] = json!("quick-start-dev");
        assert_eq!(render(file, &values), expected);
    }
    assert_eq!(
        envsubst::variables(&template_text(file)).unwrap(),
        envsubst::variables(&template_text("cluster-template-development.yaml")).unwrap(),
        "the same variables, with the same defaults"
    );
}

#[test]
fn clusterctl_adds_quick_start_dev_to_the_development_dev_flavor() {
    let objects = generate("development-dev", &demo());
    let kinds: Vec<String> = objects.iter().map(describe).collect();
    assert_eq!(
        kinds,
        [
            "Cluster demo (cluster.x-k8s.io/v1beta2)",
            "ClusterClass quick-start-dev (cluster.x-k8s.io/v1beta2)",
            "DevClusterTemplate quick-start-dev-cluster (infrastructure.cluster.x-k8s.io/v1beta2)",
            "KubeadmControlPlaneTemplate quick-start-dev-control-plane (controlplane.cluster.x-k8s.io/v1beta2)",
            "DevMachineTemplate quick-start-dev-control-plane (infrastructure.cluster.x-k8s.io/v1beta2)",
            "DevMachineTemplate quick-start-dev-default-worker-machinetemplate (infrastructure.cluster.x-k8s.io/v1beta2)",
            "KubeadmConfigTemplate quick-start-dev-default-worker-bootstraptemplate (bootstrap.cluster.x-k8s.io/v1beta2)",
        ],
        "the class on the Dev kinds, nothing of quick-start"
    );
    // The topology asks only for classes quick-start-dev has: its control plane and one
    // MachineDeployment of class default-worker, no MachinePool.
    let topology = &find(&objects, "Cluster", "demo")["spec"]["topology"];
    assert_eq!(
        topology["workers"],
        json!({"machineDeployments": [{"class": "default-worker", "name": "md-0", "replicas": 1}]})
    );
    let class = find(&objects, "ClusterClass", "quick-start-dev");
    assert_eq!(
        class["spec"]["workers"]["machineDeployments"][0]["class"],
        "default-worker"
    );
    assert_clean("development-dev references", &refs::check(&objects));

    // A pool worker has no class here.
    let mut pools = render("cluster-template-development-mp.yaml", &demo());
    pools[0]["spec"]["topology"]["classRef"]["name"] = json!("quick-start-dev");
    let found = refs::check(&with_classes(pools, &demo()));
    assert!(
        found.len() == 1
            && found[0].contains("machine pool \"mp-0\" uses class \"default-worker\""),
        "{found:?}"
    );
}

#[test]
fn quick_start_dev_patches_put_the_kind_image_in_the_docker_backend() {
    let objects = generate("development-dev", &demo());
    let patched = patched_objects(objects.clone(), &demo(), |_| {});
    assert_eq!(
        roles(&patched),
        [
            ("infrastructureCluster", "DevClusterTemplate"),
            ("controlPlane", "KubeadmControlPlaneTemplate"),
            ("controlPlane", "DevMachineTemplate"),
            ("md:default-worker", "KubeadmConfigTemplate"),
            ("md:default-worker", "DevMachineTemplate"),
        ]
    );
    let image = |patched: &[patches::Patched], role: &str| {
        of(patched, role, "DevMachineTemplate")["spec"]["template"]["spec"]["backend"]["docker"]
            ["customImage"]
            .clone()
    };
    for role in ["controlPlane", "md:default-worker"] {
        assert_eq!(image(&patched, role), "kindest/node:v1.34.0", "{role}");
    }
    let mut old = demo();
    old.insert("KUBERNETES_VERSION".into(), "v1.24.17+build.1".into());
    let old = patched_objects(generate("development-dev", &old), &old, |_| {});
    assert_eq!(image(&old, "controlPlane"), "kindest/node:v1.24.17_build.1");

    if skip_capi("quick_start_dev_patches_put_the_kind_image_in_the_docker_backend") {
        return;
    }
    assert_valid(&patched, "quick-start-dev patched for demo");
    let class = find(&objects, "ClusterClass", "quick-start-dev");
    assert_clean("patch paths", &refs::patch_path_problems(class, crds()));
    // quick-start's path (a DockerMachineTemplate's) is not a DevMachineTemplate's.
    let mut docker_path = class.clone();
    docker_path["spec"]["patches"][3]["definitions"][1]["jsonPatches"][0]["path"] =
        json!("/spec/template/spec/customImage");
    let found = refs::patch_path_problems(&docker_path, crds());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("DevMachineTemplate") && found[0].contains("no \"customImage\""),
        "{found:?}"
    );
}
