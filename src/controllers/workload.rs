//! Clients of workload clusters, built from the `<cluster>-kubeconfig` Secret (key `value`) that
//! the control plane provider writes, cached per cluster and rebuilt when the kubeconfig changes.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use super::error::{Error, Result};
use crate::runtime::client::{WORKLOAD_REQUEST_TIMEOUT, build_client};

/// Key of the kubeconfig in the Secret.
pub const KUBECONFIG_KEY: &str = "value";

/// Name of a cluster's kubeconfig Secret.
pub fn kubeconfig_secret_name(cluster: &str) -> String {
    format!("{cluster}-kubeconfig")
}

struct Cached {
    fingerprint: u64,
    client: Client,
}

/// Workload cluster clients by `(namespace, cluster)`.
pub struct WorkloadClients {
    qps: f32,
    burst: u32,
    clients: Mutex<HashMap<(String, String), Cached>>,
}

impl WorkloadClients {
    /// An empty cache whose clients are limited to `qps` / `burst` (`--clustercache-client-*`).
    pub fn new(qps: f32, burst: u32) -> Self {
        Self {
            qps,
            burst,
            clients: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), Cached>> {
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The client of workload cluster `namespace/cluster`. Reads the kubeconfig Secret (one GET)
    /// and reuses the cached client while the kubeconfig is unchanged.
    ///
    /// # Errors
    /// [`Error::Workload`] when the Secret is missing or unusable.
    pub async fn client(
        &self,
        management: &Client,
        namespace: &str,
        cluster: &str,
    ) -> Result<Client> {
        let secret_name = kubeconfig_secret_name(cluster);
        let workload_err =
            |action: &str, source: Box<dyn std::error::Error + Send + Sync>| Error::Workload {
                action: action.to_string(),
                namespace: namespace.to_string(),
                cluster: cluster.to_string(),
                source,
            };
        let secret = Api::<Secret>::namespaced(management.clone(), namespace)
            .get(&secret_name)
            .await
            .map_err(|e| {
                workload_err(
                    &format!("read kubeconfig secret {namespace}/{secret_name}"),
                    Box::new(e),
                )
            })?;
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(KUBECONFIG_KEY))
            .map(|b| b.0.clone())
            .ok_or_else(|| {
                workload_err(
                    &format!("read kubeconfig secret {namespace}/{secret_name}"),
                    "no key \"value\"".into(),
                )
            })?;
        let fingerprint = fingerprint(&data);
        let key = (namespace.to_string(), cluster.to_string());
        if let Some(cached) = self.lock().get(&key)
            && cached.fingerprint == fingerprint
        {
            return Ok(cached.client.clone());
        }
        let text = String::from_utf8(data)
            .map_err(|e| workload_err("decode the kubeconfig", Box::new(e)))?;
        let kubeconfig = Kubeconfig::from_yaml(&text)
            .map_err(|e| workload_err("parse the kubeconfig", Box::new(e)))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| workload_err("load the kubeconfig", Box::new(e)))?;
        let client = build_client(config, self.qps, self.burst, WORKLOAD_REQUEST_TIMEOUT)
            .map_err(|e| workload_err("build a client", Box::new(e)))?;
        self.lock().insert(
            key,
            Cached {
                fingerprint,
                client: client.clone(),
            },
        );
        Ok(client)
    }

    /// Forgets the client of a cluster (after it failed, or when the cluster goes away).
    pub fn forget(&self, namespace: &str, cluster: &str) {
        self.lock()
            .remove(&(namespace.to_string(), cluster.to_string()));
    }
}

fn fingerprint(data: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_name_follows_cluster_api() {
        assert_eq!(kubeconfig_secret_name("c1"), "c1-kubeconfig");
        assert_ne!(fingerprint(b"a"), fingerprint(b"b"));
    }
}
