//! create, update and patch (including server-side apply): one pipeline like kube-apiserver's
//! generic registry: decode, prune and default, prepare, validate, track fields, skip no-ops, store.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::common::{Req, after_write, decode_object, json_response, served};
use super::prepare::{
    check_identity, check_type, ensure_namespace, field_validation, prepare_create, prepare_update,
    reset_for, structural, validate, with_warnings, zero,
};
use crate::admission;
use crate::convert::to_storage;
use crate::error::{ApiError, ApiResult, cause};
use crate::meta;
use crate::patch::{PatchType, apply_patch};
use crate::ssa::fieldset::Schema;
use crate::ssa::{Tracking, track_apply, track_update};
use crate::state::Shared;

/// What a write request carries.
#[derive(Clone)]
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

/// How many times a write is tried again when the object changed while admission webhooks were
/// called (kube's `GuaranteedUpdate` tries again with the fresh object, admission included).
const ADMISSION_RETRIES: usize = 5;

/// What one try of a write came to.
enum Outcome {
    Done(Response),
    /// The object changed while the store was unlocked for admission webhooks.
    Changed,
}

async fn write(shared: &Shared, req: &Req, op: Op) -> ApiResult<Response> {
    for _ in 0..ADMISSION_RETRIES {
        let mut warnings = Vec::new();
        if let Outcome::Done(resp) = write_inner(shared, req, op.clone(), &mut warnings).await? {
            return Ok(with_warnings(resp, &warnings));
        }
    }
    Err(ApiError::conflict(
        req.def.qualified(),
        req.name.as_deref().unwrap_or_default(),
        "the object has been modified; please apply your changes to the latest version and try again",
    ))
}

/// Runs admission webhooks of `phase` on `object` with the store unlocked (a webhook may call this
/// server back), then locks it again; `None` when the stored object changed meanwhile.
async fn admit<'a>(
    shared: &'a Shared,
    store: tokio::sync::MutexGuard<'a, crate::store::Store>,
    phase: admission::Phase,
    attrs: &admission::Attributes<'_>,
    object: Value,
    live: Option<&Value>,
    warnings: &mut Vec<String>,
) -> ApiResult<Option<(tokio::sync::MutexGuard<'a, crate::store::Store>, Value)>> {
    let hooks = admission::matching(&store, phase, attrs);
    if hooks.is_empty() {
        return Ok(Some((store, object)));
    }
    let version = |store: &crate::store::Store| {
        store
            .get(&attrs.def.storage, attrs.namespace, attrs.name)
            .map(|o| o["metadata"]["resourceVersion"].clone())
    };
    let before = version(&store);
    drop(store);
    let object = match phase {
        admission::Phase::Mutating => {
            let mut mutated = admission::mutate(&hooks, attrs, object, live, warnings).await?;
            // What a webhook patched in is pruned and defaulted again.
            structural(attrs.def, attrs.version, &mut mutated, true)?;
            mutated
        }
        admission::Phase::Validating => {
            admission::validate(&hooks, attrs, &object, live, warnings).await?;
            object
        }
    };
    let store = shared.store.lock().await;
    if version(&store) != before {
        return Ok(None);
    }
    Ok(Some((store, object)))
}

async fn write_inner(
    shared: &Shared,
    req: &Req,
    op: Op,
    warnings: &mut Vec<String>,
) -> ApiResult<Outcome> {
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
    let store = shared.store.lock().await;
    let ns = req.ns();
    let name = req.name.clone();
    let stored = name.as_ref().and_then(|n| store.get(&def.storage, &ns, n));
    let live = match &stored {
        Some(s) => Some(served(&def, s, &req.version).await?),
        None => None,
    };
    let schema = Schema::root(def.schema(&req.version), !def.custom);
    let not_found = || ApiError::not_found(def.qualified(), name.as_deref().unwrap_or_default());
    let stale = || ApiError::stale(def.qualified(), name.as_deref().unwrap_or_default());
    let mut tracked = false;
    let options_kind = match &op {
        Op::Create(_) => "CreateOptions",
        Op::Update(_) => "UpdateOptions",
        Op::Patch(..) => "PatchOptions",
    };
    let (candidate, creating) = match op {
        Op::Create(mut obj) => {
            check_type(req, &mut obj)?;
            check_identity(req, &mut obj)?;
            // The etcd3 store rejects it with a plain error that becomes 500/Unknown; an
            // unparsable or zero resourceVersion is ignored there.
            let asked = obj["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            if asked.parse::<u64>().is_ok_and(|rv| rv > 0) {
                return Err(ApiError::new(
                    500,
                    "Unknown",
                    "resourceVersion should not be set on objects to be created",
                ));
            }
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
                    if !resource_version_matches(&obj, l) {
                        return Err(stale());
                    }
                    (obj, false)
                }
                None if def.allow_create_on_update && sub.is_empty() => (obj, true),
                None => {
                    return Err(not_found());
                }
            }
        }
        Op::Patch(PatchType::Apply, body) => {
            let mut config = decode_apply(req, &body)?;
            let unknown = structural(&def, &req.version, &mut config, false)?;
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
                    if !resource_version_matches(&config, l) {
                        return Err(stale());
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
                    return Err(not_found());
                }
            }
        }
        Op::Patch(kind, body) => {
            let Some(l) = &live else {
                return Err(not_found());
            };
            let patched = apply_patch(l, &body, kind, schema)?;
            if patched["metadata"]["resourceVersion"] != l["metadata"]["resourceVersion"]
                && !patched["metadata"]["resourceVersion"].is_null()
            {
                return Err(stale());
            }
            let mut patched = patched;
            check_type(req, &mut patched)?;
            (patched, false)
        }
    };
    if let Some(l) = &live {
        // The object's uid is a precondition of the storage update, as in the generic registry.
        let asked = candidate["metadata"]["uid"].as_str().unwrap_or_default();
        let actual = l["metadata"]["uid"].as_str().unwrap_or_default();
        if !asked.is_empty() && asked != actual {
            return Err(ApiError::conflict(
                def.qualified(),
                name.as_deref().unwrap_or_default(),
                &format!(
                    "Precondition failed: UID in precondition: {asked}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    let mut object = candidate;
    let unknown = structural(&def, &req.version, &mut object, true)?;
    field_validation(req, &unknown, warnings)?;
    let object_name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let attrs = admission::Attributes {
        def: &def,
        version: &req.version,
        subresource: &sub,
        operation: if creating { "CREATE" } else { "UPDATE" },
        namespace: &ns,
        name: &object_name,
        dry_run,
        options_kind,
    };
    let mutating = admission::Phase::Mutating;
    let Some((store, object)) = admit(
        shared,
        store,
        mutating,
        &attrs,
        object,
        live.as_ref(),
        warnings,
    )
    .await?
    else {
        return Ok(Outcome::Changed);
    };
    let mut store = store;
    let mut object = object;
    let validating = admission::Phase::Validating;
    if creating {
        prepare_create(req, &mut object);
        validate(req, &object, None)?;
        let Some((admitted, mut object)) =
            admit(shared, store, validating, &attrs, object, None, warnings).await?
        else {
            return Ok(Outcome::Changed);
        };
        store = admitted;
        ensure_namespace(&store, req).await?;
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(existing) = store.get(&def.storage, &ns, &name) {
            let mut err = ApiError::already_exists(def.qualified(), &name);
            if !existing["metadata"]["deletionTimestamp"].is_null() {
                err.message = format!("object is being deleted: {}", err.message);
            }
            return Err(err);
        }
        if !tracked {
            track_update(&tracking, &zero(req), &mut object);
        }
        if dry_run {
            return Ok(Outcome::Done(json_response(StatusCode::CREATED, &object)));
        }
        let storage = to_storage(&def, object).await?;
        let saved = store.put(&def.storage, storage);
        after_write(&mut store, &def);
        shared.gc_wakeup.notify_one();
        let out = served(&def, &saved, &req.version).await?;
        return Ok(Outcome::Done(json_response(StatusCode::CREATED, &out)));
    }
    let Some(live) = live else {
        return Err(ApiError::internal("update without a live object"));
    };
    let object = prepare_update(req, &live, object);
    validate(req, &object, Some(&live))?;
    let Some((admitted, mut object)) = admit(
        shared,
        store,
        validating,
        &attrs,
        object,
        Some(&live),
        warnings,
    )
    .await?
    else {
        return Ok(Outcome::Changed);
    };
    store = admitted;
    if !tracked {
        track_update(&tracking, &live, &mut object);
    }
    // As etcd3's GuaranteedUpdate, which skips a write only when the new encoding equals the stored
    // bytes: an object stored in another version than the storage one is written again, in the
    // storage version, even unchanged (what storage version migration relies on).
    let stored_elsewhere = def.custom
        && stored.as_ref().is_some_and(|s| {
            s["apiVersion"].as_str() != Some(def.api_version(&def.storage_version).as_str())
        });
    if object == live && !stored_elsewhere {
        return Ok(Outcome::Done(json_response(StatusCode::OK, &live)));
    }
    let name = name.unwrap_or_default();
    // Namespaces also wait for `spec.finalizers` (the namespace controller's `kubernetes`).
    let finalized = !live["metadata"]["deletionTimestamp"].is_null()
        && object["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty)
        && !(def.group.is_empty()
            && def.plural == "namespaces"
            && object["spec"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty()));
    if dry_run {
        return Ok(Outcome::Done(json_response(StatusCode::OK, &object)));
    }
    if finalized {
        let last = store
            .remove(&def.storage, &ns, &name)
            .ok_or_else(|| ApiError::not_found(def.qualified(), &name))?;
        after_write(&mut store, &def);
        shared.gc_wakeup.notify_one();
        let out = served(&def, &last, &req.version).await?;
        return Ok(Outcome::Done(json_response(StatusCode::OK, &out)));
    }
    let storage = to_storage(&def, object).await?;
    let saved = store.put(&def.storage, storage);
    after_write(&mut store, &def);
    shared.gc_wakeup.notify_one();
    let out = served(&def, &saved, &req.version).await?;
    Ok(Outcome::Done(json_response(StatusCode::OK, &out)))
}

/// Whether `asked` names no `resourceVersion` or the one `live` has (optimistic concurrency).
fn resource_version_matches(asked: &Value, live: &Value) -> bool {
    let asked = asked["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    asked.is_empty() || Some(asked) == live["metadata"]["resourceVersion"].as_str()
}
