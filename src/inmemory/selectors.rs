//! Label and field selectors of list and watch requests.

use serde_json::Value;

use super::store::StoreError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    /// `key=value`, `key==value`.
    Equals(String, String),
    /// `key!=value`.
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)`.
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    Absent(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

/// Splits at commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0_i32, 0);
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn invalid(whole: &str) -> StoreError {
    StoreError::Invalid(format!("unable to parse requirement: {whole:?}"))
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, StoreError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| invalid(whole))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for a requirement it cannot read.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let requirement = if let Some(key) = part.strip_prefix('!') {
                Requirement::Absent(key.trim().to_string())
            } else if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) = part.split_once("==") {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some((key, value)) = part.split_once('=') {
                Requirement::Equals(key.trim().into(), value.trim().into())
            } else if let Some((key, rest)) = part.split_once(" notin ") {
                Requirement::NotIn(key.trim().into(), parse_set(rest, part)?)
            } else if let Some((key, rest)) = part.split_once(" in ") {
                Requirement::In(key.trim().into(), parse_set(rest, part)?)
            } else if part.contains(|c: char| c.is_whitespace() || c == '(') {
                return Err(invalid(part));
            } else {
                Requirement::Exists(part.to_string())
            };
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let label = |key: &str| {
            object
                .pointer("/metadata/labels")
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
        };
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::Absent(k) => label(k).is_none(),
        })
    }
}

/// A parsed field selector: `path=value` or `path!=value` terms on dotted paths
/// (`metadata.name`, `metadata.namespace`, `spec.nodeName`...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for a term without an operator.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, equal, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = part.split_once('=') {
                (p, true, v)
            } else {
                return Err(StoreError::Invalid(format!(
                    "invalid field selector: {part:?}"
                )));
            };
            terms.push((path.trim().to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(terms))
    }

    /// Whether the object satisfies every term (an absent field reads as `""`).
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, value)| {
            let pointer = format!("/{}", path.replace('.', "/"));
            let found = object
                .pointer(&pointer)
                .and_then(Value::as_str)
                .unwrap_or_default();
            (found == value) == *equal
        })
    }
}
