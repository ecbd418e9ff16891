//! What a user reads back: Events, and the resourceVersions of every object of a namespace.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DynamicObject, ListParams};

use crate::Env;
use crate::core::{capi, infra};

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

    /// `kind/name` → resourceVersion of the Clusters, Machines, DockerClusters, DockerMachines
    /// and DockerMachineTemplates of the current namespace.
    pub async fn resource_versions(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for kind in [
            capi("Cluster"),
            capi("Machine"),
            infra("DockerCluster"),
            infra("DockerMachine"),
            infra("DockerMachineTemplate"),
        ] {
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
}
