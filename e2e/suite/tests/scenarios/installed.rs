//! The scenarios against an installed Cluster API (`CAPD_E2E_CAPI=installed`, issue 39): the
//! objects a user creates, from the project's templates, and what real core, CABPK, KCP and the
//! installed manager make of them ([`capd_e2e::installed`]). In the default mode each prints one
//! line saying why it skips. Without `CAPD_REAL_NODE_IMAGE` the machines run the test node image,
//! where no workload API server answers: real core then never initializes the control plane, and
//! the scenarios that need a running workload cluster skip, each saying so.

use std::time::Duration;

use capd_e2e::installed::{Installed, runs_with_installed_capi};
use capd_e2e::*;
use kube::ResourceExt;
use serde_json::json;

/// The load balancer, the endpoint and core's `infrastructureProvisioned`.
const INFRASTRUCTURE: Duration = Duration::from_secs(180);
/// Machines provisioned (real nodes: bootstrap included).
const MACHINES: Duration = Duration::from_secs(420);
/// The Cluster Available with its Nodes Ready.
const AVAILABLE: Duration = Duration::from_secs(600);
/// The Cluster and everything of it gone.
const DELETION: Duration = Duration::from_secs(300);

/// Whether the scenario needs real nodes and has none: prints why it stops there.
fn without_real_nodes(env: &Installed, test: &str) -> bool {
    if env.node_image.real {
        return false;
    }
    println!(
        "{test}: the rest needs real nodes: with the test node image no workload API server \
         answers, so real core never initializes the control plane (set CAPD_REAL_NODE_IMAGE, \
         docs/src/contributing.md, \"Real nodes\")"
    );
    true
}

/// A cluster of one control plane and `workers` workers comes up (as far as the node image lets
/// it: [`without_real_nodes`]), then `kubectl delete cluster` leaves nothing.
async fn comes_up_and_goes(env: &Installed, name: &str, workers: usize, test: &str) {
    env.wait_infrastructure(name, INFRASTRUCTURE).await;
    env.wait_machines(name, true, 1, MACHINES).await;
    if !without_real_nodes(env, test) {
        env.wait_machines(name, false, workers, MACHINES).await;
        env.wait_available(name, 1 + workers, AVAILABLE).await;
    }
    env.delete_cluster(name, DELETION).await;
}

/// `cluster-template.yaml` with `control_planes` and `workers`.
fn plain_cluster(
    env: &Installed,
    name: &str,
    control_planes: u32,
    workers: u32,
) -> Vec<serde_json::Value> {
    env.render(
        "cluster-template.yaml",
        &[
            ("CLUSTER_NAME", name),
            ("CONTROL_PLANE_MACHINE_COUNT", &control_planes.to_string()),
            ("WORKER_MACHINE_COUNT", &workers.to_string()),
        ],
    )
}

/// The plain quick start (KCP with one control plane, a MachineDeployment with one worker), then
/// `kubectl delete cluster`, which leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_quick_start() {
    let test = "installed_quick_start";
    if !runs_with_installed_capi(test) {
        return;
    }
    let env = Installed::connect("quick").await;
    let name = unique("iq");
    env.apply(&plain_cluster(&env, &name, 1, 1)).await;
    comes_up_and_goes(&env, &name, 1, test).await;
}

/// CAPD 1.14's ClusterClass quick start: the class quick-start (DevClusterTemplate,
/// DevMachineTemplates, a DevMachinePoolTemplate), then a Cluster of the `development` flavor
/// with a MachinePool worker beside its MachineDeployment worker: one control plane, one
/// DevMachine of the deployment and one of the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_clusterclass_quick_start() {
    let test = "installed_clusterclass_quick_start";
    if !runs_with_installed_capi(test) {
        return;
    }
    clusterclass_quick_start(test, "quick-start", "development", true).await;
}

/// The same on the Docker* kinds: class quick-start-docker and the `development-docker`
/// flavor as it is (one control plane, one MachineDeployment worker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_clusterclass_quick_start_docker() {
    let test = "installed_clusterclass_quick_start_docker";
    if !runs_with_installed_capi(test) {
        return;
    }
    clusterclass_quick_start(test, "quick-start-docker", "development-docker", false).await;
}

/// The class `class`, then a Cluster of `flavor` (with a MachinePool `mp-0` of one worker of the
/// class's pool class added when `with_pool`).
async fn clusterclass_quick_start(test: &str, class: &str, flavor: &str, with_pool: bool) {
    let env = Installed::connect(flavor).await;
    env.tag_for_class();
    let name = unique("ic");
    env.apply(&env.render(&format!("clusterclass-{class}.yaml"), &[]))
        .await;
    eventually(
        INFRASTRUCTURE,
        &format!("the ClusterClass {class} reconciled with its references up to date"),
        || async {
            let class = env.get(&capi("ClusterClass"), class).await?;
            (condition_state(&class, "RefVersionsUpToDate")?.0 == "True").then_some(())
        },
    )
    .await;
    let mut objects = env.render(
        &format!("cluster-template-{flavor}.yaml"),
        &[
            ("CLUSTER_NAME", &name),
            ("CONTROL_PLANE_MACHINE_COUNT", "1"),
            ("WORKER_MACHINE_COUNT", "1"),
        ],
    );
    if with_pool {
        objects[0]["spec"]["topology"]["workers"]["machinePools"] =
            json!([{"class": "default-worker", "name": "mp-0", "replicas": 1}]);
    }
    env.apply(&objects).await;
    comes_up_and_goes(&env, &name, if with_pool { 2 } else { 1 }, test).await;
}

/// `Cluster.spec.paused` stops our controllers (their `Paused` condition says so) until it is
/// lifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_pause() {
    if !runs_with_installed_capi("installed_pause") {
        return;
    }
    let env = Installed::connect("pause").await;
    let name = unique("ip");
    env.apply(&plain_cluster(&env, &name, 1, 0)).await;
    env.wait_infrastructure(&name, INFRASTRUCTURE).await;
    let paused = |value: &'static str| {
        let env = &env;
        let name = name.clone();
        async move {
            eventually(
                INFRASTRUCTURE,
                &format!("the DockerCluster of {name} Paused={value}"),
                || async {
                    let dc = env.get(&infra("DockerCluster"), &name).await?;
                    (condition_state(&dc, "Paused")?.0 == value).then_some(())
                },
            )
            .await;
        }
    };
    env.patch(&capi("Cluster"), &name, json!({"spec": {"paused": true}}))
        .await;
    paused("True").await;
    env.patch(&capi("Cluster"), &name, json!({"spec": {"paused": false}}))
        .await;
    paused("False").await;
    env.delete_cluster(&name, DELETION).await;
}

/// The manager killed while machines provision: on a management cluster its Pod is deleted and
/// its Deployment starts another; on a plane whose manager is a process
/// (`hack/real-management.sh`), the command in `CAPD_E2E_MANAGER_RESTART` kills it with SIGKILL
/// and starts it again. Either way the new manager takes over, and the cluster comes up as if
/// nothing happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_manager_killed_mid_provisioning() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams, ListParams};

    let test = "installed_manager_killed_mid_provisioning";
    if !runs_with_installed_capi(test) {
        return;
    }
    let env = Installed::connect("killed").await;
    let name = unique("ik");
    env.apply(&plain_cluster(&env, &name, 1, 1)).await;
    eventually(
        INFRASTRUCTURE,
        "the DockerCluster of the cluster",
        || async { env.get(&infra("DockerCluster"), &name).await },
    )
    .await;
    if let Ok(restart) = std::env::var("CAPD_E2E_MANAGER_RESTART") {
        let status = std::process::Command::new("sh")
            .args(["-c", &restart])
            .status()
            .unwrap_or_else(|e| panic!("run CAPD_E2E_MANAGER_RESTART ({restart}): {e}"));
        assert!(status.success(), "{restart} failed: {status}");
        comes_up_and_goes(&env, &name, 1, test).await;
        return;
    }
    // clusterctl installs the manager as the Deployment capd-controller-manager in capd-system.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "capd-system");
    let selector = ListParams::default().labels("control-plane=controller-manager");
    let before = pods.list(&selector).await.expect("list the manager's Pods");
    assert!(
        !before.items.is_empty(),
        "no manager Pod (control-plane=controller-manager) in capd-system: is the provider \
         installed? (a manager run as a process needs CAPD_E2E_MANAGER_RESTART)"
    );
    for pod in &before.items {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let gone = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        pods.delete(&pod_name, &gone)
            .await
            .unwrap_or_else(|e| panic!("delete Pod {pod_name}: {e}"));
    }
    comes_up_and_goes(&env, &name, 1, test).await;
}

/// KCP scaled 1 → 3 → 1 and the MachineDeployment 1 → 2 → 1, with real nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_scale() {
    let test = "installed_scale";
    if !runs_with_installed_capi(test) {
        return;
    }
    let env = Installed::connect("scale").await;
    if without_real_nodes(&env, test) {
        return;
    }
    let name = unique("is");
    env.apply(&plain_cluster(&env, &name, 1, 1)).await;
    env.wait_infrastructure(&name, INFRASTRUCTURE).await;
    env.wait_available(&name, 2, AVAILABLE).await;
    let kcp = capd_e2e::installed::resource(
        &env.client,
        "controlplane.cluster.x-k8s.io",
        "KubeadmControlPlane",
    )
    .await
    .expect("KubeadmControlPlane is served");
    let md = capi("MachineDeployment");
    for (control_planes, workers) in [(3, 1), (3, 2), (1, 2), (1, 1)] {
        env.patch(
            &kcp,
            &format!("{name}-control-plane"),
            json!({"spec": {"replicas": control_planes}}),
        )
        .await;
        env.patch(
            &md,
            &format!("{name}-md-0"),
            json!({"spec": {"replicas": workers}}),
        )
        .await;
        env.wait_machines(&name, true, control_planes, MACHINES)
            .await;
        env.wait_machines(&name, false, workers, MACHINES).await;
        env.wait_available(&name, control_planes + workers, AVAILABLE)
            .await;
    }
    env.delete_cluster(&name, DELETION).await;
}

/// A MachinePool of DevMachinePool instances (the `development-mp` flavor, class quick-start)
/// scaled 0 → 3 → 1 → 0 through the topology, with real nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_machine_pool() {
    let test = "installed_machine_pool";
    if !runs_with_installed_capi(test) {
        return;
    }
    machine_pool(test, "quick-start", "development-mp", "DevMachinePool").await;
}

/// The same with DockerMachinePool instances (the `development-mp-docker` flavor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_machine_pool_docker() {
    let test = "installed_machine_pool_docker";
    if !runs_with_installed_capi(test) {
        return;
    }
    machine_pool(
        test,
        "quick-start-docker",
        "development-mp-docker",
        "DockerMachinePool",
    )
    .await;
}

/// The class `class`, a Cluster of `flavor` without workers, then its pool (of `pool_kind`)
/// scaled 0 → 3 → 1 → 0.
async fn machine_pool(test: &str, class: &str, flavor: &str, pool_kind: &str) {
    let env = Installed::connect(flavor).await;
    if without_real_nodes(&env, test) {
        return;
    }
    env.tag_for_class();
    let name = unique("imp");
    env.apply(&env.render(&format!("clusterclass-{class}.yaml"), &[]))
        .await;
    env.apply(&env.render(
        &format!("cluster-template-{flavor}.yaml"),
        &[
            ("CLUSTER_NAME", &name),
            ("CONTROL_PLANE_MACHINE_COUNT", "1"),
            ("WORKER_MACHINE_COUNT", "0"),
        ],
    ))
    .await;
    env.wait_infrastructure(&name, INFRASTRUCTURE).await;
    env.wait_available(&name, 1, AVAILABLE).await;
    let cluster = env.get(&capi("Cluster"), &name).await.expect("the Cluster");
    let mut pools = cluster.data["spec"]["topology"]["workers"]["machinePools"].clone();
    for replicas in [3, 1, 0] {
        pools[0]["replicas"] = json!(replicas);
        env.patch(
            &capi("Cluster"),
            &name,
            json!({"spec": {"topology": {"workers": {"machinePools": pools}}}}),
        )
        .await;
        eventually(
            MACHINES,
            &format!("the {pool_kind} of {name} at {replicas} ready replicas"),
            || async {
                let pool = env
                    .of_cluster(&infra(pool_kind), &name)
                    .await
                    .into_iter()
                    .next()?;
                let status = &pool.data["status"];
                let all = status["replicas"].as_u64().unwrap_or(0);
                let ready = status["instances"].as_array().map_or(0, |i| {
                    i.iter().filter(|i| i["ready"] == true).count() as u64
                });
                (ready == replicas && all == replicas).then_some(())
            },
        )
        .await;
        env.wait_available(&name, 1 + replicas as usize, AVAILABLE)
            .await;
    }
    env.delete_cluster(&name, DELETION).await;
}

/// A MachineHealthCheck replaces a worker whose container was killed, with real nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_machine_health_check() {
    let test = "installed_machine_health_check";
    if !runs_with_installed_capi(test) {
        return;
    }
    let env = Installed::connect("mhc").await;
    if without_real_nodes(&env, test) {
        return;
    }
    let name = unique("ih");
    let mut objects = plain_cluster(&env, &name, 1, 1);
    objects.push(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachineHealthCheck",
        "metadata": {"name": format!("{name}-md-0"), "namespace": env.namespace},
        "spec": {
            "clusterName": name,
            "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": format!("{name}-md-0")}},
            "checks": {
                "nodeStartupTimeoutSeconds": 600,
                "unhealthyNodeConditions": [
                    {"type": "Ready", "status": "Unknown", "timeoutSeconds": 30},
                    {"type": "Ready", "status": "False", "timeoutSeconds": 30}
                ]
            }
        }
    }));
    env.apply(&objects).await;
    env.wait_infrastructure(&name, INFRASTRUCTURE).await;
    env.wait_available(&name, 2, AVAILABLE).await;
    let worker = env.wait_machines(&name, false, 1, MACHINES).await.remove(0);
    let container = worker.data["spec"]["providerID"]
        .as_str()
        .and_then(|p| p.strip_prefix("docker:////"))
        .expect("the worker's provider ID")
        .to_string();
    assert!(docker(&["kill", &container]).0, "docker kill {container}");
    eventually(
        AVAILABLE,
        &format!(
            "a new worker instead of {}",
            worker.metadata.name.clone().unwrap_or_default()
        ),
        || async {
            let replaced = env
                .of_cluster(&infra("DockerMachine"), &name)
                .await
                .into_iter()
                .any(|m| {
                    m.metadata.uid != worker.metadata.uid
                        && !m.labels().contains_key("cluster.x-k8s.io/control-plane")
                        && m.data["status"]["initialization"]["provisioned"] == true
                });
            replaced.then_some(())
        },
    )
    .await;
    env.wait_available(&name, 2, AVAILABLE).await;
    env.delete_cluster(&name, DELETION).await;
}
