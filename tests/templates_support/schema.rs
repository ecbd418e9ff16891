//! Validation of a value against a structural OpenAPI v3 schema (a CRD version's
//! `openAPIV3Schema`, or a ClusterClass variable schema), the checks kube-apiserver makes before it
//! stores a custom resource, stricter in one place: a field the schema does not know is a problem
//! (the API server would drop it without a word, which in a template is always a user's bug).
//!
//! Covered: `type` (with `nullable`), unknown fields (`properties`, `additionalProperties` true /
//! schema, `x-kubernetes-preserve-unknown-fields`), `required` (satisfied by a `default`), `enum`,
//! `pattern`, `format` (`date-time`, `int32`, `int64`), `minLength`/`maxLength` (in characters),
//! `minimum`/`maximum` (with `exclusiveMinimum`/`exclusiveMaximum`), `multipleOf`,
//! `minItems`/`maxItems`, `uniqueItems`, `minProperties`/`maxProperties`, `x-kubernetes-list-type`
//! `set` and `map` (key fields present, key tuples unique), `x-kubernetes-int-or-string`,
//! `x-kubernetes-embedded-resource` (apiVersion, kind, metadata), `allOf`/`anyOf`/`oneOf`/`not`,
//! object metadata (known fields, name, namespace, labels, annotations) and the CEL rules of
//! [`super::cel`]; a CEL rule it cannot evaluate is reported, never skipped.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use regex::Regex;
use serde_json::{Map, Value};

use super::cel;

/// One reason the API server (or Cluster API) would not take a value as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// Field path in kubectl's notation (`spec.template.spec.extraMounts[0].hostPath`).
    pub path: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "<root>"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// Validates a whole object (apiVersion, kind, metadata and the rest) against a CRD version's schema.
pub fn validate_object(object: &Value, schema: &Value) -> Vec<Problem> {
    let mut v = Walker::default();
    v.resource(object, "");
    v.walk(object, schema, "", Mode::Full, true);
    v.problems
}

/// Validates a value that is not an object of its own (a ClusterClass variable value) against a
/// schema.
pub fn validate_value(value: &Value, schema: &Value, path: &str) -> Vec<Problem> {
    let mut v = Walker::default();
    v.walk(value, schema, path, Mode::Full, false);
    v.problems
}

/// `Full` checks unknown fields; `Values` is used inside `allOf`/`anyOf`/`oneOf`/`not`, which in a
/// structural schema only constrain values.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Full,
    Values,
}

#[derive(Default)]
struct Walker {
    problems: Vec<Problem>,
    regexes: HashMap<String, Result<Regex, String>>,
}

const DNS_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const DNS_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
const LABEL_VALUE: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
const META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

fn type_of(v: &Value) -> &'static str {
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

fn is_integer(v: &Value) -> bool {
    v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn has_type(expected: &str, v: &Value) -> bool {
    match expected {
        "integer" => is_integer(v),
        "number" => v.is_number(),
        other => type_of(v) == other,
    }
}

impl Walker {
    fn problem(&mut self, path: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.to_string(),
            message: message.into(),
        });
    }

    fn regex(&mut self, pattern: &str) -> Result<Regex, String> {
        self.regexes
            .entry(pattern.to_string())
            .or_insert_with(|| Regex::new(pattern).map_err(|e| e.to_string()))
            .clone()
    }

    fn matches(&mut self, path: &str, pattern: &str, s: &str) -> bool {
        match self.regex(pattern) {
            Ok(re) => re.is_match(s),
            Err(e) => {
                self.problem(path, format!("pattern {pattern:?} does not compile: {e}"));
                true
            }
        }
    }

    /// apiVersion, kind and metadata of an object (the root, or an embedded resource).
    fn resource(&mut self, object: &Value, path: &str) {
        for key in ["apiVersion", "kind"] {
            match object.get(key) {
                Some(Value::String(s)) if !s.is_empty() => {}
                _ => self.problem(&join(path, key), "required: a non-empty string"),
            }
        }
        let Some(meta) = object.get("metadata") else {
            return;
        };
        let path = join(path, "metadata");
        let Some(meta) = meta.as_object() else {
            self.problem(&path, format!("must be an object, not {}", type_of(meta)));
            return;
        };
        for (key, value) in meta {
            let at = join(&path, key);
            match key.as_str() {
                "name" | "generateName" => self.name(value, &at, DNS_SUBDOMAIN, 253),
                "namespace" => self.name(value, &at, DNS_LABEL, 63),
                "labels" => self.string_map(value, &at, true),
                "annotations" => self.string_map(value, &at, false),
                "finalizers" => {
                    let ok = value
                        .as_array()
                        .is_some_and(|items| items.iter().all(Value::is_string));
                    if !ok {
                        self.problem(&at, "must be a list of strings");
                    }
                }
                k if META_FIELDS.contains(&k) => {}
                _ => self.problem(&at, "unknown field: not part of ObjectMeta"),
            }
        }
    }

    fn name(&mut self, value: &Value, path: &str, pattern: &str, max: usize) {
        let Some(s) = value.as_str() else {
            self.problem(path, format!("must be a string, not {}", type_of(value)));
            return;
        };
        if s.len() > max || !self.matches(path, pattern, s) {
            self.problem(
                path,
                format!("{s:?} is not a valid name: at most {max} characters matching {pattern}"),
            );
        }
    }

    fn string_map(&mut self, value: &Value, path: &str, label: bool) {
        let Some(map) = value.as_object() else {
            self.problem(path, format!("must be a map, not {}", type_of(value)));
            return;
        };
        for (key, v) in map {
            let at = join(path, key);
            if !cel::qualified_name(key) {
                self.problem(&at, format!("{key:?} is not a qualified name"));
            }
            match v.as_str() {
                None => self.problem(&at, format!("must be a string, not {}", type_of(v))),
                Some(s) if label && (s.len() > 63 || !self.matches(&at, LABEL_VALUE, s)) => {
                    self.problem(&at, format!("{s:?} is not a valid label value"))
                }
                Some(_) => {}
            }
        }
    }

    fn walk(&mut self, value: &Value, schema: &Value, path: &str, mode: Mode, root: bool) {
        if value.is_null() {
            if !flag(schema, "nullable") {
                self.problem(
                    path,
                    "null is not allowed here (the API server drops it): give a value or leave the field out",
                );
            }
            return;
        }
        if flag(schema, "x-kubernetes-int-or-string") {
            if !(is_integer(value) || value.is_string()) {
                self.problem(
                    path,
                    format!("must be an integer or a string, not {}", type_of(value)),
                );
                return;
            }
        } else if let Some(expected) = schema.get("type").and_then(Value::as_str)
            && !has_type(expected, value)
        {
            self.problem(
                path,
                format!("must be of type {expected}, not {}", type_of(value)),
            );
            return;
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            self.problem(
                path,
                format!("unsupported value {value}: one of {}", list.join(", ")),
            );
        }
        match value {
            Value::String(s) => self.string(s, schema, path),
            Value::Number(_) => self.number(value, schema, path),
            Value::Array(items) => self.array(items, schema, path, mode),
            Value::Object(map) => self.object(map, value, schema, path, mode, root),
            Value::Bool(_) | Value::Null => {}
        }
        if let Some(rules) = schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            for rule in rules {
                let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
                let message = rule.get("message").and_then(Value::as_str).unwrap_or(text);
                match cel::evaluate(text, value) {
                    Some(true) => {}
                    Some(false) => self.problem(path, format!("{message} (rule {text})")),
                    None => self.problem(
                        path,
                        format!(
                            "CEL rule not understood by this validator, so not checked: {text}"
                        ),
                    ),
                }
            }
        }
        self.combinators(value, schema, path);
    }

    fn combinators(&mut self, value: &Value, schema: &Value, path: &str) {
        let check = |sub: &Value| {
            let mut w = Walker::default();
            w.walk(value, sub, path, Mode::Values, false);
            w.problems
        };
        let list = |key: &str| {
            schema
                .get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        for sub in list("allOf") {
            let found = check(&sub);
            self.problems.extend(found);
        }
        let any = list("anyOf");
        if !any.is_empty() && any.iter().all(|s| !check(s).is_empty()) {
            self.problem(path, "matches none of the anyOf schemas");
        }
        let one = list("oneOf");
        if !one.is_empty() && one.iter().filter(|s| check(s).is_empty()).count() != 1 {
            self.problem(path, "must match exactly one of the oneOf schemas");
        }
        if let Some(not) = schema.get("not")
            && check(not).is_empty()
        {
            self.problem(path, "matches the schema under `not`");
        }
    }

    fn string(&mut self, s: &str, schema: &Value, path: &str) {
        let len = s.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            self.problem(path, format!("too long: {len} characters, at most {max}"));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            self.problem(path, format!("too short: {len} characters, at least {min}"));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && !self.matches(path, pattern, s)
        {
            self.problem(path, format!("{s:?} does not match {pattern}"));
        }
        let format_ok = match schema.get("format").and_then(Value::as_str) {
            Some("date-time") => s.parse::<jiff::Timestamp>().is_ok(),
            Some("int32") => s.parse::<i32>().is_ok(),
            Some("int64") => s.parse::<i64>().is_ok(),
            _ => true,
        };
        if !format_ok {
            self.problem(path, format!("{s:?} is not a valid {}", schema["format"]));
        }
    }

    fn number(&mut self, value: &Value, schema: &Value, path: &str) {
        let Some(n) = value.as_f64() else { return };
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let exclusive = flag(schema, "exclusiveMaximum");
            if n > max || (exclusive && n == max) {
                self.problem(path, format!("{value} is above the maximum {max}"));
            }
        }
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let exclusive = flag(schema, "exclusiveMinimum");
            if n < min || (exclusive && n == min) {
                self.problem(path, format!("{value} is below the minimum {min}"));
            }
        }
        if let Some(m) = schema.get("multipleOf").and_then(Value::as_f64)
            && m != 0.0
            && (n / m).fract() != 0.0
        {
            self.problem(path, format!("{value} is not a multiple of {m}"));
        }
        let range = match schema.get("format").and_then(Value::as_str) {
            Some("int32") => Some((f64::from(i32::MIN), f64::from(i32::MAX))),
            Some("int64") => Some((i64::MIN as f64, i64::MAX as f64)),
            _ => None,
        };
        if let Some((lo, hi)) = range
            && !(lo..=hi).contains(&n)
        {
            self.problem(path, format!("{value} does not fit {}", schema["format"]));
        }
    }

    fn array(&mut self, items: &[Value], schema: &Value, path: &str, mode: Mode) {
        let count = items.len() as u64;
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            self.problem(path, format!("too many items: {count}, at most {max}"));
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            self.problem(path, format!("too few items: {count}, at least {min}"));
        }
        let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
        if list_type == Some("set") || flag(schema, "uniqueItems") {
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                if !seen.insert(item.to_string()) {
                    self.problem(&format!("{path}[{i}]"), format!("duplicate value {item}"));
                }
            }
        }
        if list_type == Some("map") {
            self.list_map(items, schema, path);
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.walk(item, item_schema, &format!("{path}[{i}]"), mode, false);
            }
        }
    }

    /// Every item carries the key fields (or they default), and no two items share a key tuple.
    fn list_map(&mut self, items: &[Value], schema: &Value, path: &str) {
        let keys: Vec<&str> = schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|k| k.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let item_props = schema.pointer("/items/properties");
        let mut seen = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let tuple: Vec<String> = keys
                .iter()
                .map(|k| match item.get(*k) {
                    Some(v) => v.to_string(),
                    None => item_props
                        .and_then(|p| p.pointer(&format!("/{k}/default")))
                        .map_or_else(
                            || {
                                self.problem(
                                    &format!("{path}[{i}]"),
                                    format!("list-map key field {k:?} is missing"),
                                );
                                String::new()
                            },
                            Value::to_string,
                        ),
                })
                .collect();
            if !seen.insert(tuple.clone()) {
                self.problem(
                    &format!("{path}[{i}]"),
                    format!(
                        "duplicate entry: another item has the same {} ({})",
                        keys.join(", "),
                        tuple.join(", ")
                    ),
                );
            }
        }
    }

    fn object(
        &mut self,
        map: &Map<String, Value>,
        value: &Value,
        schema: &Value,
        path: &str,
        mode: Mode,
        root: bool,
    ) {
        let embedded = flag(schema, "x-kubernetes-embedded-resource");
        if embedded {
            self.resource(value, path);
        }
        let count = map.len() as u64;
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && count > max
        {
            self.problem(path, format!("too many fields: {count}, at most {max}"));
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && count < min
        {
            self.problem(path, format!("too few fields: {count}, at least {min}"));
        }
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                let defaulted = props
                    .and_then(|p| p.get(name))
                    .is_some_and(|p| p.get("default").is_some());
                if !map.contains_key(name) && !defaulted {
                    self.problem(&join(path, name), "required field is missing");
                }
            }
        }
        let additional = schema.get("additionalProperties");
        let keep_unknown = flag(schema, "x-kubernetes-preserve-unknown-fields")
            || additional == Some(&Value::Bool(true));
        for (key, child) in map {
            if (root || embedded) && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            let at = join(path, key);
            match props
                .and_then(|p| p.get(key))
                .or(additional.filter(|a| a.is_object()))
            {
                Some(child_schema) => self.walk(child, child_schema, &at, mode, false),
                None if keep_unknown || mode == Mode::Values => {}
                None => self.problem(
                    &at,
                    "unknown field: the schema does not define it, the API server would drop it",
                ),
            }
        }
    }
}
