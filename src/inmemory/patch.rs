//! Patches: JSON merge patch (RFC 7386) and a simplified strategic merge patch.
//!
//! The strategic merge is what Cluster API core needs on Nodes and Pods, not the full algorithm:
//! - maps merge as in a JSON merge patch; `null` removes a key;
//! - lists of objects in [`MERGE_KEYS`] (`taints`, `conditions`, `addresses`, `containers`,
//!   `ownerReferences`, ...) merge item by item on their merge key, and an item carrying
//!   `"$patch": "delete"` removes the item with its key;
//! - `metadata.finalizers` merges as a set (kube-apiserver's `patchStrategy: merge`);
//! - every other list is replaced whole;
//! - other directives (`$retainKeys`, `$setElementOrder/...`, `$deleteFromPrimitiveList/...`,
//!   `"$patch": "replace"` on maps) are dropped without effect.

use serde_json::{Map, Value};

/// Lists merged by key in a strategic merge patch: field name and the key of its items.
pub const MERGE_KEYS: &[(&str, &str)] = &[
    ("taints", "key"),
    ("conditions", "type"),
    ("addresses", "type"),
    ("containers", "name"),
    ("initContainers", "name"),
    ("volumes", "name"),
    ("env", "name"),
    ("ownerReferences", "uid"),
    ("tolerations", "key"),
];

/// Applies a JSON merge patch.
pub fn merge(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Applies a strategic merge patch, simplified as the module documentation says.
pub fn strategic(target: &mut Value, patch: &Value) {
    strategic_at(target, patch);
}

fn strategic_at(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else {
        return;
    };
    for (key, value) in patch_map {
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            target_map.remove(key);
            continue;
        }
        match (value, target_map.get_mut(key)) {
            (Value::Array(items), Some(Value::Array(current))) if key == "finalizers" => {
                for item in items {
                    if !current.contains(item) {
                        current.push(item.clone());
                    }
                }
            }
            (Value::Array(items), Some(Value::Array(current))) => {
                match MERGE_KEYS.iter().find(|(name, _)| name == key) {
                    Some((_, merge_key)) => merge_list(current, items, merge_key),
                    None => *current = items.clone(),
                }
            }
            (Value::Array(items), _) => {
                let kept = items
                    .iter()
                    .filter(|i| i.get("$patch").and_then(Value::as_str) != Some("delete"))
                    .cloned()
                    .collect();
                target_map.insert(key.clone(), Value::Array(kept));
            }
            (Value::Object(_), Some(current)) => strategic_at(current, value),
            (Value::Object(_), None) => {
                let mut fresh = Value::Object(Map::new());
                strategic_at(&mut fresh, value);
                target_map.insert(key.clone(), fresh);
            }
            _ => {
                target_map.insert(key.clone(), value.clone());
            }
        }
    }
}

fn merge_list(current: &mut Vec<Value>, items: &[Value], merge_key: &str) {
    for item in items {
        let key = item.get(merge_key);
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        let position = key.and_then(|k| current.iter().position(|c| c.get(merge_key) == Some(k)));
        match (position, delete) {
            (Some(at), true) => {
                current.remove(at);
            }
            (None, true) => {}
            (Some(at), false) => {
                if let Some(existing) = current.get_mut(at) {
                    strategic_at(existing, item);
                }
            }
            (None, false) => current.push(item.clone()),
        }
    }
}
