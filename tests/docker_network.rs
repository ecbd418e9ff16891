//! Integration tests of the provider network on the real Docker engine.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod docker_support;

use capd::docker::network::{
    CREATED_BY_LABEL, CREATED_BY_VALUE, NetworkDeletion, delete_network, ensure_network, ula_subnet,
};
use capd::docker::{ContainerRuntime, NetworkSpec};
use docker_support::{Guard, engine};
use ipnetwork::IpNetwork;

#[tokio::test]
async fn network_is_created_like_kind_once_and_labelled() {
    let guard = Guard::new("net");
    let engine = engine().await;
    let name = guard.id.clone();

    let first = ensure_network(&engine, &name, &guard.labels())
        .await
        .unwrap();
    let second = ensure_network(&engine, &name, &guard.labels())
        .await
        .unwrap();
    assert_eq!(
        first.id, second.id,
        "a second ensure must reuse the network"
    );
    let same_name: Vec<_> = engine
        .list_networks(&guard.labels())
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.name == name)
        .collect();
    assert_eq!(same_name.len(), 1);

    assert_eq!(first.driver, "bridge");
    assert_eq!(first.labels[CREATED_BY_LABEL], CREATED_BY_VALUE);
    // Docker masquerades when asked; Podman masquerades every bridge network that is not
    // internal and warns about the option, so it is not sent there.
    let masquerade = first
        .options
        .get("com.docker.network.bridge.enable_ip_masquerade");
    if engine.engine().takes_masquerade_option() {
        assert_eq!(masquerade.map(String::as_str), Some("true"));
    } else {
        assert_eq!(masquerade, None, "{}", engine.engine());
    }
    let bridge = engine.inspect_network("bridge").await.unwrap().unwrap();
    assert_eq!(
        first.options.get("com.docker.network.driver.mtu"),
        bridge.options.get("com.docker.network.driver.mtu"),
        "MTU is copied from the default bridge"
    );
    assert!(first.subnets.iter().any(IpNetwork::is_ipv4));
    if first.enable_ipv6 {
        assert!(first.subnets.contains(&IpNetwork::V6(ula_subnet(&name, 0))));
    } else {
        eprintln!("note: the engine has no IPv6; the network was created IPv4-only");
    }

    assert_eq!(
        delete_network(&engine, &name).await.unwrap(),
        NetworkDeletion::Removed
    );
    assert_eq!(
        delete_network(&engine, &name).await.unwrap(),
        NetworkDeletion::Absent
    );
    guard.assert_clean(&engine).await;
}

#[tokio::test]
async fn networks_we_did_not_create_are_never_deleted() {
    let guard = Guard::new("foreign");
    let engine = engine().await;
    let spec = NetworkSpec {
        name: guard.id.clone(),
        driver: "bridge".into(),
        labels: guard.labels(),
        ..Default::default()
    };
    engine.create_network(&spec).await.unwrap();
    assert_eq!(
        delete_network(&engine, &guard.id).await.unwrap(),
        NetworkDeletion::KeptForeign
    );
    let kept = ensure_network(&engine, &guard.id, &guard.labels())
        .await
        .unwrap();
    assert!(
        !kept.labels.contains_key(CREATED_BY_LABEL),
        "an existing network is used as it is"
    );
    engine.remove_network(&guard.id).await.unwrap();
    guard.assert_clean(&engine).await;
}
