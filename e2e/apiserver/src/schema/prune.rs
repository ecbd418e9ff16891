//! Pruning of unknown fields and application of `default`s.

use serde_json::{Map, Value};

use crate::resources::OBJECT_META_FIELDS;

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn embedded(schema: &Value) -> bool {
    schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true))
}

fn prune_metadata(meta: &mut Value, path: &str, removed: &mut Vec<String>) {
    if let Some(m) = meta.as_object_mut() {
        m.retain(|k, _| {
            let known = OBJECT_META_FIELDS.contains(&k.as_str());
            if !known {
                removed.push(join(path, k));
            }
            known
        });
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Drops fields the schema does not know, like kube-apiserver's structural pruning, and returns
/// the paths it dropped. At the root (and in embedded resources) `apiVersion`, `kind` and
/// `metadata` are kept.
pub fn prune(value: &mut Value, schema: &Value, root: bool) -> Vec<String> {
    let mut removed = Vec::new();
    walk(value, schema, root, "", &mut removed);
    removed
}

fn walk(value: &mut Value, schema: &Value, root: bool, path: &str, removed: &mut Vec<String>) {
    if (root || embedded(schema))
        && let Some(meta) = value.get_mut("metadata")
    {
        prune_metadata(meta, &join(path, "metadata"), removed);
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let keep_unknown = preserves(schema)
                || additional.is_some_and(|a| a.is_object() || a == &Value::Bool(true));
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if (root || embedded(schema))
                    && matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                {
                    continue;
                }
                let child_schema = props
                    .and_then(|p| p.get(&k))
                    .or(additional.filter(|a| a.is_object()));
                match child_schema {
                    Some(cs) => {
                        if let Some(child) = map.get_mut(&k) {
                            walk(child, cs, false, &join(path, &k), removed);
                        }
                    }
                    None if keep_unknown => {}
                    None => {
                        map.remove(&k);
                        removed.push(join(path, &k));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item, item_schema, false, &format!("{path}[{i}]"), removed);
                }
            }
        }
        _ => {}
    }
}

/// Applies `default`s of absent fields, and drops nulls of non-nullable fields first.
pub fn default(value: &mut Value, schema: &Value, root: bool) {
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, ps) in props {
                    if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                        continue;
                    }
                    let nullable = ps.get("nullable") == Some(&Value::Bool(true));
                    if map.get(k) == Some(&Value::Null) && !nullable {
                        map.remove(k);
                    }
                    if !map.contains_key(k)
                        && let Some(d) = ps.get("default")
                    {
                        map.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = map.get_mut(k) {
                        default(child, ps, false);
                    }
                }
            }
            if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let declared: Map<String, Value> = schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                for (k, child) in map.iter_mut() {
                    if !declared.contains_key(k) {
                        default(child, ap, false);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    default(item, item_schema, false);
                }
            }
        }
        _ => {}
    }
}
