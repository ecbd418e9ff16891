//! Server-side apply of what the controllers own: status through the status subresource, and the
//! few spec and metadata fields we set (`spec.providerID`, `spec.controlPlaneEndpoint`, the load
//! balancer weight annotation) through the main resource.
//!
//! Each apply body carries `apiVersion`, `kind` and only our fields, never `resourceVersion` or
//! `managedFields`; it is sent with a named field manager and `force`. Every body holds the complete
//! set of fields its field manager owns, because server-side apply removes owned fields that a later
//! apply of the same manager omits.

use std::fmt::Debug;

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::error::{Error, Result};

/// Field manager of everything the controllers apply on their own objects.
pub const FIELD_MANAGER: &str = "capd-rs-manager";

/// Field manager of the DockerMachines a DockerMachinePool makes (their labels, owner reference
/// and spec), apart from what the DockerMachine controller applies on them.
pub const POOL_FIELD_MANAGER: &str = "capd-rs-dockermachinepool";

fn params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// The apply body `{apiVersion, kind, <field>: value}` of a `K`.
pub fn body<K: Resource<DynamicType = ()>>(field: &str, value: Value) -> Value {
    body_with::<K>(serde_json::Map::from_iter([(field.to_string(), value)]))
}

/// The apply body `{apiVersion, kind, ...fields}` of a `K`.
pub fn body_with<K: Resource<DynamicType = ()>>(fields: serde_json::Map<String, Value>) -> Value {
    let mut body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
    });
    if let Value::Object(map) = &mut body {
        map.extend(fields);
    }
    body
}

/// Applies `status` to object `name` through the status subresource.
///
/// # Errors
/// [`Error::Kube`] when the API server refuses.
pub async fn apply_status<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    let value = serde_json::to_value(status).map_err(|e| Error::Kube {
        action: format!("encode status of {} {name}", K::kind(&())),
        source: kube::Error::SerdeError(e),
    })?;
    api.patch_status(name, &params(), &Patch::Apply(body::<K>("status", value)))
        .await
        .map_err(Error::kube(format!(
            "apply status of {} {name}",
            K::kind(&())
        )))
}

/// [`apply_status`], except that an object deleted meanwhile is not an error: returns whether the
/// status was written.
///
/// # Errors
/// [`Error::Kube`] when the API server refuses for another reason.
pub async fn apply_status_unless_gone<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    match apply_status(api, name, status).await {
        Ok(_) => Ok(true),
        Err(Error::Kube { source, .. }) if super::error::is_not_found(&source) => Ok(false),
        Err(error) => Err(error),
    }
}

/// Applies the owned parts of the main resource: `body` is a complete apply body built with
/// [`body`] or by hand (with `apiVersion` and `kind`).
///
/// # Errors
/// [`Error::Kube`] when the API server refuses.
pub async fn apply_object<K>(api: &Api<K>, name: &str, body: Value) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    apply_object_as(api, name, body, FIELD_MANAGER).await
}

/// [`apply_object`] with another field manager.
///
/// # Errors
/// [`Error::Kube`] when the API server refuses.
pub async fn apply_object_as<K>(api: &Api<K>, name: &str, body: Value, manager: &str) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    api.patch(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(body),
    )
    .await
    .map_err(Error::kube(format!("apply {} {name}", K::kind(&()))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1beta2::DockerCluster;

    #[test]
    fn bodies_name_the_kind_and_carry_only_the_field() {
        let b = body::<DockerCluster>("status", json!({"initialization": {"provisioned": true}}));
        assert_eq!(
            b,
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "DockerCluster",
                "status": {"initialization": {"provisioned": true}},
            })
        );
    }
}
