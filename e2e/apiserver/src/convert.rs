//! Conversion of stored objects to served versions and back: `None`, `Webhook`, and the
//! events.k8s.io view of core Events.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::resources::{Conversion, Representation, ResourceDef};

/// Converts stored objects to the served version `version` of `def`.
pub async fn to_served(
    def: &ResourceDef,
    objects: Vec<Value>,
    version: &str,
) -> ApiResult<Vec<Value>> {
    if def.representation == Representation::EventsV1 {
        return Ok(objects.iter().map(core_to_events_v1).collect());
    }
    convert(def, objects, version).await
}

/// Converts an object of a served version to the storage version.
pub async fn to_storage(def: &ResourceDef, object: Value) -> ApiResult<Value> {
    if def.representation == Representation::EventsV1 {
        return Ok(events_v1_to_core(&object));
    }
    let mut out = convert(def, vec![object], &def.storage_version.clone()).await?;
    out.pop()
        .ok_or_else(|| ApiError::internal("conversion returned no object"))
}

/// Converts objects to `version` following the resource's conversion strategy.
pub async fn convert(
    def: &ResourceDef,
    mut objects: Vec<Value>,
    version: &str,
) -> ApiResult<Vec<Value>> {
    let desired = def.api_version(version);
    let pending: Vec<usize> = objects
        .iter()
        .enumerate()
        .filter(|(_, o)| o["apiVersion"].as_str() != Some(desired.as_str()))
        .map(|(i, _)| i)
        .collect();
    if pending.is_empty() {
        return Ok(objects);
    }
    match &def.conversion {
        Conversion::None => {
            for i in pending {
                objects[i]["apiVersion"] = json!(desired);
            }
            Ok(objects)
        }
        Conversion::Webhook { .. } => {
            let batch: Vec<&Value> = pending.iter().map(|&i| &objects[i]).collect();
            let converted = call_webhook(def, &batch, &desired).await?;
            let restored: Vec<(usize, Value)> = pending
                .iter()
                .zip(batch)
                .zip(converted)
                .map(|((slot, original), mut new)| {
                    restore_metadata(original, &mut new);
                    (*slot, new)
                })
                .collect();
            for (slot, new) in restored {
                objects[slot] = new;
            }
            Ok(objects)
        }
    }
}

/// Whether `objects` convert into `version`: the review [`convert`] sends, its answer checked
/// and dropped (a watch cache's fill, [`crate::cacher`]); nothing is copied before the webhook is
/// called.
///
/// # Errors
/// As [`convert`].
pub async fn converts(def: &ResourceDef, objects: &[&Value], version: &str) -> ApiResult<()> {
    let desired = def.api_version(version);
    let pending: Vec<&Value> = objects
        .iter()
        .copied()
        .filter(|o| o["apiVersion"].as_str() != Some(desired.as_str()))
        .collect();
    match &def.conversion {
        Conversion::Webhook { .. } if !pending.is_empty() => {
            call_webhook(def, &pending, &desired).await.map(drop)
        }
        _ => Ok(()),
    }
}

/// Keeps the metadata the webhook may not change (all but labels and annotations).
fn restore_metadata(original: &Value, converted: &mut Value) {
    let mut meta = original["metadata"].clone();
    for f in ["labels", "annotations"] {
        match converted["metadata"].get(f) {
            Some(v) => meta[f] = v.clone(),
            None => {
                if let Some(m) = meta.as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    converted["metadata"] = meta;
}

/// Sends `objects` to the resource's conversion webhook for `desired`; the converted objects,
/// checked.
async fn call_webhook(
    def: &ResourceDef,
    objects: &[&Value],
    desired: &str,
) -> ApiResult<Vec<Value>> {
    let failed = |why: String| {
        ApiError::internal(format!(
            "conversion webhook for {}, Kind={} failed: {why}",
            def.api_version(&def.storage_version),
            def.kind
        ))
    };
    let Conversion::Webhook {
        url,
        ca_bundle,
        service,
        server_name,
        ..
    } = &def.conversion
    else {
        return Err(failed("the resource has no conversion webhook".into()));
    };
    let (url, ca_bundle, service, server_name) = (
        url.as_deref(),
        ca_bundle.as_deref(),
        service.as_deref(),
        server_name.as_deref(),
    );
    let Some(url) = url else {
        let svc = service.unwrap_or("unknown/unknown");
        let (namespace, name) = svc.split_once('/').unwrap_or(("", svc));
        return Err(failed(format!(
            "Post \"https://{name}.{namespace}.svc:443\": service {svc} is not reachable from the test API server (give it an endpoint with Options::service_endpoints or --service-endpoint)"
        )));
    };
    let uid = crate::meta::new_uid();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    });
    let body = review.to_string();
    let (code, answer) = crate::webhook::post_json(
        url,
        ca_bundle,
        server_name,
        body.as_bytes(),
        Duration::from_secs(30),
    )
    .await
    .map_err(|e| failed(format!("Post {url:?}: {}", crate::webhook::chain(&e))))?;
    if code != 200 {
        return Err(failed(format!("conversion webhook answered HTTP {code}")));
    }
    let answer: Value = serde_json::from_slice(&answer)
        .map_err(|e| failed(format!("decode ConversionReview: {e}")))?;
    let response = &answer["response"];
    if response["uid"].as_str() != Some(uid.as_str()) {
        return Err(failed(format!(
            "expected response uid {uid:?}, got {:?}",
            response["uid"]
        )));
    }
    if response["result"]["status"].as_str() != Some("Success") {
        let msg = response["result"]["message"]
            .as_str()
            .unwrap_or("conversion failed");
        return Err(failed(msg.to_string()));
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != objects.len() {
        return Err(failed(format!(
            "returned {} objects, expected {}",
            converted.len(),
            objects.len()
        )));
    }
    for c in &converted {
        if c["apiVersion"].as_str() != Some(desired) {
            return Err(failed(format!(
                "invalid apiVersion {:?} in converted object, expected {desired:?}",
                c["apiVersion"]
            )));
        }
    }
    Ok(converted)
}

const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn rename(object: &Value, from_core: bool, api_version: &str) -> Value {
    let mut out = Map::new();
    if let Some(map) = object.as_object() {
        for (k, v) in map {
            let renamed = RENAMES
                .iter()
                .find(|(core, ev)| if from_core { core == k } else { ev == k })
                .map(|(core, ev)| if from_core { *ev } else { *core })
                .unwrap_or(k.as_str());
            if v.is_null() || (renamed == "deprecatedCount" && v == &json!(0)) {
                continue;
            }
            out.insert(renamed.to_string(), v.clone());
        }
    }
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

/// The events.k8s.io/v1 view of a core/v1 Event.
pub fn core_to_events_v1(object: &Value) -> Value {
    rename(object, true, "events.k8s.io/v1")
}

/// The core/v1 Event stored for an events.k8s.io/v1 Event.
pub fn events_v1_to_core(object: &Value) -> Value {
    let mut core = rename(object, false, "v1");
    if core.get("source").is_none() {
        core["source"] = json!({});
    }
    core
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_between_core_and_events_v1() {
        let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "Started",
            "reportingController": "ctl", "reportingInstance": "i", "action": "Run", "type": "Normal",
            "eventTime": "2024-01-01T00:00:00.000000Z"});
        let core = events_v1_to_core(&ev);
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["reportingComponent"], "ctl");
        let back = core_to_events_v1(&core);
        assert_eq!(back["note"], "hello");
        assert_eq!(back["regarding"], ev["regarding"]);
    }
}
