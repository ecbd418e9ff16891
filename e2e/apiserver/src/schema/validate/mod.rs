//! Validation of values against a structural OpenAPI v3 schema, with kube-apiserver's error texts.
//!
//! [`validate`] checks a custom resource as kube-apiserver does once it has pruned and defaulted
//! it. [`Checks`] also serves a linter (the template tests), which asks for more: fields the schema
//! does not define (kube-apiserver prunes them without a word), nulls of non-nullable fields (it
//! drops them), `required` fields that a `default` fills (the value is not defaulted yet), patterns
//! that do not compile, and `x-kubernetes-validations` rules through an evaluator the caller brings.

mod scalars;

use std::collections::HashSet;
use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::error::{Cause, cause, show_value as show};

/// Evaluates one `x-kubernetes-validations` rule on a value: `Some(passed)`, or `None` when the
/// evaluator does not understand the rule.
pub type RuleEvaluator = dyn Fn(&str, &Value) -> Option<bool>;

/// What a validation checks beyond what kube-apiserver checks of a pruned, defaulted object.
/// `Checks::default()` adds nothing.
#[derive(Clone, Copy, Default)]
pub struct Checks<'a> {
    /// Report fields the schema does not define (kube-apiserver prunes them).
    pub unknown_fields: bool,
    /// Report nulls of non-nullable fields, typed or not (kube-apiserver drops them).
    pub nulls: bool,
    /// Count a missing `required` field that has a `default` as present (the value is not
    /// defaulted yet).
    pub defaults_fill_required: bool,
    /// Report a `pattern` that does not compile instead of skipping it.
    pub broken_patterns: bool,
    /// Evaluates `x-kubernetes-validations`; without one the rules are not checked, as this
    /// server does not check them. A rule the evaluator does not understand is reported.
    pub rules: Option<&'a RuleEvaluator>,
}

impl<'a> Checks<'a> {
    /// Every check a linter wants, with `rules` evaluating the CEL rules.
    pub fn strict(rules: &'a RuleEvaluator) -> Self {
        Checks {
            unknown_fields: true,
            nulls: true,
            defaults_fill_required: true,
            broken_patterns: true,
            rules: Some(rules),
        }
    }

    /// The causes of a value that is not an object of its own, at `path`.
    pub fn value(&self, value: &Value, schema: &Value, path: &str) -> Vec<Cause> {
        let mut w = Walker::new(*self, path);
        w.walk(value, schema, path, false);
        w.causes
    }

    /// The causes of a whole object: `apiVersion`, `kind` and `metadata` (ObjectMeta's rules, and
    /// with `unknown_fields` its known fields), then the rest against the schema.
    pub fn object(&self, object: &Value, schema: &Value) -> Vec<Cause> {
        let mut w = Walker::new(*self, "");
        if let Some(map) = object.as_object() {
            w.type_meta(map, "");
        }
        w.causes
            .extend(crate::meta::validate_meta(object, true, false));
        if let Some(meta) = object.get("metadata") {
            w.metadata_fields(meta, "metadata");
        }
        w.walk(object, schema, "", true);
        w.causes
    }
}

/// Validates an object against a schema as kube-apiserver does, appending causes. Paths are
/// relative to `path`; at the root (`path` empty) `apiVersion`, `kind` and `metadata` are left
/// to the caller.
pub fn validate(value: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let mut w = Walker::new(Checks::default(), path);
    w.walk(value, schema, path, path.is_empty());
    causes.append(&mut w.causes);
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(expected: &str, v: &Value) -> bool {
    match expected {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        _ => true,
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

struct Walker<'a> {
    checks: Checks<'a>,
    /// Where kube-apiserver reports the errors kube-openapi gives without a field.
    root: String,
    causes: Vec<Cause>,
}

impl<'a> Walker<'a> {
    fn new(checks: Checks<'a>, root: &str) -> Self {
        Walker {
            checks,
            root: root.to_string(),
            causes: Vec::new(),
        }
    }

    fn invalid(&mut self, path: &str, value: &Value, detail: String) {
        self.causes.push(cause(
            "FieldValueInvalid",
            path,
            format!("Invalid value: {}: {detail}", show(value)),
        ));
    }

    fn walk(&mut self, value: &Value, schema: &Value, path: &str, root: bool) {
        if value.is_null() {
            self.null(schema, path, root);
            return;
        }
        if flag(schema, "x-kubernetes-int-or-string") {
            if !(type_ok("integer", value) || value.is_string()) {
                let actual = type_name(value);
                self.causes.push(cause(
                    "FieldValueTypeInvalid",
                    path,
                    format!("Invalid value: \"{actual}\": {path} in body must be of type integer,string: \"{actual}\""),
                ));
                return;
            }
        } else if let Some(t) = schema.get("type").and_then(Value::as_str)
            && !type_ok(t, value)
        {
            let actual = type_name(value);
            self.causes.push(cause(
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: \"{actual}\": {path} in body must be of type {t}: \"{actual}\""
                ),
            ));
            return;
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array)
            && !values.contains(value)
        {
            let supported: Vec<String> = values.iter().map(show).collect();
            self.causes.push(cause(
                "FieldValueNotSupported",
                path,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    show(value),
                    supported.join(", ")
                ),
            ));
        }
        match value {
            Value::String(s) => self.string(s, value, schema, path),
            Value::Number(_) => self.number(value, schema, path),
            Value::Array(items) => self.array(items, value, schema, path),
            Value::Object(map) => self.object(map, value, schema, path, root),
            Value::Bool(_) | Value::Null => {}
        }
        self.rules(value, schema, path);
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some(list) = schema.get(key).and_then(Value::as_array) {
                self.combinator(key, list, value, path);
            }
        }
        if let Some(not) = schema.get("not")
            && self.sub(value, not, path).is_empty()
        {
            self.invalid(
                &self.root.clone(),
                &Value::String(String::new()),
                format!("{path:?} must not validate the schema (not)"),
            );
        }
    }

    fn null(&mut self, schema: &Value, path: &str, root: bool) {
        if flag(schema, "nullable") || root {
            return;
        }
        if self.checks.nulls {
            self.invalid(
                path,
                &Value::Null,
                "null is not allowed here (the API server drops it): give a value or leave the \
                 field out"
                    .into(),
            );
        } else if let Some(t) = schema.get("type").and_then(Value::as_str) {
            self.causes.push(cause(
                "FieldValueTypeInvalid",
                path,
                format!("Invalid value: \"null\": {path} in body must be of type {t}: \"null\""),
            ));
        }
    }

    /// The causes of `value` against a schema under a junctor, which in a structural schema
    /// constrains values only: unknown fields are not reported there.
    fn sub(&self, value: &Value, schema: &Value, path: &str) -> Vec<Cause> {
        let checks = Checks {
            unknown_fields: false,
            ..self.checks
        };
        let mut inner = Walker::new(checks, &self.root);
        inner.walk(value, schema, path, false);
        inner.causes
    }

    fn combinator(&mut self, key: &str, list: &[Value], value: &Value, path: &str) {
        let results: Vec<Vec<Cause>> = list.iter().map(|s| self.sub(value, s, path)).collect();
        let passing = results.iter().filter(|r| r.is_empty()).count();
        match key {
            "allOf" => {
                for r in results {
                    self.causes.extend(r);
                }
            }
            "anyOf" if passing == 0 => {
                self.invalid(path, value, format!("{path} in body must be of type anyOf"))
            }
            "oneOf" if passing != 1 => self.invalid(
                path,
                value,
                format!("{path} in body must validate one and only one schema (oneOf)"),
            ),
            _ => {}
        }
    }

    /// `x-kubernetes-validations`, worded as kube-apiserver words a failed rule.
    fn rules(&mut self, value: &Value, schema: &Value, path: &str) {
        let (Some(evaluate), Some(rules)) = (
            self.checks.rules,
            schema
                .get("x-kubernetes-validations")
                .and_then(Value::as_array),
        ) else {
            return;
        };
        let kind = Value::String(type_name(value).to_string());
        for rule in rules {
            let text = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
            let detail = match rule.get("message").and_then(Value::as_str) {
                Some(m) if !m.trim().is_empty() => m.trim().to_string(),
                _ => format!("failed rule: {text}"),
            };
            match evaluate(text, value) {
                Some(true) => {}
                Some(false) => self.invalid(path, &kind, detail),
                None => self.invalid(
                    path,
                    &kind,
                    format!("CEL rule not understood by this validator, so not checked: {text}"),
                ),
            }
        }
    }

    fn array(&mut self, items: &[Value], value: &Value, schema: &Value, path: &str) {
        let count = items.len() as u64;
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            self.causes.push(cause(
                "FieldValueTooMany",
                path,
                format!("Too many: {count}: must have at most {max} items"),
            ));
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            self.invalid(
                path,
                value,
                format!("{path} in body should have at least {min} items"),
            );
        }
        let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
        if list_type == Some("set") || flag(schema, "uniqueItems") {
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                if !seen.insert(item.to_string()) {
                    self.causes.push(cause(
                        "FieldValueDuplicate",
                        format!("{path}[{i}]"),
                        format!("Duplicate value: {}", show(item)),
                    ));
                }
            }
        }
        if list_type == Some("map") {
            self.list_map(items, schema, path);
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.walk(item, item_schema, &format!("{path}[{i}]"), false);
            }
        }
    }

    /// No two items of a list-type map share their key fields.
    fn list_map(&mut self, items: &[Value], schema: &Value, path: &str) {
        let keys: Vec<&str> = schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|k| k.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut seen = HashSet::new();
        for (i, item) in items.iter().enumerate() {
            let key: Vec<String> = keys.iter().map(|k| item[*k].to_string()).collect();
            if !seen.insert(key) {
                let shown: Vec<String> = keys
                    .iter()
                    .map(|k| format!("{k:?}:{}", show(&item[*k])))
                    .collect();
                self.causes.push(cause(
                    "FieldValueDuplicate",
                    format!("{path}[{i}]"),
                    format!(
                        "Duplicate value: map[string]interface {{}}{{{}}}",
                        shown.join(", ")
                    ),
                ));
            }
        }
    }

    fn object(
        &mut self,
        map: &Map<String, Value>,
        value: &Value,
        schema: &Value,
        path: &str,
        root: bool,
    ) {
        let embedded = !root && flag(schema, "x-kubernetes-embedded-resource");
        if embedded {
            self.type_meta(map, path);
            if let Some(meta) = map.get("metadata") {
                let at = join(path, "metadata");
                self.causes
                    .extend(crate::meta::validate_embedded_meta(meta, &at));
                self.metadata_fields(meta, &at);
            }
        }
        let count = map.len() as u64;
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && count > max
        {
            self.causes.push(cause(
                "FieldValueTooMany",
                path,
                format!("Too many: {count}: must have at most {max} items"),
            ));
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && count < min
        {
            self.invalid(
                path,
                value,
                format!("{path} in body should have at least {min} properties"),
            );
        }
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for r in required.iter().filter_map(Value::as_str) {
                let defaulted = self.checks.defaults_fill_required
                    && props
                        .and_then(|p| p.get(r))
                        .is_some_and(|p| p.get("default").is_some());
                if !map.contains_key(r) && !defaulted {
                    self.causes
                        .push(cause("FieldValueRequired", join(path, r), "Required value"));
                }
            }
        }
        let additional = schema.get("additionalProperties");
        let keep_unknown = flag(schema, "x-kubernetes-preserve-unknown-fields")
            || additional == Some(&Value::Bool(true));
        for (k, child) in map {
            let type_meta = matches!(k.as_str(), "apiVersion" | "kind" | "metadata");
            if root && type_meta {
                continue;
            }
            let child_schema = props
                .and_then(|p| p.get(k))
                .or(additional.filter(|a| a.is_object()));
            match child_schema {
                Some(cs) => self.walk(child, cs, &join(path, k), false),
                None if keep_unknown || !self.checks.unknown_fields || (embedded && type_meta) => {}
                None => {
                    let at = join(path, k);
                    self.causes.push(cause(
                        "FieldValueInvalid",
                        &at,
                        format!("unknown field {at:?}"),
                    ));
                }
            }
        }
    }

    /// `apiVersion` and `kind` of an embedded resource (or of an object's root), as
    /// apiextensions-apiserver's `validateEmbeddedResource` checks them.
    fn type_meta(&mut self, map: &Map<String, Value>, path: &str) {
        for key in ["apiVersion", "kind"] {
            let at = join(path, key);
            match map.get(key) {
                None => self.causes.push(cause(
                    "FieldValueRequired",
                    at,
                    "Required value: must not be empty",
                )),
                Some(Value::String(s)) if s.is_empty() => {
                    self.invalid(&at, &map[key], "must not be empty".into())
                }
                Some(Value::String(_)) => {}
                Some(other) => self.invalid(&at, other, "must be a string".into()),
            }
        }
    }

    /// With `unknown_fields`, the fields of `metadata` against ObjectMeta's (kube-apiserver
    /// prunes the others).
    fn metadata_fields(&mut self, meta: &Value, path: &str) {
        if self.checks.unknown_fields {
            static SCHEMA: LazyLock<Value> = LazyLock::new(crate::resources::metadata_schema);
            self.walk(meta, &SCHEMA, path, false);
        }
    }
}
