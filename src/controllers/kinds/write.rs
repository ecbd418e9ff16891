//! Writes through a view: status, spec and owned fields go to the real object, in its own kind
//! and shape. They need the [`Context`] (its API clients), which sits above the kinds: this is
//! the one part of the kinds that imports it, a child of `kinds.rs` (for the view's private
//! fields) that `kinds.rs` itself never calls.

use std::fmt::Debug;

use kube::Resource;
use kube::core::NamespaceResourceScope;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{Applied, ClusterView, MachineView, Served};
use crate::api::v1beta2::{
    DevCluster, DevMachine, DevMachineStatus, DockerCluster, DockerClusterStatus, DockerMachine,
    DockerMachineStatus,
};
use crate::controllers::apply::{apply_object, apply_status_unless_gone, body_with};
use crate::controllers::context::Context;
use crate::controllers::error::Result;

/// Applies `fields` of the main resource of the `K` `namespace/name`.
async fn apply_fields<K>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    fields: Map<String, Value>,
) -> Result<Applied>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let applied = apply_object(&ctx.api::<K>(namespace), name, body_with::<K>(fields)).await?;
    Ok(Applied {
        generation: applied.meta().generation,
        deleting: applied.meta().deletion_timestamp.is_some(),
    })
}

impl ClusterView {
    /// Applies `status` to the real object (a DevCluster's status has a DockerCluster's shape);
    /// returns whether it was written (false when the object is gone).
    ///
    /// # Errors
    /// [`Error::Kube`](crate::controllers::Error::Kube) when the API server refuses.
    pub async fn apply_status(&self, ctx: &Context, status: &DockerClusterStatus) -> Result<bool> {
        let (namespace, name) = (self.namespace(), self.name());
        match self.served {
            Served::Docker => {
                apply_status_unless_gone(&ctx.api::<DockerCluster>(&namespace), &name, status).await
            }
            Served::Dev => {
                apply_status_unless_gone(&ctx.api::<DevCluster>(&namespace), &name, status).await
            }
        }
    }

    /// Applies `spec` fields that sit at the same place in both kinds (the control plane
    /// endpoint) to the real object; returns what the write returned.
    ///
    /// # Errors
    /// [`Error::Kube`](crate::controllers::Error::Kube) when the API server refuses.
    pub async fn apply_spec(&self, ctx: &Context, spec: Value) -> Result<Applied> {
        let (namespace, name) = (self.namespace(), self.name());
        let fields = Map::from_iter([("spec".to_string(), spec)]);
        match self.served {
            Served::Docker => apply_fields::<DockerCluster>(ctx, &namespace, &name, fields).await,
            Served::Dev => apply_fields::<DevCluster>(ctx, &namespace, &name, fields).await,
        }
    }
}

impl MachineView {
    /// Applies `status` to the real object, in its kind's shape; returns whether it was written
    /// (false when the object is gone).
    ///
    /// # Errors
    /// [`Error::Kube`](crate::controllers::Error::Kube) when the API server refuses.
    pub async fn apply_status(&self, ctx: &Context, status: &DockerMachineStatus) -> Result<bool> {
        let (namespace, name) = (self.namespace(), self.name());
        match self.served {
            Served::Docker => {
                apply_status_unless_gone(&ctx.api::<DockerMachine>(&namespace), &name, status).await
            }
            Served::Dev => {
                let dev_status = DevMachineStatus::from(status);
                apply_status_unless_gone(&ctx.api::<DevMachine>(&namespace), &name, &dev_status)
                    .await
            }
        }
    }

    /// Applies the owned parts of the main resource (`metadata` annotations, `spec.providerID`:
    /// at the same place in both kinds), given as the fields of an apply body; returns what the
    /// write returned.
    ///
    /// # Errors
    /// [`Error::Kube`](crate::controllers::Error::Kube) when the API server refuses.
    pub async fn apply_owned(&self, ctx: &Context, fields: Map<String, Value>) -> Result<Applied> {
        let (namespace, name) = (self.namespace(), self.name());
        match self.served {
            Served::Docker => apply_fields::<DockerMachine>(ctx, &namespace, &name, fields).await,
            Served::Dev => apply_fields::<DevMachine>(ctx, &namespace, &name, fields).await,
        }
    }
}
