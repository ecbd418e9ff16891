//! The provider's Docker network: found when it exists, created the way kind creates it otherwise.
//!
//! kind's recipe: bridge driver, IP masquerade, the MTU of the engine's default `bridge` network,
//! IPv6 with a unique-local /64 derived from the network name (`fc00:f853:ccd:e793::/64` for
//! `kind`), another derived subnet when it overlaps an existing one (five attempts), and IPv4 only
//! when the engine has no IPv6. Networks we create carry [`CREATED_BY_LABEL`]; only those are
//! ever deleted, and only when no container uses them.

use std::net::Ipv6Addr;

use ipnetwork::{IpNetwork, Ipv6Network};
use sha1::{Digest, Sha1};

use super::runtime::{ContainerRuntime, RuntimeError};
use super::types::{Engine, Labels, NetworkInfo, NetworkSpec};

/// The network name used when none is configured (the one `kind create cluster` makes).
pub const DEFAULT_NETWORK: &str = "kind";

/// Environment variable the manager reads to override the network name.
pub const NETWORK_ENV: &str = "CAPD_DOCKER_NETWORK";

/// Label put on every network this provider creates.
pub const CREATED_BY_LABEL: &str = "io.x-k8s.capd.created-by";

/// Value of [`CREATED_BY_LABEL`].
pub const CREATED_BY_VALUE: &str = "capd-rs";

/// Driver option turning on IP masquerading.
const MASQUERADE_OPTION: &str = "com.docker.network.bridge.enable_ip_masquerade";

/// Driver option carrying the MTU.
const MTU_OPTION: &str = "com.docker.network.driver.mtu";

/// Number of derived IPv6 subnets tried before giving up on IPv6 (as kind).
const IPV6_ATTEMPTS: u32 = 5;

/// Errors while ensuring or deleting the network.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// Reading the network (or the default bridge) failed.
    #[error("inspect network {name}")]
    Inspect {
        /// Network name.
        name: String,
        /// Engine error.
        #[source]
        source: RuntimeError,
    },
    /// Creating the network failed.
    #[error("create network {name}")]
    Create {
        /// Network name.
        name: String,
        /// Engine error.
        #[source]
        source: RuntimeError,
    },
    /// Removing the network failed.
    #[error("remove network {name}")]
    Remove {
        /// Network name.
        name: String,
        /// Engine error.
        #[source]
        source: RuntimeError,
    },
    /// The network was created but could not be found afterwards.
    #[error("find network {name} after creating it")]
    Vanished {
        /// Network name.
        name: String,
    },
}

impl NetworkError {
    /// A short stable word for metric labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Inspect { .. } => "network_inspect",
            Self::Create { .. } => "network_create",
            Self::Remove { .. } => "network_remove",
            Self::Vanished { .. } => "network_vanished",
        }
    }
}

/// The network name to use: `configured` when it is set and not blank, else [`DEFAULT_NETWORK`].
pub fn network_name(configured: Option<&str>) -> String {
    configured
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_NETWORK)
        .to_string()
}

/// The unique-local IPv6 /64 kind derives from a network name: `fc00::/8` followed by bytes
/// 2..8 of `sha1(name ‖ attempt as little-endian i32)`.
pub fn ula_subnet(name: &str, attempt: u32) -> Ipv6Network {
    let mut hasher = Sha1::new();
    hasher.update(name.as_bytes());
    hasher.update(attempt.to_le_bytes());
    let hash = hasher.finalize();
    let mut octets = [0u8; 16];
    octets[0] = 0xfc;
    octets[2..8].copy_from_slice(&hash[2..8]);
    let addr = Ipv6Addr::from(octets);
    // A /64 prefix is always valid for an IPv6 address.
    Ipv6Network::new(addr, 64).unwrap_or_else(|_| Ipv6Network::from(addr))
}

/// The spec of the network as kind would create it on `engine`.
pub fn desired_network(
    engine: &Engine,
    name: &str,
    mtu: Option<u32>,
    ipv6: Option<Ipv6Network>,
    labels: &Labels,
) -> NetworkSpec {
    let mut options = std::collections::BTreeMap::new();
    if engine.takes_masquerade_option() {
        options.insert(MASQUERADE_OPTION.to_string(), "true".to_string());
    }
    if let Some(mtu) = mtu.filter(|m| *m > 0) {
        options.insert(MTU_OPTION.to_string(), mtu.to_string());
    }
    let mut all_labels = labels.clone();
    all_labels.insert(CREATED_BY_LABEL.to_string(), CREATED_BY_VALUE.to_string());
    NetworkSpec {
        name: name.to_string(),
        driver: "bridge".to_string(),
        options,
        labels: all_labels,
        enable_ipv6: ipv6.is_some(),
        subnets: ipv6.map(IpNetwork::V6).into_iter().collect(),
    }
}

/// Returns the network `name`, creating it like kind does when it is missing.
///
/// `labels` are added to a network we create (with [`CREATED_BY_LABEL`]); an existing network is
/// used as it is. When concurrent callers created the same name twice (engines before API 1.44 do
/// not refuse duplicates), the network with the smallest id is kept and our spare copies removed.
///
/// # Errors
/// [`NetworkError`] when the engine cannot be read or refuses every way of creating the network.
pub async fn ensure_network(
    runtime: &dyn ContainerRuntime,
    name: &str,
    labels: &Labels,
) -> Result<NetworkInfo, NetworkError> {
    let inspect_err = |source| NetworkError::Inspect {
        name: name.to_string(),
        source,
    };
    if let Some(existing) = runtime.inspect_network(name).await.map_err(inspect_err)? {
        return Ok(existing);
    }
    let mtu = default_bridge_mtu(runtime).await?;
    let engine = runtime.engine();
    let create = |ipv6| {
        let spec = desired_network(&engine, name, mtu, ipv6, labels);
        async move { runtime.create_network(&spec).await }
    };

    let mut result = create(Some(ula_subnet(name, 0))).await;
    let mut attempt = 1;
    while attempt < IPV6_ATTEMPTS && result.as_ref().is_err_and(RuntimeError::is_pool_overlap) {
        tracing::info!(
            network = name,
            attempt,
            "IPv6 subnet overlaps another network, trying the next one"
        );
        result = create(Some(ula_subnet(name, attempt))).await;
        attempt += 1;
    }
    if result
        .as_ref()
        .is_err_and(|e| e.is_ipv6_unavailable() || e.is_pool_overlap())
    {
        tracing::info!(network = name, "Creating the network without IPv6");
        result = create(None).await;
    }
    match result {
        Ok(_) => {
            let created = keep_one(runtime, name).await?;
            Ok(name_ipv4_subnet(runtime, created, mtu, labels).await)
        }
        // Someone else created it meanwhile: use theirs.
        Err(e) if e.is_conflict() => keep_one(runtime, name).await,
        Err(source) => Err(NetworkError::Create {
            name: name.to_string(),
            source,
        }),
    }
}

/// Docker refuses a requested IPv4 address on a network whose IPv4 subnet it chose itself
/// ([`super::pinning`]), and kind's recipe leaves the IPv4 subnet to it. A network we have just
/// created, still unused, is therefore created once more naming the subnet Docker chose (which
/// Docker picked clear of its other networks and of the host's routes), so that its containers'
/// IPv4 addresses can be pinned. Any failure keeps a network: the one created first when it is
/// still there, else one created as before.
async fn name_ipv4_subnet(
    runtime: &dyn ContainerRuntime,
    created: NetworkInfo,
    mtu: Option<u32>,
    labels: &Labels,
) -> NetworkInfo {
    let engine = runtime.engine();
    let Some(ipv4) = created.subnets.iter().copied().find(IpNetwork::is_ipv4) else {
        return created;
    };
    if !engine.pins_only_named_subnets() || !created.containers.is_empty() {
        return created;
    }
    let name = created.name.clone();
    let ipv6 = created.subnets.iter().find_map(|s| match s {
        IpNetwork::V6(v6) => Some(*v6),
        IpNetwork::V4(_) => None,
    });
    let mut spec = desired_network(&engine, &name, mtu, ipv6, labels);
    spec.subnets.push(ipv4);
    if let Err(e) = runtime.remove_network(&created.id).await {
        tracing::warn!(network = %name, error = %e, "Could not name the network's IPv4 subnet: its IPv4 addresses are left to the engine");
        return created;
    }
    let again = match runtime.create_network(&spec).await {
        Ok(_) => keep_one(runtime, &name).await,
        Err(e) => {
            tracing::warn!(network = %name, subnet = %ipv4, error = %e, "Could not name the network's IPv4 subnet: its IPv4 addresses are left to the engine");
            let spec = desired_network(&engine, &name, mtu, ipv6, labels);
            match runtime.create_network(&spec).await {
                Ok(_) => keep_one(runtime, &name).await,
                Err(e) if e.is_conflict() => keep_one(runtime, &name).await,
                Err(source) => Err(NetworkError::Create {
                    name: name.clone(),
                    source,
                }),
            }
        }
    };
    again.unwrap_or_else(|e| {
        tracing::warn!(network = %name, error = %e, "The network vanished while its IPv4 subnet was named");
        created
    })
}

/// The MTU of the engine's default `bridge` network, when it sets one.
///
/// # Errors
/// [`NetworkError::Inspect`] when the engine cannot be read.
pub async fn default_bridge_mtu(
    runtime: &dyn ContainerRuntime,
) -> Result<Option<u32>, NetworkError> {
    let bridge =
        runtime
            .inspect_network("bridge")
            .await
            .map_err(|source| NetworkError::Inspect {
                name: "bridge".to_string(),
                source,
            })?;
    Ok(bridge.and_then(|b| b.options.get(MTU_OPTION).and_then(|m| m.parse().ok())))
}

/// Removes our spare duplicates of `name` and returns the one kept.
async fn keep_one(runtime: &dyn ContainerRuntime, name: &str) -> Result<NetworkInfo, NetworkError> {
    let inspect_err = |source| NetworkError::Inspect {
        name: name.to_string(),
        source,
    };
    let mut same: Vec<NetworkInfo> = runtime
        .list_networks(&Labels::new())
        .await
        .map_err(inspect_err)?
        .into_iter()
        .filter(|n| n.name == name)
        .collect();
    same.sort_by(|a, b| a.id.cmp(&b.id));
    let Some(kept) = same.first().cloned() else {
        return Err(NetworkError::Vanished {
            name: name.to_string(),
        });
    };
    for spare in same.iter().skip(1).filter(|n| is_ours(n)) {
        tracing::info!(network = name, id = %spare.id, "Removing a duplicate network");
        if let Err(e) = runtime.remove_network(&spare.id).await {
            tracing::warn!(network = name, id = %spare.id, error = %e, "Removing a duplicate network failed");
        }
    }
    runtime
        .inspect_network(&kept.id)
        .await
        .map_err(inspect_err)?
        .ok_or_else(|| NetworkError::Vanished {
            name: name.to_string(),
        })
}

/// Whether this provider created the network.
pub fn is_ours(network: &NetworkInfo) -> bool {
    network.labels.get(CREATED_BY_LABEL).map(String::as_str) == Some(CREATED_BY_VALUE)
}

/// What [`delete_network`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkDeletion {
    /// The network was removed.
    Removed,
    /// There was no such network.
    Absent,
    /// The network was not created by this provider and was left alone.
    KeptForeign,
    /// Containers still use the network (their ids), so it was left alone.
    KeptInUse(Vec<String>),
}

/// Removes the network `name` if, and only if, this provider created it and no container uses it.
///
/// # Errors
/// [`NetworkError`] when the engine cannot be read or refuses the removal.
pub async fn delete_network(
    runtime: &dyn ContainerRuntime,
    name: &str,
) -> Result<NetworkDeletion, NetworkError> {
    let Some(network) =
        runtime
            .inspect_network(name)
            .await
            .map_err(|source| NetworkError::Inspect {
                name: name.to_string(),
                source,
            })?
    else {
        return Ok(NetworkDeletion::Absent);
    };
    if !is_ours(&network) {
        return Ok(NetworkDeletion::KeptForeign);
    }
    if !network.containers.is_empty() {
        return Ok(NetworkDeletion::KeptInUse(network.containers));
    }
    runtime
        .remove_network(&network.id)
        .await
        .map_err(|source| NetworkError::Remove {
            name: name.to_string(),
            source,
        })?;
    Ok(NetworkDeletion::Removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::{Call, FakeRuntime, Op};
    use crate::docker::types::ContainerSpec;

    fn bridge(mtu: &str) -> NetworkInfo {
        NetworkInfo {
            id: "bridge-id".into(),
            name: "bridge".into(),
            driver: "bridge".into(),
            options: [(MTU_OPTION.to_string(), mtu.to_string())].into(),
            subnets: vec!["172.17.0.0/16".parse().unwrap()],
            ..Default::default()
        }
    }

    fn created_specs(fake: &FakeRuntime) -> Vec<NetworkSpec> {
        fake.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::CreateNetwork(spec) => Some(spec),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn ula_subnet_matches_kind() {
        assert_eq!(ula_subnet("kind", 0).to_string(), "fc00:f853:ccd:e793::/64");
        assert_ne!(ula_subnet("kind", 1), ula_subnet("kind", 0));
        assert_ne!(ula_subnet("other", 0), ula_subnet("kind", 0));
    }

    #[test]
    fn network_name_defaults_to_kind() {
        assert_eq!(network_name(None), "kind");
        assert_eq!(network_name(Some("  ")), "kind");
        assert_eq!(network_name(Some("k3d")), "k3d");
    }

    #[tokio::test]
    async fn creates_the_network_like_kind_and_labels_it() {
        let fake = FakeRuntime::new();
        fake.add_network(bridge("1400"));
        let labels = Labels::from([("test".to_string(), "a".to_string())]);
        let net = ensure_network(&fake, "kind", &labels).await.unwrap();
        assert_eq!(net.name, "kind");
        assert!(net.enable_ipv6);
        assert!(
            net.subnets
                .contains(&"fc00:f853:ccd:e793::/64".parse().unwrap())
        );
        assert!(net.subnets.iter().any(IpNetwork::is_ipv4));
        assert_eq!(net.options[MASQUERADE_OPTION], "true");
        assert_eq!(net.options[MTU_OPTION], "1400");
        assert_eq!(net.labels[CREATED_BY_LABEL], CREATED_BY_VALUE);
        assert_eq!(net.labels["test"], "a");
    }

    #[tokio::test]
    async fn podman_masquerades_without_being_asked_so_the_option_is_not_sent() {
        let fake = FakeRuntime::new();
        fake.set_engine(Engine::podman("4.3.1"));
        fake.add_network(bridge("1400"));
        let net = ensure_network(&fake, "kind", &Labels::new()).await.unwrap();
        assert!(!net.options.contains_key(MASQUERADE_OPTION), "{net:?}");
        assert_eq!(net.options[MTU_OPTION], "1400");
    }

    #[tokio::test]
    async fn existing_network_is_used_as_is() {
        let fake = FakeRuntime::new();
        ensure_network(&fake, "kind", &Labels::new()).await.unwrap();
        let again = ensure_network(&fake, "kind", &Labels::new()).await.unwrap();
        assert_eq!(again.name, "kind");
        // The first creation and the one that names its IPv4 subnet; none for the second call.
        assert_eq!(created_specs(&fake).len(), 2);
        assert_eq!(fake.networks().len(), 1);
    }

    #[tokio::test]
    async fn overlapping_ipv6_subnet_moves_to_the_next_attempt() {
        let fake = FakeRuntime::new();
        fake.add_network(NetworkInfo {
            id: "x".into(),
            name: "squatter".into(),
            subnets: vec![IpNetwork::V6(ula_subnet("kind", 0))],
            ..Default::default()
        });
        let net = ensure_network(&fake, "kind", &Labels::new()).await.unwrap();
        assert!(net.subnets.contains(&IpNetwork::V6(ula_subnet("kind", 1))));
        // The overlap, the next subnet, and the creation that names the IPv4 subnet.
        let specs = created_specs(&fake);
        assert_eq!(specs.len(), 3);
        assert!(
            specs[2]
                .subnets
                .contains(&IpNetwork::V6(ula_subnet("kind", 1)))
        );
    }

    #[tokio::test]
    async fn engine_without_ipv6_gets_an_ipv4_network() {
        let fake = FakeRuntime::new();
        fake.disable_ipv6();
        let net = ensure_network(&fake, "kind", &Labels::new()).await.unwrap();
        assert!(!net.enable_ipv6);
        assert!(net.subnets.iter().all(IpNetwork::is_ipv4));
        let specs = created_specs(&fake);
        assert_eq!(specs.len(), 3);
        assert!(specs[1].subnets.is_empty());
        // Then named, so that its containers' IPv4 addresses can be pinned.
        assert_eq!(specs[2].subnets, net.subnets);
    }

    #[tokio::test]
    async fn other_create_failures_are_reported() {
        let fake = FakeRuntime::new();
        fake.fail_next(
            Op::CreateNetwork,
            RuntimeError::from_status("create network kind", 500, "boom"),
        );
        let err = ensure_network(&fake, "kind", &Labels::new())
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "create network kind");
        assert_eq!(err.category(), "network_create");
    }

    #[tokio::test]
    async fn spare_duplicates_we_created_are_removed() {
        let fake = FakeRuntime::new();
        fake.allow_duplicate_networks();
        let spec = desired_network(&fake.engine(), "kind", None, None, &Labels::new());
        // Two controllers raced: both created "kind".
        let first = fake.create_network(&spec).await.unwrap();
        let second = fake.create_network(&spec).await.unwrap();
        let kept = keep_one(&fake, "kind").await.unwrap();
        assert_eq!(kept.id, first.clone().min(second.clone()));
        let ids: Vec<String> = fake.networks().into_iter().map(|n| n.id).collect();
        assert_eq!(ids, vec![kept.id]);
    }

    #[tokio::test]
    async fn delete_only_removes_our_unused_networks() {
        let fake = FakeRuntime::new();
        fake.add_image("img");
        fake.add_network(NetworkInfo {
            id: "foreign-id".into(),
            name: "foreign".into(),
            ..Default::default()
        });
        assert_eq!(
            delete_network(&fake, "foreign").await.unwrap(),
            NetworkDeletion::KeptForeign
        );
        assert_eq!(
            delete_network(&fake, "absent").await.unwrap(),
            NetworkDeletion::Absent
        );

        ensure_network(&fake, "ours", &Labels::new()).await.unwrap();
        let spec = ContainerSpec {
            name: "c".into(),
            image: "img".into(),
            network: "ours".into(),
            ..Default::default()
        };
        fake.run_container(&spec).await.unwrap();
        assert!(
            matches!(delete_network(&fake, "ours").await.unwrap(), NetworkDeletion::KeptInUse(ids) if ids.len() == 1)
        );
        fake.delete_container("c").await.unwrap();
        assert_eq!(
            delete_network(&fake, "ours").await.unwrap(),
            NetworkDeletion::Removed
        );
        assert!(fake.networks().iter().all(|n| n.name != "ours"));
        assert!(fake.networks().iter().any(|n| n.name == "foreign"));
    }
}
