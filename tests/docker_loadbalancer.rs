//! Integration tests of the haproxy load balancer on the real Docker engine: traffic sent to the
//! load balancer's published 127.0.0.1 port reaches a node's TLS `/healthz`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod docker_support;

use std::collections::BTreeSet;
use std::time::Duration;

use capd::docker::loadbalancer::{
    ApplyOutcome, Backend, CONFIG_PATH, ConfigData, LoadBalancerSpec, apply_config,
    create_load_balancer, delete_load_balancer, find_load_balancer, load_balancer_ip,
    render_config,
};
use capd::docker::network::{delete_network, ensure_network};
use capd::docker::node::{IpFamily, NodeRole, NodeSpec, create_node, delete_node, exec_checked};
use capd::docker::{ContainerInfo, ContainerRuntime, DockerEngine, ExecRequest, NetworkInfo};
use capd_e2e::tls::https_get_until;
use docker_support::{Guard, engine, images};

/// Starts a control-plane node and runs its kubeadm stand-in, which serves TLS `/healthz`.
async fn control_plane(
    engine: &DockerEngine,
    guard: &Guard,
    network: &NetworkInfo,
    suffix: &str,
) -> ContainerInfo {
    let name = format!("{}-cp-{suffix}", guard.id);
    let mut spec = NodeSpec::new(
        &guard.id,
        &name,
        NodeRole::ControlPlane,
        &images().node,
        &network.name,
    );
    spec.extra_labels = guard.labels();
    let info = create_node(engine, &spec, None).await.unwrap();
    guard.track_volumes(&info.volumes);
    exec_checked(
        engine,
        &name,
        &ExecRequest::new(["kubeadm", "init", "--config", "/run/kubeadm/kubeadm.yaml"]),
        "run kubeadm init",
    )
    .await
    .unwrap();
    info
}

fn backend(info: &ContainerInfo, network: &NetworkInfo, weight: u32) -> Backend {
    Backend {
        name: info.name.clone(),
        address: info.networks[&network.name].ipv4.unwrap().to_string(),
        weight,
    }
}

async fn lb_config(engine: &DockerEngine, name: &str) -> String {
    engine
        .exec(name, &ExecRequest::new(["cp", CONFIG_PATH, "/dev/stdout"]))
        .await
        .unwrap()
        .stdout_text()
}

#[tokio::test]
async fn load_balancer_routes_to_healthy_control_planes() {
    let guard = Guard::new("lb");
    let engine = engine().await;
    let network = ensure_network(&engine, &guard.id, &guard.labels())
        .await
        .unwrap();

    let mut spec = LoadBalancerSpec::new(&guard.id, &images().haproxy, &network.name);
    spec.extra_labels = guard.labels();
    let lb = create_load_balancer(&engine, &spec, None).await.unwrap();
    guard.track_volumes(&lb.volumes);
    assert_eq!(lb.name, format!("{}-lb", guard.id));
    assert_eq!(lb.labels["io.x-k8s.kind.role"], "external-load-balancer");
    assert!(load_balancer_ip(&lb, &network.name, IpFamily::V4).is_some());
    assert_eq!(
        find_load_balancer(&engine, &guard.id)
            .await
            .unwrap()
            .unwrap()
            .id,
        lb.id
    );
    let api_port = lb.host_port(6443).unwrap();
    let stats_port = lb.host_port(8404).unwrap();
    assert!(
        lb.ports.iter().all(|p| p.host_ip == "127.0.0.1"),
        "{:?}",
        lb.ports
    );
    assert_ne!(api_port, stats_port);

    let a = control_plane(&engine, &guard, &network, "a").await;
    let b = control_plane(&engine, &guard, &network, "b").await;

    // Both backends in rotation: requests reach both nodes through the load balancer.
    let data = ConfigData {
        frontend_port: 6443,
        backends: vec![backend(&a, &network, 100), backend(&b, &network, 100)],
        ipv6: false,
    };
    let config = render_config(&data, None).unwrap();
    assert_eq!(
        apply_config(&engine, &lb.name, &config).await.unwrap(),
        ApplyOutcome::Reloaded
    );
    assert_eq!(lb_config(&engine, &lb.name).await, config);
    let mut seen = BTreeSet::new();
    for _ in 0..20 {
        let answer = https_get_until(api_port, "/healthz", Duration::from_secs(20), |a| {
            a.status == 200
        })
        .await
        .unwrap();
        assert_eq!(answer.body, "ok");
        seen.insert(answer.header("X-Capd-Node").unwrap().to_string());
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from([a.name.clone(), b.name.clone()]),
        "round robin over both nodes"
    );

    // Weight 0 drains a node: every request then lands on the other one.
    let data = ConfigData {
        backends: vec![backend(&a, &network, 0), backend(&b, &network, 100)],
        ..data
    };
    let config = render_config(&data, None).unwrap();
    assert_eq!(
        apply_config(&engine, &lb.name, &config).await.unwrap(),
        ApplyOutcome::Reloaded
    );
    assert_eq!(
        apply_config(&engine, &lb.name, &config).await.unwrap(),
        ApplyOutcome::Unchanged
    );
    // SIGHUP reloads haproxy asynchronously: the old worker may take a last new connection
    // while the new one starts. Once the new configuration answers, it answers alone.
    https_get_until(api_port, "/healthz", Duration::from_secs(20), |x| {
        x.status == 200 && x.header("X-Capd-Node") == Some(b.name.as_str())
    })
    .await
    .unwrap();
    for _ in 0..6 {
        let answer = https_get_until(api_port, "/healthz", Duration::from_secs(20), |x| {
            x.status == 200
        })
        .await
        .unwrap();
        assert_eq!(answer.header("X-Capd-Node"), Some(b.name.as_str()));
    }

    // A configuration haproxy rejects is refused and the running one keeps serving.
    let broken = render_config(
        &data,
        Some("global\n  maxconn {{ .FrontendControlPlanePort }}\nbogus-section\n"),
    )
    .unwrap();
    let err = apply_config(&engine, &lb.name, &broken).await.unwrap_err();
    assert_eq!(err.category(), "invalid_config", "{err}");
    assert_eq!(lb_config(&engine, &lb.name).await, config);
    let answer = https_get_until(api_port, "/healthz", Duration::from_secs(20), |x| {
        x.status == 200
    })
    .await
    .unwrap();
    assert_eq!(answer.header("X-Capd-Node"), Some(b.name.as_str()));
    assert!(
        engine
            .inspect_container(&lb.name)
            .await
            .unwrap()
            .unwrap()
            .running
    );

    delete_load_balancer(&engine, &guard.id).await.unwrap();
    delete_node(&engine, &a.name).await.unwrap();
    delete_node(&engine, &b.name).await.unwrap();
    delete_network(&engine, &network.name).await.unwrap();
    guard.assert_clean(&engine).await;
}

#[tokio::test]
async fn endpoint_port_other_than_6443_is_reachable_on_the_published_port_and_on_6443_for_kind() {
    let guard = Guard::new("lb7777");
    let engine = engine().await;
    let network = ensure_network(&engine, &guard.id, &guard.labels())
        .await
        .unwrap();

    let mut spec = LoadBalancerSpec::new(&guard.id, &images().haproxy, &network.name);
    spec.extra_labels = guard.labels();
    spec.frontend_port = 7777;
    let lb = create_load_balancer(&engine, &spec, None).await.unwrap();
    guard.track_volumes(&lb.volumes);
    let api_port = lb.host_port(7777).expect("the frontend port is published");

    let a = control_plane(&engine, &guard, &network, "a").await;
    let data = ConfigData {
        frontend_port: 7777,
        backends: vec![backend(&a, &network, 100)],
        ipv6: false,
    };
    apply_config(&engine, &lb.name, &render_config(&data, None).unwrap())
        .await
        .unwrap();
    let answer = https_get_until(api_port, "/readyz", Duration::from_secs(20), |x| {
        x.status == 200
    })
    .await
    .unwrap();
    assert_eq!(answer.header("X-Capd-Node"), Some(a.name.as_str()));

    // `kind get kubeconfig` reads the host port of 6443/tcp: it must reach the API servers too.
    let kind_port = lb
        .host_port(6443)
        .expect("6443/tcp stays published for kind");
    let answer = https_get_until(kind_port, "/readyz", Duration::from_secs(20), |x| {
        x.status == 200
    })
    .await
    .unwrap();
    assert_eq!(answer.header("X-Capd-Node"), Some(a.name.as_str()));

    engine.delete_container(&lb.name).await.unwrap();
    engine.delete_container(&a.name).await.unwrap();
    delete_network(&engine, &network.name).await.unwrap();
    guard.assert_clean(&engine).await;
}

#[tokio::test]
async fn ipv6_cluster_config_is_accepted_and_routes_over_ipv6() {
    let guard = Guard::new("lb6");
    let engine = engine().await;
    let network = ensure_network(&engine, &guard.id, &guard.labels())
        .await
        .unwrap();
    if !network.enable_ipv6 {
        eprintln!(
            "skipped: the engine created network {} without IPv6",
            network.name
        );
        delete_network(&engine, &network.name).await.unwrap();
        return;
    }

    let mut spec = LoadBalancerSpec::new(&guard.id, &images().haproxy, &network.name);
    spec.extra_labels = guard.labels();
    spec.ip_family = IpFamily::V6;
    let lb = create_load_balancer(&engine, &spec, None).await.unwrap();
    guard.track_volumes(&lb.volumes);
    assert!(
        load_balancer_ip(&lb, &network.name, IpFamily::V6)
            .unwrap()
            .is_ipv6()
    );

    let name = format!("{}-cp-a", guard.id);
    let mut node = NodeSpec::new(
        &guard.id,
        &name,
        NodeRole::ControlPlane,
        &images().node,
        &network.name,
    );
    node.extra_labels = guard.labels();
    node.ip_family = IpFamily::V6;
    let a = create_node(&engine, &node, None).await.unwrap();
    guard.track_volumes(&a.volumes);
    exec_checked(
        &engine,
        &name,
        &ExecRequest::new(["kubeadm", "join"]),
        "run kubeadm join",
    )
    .await
    .unwrap();

    let backend = Backend {
        name: name.clone(),
        address: a.networks[&network.name].ipv6.unwrap().to_string(),
        weight: 100,
    };
    let data = ConfigData {
        frontend_port: 6443,
        backends: vec![backend],
        ipv6: true,
    };
    let config = render_config(&data, None).unwrap();
    assert!(config.contains("bind :::6443 v6only"));
    assert_eq!(
        apply_config(&engine, &lb.name, &config).await.unwrap(),
        ApplyOutcome::Reloaded
    );
    let answer = https_get_until(
        lb.host_port(6443).unwrap(),
        "/livez",
        Duration::from_secs(20),
        |x| x.status == 200,
    )
    .await
    .unwrap();
    assert_eq!(answer.header("X-Capd-Node"), Some(name.as_str()));

    engine.delete_container(&lb.name).await.unwrap();
    engine.delete_container(&name).await.unwrap();
    delete_network(&engine, &network.name).await.unwrap();
    guard.assert_clean(&engine).await;
}
