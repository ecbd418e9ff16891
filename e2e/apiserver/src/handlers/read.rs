//! get and list.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::common::{Req, Selectors, json_response, partial, served};
use crate::convert::to_served;
use crate::error::{ApiError, ApiResult};
use crate::state::Shared;
use crate::store::object_key;

/// GET of one object (or its status).
pub async fn get(shared: &Shared, req: &Req) -> ApiResult<Response> {
    let name = req.name.clone().unwrap_or_default();
    let stored = shared
        .store
        .lock()
        .await
        .get(&req.def.storage, &req.ns(), &name)
        .ok_or_else(|| ApiError::not_found(req.def.qualified(), &name))?;
    let object = served(&req.def, &stored, &req.version).await?;
    if let Some(include) = req.table {
        let metadata = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
        let table = crate::table::table(&req.def, &req.version, &[object], metadata, include, true);
        return Ok(json_response(StatusCode::OK, &table));
    }
    if req.partial {
        return Ok(json_response(StatusCode::OK, &partial(&object)));
    }
    Ok(json_response(StatusCode::OK, &object))
}

fn continue_token(rv: u64, start: &str) -> String {
    STANDARD.encode(json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string())
}

fn bad_continue() -> ApiError {
    ApiError::bad_request(
        "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
    )
}

fn expired_continue() -> ApiError {
    ApiError::expired(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
    )
}

fn decode_continue(token: &str) -> ApiResult<(u64, String)> {
    let raw = STANDARD.decode(token).map_err(|_| bad_continue())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad_continue())?;
    let rv = v["rv"].as_u64().ok_or_else(bad_continue)?;
    let start = v["start"].as_str().ok_or_else(bad_continue)?.to_string();
    Ok((rv, start))
}

fn sort_key(object: &Value) -> String {
    let (ns, name) = object_key(object);
    if ns.is_empty() {
        name
    } else {
        format!("{ns}/{name}")
    }
}

/// LIST, with selectors and `limit`/`continue` pagination over a consistent snapshot.
pub async fn list(shared: &Shared, req: &Req) -> ApiResult<Response> {
    let options =
        watchlist::ListOptions::from_query(false, |k| req.param(k)).map_err(ApiError::refused)?;
    options.validate().map_err(ApiError::refused)?;
    let selectors = Selectors::parse(req)?;
    let limit: Option<usize> = match req.param("limit") {
        Some(l) => Some(
            l.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        )
        .filter(|l| *l > 0),
        None => None,
    };
    let key = req.def.storage.clone();
    let (rv, snapshot, start) = {
        let mut store = shared.store.lock().await;
        if let Some(token) = req.param("continue") {
            let (rv, start) = decode_continue(token)?;
            let snapshot = store.snapshot(&key, rv).ok_or_else(expired_continue)?;
            (rv, snapshot, Some(start))
        } else {
            let asked = options.resource_version().map_err(ApiError::refused)?;
            if asked > store.rv() {
                return Err(ApiError::refused(watchlist::too_large(asked, store.rv())));
            }
            let rv = store.rv();
            let snapshot = Arc::new(store.list(&key, None));
            if limit.is_some() {
                store.keep_snapshot(&key, rv, snapshot.clone());
            }
            (rv, snapshot, None)
        }
    };
    let ns = req.namespace.clone();
    let matching: Vec<&Arc<Value>> = snapshot
        .iter()
        .filter(|o| {
            ns.as_ref()
                .is_none_or(|n| o["metadata"]["namespace"].as_str() == Some(n))
        })
        .filter(|o| {
            start
                .as_ref()
                .is_none_or(|s| sort_key(o).as_str() > s.as_str())
        })
        .filter(|o| selectors.matches(o))
        .collect();
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    let page: Vec<&Arc<Value>> = match limit {
        Some(l) if matching.len() > l => {
            let page: Vec<&Arc<Value>> = matching[..l].to_vec();
            if let Some(last) = page.last() {
                metadata["continue"] = json!(continue_token(rv, &sort_key(last)));
            }
            if !selectors.any() {
                metadata["remainingItemCount"] = json!(matching.len() - l);
            }
            page
        }
        _ => matching,
    };
    let objects: Vec<Value> = page.iter().map(|o| (***o).clone()).collect();
    let mut items = to_served(&req.def, objects, &req.version).await?;
    if let Some(include) = req.table {
        let table = crate::table::table(&req.def, &req.version, &items, metadata, include, true);
        return Ok(json_response(StatusCode::OK, &table));
    }
    if req.partial {
        let list = json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
            "items": items.iter().map(partial).collect::<Vec<_>>(),
        });
        return Ok(json_response(StatusCode::OK, &list));
    }
    if !req.def.custom {
        for item in &mut items {
            if let Some(m) = item.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
        }
    }
    let list = json!({
        "kind": req.def.list_kind,
        "apiVersion": req.api_version(),
        "metadata": metadata,
        "items": items,
    });
    Ok(json_response(StatusCode::OK, &list))
}
