//! The machine pool class `default-worker` of both quick-start classes and their flavors:
//! `development-mp` (class quick-start, CAPD 1.14's, a DevMachinePoolTemplate) and
//! `development-mp-docker` (class quick-start-docker, CAPD 1.12's, a DockerMachinePoolTemplate):
//! what the class's patches make of the pool template, what Cluster API's topology controller
//! makes of it for a Cluster, and the mistakes the checks catch.

use serde_json::{Value, json};

use super::class_tests::{assert_valid, of, patched, roles};
use super::*;

/// The role of the pool class's templates.
const POOL: &str = "mp:default-worker";

/// One of the two pool classes.
struct PoolClass {
    flavor: &'static str,
    class_file: &'static str,
    class: &'static str,
    /// The infrastructure cluster and machine template kinds of the class.
    cluster_template: &'static str,
    machine_template: &'static str,
    /// The InfraMachinePool kind (its template is this with `Template`).
    pool: &'static str,
    /// Where the instance settings sit in the pool kind's spec.
    instance: &'static str,
    /// Where the image sits in a machine template's `spec.template.spec`.
    machine_image: &'static str,
}

/// CAPD 1.14's: every Docker setting under `backend.docker`.
const DEV: PoolClass = PoolClass {
    flavor: "development-mp",
    class_file: "clusterclass-quick-start.yaml",
    class: "quick-start",
    cluster_template: "DevClusterTemplate",
    machine_template: "DevMachineTemplate",
    pool: "DevMachinePool",
    instance: "/backend/docker",
    machine_image: "/backend/docker/customImage",
};

/// CAPD 1.12's: the instance settings one level deeper than a DockerMachineTemplate's.
const DOCKER: PoolClass = PoolClass {
    flavor: "development-mp-docker",
    class_file: "clusterclass-quick-start-docker.yaml",
    class: "quick-start-docker",
    cluster_template: "DockerClusterTemplate",
    machine_template: "DockerMachineTemplate",
    pool: "DockerMachinePool",
    instance: "/template",
    machine_image: "/customImage",
};

impl PoolClass {
    fn template_kind(&self) -> String {
        format!("{}Template", self.pool)
    }

    fn pool_template<'a>(&self, patched: &'a [patches::Patched]) -> &'a Value {
        of(patched, POOL, &self.template_kind())
    }

    /// The instance settings of the patched pool template.
    fn instance<'a>(&self, patched: &'a [patches::Patched]) -> &'a Value {
        self.pool_template(patched)["spec"]["template"]["spec"]
            .pointer(self.instance)
            .unwrap_or(&Value::Null)
    }
}

#[test]
fn the_pool_class_runs_its_instances_on_the_kind_image_of_the_version() {
    for class in [DEV, DOCKER] {
        pool_class_runs_its_instances_on_the_kind_image(&class);
    }
}

fn pool_class_runs_its_instances_on_the_kind_image(class: &PoolClass) {
    let flavor = class.flavor;
    let default = patched(flavor, &demo(), |_| {});
    assert_eq!(
        roles(&default),
        [
            ("infrastructureCluster", class.cluster_template),
            ("controlPlane", "KubeadmControlPlaneTemplate"),
            ("controlPlane", class.machine_template),
            (POOL, "KubeadmConfigTemplate"),
            (POOL, class.template_kind().as_str()),
        ],
        "{flavor}: the flavor's workers are the pool mp-0 only"
    );
    let pool = default.iter().find(|p| p.role == POOL).unwrap();
    assert_eq!(pool.workers.as_deref(), Some("mp-0"));
    assert_eq!(
        class.instance(&default),
        &json!({"customImage": "kindest/node:v1.34.0"}),
        "{flavor}"
    );
    assert_eq!(
        str_at(
            of(&default, POOL, "KubeadmConfigTemplate"),
            "/metadata/name"
        ),
        format!("{}-default-worker-bootstraptemplate", class.class),
        "{flavor}: pool instances join with the deployment class's bootstrap template"
    );
    let capi = !skip_capi("the_pool_class_runs_its_instances_on_the_kind_image_of_the_version");
    if capi {
        assert_valid(&default, &format!("{flavor} patched for demo"));
    }

    let mut old = demo();
    old.insert("KUBERNETES_VERSION".into(), "v1.24.17+build.1".into());
    let old = patched(flavor, &old, |_| {});
    assert_eq!(
        class.instance(&old)["customImage"],
        "kindest/node:v1.24.17_build.1"
    );

    // A Cluster with both kinds of workers: each gets its own image patch.
    let both = patched(flavor, &demo(), |cluster| {
        cluster["spec"]["topology"]["workers"]["machineDeployments"] =
            json!([{"class": "default-worker", "name": "md-0", "replicas": 1}]);
    });
    assert_eq!(
        both.len(),
        7,
        "cluster, control plane (2), md-0 (2), mp-0 (2)"
    );
    let md = of(&both, "md:default-worker", class.machine_template);
    assert_eq!(
        md["spec"]["template"]["spec"].pointer(class.machine_image),
        Some(&json!("kindest/node:v1.34.0")),
        "{flavor}"
    );
    assert_eq!(class.instance(&both)["customImage"], "kindest/node:v1.34.0");
    if capi {
        assert_valid(&both, "both kinds of workers patched for demo");
    }

    // The deployment flavor of the same class leaves the pool class unused.
    let development = flavor.replace("-mp", "");
    let development = patched(&development, &demo(), |_| {});
    assert!(development.iter().all(|p| !p.role.starts_with("mp:")));
}

/// The MachinePool, KubeadmConfig and InfraMachinePool Cluster API's topology controller creates
/// for the first topology machine pool of `cluster` from the patched class templates (names
/// without the random suffix).
fn topology_machine_pool(
    class: &PoolClass,
    cluster: &Value,
    patched: &[patches::Patched],
) -> Vec<Value> {
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
    let infrastructure = from_template(class.pool);
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
    for class in [DEV, DOCKER] {
        topology_of_the_pool_class(&class);
    }
}

fn topology_of_the_pool_class(class: &PoolClass) {
    let flavor = class.flavor;
    let mut values = demo();
    values.insert("WORKER_MACHINE_COUNT".into(), "3".into());
    let mut objects = generate(flavor, &values);
    let made = topology_machine_pool(
        class,
        find(&objects, "Cluster", "demo"),
        &patched(flavor, &values, |_| {}),
    );
    let pool = find(&made, "MachinePool", "demo-mp-0");
    assert_eq!(pool["spec"]["replicas"], 3);
    let instance = find(&made, class.pool, "demo-mp-0")["spec"].pointer(class.instance);
    assert_eq!(
        instance.map(|i| &i["customImage"]),
        Some(&json!("kindest/node:v1.34.0")),
        "{flavor}"
    );
    if skip_capi("what_the_topology_makes_of_the_pool_class_is_valid_and_consistent") {
        return;
    }
    let mut problems = problems_of(&format!("the topology of {flavor}"), &made).0;
    objects.extend(made);
    problems.extend(refs::check(&objects));
    assert_clean(&format!("the MachinePool of {flavor}"), &problems);

    // A MachinePool's references are checked as a MachineDeployment's are.
    let pool = objects
        .iter_mut()
        .find(|o| o["kind"] == "MachinePool")
        .unwrap();
    pool["spec"]["clusterName"] = json!("someone-else");
    let machine_kind = class.pool.replace("Pool", "");
    pool["spec"]["template"]["spec"]["infrastructureRef"]["kind"] = json!(machine_kind);
    let found = refs::check(&objects);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].starts_with("MachinePool demo-mp-0")
            && found[0].contains(&format!("{machine_kind} \"")),
        "{found:?}"
    );
    assert!(
        found[1].contains("no Cluster \"someone-else\""),
        "{found:?}"
    );
}

#[test]
fn mistakes_in_the_pool_class_are_reported() {
    for class in [DEV, DOCKER] {
        mistakes_in_one_pool_class_are_reported(&class);
    }
}

fn mistakes_in_one_pool_class_are_reported(class: &PoolClass) {
    let mut objects = generate(class.flavor, &demo());
    let cluster = objects.iter_mut().find(|o| o["kind"] == "Cluster").unwrap();
    cluster["spec"]["topology"]["workers"]["machinePools"][0]["class"] = json!("big-worker");
    let cluster_class = objects
        .iter_mut()
        .find(|o| o["kind"] == "ClusterClass")
        .unwrap();
    cluster_class["spec"]["workers"]["machinePools"][0]["infrastructure"]["templateRef"]["name"] =
        json!("quick-start-pool");
    let found = refs::check(&objects);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].contains("machine pool \"mp-0\" uses class \"big-worker\""),
        "{found:?}"
    );
    assert!(
        found[1].contains(&format!("{} \"quick-start-pool\"", class.template_kind())),
        "{found:?}"
    );

    let rendered = render(class.class_file, &demo());
    let cluster_class = find(&rendered, "ClusterClass", class.class);
    let mut broken = cluster_class.clone();
    let definition = &mut broken["spec"]["patches"][3]["definitions"][2];
    assert_eq!(definition["selector"]["kind"], json!(class.template_kind()));
    // The path of the other generation's pool template.
    let other = if class.pool == DEV.pool {
        &DOCKER
    } else {
        &DEV
    };
    definition["jsonPatches"][0]["path"] =
        json!(format!("/spec/template/spec{}/customImage", other.instance));
    let found = refs::patch_path_problems(&broken, crds());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains(&class.template_kind()),
        "{}: {found:?}",
        class.flavor
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
