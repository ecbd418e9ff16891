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
//! Choosing needs two reads of the engine: the network (its subnets, and the addresses of the
//! containers running on it) and the labelled listing. A caller that has just read the network
//! passes it along; the listing is kept per network for [`VIEW_TTL`] and serves every creation
//! on that network in the meantime (one read per batch), with the addresses this process pinned
//! since added to it. The listing is dropped, and the network read again, as soon as the engine
//! refuses a creation for any reason, so that what it refused is never chosen from a stale view.
//! Concurrent creations in this process never meet: each reserves its addresses in the book until
//! its container exists. A container of another process that took an address since is refused by
//! the engine while it runs; then the network is read again and another address chosen.
//!
//! What cannot be pinned is left to the engine, as before: Docker refuses a requested IPv4
//! address on a network whose IPv4 subnet it chose itself (kind's `kind` network is one; the
//! networks the provider creates name theirs, see [`super::network`]), so such a network is
//! remembered and gets its IPv4 address from the engine. Containers made by CAPD or an earlier
//! build have no pinned address and are left as they are.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

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

/// How long the labelled listing of a network's pinned addresses serves later creations on that
/// network (a batch of machines), and how long the addresses this process pinned are kept
/// besides it.
pub const VIEW_TTL: Duration = Duration::from_secs(10);

/// What to pin on a container besides its addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pinning {
    /// The address to ask for first (a recreated load balancer: its cluster's endpoint host).
    pub preferred: Option<IpAddr>,
    /// Give every published port a host port chosen from [`PINNED_PORTS`] (the load balancer,
    /// whose host port kubeconfigs use).
    pub host_ports: bool,
}

/// What this process knows of the pinned addresses of each network, by [`network_key`]:
/// addresses picked for containers that are being created (not yet visible in a listing), the
/// addresses it pinned on the containers it created lately, the last labelled listing, and the
/// networks where the engine refused a requested IPv4 address. One book per process: every
/// controller creates through [`run_pinned`].
struct Book {
    reserved: BTreeSet<(String, IpAddr)>,
    pinned_here: BTreeMap<(String, IpAddr), Instant>,
    listings: BTreeMap<String, Listing>,
    /// One reader of a network's listing at a time: creations that find none wait for it.
    readers: BTreeMap<String, Arc<tokio::sync::Mutex<()>>>,
    ipv4_refused: BTreeSet<String>,
}

/// The addresses pinned on a network's containers (stopped ones included), as listed at `read`.
struct Listing {
    addresses: BTreeSet<IpAddr>,
    read: Instant,
}

static BOOK: Mutex<Book> = Mutex::new(Book {
    reserved: BTreeSet::new(),
    pinned_here: BTreeMap::new(),
    listings: BTreeMap::new(),
    readers: BTreeMap::new(),
    ipv4_refused: BTreeSet::new(),
});

impl Book {
    /// The listing of network `key` while it is younger than [`VIEW_TTL`].
    fn fresh_listing(&self, key: &str) -> Option<BTreeSet<IpAddr>> {
        self.listings
            .get(key)
            .filter(|l| l.read.elapsed() < VIEW_TTL)
            .map(|l| l.addresses.clone())
    }

    /// Keeps network `key`'s listing read at `read`, and forgets the stale ones (and their
    /// readers, when nobody waits on them). The addresses this process pinned on `key` before
    /// `read` are in it when their containers still exist, and are forgotten.
    fn store_listing(&mut self, key: String, addresses: BTreeSet<IpAddr>, read: Instant) {
        self.listings.retain(|_, l| l.read.elapsed() < VIEW_TTL);
        self.pinned_here
            .retain(|(n, _), at| at.elapsed() < VIEW_TTL && (*n != key || *at >= read));
        self.listings.insert(key, Listing { addresses, read });
        let listings = &self.listings;
        self.readers
            .retain(|k, r| listings.contains_key(k) || Arc::strong_count(r) > 1);
    }

    /// Forgets network `key`'s listing, so that the next creation reads it again.
    fn drop_listing(&mut self, key: &str) {
        self.listings.remove(key);
    }
}

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

impl Reservation {
    /// The container that asked for the addresses exists: they stay taken in the book for
    /// [`VIEW_TTL`], longer than any listing read before the container existed serves.
    fn pinned(&self) {
        let mut book = book();
        let now = Instant::now();
        book.pinned_here.retain(|_, at| at.elapsed() < VIEW_TTL);
        for address in &self.addresses {
            book.pinned_here
                .insert((self.network.clone(), *address), now);
        }
    }
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

/// The addresses pinned on `network`'s containers, stopped ones included: the book's listing
/// while it is fresh, else a new one (one creation reads it while the others wait for it).
/// `afresh` reads a new one in any case: a container that wants a given address (a recreated
/// load balancer) must not be refused it for a container removed since the last listing.
async fn pinned_on(
    runtime: &dyn ContainerRuntime,
    network: &NetworkInfo,
    afresh: bool,
) -> Result<BTreeSet<IpAddr>, RuntimeError> {
    let key = network_key(network);
    let cached = || book().fresh_listing(&key).filter(|_| !afresh);
    if let Some(addresses) = cached() {
        return Ok(addresses);
    }
    let reader = book().readers.entry(key.clone()).or_default().clone();
    let _reading = reader.lock().await;
    if let Some(addresses) = cached() {
        return Ok(addresses);
    }
    let read = Instant::now();
    let selector = Labels::from([(NETWORK_LABEL.to_string(), network.name.clone())]);
    let listed = runtime.list_containers(&selector).await?;
    let mut addresses = BTreeSet::new();
    for container in &listed {
        let pinned = pinned_addresses(&container.labels);
        addresses.extend(pinned.ipv4.map(IpAddr::V4));
        addresses.extend(pinned.ipv6.map(IpAddr::V6));
    }
    book().store_listing(key, addresses.clone(), read);
    Ok(addresses)
}

/// Picks the addresses of one container on `network` and reserves them. Taken are: the gateways,
/// the addresses of the running containers, those `pinned` on any container of the network, and
/// those the book holds for creations under way or finished lately.
fn pick(network: &NetworkInfo, pinned: BTreeSet<IpAddr>, preferred: Option<IpAddr>) -> Reservation {
    let key = network_key(network);
    let mut book = book();
    let mut taken = pinned;
    taken.extend(network.gateways.iter().copied());
    taken.extend(network.attached_addresses.iter().copied());
    taken.extend(
        book.reserved
            .iter()
            .filter(|(n, _)| *n == key)
            .map(|(_, a)| *a),
    );
    taken.extend(
        book.pinned_here
            .iter()
            .filter(|((n, _), at)| *n == key && at.elapsed() < VIEW_TTL)
            .map(|((_, a), _)| *a),
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
/// host ports when `pinning` asks, pinned (see the module). `network` is the network of `spec`
/// as the caller has just read it, if it has (it is read otherwise). Returns the id and the spec
/// it ran.
///
/// # Errors
/// [`RunFailure`] as [`run_from_image`]; a network that cannot be read is a container failure.
pub async fn run_pinned(
    runtime: &dyn ContainerRuntime,
    spec: &ContainerSpec,
    pinning: &Pinning,
    network: Option<&NetworkInfo>,
) -> Result<(String, ContainerSpec), RunFailure> {
    let mut known = network.filter(|n| n.name == spec.network).cloned();
    let mut attempt = 0;
    loop {
        let network = match known.take() {
            Some(network) => network,
            None => match runtime
                .inspect_network(&spec.network)
                .await
                .map_err(RunFailure::Container)?
            {
                Some(network) => network,
                None => {
                    // The engine says what is wrong.
                    let id = run_from_image(runtime, spec).await?;
                    return Ok((id, spec.clone()));
                }
            },
        };
        let pinned = pinned_on(runtime, &network, pinning.preferred.is_some())
            .await
            .map_err(RunFailure::Container)?;
        let reservation = pick(&network, pinned, pinning.preferred);
        let pinned = pinned_spec(spec, &reservation, pinning, attempt);
        let failure = match run_from_image(runtime, &pinned).await {
            Ok(id) => {
                reservation.pinned();
                return Ok((id, pinned));
            }
            Err(failure) => failure,
        };
        // Whatever the engine refused, the next attempt (here or in a later reconcile) reads
        // the network and its listing again.
        book().drop_listing(&network_key(&network));
        match failure {
            RunFailure::Container(e)
                if refuses_requested_address(&e) && pinned.addresses.ipv4.is_some() =>
            {
                tracing::info!(
                    network = %network.name,
                    "The engine chose this network's IPv4 subnet and refuses requested IPv4 addresses: its containers get theirs from the engine"
                );
                book().ipv4_refused.insert(network_key(&network));
            }
            RunFailure::Container(e)
                if (e.is_address_taken() || e.is_host_port_taken()) && attempt + 1 < ATTEMPTS =>
            {
                tracing::info!(container = %spec.name, error = %e, "A requested address or host port is taken; choosing again");
                attempt += 1;
            }
            failure => return Err(failure),
        }
    }
}

#[cfg(test)]
mod tests;
