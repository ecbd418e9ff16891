//! create, update and patch (including server-side apply): one pipeline like kube-apiserver's
//! generic registry: decode, prune and default, prepare, validate, track fields, skip no-ops, store.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::read::served;
use super::{Req, decode_object, json_response};
use crate::convert::to_storage;
use crate::error::{ApiError, ApiResult, Cause, cause};
use crate::meta;
use crate::patch::{PatchType, apply_patch};
use crate::resources::ResourceDef;
use crate::server::Shared;
use crate::ssa::fieldset::Schema;
use crate::ssa::{Reset, Tracking, track_apply, track_update};
use crate::store::Store;

/// Creates the namespaces every cluster starts with.
pub async fn seed(shared: &Shared) {
    let mut store = shared.store.lock().await;
    let key = (String::new(), "namespaces".to_string());
    let now = meta::now();
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        store.put(
            &key,
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "uid": meta::new_uid(), "creationTimestamp": now,
                    "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }),
        );
    }
}

/// Checks and fills `apiVersion` and `kind` of a request body.
fn check_type(req: &Req, object: &mut Value) -> ApiResult<()> {
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
fn check_identity(req: &Req, object: &mut Value) -> ApiResult<()> {
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

fn reset_for(def: &ResourceDef, sub: &str) -> Reset {
    match (def.status_subresource, sub) {
        (true, "status") => Reset::AllButStatus,
        (true, _) => Reset::Status,
        _ => Reset::Nothing,
    }
}

/// The "before" of a create for field tracking: the kind's Go zero value.
fn zero(req: &Req) -> Value {
    let mut z = req.def.zero.clone();
    if !z.is_object() {
        z = json!({});
    }
    z["metadata"] = json!({});
    z
}

fn without_metadata(v: &Value) -> Map<String, Value> {
    let mut m = v.as_object().cloned().unwrap_or_default();
    m.remove("metadata");
    m
}

/// Prunes and defaults a custom resource with its version's schema; returns the dropped paths.
fn structural(def: &ResourceDef, version: &str, object: &mut Value, defaults: bool) -> Vec<String> {
    if !def.custom {
        return Vec::new();
    }
    let Some(schema) = def.schema(version) else {
        return Vec::new();
    };
    let removed = crate::schema::prune(object, schema, true);
    if defaults {
        crate::schema::default(object, schema, true);
    }
    removed
}

/// Applies `fieldValidation`: Strict rejects unknown fields, Warn (the default) warns, Ignore drops them silently.
fn field_validation(req: &Req, unknown: &[String], warnings: &mut Vec<String>) -> ApiResult<()> {
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
fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = axum::http::HeaderValue::from_str(&text) {
            resp.headers_mut().append("warning", v);
        }
    }
    resp
}

fn validate(req: &Req, object: &Value, old: Option<&Value>) -> ApiResult<()> {
    let def = &req.def;
    let mut causes: Vec<Cause> =
        meta::validate_meta(object, def.namespaced, def.plural == "namespaces");
    if let Some(old) = old {
        causes.extend(meta::validate_meta_update(old, object));
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
    }
    if causes.is_empty() {
        Ok(())
    } else {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        Err(ApiError::invalid(&def.kind, &def.group, name, causes))
    }
}

fn prepare_create(req: &Req, object: &mut Value) {
    let def = &req.def;
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

fn prepare_update(req: &Req, live: &Value, candidate: Value) -> Value {
    let def = &req.def;
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
    crate::ssa::tidy(&mut object);
    if def.has_generation && sub != "status" && without_metadata(&object) != without_metadata(live)
    {
        let generation = live["metadata"]["generation"].as_i64().unwrap_or(1);
        object["metadata"]["generation"] = json!(generation + 1);
    }
    object
}

async fn ensure_namespace(store: &Store, req: &Req) -> ApiResult<()> {
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

/// What a write request carries.
enum Op {
    Create(Value),
    Update(Value),
    Patch(PatchType, Vec<u8>),
}

/// POST: create.
pub async fn create(shared: &Shared, req: &Req, body: &[u8]) -> ApiResult<Response> {
    if req.subresource.is_some() {
        return Err(ApiError::method_not_supported(
            req.def.qualified(),
            "create",
        ));
    }
    write(shared, req, Op::Create(decode_object(body)?)).await
}

/// PUT: update (or create when the kind allows it).
pub async fn update(shared: &Shared, req: &Req, body: &[u8]) -> ApiResult<Response> {
    write(shared, req, Op::Update(decode_object(body)?)).await
}

/// PATCH of any supported type.
pub async fn patch(shared: &Shared, req: &Req, body: &[u8]) -> ApiResult<Response> {
    let kind = PatchType::from_content_type(&req.content_type)
        .ok_or_else(|| ApiError::unsupported_media_type(&req.content_type))?;
    if kind == PatchType::Strategic && req.def.custom {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {:?})",
                req.content_type
            ),
        ));
    }
    write(shared, req, Op::Patch(kind, body.to_vec())).await
}

fn decode_apply(req: &Req, body: &[u8]) -> ApiResult<Value> {
    let text =
        std::str::from_utf8(body).map_err(|_| ApiError::bad_request("apply patch is not UTF-8"))?;
    let mut config: Value = serde_saphyr::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !config.is_object() {
        return Err(ApiError::bad_request("apply patch must be an object"));
    }
    if config["apiVersion"].as_str().unwrap_or_default().is_empty()
        || config["kind"].as_str().unwrap_or_default().is_empty()
    {
        return Err(ApiError::bad_request(
            "invalid object type: apply patches must specify apiVersion and kind",
        ));
    }
    check_type(req, &mut config)?;
    if !config["metadata"]["managedFields"].is_null() {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    check_identity(req, &mut config)?;
    Ok(config)
}

async fn write(shared: &Shared, req: &Req, op: Op) -> ApiResult<Response> {
    let mut warnings = Vec::new();
    let resp = write_inner(shared, req, op, &mut warnings).await?;
    Ok(with_warnings(resp, &warnings))
}

async fn write_inner(
    shared: &Shared,
    req: &Req,
    op: Op,
    warnings: &mut Vec<String>,
) -> ApiResult<Response> {
    let dry_run = req.dry_run()?;
    let force = req.flag("force");
    let manager = req.field_manager();
    let sub = req.subresource.clone().unwrap_or_default();
    let api_version = req.api_version();
    let now = meta::now();
    let def = req.def.clone();
    let tracking = Tracking {
        schema: def.schema(&req.version),
        builtin: !def.custom,
        manager: &manager,
        api_version: &api_version,
        subresource: &sub,
        reset: reset_for(&def, &sub),
        now: &now,
    };
    let mut store = shared.store.lock().await;
    let ns = req.ns();
    let name = req.name.clone();
    let stored = name.as_ref().and_then(|n| store.get(&def.storage, &ns, n));
    let live = match &stored {
        Some(s) => Some(served(&def, s, &req.version).await?),
        None => None,
    };
    let schema = Schema::root(def.schema(&req.version), !def.custom);
    let mut tracked = false;
    let (candidate, creating) = match op {
        Op::Create(mut obj) => {
            check_type(req, &mut obj)?;
            check_identity(req, &mut obj)?;
            let meta = &mut obj["metadata"];
            if meta["name"].as_str().unwrap_or_default().is_empty()
                && let Some(prefix) = meta["generateName"].as_str().filter(|g| !g.is_empty())
            {
                let prefix: String = prefix.chars().take(58).collect();
                meta["name"] = json!(format!("{prefix}{}", meta::name_suffix()));
            }
            (obj, true)
        }
        Op::Update(mut obj) => {
            check_type(req, &mut obj)?;
            check_identity(req, &mut obj)?;
            match &live {
                Some(l) => {
                    let asked = obj["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default();
                    if !asked.is_empty() && Some(asked) != l["metadata"]["resourceVersion"].as_str()
                    {
                        return Err(ApiError::stale(
                            def.qualified(),
                            name.as_deref().unwrap_or_default(),
                        ));
                    }
                    (obj, false)
                }
                None if def.allow_create_on_update && sub.is_empty() => (obj, true),
                None => {
                    return Err(ApiError::not_found(
                        def.qualified(),
                        name.as_deref().unwrap_or_default(),
                    ));
                }
            }
        }
        Op::Patch(PatchType::Apply, body) => {
            let mut config = decode_apply(req, &body)?;
            let unknown = structural(&def, &req.version, &mut config, false);
            field_validation(req, &unknown, warnings)?;
            if manager.is_empty() || req.param("fieldManager").is_none() {
                return Err(ApiError::invalid(
                    "PatchOptions",
                    "meta.k8s.io",
                    "",
                    vec![cause(
                        "FieldValueRequired",
                        "fieldManager",
                        "Required value: is required for apply patch",
                    )],
                ));
            }
            tracked = true;
            match &live {
                Some(l) => {
                    let asked = config["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default();
                    if !asked.is_empty() && Some(asked) != l["metadata"]["resourceVersion"].as_str()
                    {
                        return Err(ApiError::stale(
                            def.qualified(),
                            name.as_deref().unwrap_or_default(),
                        ));
                    }
                    (track_apply(&tracking, l, &config, force)?, false)
                }
                None if sub.is_empty() => {
                    let mut base = zero(req);
                    base["apiVersion"] = config["apiVersion"].clone();
                    base["kind"] = config["kind"].clone();
                    (track_apply(&tracking, &base, &config, force)?, true)
                }
                None => {
                    return Err(ApiError::not_found(
                        def.qualified(),
                        name.as_deref().unwrap_or_default(),
                    ));
                }
            }
        }
        Op::Patch(kind, body) => {
            let Some(l) = &live else {
                return Err(ApiError::not_found(
                    def.qualified(),
                    name.as_deref().unwrap_or_default(),
                ));
            };
            let patched = apply_patch(l, &body, kind, schema)?;
            if patched["metadata"]["resourceVersion"] != l["metadata"]["resourceVersion"]
                && !patched["metadata"]["resourceVersion"].is_null()
            {
                return Err(ApiError::stale(
                    def.qualified(),
                    name.as_deref().unwrap_or_default(),
                ));
            }
            let mut patched = patched;
            check_type(req, &mut patched)?;
            (patched, false)
        }
    };
    let mut object = candidate;
    let unknown = structural(&def, &req.version, &mut object, true);
    field_validation(req, &unknown, warnings)?;
    if creating {
        prepare_create(req, &mut object);
        validate(req, &object, None)?;
        ensure_namespace(&store, req).await?;
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if store.get(&def.storage, &ns, &name).is_some() {
            return Err(ApiError::already_exists(def.qualified(), &name));
        }
        if !tracked {
            track_update(&tracking, &zero(req), &mut object);
        }
        if dry_run {
            return Ok(json_response(StatusCode::CREATED, &object));
        }
        let storage = to_storage(&def, object).await?;
        let saved = store.put(&def.storage, storage);
        after_write(&mut store, &def);
        shared.gc_wakeup.notify_one();
        let out = served(&def, &saved, &req.version).await?;
        return Ok(json_response(StatusCode::CREATED, &out));
    }
    let Some(live) = live else {
        return Err(ApiError::internal("update without a live object"));
    };
    let mut object = prepare_update(req, &live, object);
    validate(req, &object, Some(&live))?;
    if !tracked {
        track_update(&tracking, &live, &mut object);
    }
    if object == live {
        return Ok(json_response(StatusCode::OK, &live));
    }
    let name = name.unwrap_or_default();
    let finalized = !live["metadata"]["deletionTimestamp"].is_null()
        && object["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty);
    if dry_run {
        return Ok(json_response(StatusCode::OK, &object));
    }
    if finalized {
        let last = store
            .remove(&def.storage, &ns, &name)
            .ok_or_else(|| ApiError::not_found(def.qualified(), &name))?;
        after_write(&mut store, &def);
        shared.gc_wakeup.notify_one();
        let out = served(&def, &last, &req.version).await?;
        return Ok(json_response(StatusCode::OK, &out));
    }
    let storage = to_storage(&def, object).await?;
    let saved = store.put(&def.storage, storage);
    after_write(&mut store, &def);
    shared.gc_wakeup.notify_one();
    let out = served(&def, &saved, &req.version).await?;
    Ok(json_response(StatusCode::OK, &out))
}

/// Follow-ups of a write: CRD changes update what is served.
pub fn after_write(store: &mut Store, def: &ResourceDef) {
    if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
        crate::crd::sync(store);
    }
}
