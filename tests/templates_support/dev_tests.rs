//! The templates on the Dev kinds, CAPD 1.14's: ClusterClass quick-start is quick-start-docker
//! with a DevClusterTemplate (CAPD 1.14's failure domains), DevMachineTemplates and a
//! DevMachinePoolTemplate, its patches writing the image where the Dev kinds have it
//! (`backend.docker.customImage`); the `development` and `development-mp` flavors are their
//! `-docker` flavors on class quick-start; the `dev` flavor is the default flavor with a DevCluster
//! and DevMachineTemplates. CAPD 1.14's own templates, when at hand, have the same names, objects
//! and variables.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::class_tests::{assert_valid, of, patched_objects, roles};
use super::*;

const CLASS: &str = "clusterclass-quick-start.yaml";
const DOCKER_CLASS: &str = "clusterclass-quick-start-docker.yaml";

/// CAPD 1.14's templates, outside the repository (never copied into it).
fn capd_templates_dir() -> std::path::PathBuf {
    repo_root().join("../shared/reference/templates/capd-release-1.14")
}

/// Moves the Docker settings at `pointer` under `backend.docker`, as a Dev kind has them.
fn into_backend(object: &mut Value, pointer: &str) {
    let spec = object.pointer_mut(pointer).unwrap();
    *spec = json!({"backend": {"docker": spec.take()}});
}

/// What `objects` become on the Dev kinds: DockerCluster(Template), DockerMachineTemplate and
/// DockerMachinePoolTemplate settings under `backend.docker` (a pool's instance settings leave
/// its `template`), class patches writing there, the quick-start-docker names without `-docker`.
fn on_dev_kinds(objects: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for object in objects {
        let mut o = object.clone();
        match str_at(object, "/kind") {
            "DockerCluster" => into_backend(&mut o, "/spec"),
            "DockerClusterTemplate" | "DockerMachineTemplate" => {
                into_backend(&mut o, "/spec/template/spec")
            }
            "DockerMachinePoolTemplate" => {
                let spec = &mut o["spec"]["template"]["spec"];
                *spec = json!({"backend": {"docker": spec["template"].take()}});
            }
            "ClusterClass" => {
                for patch in o["spec"]["patches"].as_array_mut().unwrap() {
                    for d in patch["definitions"].as_array_mut().unwrap() {
                        let from = match str_at(&d["selector"], "/kind") {
                            "DockerMachineTemplate" => "/spec/template/spec/",
                            "DockerMachinePoolTemplate" => "/spec/template/spec/template/",
                            _ => continue,
                        };
                        for p in d["jsonPatches"].as_array_mut().unwrap() {
                            let path = str_at(p, "/path")
                                .replace(from, "/spec/template/spec/backend/docker/");
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
            .replace(
                "\"DockerMachinePoolTemplate\"",
                "\"DevMachinePoolTemplate\"",
            )
            .replace("quick-start-docker", "quick-start");
        out.push(serde_json::from_str(&text).unwrap());
    }
    out
}

fn by_name(objects: &[Value]) -> BTreeMap<String, Value> {
    objects.iter().map(|o| (describe(o), o.clone())).collect()
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
fn quick_start_is_quick_start_docker_on_the_dev_kinds_with_capd_failure_domains() {
    let dev = render(CLASS, &demo());
    let mut expected = on_dev_kinds(&render(DOCKER_CLASS, &demo()));
    let failure_domains: Vec<Value> = (1..=8)
        .map(|i| json!({"name": format!("fd{i}"), "controlPlane": i <= 5}))
        .collect();
    let cluster = expected
        .iter_mut()
        .find(|o| o["kind"] == "DevClusterTemplate")
        .unwrap();
    cluster["spec"]["template"]["spec"]["backend"]["docker"]["failureDomains"] =
        json!(failure_domains);
    assert_eq!(by_name(&dev), by_name(&expected));
    let class = find(&dev, "ClusterClass", "quick-start");
    assert_eq!(
        class["spec"]["workers"]["machinePools"][0]["infrastructure"]["templateRef"]["kind"],
        "DevMachinePoolTemplate"
    );
}

#[test]
fn the_development_flavors_are_their_docker_flavors_on_class_quick_start() {
    let mut custom = demo();
    custom.insert("POD_SECURITY_STANDARD_ENABLED".into(), "false".into());
    for flavor in ["development", "development-mp"] {
        let file = flavor_file(flavor);
        let docker = flavor_file(&format!("{flavor}-docker"));
        for values in [demo(), custom.clone()] {
            let mut expected = render(&docker, &values);
            assert_eq!(
                expected[0]["spec"]["topology"]["classRef"]["name"],
                "quick-start-docker"
            );
            expected[0]["spec"]["topology"]["classRef"]["name"] = json!("quick-start");
            assert_eq!(render(&file, &values), expected, "{file}");
        }
        assert_eq!(
            envsubst::variables(&template_text(&file)).unwrap(),
            envsubst::variables(&template_text(&docker)).unwrap(),
            "{file}: the same variables, with the same defaults"
        );
    }
}

#[test]
fn clusterctl_adds_quick_start_to_the_development_flavors() {
    let objects = generate("development-mp", &demo());
    let kinds: Vec<String> = objects.iter().map(describe).collect();
    assert_eq!(
        kinds,
        [
            "Cluster demo (cluster.x-k8s.io/v1beta2)",
            "ClusterClass quick-start (cluster.x-k8s.io/v1beta2)",
            "DevClusterTemplate quick-start-cluster (infrastructure.cluster.x-k8s.io/v1beta2)",
            "KubeadmControlPlaneTemplate quick-start-control-plane (controlplane.cluster.x-k8s.io/v1beta2)",
            "DevMachineTemplate quick-start-control-plane (infrastructure.cluster.x-k8s.io/v1beta2)",
            "DevMachineTemplate quick-start-default-worker-machinetemplate (infrastructure.cluster.x-k8s.io/v1beta2)",
            "DevMachinePoolTemplate quick-start-default-worker-machinepooltemplate (infrastructure.cluster.x-k8s.io/v1beta2)",
            "KubeadmConfigTemplate quick-start-default-worker-bootstraptemplate (bootstrap.cluster.x-k8s.io/v1beta2)",
        ],
        "the class on the Dev kinds, nothing of quick-start-docker"
    );
    assert_clean("development-mp references", &refs::check(&objects));
    assert_clean(
        "development references",
        &refs::check(&generate("development", &demo())),
    );

    // A Docker* pool template in the class of the Dev kinds is a broken reference, and leaves the
    // pool class's image patch without a template.
    let mut broken = objects.clone();
    let class = broken
        .iter_mut()
        .find(|o| o["kind"] == "ClusterClass")
        .unwrap();
    class["spec"]["workers"]["machinePools"][0]["infrastructure"]["templateRef"]["kind"] =
        json!("DockerMachinePoolTemplate");
    let found = refs::check(&broken);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].contains(
            "refers to DockerMachinePoolTemplate \"quick-start-default-worker-machinepooltemplate\""
        ),
        "{found:?}"
    );
    assert!(
        found[1].contains("definitions[2] selects no template of the class"),
        "the image patch of the pool class then applies to nothing: {found:?}"
    );
}

#[test]
fn quick_start_patches_put_the_kind_image_in_the_docker_backend() {
    let objects = generate("development", &demo());
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
    let old = patched_objects(generate("development", &old), &old, |_| {});
    assert_eq!(image(&old, "controlPlane"), "kindest/node:v1.24.17_build.1");

    let class = find(&objects, "ClusterClass", "quick-start");
    assert_clean("patch paths", &refs::patch_path_problems(class, crds()));
    // quick-start-docker's path (a DockerMachineTemplate's) is not a DevMachineTemplate's.
    let mut docker_path = class.clone();
    docker_path["spec"]["patches"][3]["definitions"][1]["jsonPatches"][0]["path"] =
        json!("/spec/template/spec/customImage");
    let found = refs::patch_path_problems(&docker_path, crds());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("DevMachineTemplate") && found[0].contains("no \"customImage\""),
        "{found:?}"
    );
    if !skip_capi("quick_start_patches_put_the_kind_image_in_the_docker_backend") {
        assert_valid(&patched, "quick-start patched for demo");
    }
}

/// The kind, name and apiVersion of every object, and the names of the variables.
fn outline(text: &str, what: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let rendered = envsubst::render(text, &demo()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let objects = parse_documents(&rendered, what);
    (
        objects.iter().map(describe).collect(),
        envsubst::variables(text)
            .unwrap()
            .into_iter()
            .map(|v| v.name)
            .collect(),
    )
}

#[test]
fn capd_1_14_templates_ship_under_their_names_with_the_same_objects_and_variables() {
    let dir = capd_templates_dir();
    if !dir.is_dir() {
        println!(
            "capd_1_14_templates_ship_under_their_names_with_the_same_objects_and_variables: \
             SKIPPING: {} is absent (the shared reference templates are not beside this checkout)",
            dir.display()
        );
        return;
    }
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 5, "{files:?}");
    for file in &files {
        let capd = std::fs::read_to_string(dir.join(file)).unwrap();
        let (capd_objects, capd_variables) = outline(&capd, &format!("CAPD's {file}"));
        let (objects, variables) = outline(&template_text(file), file);
        assert_eq!(objects, capd_objects, "{file}: the objects");
        // Our templates quote some defaults CAPD does not (`"cluster.local"`): the names only.
        assert_eq!(variables, capd_variables, "{file}: the variables");
    }
    // The classes: the same variables, patches and worker classes.
    for class in ["quick-start", "in-memory"] {
        let file = format!("clusterclass-{class}.yaml");
        let capd = std::fs::read_to_string(dir.join(&file)).unwrap();
        let capd = parse_documents(&capd, &file);
        let ours = render(&file, &demo());
        let (capd, ours) = (
            find(&capd, "ClusterClass", class),
            find(&ours, "ClusterClass", class),
        );
        let names = |class: &Value, pointer: &str, key: &str| -> Vec<String> {
            let mut names: Vec<String> = class
                .pointer(pointer)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|v| str_at(v, key).to_string())
                .collect();
            names.sort();
            names
        };
        for (pointer, key) in [
            ("/spec/variables", "/name"),
            ("/spec/patches", "/name"),
            ("/spec/workers/machineDeployments", "/class"),
            ("/spec/workers/machinePools", "/class"),
        ] {
            assert_eq!(
                names(ours, pointer, key),
                names(capd, pointer, key),
                "{file}: {pointer}"
            );
        }
    }
}
