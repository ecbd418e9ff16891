//! Real nodes (issue 29): a real workload cluster through the provider. The real node image of
//! `e2e/images/real` (systemd, containerd, kubelet and kubeadm of the binaries the user brought), bootstrap data shaped as
//! CABPK 1.12 writes it and KCP's part played by the suite (`capd_e2e::kubeadm`): one control
//! plane initialised, a worker joined with a bootstrap token, the control plane scaled to three,
//! the worker removed, the oldest control plane scaled down (drained from the load balancer, its
//! etcd member removed, its Node deleted), then the cluster deleted with nothing left. Every
//! check goes through the load balancer with the admin kubeconfig core would write. Before the
//! scale-down, the cluster of three control planes and a worker survives a restart of every
//! container in reverse order with the manager down (pinned addresses and host port).
//!
//! Then the floor ([`Floor`]): the same node image bootstrapped by hand with the same kubeadm
//! commands, a control plane, a worker and a second control plane, whose times the provider's
//! are printed against as ratios (provider / floor), never asserted. Its endpoint is the first
//! control plane's own address.
//!
//! It runs only where it can: `CAPD_REAL_NODE_IMAGE` names a kind node image (kindest/node, or one
//! `e2e/images/real/build.sh` made from Kubernetes binaries the user brings) that an engine
//! accepting privileged containers holds (rootful Podman here: `hack/podman.sh` loads it).
//! Otherwise it prints why and passes (CI included: nothing there can supply the binaries), unless
//! `CAPD_E2E_REAL_NODES=required`, which makes that a failure.

use std::time::{Duration, Instant};

use capd_e2e::kubeadm::*;
use capd_e2e::tls::https_get_until;
use capd_e2e::*;
use serde_json::json;

/// The weight annotation the provider sets on control plane DockerMachines.
const WEIGHT_ANNOTATION: &str = "devmachine.infrastructure.cluster.x-k8s.io/weight";

/// The real node image when this run can use it, else `None` after saying why.
fn real_node_image() -> Option<String> {
    let required = std::env::var("CAPD_E2E_REAL_NODES").is_ok_and(|v| v == "required");
    let skip = |why: String| -> Option<String> {
        assert!(!required, "CAPD_E2E_REAL_NODES=required, but {why}");
        println!(
            "real_cluster: skipped: {why} (CAPD_E2E_REAL_NODES=required makes this a failure)"
        );
        None
    };
    let Some(image) = real_node_image_setting() else {
        return skip(NO_REAL_NODE_IMAGE.into());
    };
    let engine = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "the default engine".into());
    if !docker(&["image", "inspect", "--format", "{{.Id}}", &image]).0 {
        return skip(format!(
            "{engine} has no image {image} (for Podman: docker save {image} | podman load)"
        ));
    }
    if let Err(why) = node_image_version(&image) {
        return skip(why);
    }
    if !privileged_allowed(&image) {
        return skip(format!(
            "{engine} refuses privileged containers (a rootful Podman accepts them: hack/podman.sh)"
        ));
    }
    Some(image)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_cluster_is_built_scaled_and_deleted_through_the_provider() {
    if !capd_e2e::installed::runs_with_stand_in(
        "a_real_cluster_is_built_scaled_and_deleted_through_the_provider",
    ) {
        return;
    }
    let Some(image) = real_node_image() else {
        return;
    };
    let mut env = Env::scenario("real", &[]).await;
    let name = env.cluster_name();
    let node = |machine: &str| format!("{name}-{machine}");
    let network = env.network.clone();
    let mut timings: Vec<(String, Duration)> = Vec::new();
    let started = Instant::now();

    // Core and the user: the Cluster (with its network, which CABPK copies into kubeadm's) and
    // the DockerCluster; the load balancer comes up and the infrastructure is provisioned. KCP
    // stores the cluster's certificates and the admin kubeconfig.
    let mut cluster = env
        .create_real_cluster(
            &name,
            &image,
            // One failure domain: core 1.12's Cluster CRD takes no empty `status.failureDomains`.
            json!({"failureDomains": [{"name": "fd-a", "controlPlane": true}]}),
            Duration::from_secs(120),
        )
        .await;
    timings.push((
        "cluster infrastructure provisioned".into(),
        started.elapsed(),
    ));

    // KCP: the first control plane. The API server answers through the load balancer; KCP sees
    // kubeadm's uploaded configuration and marks the control plane initialized.
    let (workload, progress) = cluster.init(&env, "cp0").await;
    let provider_cp0 = progress;
    timings.push((
        "cp0: created -> kubeadm init done".into(),
        progress.bootstrapped,
    ));
    timings.push((
        "cp0: created -> first control plane Ready".into(),
        progress.ready,
    ));
    let lb = cluster.load_balancer();
    let port = cluster.load_balancer_port();

    // A worker joins (CABPK: a bootstrap token in the workload cluster first), preloading an
    // image of the engine into its containerd, then KCP scales up one control plane at a time,
    // once every existing one is Ready.
    let preload = format!(
        "{}/haproxy:{}",
        env.images.haproxy_repository, env.images.haproxy_tag
    );
    cluster.worker_preload_images = vec![preload.clone()];
    let mut joined = Vec::new();
    for (machine, control_plane) in [("md0", false), ("cp1", true), ("cp2", true)] {
        let progress = cluster.join(&env, &workload, machine, control_plane).await;
        joined.push((machine, control_plane, progress));
        timings.push((
            format!("{machine}: created -> kubeadm join done"),
            progress.bootstrapped,
        ));
        timings.push((format!("{machine}: created -> Node Ready"), progress.ready));
    }

    // The preloaded image is in the worker's containerd, where kubelet finds it (the engine may
    // qualify its name: `docker.io/` or `localhost/`).
    let md0 = env
        .get(&infra(env.kinds.machine()), "md0")
        .await
        .expect("DockerMachine md0");
    assert_eq!(
        condition_state(&md0, "PreLoadedImagesReady").map(|c| c.0),
        Some("True".into()),
        "conditions: {}",
        md0.data["status"]["conditions"]
    );
    let images = docker_exec(&node("md0"), &["ctr", "-n", "k8s.io", "images", "ls", "-q"]);
    assert!(
        images.lines().any(|i| i.ends_with(&preload)),
        "{preload} in md0's containerd: {images}"
    );

    // Every Node is registered and Ready, with its DockerMachine's provider ID.
    let machines = ["cp0", "cp1", "cp2", "md0"].map(String::from);
    cluster
        .wait_nodes_match_machines(&env, &workload, &machines, Duration::from_secs(120))
        .await;
    // Core's Machine controller finds each Node by that provider ID, through the workload
    // cluster's kubeconfig Secret, and records it on the Machine.
    for machine in &machines {
        assert_eq!(
            env.wait_node_ref(machine, Duration::from_secs(60)).await,
            node(machine),
            "Machine {machine}'s status.nodeRef"
        );
    }
    // The nodes run with the cluster's PKI from the management cluster's Secrets (kubeadm made
    // no CA of its own), the joined control planes included.
    for (path, expected) in [
        (
            "/etc/kubernetes/pki/ca.crt",
            cluster.certificates.ca.cert_pem(),
        ),
        (
            "/etc/kubernetes/pki/etcd/ca.crt",
            cluster.certificates.etcd.cert_pem(),
        ),
        (
            "/etc/kubernetes/pki/front-proxy-ca.crt",
            cluster.certificates.front_proxy.cert_pem(),
        ),
        (
            "/etc/kubernetes/pki/sa.pub",
            cluster.certificates.service_account.public_pem(),
        ),
    ] {
        for machine in ["cp0", "cp2"] {
            assert_eq!(
                docker_exec(&node(machine), &["cat", path]),
                expected.trim_end(),
                "{path} on {machine}"
            );
        }
    }
    // Three weighted backends in the load balancer, three etcd members.
    let backends = |machines: &[&str]| -> Vec<(String, String, u32)> {
        let mut b: Vec<_> = machines
            .iter()
            .map(|m| (node(m), format!("{}:6443", ip_on(&node(m), &network)), 100))
            .collect();
        b.sort();
        b
    };
    let mut current = haproxy_backends(&haproxy_config(&lb));
    current.sort();
    assert_eq!(current, backends(&["cp0", "cp1", "cp2"]));
    wait_servers_up(&lb, &network, &[node("cp0"), node("cp1"), node("cp2")]).await;
    let etcd = EtcdClient::new(&cluster.certificates.etcd);
    let members = etcd
        .members(&ip_on(&node("cp1"), &env.network))
        .await
        .expect("etcd members");
    let mut member_names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
    member_names.sort();
    assert_eq!(member_names, [node("cp0"), node("cp1"), node("cp2")]);

    // A restart of the engine or the host (issue 30): the manager is down, every container
    // stops, and the engine starts them again in the reverse order of their creation. Their
    // addresses and the load balancer's host port are pinned, so etcd's peer URLs, the API
    // servers' certificates and the load balancer's backends stay right: every Node is Ready
    // again, every etcd member answers, and the kubeconfig and the host port from before the
    // stop still work through the load balancer.
    let restarting = Instant::now();
    let all = [
        lb.clone(),
        node("cp0"),
        node("md0"),
        node("cp1"),
        node("cp2"),
    ];
    let addresses = |containers: &[String]| -> Vec<(String, String)> {
        containers
            .iter()
            .map(|c| (c.clone(), ip_on(c, &network)))
            .collect()
    };
    let before = addresses(&all);
    env.stop_manager(false);
    let mut stop = vec!["stop", "--time=10"];
    stop.extend(all.iter().map(String::as_str));
    assert!(docker(&stop).0, "docker stop");
    for container in all.iter().rev() {
        assert!(docker(&["start", container]).0, "docker start {container}");
    }
    env.start_manager();
    env.wait_ready().await;
    assert_eq!(
        addresses(&all),
        before,
        "the same addresses after the restart"
    );
    assert_eq!(
        published_port(&lb, 6443),
        Some(port),
        "the same host port after the restart"
    );
    eventually(
        Duration::from_secs(300),
        "every Node Ready again, through the kubeconfig from before the stop",
        || async {
            let nodes = workload.nodes().await?;
            (nodes.len() == machines.len() && nodes.iter().all(node_ready)).then_some(())
        },
    )
    .await;
    let back = restarting.elapsed();
    for machine in ["cp0", "cp1", "cp2"] {
        let answering = etcd
            .members(&ip_on(&node(machine), &env.network))
            .await
            .unwrap_or_else(|e| panic!("etcd on {machine} answers after the restart: {e}"));
        assert_eq!(answering.len(), 3, "{machine} sees every member");
    }
    let answer = https_get_until(port, "/healthz", Duration::from_secs(60), |a| {
        a.status == 200
    })
    .await
    .expect("/healthz through the load balancer's host port from before the restart");
    assert_eq!(answer.body.trim(), "ok");
    let mut current = haproxy_backends(&haproxy_config(&lb));
    current.sort();
    assert_eq!(
        current,
        backends(&["cp0", "cp1", "cp2"]),
        "the same backends"
    );
    wait_servers_up(&lb, &network, &[node("cp0"), node("cp1"), node("cp2")]).await;
    timings.push((
        "restart: stopped, started in reverse, every Node Ready".into(),
        back,
    ));

    // The worker goes as core removes a Machine: drained, its DockerMachine deleted, then its
    // Node.
    let removing = Instant::now();
    let worker = node("md0");
    let worker_volumes = container_volumes(&worker);
    assert!(!worker_volumes.is_empty(), "{worker} has its /var volume");
    cluster
        .remove_worker(&env, &workload, "md0", Duration::from_secs(120))
        .await;
    assert!(!cluster_containers(&name).contains(&worker));
    assert!(worker_volumes.iter().all(|v| !volume_exists(v)));
    timings.push((
        "md0: removed (drain, container, Node)".into(),
        removing.elapsed(),
    ));

    // KCP scales the control plane down by its oldest Machine. The provider drains it from the
    // load balancer as soon as the Machine is deleting, before anything else happens.
    let removing = Instant::now();
    let victim = node("cp0");
    env.begin_machine_deletion("cp0").await;
    // Drained in the configuration, then in haproxy itself (reloaded: still `UP`, at weight 0,
    // so it gets no new connection and keeps the ones it has).
    eventually(Duration::from_secs(60), "cp0 to be drained", || async {
        let drained = haproxy_backends(&haproxy_config(&lb))
            .iter()
            .any(|(n, _, w)| *n == victim && *w == 0);
        let dm = env.get(&infra("DockerMachine"), "cp0").await?;
        let weight = dm.metadata.annotations?.get(WEIGHT_ANNOTATION).cloned();
        (drained && weight.as_deref() == Some("0")).then_some(())
    })
    .await;
    wait_haproxy(&lb, &network, &format!("{victim} drained"), |running| {
        running
            .iter()
            .any(|s| s.name == victim && s.weight == 0 && s.status == "UP")
    })
    .await;
    workload.drain(&victim).await;
    // KCP's pre-terminate hook: etcd leadership off the member, then the member removed.
    let remaining: Vec<(String, String)> = ["cp1", "cp2"]
        .iter()
        .map(|m| (node(m), ip_on(&node(m), &env.network)))
        .collect();
    let removed = etcd
        .remove_member_for_node(&victim, &ip_on(&victim, &env.network), &remaining)
        .await
        .expect("KCP removes the etcd member");
    let removed = removed.expect("cp0 had an etcd member");
    assert_eq!(removed.member.name, victim);
    println!(
        "real_cluster: etcd member of {victim} removed (leadership moved to: {})",
        removed
            .leadership_moved_to
            .as_deref()
            .unwrap_or("none, it did not lead")
    );
    let victim_volumes = container_volumes(&victim);
    assert!(!victim_volumes.is_empty(), "{victim} has its /var volume");
    env.finish_machine_deletion("cp0", Duration::from_secs(120))
        .await;
    // New connections: the load balancer sends them to the remaining control planes only.
    let workload = Workload::connect(&cluster.kubeconfig).await;
    workload.delete_node(&victim, Duration::from_secs(60)).await;
    timings.push((
        "cp0: scaled down (drain, etcd, container, Node)".into(),
        removing.elapsed(),
    ));
    let mut current = haproxy_backends(&haproxy_config(&lb));
    current.sort();
    assert_eq!(current, backends(&["cp1", "cp2"]), "cp0's backend is gone");
    wait_servers_up(&lb, &network, &[node("cp1"), node("cp2")]).await;
    assert!(victim_volumes.iter().all(|v| !volume_exists(v)));
    let members = etcd.members(&remaining[0].1).await.expect("etcd members");
    let mut member_names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
    member_names.sort();
    assert_eq!(member_names, [node("cp1"), node("cp2")]);
    let answer = https_get_until(port, "/healthz", Duration::from_secs(60), |a| {
        a.status == 200
    })
    .await
    .expect("/healthz through the load balancer after the scale-down");
    assert_eq!(answer.body.trim(), "ok");
    eventually(
        Duration::from_secs(120),
        "the two remaining Nodes, Ready",
        || async {
            let nodes = workload.nodes().await?;
            let mut names: Vec<String> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            names.sort();
            (names == [node("cp1"), node("cp2")] && nodes.iter().all(node_ready)).then_some(())
        },
    )
    .await;

    // Deleting the cluster as core does leaves no container, volume, network or finalizer.
    let deleting = Instant::now();
    let mut volumes = victim_volumes;
    volumes.extend(worker_volumes);
    for container in [&lb, &node("cp1"), &node("cp2")] {
        volumes.extend(container_volumes(container));
    }
    env.delete_cluster_as_core(&name, Duration::from_secs(180))
        .await;
    env.assert_nothing_left(&name, &volumes).await;
    timings.push(("cluster deleted, nothing left".into(), deleting.elapsed()));

    // The floor, after the provider's cluster is gone (so neither slows the other): the same
    // image and kubeadm commands by hand, then everything it made removed.
    let mut floor = Floor::new(&image);
    env.adopt_cluster(&floor.name);
    let floor_times = floor
        .measure(&cluster.spec, &cluster.worker_preload_images)
        .await;
    let left = floor.remove();
    assert!(left.is_empty(), "the floor left {left:?}");

    println!(
        "real_cluster ({image}, Kubernetes {}):",
        cluster.settings.version
    );
    for (what, took) in &timings {
        println!("  {what:<52} {:>6.1}s", took.as_secs_f64());
    }
    println!("  {:<52} {:>6.1}s", "all", started.elapsed().as_secs_f64());
    println!(
        "real_cluster against the floor (the same image and kubeadm commands by hand; the floor's \
         control-plane endpoint is its control plane's own address, no load balancer):"
    );
    let mut rows = vec![
        (
            "cp0: created -> kubeadm init done".to_string(),
            provider_cp0.bootstrapped,
            floor_times.control_plane.bootstrapped,
        ),
        (
            "cp0: created -> first control plane Ready".to_string(),
            provider_cp0.ready,
            floor_times.control_plane.ready,
        ),
    ];
    // Each joined node against the floor's join of its kind (a worker, a second control plane).
    for (machine, control_plane, progress) in joined {
        let floor = if control_plane {
            floor_times.control_plane_join
        } else {
            floor_times.worker
        };
        rows.push((
            format!("{machine}: created -> kubeadm join done"),
            progress.bootstrapped,
            floor.bootstrapped,
        ));
        rows.push((
            format!("{machine}: created -> Node Ready"),
            progress.ready,
            floor.ready,
        ));
    }
    for (what, provider, floor) in rows {
        println!("  {}", ratio_line(&what, provider, floor));
    }
}

/// Waits until haproxy's own view of the `kube-apiservers` backend is exactly `servers`, each
/// `UP` at full weight with its last `/healthz` check answered (`L7OK`): every control plane
/// answers through the load balancer, not only one of them.
async fn wait_servers_up(lb: &str, network: &str, servers: &[String]) {
    let mut expected = servers.to_vec();
    expected.sort();
    wait_haproxy(
        lb,
        network,
        &format!("{expected:?} up and healthy"),
        |running| {
            let mut up: Vec<String> = running
                .iter()
                .filter(|s| s.status == "UP" && s.weight == 100 && s.check == "L7OK")
                .map(|s| s.name.clone())
                .collect();
            up.sort();
            up == expected && running.len() == expected.len()
        },
    )
    .await;
}

/// Waits up to 60 s until haproxy's running state of the `kube-apiservers` backend (its stats
/// page) satisfies `good`; the failure names what it saw last.
async fn wait_haproxy(
    lb: &str,
    network: &str,
    what: &str,
    good: impl Fn(&[HaproxyServer]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = haproxy_servers(lb, network);
        if seen.as_deref().is_ok_and(&good) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "haproxy does not see {what} within 60 s; it sees {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
