//! Fault injection, for tests of how clients live with an unreliable API server.
//!
//! A [`Fault`] matches requests by verb and resource (the keys of
//! [`crate::Handle::request_counts`]) and answers the next `times` of them with an error status
//! (with `Retry-After` where asked, as kube-apiserver's priority and fairness does for 429) or
//! by breaking the connection in the middle of the response. Faults are checked in the order
//! they were added; the first one with answers left wins. Dropped watches and a restart that
//! keeps the stored objects are on [`crate::Handle`].

use std::sync::Mutex;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::ApiError;

/// What a fault answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// An error `Status` with this HTTP code, and `Retry-After` (header and
    /// `details.retryAfterSeconds`) when given.
    Status {
        /// 409, 429, 500, 503, 504...
        code: u16,
        /// Seconds the client is asked to wait.
        retry_after: Option<u32>,
    },
    /// A `200` whose body breaks off: the connection is cut before the response is complete.
    CloseConnection,
}

/// One injected fault.
#[derive(Debug, Clone)]
pub struct Fault {
    /// The verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`); `None` matches every verb.
    pub verb: Option<String>,
    /// The resource as in the request counts (`dockermachines.infrastructure.cluster.x-k8s.io/status`);
    /// `None` matches every resource.
    pub resource: Option<String>,
    /// The answer.
    pub action: FaultAction,
    /// How many requests get it; `None` for every one until [`crate::Handle::clear_faults`].
    pub times: Option<u32>,
}

impl Fault {
    /// `times` answers of HTTP `code` to `verb` on `resource`.
    pub fn status(verb: &str, resource: &str, code: u16, times: u32) -> Self {
        Fault {
            verb: Some(verb.to_string()),
            resource: Some(resource.to_string()),
            action: FaultAction::Status {
                code,
                retry_after: None,
            },
            times: Some(times),
        }
    }

    /// `times` cut connections for `verb` on `resource`.
    pub fn close_connection(verb: &str, resource: &str, times: u32) -> Self {
        Fault {
            verb: Some(verb.to_string()),
            resource: Some(resource.to_string()),
            action: FaultAction::CloseConnection,
            times: Some(times),
        }
    }

    /// The same fault asking clients to wait `seconds` (only for a status answer).
    pub fn retry_after(mut self, seconds: u32) -> Self {
        if let FaultAction::Status { retry_after, .. } = &mut self.action {
            *retry_after = Some(seconds);
        }
        self
    }

    fn matches(&self, verb: &str, resource: &str) -> bool {
        self.verb.as_deref().is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
    }
}

/// What a fault's matching requests met, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// When the request arrived.
    pub at: Instant,
    /// Whether this fault answered it (false: its answers were used up, the request was served).
    pub faulted: bool,
}

/// The faults of a server and what they met.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<Vec<(Fault, u32, Vec<Hit>)>>,
}

impl Faults {
    /// Adds a fault; its index is its id for [`Faults::hits`].
    pub fn add(&self, fault: Fault) -> usize {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules.push((fault, 0, Vec::new()));
        rules.len() - 1
    }

    /// Removes every fault (and what they met).
    pub fn clear(&self) {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The requests fault `id` matched so far.
    pub fn hits(&self, id: usize) -> Vec<Hit> {
        self.rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .map(|(_, _, hits)| hits.clone())
            .unwrap_or_default()
    }

    /// The answer for a request, when a fault takes it. Every matching fault records the
    /// request; the first one with answers left answers it.
    pub fn answer(&self, verb: &str, resource: &str) -> Option<Response> {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let mut answer = None;
        for (fault, used, hits) in rules.iter_mut() {
            if !fault.matches(verb, resource) {
                continue;
            }
            let left = fault.times.is_none_or(|times| *used < times);
            let faulted = answer.is_none() && left;
            hits.push(Hit { at: now, faulted });
            if faulted {
                *used += 1;
                answer = Some(fault.action.clone());
            }
        }
        drop(rules);
        answer.map(|action| respond(&action, verb, resource))
    }
}

fn respond(action: &FaultAction, verb: &str, resource: &str) -> Response {
    match action {
        FaultAction::Status { code, retry_after } => {
            let (reason, message) = match code {
                409 => (
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on {resource}: the object has been modified; please apply your changes to the latest version and try again"
                    ),
                ),
                429 => (
                    "TooManyRequests",
                    "Too many requests, please try again later.".to_string(),
                ),
                500 => (
                    "InternalError",
                    format!("Internal error occurred: injected fault on {verb} {resource}"),
                ),
                503 => (
                    "ServiceUnavailable",
                    "The server is currently unable to handle the request".to_string(),
                ),
                504 => (
                    "Timeout",
                    format!(
                        "Timeout: request did not complete within the allowed duration ({verb} {resource})"
                    ),
                ),
                _ => ("", format!("injected fault on {verb} {resource}")),
            };
            let mut error = ApiError::new(*code, reason, message);
            if let Some(seconds) = retry_after {
                error.details = Some(json!({"retryAfterSeconds": seconds}));
            }
            let mut response = error.into_response();
            if let Some(seconds) = retry_after
                && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
            {
                response.headers_mut().insert("retry-after", value);
            }
            response
        }
        FaultAction::CloseConnection => {
            // A first chunk, then an error: hyper aborts the connection mid-body.
            let chunks: [Result<Bytes, std::io::Error>; 2] = [
                Ok(Bytes::from_static(b"{\"kind\":")),
                Err(std::io::Error::other("injected: connection closed")),
            ];
            let mut response = Response::new(Body::from_stream(futures::stream::iter(chunks)));
            *response.status_mut() = StatusCode::OK;
            response
                .headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_answer_in_order_and_only_as_often_as_asked() {
        let faults = Faults::default();
        let conflict = faults.add(Fault::status("patch", "widgets/status", 409, 1));
        let throttle = faults.add(Fault::status("patch", "widgets/status", 429, 1).retry_after(2));
        let first = faults.answer("patch", "widgets/status").unwrap();
        assert_eq!(first.status(), StatusCode::CONFLICT);
        let second = faults.answer("patch", "widgets/status").unwrap();
        assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(second.headers()["retry-after"], "2");
        assert!(faults.answer("patch", "widgets/status").is_none());
        assert!(faults.answer("get", "widgets").is_none());
        let faulted = |id| -> Vec<bool> { faults.hits(id).iter().map(|h| h.faulted).collect() };
        assert_eq!(faulted(conflict), [true, false, false]);
        assert_eq!(faulted(throttle), [false, true, false]);
        faults.clear();
        assert!(faults.hits(conflict).is_empty());
    }

    #[test]
    fn a_fault_without_a_count_lasts_until_cleared() {
        let faults = Faults::default();
        faults.add(Fault {
            verb: None,
            resource: Some("widgets".into()),
            action: FaultAction::Status {
                code: 503,
                retry_after: None,
            },
            times: None,
        });
        for verb in ["get", "list", "create"] {
            let answer = faults.answer(verb, "widgets").unwrap();
            assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        }
        faults.clear();
        assert!(faults.answer("get", "widgets").is_none());
    }
}
