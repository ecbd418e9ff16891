//! The template controllers: publish `status.capacity` (CPU and memory of the Docker host) of
//! DockerMachineTemplates, DevMachineTemplates and DockerMachinePoolTemplates, so the cluster
//! autoscaler can scale a node group or a MachinePool up from zero. One reconcile, generic over
//! [`CapacityTemplate`], runs as three controllers (the Dev one only when its CRD is served, the
//! pool one only with the `MachinePool` feature gate).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::core::NamespaceResourceScope;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::instrument;

use super::apply::apply_status_unless_gone;
use super::context::Context;
use super::error::{Error, Result};
use super::meta::key;
use crate::api::v1beta2::{
    DevMachinePoolTemplate, DevMachineTemplate, DockerMachinePoolTemplate, DockerMachineTemplate,
};
use crate::docker::HostInfo;

/// Name of the DockerMachineTemplate controller in metrics and logs.
pub const CONTROLLER: &str = "dockermachinetemplate";

/// Name of the DevMachineTemplate controller in metrics and logs.
pub const DEV_CONTROLLER: &str = "devmachinetemplate";

/// Name of the DockerMachinePoolTemplate controller in metrics and logs.
pub const POOL_CONTROLLER: &str = "dockermachinepooltemplate";

/// Name of the DevMachinePoolTemplate controller in metrics and logs.
pub const DEV_POOL_CONTROLLER: &str = "devmachinepooltemplate";

/// A template kind whose status carries the capacity of one machine made from it.
pub trait CapacityTemplate:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
    /// Name of the kind's controller in metrics and logs.
    const CONTROLLER: &'static str;
    /// The kind, for logs.
    const KIND: &'static str;

    /// The capacity the object's status reports now (`None` without status).
    fn capacity(&self) -> Option<&BTreeMap<String, Quantity>>;
}

impl CapacityTemplate for DockerMachineTemplate {
    const CONTROLLER: &'static str = CONTROLLER;
    const KIND: &'static str = "DockerMachineTemplate";

    fn capacity(&self) -> Option<&BTreeMap<String, Quantity>> {
        self.status.as_ref().map(|s| &s.capacity)
    }
}

impl CapacityTemplate for DevMachineTemplate {
    const CONTROLLER: &'static str = DEV_CONTROLLER;
    const KIND: &'static str = "DevMachineTemplate";

    fn capacity(&self) -> Option<&BTreeMap<String, Quantity>> {
        self.status.as_ref().map(|s| &s.capacity)
    }
}

impl CapacityTemplate for DockerMachinePoolTemplate {
    const CONTROLLER: &'static str = POOL_CONTROLLER;
    const KIND: &'static str = "DockerMachinePoolTemplate";

    fn capacity(&self) -> Option<&BTreeMap<String, Quantity>> {
        self.status.as_ref().map(|s| &s.capacity)
    }
}

impl CapacityTemplate for DevMachinePoolTemplate {
    const CONTROLLER: &'static str = DEV_POOL_CONTROLLER;
    const KIND: &'static str = "DevMachinePoolTemplate";

    fn capacity(&self) -> Option<&BTreeMap<String, Quantity>> {
        self.status.as_ref().map(|s| &s.capacity)
    }
}

/// The status body every template kind shares: only `capacity`.
#[derive(Serialize)]
struct CapacityStatus<'a> {
    capacity: &'a BTreeMap<String, Quantity>,
}

/// A byte count in Kubernetes' canonical binary form (`16Gi`, `8044884Ki`, `1000`).
pub fn binary_quantity(bytes: u64) -> String {
    const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if bytes == 0 {
        return "0".to_string();
    }
    let mut value = bytes;
    let mut suffix = "";
    for next in SUFFIXES {
        if !value.is_multiple_of(1024) {
            break;
        }
        value /= 1024;
        suffix = next;
    }
    format!("{value}{suffix}")
}

/// The capacity a machine of any template has: the host's CPUs and memory.
pub fn capacity(host: &HostInfo) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), Quantity(host.ncpu.to_string())),
        (
            "memory".to_string(),
            Quantity(binary_quantity(host.mem_total_bytes)),
        ),
    ])
}

/// Reconciles one template of either kind.
pub async fn reconcile<K: CapacityTemplate>(template: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    ctx.reconciled(
        K::CONTROLLER,
        template.as_ref(),
        reconcile_one(template.as_ref(), &ctx),
    )
    .await
}

/// Retry delay after a failure: the object's own backoff, or the API server's `Retry-After`.
pub fn error_policy<K: CapacityTemplate>(
    template: Arc<K>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    ctx.requeue_after_failure(template.as_ref(), error)
}

#[instrument(skip_all, fields(controller = K::CONTROLLER, template = %key(template.meta())), err)]
async fn reconcile_one<K: CapacityTemplate>(template: &K, ctx: &Context) -> Result<Action> {
    let host = ctx
        .runtime
        .host_info()
        .await
        .map_err(Error::runtime("read the Docker host facts"))?;
    let wanted = capacity(&host);
    if template.capacity() != Some(&wanted) {
        let namespace = template.namespace().unwrap_or_default();
        if apply_status_unless_gone(
            &ctx.api::<K>(&namespace),
            &template.name_any(),
            &CapacityStatus { capacity: &wanted },
        )
        .await?
        {
            tracing::info!(
                cpu = host.ncpu,
                memory = host.mem_total_bytes,
                "Published the machine capacity"
            );
        }
    }
    Ok(Action::requeue(ctx.manager.config.sync_period))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_written_in_canonical_binary_units() {
        assert_eq!(binary_quantity(16 * 1024 * 1024 * 1024), "16Gi");
        assert_eq!(binary_quantity(8_237_961_216), "8044884Ki");
        assert_eq!(binary_quantity(1000), "1000");
        assert_eq!(binary_quantity(0), "0");
    }

    #[test]
    fn capacity_is_the_hosts_cpus_and_memory() {
        let host = HostInfo {
            ncpu: 2,
            mem_total_bytes: 24 * 1024 * 1024 * 1024,
            ..Default::default()
        };
        let got = capacity(&host);
        assert_eq!(got.get("cpu"), Some(&Quantity("2".into())));
        assert_eq!(got.get("memory"), Some(&Quantity("24Gi".into())));
    }
}
