//! Stopped containers come back: after an engine or host restart every container of a cluster is
//! stopped (their restart policy, `on-failure:1`, does not start them). The manager starts them
//! again, load balancer first, then control planes, then workers: the same containers, the same
//! addresses and host port (pinned at creation, on Docker and Podman alike), the same endpoint,
//! no second bootstrap, and conditions and Events that say what happened. Started by the engine
//! in any order, they come back the same.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capd_e2e::*;
use kube::api::DynamicObject;
use serde_json::json;

const COME_BACK: Duration = Duration::from_secs(90);

/// What must not change across a restart: the containers, every container's address (pinned at
/// creation), the load balancer's host port (pinned too) and the endpoint.
#[derive(Debug, PartialEq)]
struct Identity {
    containers: Vec<(String, String)>,
    addresses: Vec<(String, String)>,
    load_balancer_ip: String,
    load_balancer_port: Option<u16>,
    endpoint: serde_json::Value,
}

async fn identity(env: &Env, cluster: &str) -> Identity {
    let dc = env.get(&infra("DockerCluster"), cluster).await.unwrap();
    let containers = cluster_containers(cluster);
    let lb = format!("{cluster}-lb");
    Identity {
        addresses: containers
            .iter()
            .map(|c| (c.clone(), ip_on(c, &env.network)))
            .collect(),
        containers: containers
            .into_iter()
            .map(|c| (container_id(&c), c))
            .collect(),
        load_balancer_ip: ip_on(&lb, &env.network),
        load_balancer_port: published_port(&lb, 6443),
        endpoint: dc.data["spec"]["controlPlaneEndpoint"].clone(),
    }
}

fn running(container: &str) -> bool {
    docker(&["inspect", "--format", "{{.State.Running}}", container]).1 == "true"
}

fn started_at(container: &str) -> jiff::Timestamp {
    docker(&["inspect", "--format", "{{.State.StartedAt}}", container])
        .1
        .parse()
        .unwrap()
}

fn message(object: &DynamicObject, type_: &str) -> String {
    condition(object, type_).unwrap()["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Waits until every container runs and the objects say so again, then checks what a user
/// would look at.
async fn wait_back(env: &Env, cluster: &str, before: &Identity) {
    let containers = cluster_containers(cluster);
    eventually(COME_BACK, "every container to run again", || async {
        containers.iter().all(|c| running(c)).then_some(())
    })
    .await;
    let dc = eventually(COME_BACK, "the DockerCluster to say so", || async {
        let dc = env.get(&infra("DockerCluster"), cluster).await?;
        (message(&dc, "LoadBalancerAvailable").contains("was stopped; started it again"))
            .then_some(dc)
    })
    .await;
    assert_eq!(
        condition_state(&dc, "LoadBalancerAvailable"),
        Some(("True".into(), "Available".into()))
    );
    assert_eq!(condition_state(&dc, "Ready").unwrap().0, "True");
    for machine in ["cp1", "w1"] {
        let dm = eventually(
            COME_BACK,
            &format!("DockerMachine {machine} to say it was started again"),
            || async {
                let dm = env.get(&infra("DockerMachine"), machine).await?;
                (condition_state(&dm, "Ready")?.0 == "True"
                    && message(&dm, "ContainerProvisioned")
                        == format!("Container {cluster}-{machine} was stopped; started it again"))
                .then_some(dm)
            },
        )
        .await;
        assert_eq!(
            condition_state(&dm, "BootstrapCompleted"),
            Some(("True".into(), "Completed".into()))
        );
        let container = format!("{cluster}-{machine}");
        assert_eq!(
            kubeadm_runs(&container),
            1,
            "{container} is not bootstrapped again"
        );
        let ip = ip_on(&container, &env.network);
        eventually(
            Duration::from_secs(30),
            &format!("DockerMachine {machine} to show the address {ip} it has now"),
            || async {
                let dm = env.get(&infra("DockerMachine"), machine).await?;
                (dm.data["status"]["addresses"][1] == json!({"type": "InternalIP", "address": ip}))
                    .then_some(())
            },
        )
        .await;
        let events = env.events_about("DockerMachine", machine).await;
        assert!(
            events.iter().any(|(kind, reason, text)| kind == "Normal"
                && reason == "ContainerRestarted"
                && text == &format!("Node container {container} was stopped; started it again")),
            "{events:?}"
        );
    }
    let events = env.events_about("DockerCluster", cluster).await;
    assert!(
        events
            .iter()
            .any(|(kind, reason, _)| kind == "Normal" && reason == "LoadBalancerRestarted"),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|(_, reason, _)| reason == "LoadBalancerRecreated"
                || reason == "LoadBalancerAddressChanged"),
        "{events:?}"
    );
    assert_eq!(
        &identity(env, cluster).await,
        before,
        "the same containers, load balancer address and endpoint"
    );
    let cp1 = format!("{cluster}-cp1");
    let backend = format!("server {cp1} {}:6443 ", ip_on(&cp1, &env.network));
    eventually(
        Duration::from_secs(30),
        "the control plane behind the load balancer",
        || async {
            haproxy_config(&format!("{cluster}-lb"))
                .contains(&backend)
                .then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_containers_come_back_in_order_with_the_same_endpoint() {
    let mut env = Env::start_with("stopped", &["--sync-period=3s"]).await;
    env.wait_ready().await;
    let name = env.cluster_name();
    env.provisioned_cluster(&name, json!({})).await;
    for (machine, control_plane) in [("cp1", true), ("w1", false)] {
        let secret = format!("{machine}-bootstrap");
        env.create_secret(&secret, &cloud_config(0)).await;
        env.create_machine(&name, machine, control_plane, Some(&secret))
            .await;
    }
    for machine in ["cp1", "w1"] {
        env.wait_machine_provisioned(machine, COME_BACK).await;
    }
    let (lb, cp1, w1) = (
        format!("{name}-lb"),
        format!("{name}-cp1"),
        format!("{name}-w1"),
    );
    eventually(
        Duration::from_secs(30),
        "the control plane behind the load balancer",
        || async {
            haproxy_config(&lb)
                .contains(&format!("server {cp1} "))
                .then_some(())
        },
    )
    .await;
    let before = identity(&env, &name).await;
    assert_eq!(before.containers.len(), 3, "{before:?}");
    assert!(
        before
            .load_balancer_port
            .is_some_and(|p| capd::docker::pinning::PINNED_PORTS.contains(&p)),
        "the load balancer's host port is pinned: {before:?}"
    );
    assert_eq!(before.endpoint["host"], json!(before.load_balancer_ip));

    // The manager keeps running while the containers stop, one after the other.
    for container in [&lb, &cp1, &w1] {
        assert!(docker(&["stop", "--time=1", container]).0);
    }
    wait_back(&env, &name, &before).await;

    // A laptop restart: the manager is down while the engine restarts, and every container is
    // stopped when it comes up again.
    env.stop_manager(false);
    assert!(docker(&["stop", "--time=1", &lb, &cp1, &w1]).0);
    assert!(![&lb, &cp1, &w1].iter().any(|c| running(c)));
    env.start_manager();
    env.wait_ready().await;
    wait_back(&env, &name, &before).await;
    assert!(
        started_at(&lb) <= started_at(&cp1) && started_at(&cp1) <= started_at(&w1),
        "load balancer, then control plane, then worker: {} {} {}",
        started_at(&lb),
        started_at(&cp1),
        started_at(&w1)
    );

    // The engine starts them itself, in another order than they were created (the worker, then
    // the control plane, then the load balancer), while the manager is down: the same addresses
    // and host port, so the manager finds nothing to repair and the load balancer's
    // configuration stays as it was.
    let config = haproxy_config(&lb);
    env.stop_manager(false);
    assert!(docker(&["stop", "--time=1", &lb, &cp1, &w1]).0);
    for container in [&w1, &cp1, &lb] {
        assert!(docker(&["start", container]).0, "docker start {container}");
    }
    env.start_manager();
    env.wait_ready().await;
    assert_eq!(
        &identity(&env, &name).await,
        &before,
        "the same containers, addresses, host port and endpoint, whatever the start order"
    );
    for machine in ["cp1", "w1"] {
        eventually(
            COME_BACK,
            &format!("DockerMachine {machine} Ready"),
            || async {
                let dm = env.get(&infra("DockerMachine"), machine).await?;
                (condition_state(&dm, "Ready")?.0 == "True").then_some(())
            },
        )
        .await;
    }
    assert_eq!(
        haproxy_config(&lb),
        config,
        "the configuration is not rewritten"
    );
    let events = env.events_about("DockerCluster", &name).await;
    assert!(
        !events
            .iter()
            .any(|(_, reason, _)| reason == "LoadBalancerAddressChanged"
                || reason == "LoadBalancerHostPortChanged"),
        "{events:?}"
    );

    // While the load balancer is stopped, something else binds its host port: it cannot start
    // again, so it is created again at the same address on the next pinned port, and the
    // condition and a Warning name that port.
    env.stop_manager(false);
    assert!(docker(&["stop", "--time=1", &lb]).0);
    let old_port = before.load_balancer_port.unwrap();
    let squatter = std::net::TcpListener::bind(("127.0.0.1", old_port))
        .expect("bind the stopped load balancer's host port");
    env.start_manager();
    env.wait_ready().await;
    let new_port = eventually(
        COME_BACK,
        "the load balancer on another host port",
        || async {
            running(&lb)
                .then(|| published_port(&lb, 6443))
                .flatten()
                .filter(|p| *p != old_port)
        },
    )
    .await;
    assert!(capd::docker::pinning::PINNED_PORTS.contains(&new_port));
    assert_eq!(
        ip_on(&lb, &env.network),
        before.load_balancer_ip,
        "the same address"
    );
    let note = format!("created it again with host port {new_port}");
    eventually(
        COME_BACK,
        "the condition and the Warning to name the new port",
        || async {
            let dc = env.get(&infra("DockerCluster"), &name).await?;
            let events = env.events_about("DockerCluster", &name).await;
            (message(&dc, "LoadBalancerAvailable").contains(&note)
                && events.iter().any(|(kind, reason, text)| {
                    kind == "Warning"
                        && reason == "LoadBalancerHostPortChanged"
                        && text.contains(&note)
                }))
            .then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the control plane behind the new load balancer",
        || async {
            haproxy_config(&lb)
                .contains(&format!("server {cp1} "))
                .then_some(())
        },
    )
    .await;
    drop(squatter);
}
