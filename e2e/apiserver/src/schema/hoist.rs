//! When kube-apiserver validates a CRD's schema once, at `spec.validation`: its internal CRD type
//! (`apiextensions.CustomResourceDefinitionSpec`) keeps one top-level schema when every version
//! has the same one. `Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_...` compares the
//! versions' `schema` with `apiequality.Semantic.DeepEqual` and, when all are equal, moves it to
//! `spec.validation` and clears the per-version ones; the errors of that schema are then reported
//! at `spec.validation.openAPIV3Schema...`, once, instead of at `spec.versions[i].schema...`.
//! A single version always counts as "all the same".

use serde_json::{Map, Value};

/// `JSONSchemaProps` fields of Go type `string`: `""` decodes to the same as absent.
const STRINGS: [&str; 7] = [
    "id",
    "$schema",
    "description",
    "type",
    "format",
    "title",
    "pattern",
];

/// `JSONSchemaProps` fields of Go type `bool` (not `*bool`): `false` is the same as absent.
const BOOLS: [&str; 6] = [
    "exclusiveMaximum",
    "exclusiveMinimum",
    "uniqueItems",
    "nullable",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
];

/// `JSONSchemaProps` fields that are Go slices or maps: `Semantic.DeepEqual` holds an empty one
/// equal to an absent (nil) one.
const COLLECTIONS: [&str; 11] = [
    "enum",
    "required",
    "allOf",
    "oneOf",
    "anyOf",
    "properties",
    "patternProperties",
    "dependencies",
    "definitions",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
];

/// Subschemas by field: a map of them, a list of them, or one (or a list, or a bool).
const SCHEMA_MAPS: [&str; 4] = [
    "properties",
    "patternProperties",
    "dependencies",
    "definitions",
];
const SCHEMA_LISTS: [&str; 3] = ["allOf", "oneOf", "anyOf"];
const SCHEMA_ONES: [&str; 4] = ["items", "not", "additionalProperties", "additionalItems"];

/// Whether kube-apiserver hoists the versions' schema to `spec.validation`: there is a version,
/// and every version's `schema` (present or not) equals the first one's as the Go types compare.
pub fn hoisted(versions: &[Value]) -> bool {
    let mut schemas = versions.iter().map(|v| v.get("schema").map(validation));
    match schemas.next() {
        Some(first) => schemas.all(|s| s == first),
        None => false,
    }
}

/// A `CustomResourceValidation` as it compares: an absent or null `openAPIV3Schema` is nil.
fn validation(v: &Value) -> Option<Value> {
    v.get("openAPIV3Schema").filter(|s| !s.is_null()).map(props)
}

/// A `JSONSchemaProps` with zero-valued fields dropped, subschemas likewise.
fn props(v: &Value) -> Value {
    let Some(map) = v.as_object() else {
        return v.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let k = key.as_str();
        let zero = value.is_null()
            || (STRINGS.contains(&k) && value == "")
            || (BOOLS.contains(&k) && value == false)
            || (COLLECTIONS.contains(&k) && is_empty(value));
        if zero {
            continue;
        }
        let value = if SCHEMA_MAPS.contains(&k) {
            map_values(value, props)
        } else if SCHEMA_LISTS.contains(&k) {
            list_items(value, props)
        } else if SCHEMA_ONES.contains(&k) {
            match value {
                Value::Array(_) => list_items(value, props),
                other => props(other),
            }
        } else {
            value.clone()
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

fn map_values(v: &Value, f: fn(&Value) -> Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), f(x))).collect()),
        other => other.clone(),
    }
}

fn list_items(v: &Value, f: fn(&Value) -> Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(f).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn version(schema: Value) -> Value {
        json!({"name": "v", "served": true, "storage": false, "schema": {"openAPIV3Schema": schema}})
    }

    #[test]
    fn one_version_or_identical_versions_are_hoisted() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        assert!(hoisted(&[version(schema.clone())]));
        assert!(hoisted(&[version(schema.clone()), version(schema.clone())]));
        assert!(hoisted(&[json!({"name": "a"}), json!({"name": "b"})]));
        assert!(!hoisted(&[]));
    }

    #[test]
    fn zero_values_compare_as_absent_but_pointers_do_not() {
        let plain = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let zeros = json!({"type": "object", "description": "", "required": [], "nullable": false,
            "properties": {"a": {"type": "string", "enum": [], "uniqueItems": false}}});
        assert!(hoisted(&[version(plain.clone()), version(zeros)]));
        let pointer = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": false,
            "properties": {"a": {"type": "string"}}});
        assert!(!hoisted(&[version(plain.clone()), version(pointer)]));
        let other = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        assert!(!hoisted(&[version(plain.clone()), version(other)]));
        assert!(!hoisted(&[version(plain), json!({"name": "v2"})]));
    }
}
