//! The Dev* kinds (issue 13): a DevCluster, DevMachines and a DevMachinePool with the docker
//! backend are served by the same reconcilers as DockerCluster, DockerMachines and
//! DockerMachinePools, so the quick start runs unchanged with them, as CAPD 1.14's quick start
//! (ClusterClass quick-start, issue 50) makes them; a Dev* object with the inMemory backend gets
//! a fake workload cluster served by the manager (issue 40), with no container.

use std::time::Duration;

use capd_e2e::*;
use serde_json::json;

use super::quick_start::quick_start;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_kinds_quick_start_then_deletion_leaves_nothing_behind() {
    if !capd_e2e::installed::runs_with_stand_in(
        "dev_kinds_quick_start_then_deletion_leaves_nothing_behind",
    ) {
        return;
    }
    let mut env = Env::scenario("devquick", &[]).await;
    env.use_dev_kinds();
    quick_start(env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_memory_backend_serves_a_fake_cluster_with_its_nodes_and_deletes_it() {
    use capd_e2e::kubeadm::ClusterCertificates;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::{Api, ListParams};

    if !capd_e2e::installed::runs_with_stand_in(
        "the_in_memory_backend_serves_a_fake_cluster_with_its_nodes_and_deletes_it",
    ) {
        return;
    }
    let mut env = Env::scenario("inmemory", &[]).await;
    env.use_dev_kinds();
    let name = env.cluster_name();
    // The DevCluster and the worker as ClusterClass `in-memory` (CAPD's in-memory templates,
    // `templates/clusterclass-in-memory.yaml`) makes them: the topology controller copies each
    // template's `spec.template.spec`.
    let class_spec = |kind: &str, template: &str| {
        class_template_spec("clusterclass-in-memory.yaml", kind, template)
    };
    let cluster_spec = class_spec("DevClusterTemplate", "in-memory-cluster");
    assert_eq!(cluster_spec, json!({"backend": {"inMemory": {}}}));
    let cluster = env.create_cluster(&name, false).await;
    let certificates = ClusterCertificates::generate();
    env.create_cluster_certificates(&name, &certificates).await;
    for (dev_cluster, annotations) in [
        (name.clone(), json!({})),
        // The same, paused: not written to, as the contract asks of a paused object.
        (
            format!("{name}-paused"),
            json!({"cluster.x-k8s.io/paused": ""}),
        ),
    ] {
        env.create(
            &infra("DevCluster"),
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "DevCluster",
                "metadata": {
                    "name": dev_cluster,
                    "labels": env.labels(&name),
                    "annotations": annotations,
                    "ownerReferences": [owner("Cluster", &cluster)]
                },
                "spec": cluster_spec.clone()
            }),
        )
        .await;
    }
    let dev_cluster = eventually(
        Duration::from_secs(60),
        "the in-memory DevCluster to be provisioned",
        || async {
            let found = env.get(&infra("DevCluster"), &name).await?;
            (found.data["status"]["initialization"]["provisioned"] == json!(true)).then_some(found)
        },
    )
    .await;
    let endpoint = &dev_cluster.data["spec"]["controlPlaneEndpoint"];
    let port = endpoint["port"].as_i64().unwrap();
    assert!((20000..=24000).contains(&port), "{endpoint}");
    assert_eq!(
        endpoint["host"],
        json!("127.0.0.1"),
        "POD_IP is not set: loopback"
    );
    env.mark_infrastructure_provisioned(&name).await;

    let spec = MachineSpec {
        control_plane: true,
        bootstrap_secret: Some("cp1-bootstrap".into()),
        ..Default::default()
    };
    let machine = env
        .create(&capi("Machine"), env.machine(&name, "cp1", &spec))
        .await;
    env.create(
        &infra("DevMachine"),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DevMachine",
            "metadata": {
                "name": "cp1",
                "labels": machine.metadata.labels,
                "ownerReferences": [owner("Machine", &machine)]
            },
            "spec": {"backend": {"inMemory": {"vm": {"provisioning": {"startupDuration": "1s"}}}}}
        }),
    )
    .await;
    let dev_machine = eventually(
        Duration::from_secs(60),
        "the in-memory DevMachine to be Ready",
        || async {
            let found = env.get(&infra("DevMachine"), "cp1").await?;
            (condition_state(&found, "Ready") == Some(("True".into(), "Ready".into())))
                .then_some(found)
        },
    )
    .await;
    assert_eq!(
        dev_machine.data["spec"]["providerID"],
        json!("in-memory://cp1")
    );
    assert_eq!(
        dev_machine.data["status"]["initialization"]["provisioned"],
        json!(true)
    );
    for type_ in [
        "VMProvisioned",
        "NodeProvisioned",
        "EtcdProvisioned",
        "APIServerProvisioned",
    ] {
        assert_eq!(
            condition_state(&dev_machine, type_),
            Some(("True".into(), "Provisioned".into())),
            "{type_}"
        );
    }

    // The workload cluster answers at the endpoint, with a certificate signed by the cluster CA.
    // Core's kubeconfig Secret: the stand-in's cluster cache reaches the fake API server with it.
    let kubeconfig = env
        .create_admin_kubeconfig_secret(&name, &format!("127.0.0.1:{port}"), &certificates.ca)
        .await;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let workload = kube::Client::try_from(config).unwrap();
    let node = Api::<Node>::all(workload.clone()).get("cp1").await.unwrap();
    assert_eq!(
        node.spec.and_then(|s| s.provider_id).as_deref(),
        Some("in-memory://cp1")
    );
    let etcd = Api::<Pod>::namespaced(workload.clone(), "kube-system")
        .list(&ListParams::default().labels("component=etcd"))
        .await
        .unwrap();
    assert_eq!(etcd.items.len(), 1, "one etcd member");

    let paused = env
        .get(&infra("DevCluster"), &format!("{name}-paused"))
        .await
        .unwrap();
    assert_eq!(
        condition_state(&paused, "Paused"),
        Some(("True".into(), "Paused".into())),
        "a paused DevCluster only says so"
    );
    assert_eq!(
        paused.data["status"]["initialization"],
        json!(null),
        "not provisioned"
    );
    assert_eq!(
        paused.data["spec"]["controlPlaneEndpoint"],
        json!(null),
        "no port reserved"
    );
    env.delete(&infra("DevCluster"), &format!("{name}-paused"))
        .await;

    // Deletion removes the machine from the fake cluster, then the cluster and its listener.
    // Core finds the Node by the provider ID, through its cluster cache.
    assert_eq!(
        env.wait_node_ref("cp1", Duration::from_secs(30)).await,
        "cp1"
    );

    // A worker waits for the control plane, then for its bootstrap data, then comes up, after
    // the template's delays.
    let worker = env
        .create(
            &capi("Machine"),
            env.machine(&name, "w1", &MachineSpec::default()),
        )
        .await;
    env.create(
        &infra("DevMachine"),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DevMachine",
            "metadata": {
                "name": "w1",
                "labels": worker.metadata.labels,
                "ownerReferences": [owner("Machine", &worker)]
            },
            // CAPD's delays: a VM of 10 s and a Node of 2 s, up to 20% more.
            "spec": class_spec("DevMachineTemplate", "in-memory-default-worker-machinetemplate")
        }),
    )
    .await;
    for (reason, next) in [
        (
            "WaitingForControlPlaneInitialized",
            "mark the control plane initialized",
        ),
        (
            "WaitingForBootstrapData",
            "give the worker its bootstrap data",
        ),
    ] {
        eventually(Duration::from_secs(30), &format!("w1 {reason}"), || async {
            let found = env.get(&infra("DevMachine"), "w1").await?;
            (condition_state(&found, "VMProvisioned") == Some(("False".into(), reason.into())))
                .then_some(())
        })
        .await;
        match next {
            "mark the control plane initialized" => env.mark_control_plane_initialized(&name).await,
            _ => {
                env.merge_patch(
                    &capi("Machine"),
                    "w1",
                    json!({"spec": {"bootstrap": {"dataSecretName": "w1-bootstrap"}}}),
                )
                .await;
            }
        }
    }
    assert_eq!(env.wait_node_ref("w1", Duration::from_secs(30)).await, "w1");
    let worker_node = Api::<Node>::all(workload.clone()).get("w1").await.unwrap();
    assert!(
        !worker_node
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("node-role.kubernetes.io/control-plane"),
        "a worker Node is not labelled control plane"
    );

    for machine in ["w1", "cp1"] {
        env.delete(&infra("DevMachine"), machine).await;
        env.wait_gone(&infra("DevMachine"), machine, Duration::from_secs(30))
            .await;
        let gone = Api::<Node>::all(workload.clone()).get_opt(machine).await;
        assert!(
            matches!(gone, Ok(None) | Err(_)),
            "the Node of {machine} is gone with it"
        );
    }
    env.delete(&infra("DevCluster"), &name).await;
    env.wait_gone(&infra("DevCluster"), &name, Duration::from_secs(30))
        .await;
    assert!(
        Api::<Node>::all(workload)
            .list(&ListParams::default())
            .await
            .is_err(),
        "the fake API server is closed"
    );
    env.delete(&capi("Machine"), "w1").await;
    env.delete(&capi("Machine"), "cp1").await;
    env.delete(&capi("Cluster"), &name).await;
    env.wait_gone(&capi("Cluster"), &name, Duration::from_secs(30))
        .await;
    assert_eq!(
        cluster_containers(&name),
        Vec::<String>::new(),
        "no container for an in-memory cluster"
    );
}
