//! Pinned addresses and host ports: what lets a cluster survive a restart of the engine or the
//! host in any order.
//!
//! An engine allocates a container's address again each time it starts (Docker keeps the old one
//! only while nobody took it; Podman hands out the next free one), and a published port without a
//! host port gets a new random one at each start. After a reboot, nodes started in another order
//! than they were created swap addresses, which breaks etcd's peer URLs, the API servers'
//! certificates and the load balancer's backends, and the load balancer's host port moves, which
//! breaks every kubeconfig that uses it.
//!
//! So every container the provider creates asks for its addresses: [`run_pinned`] picks, for each
//! family of the network, the highest free host address of the subnet (engines hand out dynamic
//! addresses from the bottom, so the two rarely meet), and for each published port of a load
//! balancer a host port derived from the container's name, below the kernel's ephemeral range
//! (`20000..30000`, where no engine or kernel picks a random port). The choice is in the
//! container's configuration, which the engine applies at every start, and on its labels
//! ([`NETWORK_LABEL`], [`IPV4_LABEL`], [`IPV6_LABEL`]), which is how later choices avoid the
//! addresses of stopped containers. A recreated load balancer asks for the address its cluster's
//! endpoint names and gets the same host port again, when free.
//!
//! What cannot be pinned is left to the engine, as before: Docker refuses a requested IPv4
//! address on a network whose IPv4 subnet it chose itself (kind's `kind` network is one; the
//! networks the provider creates name theirs, see [`super::network`]), so such a network is
//! remembered and gets its IPv4 address from the engine. Containers made by CAPD or an earlier
//! build have no pinned address and are left as they are.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ipnetwork::IpNetwork;

use super::runtime::{ContainerRuntime, RunFailure, RuntimeError, run_from_image};
use super::types::{ContainerSpec, EndpointAddresses, Labels, NetworkInfo};

/// Label naming the network a container's pinned addresses belong to.
pub const NETWORK_LABEL: &str = "io.x-k8s.capd.network";
/// Label carrying a container's pinned IPv4 address.
pub const IPV4_LABEL: &str = "io.x-k8s.capd.ipv4";
/// Label carrying a container's pinned IPv6 address.
pub const IPV6_LABEL: &str = "io.x-k8s.capd.ipv6";

/// The host ports pinned ports are chosen from: below the ephemeral range (32768 and up on
/// Linux), where neither the engine's random host ports nor the kernel's outgoing ports land.
pub const PINNED_PORTS: std::ops::Range<u16> = 20000..30000;

/// Attempts at a container whose requested address or host port turned out to be taken.
const ATTEMPTS: u32 = 5;

/// What to pin on a container besides its addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pinning {
    /// The address to ask for first (a recreated load balancer: its cluster's endpoint host).
    pub preferred: Option<IpAddr>,
    /// Give every published port a host port chosen from [`PINNED_PORTS`] (the load balancer,
    /// whose host port kubeconfigs use).
    pub host_ports: bool,
}

/// Addresses picked for containers that are being created (not yet visible in a listing), and
/// networks where the engine refused a requested IPv4 address, by [`network_key`]. One book per
/// process: every controller creates through [`run_pinned`].
#[derive(Default)]
struct Book {
    reserved: BTreeSet<(String, IpAddr)>,
    ipv4_refused: BTreeSet<String>,
}

static BOOK: Mutex<Book> = Mutex::new(Book {
    reserved: BTreeSet::new(),
    ipv4_refused: BTreeSet::new(),
});

/// A network as the book knows it: its name and id (a network created again is another one).
fn network_key(network: &NetworkInfo) -> String {
    format!("{}/{}", network.name, network.id)
}

fn book() -> MutexGuard<'static, Book> {
    BOOK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Addresses reserved in the book until the container that asked for them exists.
struct Reservation {
    network: String,
    addresses: Vec<IpAddr>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut book = book();
        for address in &self.addresses {
            book.reserved.remove(&(self.network.clone(), *address));
        }
    }
}

/// The pinned addresses a container's labels record.
pub fn pinned_addresses(labels: &Labels) -> EndpointAddresses {
    EndpointAddresses {
        ipv4: labels.get(IPV4_LABEL).and_then(|a| a.parse().ok()),
        ipv6: labels.get(IPV6_LABEL).and_then(|a| a.parse().ok()),
    }
}

/// The host port a pinned port of `container` asks for at `attempt`: FNV-1a of the name and the
/// attempt, so a recreated container asks for the same port first.
pub fn pinned_host_port(container: &str, container_port: u16, attempt: u32) -> u16 {
    let mut hash: u32 = 0x811c_9dc5;
    let salt = format!("{container}/{container_port}/{attempt}");
    for byte in salt.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let span = u32::from(PINNED_PORTS.end - PINNED_PORTS.start);
    // The remainder is below `span`, which fits in u16.
    PINNED_PORTS.start + u16::try_from(hash % span).unwrap_or(0)
}

/// The highest host address of `subnet` that is not in `taken`; `None` when none is left (or
/// the subnet is too small to have one besides its gateway).
fn highest_free(subnet: &IpNetwork, taken: &BTreeSet<IpAddr>) -> Option<IpAddr> {
    /// How far below the top to look: far more than a cluster network ever holds.
    const SCAN: u32 = 1 << 16;
    match subnet {
        IpNetwork::V4(net) => {
            let base = u32::from(net.network());
            let top = u32::from(net.broadcast());
            (1..=SCAN)
                .map_while(|below| top.checked_sub(below).filter(|a| *a > base + 1))
                .map(|a| IpAddr::V4(Ipv4Addr::from(a)))
                .find(|a| !taken.contains(a))
        }
        IpNetwork::V6(net) => {
            let base = u128::from(net.network());
            let size = 128 - u32::from(net.prefix());
            let top = base
                | if size >= 128 {
                    u128::MAX
                } else {
                    (1u128 << size) - 1
                };
            (1..=u128::from(SCAN))
                .map_while(|below| top.checked_sub(below).filter(|a| *a > base + 1))
                .map(|a| IpAddr::V6(Ipv6Addr::from(a)))
                .find(|a| !taken.contains(a))
        }
    }
}

/// Addresses on `network` a new container must not get: the gateways, the attached (running)
/// containers', and those pinned on any container of the network, stopped ones included.
async fn taken_addresses(
    runtime: &dyn ContainerRuntime,
    network: &NetworkInfo,
) -> Result<BTreeSet<IpAddr>, RuntimeError> {
    let selector = Labels::from([(NETWORK_LABEL.to_string(), network.name.clone())]);
    let pinned = runtime.list_containers(&selector).await?;
    let mut taken: BTreeSet<IpAddr> = network.gateways.iter().copied().collect();
    taken.extend(network.attached_addresses.iter().copied());
    for container in &pinned {
        let addresses = pinned_addresses(&container.labels);
        taken.extend(addresses.ipv4.map(IpAddr::V4));
        taken.extend(addresses.ipv6.map(IpAddr::V6));
    }
    Ok(taken)
}

/// Picks the addresses of one container on `network` and reserves them.
fn pick(network: &NetworkInfo, taken: &BTreeSet<IpAddr>, preferred: Option<IpAddr>) -> Reservation {
    let key = network_key(network);
    let mut book = book();
    let mut taken = taken.clone();
    taken.extend(
        book.reserved
            .iter()
            .filter(|(n, _)| *n == key)
            .map(|(_, a)| *a),
    );
    let ipv4_refused = book.ipv4_refused.contains(&key);
    let mut addresses = Vec::new();
    for subnet in &network.subnets {
        if subnet.is_ipv4() && ipv4_refused {
            continue;
        }
        let same_family = |a: &IpAddr| a.is_ipv4() == subnet.is_ipv4();
        if addresses.iter().any(same_family) {
            continue;
        }
        let chosen = preferred
            .filter(|a| subnet.contains(*a) && !taken.contains(a))
            .or_else(|| highest_free(subnet, &taken));
        addresses.extend(chosen);
    }
    for address in &addresses {
        book.reserved.insert((key.clone(), *address));
    }
    Reservation {
        network: key,
        addresses,
    }
}

/// `spec` with the reserved addresses and, when asked, pinned host ports.
fn pinned_spec(
    spec: &ContainerSpec,
    reservation: &Reservation,
    pinning: &Pinning,
    attempt: u32,
) -> ContainerSpec {
    let mut pinned = spec.clone();
    for address in &reservation.addresses {
        match address {
            IpAddr::V4(a) => {
                pinned.addresses.ipv4 = Some(*a);
                pinned.labels.insert(IPV4_LABEL.to_string(), a.to_string());
            }
            IpAddr::V6(a) => {
                pinned.addresses.ipv6 = Some(*a);
                pinned.labels.insert(IPV6_LABEL.to_string(), a.to_string());
            }
        }
    }
    if !reservation.addresses.is_empty() {
        pinned
            .labels
            .insert(NETWORK_LABEL.to_string(), spec.network.clone());
    }
    if pinning.host_ports {
        for publish in pinned.ports.iter_mut().filter(|p| p.host_port.is_none()) {
            publish.host_port = Some(pinned_host_port(
                &spec.name,
                publish.container_port,
                attempt,
            ));
        }
    }
    pinned
}

/// Whether the engine refused a requested IPv4 address because the network's IPv4 subnet is
/// the engine's own choice (Docker).
fn refuses_requested_address(error: &RuntimeError) -> bool {
    error.engine_message().is_some_and(|m| {
        m.contains("user specified IP address is supported only when connecting to networks with user configured subnets")
    })
}

/// Creates and starts the container of `spec` ([`run_from_image`]) with its addresses, and its
/// host ports when `pinning` asks, pinned (see the module). Returns the id and the spec it ran.
///
/// # Errors
/// [`RunFailure`] as [`run_from_image`]; a network that cannot be read is a container failure.
pub async fn run_pinned(
    runtime: &dyn ContainerRuntime,
    spec: &ContainerSpec,
    pinning: &Pinning,
) -> Result<(String, ContainerSpec), RunFailure> {
    let Some(network) = runtime
        .inspect_network(&spec.network)
        .await
        .map_err(RunFailure::Container)?
    else {
        // The engine says what is wrong.
        let id = run_from_image(runtime, spec).await?;
        return Ok((id, spec.clone()));
    };
    let mut attempt = 0;
    loop {
        let taken = taken_addresses(runtime, &network)
            .await
            .map_err(RunFailure::Container)?;
        let reservation = pick(&network, &taken, pinning.preferred);
        let pinned = pinned_spec(spec, &reservation, pinning, attempt);
        match run_from_image(runtime, &pinned).await {
            Ok(id) => return Ok((id, pinned)),
            Err(RunFailure::Container(e))
                if refuses_requested_address(&e) && pinned.addresses.ipv4.is_some() =>
            {
                tracing::info!(
                    network = %network.name,
                    "The engine chose this network's IPv4 subnet and refuses requested IPv4 addresses: its containers get theirs from the engine"
                );
                book().ipv4_refused.insert(network_key(&network));
            }
            Err(RunFailure::Container(e))
                if (e.is_address_taken() || e.is_host_port_taken()) && attempt + 1 < ATTEMPTS =>
            {
                tracing::info!(container = %spec.name, error = %e, "A requested address or host port is taken; choosing again");
                attempt += 1;
            }
            Err(failure) => return Err(failure),
        }
    }
}

#[cfg(test)]
mod tests;
