//! What a user reads back: Events, and the resourceVersions of every object of a namespace.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, ListParams};

use crate::core::kinds;
use crate::docker::{cluster_containers, network_exists, volume_exists};
use crate::{Env, eventually};

impl Env {
    /// The Events of the current namespace about an object, as `(type, reason, message)`.
    pub async fn events_about(&self, kind: &str, name: &str) -> Vec<(String, String, String)> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.involved_object.kind.as_deref() == Some(kind)
                    && e.involved_object.name.as_deref() == Some(name)
            })
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Waits until an Event of `type_` and `reason` about `kind` `name` exists whose message
    /// contains `text` (Events are published after the status writes a test waits for); returns
    /// its message.
    pub async fn wait_event(
        &self,
        kind: &str,
        name: &str,
        (type_, reason): (&str, &str),
        text: &str,
    ) -> String {
        eventually(
            Duration::from_secs(30),
            &format!("a {type_} Event {reason} on {kind} {name}"),
            || async {
                self.events_about(kind, name)
                    .await
                    .into_iter()
                    .find(|(t, r, m)| t == type_ && r == reason && m.contains(text))
                    .map(|(_, _, message)| message)
            },
        )
        .await
    }

    /// `kind/name` → resourceVersion of the objects of the current namespace (of [`kinds`]).
    pub async fn resource_versions(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for kind in kinds() {
            let api: Api<DynamicObject> = self.api(&kind);
            for object in api.list(&ListParams::default()).await.unwrap().items {
                out.insert(
                    format!("{}/{}", kind.kind, object.metadata.name.unwrap_or_default()),
                    object.metadata.resource_version.unwrap_or_default(),
                );
            }
        }
        out
    }

    /// Waits until no object's resourceVersion moved for three seconds in a row; panics after
    /// `timeout` (so a hot loop fails here).
    pub async fn wait_settled(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let (mut seen, mut since) = (self.resource_versions().await, Instant::now());
        while since.elapsed() < Duration::from_secs(3) {
            assert!(Instant::now() < deadline, "the objects never settle");
            tokio::time::sleep(Duration::from_millis(300)).await;
            let now = self.resource_versions().await;
            if now != seen {
                (seen, since) = (now, Instant::now());
            }
        }
    }

    /// Asserts that a deleted cluster left nothing behind: no container, none of `volumes`, not
    /// the environment's network, and no object in the namespace (so none held by a finalizer).
    pub async fn assert_nothing_left(&self, cluster: &str, volumes: &[String]) {
        assert_eq!(cluster_containers(cluster), Vec::<String>::new());
        let left: Vec<&String> = volumes.iter().filter(|v| volume_exists(v)).collect();
        assert!(left.is_empty(), "volumes left: {left:?}");
        assert!(
            !network_exists(&self.network),
            "the network the provider created is removed"
        );
        assert_eq!(
            self.resource_versions().await.keys().collect::<Vec<_>>(),
            Vec::<&String>::new(),
            "no object is held by a finalizer"
        );
    }
}

/// The field manager the provider writes with, on its own objects and on workload Nodes.
pub const PROVIDER_FIELD_MANAGER: &str = "capd-rs-manager";

/// The field managers that own the field at `path` of an object (`["spec", "providerID"]`), as
/// its `metadata.managedFields` record them: who wrote it, as the API server saw it.
pub fn field_owners(meta: &ObjectMeta, path: &[&str]) -> Vec<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            let mut fields = entry.fields_v1.as_ref().map(|f| &f.0);
            for step in path {
                fields = fields.and_then(|f| f.get(format!("f:{step}")));
            }
            fields.is_some()
        })
        .filter_map(|entry| entry.manager.clone())
        .collect()
}
