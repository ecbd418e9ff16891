//! Webhook request bodies of any shape: every endpoint answers with a JSON reply (an admission
//! or conversion review, or a refusal), never a panic.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::decode;
use crate::webhooks::{Endpoint, Settings, admission, conversion};

const REVIEW_KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "request",
    "uid",
    "operation",
    "object",
    "oldObject",
    "objects",
    "desiredAPIVersion",
    "metadata",
    "name",
    "namespace",
    "spec",
    "status",
    "template",
    "controlPlaneEndpoint",
    "host",
    "port",
    "failureDomains",
    "loadBalancer",
    "customImage",
    "extraMounts",
    "backend",
    "docker",
    "inMemory",
    "bootstrapTimeout",
    "providerID",
    "annotations",
    "labels",
    "CREATE",
    "UPDATE",
    "DockerCluster",
    "DevMachine",
    "infrastructure.cluster.x-k8s.io/v1beta1",
    "infrastructure.cluster.x-k8s.io/v1beta2",
    "admission.k8s.io/v1",
    "apiextensions.k8s.io/v1",
    "AdmissionReview",
    "ConversionReview",
];

const KINDS: &[&str] = &[
    "DockerCluster",
    "DockerClusterTemplate",
    "DockerMachine",
    "DockerMachineTemplate",
    "DockerMachinePool",
    "DockerMachinePoolTemplate",
    "DevCluster",
    "DevClusterTemplate",
    "DevMachine",
    "DevMachineTemplate",
];

/// One of our kinds in either version, with a spec of any shape: past the envelope and the
/// kind check, into the rules.
fn object() -> impl Strategy<Value = Value> {
    (
        proptest::sample::select(KINDS),
        prop_oneof![Just("v1beta1"), Just("v1beta2")],
        crate::fuzz::object_with(REVIEW_KEYS),
        crate::fuzz::object_with(REVIEW_KEYS),
    )
        .prop_map(|(kind, version, spec, status)| {
            json!({
                "apiVersion": format!("infrastructure.cluster.x-k8s.io/{version}"),
                "kind": kind,
                "metadata": {"name": "fuzz", "namespace": "ns", "uid": "6d1c4b2e-0000-4000-8000-000000000002"},
                "spec": spec,
                "status": status,
            })
        })
}

/// A review whose request carries such objects.
fn review() -> impl Strategy<Value = Value> {
    (
        prop_oneof![object(), crate::fuzz::object_with(REVIEW_KEYS)],
        object(),
        prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE"), Just("")],
    )
        .prop_map(|(object, old, operation)| {
            json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "0f0f0f0f-0000-4000-8000-000000000001",
                    "operation": operation,
                    "object": object,
                    "oldObject": old,
                    "desiredAPIVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                    "objects": [object.clone()],
                }
            })
        })
}

fn answer_everywhere(body: &[u8], settings: &Settings) {
    for endpoint in Endpoint::ALL {
        let (status, _) = decode(admission::review(endpoint, settings, body));
        assert!(matches!(status, 200 | 400), "{status}");
    }
    let (status, _) = decode(conversion::review(body));
    assert!(matches!(status, 200 | 400), "{status}");
}

proptest! {
    #![proptest_config(crate::fuzz::config(32))]

    #[test]
    fn fuzz_webhook_bytes(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        answer_everywhere(&body, &Settings::default());
    }

    #[test]
    fn fuzz_webhook_reviews(review in review(), topology in any::<bool>()) {
        let settings = Settings { cluster_topology: topology };
        answer_everywhere(review.to_string().as_bytes(), &settings);
        // The same objects inside a ConversionReview envelope.
        let mut conversion = review;
        conversion["apiVersion"] = json!("apiextensions.k8s.io/v1");
        conversion["kind"] = json!("ConversionReview");
        answer_everywhere(conversion.to_string().as_bytes(), &settings);
    }
}
