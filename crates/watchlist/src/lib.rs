//! Where a list or watch starts, as kube-apiserver decides it: the checks of its `ListOptions`,
//! and the start of a watch, streaming lists (`sendInitialEvents=true`) included.
//!
//! A streaming list is how client-go's informers list since client-go 0.35 (`WatchListClient`
//! on by default; Cluster API core 1.13 uses it): the reflector opens a watch with
//! `sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan` and `allowWatchBookmarks=true`,
//! takes the `ADDED` events as the list, and counts itself synced only on a `BOOKMARK` whose
//! object is annotated `k8s.io/initial-events-end: "true"`; it never falls back to a plain list
//! once such a watch was answered, so a server that omits the bookmark leaves its caches unsynced
//! forever (client-go `tools/cache/reflector.go` `watchList`, `handleAnyWatch`).
//!
//! Two servers use it: the test API server (`e2e/apiserver`) and the in-memory backend's fake
//! workload API servers (`src/inmemory/server.rs`). Each keeps its own store; this crate says what
//! a request asks of it ([`ListOptions::start`]) and what to answer ([`bookmark`], [`Refusal`]).
//!
//! Facts from kube-apiserver 1.35 (`k8s.io/apimachinery` v0.35.0, `k8s.io/apiserver` v0.35.0;
//! 1.28.4 agrees except where said), with the `WatchList` feature gate on, its default since
//! 1.34:
//! - `ValidateListOptions` (`pkg/apis/meta/internalversion/validation`): [`ListOptions::validate`].
//!   It does not require `allowWatchBookmarks` with `sendInitialEvents`: such a watch is legal,
//!   and gets its initial events without the bookmark (cacher `isListWatchRequest`).
//! - `SetListOptionsDefaults`: a watch from `resourceVersion` `""` or `"0"` that sets neither
//!   `sendInitialEvents` nor `resourceVersionMatch` is taken as `sendInitialEvents=true`.
//! - cacher `Watch`: with `sendInitialEvents=true`, the current objects as `ADDED` (from
//!   `resourceVersion` N, once the cache has reached N: a request beyond it waits 3 s, then fails
//!   with "Too large resource version"), then the bookmark at the cache's current
//!   resourceVersion (1.35 `setInitialEventsEndBookmarkIfRequested`; 1.28 sent it with its next
//!   periodic bookmark); with `sendInitialEvents=false`, no initial events, from N or, for `""`
//!   and `"0"`, from the current resourceVersion; without it, the changes after N.
//!
//! Simplifications: the servers' stores are consistent and synchronous, so a request beyond the
//! current resourceVersion is refused at once instead of after 3 s; a malformed resourceVersion
//! is 400 BadRequest.

#[cfg(test)]
mod tests;

use serde_json::{Value, json};

/// The annotation of the bookmark that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A refused request, as the `Status` kube-apiserver answers: the HTTP code, `reason`,
/// `message` and `details`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason`.
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, when any.
    pub details: Option<Value>,
}

impl Refusal {
    /// The refusal as a `Status` object.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }

    fn bad_request(message: String) -> Self {
        Self {
            code: 400,
            reason: "BadRequest",
            message,
            details: None,
        }
    }
}

/// 504 Timeout with the cause `ResourceVersionTooLarge` (`storage.NewTooLargeResourceVersionError`):
/// a read asked for a resourceVersion the server has not reached. client-go then lists or
/// streams again from `""`.
pub fn too_large(asked: u64, current: u64) -> Refusal {
    Refusal {
        code: 504,
        reason: "Timeout",
        message: format!("Too large resource version: {asked}, current: {current}"),
        details: Some(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        })),
    }
}

/// 410 Expired (`errors.NewResourceExpired`): a watch from a resourceVersion older than the
/// changes the server still holds; `oldest` is the oldest it can resume from.
pub fn expired(asked: u64, oldest: u64) -> Refusal {
    Refusal {
        code: 410,
        reason: "Expired",
        message: format!("too old resource version: {asked} ({oldest})"),
        details: None,
    }
}

/// The object of a `BOOKMARK` event: only `kind`, `apiVersion` and `metadata.resourceVersion`,
/// and the [`INITIAL_EVENTS_END`] annotation on the one that ends a streaming list's initial
/// events (cacher `convertToWatchEvent`).
pub fn bookmark(
    api_version: &str,
    kind: &str,
    resource_version: u64,
    initial_events_end: bool,
) -> Value {
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({INITIAL_EVENTS_END: "true"});
    }
    json!({"kind": kind, "apiVersion": api_version, "metadata": metadata})
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The current objects (those the request selects) as `ADDED` events; then, when
    /// `end_bookmark`, the bookmark [`bookmark`]`(.., true)` at the resourceVersion those objects
    /// were read at; then the changes after it.
    Snapshot {
        /// Whether the initial-events-end bookmark follows the initial events.
        end_bookmark: bool,
    },
    /// The changes after this resourceVersion, and no initial events.
    After(u64),
}

/// The query parameters of a list or watch that decide what it returns and from where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// A watch: `watch=true`, or the legacy `/watch/` path.
    pub watch: bool,
    /// `resourceVersion`, `""` when not given.
    pub resource_version: String,
    /// `resourceVersionMatch`, `""` when not given.
    pub resource_version_match: String,
    /// `sendInitialEvents`, `None` when not given.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `continue`, `""` when not given.
    pub continue_token: String,
}

/// A boolean query parameter as Go's `strconv.ParseBool` reads it.
fn parse_bool(name: &str, value: &str) -> Result<bool, Refusal> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(Refusal::bad_request(format!(
            "{name}: strconv.ParseBool: parsing {value:?}: invalid syntax"
        ))),
    }
}

/// A field error of a `ListOptions`, as `field.Forbidden` or `field.NotSupported` make it.
struct FieldError {
    field: &'static str,
    cause: &'static str,
    body: String,
}

fn forbidden(field: &'static str, detail: &str) -> FieldError {
    FieldError {
        field,
        cause: "FieldValueForbidden",
        body: format!("Forbidden: {detail}"),
    }
}

fn not_supported(field: &'static str, value: &str, supported: &[&str]) -> FieldError {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    FieldError {
        field,
        cause: "FieldValueNotSupported",
        body: format!(
            "Unsupported value: {value:?}: supported values: {}",
            supported.join(", ")
        ),
    }
}

/// 422 Invalid for `ListOptions.meta.k8s.io ""`, as `errors.NewInvalid` words it.
fn invalid(errors: &[FieldError]) -> Refusal {
    let mut texts: Vec<String> = Vec::new();
    for e in errors {
        let text = format!("{}: {}", e.field, e.body);
        if !texts.contains(&text) {
            texts.push(text);
        }
    }
    let summary = match texts.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", texts.join(", ")),
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.cause, "message": e.body, "field": e.field}))
        .collect();
    Refusal {
        code: 422,
        reason: "Invalid",
        message: format!("ListOptions.meta.k8s.io \"\" is invalid: {summary}"),
        details: Some(json!({
            "name": "",
            "group": "meta.k8s.io",
            "kind": "ListOptions",
            "causes": causes,
        })),
    }
}

const NOT_OLDER_THAN: &str = "NotOlderThan";
const EXACT: &str = "Exact";

impl ListOptions {
    /// Reads the options from a request's query parameters (`param` answers a parameter's
    /// value); `watch_path` is true for the legacy `/watch/` paths, which always watch.
    ///
    /// # Errors
    /// 400 BadRequest for a boolean parameter that is not one.
    pub fn from_query<'a>(
        watch_path: bool,
        param: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Self, Refusal> {
        let flag = |name: &str| param(name).map(|v| parse_bool(name, v)).transpose();
        let text = |name: &str| param(name).unwrap_or_default().to_string();
        Ok(Self {
            watch: watch_path || flag("watch")?.unwrap_or(false),
            resource_version: text("resourceVersion"),
            resource_version_match: text("resourceVersionMatch"),
            send_initial_events: flag("sendInitialEvents")?,
            allow_watch_bookmarks: flag("allowWatchBookmarks")?.unwrap_or(false),
            continue_token: text("continue"),
        })
    }

    /// kube-apiserver's `ValidateListOptions` with the `WatchList` feature gate on.
    ///
    /// # Errors
    /// 400 BadRequest for a malformed resourceVersion; 422 Invalid naming every field at fault:
    /// for a list, `sendInitialEvents` at all, or
    /// `resourceVersionMatch` without `resourceVersion`, with `continue`, of an unknown value, or
    /// `Exact` at `"0"`; for a watch, `sendInitialEvents` without
    /// `resourceVersionMatch=NotOlderThan`, or `resourceVersionMatch` without `sendInitialEvents`,
    /// of another value, or with `continue`.
    pub fn validate(&self) -> Result<(), Refusal> {
        self.resource_version()?;
        let errors = if self.watch {
            self.watch_errors()
        } else {
            self.list_errors()
        };
        if errors.is_empty() {
            Ok(())
        } else {
            Err(invalid(&errors))
        }
    }

    fn list_errors(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let matching = self.resource_version_match.as_str();
        if !matching.is_empty() {
            if self.resource_version.is_empty() {
                errors.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !self.continue_token.is_empty() {
                errors.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if matching != EXACT && matching != NOT_OLDER_THAN {
                errors.push(not_supported(
                    "resourceVersionMatch",
                    matching,
                    &[EXACT, NOT_OLDER_THAN, ""],
                ));
            }
            if matching == EXACT && self.resource_version == "0" {
                errors.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if self.send_initial_events.is_some() {
            errors.push(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
        errors
    }

    fn watch_errors(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let matching = self.resource_version_match.as_str();
        if self.send_initial_events.is_some() && matching != NOT_OLDER_THAN {
            errors.push(forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !matching.is_empty() {
            if self.send_initial_events.is_none() {
                errors.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if matching != NOT_OLDER_THAN {
                errors.push(not_supported(
                    "resourceVersionMatch",
                    matching,
                    &[NOT_OLDER_THAN],
                ));
            }
            if !self.continue_token.is_empty() {
                errors.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        errors
    }

    /// `resourceVersion` as a number: 0 for `""` and `"0"`.
    ///
    /// # Errors
    /// 400 BadRequest when it is not a number.
    pub fn resource_version(&self) -> Result<u64, Refusal> {
        match self.resource_version.as_str() {
            "" | "0" => Ok(0),
            rv => rv
                .parse()
                .map_err(|_| Refusal::bad_request(format!("invalid resource version: {rv:?}"))),
        }
    }

    /// Where a watch of validated options starts, on a server whose current resourceVersion is
    /// `current`.
    ///
    /// # Errors
    /// [`too_large`] for initial events asked from beyond `current`: the watch's one `ERROR`
    /// event, as kube-apiserver sends it once a watch is admitted (400 BadRequest for a malformed
    /// resourceVersion, which [`ListOptions::validate`] has refused already).
    pub fn start(&self, current: u64) -> Result<Start, Refusal> {
        let asked = self.resource_version()?;
        let legacy = self.resource_version.is_empty() || self.resource_version == "0";
        // SetListOptionsDefaults: a legacy watch is a streaming list.
        let initial = match self.send_initial_events {
            None if self.resource_version_match.is_empty() && legacy => Some(true),
            other => other,
        };
        match initial {
            Some(true) if asked > current => Err(too_large(asked, current)),
            Some(true) => Ok(Start::Snapshot {
                end_bookmark: self.allow_watch_bookmarks,
            }),
            Some(false) if legacy => Ok(Start::After(current)),
            Some(false) | None => Ok(Start::After(asked)),
        }
    }
}
