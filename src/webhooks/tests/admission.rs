use base64::Engine;
use serde_json::{Value, json};

use super::{decode, v1beta2};
use crate::webhooks::admission::review;
use crate::webhooks::{Endpoint, Kind, Settings};

/// An AdmissionReview for `object` (and `old` on update) of `kind`.
fn admission_review(kind: &str, operation: &str, object: &Value, old: Option<&Value>) -> Vec<u8> {
    let mut request = json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta2", "kind": kind},
        "resource": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta2", "resource": "x"},
        "name": object["metadata"]["name"],
        "namespace": "ns",
        "operation": operation,
        "userInfo": {"username": "admin"},
        "object": object,
        "dryRun": false,
    });
    if let Some(old) = old {
        request["oldObject"] = old.clone();
    }
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    }))
    .unwrap()
}

fn run(endpoint: Endpoint, settings: Settings, body: &[u8]) -> (u16, Value) {
    decode(review(endpoint, &settings, body))
}

/// Applies the response's base64 JSON Patch to `object`.
fn patched(response: &Value, object: &Value) -> Value {
    assert_eq!(response["patchType"], "JSONPatch", "{response}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("a patch"))
        .expect("base64");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("a JSON Patch");
    let mut object = object.clone();
    json_patch::patch(&mut object, &patch).expect("the patch applies to the sent object");
    object
}

#[test]
fn defaulting_answers_with_a_patch_that_applies_to_the_sent_object() {
    let cluster = v1beta2(
        "DockerCluster",
        "c1",
        json!({
            "failureDomains": [{"name": "fd2"}, {"name": "fd1", "controlPlane": true}],
            "loadBalancer": {"imageTag": "v1"},
        }),
    );
    let (status, body) = run(
        Endpoint::Mutate(Kind::DockerCluster),
        Settings::default(),
        &admission_review("DockerCluster", "CREATE", &cluster, None),
    );
    assert_eq!(status, 200);
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(body["kind"], "AdmissionReview");
    let response = &body["response"];
    assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(response["allowed"], true);
    let defaulted = patched(response, &cluster);
    assert_eq!(
        defaulted["spec"],
        json!({
            "controlPlaneEndpoint": {"port": 6443},
            "failureDomains": [
                {"name": "fd1", "controlPlane": true},
                {"name": "fd2", "controlPlane": false},
            ],
            "loadBalancer": {"imageTag": "v1"},
        })
    );
    assert_eq!(
        defaulted["metadata"], cluster["metadata"],
        "defaulting touches the spec only"
    );
    assert_eq!(
        response["warnings"],
        json!(["spec.failureDomains were sorted by name"]),
        "the user is told that the order changed"
    );
}

#[test]
fn defaulting_leaves_fields_it_does_not_know_alone() {
    let template = v1beta2(
        "DockerClusterTemplate",
        "ct1",
        json!({"template": {"spec": {"futureField": {"x": 1}}}}),
    );
    let (_, body) = run(
        Endpoint::Mutate(Kind::DockerClusterTemplate),
        Settings::default(),
        &admission_review(
            "DockerClusterTemplate",
            "UPDATE",
            &template,
            Some(&template),
        ),
    );
    let defaulted = patched(&body["response"], &template);
    assert_eq!(
        defaulted["spec"]["template"]["spec"],
        json!({"futureField": {"x": 1}, "controlPlaneEndpoint": {"port": 6443}})
    );
}

#[test]
fn defaulting_an_already_defaulted_object_sends_no_patch() {
    let cluster = v1beta2(
        "DockerCluster",
        "c1",
        json!({"controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443}}),
    );
    let (_, body) = run(
        Endpoint::Mutate(Kind::DockerCluster),
        Settings::default(),
        &admission_review("DockerCluster", "CREATE", &cluster, None),
    );
    let response = &body["response"];
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");
    assert!(response.get("patchType").is_none(), "{response}");
    assert!(response.get("warnings").is_none(), "{response}");
}

#[test]
fn denials_carry_an_invalid_status_with_field_causes() {
    let old = v1beta2(
        "DockerMachine",
        "m1",
        json!({"customImage": "kindest/node:v1.31.0"}),
    );
    let new = v1beta2(
        "DockerMachine",
        "m1",
        json!({"customImage": "kindest/node:v1.32.0"}),
    );
    let (status, body) = run(
        Endpoint::Validate(Kind::DockerMachine),
        Settings::default(),
        &admission_review("DockerMachine", "UPDATE", &new, Some(&old)),
    );
    assert_eq!(status, 200, "a denial is a successful review");
    let response = &body["response"];
    assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(response["allowed"], false);
    let result = &response["status"];
    assert_eq!(result["status"], "Failure");
    assert_eq!(result["code"], 422);
    assert_eq!(result["reason"], "Invalid");
    assert_eq!(
        result["message"],
        "DockerMachine.infrastructure.cluster.x-k8s.io \"m1\" is invalid: spec.customImage: \
         Invalid value: \"kindest/node:v1.32.0\": field is immutable"
    );
    assert_eq!(result["details"]["kind"], "DockerMachine");
    assert_eq!(result["details"]["name"], "m1");
    assert_eq!(
        result["details"]["causes"],
        json!([{
            "field": "spec.customImage",
            "reason": "FieldValueInvalid",
            "message": "Invalid value: \"kindest/node:v1.32.0\": field is immutable",
        }])
    );
}

#[test]
fn several_errors_are_listed_together() {
    let machine = v1beta2(
        "DockerMachine",
        "m1",
        json!({"customImage": "Bad", "extraMounts": [{"containerPath": "x", "hostPath": "/y"}]}),
    );
    let (_, body) = run(
        Endpoint::Validate(Kind::DockerMachine),
        Settings::default(),
        &admission_review("DockerMachine", "CREATE", &machine, None),
    );
    let result = &body["response"]["status"];
    let message = result["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "DockerMachine.infrastructure.cluster.x-k8s.io \"m1\" is invalid: [spec.customImage: "
        ) && message.contains(", spec.extraMounts[0].containerPath: Invalid value: \"x\"")
            && message.ends_with(']'),
        "{message}"
    );
    let fields: Vec<&str> = result["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["spec.customImage", "spec.extraMounts[0].containerPath"]
    );
}

#[test]
fn the_cluster_topology_gate_decides_template_creation() {
    let template = v1beta2(
        "DockerClusterTemplate",
        "ct1",
        json!({"template": {"spec": {}}}),
    );
    let body = admission_review("DockerClusterTemplate", "CREATE", &template, None);
    let endpoint = Endpoint::Validate(Kind::DockerClusterTemplate);
    let (_, off) = run(endpoint, Settings::default(), &body);
    assert_eq!(off["response"]["allowed"], false);
    assert_eq!(
        off["response"]["status"]["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
    let (_, on) = run(
        endpoint,
        Settings {
            cluster_topology: true,
        },
        &body,
    );
    assert_eq!(on["response"]["allowed"], true, "{on}");
}

#[test]
fn the_topology_dry_run_is_read_from_the_request() {
    // The topology controller patches customImage into both machine template kinds (CAPD's
    // quick-start ClusterClass: /spec/template/spec/customImage and
    // /spec/template/spec/template/customImage).
    let templates = [
        (
            Kind::DockerMachineTemplate,
            json!({"template": {"spec": {"customImage": "kindest/node:v1.31.0"}}}),
        ),
        (
            Kind::DockerMachinePoolTemplate,
            json!({"template": {"spec": {"template": {"customImage": "kindest/node:v1.31.0"}}}}),
        ),
    ];
    for (kind, spec) in templates {
        let old = v1beta2(kind.name(), "t1", spec.clone());
        let patched = spec.to_string().replace("v1.31.0", "v1.32.0");
        let mut new = v1beta2(kind.name(), "t1", serde_json::from_str(&patched).unwrap());
        new["metadata"]["annotations"] = json!({"topology.cluster.x-k8s.io/dry-run": ""});
        let mut review: Value =
            serde_json::from_slice(&admission_review(kind.name(), "UPDATE", &new, Some(&old)))
                .unwrap();
        let endpoint = Endpoint::Validate(kind);
        let (_, body) = run(
            endpoint,
            Settings::default(),
            &serde_json::to_vec(&review).unwrap(),
        );
        assert_eq!(
            body["response"]["allowed"], false,
            "{kind:?}, not a dry run: {body}"
        );
        review["request"]["dryRun"] = json!(true);
        let (_, body) = run(
            endpoint,
            Settings::default(),
            &serde_json::to_vec(&review).unwrap(),
        );
        assert_eq!(
            body["response"]["allowed"], true,
            "{kind:?}, topology dry run: {body}"
        );
    }
}

#[test]
fn deletes_are_allowed_without_looking() {
    let machine = v1beta2("DockerMachine", "m1", json!({}));
    let mut review: Value =
        serde_json::from_slice(&admission_review("DockerMachine", "DELETE", &machine, None))
            .unwrap();
    review["request"]["object"] = Value::Null;
    let (status, body) = run(
        Endpoint::Validate(Kind::DockerMachine),
        Settings::default(),
        &serde_json::to_vec(&review).unwrap(),
    );
    assert_eq!((status, &body["response"]["allowed"]), (200, &json!(true)));
}

/// Malformed requests: (case, body, HTTP status, uid echoed, message fragment).
#[test]
fn malformed_requests_get_a_400_with_a_reason() {
    let machine = v1beta2("DockerMachine", "m1", json!({}));
    let valid: Value = serde_json::from_slice(&admission_review(
        "DockerMachine",
        "UPDATE",
        &machine,
        Some(&machine),
    ))
    .unwrap();
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut review = valid.clone();
        edit(&mut review);
        serde_json::to_vec(&review).unwrap()
    };
    let uid = "705ab4f5-6393-11e8-b7cc-42010a800002";
    let cases: Vec<(&str, Vec<u8>, u16, &str, &str)> = vec![
        (
            "not JSON",
            b"{not json".to_vec(),
            400,
            "",
            "failed to decode the AdmissionReview: key must be a string",
        ),
        (
            "empty body",
            Vec::new(),
            400,
            "",
            "failed to decode the AdmissionReview: EOF",
        ),
        (
            "old AdmissionReview version",
            with(&|r| r["apiVersion"] = json!("admission.k8s.io/v1beta1")),
            400,
            "",
            "unsupported review admission.k8s.io/v1beta1/AdmissionReview",
        ),
        (
            "no request",
            with(&|r| r["request"] = Value::Null),
            400,
            "",
            "the AdmissionReview has no request",
        ),
        (
            "request without uid",
            with(&|r| {
                r["request"]
                    .as_object_mut()
                    .unwrap()
                    .retain(|k, _| k != "uid")
            }),
            400,
            "",
            "missing field `uid`",
        ),
        (
            "v1beta1 object (matchPolicy Exact)",
            with(&|r| r["request"]["kind"]["version"] = json!("v1beta1")),
            200,
            uid,
            "this endpoint handles DockerMachine infrastructure.cluster.x-k8s.io/v1beta2, got \
             DockerMachine infrastructure.cluster.x-k8s.io/v1beta1 (register it with \
             matchPolicy: Equivalent so the API server converts)",
        ),
        (
            "kind of another endpoint",
            with(&|r| r["request"]["kind"]["kind"] = json!("DockerCluster")),
            200,
            uid,
            "this endpoint handles DockerMachine",
        ),
        (
            "unknown operation",
            with(&|r| r["request"]["operation"] = json!("PATCH")),
            200,
            uid,
            "unknown operation \"PATCH\"",
        ),
        (
            "update without oldObject",
            with(&|r| r["request"]["oldObject"] = Value::Null),
            200,
            uid,
            "the request has no oldObject",
        ),
        (
            "object of the wrong shape",
            with(&|r| r["request"]["object"]["spec"]["extraMounts"] = json!("not a list")),
            200,
            uid,
            "failed to decode object as DockerMachine v1beta2: invalid type: string \"not a list\", expected a sequence",
        ),
    ];
    for (case, body, http, echoed_uid, fragment) in cases {
        let (status, reply) = run(
            Endpoint::Validate(Kind::DockerMachine),
            Settings::default(),
            &body,
        );
        assert_eq!(status, http, "case {case:?}: {reply}");
        let response = &reply["response"];
        assert_eq!(response["uid"], echoed_uid, "case {case:?}");
        assert_eq!(response["allowed"], false, "case {case:?}");
        assert_eq!(response["status"]["code"], 400, "case {case:?}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(fragment), "case {case:?}: {message}");
    }
}

/// CAPD 1.12 manifests may leave out `spec.backend`, which the CRD requires: defaulting, which
/// runs before schema validation, adds the docker backend (and, for a cluster, the port).
#[test]
fn dev_manifests_without_a_backend_get_the_docker_backend() {
    let cases = [
        (
            Kind::DevCluster,
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevCluster",
                   "metadata": {"name": "dev", "namespace": "ns"}, "spec": {}}),
            "/spec",
            json!({"controlPlaneEndpoint": {"port": 6443}, "backend": {"docker": {}}}),
        ),
        (
            Kind::DevMachine,
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachine",
                   "metadata": {"name": "dev-md-0", "namespace": "ns"}}),
            "/spec",
            json!({"backend": {"docker": {}}}),
        ),
        (
            Kind::DevMachineTemplate,
            v1beta2(
                "DevMachineTemplate",
                "dmt",
                json!({"template": {"spec": {}}}),
            ),
            "/spec/template/spec",
            json!({"backend": {"docker": {}}}),
        ),
        (
            Kind::DevClusterTemplate,
            v1beta2(
                "DevClusterTemplate",
                "dct",
                json!({"template": {"spec": {"backend": null}}}),
            ),
            "/spec/template/spec",
            json!({"controlPlaneEndpoint": {"port": 6443}, "backend": {"docker": {}}}),
        ),
    ];
    for (kind, object, at, expected) in cases {
        let (status, body) = run(
            Endpoint::Mutate(kind),
            Settings::default(),
            &admission_review(kind.name(), "CREATE", &object, None),
        );
        assert_eq!(status, 200, "{kind:?}: {body}");
        assert_eq!(body["response"]["allowed"], true, "{kind:?}: {body}");
        let defaulted = patched(&body["response"], &object);
        assert_eq!(defaulted.pointer(at), Some(&expected), "{kind:?}");
        // The defaulted object passes validation.
        let (_, body) = run(
            Endpoint::Validate(kind),
            Settings {
                cluster_topology: true,
            },
            &admission_review(kind.name(), "CREATE", &defaulted, None),
        );
        assert_eq!(body["response"]["allowed"], true, "{kind:?}: {body}");
    }

    // An in-memory object is left as it is.
    let in_memory = v1beta2("DevMachine", "m", json!({"backend": {"inMemory": {}}}));
    let (_, body) = run(
        Endpoint::Mutate(Kind::DevMachine),
        Settings::default(),
        &admission_review("DevMachine", "CREATE", &in_memory, None),
    );
    assert!(body["response"].get("patch").is_none(), "{body}");
}

#[test]
fn dev_denials_name_the_dev_field() {
    let old = v1beta2(
        "DevMachine",
        "m1",
        json!({"backend": {"docker": {"customImage": "kindest/node:v1.31.0"}}}),
    );
    let mut new = old.clone();
    new["spec"]["backend"]["docker"]["customImage"] = json!("kindest/node:v1.32.0");
    new["spec"]["backend"]["inMemory"] = json!({});
    let (_, body) = run(
        Endpoint::Validate(Kind::DevMachine),
        Settings::default(),
        &admission_review("DevMachine", "UPDATE", &new, Some(&old)),
    );
    let status = &body["response"]["status"];
    assert_eq!(status["code"], 422, "{body}");
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["spec.backend", "spec.backend.docker.customImage"]);
    assert_eq!(status["details"]["kind"], "DevMachine");
}
