//! The fake etcd of a fake cluster, reached only through the `portforward` subresource of an
//! etcd pod (as KCP reaches etcd): TLS with a serving certificate for that member signed by the
//! cluster's `<cluster>-etcd` CA, then gRPC over HTTP/2 ([`grpc`]) answering
//! `Cluster.MemberList`, `Cluster.MemberRemove`, `Maintenance.Status`, `Maintenance.Alarm` and
//! `Maintenance.MoveLeader` from the etcd pods' annotations ([`members`]).

pub mod grpc;
pub mod members;
pub mod proto;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustls::ServerConfig;

use super::InMemoryError;
use super::tls;

/// The etcd CA of a cluster and the serving configurations made from it, per etcd pod.
#[derive(Debug, Default)]
pub struct EtcdIdentity {
    host: String,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    ca: Option<(String, String)>,
    configs: HashMap<String, Arc<ServerConfig>>,
}

impl EtcdIdentity {
    /// An identity whose certificates also name `host` (the manager's address).
    pub fn new(host: String) -> Self {
        Self {
            host,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the etcd CA is known.
    pub fn has_ca(&self) -> bool {
        self.state().ca.is_some()
    }

    /// Sets the etcd CA (`tls.crt`, `tls.key` of `<cluster>-etcd`); certificates made from
    /// another CA are dropped.
    pub fn set_ca(&self, crt: &str, key: &str) {
        let mut state = self.state();
        if state
            .ca
            .as_ref()
            .is_none_or(|(c, k)| c.as_str() != crt || k.as_str() != key)
        {
            state.ca = Some((crt.to_string(), key.to_string()));
            state.configs.clear();
        }
    }

    /// Drops the certificate of etcd pod `pod` (its machine is gone).
    pub fn forget(&self, pod: &str) {
        self.state().configs.remove(pod);
    }

    /// The TLS configuration of etcd pod `pod` (made once): a certificate for `localhost`,
    /// the pod's name (the name KCP's etcd client verifies and sends as SNI), loopback and
    /// the manager's address, for server and client auth as CAPD makes it; ALPN `h2`, which
    /// gRPC clients require. No client certificate is asked for, as in CAPD.
    ///
    /// # Errors
    /// [`InMemoryError::Certificate`] when the CA is unknown or does not sign,
    /// [`InMemoryError::Tls`].
    pub fn server_config(&self, pod: &str) -> Result<Arc<ServerConfig>, InMemoryError> {
        let mut state = self.state();
        if let Some(config) = state.configs.get(pod) {
            return Ok(config.clone());
        }
        let (crt, key) = state
            .ca
            .clone()
            .ok_or_else(|| InMemoryError::Certificate("the etcd CA is not known yet".into()))?;
        let mut names = vec![
            "localhost".to_string(),
            pod.to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
            self.host.clone(),
        ];
        names.dedup();
        let config = tls::server_config(
            &crt,
            &key,
            tls::Identity {
                common_name: pod,
                names,
                client_auth: true,
                alpn: b"h2",
            },
        )?;
        state.configs.insert(pod.to_string(), config.clone());
        Ok(config)
    }
}
