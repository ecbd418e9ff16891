//! The Gardener `Infrastructure` controller against the test Kubernetes API server and the real
//! Docker engine: create, reconcile after a change, migrate to another seed (two API servers, one
//! engine) and restore there as gardenlet does, delete, invalid configuration, and adopting a
//! network we did not create without ever removing it.
//!
//! Every Docker network used here has a process-unique name and is removed at the end, even when
//! a test fails. Skips (with a message) when no Docker engine answers.

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod gardener_support;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use capd::docker::network::ula_subnet;
use capd::docker::{ContainerRuntime, DockerEngine, Labels, NetworkInfo, NetworkSpec};
use capd::gardener::{NAME_LABEL, NAMESPACE_LABEL};
use common::unique;
use gardener_support::*;
use ipnetwork::{IpNetwork, Ipv4Network};
use serde_json::json;

/// The engine, or `None` (the test is skipped) when none answers.
async fn engine() -> Option<Arc<DockerEngine>> {
    match DockerEngine::connect().await {
        Ok(engine) => Some(Arc::new(engine)),
        Err(e) => {
            eprintln!("SKIPPED: no Docker engine answers ({e}); these tests need one");
            None
        }
    }
}

/// `count` IPv4 /24 subnets in 10.213.0.0/16 that no Docker network uses.
async fn free_subnets(engine: &DockerEngine, count: usize) -> Vec<Ipv4Network> {
    static NEXT: AtomicU8 = AtomicU8::new(0);
    let taken: Vec<IpNetwork> = engine
        .list_networks(&Labels::new())
        .await
        .unwrap()
        .into_iter()
        .flat_map(|n| n.subnets)
        .collect();
    let start = (std::process::id() % 200) as u8;
    let mut free = Vec::new();
    for _ in 0..=255u16 {
        let third = start.wrapping_add(NEXT.fetch_add(1, Ordering::SeqCst));
        let candidate = Ipv4Network::new(Ipv4Addr::new(10, 213, third, 0), 24).unwrap();
        let clash = taken.iter().any(|t| {
            t.contains(IpAddr::V4(candidate.network()))
                || matches!(t.network(), IpAddr::V4(v4) if candidate.contains(v4))
        });
        if !clash {
            free.push(candidate);
            if free.len() == count {
                return free;
            }
        }
    }
    panic!("no free /24 in 10.213.0.0/16 for the test");
}

async fn inspect(engine: &DockerEngine, name: &str) -> Option<NetworkInfo> {
    engine.inspect_network(name).await.unwrap()
}

#[tokio::test]
async fn create_change_migrate_restore_and_delete_on_docker() {
    let Some(engine) = engine().await else {
        return;
    };
    let network = unique("capd-gardener-it");
    let _cleanup = Cleanup {
        networks: vec![network.clone()],
    };
    let [first, second] = free_subnets(&engine, 2).await.try_into().unwrap();
    let runtime: Arc<dyn ContainerRuntime> = engine.clone();
    let env = Env::start(runtime, "shoot--it--life").await;

    env.create(
        "infra",
        "docker",
        Some(config(json!({"name": network, "cidr": first.to_string()}))),
    )
    .await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    let docker = inspect(&engine, &network)
        .await
        .expect("the network exists");
    assert_eq!(docker.subnets, vec![IpNetwork::V4(first)]);
    assert_eq!(docker.labels[NAMESPACE_LABEL], "shoot--it--life");
    assert_eq!(docker.labels[NAME_LABEL], "infra");
    let published = provider_status(&created);
    assert_eq!(published.network.id, docker.id);
    assert!(published.network.managed);
    assert_eq!(
        published.network.subnets[0].gateway.as_deref(),
        Some(first.nth(1).unwrap().to_string().as_str()),
        "Docker's default gateway is the subnet's first address"
    );
    assert_eq!(
        created.status.as_ref().unwrap().nodes_cidr.as_deref(),
        Some(first.to_string().as_str())
    );

    // Reconcile after a change: a new CIDR recreates our (unused) network.
    env.set_provider_config(
        "infra",
        config(json!({"name": network, "cidr": second.to_string()})),
    )
    .await;
    let changed = env.wait_operation("infra", "Reconcile", "Succeeded").await;
    assert_eq!(
        changed.status.as_ref().unwrap().observed_generation,
        Some(2)
    );
    let docker = inspect(&engine, &network)
        .await
        .expect("the network exists");
    assert_eq!(docker.subnets, vec![IpNetwork::V4(second)]);
    assert_eq!(provider_status(&changed).network.id, docker.id);
    assert_eq!(
        changed.status.as_ref().unwrap().nodes_cidr.as_deref(),
        Some(second.to_string().as_str())
    );

    // Migrate keeps the network and lets go of the object.
    env.annotate("infra", "migrate").await;
    let migrated = env.wait_migrated("infra").await;
    assert!(!has_finalizer(&migrated));
    assert_eq!(operation(&migrated), None);
    assert_eq!(
        inspect(&engine, &network).await.map(|n| n.id),
        Some(docker.id.clone()),
        "migration keeps the Docker network"
    );

    // The source seed deletes its migrated copy: the network stays.
    let state = migrated.status.as_ref().unwrap().state.clone().unwrap();
    env.delete("infra").await;
    env.wait_gone("infra").await;
    assert_eq!(
        inspect(&engine, &network).await.map(|n| n.id),
        Some(docker.id.clone()),
        "the source's deletion keeps the Docker network"
    );
    env.stop().await;

    // The destination seed, as gardenlet restores: wait-for-state, the state, then restore.
    let runtime: Arc<dyn ContainerRuntime> = engine.clone();
    let destination = Env::start(runtime, "shoot--it--life").await;
    destination
        .create_annotated(
            "infra",
            "docker",
            Some(config(json!({"name": network, "cidr": second.to_string()}))),
            Some("wait-for-state"),
        )
        .await;
    destination.write_state("infra", &state).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!has_finalizer(&destination.get("infra").await));
    destination.annotate("infra", "restore").await;
    let restored = destination
        .wait_operation("infra", "Restore", "Succeeded")
        .await;
    assert!(has_finalizer(&restored));
    assert_eq!(provider_status(&restored).network.id, docker.id);
    destination
        .wait_for("infra", "the restore annotation removed", |i| {
            operation(i).is_none()
        })
        .await;

    destination.delete("infra").await;
    destination.wait_gone("infra").await;
    assert_eq!(
        inspect(&engine, &network).await,
        None,
        "the network we created is removed with the Infrastructure"
    );
    destination.stop().await;
}

#[tokio::test]
async fn configuration_problems_and_foreign_networks_on_docker() {
    let Some(engine) = engine().await else {
        return;
    };
    let foreign = unique("capd-gardener-it-foreign");
    let ours = unique("capd-gardener-it-ours");
    let _cleanup = Cleanup {
        networks: vec![foreign.clone(), ours.clone()],
    };
    let [taken, free] = free_subnets(&engine, 2).await.try_into().unwrap();
    engine
        .create_network(&NetworkSpec {
            name: foreign.clone(),
            driver: "bridge".into(),
            subnets: vec![IpNetwork::V4(taken)],
            ..Default::default()
        })
        .await
        .unwrap();
    let runtime: Arc<dyn ContainerRuntime> = engine.clone();
    let env = Env::start(runtime, "shoot--it--config").await;

    // A CIDR another network already uses.
    env.create(
        "infra",
        "docker",
        Some(config(json!({"name": ours, "cidr": taken.to_string()}))),
    )
    .await;
    let clash = env.wait_operation("infra", "Create", "Error").await;
    assert_eq!(error_codes(&clash), ["ERR_CONFIGURATION_PROBLEM"]);
    let description = clash.status.unwrap().last_error.unwrap().description;
    assert!(
        description.contains(&format!("overlaps Docker network {foreign}")),
        "the network in the way is named: {description}"
    );
    assert_eq!(inspect(&engine, &ours).await, None);

    // A CIDR that is not one.
    env.set_provider_config(
        "infra",
        config(json!({"name": ours, "cidr": "10.213.0.1/33"})),
    )
    .await;
    let invalid = env
        .wait_for("infra", "the invalid CIDR reported", |i| {
            i.status.as_ref().and_then(|s| s.observed_generation) == Some(2)
        })
        .await;
    assert_eq!(error_codes(&invalid), ["ERR_CONFIGURATION_PROBLEM"]);
    assert!(
        invalid
            .status
            .unwrap()
            .last_error
            .unwrap()
            .description
            .contains("providerConfig.networks.cidr")
    );

    // Fixed.
    env.set_provider_config(
        "infra",
        config(json!({"name": ours, "cidr": free.to_string()})),
    )
    .await;
    let fixed = env.wait_operation("infra", "Create", "Succeeded").await;
    assert_eq!(fixed.status.unwrap().last_error, None);
    assert!(inspect(&engine, &ours).await.is_some());

    // A network we did not create is adopted, reported unmanaged, and kept on deletion.
    env.create("adopter", "docker", Some(config(json!({"name": foreign}))))
        .await;
    let adopted = env.wait_operation("adopter", "Create", "Succeeded").await;
    assert!(!provider_status(&adopted).network.managed);
    assert_eq!(
        adopted.status.unwrap().nodes_cidr.as_deref(),
        Some(taken.to_string().as_str())
    );
    env.delete("adopter").await;
    env.wait_gone("adopter").await;
    assert!(
        inspect(&engine, &foreign).await.is_some(),
        "a network we did not create is never removed"
    );

    env.delete("infra").await;
    env.wait_gone("infra").await;
    assert_eq!(inspect(&engine, &ours).await, None);
    env.stop().await;
}

#[tokio::test]
async fn ipv6_gets_a_derived_unique_local_subnet_on_docker() {
    let Some(engine) = engine().await else {
        return;
    };
    let network = unique("capd-gardener-it-v6");
    let _cleanup = Cleanup {
        networks: vec![network.clone()],
    };
    let runtime: Arc<dyn ContainerRuntime> = engine.clone();
    let env = Env::start(runtime, "shoot--it--v6").await;
    env.create(
        "infra",
        "docker",
        Some(config(json!({"name": network, "ipv6": {"enabled": true}}))),
    )
    .await;
    let done = env
        .wait_for(
            "infra",
            "the Create to finish",
            |i| matches!(last_operation(i), Some((t, s)) if t == "Create" && s != "Processing"),
        )
        .await;
    if last_operation(&done) == Some(("Create".into(), "Error".into())) {
        // Engines without IPv6 support: a clear configuration problem, and nothing created.
        let description = done.status.unwrap().last_error.unwrap().description;
        assert!(description.contains("no IPv6 support"), "{description}");
        assert_eq!(inspect(&engine, &network).await, None);
        eprintln!("this Docker engine has no IPv6: checked the configuration problem instead");
        env.stop().await;
        return;
    }
    let docker = inspect(&engine, &network)
        .await
        .expect("the network exists");
    assert!(docker.enable_ipv6);
    let derived: Vec<IpNetwork> = (0..5)
        .map(|attempt| IpNetwork::V6(ula_subnet(&network, attempt)))
        .collect();
    let v6 = docker
        .subnets
        .iter()
        .find(|s| s.is_ipv6())
        .expect("an IPv6 subnet");
    assert!(
        derived.contains(v6),
        "{v6} is derived from the name like kind does"
    );
    let published = provider_status(&done);
    let families: Vec<&str> = published
        .network
        .subnets
        .iter()
        .map(|s| s.ip_family.as_str())
        .collect();
    assert_eq!(families, ["IPv4", "IPv6"]);
    let ipv4 = docker.subnets.iter().find(|s| s.is_ipv4()).unwrap();
    assert_eq!(
        done.status.unwrap().nodes_cidr,
        Some(ipv4.to_string()),
        "nodesCIDR is the IPv4 subnet the engine chose"
    );
    env.delete("infra").await;
    env.wait_gone("infra").await;
    assert_eq!(inspect(&engine, &network).await, None);
    env.stop().await;
}
