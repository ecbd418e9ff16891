//! Validation of custom resources against their OpenAPI v3 schema, with kube-apiserver's error texts.

use std::collections::{HashMap, HashSet};
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use serde_json::Value;

use crate::error::{Cause, cause};

/// Formats a value the way `field.Error` prints it.
pub fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
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

struct Ctx<'a> {
    causes: &'a mut Vec<Cause>,
}

impl Ctx<'_> {
    fn invalid(&mut self, path: &str, value: &Value, detail: String) {
        self.causes.push(cause(
            "FieldValueInvalid",
            path,
            format!("Invalid value: {}: {detail}", show(value)),
        ));
    }
}

/// Validates an object against a schema, appending causes. Paths are relative to `path`.
pub fn validate(value: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let mut ctx = Ctx { causes };
    walk(value, schema, path, &mut ctx, path.is_empty());
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(value: &Value, schema: &Value, path: &str, ctx: &mut Ctx<'_>, root: bool) {
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true))
            && !root
            && let Some(t) = schema.get("type").and_then(Value::as_str)
        {
            ctx.causes.push(cause(
                "FieldValueTypeInvalid",
                path,
                format!("Invalid value: \"null\": {path} in body must be of type {t}: \"null\""),
            ));
        }
        return;
    }
    if int_or_string {
        if !(type_ok("integer", value) || value.is_string()) {
            let actual = type_name(value);
            ctx.causes.push(cause(
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
        ctx.causes.push(cause(
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
        ctx.causes.push(cause(
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
        Value::String(s) => check_string(s, value, schema, path, ctx),
        Value::Number(_) => check_number(value, schema, path, ctx),
        Value::Array(items) => check_array(items, value, schema, path, ctx),
        Value::Object(map) => {
            let count = map.len() as u64;
            if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
                && count > max
            {
                ctx.causes.push(cause(
                    "FieldValueTooMany",
                    path,
                    format!("Too many: {count}: must have at most {max} items"),
                ));
            }
            if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
                && count < min
            {
                ctx.invalid(
                    path,
                    value,
                    format!("{path} in body should have at least {min} properties"),
                );
            }
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for r in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(r) {
                        ctx.causes.push(cause(
                            "FieldValueRequired",
                            join(path, r),
                            "Required value",
                        ));
                    }
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            for (k, child) in map {
                if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let cs = props
                    .and_then(|p| p.get(k))
                    .or(schema.get("additionalProperties").filter(|a| a.is_object()));
                if let Some(cs) = cs {
                    walk(child, cs, &join(path, k), ctx, false);
                }
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(list) = schema.get(key).and_then(Value::as_array) {
            check_combinator(key, list, value, path, ctx);
        }
    }
}

fn check_combinator(key: &str, list: &[Value], value: &Value, path: &str, ctx: &mut Ctx<'_>) {
    let results: Vec<Vec<Cause>> = list
        .iter()
        .map(|s| {
            let mut causes = Vec::new();
            let mut inner = Ctx {
                causes: &mut causes,
            };
            walk(value, s, path, &mut inner, false);
            causes
        })
        .collect();
    let passing = results.iter().filter(|r| r.is_empty()).count();
    match key {
        "allOf" => {
            for r in results {
                ctx.causes.extend(r);
            }
        }
        "anyOf" if passing == 0 => {
            ctx.invalid(path, value, format!("{path} in body must be of type anyOf"))
        }
        "oneOf" if passing != 1 => ctx.invalid(
            path,
            value,
            format!("{path} in body must validate one and only one schema (oneOf)"),
        ),
        _ => {}
    }
}

fn check_string(s: &str, value: &Value, schema: &Value, path: &str, ctx: &mut Ctx<'_>) {
    let len = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        ctx.causes.push(cause(
            "FieldValueTooLong",
            path,
            format!("Too long: may not be more than {max} bytes"),
        ));
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        ctx.invalid(
            path,
            value,
            format!("{path} in body should be at least {min} chars long"),
        );
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && let Some(false) = pattern_matches(pattern, s)
    {
        ctx.invalid(
            path,
            value,
            format!("{path} in body should match '{pattern}'"),
        );
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        let ok = match format {
            "date-time" => s.parse::<jiff::Timestamp>().is_ok(),
            "date" => s.parse::<jiff::civil::Date>().is_ok(),
            "int32" => s.parse::<i32>().is_ok(),
            "int64" => s.parse::<i64>().is_ok(),
            "byte" => base64_ok(s),
            _ => true,
        };
        if !ok {
            ctx.invalid(
                path,
                value,
                format!("{path} in body must be of type {format}: {}", show(value)),
            );
        }
    }
}

/// Whether `s` matches a schema pattern; None when the pattern does not compile. Compiled
/// patterns are cached: the same CRD patterns are checked on every write.
fn pattern_matches(pattern: &str, s: &str) -> Option<bool> {
    static CACHE: LazyLock<Mutex<HashMap<String, Option<Regex>>>> = LazyLock::new(Default::default);
    let mut cache = CACHE.lock().ok()?;
    if cache.len() > 4096 {
        cache.clear();
    }
    let re = cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok());
    re.as_ref().map(|r| r.is_match(s))
}

fn base64_ok(s: &str) -> bool {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).is_ok()
}

fn check_number(value: &Value, schema: &Value, path: &str, ctx: &mut Ctx<'_>) {
    let Some(n) = value.as_f64() else { return };
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        let exclusive = schema.get("exclusiveMaximum") == Some(&Value::Bool(true));
        if (exclusive && n >= max) || n > max {
            let relation = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            ctx.invalid(
                path,
                value,
                format!("{path} in body should be {relation} {}", schema["maximum"]),
            );
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        let exclusive = schema.get("exclusiveMinimum") == Some(&Value::Bool(true));
        if (exclusive && n <= min) || n < min {
            let relation = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            ctx.invalid(
                path,
                value,
                format!("{path} in body should be {relation} {}", schema["minimum"]),
            );
        }
    }
    if let Some(m) = schema.get("multipleOf").and_then(Value::as_f64)
        && m != 0.0
        && (n / m).fract() != 0.0
    {
        ctx.invalid(
            path,
            value,
            format!(
                "{path} in body should be a multiple of {}",
                schema["multipleOf"]
            ),
        );
    }
}

fn check_array(items: &[Value], value: &Value, schema: &Value, path: &str, ctx: &mut Ctx<'_>) {
    let count = items.len() as u64;
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && count > max
    {
        ctx.causes.push(cause(
            "FieldValueTooMany",
            path,
            format!("Too many: {count}: must have at most {max} items"),
        ));
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && count < min
    {
        ctx.invalid(
            path,
            value,
            format!("{path} in body should have at least {min} items"),
        );
    }
    let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
    let unique = schema.get("uniqueItems") == Some(&Value::Bool(true));
    if list_type == Some("set") || unique {
        let mut seen = HashSet::new();
        for (i, item) in items.iter().enumerate() {
            if !seen.insert(item.to_string()) {
                ctx.causes.push(cause(
                    "FieldValueDuplicate",
                    format!("{path}[{i}]"),
                    format!("Duplicate value: {}", show(item)),
                ));
            }
        }
    }
    if list_type == Some("map") {
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
                ctx.causes.push(cause(
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
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            walk(item, item_schema, &format!("{path}[{i}]"), ctx, false);
        }
    }
}
