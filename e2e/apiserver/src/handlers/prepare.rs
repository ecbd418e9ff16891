//! Preparation steps of writes: checking identity, pruning and defaulting, preparing for create
//! or update like the registry strategies do, and validation.

use axum::response::Response;
use serde_json::{Map, Value, json};

use super::common::Req;
use crate::error::{ApiError, ApiResult, Cause};
use crate::meta;
use crate::resources::ResourceDef;
use crate::ssa::Reset;
use crate::store::Store;

/// Checks and fills `apiVersion` and `kind` of a request body.
pub(super) fn check_type(req: &Req, object: &mut Value) -> ApiResult<()> {
    let expected = req.api_version();
    match object["apiVersion"].as_str() {
        None | Some("") => object["apiVersion"] = json!(expected),
        Some(v) if v == expected => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            )));
        }
    }
    match object["kind"].as_str() {
        None | Some("") => object["kind"] = json!(req.def.kind),
        Some(k) if k == req.def.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                req.def.kind
            )));
        }
    }
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    Ok(())
}

/// Checks and fills the namespace (and the name, when the URL has one) of a request body.
pub(super) fn check_identity(req: &Req, object: &mut Value) -> ApiResult<()> {
    let meta = &mut object["metadata"];
    if req.def.namespaced {
        let url_ns = req.ns();
        match meta["namespace"].as_str() {
            None | Some("") => meta["namespace"] = json!(url_ns),
            Some(ns) if ns == url_ns => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
    } else if let Some(m) = meta.as_object_mut() {
        m.remove("namespace");
    }
    if let Some(url_name) = &req.name {
        match meta["name"].as_str() {
            None | Some("") => meta["name"] = json!(url_name),
            Some(n) if n == url_name => {}
            Some(n) => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({url_name})"
                )));
            }
        }
    }
    Ok(())
}

pub(super) fn reset_for(def: &ResourceDef, sub: &str) -> Reset {
    match (def.status_subresource, sub) {
        (true, "status") => Reset::AllButStatus,
        (true, _) => Reset::Status,
        _ => Reset::Nothing,
    }
}

/// The "before" of a create for field tracking: the kind's Go zero value.
pub(super) fn zero(req: &Req) -> Value {
    let mut z = req.def.zero.clone();
    if !z.is_object() {
        z = json!({});
    }
    z["metadata"] = json!({});
    z
}

pub(super) fn without_metadata(v: &Value) -> Map<String, Value> {
    let mut m = v.as_object().cloned().unwrap_or_default();
    m.remove("metadata");
    m
}

/// Prunes and defaults a custom resource with its version's schema, or decodes a built-in object
/// through its typed struct; returns the dropped paths.
pub(super) fn structural(
    def: &ResourceDef,
    version: &str,
    object: &mut Value,
    defaults: bool,
) -> ApiResult<Vec<String>> {
    if !def.custom {
        let (decoded, unknown) = crate::typed::decode(def, object)?;
        if defaults {
            *object = decoded;
        } else {
            // An apply configuration keeps its shape (typed zero values would become owned
            // fields); only the unknown fields go.
            for path in &unknown {
                crate::typed::remove_dotted(object, path);
            }
        }
        return Ok(unknown);
    }
    let Some(schema) = def.schema(version) else {
        return Ok(Vec::new());
    };
    let removed = crate::schema::prune(object, schema, true);
    if defaults {
        crate::schema::default(object, schema, true);
    }
    Ok(removed)
}

/// Applies `fieldValidation`: Strict rejects unknown fields, Warn (the default) warns, Ignore drops them silently.
pub(super) fn field_validation(
    req: &Req,
    unknown: &[String],
    warnings: &mut Vec<String>,
) -> ApiResult<()> {
    if unknown.is_empty() {
        return Ok(());
    }
    match req.param("fieldValidation") {
        Some("Ignore") => Ok(()),
        Some("Strict") => {
            let fields: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field {f:?}"))
                .collect();
            Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                fields.join(", "),
                kind = req.def.kind,
                version = req.version,
            )))
        }
        Some("Warn") | None => {
            warnings.extend(unknown.iter().map(|f| format!("unknown field {f:?}")));
            Ok(())
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "fieldValidation {other:?} is not supported; use Ignore, Warn or Strict"
        ))),
    }
}

/// Adds `Warning` headers, as kube-apiserver does for unknown fields.
pub(super) fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = axum::http::HeaderValue::from_str(&text) {
            resp.headers_mut().append("warning", v);
        }
    }
    resp
}

pub(super) fn validate(req: &Req, object: &Value, old: Option<&Value>) -> ApiResult<()> {
    let def = &req.def;
    let mut causes: Vec<Cause> =
        meta::validate_meta(object, def.namespaced, def.plural == "namespaces");
    if let Some(old) = old {
        causes.extend(meta::validate_meta_update(old, object));
        causes.extend(crate::builtin::validate_update(def, old, object));
    }
    if def.custom
        && let Some(schema) = def.schema(&req.version)
    {
        let mut body = object.clone();
        if let Some(m) = body.as_object_mut() {
            m.remove("metadata");
        }
        crate::schema::validate(&body, schema, "", &mut causes);
    }
    if def.group == "apiextensions.k8s.io" {
        causes.extend(crate::crd::validate(object));
        if req.subresource.as_deref() != Some("status") {
            causes.extend(crate::crd::validate_stored_versions(object));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        Err(ApiError::invalid(&def.kind, &def.group, name, causes))
    }
}

pub(super) fn prepare_create(req: &Req, object: &mut Value) {
    let def = &req.def;
    crate::builtin::normalise(def, object);
    if def.status_subresource
        && (def.custom || def.group == "apiextensions.k8s.io")
        && let Some(m) = object.as_object_mut()
    {
        m.remove("status");
    }
    let meta = &mut object["metadata"];
    if let Some(m) = meta.as_object_mut() {
        for f in [
            "resourceVersion",
            "selfLink",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            m.remove(f);
        }
    }
    meta["uid"] = json!(meta::new_uid());
    meta["creationTimestamp"] = json!(meta::now());
    if def.has_generation {
        meta["generation"] = json!(1);
    } else if let Some(m) = meta.as_object_mut() {
        m.remove("generation");
    }
    if def.plural == "namespaces" && def.group.is_empty() {
        let name = object["metadata"]["name"].clone();
        object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        object["spec"] = json!({"finalizers": ["kubernetes"]});
        object["status"] = json!({"phase": "Active"});
    }
    if def.group == "apiextensions.k8s.io" {
        crate::crd::prepare_create(object);
    }
}

pub(super) fn prepare_update(req: &Req, live: &Value, mut candidate: Value) -> Value {
    let def = &req.def;
    crate::builtin::normalise(def, &mut candidate);
    let sub = req.subresource.as_deref().unwrap_or_default();
    let mut object = if sub == "status" {
        let mut o = live.clone();
        match candidate.get("status") {
            Some(s) => o["status"] = s.clone(),
            None => {
                if let Some(m) = o.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        if !def.custom && def.group != "apiextensions.k8s.io" {
            for f in ["labels", "annotations"] {
                o["metadata"][f] = candidate["metadata"][f].clone();
            }
        }
        o["metadata"]["managedFields"] = candidate["metadata"]["managedFields"].clone();
        o
    } else {
        let mut o = candidate;
        if def.status_subresource {
            match live.get("status") {
                Some(s) => o["status"] = s.clone(),
                None => {
                    if let Some(m) = o.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        o
    };
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
    ] {
        match live["metadata"].get(f) {
            Some(v) => object["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = object["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    if let Some(m) = object["metadata"].as_object_mut() {
        m.remove("selfLink");
        if m.get("managedFields").is_some_and(Value::is_null) {
            m.remove("managedFields");
        }
    }
    if def.group == "apiextensions.k8s.io" && sub != "status" {
        crate::crd::prepare_update(&mut object);
    }
    crate::ssa::tidy(&mut object);
    if def.has_generation && sub != "status" && without_metadata(&object) != without_metadata(live)
    {
        let generation = live["metadata"]["generation"].as_i64().unwrap_or(1);
        object["metadata"]["generation"] = json!(generation + 1);
    }
    object
}

pub(super) async fn ensure_namespace(store: &Store, req: &Req) -> ApiResult<()> {
    if !req.def.namespaced {
        return Ok(());
    }
    let ns = req.ns();
    let key = (String::new(), "namespaces".to_string());
    let namespace = store.get(&key, "", &ns).ok_or_else(|| {
        ApiError::not_found(
            crate::error::Qualified {
                group: "",
                resource: "namespaces",
            },
            &ns,
        )
    })?;
    if !namespace["metadata"]["deletionTimestamp"].is_null() {
        let mut err = ApiError::new(
            403,
            "Forbidden",
            format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                req.def.plural, "",
            ),
        );
        err.details = Some(
            json!({"kind": req.def.plural, "group": req.def.group, "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]}),
        );
        return Err(err);
    }
    Ok(())
}
