//! Tests of the webhook protocols (AdmissionReview, ConversionReview) and of the syntax checks,
//! without a server.

mod admission;
mod conversion;
mod fuzz;
mod syntax;

use serde_json::{Value, json};

use super::Reply;

/// The JSON body of a reply, with its HTTP status.
pub(super) fn decode(reply: Reply) -> (u16, Value) {
    let body = serde_json::from_slice(&reply.body).expect("replies are JSON");
    (reply.status, body)
}

/// A v1beta2 object of `kind` named `name` in namespace `ns` with `spec`.
pub(super) fn v1beta2(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": kind,
        "metadata": {"name": name, "namespace": "ns", "uid": "6d1c4b2e-0000-4000-8000-000000000001"},
        "spec": spec,
    })
}
