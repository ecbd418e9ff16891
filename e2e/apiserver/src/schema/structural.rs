//! The checks kube-apiserver makes on a CRD version's `openAPIV3Schema` before accepting the CRD:
//! the OpenAPI subset CRDs may use, and the structural-schema rules of apiextensions-apiserver
//! (`schema.ValidateStructural`: invariants and completeness), with kube's field paths and messages.

use serde_json::{Map, Value, json};

use crate::error::{Cause, cause, show_value};

type Schema = Map<String, Value>;

const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// Where a schema sits, which decides the message for a missing `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// Checks one schema; `path` is `spec.versions[i].schema.openAPIV3Schema`, or
/// `spec.validation.openAPIV3Schema` when every version has this one. The
/// structural errors are sorted by their text, as kube-apiserver sorts them.
pub fn validate_crd_schema(schema: &Value, path: &str) -> Vec<Cause> {
    let Some(schema) = schema.as_object() else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    openapi_subset(schema, path, &mut causes);
    let mut structural = Vec::new();
    invariants(schema, Level::Root, path, &mut structural);
    value_completeness(schema, schema, path, path, &mut structural);
    structural.sort_by_cached_key(|c| format!("{}: {}", c.field, c.message));
    causes.extend(structural);
    causes
}

fn child(path: &str, name: &str) -> String {
    format!("{path}.{name}")
}

fn key(path: &str, name: &str, key: &str) -> String {
    format!("{path}.{name}[{key}]")
}

fn flag(s: &Schema, name: &str) -> bool {
    s.get(name) == Some(&Value::Bool(true))
}

fn type_of(s: &Schema) -> &str {
    s.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// Go's zero value test: absent, null, false, "", 0-length list or map.
fn is_set(s: &Schema, name: &str) -> bool {
    match s.get(name) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(v)) => !v.is_empty(),
        Some(Value::Array(v)) => !v.is_empty(),
        Some(Value::Object(v)) => !v.is_empty(),
        Some(_) => true,
    }
}

fn object<'a>(s: &'a Schema, name: &str) -> Option<&'a Schema> {
    s.get(name).and_then(Value::as_object)
}

fn list<'a>(s: &'a Schema, name: &str) -> impl Iterator<Item = (usize, &'a Schema)> {
    s.get(name)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, v)| v.as_object().map(|o| (i, o)))
}

fn properties(s: &Schema) -> impl Iterator<Item = (&String, &Schema)> {
    object(s, "properties")
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_object().map(|o| (k, o)))
}

fn required(field: String, detail: &str) -> Cause {
    cause(
        "FieldValueRequired",
        field,
        format!("Required value: {detail}"),
    )
}

fn forbidden(field: String, detail: &str) -> Cause {
    cause("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

fn invalid(field: String, value: &Value, detail: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {}: {detail}", show_value(value)),
    )
}

/// `ValidateCustomResourceDefinitionOpenAPISchema`: the parts of OpenAPI v3 CRDs may not use.
fn openapi_subset(s: &Schema, path: &str, out: &mut Vec<Cause>) {
    let ty = type_of(s);
    if !ty.is_empty() && !TYPES.contains(&ty) {
        let supported: Vec<String> = TYPES.iter().map(|t| format!("{t:?}")).collect();
        out.push(cause(
            "FieldValueNotSupported",
            child(path, "type"),
            format!(
                "Unsupported value: {ty:?}: supported values: {}",
                supported.join(", ")
            ),
        ));
    }
    if s.contains_key("$ref") {
        out.push(forbidden(child(path, "$ref"), "$ref is not supported"));
    }
    if matches!(s.get("items"), Some(Value::Array(_))) {
        out.push(forbidden(
            child(path, "items"),
            "items must be a schema object and not an array",
        ));
    }
    if let Some(additional) = s.get("additionalProperties") {
        if is_set(s, "properties") && (additional == &Value::Bool(false) || additional.is_object())
        {
            out.push(forbidden(
                child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let Some(a) = additional.as_object() {
            openapi_subset(a, &child(path, "additionalProperties"), out);
        }
    }
    for (k, p) in properties(s) {
        openapi_subset(p, &key(path, "properties", k), out);
    }
    if let Some(not) = object(s, "not") {
        openapi_subset(not, &child(path, "not"), out);
    }
    for junctor in ["allOf", "oneOf", "anyOf"] {
        for (i, n) in list(s, junctor) {
            openapi_subset(n, &format!("{path}.{junctor}[{i}]"), out);
        }
    }
    match s.get("items") {
        Some(Value::Object(items)) => openapi_subset(items, &child(path, "items"), out),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if let Some(item) = item.as_object() {
                    openapi_subset(item, &format!("{path}.items[{i}]"), out);
                }
            }
        }
        _ => {}
    }
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        out.push(invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
}

/// `anyOf: [{type: integer}, {type: string}]`, the shape int-or-string may take.
fn int_or_string_any_of(s: &Schema) -> bool {
    s.get("anyOf") == Some(&json!([{"type": "integer"}, {"type": "string"}]))
}

fn int_or_string_all_of(s: &Schema) -> bool {
    list(s, "allOf")
        .next()
        .is_some_and(|(i, first)| i == 0 && int_or_string_any_of(first))
}

/// `validateStructuralInvariants`.
fn invariants(s: &Schema, level: Level, path: &str, out: &mut Vec<Cause>) {
    let ty = type_of(s);
    let items = object(s, "items");
    if ty == "array" && items.is_none() {
        out.push(required(child(path, "items"), "must be specified"));
    }
    if let Some(items) = items {
        invariants(items, Level::Item, &child(path, "items"), out);
    }
    for (k, p) in properties(s) {
        invariants(p, Level::Field, &key(path, "properties", k), out);
    }
    let additional = s.get("additionalProperties").filter(|a| !a.is_null());
    if let Some(additional) = additional {
        if level == Level::Root {
            out.push(forbidden(
                child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(a) = additional.as_object() {
            invariants(a, Level::Field, &child(path, "additionalProperties"), out);
        }
    }
    let int_or_string = flag(s, "x-kubernetes-int-or-string");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        out.push(invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        out.push(invalid(
            child(path, "x-kubernetes-embedded-resource"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    value_validation(
        s,
        int_or_string_any_of(s),
        int_or_string_all_of(s),
        level,
        path,
        out,
    );
    if embedded && ty != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        if ty.is_empty() {
            out.push(required(child(path, "type"), detail));
        } else {
            out.push(invalid(child(path, "type"), &json!(ty), detail));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        out.push(required(child(path, "type"), detail));
    }
    if embedded && additional.is_some() {
        out.push(forbidden(
            child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        out.push(invalid(
            child(path, "type"),
            &json!(ty),
            "must be object at the root",
        ));
    }
    let check_metadata = level == Level::Root || embedded;
    let props = object(s, "properties");
    for name in ["kind", "apiVersion"] {
        if let Some(p) = props.and_then(|p| p.get(name)).and_then(Value::as_object)
            && check_metadata
            && type_of(p) != "string"
        {
            out.push(invalid(
                child(&key(path, "properties", name), "type"),
                &json!(type_of(p)),
                "must be string",
            ));
        }
    }
    if let Some(metadata) = props
        .and_then(|p| p.get("metadata"))
        .and_then(Value::as_object)
    {
        let at = key(path, "properties", "metadata");
        if check_metadata && type_of(metadata) != "object" {
            out.push(invalid(
                child(&at, "type"),
                &json!(type_of(metadata)),
                "must be object",
            ));
        }
        if level == Level::Root && metadata_specified(metadata) {
            out.push(forbidden(
                at,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if embedded && !preserve && !is_set(s, "properties") {
        out.push(required(
            child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Whether the root's `metadata` schema says more than its type, a default, and the schemas of
/// `name` and `generateName` (kube-apiserver owns ObjectMeta's schema).
fn metadata_specified(metadata: &Schema) -> bool {
    metadata.iter().any(|(k, _)| match k.as_str() {
        "type" | "default" | "example" | "externalDocs" | "$schema" | "id" => false,
        "properties" => {
            let names: Vec<&String> = object(metadata, "properties")
                .map(|p| p.keys().collect())
                .unwrap_or_default();
            !names.iter().all(|n| *n == "name" || *n == "generateName")
        }
        other => is_set(metadata, other),
    })
}

/// `validateValueValidation`: the schemas under `anyOf`, `allOf`, `oneOf` and `not`.
fn value_validation(
    s: &Schema,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    level: Level,
    path: &str,
    out: &mut Vec<Cause>,
) {
    if !skip_any_of {
        for (i, n) in list(s, "anyOf") {
            nested(n, false, level, &format!("{path}.anyOf[{i}]"), out);
        }
    }
    for (i, n) in list(s, "allOf") {
        let skip = skip_first_all_of_any_of && i == 0;
        nested(n, skip, level, &format!("{path}.allOf[{i}]"), out);
    }
    for (i, n) in list(s, "oneOf") {
        nested(n, false, level, &format!("{path}.oneOf[{i}]"), out);
    }
    if let Some(not) = object(s, "not") {
        nested(not, false, level, &child(path, "not"), out);
    }
}

/// `validateNestedValueValidation`: a schema under a junctor may only constrain values.
fn nested(v: &Schema, skip_any_of: bool, level: Level, path: &str, out: &mut Vec<Cause>) {
    value_validation(v, skip_any_of, false, level, path, out);
    if let Some(items) = object(v, "items") {
        nested(items, false, level, &child(path, "items"), out);
    }
    for (k, p) in properties(v) {
        nested(p, false, Level::Field, &key(path, "properties", k), out);
    }
    let rules: [(&str, &str, bool); 12] = [
        ("type", "must be empty to be structural", is_set(v, "type")),
        (
            "additionalProperties",
            "must be undefined to be structural",
            v.get("additionalProperties").is_some_and(|a| !a.is_null()),
        ),
        (
            "default",
            "must be undefined to be structural",
            v.get("default").is_some_and(|d| !d.is_null()),
        ),
        (
            "title",
            "must be empty to be structural",
            is_set(v, "title"),
        ),
        (
            "description",
            "must be empty to be structural",
            is_set(v, "description"),
        ),
        (
            "nullable",
            "must be false to be structural",
            flag(v, "nullable"),
        ),
        (
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
            flag(v, "x-kubernetes-preserve-unknown-fields"),
        ),
        (
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
            flag(v, "x-kubernetes-embedded-resource"),
        ),
        (
            "x-kubernetes-int-or-string",
            "must be false to be structural",
            flag(v, "x-kubernetes-int-or-string"),
        ),
        (
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
            is_set(v, "x-kubernetes-list-map-keys"),
        ),
        (
            "x-kubernetes-list-type",
            "must be undefined to be structural",
            v.get("x-kubernetes-list-type")
                .is_some_and(|t| !t.is_null()),
        ),
        (
            "x-kubernetes-map-type",
            "must be undefined to be structural",
            v.get("x-kubernetes-map-type").is_some_and(|t| !t.is_null()),
        ),
    ];
    for (name, detail, broken) in rules {
        if broken {
            out.push(forbidden(child(path, name), detail));
        }
    }
    if is_set(v, "x-kubernetes-validations") {
        out.push(forbidden(
            child(path, "x-kubernetes-validations"),
            "must be empty to be structural",
        ));
    }
    if object(v, "properties").is_some_and(|p| p.contains_key("metadata")) {
        out.push(forbidden(
            key(path, "properties", "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateValueValidationCompleteness`: every field or array a junctor names must also be
/// specified in the structural part of the schema (`s`, at `s_path`).
fn value_completeness(v: &Schema, s: &Schema, s_path: &str, v_path: &str, out: &mut Vec<Cause>) {
    if let Some(not) = object(v, "not") {
        nested_completeness(not, Some(s), s_path, &child(v_path, "not"), out);
    }
    for junctor in ["allOf", "anyOf", "oneOf"] {
        for (i, n) in list(v, junctor) {
            let at = format!("{v_path}.{junctor}[{i}]");
            nested_completeness(n, Some(s), s_path, &at, out);
        }
    }
}

fn nested_completeness(
    v: &Schema,
    s: Option<&Schema>,
    s_path: &str,
    v_path: &str,
    out: &mut Vec<Cause>,
) {
    let Some(s) = s else {
        out.push(required(
            s_path.to_string(),
            &format!("because it is defined in {v_path}"),
        ));
        return;
    };
    value_completeness(v, s, s_path, v_path, out);
    if let Some(items) = object(v, "items") {
        nested_completeness(
            items,
            object(s, "items"),
            &child(s_path, "items"),
            &child(v_path, "items"),
            out,
        );
    }
    for (k, p) in properties(v) {
        let structural = object(s, "properties")
            .and_then(|props| props.get(k))
            .and_then(Value::as_object);
        nested_completeness(
            p,
            structural,
            &key(s_path, "properties", k),
            &key(v_path, "properties", k),
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "spec.versions[0].schema.openAPIV3Schema";

    fn texts(schema: Value) -> Vec<String> {
        validate_crd_schema(&schema, ROOT)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn int_or_string_and_preserved_fields_are_structural() {
        let schema = json!({"type": "object", "properties": {
            "a": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "b": {"x-kubernetes-preserve-unknown-fields": true},
            "c": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
            "d": {"type": "object", "oneOf": [{"required": ["x"]}, {"required": ["y"]}],
                  "properties": {"x": {"type": "string"}, "y": {"type": "string"}}},
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}}
        }});
        assert_eq!(texts(schema), Vec::<String>::new());
    }

    #[test]
    fn nested_errors_are_sorted_like_kube() {
        let schema = json!({"type": "object", "properties": {
            "z": {"type": "array"},
            "a": {"anyOf": [{"type": "string", "description": "d"}]}
        }});
        assert_eq!(
            texts(schema),
            vec![
                format!(
                    "{ROOT}.properties[a].anyOf[0].description: Forbidden: must be empty to be structural"
                ),
                format!(
                    "{ROOT}.properties[a].anyOf[0].type: Forbidden: must be empty to be structural"
                ),
                format!(
                    "{ROOT}.properties[a].type: Required value: must not be empty for specified object fields"
                ),
                format!("{ROOT}.properties[z].items: Required value: must be specified"),
            ]
        );
    }
}
