//! delete and deletecollection: preconditions, finalizers, propagation policies.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::read::{Selectors, served};
use super::{Req, json_response, success_status};
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::resources::ResourceDef;
use crate::server::Shared;
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

fn parse_propagation(s: &str) -> ApiResult<Propagation> {
    match s {
        "Background" => Ok(Propagation::Background),
        "Foreground" => Ok(Propagation::Foreground),
        "Orphan" => Ok(Propagation::Orphan),
        other => Err(ApiError::invalid(
            "DeleteOptions",
            "meta.k8s.io",
            "",
            vec![crate::error::cause(
                "FieldValueNotSupported",
                "propagationPolicy",
                format!(
                    "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                ),
            )],
        )),
    }
}

fn options(req: &Req, body: &[u8]) -> ApiResult<DeleteOptions> {
    let mut opts = DeleteOptions {
        dry_run: req.dry_run()?,
        ..Default::default()
    };
    if let Some(p) = req.param("propagationPolicy") {
        opts.propagation = Some(parse_propagation(p)?);
    }
    if req.param("orphanDependents") == Some("true") {
        opts.propagation = Some(Propagation::Orphan);
    }
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("decode DeleteOptions: {e}")))?;
        if let Some(p) = v["propagationPolicy"].as_str() {
            opts.propagation = Some(parse_propagation(p)?);
        }
        if v["orphanDependents"] == json!(true) {
            opts.propagation = Some(Propagation::Orphan);
        }
        opts.uid = v["preconditions"]["uid"].as_str().map(String::from);
        opts.resource_version = v["preconditions"]["resourceVersion"]
            .as_str()
            .map(String::from);
        if v["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|x| x == "All"))
        {
            opts.dry_run = true;
        }
    }
    Ok(opts)
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

/// DELETE of one object.
pub async fn delete(shared: &Shared, req: &Req, body: &[u8]) -> ApiResult<Response> {
    if req.subresource.is_some() {
        return Err(ApiError::method_not_supported(
            req.def.qualified(),
            "delete",
        ));
    }
    let opts = options(req, body)?;
    let name = req.name.clone().unwrap_or_default();
    crate::builtin::check_delete(&req.def, &name)?;
    let outcome = {
        let mut store = shared.store.lock().await;
        let outcome = delete_object(&mut store, &req.def, &req.ns(), &name, &opts)?;
        super::write::after_write(&mut store, &req.def);
        outcome
    };
    shared.gc_wakeup.notify_one();
    match outcome {
        Deleted::Gone(last) => Ok(json_response(
            StatusCode::OK,
            &success_status(&req.def, &name, &last["metadata"]["uid"]),
        )),
        Deleted::Pending(object) => {
            let out = served(&req.def, &object, &req.version).await?;
            Ok(json_response(StatusCode::OK, &out))
        }
    }
}

/// DELETE of a collection, with selectors.
pub async fn delete_collection(shared: &Shared, req: &Req, body: &[u8]) -> ApiResult<Response> {
    if req.def.plural == "namespaces" && req.def.group.is_empty() {
        return Err(ApiError::method_not_supported(
            req.def.qualified(),
            "deletecollection",
        ));
    }
    let opts = options(req, body)?;
    let selectors = Selectors::parse(req)?;
    let mut deleted = Vec::new();
    {
        let mut store = shared.store.lock().await;
        let targets: Vec<Arc<Value>> = store
            .list(&req.def.storage, req.namespace.as_deref())
            .into_iter()
            .filter(|o| selectors.matches(o))
            .collect();
        for t in targets {
            let (ns, name) = crate::store::object_key(&t);
            match delete_object(&mut store, &req.def, &ns, &name, &opts) {
                Ok(Deleted::Gone(o)) | Ok(Deleted::Pending(o)) => deleted.push((*o).clone()),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        super::write::after_write(&mut store, &req.def);
    }
    shared.gc_wakeup.notify_one();
    let items = crate::convert::to_served(&req.def, deleted, &req.version).await?;
    let rv = shared.store.lock().await.rv();
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": req.def.list_kind,
            "apiVersion": req.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        }),
    ))
}
