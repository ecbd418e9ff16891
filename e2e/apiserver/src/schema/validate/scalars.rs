//! The checks of strings and numbers: lengths, patterns, formats, bounds and integer ranges.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use serde_json::Value;

use super::{Walker, flag, show};
use crate::error::cause;

impl Walker<'_> {
    pub(super) fn string(&mut self, s: &str, value: &Value, schema: &Value, path: &str) {
        let len = s.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            self.causes.push(cause(
                "FieldValueTooLong",
                path,
                format!("Too long: may not be more than {max} bytes"),
            ));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            self.invalid(
                path,
                value,
                format!("{path} in body should be at least {min} chars long"),
            );
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            match pattern_matches(pattern, s) {
                Some(true) => {}
                Some(false) => self.invalid(
                    path,
                    value,
                    format!("{path} in body should match '{pattern}'"),
                ),
                None if self.checks.broken_patterns => self.invalid(
                    path,
                    value,
                    format!("pattern '{pattern}' does not compile, so it was not checked"),
                ),
                None => {}
            }
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
                self.invalid(
                    path,
                    value,
                    format!("{path} in body must be of type {format}: {}", show(value)),
                );
            }
        }
    }

    pub(super) fn number(&mut self, value: &Value, schema: &Value, path: &str) {
        let Some(n) = value.as_f64() else { return };
        if schema.get("type").and_then(Value::as_str) == Some("integer") {
            self.integer_range(value, n, schema, path);
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let exclusive = flag(schema, "exclusiveMaximum");
            if (exclusive && n >= max) || n > max {
                let relation = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.invalid(
                    path,
                    value,
                    format!("{path} in body should be {relation} {}", schema["maximum"]),
                );
            }
        }
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let exclusive = flag(schema, "exclusiveMinimum");
            if (exclusive && n <= min) || n < min {
                let relation = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.invalid(
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
            self.invalid(
                path,
                value,
                format!(
                    "{path} in body should be a multiple of {}",
                    schema["multipleOf"]
                ),
            );
        }
    }

    /// kube-openapi's `IsValueValidAgainstRange`: an integer fits its format (int64 by default),
    /// reported without a field, at the root of the validation.
    fn integer_range(&mut self, value: &Value, n: f64, schema: &Value, path: &str) {
        let format = schema.get("format").and_then(Value::as_str);
        let fits = match (value.as_i64(), value.as_u64()) {
            (Some(i), _) => match format {
                Some("int32") => i32::try_from(i).is_ok(),
                Some("uint32") => u32::try_from(i).is_ok(),
                Some("uint64") => i >= 0,
                _ => true,
            },
            (None, Some(_)) => format == Some("uint64"),
            (None, None) => {
                let (lo, hi) = match format {
                    Some("int32") => (f64::from(i32::MIN), f64::from(i32::MAX)),
                    Some("uint32") => (0.0, f64::from(u32::MAX)),
                    Some("uint64") => (0.0, u64::MAX as f64),
                    _ => (i64::MIN as f64, i64::MAX as f64),
                };
                (lo..=hi).contains(&n)
            }
        };
        if !fits {
            let format = match format {
                Some(f @ ("int32" | "uint32" | "uint64" | "int64")) => format!("with format {f}"),
                _ => "(default format)".to_string(),
            };
            self.invalid(
                &self.root.clone(),
                &Value::String(String::new()),
                format!("Checked value must be of type integer {format} in {path}"),
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
