//! Scenario 1 (quick start: one control plane, one MachineDeployment worker and one MachinePool
//! worker) and scenario 7 (deleting the cluster the way core does leaves nothing behind), with
//! DockerCluster, DockerMachines and a DockerMachinePool (ClusterClass quick-start-docker) here,
//! and with CAPD 1.14's quick start in `dev_kinds`: DevCluster, DevMachines and a DevMachinePool
//! (ClusterClass quick-start).
//!
//! The suite does not play Cluster API's topology controller: it creates what that controller
//! makes of the class for a Cluster, the infrastructure cluster and the machine pool from the
//! class's templates (`templates/`), and the Machines as a MachineSet and KCP make them.

use std::time::{Duration, Instant};

use capd_e2e::tls::https_get_until;
use capd_e2e::*;
use serde_json::json;

use crate::PROVISION;
use crate::scenarios::machine_pool::{assert_machine_pool, assert_pool};

/// What the quick start of one generation of kinds is made of: the ClusterClass file whose
/// templates its infrastructure comes from, the failure domains of the infrastructure cluster
/// (Docker* quick-start-docker has none: the scenario adds two), and the domains its control
/// plane and its worker are placed in.
struct QuickStart {
    class_file: &'static str,
    class: &'static str,
    /// The infrastructure cluster's spec in the Docker* shape.
    cluster_spec: serde_json::Value,
    control_plane_domain: &'static str,
    worker_domain: &'static str,
}

impl QuickStart {
    fn of(kinds: InfraKinds) -> QuickStart {
        match kinds {
            InfraKinds::Docker => {
                let class_spec = class_template_spec(
                    "clusterclass-quick-start-docker.yaml",
                    "DockerClusterTemplate",
                    "quick-start-docker-cluster",
                );
                assert_eq!(class_spec, json!({}), "quick-start-docker sets nothing");
                QuickStart {
                    class_file: "clusterclass-quick-start-docker.yaml",
                    class: "quick-start-docker",
                    cluster_spec: json!({"failureDomains": [{"name": "fd-a", "controlPlane": true}, {"name": "fd-b"}]}),
                    control_plane_domain: "fd-a",
                    worker_domain: "fd-b",
                }
            }
            InfraKinds::Dev => {
                // CAPD 1.14's failure domains: fd1–fd5 for the control plane, fd6–fd8 for workers.
                let class_spec = class_template_spec(
                    "clusterclass-quick-start.yaml",
                    "DevClusterTemplate",
                    "quick-start-cluster",
                );
                QuickStart {
                    class_file: "clusterclass-quick-start.yaml",
                    class: "quick-start",
                    cluster_spec: class_spec["backend"]["docker"].clone(),
                    control_plane_domain: "fd1",
                    worker_domain: "fd6",
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_start_then_deletion_leaves_nothing_behind() {
    if !capd_e2e::installed::runs_with_stand_in("quick_start_then_deletion_leaves_nothing_behind") {
        return;
    }
    quick_start(Env::scenario("quick", &[]).await).await;
}

/// The quick start in `env`, with the kinds it is set to (Docker* or Dev*).
pub async fn quick_start(mut env: Env) {
    let name = env.cluster_name();
    let (cluster_kind, machine_kind) = (env.kinds.cluster(), env.kinds.machine());
    let (cp, worker) = (format!("{name}-cp"), format!("{name}-md"));
    let layout = QuickStart::of(env.kinds);
    let (cp_domain, worker_domain) = (layout.control_plane_domain, layout.worker_domain);

    // What `clusterctl generate cluster` + core would create, all at once.
    let started = Instant::now();
    let cluster = env.create_cluster(&name, false).await;
    env.create_docker_cluster_with(&cluster, json!({}), layout.cluster_spec.clone())
        .await;
    // The control plane provider stores the workload kubeconfig before it makes machines.
    env.create_kubeconfig_secret(&name).await;
    env.create_secret("cp-bootstrap", &cloud_config(0)).await;
    env.create_secret(
        "md-bootstrap",
        &cloud_config_running(0, "kubeadm join --config /etc/capd-test/config.yaml"),
    )
    .await;
    let control_plane = MachineSpec {
        control_plane: true,
        bootstrap_secret: Some("cp-bootstrap".into()),
        failure_domain: Some(cp_domain.into()),
        ..MachineSpec::default()
    };
    let worker_spec = MachineSpec {
        control_plane: false,
        bootstrap_secret: Some("md-bootstrap".into()),
        failure_domain: Some(worker_domain.into()),
        ..MachineSpec::default()
    };
    env.create_machine_with(&name, "cp", &control_plane).await;
    env.create_machine_with(&name, "md", &worker_spec).await;

    // Core: infrastructure provisioned, then control plane initialized once it runs.
    let dc = env.wait_docker_cluster_provisioned(&name, PROVISION).await;
    env.mark_infrastructure_provisioned(&name).await;
    let cp_dm = env.wait_machine_provisioned("cp", PROVISION).await;
    env.mark_control_plane_initialized(&name).await;
    let md_dm = env.wait_machine_provisioned("md", PROVISION).await;
    let provisioning = started.elapsed();
    println!(
        "scenario 1: objects created -> both machines provisioned in {:.1}s",
        provisioning.as_secs_f64()
    );

    // The load balancer runs, the endpoint points to it, and a TLS request through its published
    // port reaches the control plane node.
    let lb = format!("{name}-lb");
    assert_eq!(
        docker(&["inspect", "--format", "{{.State.Running}}", &lb]).1,
        "true"
    );
    assert_eq!(
        dc.data["spec"]["controlPlaneEndpoint"],
        json!({"host": ip_on(&lb, &env.network), "port": 6443})
    );
    assert_eq!(
        condition_state(&dc, "Ready"),
        Some(("True".into(), "Ready".into()))
    );
    assert_eq!(
        dc.data["status"]["failureDomains"],
        layout.cluster_spec["failureDomains"]
    );
    env.wait_event(cluster_kind, &name, ("Normal", "Provisioned"), "")
        .await;
    let port = published_port(&lb, 6443).expect("the load balancer publishes 6443");
    let answer = https_get_until(port, "/healthz", Duration::from_secs(30), |a| {
        a.status == 200
    })
    .await
    .expect("a TLS request through the load balancer");
    assert_eq!((answer.status, answer.body.trim()), (200, "ok"));
    assert_eq!(answer.header("X-Capd-Node"), Some(cp.as_str()));

    // Both machines: provider ID, addresses, failure domain, one bootstrap, Events.
    for (dm, container, fd) in [(&cp_dm, &cp, cp_domain), (&md_dm, &worker, worker_domain)] {
        let ip = ip_on(container, &env.network);
        assert_eq!(
            dm.data["spec"]["providerID"],
            json!(format!("docker:////{container}"))
        );
        assert_eq!(
            dm.data["status"]["addresses"],
            json!([
                {"type": "Hostname", "address": container},
                {"type": "InternalIP", "address": ip},
                {"type": "ExternalIP", "address": ip},
            ])
        );
        assert_eq!(container_label(container, FAILURE_DOMAIN_LABEL), fd);
        assert_eq!(dm.data["status"]["failureDomain"], json!(fd));
        assert_eq!(kubeadm_runs(container), 1, "{container} bootstrapped once");
        assert_eq!(condition_state(dm, "Ready").unwrap().0, "True");
        let object = dm.metadata.name.as_deref().unwrap();
        for reason in ["ContainerProvisioned", "BootstrapCompleted"] {
            env.wait_event(machine_kind, object, ("Normal", reason), "")
                .await;
        }
    }
    // The control plane's registration in the load balancer, recorded on both kinds as CAPD 1.14
    // records it: the weight annotation at 100.
    eventually(
        Duration::from_secs(30),
        &format!("{cp} registered in the load balancer"),
        || async {
            let machine = env.get(&infra(machine_kind), "cp").await?;
            let weight = machine.metadata.annotations?;
            (weight.get("devmachine.infrastructure.cluster.x-k8s.io/weight")? == "100")
                .then_some(())
        },
    )
    .await;

    // The class's machine pool class: a MachinePool `mp-0` of one worker, its infrastructure pool
    // the class's pool template with the image the class's customImage patch writes (the test
    // node image here).
    let pool_template = format!("{}-default-worker-machinepooltemplate", layout.class);
    let mut pool_spec = class_template_spec(
        layout.class_file,
        &format!("{}Template", env.kinds.pool()),
        &pool_template,
    );
    let instance = match env.kinds {
        InfraKinds::Docker => "/template",
        InfraKinds::Dev => "/backend/docker",
    };
    pool_spec.pointer_mut(instance).unwrap()["customImage"] = json!(env.images.node);
    assert_eq!(
        pool_spec,
        env.kinds.pool_spec(json!({"customImage": env.images.node})),
        "the pool the suite makes is the class's"
    );
    env.create_secret(
        "mp-bootstrap",
        &cloud_config_running(0, "kubeadm join --config /etc/capd-test/config.yaml"),
    )
    .await;
    let pool = env
        .create_machine_pool(&name, "mp-0", 1, &[], "mp-bootstrap")
        .await;
    let (dmp, pool_machines) = env.wait_machine_pool_at(&pool, 1, PROVISION).await;
    let pool_worker = pool.containers().remove(0);
    assert_pool(
        &pool,
        &dmp,
        &pool_machines,
        std::slice::from_ref(&pool_worker),
    );
    assert_machine_pool(&env, &pool, &dmp, 1).await;
    assert_eq!(
        kubeadm_runs(&pool_worker),
        1,
        "{pool_worker} bootstrapped once"
    );
    assert_eq!(
        cluster_containers(&name),
        vec![cp.clone(), lb.clone(), worker.clone(), pool_worker.clone()]
    );

    // The workload cluster's Nodes carry the provider IDs.
    for container in [&cp, &worker, &pool_worker] {
        env.register_node(container, true).await;
    }
    for container in [&cp, &worker, &pool_worker] {
        eventually(
            Duration::from_secs(60),
            &format!("Node {container} to carry its provider ID"),
            || async {
                let node = env.node(container).await;
                (node.spec?.provider_id? == format!("docker:////{container}")).then_some(())
            },
        )
        .await;
        // Written by the provider (its field manager), not by kubelet.
        let node = env.node(container).await;
        assert_eq!(
            field_owners(&node.metadata, &["spec", "providerID"]),
            [PROVIDER_FIELD_MANAGER],
            "the owner of Node {container}'s spec.providerID"
        );
    }
    // Core matches each Machine to its Node by that provider ID (`kubectl get machines` shows
    // the Node), and the provider keeps both machines as they are.
    for (machine, container) in [("cp", &cp), ("md", &worker)] {
        assert_eq!(
            &env.wait_node_ref(machine, Duration::from_secs(30)).await,
            container
        );
    }
    env.wait_settled(Duration::from_secs(30)).await;
    for (machine, dm) in [("cp", &cp_dm), ("md", &md_dm)] {
        let now = env.get(&infra(machine_kind), machine).await.unwrap();
        assert_eq!(condition_state(&now, "Ready").unwrap().0, "True");
        assert_eq!(now.data["spec"], dm.data["spec"], "{machine} untouched");
    }

    // Scenario 7: deleting the cluster as core does leaves no container, volume, network or
    // finalizer behind.
    let mut volumes = Vec::new();
    for container in [&lb, &cp, &worker, &pool_worker] {
        volumes.extend(container_volumes(container));
    }
    assert!(!volumes.is_empty(), "nodes have anonymous volumes");
    env.delete_cluster_as_core(&name, Duration::from_secs(90))
        .await;
    env.assert_nothing_left(&name, &volumes).await;
}
