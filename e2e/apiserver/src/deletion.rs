//! Deleting one stored object as kube-apiserver's registry does: preconditions, graceful deletion
//! behind finalizers, and the propagation policy's finalizers. Shared by the DELETE handlers and
//! the garbage collector.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::resources::ResourceDef;
use crate::store::Store;

/// How dependents are treated when their owner goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// The owner goes now; the garbage collector deletes dependents afterwards.
    Background,
    /// The owner waits (finalizer `foregroundDeletion`) until blocking dependents are gone.
    Foreground,
    /// Dependents lose their owner reference (finalizer `orphan`).
    Orphan,
}

/// Options of a delete request.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Requested propagation; Background when unset.
    pub propagation: Option<Propagation>,
    /// The object must have this uid.
    pub uid: Option<String>,
    /// The object must have this resourceVersion.
    pub resource_version: Option<String>,
    /// Nothing is stored.
    pub dry_run: bool,
}

/// The result of deleting one object.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// Gone, with its last state.
    Gone(Arc<Value>),
    /// Marked for deletion, waiting for finalizers.
    Pending(Arc<Value>),
}

/// Deletes (or marks for deletion) one stored object.
pub fn delete_object(
    store: &mut Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<Deleted> {
    let current = store
        .get(&def.storage, ns, name)
        .ok_or_else(|| ApiError::not_found(def.qualified(), name))?;
    let meta = &current["metadata"];
    if let Some(uid) = &opts.uid {
        let actual = meta["uid"].as_str().unwrap_or_default();
        if uid != actual {
            return Err(ApiError::conflict(
                def.qualified(),
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = &opts.resource_version {
        let actual = meta["resourceVersion"].as_str().unwrap_or_default();
        if rv != actual {
            return Err(ApiError::conflict(
                def.qualified(),
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                ),
            ));
        }
    }
    let mut finalizers: Vec<String> = meta["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    match opts.propagation {
        Some(Propagation::Orphan) => {
            finalizers.retain(|f| f != "foregroundDeletion");
            if !finalizers.iter().any(|f| f == "orphan") {
                finalizers.push("orphan".into());
            }
        }
        Some(Propagation::Foreground) => {
            finalizers.retain(|f| f != "orphan");
            if !finalizers.iter().any(|f| f == "foregroundDeletion") {
                finalizers.push("foregroundDeletion".into());
            }
        }
        Some(Propagation::Background) => {
            finalizers.retain(|f| f != "orphan" && f != "foregroundDeletion");
        }
        None => {}
    }
    let namespace_kind = def.group.is_empty() && def.plural == "namespaces";
    let pending_namespace = namespace_kind
        && current["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
    if finalizers.is_empty() && !pending_namespace {
        if opts.dry_run {
            return Ok(Deleted::Gone(current));
        }
        let last = store
            .remove(&def.storage, ns, name)
            .ok_or_else(|| ApiError::not_found(def.qualified(), name))?;
        return Ok(Deleted::Gone(last));
    }
    let mut object = (*current).clone();
    if finalizers.is_empty() {
        if let Some(m) = object["metadata"].as_object_mut() {
            m.remove("finalizers");
        }
    } else {
        object["metadata"]["finalizers"] = json!(finalizers);
    }
    if object["metadata"]["deletionTimestamp"].is_null() {
        if let Some(g) = object["metadata"]["generation"].as_i64().filter(|g| *g > 0) {
            object["metadata"]["generation"] = json!(g + 1);
        }
        object["metadata"]["deletionTimestamp"] = json!(meta::now());
        object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    }
    if namespace_kind {
        object["status"]["phase"] = json!("Terminating");
    }
    if object == *current || opts.dry_run {
        return Ok(Deleted::Pending(Arc::new(object)));
    }
    Ok(Deleted::Pending(store.put(&def.storage, object)))
}
