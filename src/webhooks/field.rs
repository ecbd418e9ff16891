//! Field errors in the shape Kubernetes users know from `kubectl`: a path, an error type, the
//! offending value and a detail, gathered into the `Invalid` status the API server returns
//! (`DockerCluster.infrastructure.cluster.x-k8s.io "c1" is invalid: spec.customImage: ...`).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};
use serde_json::Value;

use crate::api::GROUP;

/// What is wrong with a field, as apimachinery's `field.ErrorType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// The value is not acceptable.
    Invalid,
    /// The field may not be set or changed here.
    Forbidden,
    /// The field must be set.
    Required,
    /// The value repeats one given earlier in the same list.
    Duplicate,
    /// The value is longer than allowed.
    TooLong,
}

impl ErrorType {
    /// The text `kubectl` shows (`Invalid value`).
    pub fn text(self) -> &'static str {
        match self {
            ErrorType::Invalid => "Invalid value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::TooLong => "Too long",
        }
    }

    /// The `reason` of the status cause (`FieldValueInvalid`).
    pub fn cause(self) -> &'static str {
        match self {
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::TooLong => "FieldValueTooLong",
        }
    }

    /// Whether the offending value is shown (apimachinery leaves it out for these types).
    fn shows_value(self) -> bool {
        matches!(self, ErrorType::Invalid | ErrorType::Duplicate)
    }
}

/// One rejected field.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: ErrorType,
    /// Path of the field, as `kubectl explain` spells it (`spec.extraMounts[0].containerPath`).
    pub field: String,
    /// The rejected value, when it helps to see it.
    pub value: Option<Value>,
    /// What to do about it.
    pub detail: String,
}

impl FieldError {
    /// `field` holds `value`, which is not acceptable because of `detail`.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind: ErrorType::Invalid,
            field: field.into(),
            value: Some(value.into()),
            detail: detail.into(),
        }
    }

    /// `field` is not acceptable because of `detail`; the value is too large to repeat.
    pub fn invalid_without_value(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Invalid,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// `field` may not be set or changed.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Forbidden,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// `field` must be set.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Required,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// `field` repeats `value`.
    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self {
            kind: ErrorType::Duplicate,
            field: field.into(),
            value: Some(value.into()),
            detail: String::new(),
        }
    }

    /// `field` is longer than `limit` bytes.
    pub fn too_long(field: impl Into<String>, limit: usize) -> Self {
        Self {
            kind: ErrorType::TooLong,
            field: field.into(),
            value: None,
            detail: format!("may not be more than {limit} bytes"),
        }
    }

    /// The message without the path (`Invalid value: "x": field is immutable`), as in a status
    /// cause.
    pub fn body(&self) -> String {
        let mut body = self.kind.text().to_string();
        if self.kind.shows_value()
            && let Some(value) = &self.value
        {
            body.push_str(": ");
            // Strings quoted, numbers and booleans bare, lists and objects as compact JSON.
            body.push_str(&value.to_string());
        }
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Path of element `index` of the list at `field`.
pub fn index(field: &str, index: usize) -> String {
    format!("{field}[{index}]")
}

/// Path of the map entry `key` of the map at `field`.
pub fn key(field: &str, key: &str) -> String {
    format!("{field}[{key}]")
}

/// The `422 Invalid` status a denial carries, as apimachinery's `NewInvalid`: the message lists
/// every error, and `details.causes` names each field so clients can point at it.
pub fn invalid_status(kind: &str, name: &str, errors: &[FieldError]) -> Status {
    let listed: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let aggregate = match listed.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let causes = errors
        .iter()
        .map(|e| StatusCause {
            field: Some(e.field.clone()),
            message: Some(e.body()),
            reason: Some(e.kind.cause().to_string()),
        })
        .collect();
    Status {
        status: Some("Failure".into()),
        code: Some(422),
        reason: Some("Invalid".into()),
        message: Some(format!("{kind}.{GROUP} {name:?} is invalid: {aggregate}")),
        details: Some(StatusDetails {
            group: Some(GROUP.into()),
            kind: Some(kind.into()),
            name: Some(name.into()),
            causes: Some(causes),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Drops from `errors` those that `previous` (the errors of the object before the update)
/// already had: an update is only blamed for what it changes, so objects stored before a rule
/// existed stay editable.
pub fn only_new(errors: Vec<FieldError>, previous: &[FieldError]) -> Vec<FieldError> {
    errors
        .into_iter()
        .filter(|e| !previous.contains(e))
        .collect()
}
