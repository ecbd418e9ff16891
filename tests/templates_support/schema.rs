//! Validation of a value against a structural OpenAPI v3 schema (a CRD version's
//! `openAPIV3Schema`, or a ClusterClass variable schema) with the test API server's validator,
//! which words its findings as kube-apiserver does, made stricter for templates: a field the
//! schema does not know is a problem (the API server would drop it without a word, which in a
//! template is always a user's bug), as is a null, a pattern that does not compile and a CEL rule
//! [`super::cel`] cannot evaluate; a `required` field with a `default` counts as given.

use std::fmt;

use serde_json::Value;
use testapiserver::error::Cause;
use testapiserver::schema::Checks;

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

impl From<Cause> for Problem {
    fn from(c: Cause) -> Self {
        Problem {
            path: c.field,
            message: c.message,
        }
    }
}

fn checks() -> Checks<'static> {
    Checks::strict(&cel::evaluate)
}

/// Validates a whole object (apiVersion, kind, metadata and the rest) against a CRD version's schema.
pub fn validate_object(object: &Value, schema: &Value) -> Vec<Problem> {
    let found = checks().object(object, schema);
    found.into_iter().map(Problem::from).collect()
}

/// Validates a value that is not an object of its own (a ClusterClass variable value) against a
/// schema.
pub fn validate_value(value: &Value, schema: &Value, path: &str) -> Vec<Problem> {
    let found = checks().value(value, schema, path);
    found.into_iter().map(Problem::from).collect()
}
