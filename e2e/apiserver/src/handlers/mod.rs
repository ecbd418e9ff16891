//! HTTP routing: discovery paths, resource paths, verbs and query parameters, in this one place.
//! The handlers (`discovery`, `read`, `watch`, `write`, `delete`) share what is in `common` (and
//! the writes `prepare`) and do not import each other.

mod common;
mod delete;
mod discovery;
mod prepare;
mod read;
mod watch;
mod write;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::state::Shared;
use common::Req;

/// The router serving every path.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(dispatch).with_state(shared)
}

fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or_default();
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    q.unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

async fn dispatch(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let resp = match route(&shared, request).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    tracing::debug!(%method, %uri, status = resp.status().as_u16(), "Request");
    resp
}

async fn route(shared: &Arc<Shared>, request: Request) -> ApiResult<Response> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let segments: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode(s, false))
        .collect();
    let seg: Vec<&str> = segments.iter().map(String::as_str).collect();
    let query = parse_query(parts.uri.query());
    let accept = header(&parts.headers, "accept");
    if !accept.is_empty()
        && !accept.contains("json")
        && !accept.contains("*/*")
        && !accept.contains("yaml")
    {
        return Err(ApiError::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: application/json, application/yaml (got {accept})"
            ),
        ));
    }
    if parts.method == Method::GET
        && let Some(resp) = discovery::serve(shared, &seg, &parts.headers).await
    {
        return Ok(resp);
    }
    let (group, version, rest) = match seg.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", "v1", rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Err(ApiError::path_not_found()),
    };
    let (watch_prefix, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let store = shared.store.lock().await;
    let find = |plural: &str| store.find(group, version, plural).cloned();
    let (def, namespace, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if find(plural).is_some_and(|d| d.namespaced) && tail.len() <= 2 =>
        {
            let def = find(plural).ok_or_else(ApiError::path_not_found)?;
            (
                def,
                Some(ns.to_string()),
                tail.first().map(|s| s.to_string()),
                tail.get(1).map(|s| s.to_string()),
            )
        }
        [plural, tail @ ..] if tail.len() <= 2 => {
            let def = find(plural).ok_or_else(ApiError::path_not_found)?;
            if def.namespaced && !tail.is_empty() {
                return Err(ApiError::path_not_found());
            }
            (
                def,
                None,
                tail.first().map(|s| s.to_string()),
                tail.get(1).map(|s| s.to_string()),
            )
        }
        _ => return Err(ApiError::path_not_found()),
    };
    drop(store);
    if let Some(s) = &sub
        && (s != "status" || !def.status_subresource)
    {
        return Err(ApiError::path_not_found());
    }
    let query_for_table = query.clone();
    let req = Req {
        def,
        version: version.to_string(),
        namespace,
        name,
        subresource: sub,
        query,
        user_agent: header(&parts.headers, "user-agent"),
        content_type: header(&parts.headers, "content-type"),
        watch_prefix,
        partial: accept
            .split(',')
            .any(|p| p.contains("as=PartialObjectMetadata")),
        table: crate::table::wants_table(&accept).then(|| {
            crate::table::Include::parse(query_for_table.get("includeObject").map(String::as_str))
        }),
    };
    let method = parts.method.clone();
    let verb = match (&method, req.name.is_some()) {
        (&Method::GET, _) => "",
        (&Method::POST, false) => "create",
        (&Method::PUT, true) => "update",
        (&Method::PATCH, true) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        (m, _) => {
            let verb = m.as_str().to_lowercase();
            return Err(ApiError::method_not_supported(req.def.qualified(), &verb));
        }
    };
    if req.def.namespaced && req.namespace.is_none() && !verb.is_empty() {
        // Only list and watch exist across namespaces.
        return Err(ApiError::method_not_supported(req.def.qualified(), verb));
    }
    let counted = match verb {
        "" if req.name.is_some() => "get",
        "" if req.watch_prefix || req.flag("watch") => "watch",
        "" => "list",
        v => v,
    };
    shared.count(format!("{counted} {}", req.counter_name()));
    if let Some(injected) = shared.faults.answer(counted, &req.counter_name()) {
        return Ok(injected);
    }
    let content_type = req.content_type.to_ascii_lowercase();
    let protobuf = content_type.contains("application/vnd.kubernetes.protobuf");
    if matches!(verb, "create" | "update")
        && !content_type.is_empty()
        && !content_type.contains("json")
        && !content_type.contains("yaml")
        && !protobuf
    {
        return Err(ApiError::unsupported_media_type(&req.content_type));
    }
    let mut body = axum::body::to_bytes(body, 64 << 20)
        .await
        .map_err(|e| ApiError::bad_request(format!("read request body: {e}")))?;
    if protobuf && !body.is_empty() {
        // Built-in kinds in protobuf, as client-go sends them when asked to (the kubeproto crate).
        body = match kubeproto::to_json(&body) {
            Ok(object) => bytes::Bytes::from(object.to_string()),
            Err(kubeproto::ProtobufError::Malformed(why)) => {
                return Err(ApiError::bad_request(format!(
                    "the protobuf body could not be read: {why}"
                )));
            }
            Err(kubeproto::ProtobufError::Unsupported(kind)) => {
                return Err(ApiError::unsupported_media_type(&format!(
                    "{} ({kind}: this test server reads protobuf only for v1/Secret and v1/ConfigMap)",
                    req.content_type
                )));
            }
        };
    }
    let warning = req
        .def
        .version(&req.version)
        .and_then(|v| v.deprecation_warning.clone());
    let result = match verb {
        "" if req.name.is_some() => read::get(shared, &req).await,
        "" if req.watch_prefix || req.flag("watch") => watch::watch(shared, &req).await,
        "" => read::list(shared, &req).await,
        "create" => write::create(shared, &req, &body).await,
        "update" => write::update(shared, &req, &body).await,
        "patch" => write::patch(shared, &req, &body).await,
        "delete" => delete::delete(shared, &req, &body).await,
        _ => delete::delete_collection(shared, &req, &body).await,
    };
    let mut resp = match result {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    if let Some(w) = warning
        && let Ok(v) = HeaderValue::from_str(&format!("299 - {}", Value::String(w)))
    {
        resp.headers_mut().append("warning", v);
    }
    Ok(resp)
}

fn header(headers: &axum::http::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}
