//! What the handlers share: the parsed request, JSON responses and bodies, conversion to the
//! served version, list selectors and the follow-ups of a write. Handlers import this module and
//! never each other; the router (`super`) imports them all.

use std::collections::HashMap;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::convert::to_served;
use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::Store;

/// A parsed resource request.
#[derive(Debug, Clone)]
pub struct Req {
    /// The resource.
    pub def: ResourceDef,
    /// Requested version.
    pub version: String,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// Object name from the path.
    pub name: Option<String>,
    /// Subresource from the path (`status`).
    pub subresource: Option<String>,
    /// Query parameters.
    pub query: HashMap<String, String>,
    /// User-Agent header.
    pub user_agent: String,
    /// Content-Type header.
    pub content_type: String,
    /// Whether the legacy `/watch/` prefix was used.
    pub watch_prefix: bool,
    /// Whether a Table was asked for (`Accept: ...;as=Table`), and what rows carry.
    pub table: Option<crate::table::Include>,
    /// Whether only metadata was asked for (`Accept: ...;as=PartialObjectMetadata[List]`).
    pub partial: bool,
}

impl Req {
    /// A query parameter.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// A boolean query parameter (`true`/`1`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.param(key), Some("true" | "1"))
    }

    /// Whether `dryRun=All` was asked; other values are rejected.
    pub fn dry_run(&self) -> ApiResult<bool> {
        match self.param("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "Invalid dryRun value: {other:?}; only \"All\" is supported"
            ))),
        }
    }

    /// The field manager: the `fieldManager` parameter, else the User-Agent up to its first `/`.
    pub fn field_manager(&self) -> String {
        if let Some(m) = self.param("fieldManager") {
            return m.to_string();
        }
        let prefix = self.user_agent.split('/').next().unwrap_or_default();
        let prefix: String = prefix.chars().take(128).collect();
        if prefix.is_empty() {
            "unknown".into()
        } else {
            prefix
        }
    }

    /// The apiVersion of the request.
    pub fn api_version(&self) -> String {
        self.def.api_version(&self.version)
    }

    /// The namespace, or "" for cluster-scoped resources.
    pub fn ns(&self) -> String {
        self.namespace.clone().unwrap_or_default()
    }

    /// `resource[.group][/subresource]` for counters.
    pub(super) fn counter_name(&self) -> String {
        let mut s = self.def.plural.clone();
        if !self.def.group.is_empty() {
            s = format!("{s}.{}", self.def.group);
        }
        if let Some(sub) = &self.subresource {
            s = format!("{s}/{sub}");
        }
        s
    }
}

/// JSON response with kube-apiserver's usual headers.
pub fn json_response(code: StatusCode, body: &Value) -> Response {
    let mut resp = (code, body.to_string()).into_response();
    let headers = resp.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers.insert(
        "cache-control",
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}

/// Decodes a JSON request body into an object.
pub fn decode_object(body: &[u8]) -> ApiResult<Value> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: expected an object",
        ));
    }
    Ok(value)
}

/// The PartialObjectMetadata view of an object.
pub fn partial(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object["metadata"],
    })
}

/// The `Status` of a successful delete.
pub fn success_status(def: &ResourceDef, name: &str, uid: &Value) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": crate::error::omit_empty(&json!({"name": name, "group": def.group, "kind": def.plural, "uid": uid})),
    })
}

/// Converts one stored object to the served version.
pub async fn served(def: &ResourceDef, stored: &Value, version: &str) -> ApiResult<Value> {
    to_served(def, vec![stored.clone()], version)
        .await?
        .pop()
        .ok_or_else(|| ApiError::internal("conversion returned no object"))
}

/// Selectors of a list or watch request.
pub struct Selectors {
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Parses `labelSelector` and `fieldSelector`.
    pub fn parse(req: &Req) -> ApiResult<Self> {
        let mut extra: Vec<String> = req
            .def
            .field_selectors
            .iter()
            .map(|s| s.to_string())
            .collect();
        if let Some(v) = req.def.version(&req.version) {
            extra.extend(
                v.selectable_fields
                    .iter()
                    .map(|f| f.trim_start_matches('.').to_string()),
            );
        }
        Ok(Selectors {
            labels: LabelSelector::parse(req.param("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(req.param("fieldSelector").unwrap_or_default(), &extra)?,
        })
    }

    /// Whether a stored object matches.
    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }

    /// Whether any selector is set.
    pub fn any(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty()
    }
}

/// Follow-ups of a write: CRD changes update what is served.
pub fn after_write(store: &mut Store, def: &ResourceDef) {
    if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
        crate::crd::sync(store);
    }
}
