//! The quick-start class's machine pool class `default-worker` and the `development-mp` flavor:
//! what its patches make of the DockerMachinePoolTemplate, what Cluster API's topology controller
//! makes of it for a Cluster, and the mistakes the checks catch.

use serde_json::{Value, json};

use super::class_tests::{assert_valid, of, patched, roles};
use super::*;

const CLUSTERCLASS: &str = "clusterclass-quick-start.yaml";
const FLAVOR: &str = "development-mp";
/// The role of the pool class's templates.
const POOL: &str = "mp:default-worker";

fn pool_template(patched: &[patches::Patched]) -> &Value {
    of(patched, POOL, "DockerMachinePoolTemplate")
}

#[test]
fn the_pool_class_runs_its_instances_on_the_kind_image_of_the_version() {
    let default = patched(FLAVOR, &demo(), |_| {});
    assert_eq!(
        roles(&default),
        [
            ("infrastructureCluster", "DockerClusterTemplate"),
            ("controlPlane", "KubeadmControlPlaneTemplate"),
            ("controlPlane", "DockerMachineTemplate"),
            (POOL, "KubeadmConfigTemplate"),
            (POOL, "DockerMachinePoolTemplate"),
        ],
        "the flavor's workers are the pool mp-0 only"
    );
    let pool = default.iter().find(|p| p.role == POOL).unwrap();
    assert_eq!(pool.workers.as_deref(), Some("mp-0"));
    // CAPD 1.12's path: the instance settings sit one level deeper than a DockerMachineTemplate's.
    assert_eq!(
        pool_template(&default)["spec"]["template"]["spec"]["template"],
        json!({"customImage": "kindest/node:v1.34.0"})
    );
    assert_eq!(
        str_at(
            of(&default, POOL, "KubeadmConfigTemplate"),
            "/metadata/name"
        ),
        "quick-start-default-worker-bootstraptemplate",
        "pool instances join with the deployment class's bootstrap template"
    );
    skip_capi("the_pool_class_runs_its_instances_on_the_kind_image_of_the_version");
    assert_valid(&default, "development-mp patched for demo");

    let mut old = demo();
    old.insert("KUBERNETES_VERSION".into(), "v1.24.17+build.1".into());
    let old = patched(FLAVOR, &old, |_| {});
    assert_eq!(
        pool_template(&old)["spec"]["template"]["spec"]["template"]["customImage"],
        "kindest/node:v1.24.17_build.1"
    );

    // A Cluster with both kinds of workers: each gets its own image patch.
    let both = patched(FLAVOR, &demo(), |cluster| {
        cluster["spec"]["topology"]["workers"]["machineDeployments"] =
            json!([{"class": "default-worker", "name": "md-0", "replicas": 1}]);
    });
    assert_eq!(
        both.len(),
        7,
        "cluster, control plane (2), md-0 (2), mp-0 (2)"
    );
    assert_eq!(
        of(&both, "md:default-worker", "DockerMachineTemplate")["spec"]["template"]["spec"]["customImage"],
        "kindest/node:v1.34.0"
    );
    assert_eq!(
        pool_template(&both)["spec"]["template"]["spec"]["template"]["customImage"],
        "kindest/node:v1.34.0"
    );
    assert_valid(&both, "both kinds of workers patched for demo");

    // The deployment flavor leaves the pool class unused.
    let development = patched("development", &demo(), |_| {});
    assert!(development.iter().all(|p| !p.role.starts_with("mp:")));
}

/// The MachinePool, KubeadmConfig and DockerMachinePool Cluster API's topology controller creates
/// for the first topology machine pool of `cluster` from the patched class templates (names
/// without the random suffix).
fn topology_machine_pool(cluster: &Value, patched: &[patches::Patched]) -> Vec<Value> {
    let cluster_name = str_at(cluster, "/metadata/name");
    let topology = &cluster["spec"]["topology"];
    let workers = &topology["workers"]["machinePools"][0];
    let name = format!("{cluster_name}-{}", str_at(workers, "/name"));
    let metadata = json!({
        "name": name,
        "namespace": str_at(cluster, "/metadata/namespace"),
        "labels": {"cluster.x-k8s.io/cluster-name": cluster_name},
    });
    let from_template = |kind: &str| {
        let template = of(patched, POOL, &format!("{kind}Template"));
        json!({
            "apiVersion": str_at(template, "/apiVersion"),
            "kind": kind,
            "metadata": metadata,
            "spec": template["spec"]["template"]["spec"],
        })
    };
    let bootstrap = from_template("KubeadmConfig");
    let infrastructure = from_template("DockerMachinePool");
    let reference = |o: &Value| {
        json!({
            "apiGroup": group_of(str_at(o, "/apiVersion")),
            "kind": str_at(o, "/kind"),
            "name": name,
        })
    };
    let pool = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachinePool",
        "metadata": metadata,
        "spec": {
            "clusterName": cluster_name,
            "replicas": workers["replicas"],
            "template": {"spec": {
                "clusterName": cluster_name,
                "version": topology["version"],
                "bootstrap": {"configRef": reference(&bootstrap)},
                "infrastructureRef": reference(&infrastructure),
            }},
        },
    });
    vec![pool, bootstrap, infrastructure]
}

#[test]
fn what_the_topology_makes_of_the_pool_class_is_valid_and_consistent() {
    let mut values = demo();
    values.insert("WORKER_MACHINE_COUNT".into(), "3".into());
    let mut objects = generate(FLAVOR, &values);
    let made = topology_machine_pool(
        find(&objects, "Cluster", "demo"),
        &patched(FLAVOR, &values, |_| {}),
    );
    let pool = find(&made, "MachinePool", "demo-mp-0");
    assert_eq!(pool["spec"]["replicas"], 3);
    let instance = &find(&made, "DockerMachinePool", "demo-mp-0")["spec"]["template"];
    assert_eq!(instance["customImage"], "kindest/node:v1.34.0");
    skip_capi("what_the_topology_makes_of_the_pool_class_is_valid_and_consistent");
    let mut problems = problems_of("the topology of development-mp", &made).0;
    objects.extend(made);
    problems.extend(refs::check(&objects));
    assert_clean("the MachinePool of development-mp", &problems);

    // A MachinePool's references are checked as a MachineDeployment's are.
    let pool = objects
        .iter_mut()
        .find(|o| o["kind"] == "MachinePool")
        .unwrap();
    pool["spec"]["clusterName"] = json!("someone-else");
    pool["spec"]["template"]["spec"]["infrastructureRef"]["kind"] = json!("DockerMachine");
    let found = refs::check(&objects);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].starts_with("MachinePool demo-mp-0") && found[0].contains("DockerMachine \""),
        "{found:?}"
    );
    assert!(
        found[1].contains("no Cluster \"someone-else\""),
        "{found:?}"
    );
}

#[test]
fn mistakes_in_the_pool_class_are_reported() {
    let mut objects = generate(FLAVOR, &demo());
    let cluster = objects.iter_mut().find(|o| o["kind"] == "Cluster").unwrap();
    cluster["spec"]["topology"]["workers"]["machinePools"][0]["class"] = json!("big-worker");
    let class = objects
        .iter_mut()
        .find(|o| o["kind"] == "ClusterClass")
        .unwrap();
    class["spec"]["workers"]["machinePools"][0]["infrastructure"]["templateRef"]["name"] =
        json!("quick-start-pool");
    let found = refs::check(&objects);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].contains("machine pool \"mp-0\" uses class \"big-worker\""),
        "{found:?}"
    );
    assert!(
        found[1].contains("DockerMachinePoolTemplate \"quick-start-pool\""),
        "{found:?}"
    );

    let rendered = render(CLUSTERCLASS, &demo());
    let class = find(&rendered, "ClusterClass", "quick-start");
    let mut broken = class.clone();
    let definition = &mut broken["spec"]["patches"][3]["definitions"][2];
    assert_eq!(definition["selector"]["kind"], "DockerMachinePoolTemplate");
    // The path of a DockerMachineTemplate (and of CAPD 1.14's DevMachinePoolTemplate).
    definition["jsonPatches"][0]["path"] = json!("/spec/template/spec/customImage");
    let found = refs::patch_path_problems(&broken, crds());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("DockerMachinePoolTemplate") && found[0].contains("no \"customImage\""),
        "{found:?}"
    );
    broken["spec"]["patches"][3]["definitions"][2]["selector"]["matchResources"]["machinePoolClass"]
        ["names"] = json!(["big-worker"]);
    let mut objects = rendered.clone();
    objects[0] = broken;
    let found = refs::check(&objects);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("definitions[2] selects no template of the class"),
        "{found:?}"
    );
}
