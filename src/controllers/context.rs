//! The state every reconcile of every controller shares, as `Arc<Context>`: the manager's
//! context (Kubernetes client, Event recorder, metrics, readiness, flags), the container runtime,
//! the caches of the objects we watch, the background tasks and the workload cluster clients.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::backoff::ErrorBackoff;
use super::error::{Error, Result};
use super::kinds::{ClusterView, Recorded, ServedKind};
use super::meta::refers_to;
use super::tasks::TaskRegistry;
use super::workload::WorkloadClients;
use crate::api::capi::ContractVersionedObjectReference;
use crate::api::capi::{Cluster, Machine, MachinePool, label_value};
use crate::api::v1beta2::{DevCluster, DockerCluster};
use crate::docker::ContainerRuntime;
use crate::docker::node::ProxyEnv;

/// The caches of the objects the controllers read, filled by their watches.
#[derive(Clone)]
pub struct Stores {
    /// Cluster API Clusters (decoded tolerantly).
    pub clusters: Store<DeserializeGuard<Cluster>>,
    /// Cluster API Machines (decoded tolerantly).
    pub machines: Store<DeserializeGuard<Machine>>,
    /// DockerClusters.
    pub docker_clusters: Store<DockerCluster>,
    /// DevClusters (empty when the Dev* kinds are not served).
    pub dev_clusters: Store<DevCluster>,
    /// Cluster API MachinePools (decoded tolerantly; empty when machine pools are off).
    pub machine_pools: Store<DeserializeGuard<MachinePool>>,
}

/// Everything a reconcile needs besides the object itself.
pub struct Context {
    /// The context the manager shares with every controller ([`crate::runtime::Context`]):
    /// client, Event recorder, metrics, readiness, flag values.
    pub manager: Arc<crate::runtime::Context>,
    /// The container engine.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// Watched objects.
    pub stores: Stores,
    /// Background tasks of DockerMachines.
    pub tasks: TaskRegistry,
    /// Clients of workload clusters, cached per cluster.
    pub workload: WorkloadClients,
    /// Per-object error backoff (keys are prefixed with the kind).
    pub backoff: ErrorBackoff,
    /// Proxy variables of this process, passed to node containers.
    pub proxy: ProxyEnv,
    /// One lock per cluster load balancer: its configuration is rewritten by one reconcile at a
    /// time (two concurrent writers would read back each other's file).
    pub load_balancer_locks: LoadBalancerLocks,
    /// The status last written on each object, so that a stale cache cannot hide a write.
    pub written: super::written::WrittenStatuses,
    /// The copies this manager added its finalizers to, so that a stale cache does not add
    /// them again ([`super::finalize`]).
    pub finalizers: super::finalize::AddedFinalizers,
    /// The fake workload clusters of the Dev* kinds' `inMemory` backend.
    pub in_memory: Arc<crate::inmemory::Clusters>,
}

/// Per-cluster locks serializing load balancer configuration changes.
#[derive(Debug, Default)]
pub struct LoadBalancerLocks {
    locks: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl LoadBalancerLocks {
    /// The lock of cluster `namespace/cluster`.
    pub fn lock_for(&self, namespace: &str, cluster: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        locks
            .entry(format!("{namespace}/{cluster}"))
            .or_default()
            .clone()
    }
}

impl Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("runtime", &self.runtime)
            .field("tasks", &self.tasks)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// The Kubernetes client of the management cluster.
    pub fn client(&self) -> kube::Client {
        self.manager.client.clone()
    }

    /// The name of the Docker network cluster containers join (`--docker-network`).
    pub fn network(&self) -> &str {
        &self.manager.config.docker_network
    }

    /// The host address published ports are bound to (`--publish-address`).
    pub fn publish_address(&self) -> String {
        self.manager.config.publish_address.to_string()
    }

    /// An API handle for `K` in `namespace`.
    pub fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client(), namespace)
    }

    /// A Cluster API object from its cache, or from the API server when the cache does not hold
    /// it (yet). `Ok(None)` when it does not exist.
    ///
    /// # Errors
    /// [`Error::InvalidObject`] when the object does not decode, [`Error::Kube`] when the read fails.
    pub async fn capi_object<K>(
        &self,
        store: &Store<DeserializeGuard<K>>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Debug,
    {
        let Some(guarded) = self.cached_or_read(store, namespace, name).await? else {
            return Ok(None);
        };
        guarded.0.map(Some).map_err(|invalid| Error::InvalidObject {
            kind: kind_of::<K>(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            detail: invalid.error,
        })
    }

    /// The Cluster `namespace/name`.
    ///
    /// # Errors
    /// As [`Context::capi_object`].
    pub async fn cluster(&self, namespace: &str, name: &str) -> Result<Option<Cluster>> {
        self.capi_object(&self.stores.clusters, namespace, name)
            .await
    }

    /// The Machine `namespace/name`.
    ///
    /// # Errors
    /// As [`Context::capi_object`].
    pub async fn machine(&self, namespace: &str, name: &str) -> Result<Option<Machine>> {
        self.capi_object(&self.stores.machines, namespace, name)
            .await
    }

    /// The MachinePool whose name core wrote into a `cluster.x-k8s.io/pool-name` label: the pool
    /// of that name, else (a long name, which core writes as a hash) the one of the cached pools
    /// whose name formats to the label.
    ///
    /// # Errors
    /// As [`Context::capi_object`].
    pub async fn labelled_machine_pool(
        &self,
        namespace: &str,
        label: &str,
    ) -> Result<Option<MachinePool>> {
        if let Some(pool) = self
            .capi_object(&self.stores.machine_pools, namespace, label)
            .await?
        {
            return Ok(Some(pool));
        }
        Ok(self
            .stores
            .machine_pools
            .state()
            .iter()
            .filter_map(|guarded| guarded.0.as_ref().ok())
            .find(|pool| {
                pool.metadata.namespace.as_deref() == Some(namespace)
                    && pool.metadata.name.as_deref().map(label_value).as_deref() == Some(label)
            })
            .cloned())
    }

    /// The infrastructure cluster a Cluster's `spec.infrastructureRef` points to, from the cache or
    /// the API server, as a DockerCluster: a DockerCluster, or a DevCluster with the docker
    /// backend. `Ok(None)` when it does not exist, is of another kind, or has another backend.
    ///
    /// # Errors
    /// [`Error::Kube`] when the read fails.
    pub async fn infra_cluster(
        &self,
        namespace: &str,
        reference: &ContractVersionedObjectReference,
    ) -> Result<Option<ClusterView>> {
        if refers_to(reference, "DockerCluster") {
            let found = self
                .cached_or_read(&self.stores.docker_clusters, namespace, &reference.name)
                .await?;
            return Ok(found.and_then(|c| c.view().ok()));
        }
        if refers_to(reference, "DevCluster") {
            let found = self
                .cached_or_read(&self.stores.dev_clusters, namespace, &reference.name)
                .await?;
            return Ok(found.and_then(|c| c.view().ok()));
        }
        Ok(None)
    }

    /// One of our objects from its cache, or from the API server when the cache does not hold
    /// it (yet).
    async fn cached_or_read<K>(
        &self,
        store: &Store<K>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Debug,
    {
        let key = ObjectRef::<K>::new(name).within(namespace);
        if let Some(cached) = store.get(&key) {
            return Ok(Some((*cached).clone()));
        }
        self.api::<K>(namespace)
            .get_opt(name)
            .await
            .map_err(Error::kube(format!(
                "get {} {namespace}/{name}",
                K::kind(&())
            )))
    }

    /// Runs one reconcile of `object` under the reconcile timeout and records its outcome: the
    /// `controller`'s metrics, the object's error backoff, and for a failure a log line with the
    /// full error chain and a Warning Event whose reason is the error's category.
    pub async fn reconciled<K>(
        &self,
        controller: &'static str,
        object: &K,
        reconcile: impl std::future::Future<Output = Result<Action>>,
    ) -> Result<Action>
    where
        K: Resource<DynamicType = ()>,
    {
        if let Some(left) = self.backoff.held_for(&backoff_key(object)) {
            // The API server asked us to wait; a watch event does not cut that short.
            tracing::debug!(
                controller,
                object = %super::meta::key(object.meta()),
                left_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
                "Held by the API server's Retry-After; looking again after it"
            );
            return Ok(Action::requeue(left));
        }
        let timer = self.manager.metrics.reconcile_started(controller);
        let result = super::error::with_timeout(reconcile).await;
        match &result {
            Ok(_) => {
                timer.finish(Ok(()));
                self.backoff.succeeded(&backoff_key(object));
            }
            Err(error) => {
                timer.finish(Err(error.category()));
                tracing::warn!(
                    controller,
                    object = %super::meta::key(object.meta()),
                    category = error.category(),
                    error = %crate::runtime::error_chain(error),
                    "Reconcile failed"
                );
                self.event(
                    object,
                    EventKind::Warning,
                    &event_reason(error.category()),
                    crate::runtime::error_chain(error),
                )
                .await;
            }
        }
        result
    }

    /// The retry after a failed reconcile of `object`: its own growing backoff, or longer when
    /// the API server asked for a longer wait (`Retry-After`).
    pub fn requeue_after_failure<K>(&self, object: &K, error: &Error) -> Action
    where
        K: Resource<DynamicType = ()>,
    {
        Action::requeue(
            self.backoff
                .failed(&backoff_key(object), error.retry_after()),
        )
    }

    /// Publishes a Kubernetes Event on `object`. A failure to publish is logged, never returned:
    /// Events are a courtesy to users, not part of the reconcile.
    pub async fn event(
        &self,
        object: &impl Recorded,
        kind: EventKind,
        reason: &str,
        note: impl Into<String>,
    ) {
        let reference: ObjectReference = object.reference();
        let event = event_for(kind, reason, &note.into());
        if let Err(error) = self.manager.recorder.publish(&event, &reference).await {
            tracing::debug!(
                object = reference.name.as_deref().unwrap_or_default(),
                reason,
                error = %crate::runtime::error_chain(&error),
                "Publishing an Event failed"
            );
        }
    }
}

/// The Event to publish. kube's recorder merges Events of one object with the same type,
/// reason and action into a series that keeps the first note: the action carries a digest of
/// the note, so that only repeats of the same message merge ("weight set to 0" must not show as
/// a repeat of "weight set to 100").
fn event_for(kind: EventKind, reason: &str, note: &str) -> Event {
    use std::hash::{Hash, Hasher};
    let note = super::conditions::truncate(note, 1000);
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    note.hash(&mut digest);
    let reason_part: String = reason.chars().take(100).collect();
    Event {
        type_: match kind {
            EventKind::Normal => EventType::Normal,
            EventKind::Warning => EventType::Warning,
        },
        reason: reason.to_string(),
        note: Some(note),
        action: format!("{reason_part}-{:08x}", digest.finish() as u32),
        secondary: None,
    }
}

/// Severity of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Something happened as expected.
    Normal,
    /// Something failed or needs attention.
    Warning,
}

fn kind_of<K: Resource<DynamicType = ()>>() -> &'static str {
    match K::kind(&()).as_ref() {
        "Cluster" => "Cluster",
        "Machine" => "Machine",
        _ => "object",
    }
}

/// The Event reason for an error category: `container_not_found` → `ContainerNotFound`.
pub fn event_reason(category: &str) -> String {
    category
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The key of `object` in the error backoff: `<Kind>/<namespace>/<name>`.
fn backoff_key<K: Resource<DynamicType = ()>>(object: &K) -> String {
    format!("{}/{}", K::kind(&()), super::meta::key(object.meta()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_reasons_are_pascal_case_categories() {
        assert_eq!(event_reason("container_not_found"), "ContainerNotFound");
        assert_eq!(event_reason("conflict"), "Conflict");
    }

    #[test]
    fn events_with_other_notes_are_not_merged_as_repeats() {
        let to_100 = event_for(
            EventKind::Normal,
            "LoadBalancerUpdated",
            "weight set to 100",
        );
        let to_0 = event_for(EventKind::Normal, "LoadBalancerUpdated", "weight set to 0");
        let again = event_for(EventKind::Normal, "LoadBalancerUpdated", "weight set to 0");
        assert_ne!(to_100.action, to_0.action, "a new message is a new Event");
        assert_eq!(to_0.action, again.action, "a repeat joins the series");
        assert!(to_0.action.starts_with("LoadBalancerUpdated-"));
        assert!(
            to_0.action.len() <= 128,
            "the API limits actions to 128 characters"
        );
        assert_eq!(to_0.note.as_deref(), Some("weight set to 0"));
    }
}
