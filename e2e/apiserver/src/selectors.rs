//! Label and field selectors of list and watch requests.

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed label selector (`a=b,c!=d,e in (x,y),f notin (z),g,!h`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

fn split_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn parse_set(rest: &str, whole: &str) -> ApiResult<Vec<String>> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad_selector(whole, "expected a set of values in parentheses"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn bad_selector(whole: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {why}: {whole:?}"))
}

impl LabelSelector {
    /// Parses a label selector; an empty string selects everything.
    pub fn parse(s: &str) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let req = if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Requirement::NotIn(k.trim().into(), parse_set(rest, &part)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Requirement::In(k.trim().into(), parse_set(rest, &part)?)
            } else if let Some((k, v)) = part.split_once('>') {
                let n = v.trim().parse().map_err(|_| {
                    bad_selector(
                        &part,
                        "for 'gt', 'lt' operators, the value must be an integer",
                    )
                })?;
                Requirement::GreaterThan(k.trim().into(), n)
            } else if let Some((k, v)) = part.split_once('<') {
                let n = v.trim().parse().map_err(|_| {
                    bad_selector(
                        &part,
                        "for 'gt', 'lt' operators, the value must be an integer",
                    )
                })?;
                Requirement::LessThan(k.trim().into(), n)
            } else if part.contains(' ') || part.contains('(') {
                return Err(bad_selector(&part, "found unexpected token"));
            } else {
                Requirement::Exists(part.clone())
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object's labels match.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
            Requirement::GreaterThan(k, n) => get(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l > *n),
            Requirement::LessThan(k, n) => get(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l < *n),
        })
    }
}

/// A parsed field selector (`metadata.name=x,metadata.namespace!=y`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses a field selector, accepting only the given fields besides `metadata.name`/`metadata.namespace`.
    pub fn parse(s: &str, extra: &[String]) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let (field, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim().to_string();
            if field != "metadata.name"
                && field != "metadata.namespace"
                && !extra.iter().any(|e| e == &field)
            {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            reqs.push((field, equal, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object's fields match (a missing field reads as the empty string).
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let mut current = object;
            for segment in field.split('.') {
                current = &current[segment];
            }
            let actual = match current {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_selector_operators_select_like_kubernetes() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("missing notin (x)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier=back", false),
            ("", true),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&o), expected, "{selector}");
        }
    }

    #[test]
    fn field_selector_rejects_unknown_fields() {
        let err = FieldSelector::parse("spec.foo=bar", &[]).unwrap_err();
        assert_eq!(err.code, 400);
        let sel = FieldSelector::parse("metadata.name=a,metadata.namespace!=other", &[]).unwrap();
        assert!(sel.matches(&obj(json!({}))));
    }
}
