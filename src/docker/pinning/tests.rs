use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::docker::fake::{Call, FakeRuntime, Op};
use crate::docker::network::ensure_network;
use crate::docker::types::PortPublish;

const IMAGE: &str = "node:test";

async fn fake_with_network(name: &str) -> (FakeRuntime, NetworkInfo) {
    let fake = FakeRuntime::new();
    fake.add_image(IMAGE);
    let network = ensure_network(&fake, name, &Labels::new()).await.unwrap();
    (fake, network)
}

fn spec(name: &str, network: &str) -> ContainerSpec {
    ContainerSpec::capd_defaults(name, IMAGE, network)
}

async fn run(fake: &FakeRuntime, spec: &ContainerSpec, pinning: &Pinning) -> ContainerSpec {
    run_pinned(fake, spec, pinning, None).await.unwrap().1
}

/// Runs `spec` from the network as the caller read it earlier.
async fn run_from(fake: &FakeRuntime, spec: &ContainerSpec, network: &NetworkInfo) -> IpAddr {
    let ran = run_pinned(fake, spec, &Pinning::default(), Some(network))
        .await
        .unwrap()
        .1;
    IpAddr::V4(ran.addresses.ipv4.unwrap())
}

/// The engine reads pinning made: network inspects and labelled listings.
fn reads(fake: &FakeRuntime) -> (usize, usize) {
    let calls = fake.calls();
    let inspects = calls
        .iter()
        .filter(|c| matches!(c, Call::InspectNetwork(_)))
        .count();
    let listings = calls
        .iter()
        .filter(|c| matches!(c, Call::ListContainers(l) if l.contains_key(NETWORK_LABEL)))
        .count();
    (inspects, listings)
}

/// A container of another process (or tool) on `network`, asking for `address`, with `labels`.
async fn foreign(fake: &FakeRuntime, name: &str, network: &str, address: IpAddr, labels: Labels) {
    let mut foreign = spec(name, network);
    foreign.labels = labels;
    if let IpAddr::V4(a) = address {
        foreign.addresses.ipv4 = Some(a);
    }
    fake.run_container(&foreign).await.unwrap();
}

#[tokio::test]
async fn ten_creations_on_a_network_read_it_once_between_them() {
    let (fake, network) = fake_with_network("batch").await;
    let before = reads(&fake);
    let creations = (0..10).map(|i| {
        let fake = &fake;
        let network = &network;
        async move { run_from(fake, &spec(&format!("m{i}"), "batch"), network).await }
    });
    let addresses: BTreeSet<IpAddr> = futures::future::join_all(creations)
        .await
        .into_iter()
        .collect();
    assert_eq!(addresses.len(), 10, "ten different addresses");
    let (inspects, listings) = reads(&fake);
    assert_eq!(
        inspects, before.0,
        "the caller's read of the network serves them all"
    );
    assert_eq!(listings, before.1 + 1, "one listing for the batch");
}

#[tokio::test]
async fn an_address_the_engine_finds_taken_is_chosen_again_from_a_fresh_read() {
    let (fake, network) = fake_with_network("foreign").await;
    let first = run_from(&fake, &spec("a", "foreign"), &network).await;
    // Someone else starts a container on the next address down, unlabelled, after the network
    // was read: neither the caller's read nor the book's listing knows it.
    let IpAddr::V4(first4) = first else {
        unreachable!()
    };
    let next = IpAddr::V4(Ipv4Addr::from(u32::from(first4) - 1));
    foreign(&fake, "squatter", "foreign", next, Labels::new()).await;
    let (inspects, listings) = reads(&fake);

    let got = run_from(&fake, &spec("b", "foreign"), &network).await;
    assert_ne!(got, next);
    assert_ne!(got, first);
    assert_eq!(
        reads(&fake),
        (inspects + 1, listings + 1),
        "the refusal made it read the network and the listing again"
    );
    let refused = fake
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::RunContainer(s) if s.name == "b"))
        .count();
    assert_eq!(refused, 2, "one refused attempt, one that ran");
}

#[tokio::test]
async fn a_stopped_containers_pinned_address_is_never_handed_out_from_a_warm_listing() {
    let (fake, network) = fake_with_network("parked").await;
    let ipv4 = network.subnets.iter().find(|s| s.is_ipv4()).unwrap();
    let highest = highest_free(ipv4, &network.gateways.iter().copied().collect()).unwrap();
    // Another process pinned the highest address and its container is stopped: only its labels
    // keep the address.
    let labels = Labels::from([
        (NETWORK_LABEL.to_string(), "parked".to_string()),
        (IPV4_LABEL.to_string(), highest.to_string()),
    ]);
    foreign(&fake, "parked", "parked", highest, labels).await;
    fake.stop_container("parked");

    let mut handed_out = BTreeSet::new();
    for name in ["a", "b", "c"] {
        handed_out.insert(run_from(&fake, &spec(name, "parked"), &network).await);
    }
    assert!(!handed_out.contains(&highest), "{handed_out:?}");
    assert_eq!(handed_out.len(), 3);
    assert_eq!(reads(&fake).1, 1, "all from one listing");
}

#[tokio::test]
async fn a_refused_creation_makes_the_next_one_read_the_network_again() {
    let (fake, network) = fake_with_network("refused").await;
    run_from(&fake, &spec("a", "refused"), &network).await;
    fake.fail_next(
        Op::RunContainer,
        RuntimeError::from_status("create container b", 500, "no space left on device"),
    );
    let failed = run_pinned(
        &fake,
        &spec("b", "refused"),
        &Pinning::default(),
        Some(&network),
    )
    .await;
    assert!(matches!(failed, Err(RunFailure::Container(_))));
    let listings = reads(&fake).1;
    run_from(&fake, &spec("b", "refused"), &network).await;
    assert_eq!(reads(&fake).1, listings + 1, "the listing was read again");
}

fn addresses_of(fake: &FakeRuntime, container: &str, network: &str) -> EndpointAddresses {
    fake.containers()
        .into_iter()
        .find(|c| c.name == container)
        .unwrap()
        .networks[network]
}

#[tokio::test]
async fn containers_get_the_highest_free_addresses_of_every_family_and_keep_them_on_their_labels() {
    let (fake, network) = fake_with_network("pins").await;
    let ipv4 = network.subnets.iter().find(|s| s.is_ipv4()).unwrap();
    let ipv6 = network.subnets.iter().find(|s| !s.is_ipv4()).unwrap();

    let first = run(&fake, &spec("a", "pins"), &Pinning::default()).await;
    let second = run(&fake, &spec("b", "pins"), &Pinning::default()).await;

    let (a, b) = (first.addresses, second.addresses);
    let a4 = a.ipv4.unwrap();
    assert!(ipv4.contains(IpAddr::V4(a4)), "{a4} in {ipv4}");
    assert_eq!(
        u32::from(a4) + 1,
        u32::from(match ipv4 {
            IpNetwork::V4(n) => n.broadcast(),
            IpNetwork::V6(_) => unreachable!(),
        }),
        "the highest host address"
    );
    assert_eq!(
        u32::from(b.ipv4.unwrap()) + 1,
        u32::from(a4),
        "the next one down"
    );
    assert!(ipv6.contains(IpAddr::V6(a.ipv6.unwrap())));
    assert_ne!(a.ipv6, b.ipv6);
    // The engine gave them what they asked for, and the labels say so.
    assert_eq!(addresses_of(&fake, "a", "pins"), a);
    assert_eq!(first.labels[NETWORK_LABEL], "pins");
    assert_eq!(first.labels[IPV4_LABEL], a4.to_string());
    assert_eq!(pinned_addresses(&first.labels), a);
}

#[tokio::test]
async fn a_stopped_containers_address_is_never_handed_out_again() {
    let (fake, _) = fake_with_network("stops").await;
    let first = run(&fake, &spec("a", "stops"), &Pinning::default()).await;
    // Stopped: the engine no longer lists its address on the network, only its labels keep it.
    fake.stop_container("a");
    let inspected = fake.inspect_network("stops").await.unwrap().unwrap();
    assert!(
        !inspected
            .attached_addresses
            .contains(&IpAddr::V4(first.addresses.ipv4.unwrap()))
    );

    let second = run(&fake, &spec("b", "stops"), &Pinning::default()).await;
    assert_ne!(second.addresses.ipv4, first.addresses.ipv4);
    assert_ne!(second.addresses.ipv6, first.addresses.ipv6);
}

#[tokio::test]
async fn a_preferred_address_is_taken_when_free_and_skipped_when_not() {
    let (fake, _) = fake_with_network("prefer").await;
    let held = run(&fake, &spec("holder", "prefer"), &Pinning::default()).await;
    let held4 = IpAddr::V4(held.addresses.ipv4.unwrap());

    let wanted = IpAddr::V4(Ipv4Addr::new(172, 18, 0, 77));
    let free = Pinning {
        preferred: Some(wanted),
        host_ports: false,
    };
    let got = run(&fake, &spec("lb", "prefer"), &free).await;
    assert_eq!(got.addresses.ipv4.map(IpAddr::V4), Some(wanted));

    let busy = Pinning {
        preferred: Some(held4),
        host_ports: false,
    };
    let other = run(&fake, &spec("lb2", "prefer"), &busy).await;
    assert_ne!(other.addresses.ipv4.map(IpAddr::V4), Some(held4));
    assert!(other.addresses.ipv4.is_some());
}

#[tokio::test]
async fn pinned_host_ports_are_stable_per_name_and_move_on_when_taken() {
    let (fake, _) = fake_with_network("ports").await;
    let mut lb = spec("c1-lb", "ports");
    lb.ports = vec![PortPublish {
        container_port: 6443,
        host_ip: "127.0.0.1".to_string(),
        host_port: None,
    }];
    let pinning = Pinning {
        preferred: None,
        host_ports: true,
    };
    let first_choice = pinned_host_port("c1-lb", 6443, 0);
    assert!(PINNED_PORTS.contains(&first_choice));
    assert_eq!(first_choice, pinned_host_port("c1-lb", 6443, 0), "stable");
    assert_ne!(first_choice, pinned_host_port("c2-lb", 6443, 0));

    // The first choice is taken on the host: the engine refuses the start, the next one is asked.
    let refusal = RuntimeError::from_status(
        "start container c1-lb",
        500,
        format!(
            "driver failed programming external connectivity on endpoint c1-lb: Bind for 127.0.0.1:{first_choice} failed: port is already allocated"
        ),
    );
    fake.fail_next(Op::RunContainer, refusal);
    let ran = run(&fake, &lb, &pinning).await;
    let port = ran.ports[0].host_port.unwrap();
    assert_eq!(port, pinned_host_port("c1-lb", 6443, 1));
    let info = fake.inspect_container("c1-lb").await.unwrap().unwrap();
    assert_eq!(info.host_port(6443), Some(port));
}

#[tokio::test]
async fn a_network_whose_ipv4_subnet_the_engine_chose_gets_ipv4_from_the_engine() {
    let (fake, _) = fake_with_network("chosen").await;
    let refusal = RuntimeError::from_status(
        "start container a",
        400,
        "user specified IP address is supported only when connecting to networks with user configured subnets",
    );
    fake.fail_next(Op::RunContainer, refusal);
    let first = run(&fake, &spec("a", "chosen"), &Pinning::default()).await;
    assert_eq!(first.addresses.ipv4, None, "left to the engine");
    assert!(first.addresses.ipv6.is_some(), "IPv6 is still pinned");
    assert!(addresses_of(&fake, "a", "chosen").ipv4.is_some());
    // Remembered: the next container does not ask again.
    let second = run(&fake, &spec("b", "chosen"), &Pinning::default()).await;
    assert_eq!(second.addresses.ipv4, None);
}

#[tokio::test]
async fn a_network_we_create_names_the_ipv4_subnet_the_engine_chose() {
    let fake = FakeRuntime::new();
    let network = ensure_network(&fake, "named", &Labels::new())
        .await
        .unwrap();
    let creates: Vec<_> = fake
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            crate::docker::fake::Call::CreateNetwork(spec) => Some(spec),
            _ => None,
        })
        .collect();
    assert_eq!(creates.len(), 2, "{creates:?}");
    assert!(!creates[0].subnets.iter().any(IpNetwork::is_ipv4));
    let ipv4 = creates[1].subnets.iter().find(|s| s.is_ipv4()).unwrap();
    assert!(network.subnets.contains(ipv4));
    assert_eq!(fake.networks().len(), 1, "the first one is gone");
}

#[tokio::test]
async fn a_network_removed_after_the_caller_read_it_fails_one_creation_as_the_containers() {
    let (fake, stale) = fake_with_network("gone").await;
    run_from(&fake, &spec("a", "gone"), &stale).await;
    fake.delete_container("a").await.unwrap();
    fake.remove_network("gone").await.unwrap();

    let failed = run_pinned(&fake, &spec("b", "gone"), &Pinning::default(), Some(&stale)).await;
    let Err(RunFailure::Container(e)) = failed else {
        panic!("the container's failure, not the image's: {failed:?}");
    };
    assert!(e.is_not_found(), "{e}");
    // The next pass reads the network, created again, and pins from it.
    let again = ensure_network(&fake, "gone", &Labels::new()).await.unwrap();
    let listings = reads(&fake).1;
    let got = run_from(&fake, &spec("b", "gone"), &again).await;
    assert!(again.subnets.iter().any(|s| s.contains(got)));
    assert_eq!(reads(&fake).1, listings + 1, "the new network is listed");
}
