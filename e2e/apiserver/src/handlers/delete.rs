//! delete and deletecollection: preconditions, finalizers, propagation policies.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::common::{Req, Selectors, after_write, json_response, served, success_status};
use crate::deletion::{DeleteOptions, Deleted, Propagation, delete_object};
use crate::error::{ApiError, ApiResult};
use crate::state::Shared;

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
        after_write(&mut store, &req.def);
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
        after_write(&mut store, &req.def);
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
