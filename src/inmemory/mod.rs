//! Fake workload clusters for the `inMemory` backend of DevCluster and DevMachine: per cluster an
//! in-memory object store and, once its first control plane's API server "starts", a TLS
//! listener serving it as a Kubernetes API server (enough of one for Cluster API core, KCP and
//! CABPK: discovery, get, list, watch, create, update, patch, delete; JSON only). Lists and
//! watches follow kube-apiserver's rules, streaming lists included (the `watchlist` crate, shared
//! with the test API server): Cluster API core 1.13's informers sync on the initial-events-end
//! bookmark.
//!
//! [`Clusters`] is the registry the controllers share: it hands out listener ports from a range
//! in order (CAPD: 20000–24000), keeps the stores, and starts and stops the listeners.
//!
//! The `portforward` subresource of etcd pods ([`portforward`], SPDY/3.1 as client-go speaks
//! it) tunnels to the cluster's fake etcd ([`etcd`]), in process: no port of its own.

pub mod etcd;
pub mod objects;
pub mod patch;
pub mod portforward;
pub mod resources;
pub mod selectors;
pub mod server;
pub mod spdy;
pub mod store;
pub mod tls;

#[cfg(test)]
mod portforward_tests;
#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use self::store::{Store, StoreError};

/// The listener ports CAPD hands out, in order.
pub const PORTS: RangeInclusive<u16> = 20000..=24000;

/// Namespaces every fake cluster starts with.
pub const INITIAL_NAMESPACES: [&str; 3] = ["default", "kube-public", "kube-system"];

/// Why a fake cluster could not be made or served.
#[derive(Debug, thiserror::Error)]
pub enum InMemoryError {
    /// Every port of the range is taken.
    #[error("no free listener port in {start}-{end}")]
    NoFreePort {
        /// First port of the range.
        start: u16,
        /// Last port of the range.
        end: u16,
    },
    /// The serving certificate could not be made from the cluster's CA.
    #[error("make the API server certificate: {0}")]
    Certificate(String),
    /// rustls refused the configuration.
    #[error("configure TLS for the API server")]
    Tls(#[source] rustls::Error),
    /// The port could not be bound.
    #[error("listen on port {port}")]
    Listen {
        /// The port.
        port: u16,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

impl InMemoryError {
    /// Category for metric labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NoFreePort { .. } => "in_memory_no_free_port",
            Self::Certificate(_) | Self::Tls(_) => "in_memory_certificate",
            Self::Listen { .. } => "in_memory_listen",
        }
    }
}

/// One fake workload cluster.
#[derive(Debug)]
pub struct WorkloadCluster {
    /// Its listener port.
    pub port: u16,
    /// Its objects.
    pub store: Arc<Store>,
    /// Its etcd's CA and serving certificates.
    pub etcd: Arc<etcd::EtcdIdentity>,
    listener: Mutex<Option<Listener>>,
}

/// A running API server: its task, and the token that closes it (and its open watches).
#[derive(Debug)]
struct Listener {
    task: JoinHandle<()>,
    closed: CancellationToken,
}

impl WorkloadCluster {
    fn new(port: u16, host: &str) -> Self {
        let store = Store::new();
        let namespaces = resources::find("", "v1", "namespaces");
        for name in INITIAL_NAMESPACES {
            if let Some(resource) = namespaces {
                // A fresh store has no namespace yet: creation cannot collide.
                let _ = store.create(
                    resource,
                    "",
                    json!({"metadata": {"name": name}, "status": {"phase": "Active"}}),
                );
            }
        }
        Self {
            port,
            store: Arc::new(store),
            etcd: Arc::new(etcd::EtcdIdentity::new(host.to_string())),
            listener: Mutex::new(None),
        }
    }

    fn listener(&self) -> MutexGuard<'_, Option<Listener>> {
        self.listener.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether its API server listens.
    pub fn listening(&self) -> bool {
        self.listener()
            .as_ref()
            .is_some_and(|l| !l.task.is_finished())
    }

    /// Closes the API server: no new connection is accepted, open watches end, and the
    /// connections close once their requests are answered.
    fn stop(&self) {
        if let Some(listener) = self.listener().take() {
            listener.closed.cancel();
        }
    }
}

impl Drop for WorkloadCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether this process can listen on `port` on every interface now (nothing else holds it).
fn bindable(port: u16) -> bool {
    std::net::TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// Tests' port range: `count` neighbouring ports nothing listens on now (tests hand out ports
/// in order without depending on what else this machine runs).
#[cfg(test)]
pub fn free_ports(count: u16) -> RangeInclusive<u16> {
    (0..50)
        .find_map(|_| {
            let start = 30_000 + fastrand::u16(..20_000);
            (start..start + count)
                .all(bindable)
                .then(|| start..=start + count - 1)
        })
        .expect("neighbouring free ports")
}

#[derive(Debug)]
struct Registry {
    clusters: HashMap<String, Arc<WorkloadCluster>>,
    taken: BTreeSet<u16>,
}

/// The fake clusters of this manager, keyed by `<namespace>/<cluster name>`.
#[derive(Debug)]
pub struct Clusters {
    /// The address the listeners are reached at (the manager's `POD_IP`).
    pub host: String,
    ports: RangeInclusive<u16>,
    registry: Mutex<Registry>,
}

/// The manager's address as the fake clusters advertise it: `POD_IP`, else `127.0.0.1`.
pub fn manager_host() -> String {
    std::env::var("POD_IP")
        .ok()
        .filter(|ip| !ip.trim().is_empty())
        .unwrap_or_else(|| "127.0.0.1".to_string())
}

impl Clusters {
    /// A registry advertising `host` and handing out `ports`.
    pub fn new(host: String, ports: RangeInclusive<u16>) -> Self {
        Self {
            host,
            ports,
            registry: Mutex::new(Registry {
                clusters: HashMap::new(),
                taken: BTreeSet::new(),
            }),
        }
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cluster `key`, made (with its port reserved at once) when it does not exist:
    /// `port` when given, free and in range (a cluster whose endpoint was set before a restart
    /// keeps it), else the first port of the range that no other cluster has and no other
    /// process listens on (CAPD hands the next one out blind, and the listener then fails for
    /// good when something else holds it).
    ///
    /// # Errors
    /// [`InMemoryError::NoFreePort`].
    pub fn ensure(
        &self,
        key: &str,
        port: Option<u16>,
    ) -> Result<Arc<WorkloadCluster>, InMemoryError> {
        let mut registry = self.registry();
        if let Some(cluster) = registry.clusters.get(key) {
            return Ok(cluster.clone());
        }
        let wanted = port.filter(|p| self.ports.contains(p) && !registry.taken.contains(p));
        let port = match wanted {
            Some(port) => port,
            None => self
                .ports
                .clone()
                .find(|p| !registry.taken.contains(p) && bindable(*p))
                .ok_or(InMemoryError::NoFreePort {
                    start: *self.ports.start(),
                    end: *self.ports.end(),
                })?,
        };
        registry.taken.insert(port);
        let cluster = Arc::new(WorkloadCluster::new(port, &self.host));
        registry.clusters.insert(key.to_string(), cluster.clone());
        Ok(cluster)
    }

    /// The cluster `key`, if it exists.
    pub fn get(&self, key: &str) -> Option<Arc<WorkloadCluster>> {
        self.registry().clusters.get(key).cloned()
    }

    /// Drops the cluster `key`: its listener closes and its port is free again.
    pub fn remove(&self, key: &str) {
        let mut registry = self.registry();
        if let Some(cluster) = registry.clusters.remove(key) {
            registry.taken.remove(&cluster.port);
            cluster.stop();
        }
    }

    /// Starts the API server of `cluster` (once): a TLS listener on its port, on every
    /// interface, presenting a certificate for the manager's address, `localhost` and the
    /// in-cluster names, signed by the cluster's CA.
    ///
    /// # Errors
    /// [`InMemoryError::Certificate`], [`InMemoryError::Tls`], [`InMemoryError::Listen`].
    pub async fn start_api_server(
        &self,
        cluster: &WorkloadCluster,
        ca_cert_pem: &str,
        ca_key_pem: &str,
    ) -> Result<(), InMemoryError> {
        if cluster.listening() {
            return Ok(());
        }
        let mut names = vec![
            self.host.clone(),
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            "kubernetes.default.svc.cluster.local".to_string(),
        ];
        names.dedup();
        let config = tls::server_config(
            ca_cert_pem,
            ca_key_pem,
            tls::Identity {
                common_name: "kube-apiserver",
                names,
                client_auth: false,
                alpn: b"http/1.1",
            },
        )?;
        let port = cluster.port;
        let tcp = TcpListener::bind(("0.0.0.0", port))
            .await
            .map_err(|source| InMemoryError::Listen { port, source })?;
        let listener = crate::serving::tls::TlsListener::new(tcp, config)
            .map_err(|source| InMemoryError::Listen { port, source })?;
        let closed = CancellationToken::new();
        let router = server::router(server::Shared {
            store: cluster.store.clone(),
            etcd: cluster.etcd.clone(),
            closed: closed.clone(),
            port,
        });
        let mut slot = cluster.listener();
        if slot.as_ref().is_some_and(|l| !l.task.is_finished()) {
            // Another reconcile started it meanwhile; this listener is dropped.
            return Ok(());
        }
        let shutdown = closed.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, router).with_graceful_shutdown(shutdown);
            if let Err(error) = served.await {
                tracing::warn!(port, error = %error, "The fake API server stopped");
            }
        });
        *slot = Some(Listener { task, closed });
        tracing::info!(port, "Started a fake API server");
        Ok(())
    }

    /// Stops the API server of `cluster` (its last control plane is gone); the port stays
    /// reserved.
    pub fn stop_api_server(&self, cluster: &WorkloadCluster) {
        cluster.stop();
    }
}
