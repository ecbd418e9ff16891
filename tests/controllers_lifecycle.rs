//! A cluster's whole life with the real manager, a test API server and the real Docker engine:
//! infrastructure, two control planes bootstrapped and load balanced, the workload Node
//! initialized, nothing written at rest, a control plane drained then removed, and deletion
//! leaving nothing behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capd_e2e::*;
use serde_json::json;

const PROVISION: Duration = Duration::from_secs(90);

async fn wait_bootstrapped(env: &Env, name: &str) -> kube::api::DynamicObject {
    eventually(
        PROVISION,
        &format!("DockerMachine {name} to be bootstrapped"),
        || async {
            let dm = env.get(&infra("DockerMachine"), name).await?;
            (condition_state(&dm, "BootstrapCompleted")? == ("True".into(), "Completed".into()))
                .then_some(dm)
        },
    )
    .await
}

async fn versions(env: &Env, cluster: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, n) in [
        ("DockerCluster", cluster),
        ("DockerMachine", "cp1"),
        ("DockerMachine", "cp2"),
    ] {
        out.push(
            env.get(&infra(kind), n)
                .await
                .unwrap()
                .metadata
                .resource_version
                .unwrap(),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_lives_and_dies_leaving_nothing_behind() {
    let mut env = Env::start("life").await;
    env.wait_ready().await;
    let name = env.cluster_name();
    let cluster = env.create_cluster(&name, false).await;
    env.create_docker_cluster(&cluster, json!({})).await;

    // A DockerMachineTemplate advertises the Docker host's capacity.
    env.create(
        &infra("DockerMachineTemplate"),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DockerMachineTemplate",
            "metadata": {"name": "workers", "namespace": NAMESPACE},
            "spec": {"template": {"spec": {"customImage": env.images.node}}}
        }),
    )
    .await;
    // So does a DockerMachinePoolTemplate (autoscaling a MachinePool from zero).
    env.create(
        &infra("DockerMachinePoolTemplate"),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DockerMachinePoolTemplate",
            "metadata": {"name": "pool-workers", "namespace": NAMESPACE},
            "spec": {"template": {"spec": {"template": {"customImage": env.images.node}}}}
        }),
    )
    .await;
    // And a DevMachineTemplate, through the same template controller.
    env.create(
        &infra("DevMachineTemplate"),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DevMachineTemplate",
            "metadata": {"name": "dev-workers", "namespace": NAMESPACE},
            "spec": {"template": {"spec": {"backend": {"docker": {"customImage": env.images.node}}}}}
        }),
    )
    .await;

    // The DockerCluster: network, load balancer, endpoint, conditions, finalizer.
    let dc = eventually(PROVISION, "the DockerCluster to be provisioned", || async {
        let dc = env.get(&infra("DockerCluster"), &name).await?;
        (dc.data["status"]["initialization"]["provisioned"] == json!(true)
            && dc.data["spec"]["controlPlaneEndpoint"]["host"].is_string())
        .then_some(dc)
    })
    .await;
    let lb = format!("{name}-lb");
    assert!(
        network_exists(&env.network),
        "the provider creates its network"
    );
    assert_eq!(
        dc.data["spec"]["controlPlaneEndpoint"],
        json!({"host": ip_on(&lb, &env.network), "port": 6443})
    );
    assert_eq!(
        dc.metadata.finalizers.clone().unwrap_or_default(),
        vec!["dockercluster.infrastructure.cluster.x-k8s.io".to_string()]
    );
    assert_eq!(
        condition_state(&dc, "Ready"),
        Some(("True".into(), "Ready".into()))
    );
    assert_eq!(
        condition_state(&dc, "LoadBalancerAvailable"),
        Some(("True".into(), "Available".into()))
    );
    assert_eq!(
        condition_state(&dc, "Paused"),
        Some(("False".into(), "NotPaused".into()))
    );
    let legacy = &dc.data["status"]["deprecated"]["v1beta1"]["conditions"];
    assert!(
        legacy
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        "{legacy}"
    );

    let template = eventually(Duration::from_secs(30), "the template capacity", || async {
        let t = env.get(&infra("DockerMachineTemplate"), "workers").await?;
        t.data["status"]["capacity"].is_object().then_some(t)
    })
    .await;
    let cpus = docker(&["info", "--format", "{{.NCPU}}"]).1;
    let memory: u64 = docker(&["info", "--format", "{{.MemTotal}}"])
        .1
        .parse()
        .unwrap();
    assert_eq!(template.data["status"]["capacity"]["cpu"], json!(cpus));
    assert_eq!(
        template.data["status"]["capacity"]["memory"],
        json!(capd::controllers::template::binary_quantity(memory))
    );
    let pool_template = eventually(
        Duration::from_secs(30),
        "the pool template capacity",
        || async {
            let t = env
                .get(&infra("DockerMachinePoolTemplate"), "pool-workers")
                .await?;
            t.data["status"]["capacity"].is_object().then_some(t)
        },
    )
    .await;
    assert_eq!(
        pool_template.data["status"]["capacity"],
        template.data["status"]["capacity"]
    );
    let dev_template = eventually(
        Duration::from_secs(30),
        "the DevMachineTemplate capacity",
        || async {
            let t = env.get(&infra("DevMachineTemplate"), "dev-workers").await?;
            t.data["status"]["capacity"].is_object().then_some(t)
        },
    )
    .await;
    assert_eq!(
        dev_template.data["status"]["capacity"],
        template.data["status"]["capacity"]
    );

    // Cluster API: infrastructure ready; two control plane machines with bootstrap data.
    env.mark_infrastructure_provisioned(&name).await;
    env.create_secret("cp1-bootstrap", &cloud_config(0)).await;
    env.create_secret("cp2-bootstrap", &cloud_config(0)).await;
    let (_, _) = env
        .create_machine(&name, "cp1", true, Some("cp1-bootstrap"))
        .await;
    let (cp2_machine, _) = env
        .create_machine(&name, "cp2", true, Some("cp2-bootstrap"))
        .await;
    let cp1 = wait_bootstrapped(&env, "cp1").await;
    wait_bootstrapped(&env, "cp2").await;
    let (c1, c2) = (format!("{name}-cp1"), format!("{name}-cp2"));
    let ip1 = ip_on(&c1, &env.network);
    assert_eq!(
        cp1.data["spec"]["providerID"],
        json!(format!("docker:////{c1}"))
    );
    assert_eq!(
        cp1.data["status"]["initialization"]["provisioned"],
        json!(true)
    );
    assert_eq!(
        cp1.data["status"]["addresses"],
        json!([
            {"type": "Hostname", "address": c1},
            {"type": "InternalIP", "address": ip1},
            {"type": "ExternalIP", "address": ip1},
        ])
    );
    for condition in [
        "ContainerProvisioned",
        "CGroupsReady",
        "PreLoadedImagesReady",
        "Ready",
    ] {
        assert_eq!(
            condition_state(&cp1, condition).map(|(s, _)| s),
            Some("True".to_string()),
            "{condition}"
        );
    }
    assert_eq!(
        docker_exec(&c1, &["cat", "/var/lib/capd-standin/kubeadm.log"])
            .lines()
            .filter(|l| l.starts_with("kubeadm init"))
            .count(),
        1,
        "kubeadm ran exactly once"
    );
    assert_eq!(
        docker_exec(&c1, &["cat", "/etc/capd-test/config.yaml"]),
        "token: abcdef.0123456789abcdef",
        "write_files were applied"
    );

    // Both control planes are load balanced with weight 100.
    let config = eventually(
        Duration::from_secs(30),
        "both backends in haproxy",
        || async {
            let config = haproxy_config(&lb);
            (config.contains(&format!("server {c1} ")) && config.contains(&format!("server {c2} ")))
                .then_some(config)
        },
    )
    .await;
    assert!(
        config.contains(&format!("server {c1} {ip1}:6443 weight 100")),
        "{config}"
    );
    let annotation = |dm: &kube::api::DynamicObject| {
        dm.metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get("devmachine.infrastructure.cluster.x-k8s.io/weight")
            .cloned()
    };
    // Registered as CAPD 1.14 records it: the weight annotation at 100, and
    // `status.loadBalancerConfigured` no longer written.
    let cp1 = eventually(Duration::from_secs(30), "cp1 annotated 100", || async {
        let dm = env.get(&infra("DockerMachine"), "cp1").await?;
        (annotation(&dm).as_deref() == Some("100")).then_some(dm)
    })
    .await;
    assert_ne!(
        cp1.data["status"]["loadBalancerConfigured"],
        serde_json::json!(true)
    );

    // The workload cluster's Node gets its provider ID, addresses and loses the taint.
    env.create_kubeconfig_secret(&name).await;
    env.register_node(&c1, true).await;
    env.mark_control_plane_initialized(&name).await;
    let node = eventually(
        Duration::from_secs(60),
        "the Node to be initialized",
        || async {
            let node = env.node(&c1).await;
            let spec = node.spec.clone()?;
            (spec.provider_id.as_deref() == Some(&format!("docker:////{c1}"))
                && spec.taints.clone().unwrap_or_default().is_empty())
            .then_some(node)
        },
    )
    .await;
    let addresses = node.status.unwrap().addresses.unwrap();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == ip1),
        "{addresses:?}"
    );

    // At rest nothing is written, even when a watched object changes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = versions(&env, &name).await;
    env.mgmt().reset_write_counts();
    env.merge_patch(
        &capi("Machine"),
        "cp1",
        json!({"metadata": {"labels": {"touched": "yes"}}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        versions(&env, &name).await,
        before,
        "a reconcile at rest changes nothing"
    );
    let ours: Vec<(String, u64)> = env
        .mgmt()
        .write_counts()
        .into_iter()
        .filter(|(key, _)| key.contains("infrastructure.cluster.x-k8s.io"))
        .collect();
    assert!(ours.is_empty(), "writes at rest: {ours:?}");

    // A control plane whose Machine starts deleting is drained (weight 0) at once.
    env.merge_patch(
        &capi("Machine"),
        "cp2",
        json!({"metadata": {"finalizers": ["capd-test/hold"]}}),
    )
    .await;
    env.delete(&capi("Machine"), "cp2").await;
    eventually(Duration::from_secs(30), "cp2 to be drained", || async {
        let dm = env.get(&infra("DockerMachine"), "cp2").await?;
        (annotation(&dm).as_deref() == Some("0")
            && haproxy_config(&lb).contains(&format!(
                "server {c2} {}:6443 weight 0",
                ip_on(&c2, &env.network)
            )))
        .then_some(())
    })
    .await;

    // The Machine goes away: its DockerMachine is deleted (garbage collection), the container
    // removed and the load balancer no longer routes to it.
    let c2_volumes = container_volumes(&c2);
    assert!(
        !c2_volumes.is_empty(),
        "a node has an anonymous /var volume"
    );
    env.merge_patch(
        &capi("Machine"),
        "cp2",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    let _ = cp2_machine;
    eventually(Duration::from_secs(60), "cp2 to be gone", || async {
        (env.get(&infra("DockerMachine"), "cp2").await.is_none()
            && !cluster_containers(&name).contains(&c2)
            && !haproxy_config(&lb).contains(&format!("server {c2} ")))
        .then_some(())
    })
    .await;
    assert!(
        c2_volumes.iter().all(|v| !volume_exists(v)),
        "volumes removed with the container"
    );

    // Deleting the rest leaves nothing: containers, volumes, our network, finalizers.
    let mut volumes = container_volumes(&c1);
    volumes.extend(container_volumes(&lb));
    env.delete(&infra("DockerMachine"), "cp1").await;
    eventually(Duration::from_secs(60), "cp1 to be gone", || async {
        env.get(&infra("DockerMachine"), "cp1")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    env.delete(&infra("DockerCluster"), &name).await;
    eventually(
        Duration::from_secs(60),
        "the DockerCluster to be gone",
        || async {
            env.get(&infra("DockerCluster"), &name)
                .await
                .is_none()
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        cluster_containers(&name),
        Vec::<String>::new(),
        "containers left"
    );
    assert!(volumes.iter().all(|v| !volume_exists(v)), "volumes left");
    assert!(
        !network_exists(&env.network),
        "the network the provider created is removed"
    );
    let log = env.manager_log();
    assert!(
        !log.contains("abcdef.0123456789abcdef"),
        "bootstrap secrets never reach the log"
    );
}
