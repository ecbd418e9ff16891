//! Errors answered to clients in the Kubernetes `Status` shape.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One `details.causes[]` entry of a `Status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Machine-readable reason (`FieldValueRequired`, `FieldManagerConflict`, ...).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// Field path the cause is about (`spec.replicas`).
    pub field: String,
}

/// An API error as kube-apiserver answers it: an HTTP code and a `Status` body.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Conflict`, ...); empty for none.
    pub reason: String,
    /// `Status.message`.
    pub message: String,
    /// `Status.details` (name, group, kind, causes, retryAfterSeconds), when any.
    pub details: Option<Value>,
}

/// What a resource is called in error messages: `configmaps` or `widgets.example.com`.
#[derive(Debug, Clone)]
pub struct Qualified<'a> {
    /// API group, empty for core.
    pub group: &'a str,
    /// Plural resource name.
    pub resource: &'a str,
}

impl Qualified<'_> {
    fn text(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

impl ApiError {
    /// A bare error with a code, a reason and a message.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 NotFound for a named object, as `errors.NewNotFound`.
    pub fn not_found(q: Qualified<'_>, name: &str) -> Self {
        ApiError {
            code: 404,
            reason: "NotFound".into(),
            message: format!("{} \"{}\" not found", q.text(), name),
            details: Some(json!({"name": name, "group": q.group, "kind": q.resource})),
        }
    }

    /// 404 for a path the server does not serve.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405 MethodNotAllowed, as `errors.NewMethodNotSupported`.
    pub fn method_not_supported(q: Qualified<'_>, verb: &str) -> Self {
        ApiError {
            code: 405,
            reason: "MethodNotAllowed".into(),
            message: format!(
                "{verb} is not supported on resources of kind \"{}\"",
                q.text()
            ),
            details: Some(json!({"group": q.group, "kind": q.resource})),
        }
    }

    /// 409 AlreadyExists, as `errors.NewAlreadyExists`.
    pub fn already_exists(q: Qualified<'_>, name: &str) -> Self {
        ApiError {
            code: 409,
            reason: "AlreadyExists".into(),
            message: format!("{} \"{}\" already exists", q.text(), name),
            details: Some(json!({"name": name, "group": q.group, "kind": q.resource})),
        }
    }

    /// 409 Conflict, as `errors.NewConflict`.
    pub fn conflict(q: Qualified<'_>, name: &str, why: &str) -> Self {
        ApiError {
            code: 409,
            reason: "Conflict".into(),
            message: format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                q.text(),
                name,
                why
            ),
            details: Some(json!({"name": name, "group": q.group, "kind": q.resource})),
        }
    }

    /// The optimistic-concurrency conflict of an update with a stale resourceVersion.
    pub fn stale(q: Qualified<'_>, name: &str) -> Self {
        Self::conflict(
            q,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 410 Expired, as `errors.NewResourceExpired`.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        )
    }

    /// 422 Invalid, as `errors.NewInvalid`, with the message kube-apiserver builds.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let texts: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let summary = match texts.len() {
            0 => String::new(),
            1 => texts[0].clone(),
            _ => format!("[{}]", texts.join(", ")),
        };
        let message = format!("{qualified_kind} \"{name}\" is invalid: {summary}");
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| {
                let mut v = json!({"reason": c.reason, "message": c.message});
                if !c.field.is_empty() {
                    v["field"] = json!(c.field);
                }
                v
            })
            .collect();
        ApiError {
            code: 422,
            reason: "Invalid".into(),
            message,
            details: Some(json!({"name": name, "group": group, "kind": kind, "causes": causes})),
        }
    }

    /// A refusal of the list and watch rules shared with the in-memory backend (`watchlist`).
    pub fn refused(refusal: watchlist::Refusal) -> Self {
        ApiError {
            code: refusal.code,
            reason: refusal.reason.to_string(),
            message: refusal.message,
            details: refusal.details,
        }
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        ApiError {
            code: 500,
            reason: "InternalError".into(),
            message: format!("Internal error occurred: {message}"),
            details: Some(json!({"causes": [{"message": message}]})),
        }
    }

    /// 503 ServiceUnavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `Status` object of this error.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        if !self.reason.is_empty() {
            status["reason"] = json!(self.reason);
        }
        if let Some(details) = &self.details {
            status["details"] = omit_empty(details);
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.status().to_string();
        (code, [("content-type", "application/json")], body).into_response()
    }
}

/// Drops empty strings from `Status.details`, whose fields are all `omitempty` in Go.
pub fn omit_empty(details: &Value) -> Value {
    let mut d = details.clone();
    if let Some(m) = d.as_object_mut() {
        m.retain(|_, v| v.as_str() != Some("") && !v.is_null());
    }
    d
}

/// Result of an API operation.
pub type ApiResult<T> = Result<T, ApiError>;

/// Formats a value the way `field.Error` prints it.
pub fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// Builds a validation cause.
pub fn cause(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Cause {
    Cause {
        reason: reason.to_string(),
        message: message.into(),
        field: field.into(),
    }
}
