//! OpenAPI v3 schema generation for our CRDs: schemars output rewritten into the structural,
//! Kubernetes-flavoured form CAPD's CRDs have (no nulls, no `anyOf` for options, enums as plain
//! string enums, only the defaults we ask for).

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

/// Extension key that carries a default into the CRD (schemars' own defaults are dropped, as
/// they follow serde's `default` attributes, not the API's).
pub const DEFAULT_MARKER: &str = "x-capd-default";

/// Pattern of a `resource.Quantity` string, as Kubernetes validates it.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Generates the schema of `T`, inlined and rewritten for a CRD.
pub fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    // The root schema's title is the Rust type name, not documentation.
    if let Value::Object(root) = &mut value {
        root.remove("title");
    }
    kubeify(&mut value);
    value
}

/// Schema of a `map[string]resource.Quantity` (for `#[schemars(schema_with = ...)]`).
pub fn quantity_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true
        }
    })
}

/// Schema of a Go `int` field: an integer without a format.
pub fn plain_integer(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "integer"})
}

/// Rewrites a schemars schema (in place, recursively) into CRD form.
pub fn kubeify(value: &mut Value) {
    let Value::Object(node) = value else {
        return;
    };
    node.remove("$schema");
    node.remove("nullable");
    // Option<T> of a struct: `anyOf: [T, {type: null}]`; hoist T into this node.
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = node.get(key) {
            let non_null: Vec<Value> = branches
                .iter()
                .filter(|b| !is_null_schema(b))
                .cloned()
                .collect();
            if non_null.len() + 1 == branches.len() && non_null.len() == 1 {
                node.remove(key);
                if let Some(Value::Object(inner)) = non_null.into_iter().next() {
                    for (k, v) in inner {
                        node.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
    // Unit enums whose variants carry docs come out as `oneOf` of constants.
    if let Some(Value::Array(branches)) = node.get("oneOf")
        && let Some(values) = constant_values(branches)
    {
        node.remove("oneOf");
        node.insert("type".into(), Value::String("string".into()));
        node.insert("enum".into(), Value::Array(values));
    }
    if let Some(constant) = node.remove("const") {
        node.insert("enum".into(), Value::Array(vec![constant]));
    }
    // Option<scalar>: `type: [T, "null"]`.
    if let Some(Value::Array(types)) = node.get("type") {
        let non_null: Vec<&Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .collect();
        if non_null.len() == 1 {
            let only = non_null[0].clone();
            node.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = node.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    // schemars follows serde's defaults; the CRD only carries the ones we mark explicitly.
    node.remove("default");
    if let Some(default) = node.remove(DEFAULT_MARKER) {
        node.insert("default".into(), default);
    }
    // A title is the first paragraph of a doc comment: keep the whole text as description.
    if let Some(Value::String(title)) = node.remove("title") {
        let description = match node.remove("description") {
            Some(Value::String(rest)) => format!("{title}\n\n{rest}"),
            _ => title,
        };
        node.insert("description".into(), Value::String(description));
    }
    if let Some(Value::String(description)) = node.get_mut("description") {
        *description = unwrap_paragraphs(description);
    }
    if node.contains_key("properties")
        && matches!(node.get("additionalProperties"), Some(Value::Bool(_)))
    {
        node.remove("additionalProperties");
    }
    if node.get("additionalProperties") == Some(&Value::Bool(true)) {
        node.remove("additionalProperties");
    }
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        for child in props.values_mut() {
            kubeify(child);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = node.get_mut(key) {
            kubeify(child);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = node.get_mut(key) {
            branches.iter_mut().for_each(kubeify);
        }
    }
    if let Some(Value::Array(required)) = node.get_mut("required") {
        required.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        if required.is_empty() {
            node.remove("required");
        }
    }
}

/// Joins the lines of each paragraph of a doc comment, so `kubectl explain` can wrap the text
/// to the terminal; blank lines between paragraphs stay.
fn unwrap_paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
        || schema.get("enum") == Some(&Value::Array(vec![Value::Null]))
        || schema.get("const") == Some(&Value::Null)
}

/// The values of a `oneOf` whose every branch is a single string constant.
fn constant_values(branches: &[Value]) -> Option<Vec<Value>> {
    branches
        .iter()
        .map(|branch| {
            let object = branch.as_object()?;
            if let Some(constant) = object.get("const") {
                return constant.is_string().then(|| constant.clone());
            }
            match object.get("enum")?.as_array()?.as_slice() {
                [single] if single.is_string() => Some(single.clone()),
                _ => None,
            }
        })
        .collect()
}

/// Builds the schema of a whole object: `apiVersion`, `kind`, `metadata`, `spec` and (when the
/// kind has one) `status`.
pub fn root_schema(description: &str, spec: Value, status: Option<Value>) -> Value {
    let mut properties = Map::new();
    properties.insert(
        "apiVersion".into(),
        serde_json::json!({
            "description": "Versioned schema of this object, `infrastructure.cluster.x-k8s.io/<version>`; \
                            the API server converts between versions it serves.",
            "type": "string"
        }),
    );
    properties.insert(
        "kind".into(),
        serde_json::json!({
            "description": "REST resource this object represents, in CamelCase; set by clients, cannot change.",
            "type": "string"
        }),
    );
    properties.insert("metadata".into(), serde_json::json!({"type": "object"}));
    properties.insert("spec".into(), spec);
    if let Some(status) = status {
        properties.insert("status".into(), status);
    }
    serde_json::json!({
        "description": description,
        "type": "object",
        "properties": properties,
    })
}
