use serde_json::{Value, json};

use super::{decode, v1beta2};
use crate::api::CONVERSION_DATA_ANNOTATION;
use crate::webhooks::conversion::review;

const V1BETA1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const V1BETA2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";
const UID: &str = "0f1e2d3c-0000-4000-8000-00000000c0de";

fn conversion_review(desired: &str, objects: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": UID, "desiredAPIVersion": desired, "objects": objects},
    }))
    .unwrap()
}

/// Converts `objects` to `desired`, asserting success; returns the converted objects.
fn convert(desired: &str, objects: &[Value]) -> Vec<Value> {
    let (status, body) = decode(review(&conversion_review(desired, objects)));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(body["kind"], "ConversionReview");
    let response = &body["response"];
    assert_eq!(response["uid"], UID);
    assert_eq!(response["result"]["status"], "Success", "{body}");
    response["convertedObjects"].as_array().unwrap().clone()
}

/// One object of every kind, with the fields whose shape differs between the versions set.
fn hub_objects() -> Vec<Value> {
    let mut cluster = v1beta2(
        "DockerCluster",
        "c1",
        json!({
            "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
            "failureDomains": [{"name": "fd1", "controlPlane": true}, {"name": "fd2", "controlPlane": false}],
            "loadBalancer": {"imageRepository": "kindest", "imageTag": "v1"},
        }),
    );
    cluster["status"] = json!({
        "initialization": {"provisioned": true},
        "failureDomains": [{"name": "fd1", "controlPlane": true}],
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "Ready", "message": "",
            "lastTransitionTime": "2026-01-02T03:04:05Z", "observedGeneration": 2,
        }],
    });
    let mut machine = v1beta2(
        "DockerMachine",
        "m1",
        json!({
            "providerID": "docker:////c1-m1",
            "customImage": "kindest/node:v1.31.0",
            "preLoadImages": ["nginx"],
            "extraMounts": [{"containerPath": "/a", "hostPath": "/b", "readOnly": true}],
            "bootstrapTimeout": "5m",
        }),
    );
    machine["status"] = json!({
        "initialization": {"provisioned": true},
        "loadBalancerConfigured": false,
        "addresses": [{"type": "Hostname", "address": "c1-m1"}],
    });
    let cluster_template = v1beta2(
        "DockerClusterTemplate",
        "ct1",
        json!({"template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"failureDomains": [{"name": "fd1", "controlPlane": false}]},
        }}),
    );
    let mut machine_template = v1beta2(
        "DockerMachineTemplate",
        "mt1",
        json!({"template": {"spec": {"customImage": "kindest/node:v1.31.0"}}}),
    );
    machine_template["status"] = json!({"capacity": {"cpu": "8", "memory": "16Gi"}});
    let pool = v1beta2(
        "DockerMachinePool",
        "p1",
        json!({
            "template": {"customImage": "kindest/node:v1.31.0", "preLoadImages": ["nginx"]},
            "providerIDList": ["docker:////c1-p1-a"],
        }),
    );
    let pool_template = v1beta2(
        "DockerMachinePoolTemplate",
        "pt1",
        json!({"template": {"spec": {"template": {"customImage": "kindest/node:v1.31.0"}}}}),
    );
    let mut dev_cluster = v1beta2(
        "DevCluster",
        "dc1",
        json!({
            "controlPlaneEndpoint": {"host": "172.18.0.4", "port": 6443},
            "backend": {"docker": {"failureDomains": [{"name": "fd2"}, {"name": "fd1", "controlPlane": true}]}},
        }),
    );
    dev_cluster["status"] = json!({"initialization": {"provisioned": true}});
    let mut dev_machine = v1beta2(
        "DevMachine",
        "dm1",
        json!({"providerID": "docker:////c1-dm1", "backend": {"docker": {"customImage": "kindest/node:v1.31.0"}}}),
    );
    dev_machine["status"] = json!({
        "initialization": {"provisioned": false},
        "failureDomain": "fd1",
    });
    let dev_cluster_template = v1beta2(
        "DevClusterTemplate",
        "dct1",
        json!({"template": {"spec": {"backend": {"docker": {"loadBalancer": {"imageTag": "v2"}}}}}}),
    );
    let mut dev_machine_template = v1beta2(
        "DevMachineTemplate",
        "dmt1",
        json!({"template": {"spec": {"backend": {"inMemory": {"vm": {"provisioning": {"startupDuration": "10s"}}}}}}}),
    );
    dev_machine_template["status"] = json!({"capacity": {"cpu": "8"}});
    vec![
        cluster,
        cluster_template,
        machine,
        machine_template,
        pool,
        pool_template,
        dev_cluster,
        dev_cluster_template,
        dev_machine,
        dev_machine_template,
    ]
}

#[test]
fn every_kind_round_trips_through_v1beta1_without_loss() {
    let hub = hub_objects();
    let spokes = convert(V1BETA1, &hub);
    assert_eq!(spokes.len(), hub.len());
    for (spoke, original) in spokes.iter().zip(&hub) {
        assert_eq!(spoke["apiVersion"], V1BETA1);
        assert_eq!(spoke["kind"], original["kind"], "order and kinds are kept");
        assert_eq!(spoke["metadata"]["name"], original["metadata"]["name"]);
    }
    assert_eq!(
        spokes[0]["spec"]["failureDomains"],
        json!({"fd1": {"controlPlane": true}, "fd2": {}}),
        "v1beta1 clients see the failure domain map"
    );
    assert_eq!(spokes[0]["status"]["ready"], true);
    assert_eq!(
        spokes[6]["spec"]["backend"]["docker"]["failureDomains"],
        json!({"fd1": {"controlPlane": true}, "fd2": {}}),
        "and a DevCluster's docker backend has it too"
    );
    let back = convert(V1BETA2, &spokes);
    assert_eq!(back, hub, "v1beta2 → v1beta1 → v1beta2 must be lossless");
}

/// kube-apiserver fills a watch cache for every version a CRD lists, served or not, by
/// converting every stored object into it: each retired version CAPD 1.12's CRDs list (ours no
/// longer do; the webhook serves CAPD 1.12's CRDs too) converts, for every kind that lists it,
/// and back without loss.
#[test]
fn every_retired_version_capd_1_12_lists_converts_every_kind_that_lists_it() {
    let hub = hub_objects();
    let mut checked = Vec::new();
    for crd in crate::api::crd::all().unwrap() {
        let kind = crd.spec.names.kind.clone();
        let retired = crate::api::crd::retired_versions(&kind);
        if retired.is_empty() {
            continue;
        }
        let objects: Vec<Value> = hub.iter().filter(|o| o["kind"] == kind).cloned().collect();
        assert_eq!(objects.len(), 1, "hub_objects has one {kind}");
        for version in retired {
            let desired = format!("infrastructure.cluster.x-k8s.io/{version}");
            let down = convert(&desired, &objects);
            assert_eq!(down[0]["apiVersion"], desired.as_str(), "{kind}");
            assert_eq!(convert(V1BETA2, &down), objects, "{kind} {desired}");
            checked.push(format!("{kind} {version}"));
        }
    }
    assert_eq!(checked.len(), 9, "{checked:?}");
}

#[test]
fn v1beta1_objects_are_served_as_v1beta2() {
    let spoke = json!({
        "apiVersion": V1BETA1,
        "kind": "DockerCluster",
        "metadata": {"name": "old", "namespace": "ns"},
        "spec": {
            "controlPlaneEndpoint": {"host": "", "port": 0},
            "failureDomains": {"b": {"controlPlane": true}, "a": {}},
        },
    });
    let hub = convert(V1BETA2, std::slice::from_ref(&spoke));
    assert_eq!(hub[0]["apiVersion"], V1BETA2);
    assert_eq!(
        hub[0]["spec"]["failureDomains"],
        json!([{"name": "a", "controlPlane": false}, {"name": "b", "controlPlane": true}])
    );
    let again = convert(V1BETA1, &hub);
    let mut again = again[0].clone();
    if let Some(annotations) = again["metadata"]["annotations"].as_object_mut() {
        annotations.remove(CONVERSION_DATA_ANNOTATION);
        if annotations.is_empty() {
            again["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("annotations");
        }
    }
    assert_eq!(
        again, spoke,
        "v1beta1 → v1beta2 → v1beta1 keeps what the client wrote"
    );
}

#[test]
fn objects_already_in_the_desired_version_pass_unchanged() {
    let hub = hub_objects();
    assert_eq!(convert(V1BETA2, &hub), hub);
}

#[test]
fn one_bad_object_fails_the_review_and_is_named() {
    let mut objects = hub_objects();
    objects[2]["kind"] = json!("DevMachineSet");
    let (status, body) = decode(review(&conversion_review(V1BETA1, &objects)));
    assert_eq!(status, 200);
    let response = &body["response"];
    assert_eq!(response["uid"], UID);
    assert_eq!(response["result"]["status"], "Failure");
    assert_eq!(
        response["result"]["message"],
        "failed to convert object 2 (DevMachineSet ns/m1) to \
         infrastructure.cluster.x-k8s.io/v1beta1: cannot convert kind DevMachineSet: not served by \
         this provider"
    );
    assert_eq!(response["convertedObjects"], json!([]));
}

/// DevMachinePool and DevMachinePoolTemplate exist in v1beta2 only (as in CAPD 1.14): a
/// request for v1beta1 is refused, naming the version.
#[test]
fn the_v1beta2_only_kinds_convert_to_no_other_version() {
    for kind in ["DevMachinePool", "DevMachinePoolTemplate"] {
        let object = v1beta2(kind, "p1", json!({"backend": {"docker": {}}}));
        let same = std::slice::from_ref(&object);
        assert_eq!(convert(V1BETA2, same), same, "{kind}");
        let (_, body) = decode(review(&conversion_review(V1BETA1, same)));
        let message = body["response"]["result"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "cannot convert {kind} to or from version v1beta1: not a version of this kind"
            )),
            "{message}"
        );
    }
}

#[test]
fn unknown_versions_fail_the_review() {
    let (_, body) = decode(review(&conversion_review(
        "infrastructure.cluster.x-k8s.io/v1alpha2",
        &hub_objects(),
    )));
    assert_eq!(body["response"]["result"]["status"], "Failure");
    let message = body["response"]["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("v1alpha2: not a version of this kind"),
        "{message}"
    );
}

#[test]
fn malformed_reviews_get_http_400() {
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("not JSON", b"[".to_vec(), "failed to decode the ConversionReview"),
        (
            "admission review sent to /convert",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
            "unsupported review admission.k8s.io/v1/AdmissionReview",
        ),
        (
            "no request",
            br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}"#.to_vec(),
            "the ConversionReview has no request",
        ),
        (
            "no desired version",
            br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x","objects":[]}}"#.to_vec(),
            "missing field `desiredAPIVersion`",
        ),
    ];
    for (case, body, fragment) in cases {
        let (status, reply) = decode(review(&body));
        assert_eq!(status, 400, "case {case:?}");
        assert_eq!(
            reply["response"]["result"]["status"], "Failure",
            "case {case:?}"
        );
        let message = reply["response"]["result"]["message"].as_str().unwrap();
        assert!(message.contains(fragment), "case {case:?}: {message}");
    }
}

/// The bytes `/convert` answers (success, failure and an unreadable body), pinned: a change of the
/// review types (such as kube's, below) must not change them.
#[test]
fn the_wire_output_is_unchanged_byte_for_byte() {
    let object = v1beta2(
        "DockerMachine",
        "m1",
        json!({"customImage": "kindest/node:v1.31.0"}),
    );
    let cases = [
        (
            review(&conversion_review(V1BETA2, std::slice::from_ref(&object))),
            200,
            r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"0f1e2d3c-0000-4000-8000-00000000c0de","convertedObjects":[{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"DockerMachine","metadata":{"name":"m1","namespace":"ns","uid":"6d1c4b2e-0000-4000-8000-000000000001"},"spec":{"customImage":"kindest/node:v1.31.0"}}],"result":{"apiVersion":"v1","kind":"Status","metadata":{},"status":"Success"}}}"#,
        ),
        (
            review(&conversion_review(
                "infrastructure.cluster.x-k8s.io/v1alpha2",
                std::slice::from_ref(&object),
            )),
            200,
            r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"0f1e2d3c-0000-4000-8000-00000000c0de","convertedObjects":[],"result":{"apiVersion":"v1","kind":"Status","message":"failed to convert object 0 (DockerMachine ns/m1) to infrastructure.cluster.x-k8s.io/v1alpha2: cannot convert DockerMachine to or from version v1alpha2: not a version of this kind","metadata":{},"status":"Failure"}}}"#,
        ),
        (
            review(b"["),
            400,
            r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"","convertedObjects":[],"result":{"apiVersion":"v1","kind":"Status","message":"failed to decode the ConversionReview: EOF while parsing a list at line 1 column 1","metadata":{},"status":"Failure"}}}"#,
        ),
    ];
    for (reply, status, expected) in cases {
        assert_eq!(reply.status, status, "{expected}");
        assert_eq!(String::from_utf8_lossy(&reply.body), expected);
    }
}

/// kube's ConversionReview types against ours, in both directions: kube reads the API server's
/// review and our answer as we do, but kube's own answer to the same review is not the same JSON
/// (its `Status` has no `apiVersion`, `kind` or `metadata`), and it refuses malformed reviews with
/// other messages: the wire output would change, so the types stay ours.
#[test]
fn kube_conversion_types_read_our_answer_but_would_write_another() {
    use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};

    let objects = hub_objects();
    let body = conversion_review(V1BETA1, &objects);
    let (status, ours) = decode(review(&body));
    assert_eq!(status, 200, "{ours}");

    // Our answer, read with kube's types.
    let read: ConversionReview = serde_json::from_value(ours.clone()).unwrap();
    assert_eq!(read.types.api_version, "apiextensions.k8s.io/v1");
    assert_eq!(read.types.kind, "ConversionReview");
    let response = read.response.expect("a response");
    assert_eq!(response.uid, UID);
    assert!(response.result.is_success(), "{ours}");
    assert_eq!(
        response.converted_objects,
        ours["response"]["convertedObjects"]
            .as_array()
            .unwrap()
            .clone()
    );

    // kube's answer to the same request, with the same converted objects.
    let request: ConversionReview = serde_json::from_slice(&body).unwrap();
    let request = ConversionRequest::from_review(request).unwrap();
    assert_eq!(request.objects, objects);
    let theirs = ConversionResponse::for_request(request)
        .success(response.converted_objects)
        .into_review();
    let theirs = serde_json::to_value(theirs).unwrap();
    let mut ours_without_status_type = ours.clone();
    let result = ours_without_status_type["response"]["result"]
        .as_object_mut()
        .unwrap();
    for key in ["apiVersion", "kind", "metadata"] {
        assert!(result.remove(key).is_some(), "{key} in our result");
    }
    assert_eq!(
        theirs, ours_without_status_type,
        "kube's answer differs from ours only by result.apiVersion, .kind and .metadata"
    );
    assert_ne!(theirs, ours);

    // Malformed reviews: the messages a client would see differ.
    for (body, ours_says, kube_says) in [
        (
            &b"["[..],
            "EOF while parsing a list",
            "invalid type: sequence, expected struct ConversionReview",
        ),
        (
            br#"{"request":{"uid":"x","desiredAPIVersion":"v","objects":[]}}"#,
            "unsupported review /",
            "missing field `apiVersion`",
        ),
    ] {
        let (_, reply) = decode(review(body));
        let message = reply["response"]["result"]["message"].as_str().unwrap();
        assert!(message.contains(ours_says), "{message}");
        let kube_error = serde_json::from_slice::<ConversionReview>(body)
            .unwrap_err()
            .to_string();
        assert!(kube_error.contains(kube_says), "{kube_error}");
    }
}
