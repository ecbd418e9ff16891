use super::*;
use crate::docker::network::{CREATED_BY_LABEL, CREATED_BY_VALUE};
use crate::docker::{ContainerSpec, FakeRuntime};

const OWNER: Owner<'static> = Owner {
    namespace: "shoot--p--s",
    name: "infra",
};

fn plan(name: &str, ipv4: Option<&str>, ipv6: Ipv6Plan) -> NetworkPlan {
    NetworkPlan {
        name: name.into(),
        ipv4: ipv4.map(|c| c.parse().unwrap()),
        ipv6,
    }
}

fn foreign(name: &str, subnet: &str) -> NetworkInfo {
    NetworkInfo {
        id: format!("{name}-id"),
        name: name.into(),
        driver: "bridge".into(),
        subnets: vec![subnet.parse().unwrap()],
        ..Default::default()
    }
}

fn attach_container(fake: &FakeRuntime, network: &str) {
    fake.add_image("img");
    let spec = ContainerSpec {
        name: format!("node-on-{network}"),
        image: "img".into(),
        network: network.into(),
        ..Default::default()
    };
    futures::executor::block_on(fake.run_container(&spec)).unwrap();
}

#[tokio::test]
async fn a_missing_network_is_created_with_the_cidr_and_our_labels() {
    let fake = FakeRuntime::new();
    let ensured = ensure(
        &fake,
        &plan("net-a", Some("10.213.7.0/24"), Ipv6Plan::Disabled),
        OWNER,
    )
    .await
    .unwrap();
    assert_eq!(ensured.action, NetworkAction::Created);
    assert!(ensured.managed);
    let net = &ensured.network;
    assert_eq!(net.subnets, vec!["10.213.7.0/24".parse().unwrap()]);
    assert!(!net.enable_ipv6);
    assert_eq!(
        net.gateways,
        vec!["10.213.7.1".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(net.labels[CREATED_BY_LABEL], CREATED_BY_VALUE);
    assert_eq!(net.labels[NAMESPACE_LABEL], "shoot--p--s");
    assert_eq!(net.labels[NAME_LABEL], "infra");
    assert_eq!(
        net.options["com.docker.network.bridge.enable_ip_masquerade"],
        "true"
    );

    let again = ensure(
        &fake,
        &plan("net-a", Some("10.213.7.0/24"), Ipv6Plan::Disabled),
        OWNER,
    )
    .await
    .unwrap();
    assert_eq!(again.action, NetworkAction::Adopted);
    assert_eq!(again.network.id, net.id, "a second ensure changes nothing");
    assert_eq!(fake.networks().len(), 1);
}

#[tokio::test]
async fn a_fitting_foreign_network_is_adopted_but_not_managed() {
    let fake = FakeRuntime::new();
    fake.add_network(foreign("kind", "172.18.0.0/16"));
    let ensured = ensure(&fake, &plan("kind", None, Ipv6Plan::Disabled), OWNER)
        .await
        .unwrap();
    assert_eq!(ensured.action, NetworkAction::Adopted);
    assert!(!ensured.managed);

    let err = ensure(
        &fake,
        &plan("kind", Some("10.1.0.0/24"), Ipv6Plan::Disabled),
        OWNER,
    )
    .await
    .unwrap_err();
    assert!(err.is_permanent(), "a foreign network is never changed");
    assert_eq!(
        err.to_string(),
        "network kind does not match the providerConfig: it has subnets 172.18.0.0/16, not 10.1.0.0/24"
    );
    let v6 = ensure(&fake, &plan("kind", None, Ipv6Plan::Derived), OWNER)
        .await
        .unwrap_err();
    assert!(v6.to_string().contains("it has no IPv6"), "{v6}");
    assert_eq!(
        fake.networks().len(),
        1,
        "a foreign network is never replaced"
    );
}

#[tokio::test]
async fn our_unused_network_is_recreated_when_the_cidr_changes() {
    let fake = FakeRuntime::new();
    let first = ensure(
        &fake,
        &plan("net-b", Some("10.213.8.0/24"), Ipv6Plan::Disabled),
        OWNER,
    )
    .await
    .unwrap();
    let second = ensure(
        &fake,
        &plan("net-b", Some("10.213.9.0/24"), Ipv6Plan::Disabled),
        OWNER,
    )
    .await
    .unwrap();
    assert_eq!(second.action, NetworkAction::Recreated);
    assert_ne!(second.network.id, first.network.id);
    assert_eq!(
        second.network.subnets,
        vec!["10.213.9.0/24".parse().unwrap()]
    );

    attach_container(&fake, "net-b");
    let err = ensure(
        &fake,
        &plan("net-b", Some("10.213.10.0/24"), Ipv6Plan::Disabled),
        OWNER,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, Error::NetworkMismatch { .. }),
        "a network in use is never recreated: {err}"
    );
    assert_eq!(
        err.codes(),
        ["ERR_RETRYABLE_CONFIGURATION_PROBLEM"],
        "it is recreated once its containers are gone"
    );
}

#[tokio::test]
async fn an_overlapping_cidr_names_the_network_in_the_way() {
    let fake = FakeRuntime::new();
    fake.add_network(foreign("other", "10.213.0.0/16"));
    let err = ensure(
        &fake,
        &plan("net-c", Some("10.213.5.0/24"), Ipv6Plan::Disabled),
        OWNER,
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "create network net-c: subnet 10.213.5.0/24 overlaps Docker network other"
    );
    assert!(err.is_permanent(), "a foreign network does not go away");
}

#[tokio::test]
async fn an_overlap_with_a_leftover_network_of_ours_is_retryable() {
    let fake = FakeRuntime::new();
    let leftover = Owner {
        namespace: "shoot--old--gone",
        name: "infra",
    };
    ensure(
        &fake,
        &plan("old-net", Some("10.213.5.0/24"), Ipv6Plan::Disabled),
        leftover,
    )
    .await
    .unwrap();
    let err = ensure(
        &fake,
        &plan("net-c", Some("10.213.5.0/24"), Ipv6Plan::Disabled),
        OWNER,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, Error::SubnetOverlap { other: Some(o), other_ours: true, .. } if o == "old-net"),
        "{err:?}"
    );
    assert_eq!(err.codes(), ["ERR_RETRYABLE_CONFIGURATION_PROBLEM"]);
}

#[tokio::test]
async fn ipv6_is_derived_like_kind_and_moves_on_when_taken() {
    let fake = FakeRuntime::new();
    let ensured = ensure(&fake, &plan("kind", None, Ipv6Plan::Derived), OWNER)
        .await
        .unwrap();
    assert!(ensured.network.enable_ipv6);
    assert!(
        ensured
            .network
            .subnets
            .contains(&"fc00:f853:ccd:e793::/64".parse().unwrap())
    );

    let fake = FakeRuntime::new();
    let mut squatter = foreign("squatter", "172.30.0.0/16");
    squatter.subnets.push(IpNetwork::V6(ula_subnet("net-d", 0)));
    fake.add_network(squatter);
    let ensured = ensure(&fake, &plan("net-d", None, Ipv6Plan::Derived), OWNER)
        .await
        .unwrap();
    assert!(
        ensured
            .network
            .subnets
            .contains(&IpNetwork::V6(ula_subnet("net-d", 1)))
    );
}

#[tokio::test]
async fn ipv6_on_an_engine_without_it_is_a_configuration_problem() {
    let fake = FakeRuntime::new();
    fake.disable_ipv6();
    let err = ensure(
        &fake,
        &plan(
            "net-e",
            None,
            Ipv6Plan::Subnet("fd00:10::/64".parse().unwrap()),
        ),
        OWNER,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Ipv6Unavailable { .. }), "{err}");
    assert_eq!(
        err.codes(),
        ["ERR_RETRYABLE_CONFIGURATION_PROBLEM"],
        "the engine's IPv6 is the operator's to fix, not the shoot's"
    );
    assert!(fake.networks().is_empty());
}

#[tokio::test]
async fn only_our_unused_network_is_removed() {
    let fake = FakeRuntime::new();
    fake.add_network(foreign("kind", "172.18.0.0/16"));
    assert_eq!(
        remove_if_owned(&fake, "kind", OWNER).await.unwrap(),
        Removal::NotOwned
    );
    assert_eq!(
        remove_if_owned(&fake, "absent", OWNER).await.unwrap(),
        Removal::Absent
    );
    ensure(&fake, &plan("net-f", None, Ipv6Plan::Disabled), OWNER)
        .await
        .unwrap();
    let other_owner = Owner {
        namespace: "shoot--p--other",
        name: "infra",
    };
    assert_eq!(
        remove_if_owned(&fake, "net-f", other_owner).await.unwrap(),
        Removal::NotOwned,
        "a network created for another Infrastructure is not ours to remove"
    );
    attach_container(&fake, "net-f");
    let err = remove_if_owned(&fake, "net-f", OWNER).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "delete network net-f: still used by 1 container(s)"
    );
    fake.delete_container("node-on-net-f").await.unwrap();
    assert_eq!(
        remove_if_owned(&fake, "net-f", OWNER).await.unwrap(),
        Removal::Removed
    );
    assert_eq!(fake.networks().len(), 1, "only the foreign network is left");
}

#[test]
fn non_bridge_networks_do_not_fit() {
    let mut host = foreign("h", "10.0.0.0/24");
    host.driver = "macvlan".into();
    assert_eq!(
        mismatches(&host, &plan("h", None, Ipv6Plan::Disabled)),
        ["its driver is \"macvlan\", nodes need a bridge network"]
    );
}
