//! The webhook server over real HTTPS with a generated CA: conversion and admission round trips
//! for every kind, certificate rotation without restart, TLS versions, and malformed requests
//! that get errors while the server keeps serving.

// Test helpers: a failed expectation anywhere in this test crate is a test failure with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

mod webhook_support;

use std::time::{Duration, Instant};

use base64::Engine;
use capd::serving::TlsMinVersion;
use capd::webhooks::{
    CONVERT_PATH, Endpoint, Kind, Settings, WebhookConfig, WebhookError, WebhookServer,
};
use serde_json::{Value, json};
use webhook_support::*;

const V1BETA1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const V1BETA2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";
const TLS_ANY: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": V1BETA2,
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

/// One v1beta2 object per kind, each with a field whose shape differs in v1beta1.
fn objects() -> Vec<Value> {
    vec![
        object(
            "DockerCluster",
            "c1",
            json!({"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443},
                   "failureDomains": [{"name": "fd1", "controlPlane": true}]}),
        ),
        object(
            "DockerClusterTemplate",
            "ct1",
            json!({"template": {"spec": {"failureDomains": [{"name": "fd1", "controlPlane": false}]}}}),
        ),
        object(
            "DockerMachine",
            "m1",
            json!({"customImage": "kindest/node:v1.31.0", "bootstrapTimeout": "5m"}),
        ),
        object(
            "DockerMachineTemplate",
            "mt1",
            json!({"template": {"spec": {"extraMounts": [{"containerPath": "/a", "hostPath": "/b"}]}}}),
        ),
        object(
            "DockerMachinePool",
            "p1",
            json!({"template": {"customImage": "kindest/node:v1.31.0"}, "providerIDList": ["docker:////c1-p1-a"]}),
        ),
        object(
            "DockerMachinePoolTemplate",
            "pt1",
            json!({"template": {"spec": {"template": {"preLoadImages": ["nginx"]}}}}),
        ),
        object(
            "DevCluster",
            "dc1",
            json!({"controlPlaneEndpoint": {"host": "10.0.0.2", "port": 6443},
                   "backend": {"docker": {"failureDomains": [{"name": "fd1", "controlPlane": true}]}}}),
        ),
        object(
            "DevClusterTemplate",
            "dct1",
            json!({"template": {"spec": {"controlPlaneEndpoint": {"port": 6443},
                                         "backend": {"docker": {"failureDomains": [{"name": "fd1", "controlPlane": false}]}}}}}),
        ),
        object(
            "DevMachine",
            "dm1",
            json!({"backend": {"docker": {"customImage": "kindest/node:v1.31.0", "bootstrapTimeout": "5m"}}}),
        ),
        object(
            "DevMachineTemplate",
            "dmt1",
            json!({"template": {"spec": {"backend": {"inMemory": {}}}}}),
        ),
    ]
}

/// One object of each kind CAPD introduced in v1beta2 (no v1beta1 to convert to).
fn v1beta2_only_objects() -> Vec<Value> {
    vec![
        object(
            "DevMachinePool",
            "dp1",
            json!({"backend": {"docker": {"customImage": "kindest/node:v1.31.0"}}}),
        ),
        object(
            "DevMachinePoolTemplate",
            "dpt1",
            json!({"template": {"spec": {"backend": {"docker": {"preLoadImages": ["nginx"]}}}}}),
        ),
    ]
}

fn conversion_review(desired: &str, objects: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "conversion-1", "desiredAPIVersion": desired, "objects": objects},
    }))
    .unwrap()
}

fn admission_review(kind: Kind, operation: &str, new: &Value, old: Option<&Value>) -> Vec<u8> {
    let mut request = json!({
        "uid": format!("admission-{}", kind.name()),
        "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta2", "kind": kind.name()},
        "resource": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta2", "resource": kind.plural()},
        "name": new["metadata"]["name"],
        "namespace": "default",
        "operation": operation,
        "object": new,
    });
    if let Some(old) = old {
        request["oldObject"] = old.clone();
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .unwrap()
}

async fn post(server: &Running, ca: &Ca, path: &str, body: Vec<u8>) -> Answer {
    request(
        server.addr,
        client_config(&[ca.der()], TLS_ANY),
        "POST",
        path,
        Some("application/json"),
        body,
    )
    .await
    .expect("the request completes")
}

#[tokio::test]
async fn conversion_round_trips_every_kind_over_https() {
    let ca = Ca::new("webhook-ca");
    let server = Running::start(&ca.issue(), Settings::default(), TlsMinVersion::Tls12).await;
    let hub = objects();

    let down = post(&server, &ca, CONVERT_PATH, conversion_review(V1BETA1, &hub)).await;
    assert_eq!(down.status, 200, "{}", String::from_utf8_lossy(&down.body));
    assert!(
        down.headers
            .to_ascii_lowercase()
            .contains("content-type: application/json")
    );
    let down = down.json();
    assert_eq!(down["response"]["uid"], "conversion-1");
    assert_eq!(down["response"]["result"]["status"], "Success");
    let spokes = down["response"]["convertedObjects"]
        .as_array()
        .unwrap()
        .clone();
    let versions: Vec<&str> = spokes
        .iter()
        .map(|o| o["apiVersion"].as_str().unwrap())
        .collect();
    assert_eq!(versions, [V1BETA1; 10]);
    assert_eq!(
        spokes[0]["spec"]["failureDomains"],
        json!({"fd1": {"controlPlane": true}})
    );

    let up = post(
        &server,
        &ca,
        CONVERT_PATH,
        conversion_review(V1BETA2, &spokes),
    )
    .await
    .json();
    assert_eq!(up["response"]["result"]["status"], "Success");
    assert_eq!(
        up["response"]["convertedObjects"],
        json!(hub),
        "lossless round trip"
    );
}

#[tokio::test]
async fn admission_round_trips_every_endpoint_over_https() {
    let ca = Ca::new("webhook-ca");
    let settings = Settings {
        cluster_topology: true,
    };
    let server = Running::start(&ca.issue(), settings, TlsMinVersion::Tls12).await;
    for endpoint in Endpoint::ALL {
        let kind = endpoint.kind();
        let sent = objects()
            .into_iter()
            .chain(v1beta2_only_objects())
            .find(|o| o["kind"] == kind.name())
            .unwrap();
        let answer = post(
            &server,
            &ca,
            &endpoint.path(),
            admission_review(kind, "CREATE", &sent, None),
        )
        .await;
        assert_eq!(answer.status, 200, "{endpoint:?}");
        let review = answer.json();
        let response = &review["response"];
        assert_eq!(response["uid"], format!("admission-{}", kind.name()));
        assert_eq!(response["allowed"], true, "{endpoint:?}: {review}");
        if let Endpoint::Mutate(_) = endpoint {
            // The samples already carry port/controlPlane/backend where it matters, except the
            // template (no endpoint given): its patch sets the port.
            if kind.name().starts_with("Dev") {
                assert!(response.get("patch").is_none(), "{endpoint:?}: {review}");
            }
            if kind == Kind::DockerClusterTemplate {
                let patch = base64::engine::general_purpose::STANDARD
                    .decode(response["patch"].as_str().unwrap())
                    .unwrap();
                let patch: Value = serde_json::from_slice(&patch).unwrap();
                assert_eq!(
                    patch,
                    json!([{"op": "add", "path": "/spec/template/spec/controlPlaneEndpoint", "value": {"port": 6443}}])
                );
            }
        }
    }

    // And one denial through the wire: customImage changed on a DockerMachine.
    let old = objects()[2].clone();
    let mut new = old.clone();
    new["spec"]["customImage"] = json!("kindest/node:v1.32.0");
    let denied = post(
        &server,
        &ca,
        &Endpoint::Validate(Kind::DockerMachine).path(),
        admission_review(Kind::DockerMachine, "UPDATE", &new, Some(&old)),
    )
    .await
    .json();
    assert_eq!(denied["response"]["allowed"], false);
    assert_eq!(denied["response"]["status"]["code"], 422);
    assert_eq!(
        denied["response"]["status"]["details"]["causes"][0]["field"],
        "spec.customImage"
    );
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_restart() {
    let ca = Ca::new("webhook-ca");
    let first = ca.issue();
    let server = Running::start(&first, Settings::default(), TlsMinVersion::Tls12).await;
    let served = |answer: &Answer| answer.server_cert.clone();
    let review = conversion_review(V1BETA1, &objects());

    let answer = post(&server, &ca, CONVERT_PATH, review.clone()).await;
    assert_eq!(served(&answer), first.der);

    // A half-done rotation (new certificate, old key) is not served: the old pair stays.
    let second = ca.issue();
    write_atomically(
        &server.dir.path().join("tls.crt"),
        second.cert_pem.as_bytes(),
    );
    tokio::time::sleep(RELOAD_INTERVAL * 5).await;
    let answer = post(&server, &ca, CONVERT_PATH, review.clone()).await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        served(&answer),
        first.der,
        "a mismatched pair must not be served"
    );

    // Once the key follows, the new certificate is served by the running server.
    write_atomically(
        &server.dir.path().join("tls.key"),
        second.key_pem.as_bytes(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = post(&server, &ca, CONVERT_PATH, review.clone()).await;
        assert_eq!(answer.status, 200);
        if served(&answer) == second.der {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the rotated certificate was not picked up"
        );
        tokio::time::sleep(RELOAD_INTERVAL).await;
    }

    // A rotation to a new CA: clients that trust only the new CA get through.
    let new_ca = Ca::new("webhook-ca-2");
    let third = new_ca.issue();
    write_pair(server.dir.path(), &third);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = request(
            server.addr,
            client_config(&[new_ca.der()], TLS_ANY),
            "POST",
            CONVERT_PATH,
            Some("application/json"),
            review.clone(),
        )
        .await;
        if let Ok(answer) = answer {
            assert_eq!(served(&answer), third.der);
            assert_eq!(answer.status, 200);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the certificate of the new CA was not picked up"
        );
        tokio::time::sleep(RELOAD_INTERVAL).await;
    }
    assert!(server.is_serving());
}

#[tokio::test]
async fn tls_version_floor_is_enforced() {
    let ca = Ca::new("webhook-ca");
    let review = conversion_review(V1BETA1, &objects());
    let tls12_only: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];

    let default_floor =
        Running::start(&ca.issue(), Settings::default(), TlsMinVersion::Tls12).await;
    let answer = request(
        default_floor.addr,
        client_config(&[ca.der()], tls12_only),
        "POST",
        CONVERT_PATH,
        Some("application/json"),
        review.clone(),
    )
    .await
    .expect("TLS 1.2 is accepted by default");
    assert_eq!(answer.status, 200);

    let tls13_floor = Running::start(&ca.issue(), Settings::default(), TlsMinVersion::Tls13).await;
    let refused = request(
        tls13_floor.addr,
        client_config(&[ca.der()], tls12_only),
        "POST",
        CONVERT_PATH,
        Some("application/json"),
        review,
    )
    .await;
    assert!(
        refused.is_err(),
        "a TLS 1.2 client must be refused with --tls-min-version=VersionTLS13"
    );
}

#[tokio::test]
async fn malformed_requests_get_errors_and_the_server_keeps_serving() {
    let ca = Ca::new("webhook-ca");
    let server = Running::start(&ca.issue(), Settings::default(), TlsMinVersion::Tls12).await;
    let config = client_config(&[ca.der()], TLS_ANY);
    let validate = Endpoint::Validate(Kind::DockerMachine).path();
    let huge = {
        let mut body =
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","pad":""#.to_vec();
        body.extend(std::iter::repeat_n(b'x', 8 * 1024 * 1024));
        body.extend(br#""}"#);
        body
    };
    let wrong_kind = {
        let sent = object("DockerMachinePool", "p", json!({}));
        let mut review: Value = serde_json::from_slice(&admission_review(
            Kind::DockerMachine,
            "CREATE",
            &sent,
            None,
        ))
        .unwrap();
        review["request"]["kind"]["kind"] = json!("DockerMachinePool");
        serde_json::to_vec(&review).unwrap()
    };
    // (case, method, path, content type, body) → (HTTP status, message fragment)
    type Request<'a> = (&'a str, &'a str, &'a str, Option<&'a str>, Vec<u8>);
    let json = Some("application/json");
    let cases: Vec<(Request, (u16, &str))> = vec![
        (
            ("bad JSON", "POST", &validate, json, b"{oops".to_vec()),
            (400, "failed to decode the AdmissionReview"),
        ),
        (
            (
                "wrong content type",
                "POST",
                &validate,
                Some("text/plain"),
                b"{}".to_vec(),
            ),
            (
                400,
                "unsupported Content-Type \"text/plain\": expected application/json",
            ),
        ),
        (
            (
                "no content type",
                "POST",
                CONVERT_PATH,
                None,
                b"{}".to_vec(),
            ),
            (400, "the request has no Content-Type"),
        ),
        (
            ("unknown kind", "POST", &validate, json, wrong_kind),
            (200, "this endpoint handles DockerMachine"),
        ),
        (
            ("body over 7 MiB", "POST", &validate, json, huge),
            (
                413,
                "the request body is larger than the limit of 7340032 bytes",
            ),
        ),
        (
            (
                "unknown path",
                "POST",
                "/validate-something-else",
                json,
                b"{}".to_vec(),
            ),
            (404, ""),
        ),
        (
            ("wrong method", "GET", CONVERT_PATH, None, Vec::new()),
            (405, ""),
        ),
    ];
    for ((case, method, path, content_type, body), (status, fragment)) in cases {
        let answer = request(
            server.addr,
            config.clone(),
            method,
            path,
            content_type,
            body,
        )
        .await
        .unwrap_or_else(|e| panic!("case {case:?}: {e}"));
        assert_eq!(
            answer.status,
            status,
            "case {case:?}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        if !fragment.is_empty() {
            let reply = answer.json();
            let message = if path == CONVERT_PATH {
                reply["response"]["result"]["message"].clone()
            } else {
                assert_eq!(reply["response"]["allowed"], false, "case {case:?}");
                reply["response"]["status"]["message"].clone()
            };
            let message = message.as_str().unwrap_or_default();
            assert!(message.contains(fragment), "case {case:?}: {message}");
        }
    }
    let after = post(
        &server,
        &ca,
        CONVERT_PATH,
        conversion_review(V1BETA1, &objects()),
    )
    .await;
    assert_eq!(
        after.status, 200,
        "the server still serves after malformed requests"
    );
    assert!(server.is_serving());
}

#[tokio::test]
async fn missing_certificates_stop_the_start_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let error = WebhookServer::bind(WebhookConfig {
        host: Some("127.0.0.1".into()),
        port: 0,
        cert_dir: dir.path().to_path_buf(),
        cert_name: "tls.crt".into(),
        key_name: "tls.key".into(),
        tls_min_version: TlsMinVersion::Tls12,
        reload_interval: RELOAD_INTERVAL,
        settings: Settings::default(),
    })
    .await
    .expect_err("no certificate, no server");
    assert!(matches!(error, WebhookError::Certificate(_)), "{error:?}");
    let chain = capd::runtime::error_chain(&error);
    assert!(
        chain.starts_with("failed to load the webhook serving certificate: failed to read ")
            && chain.contains(&dir.path().join("tls.crt").display().to_string()),
        "{chain}"
    );

    let ca = Ca::new("webhook-ca");
    let (one, other) = (ca.issue(), ca.issue());
    write_atomically(&dir.path().join("tls.crt"), one.cert_pem.as_bytes());
    write_atomically(&dir.path().join("tls.key"), other.key_pem.as_bytes());
    let error = WebhookServer::bind(WebhookConfig {
        host: Some("127.0.0.1".into()),
        port: 0,
        cert_dir: dir.path().to_path_buf(),
        cert_name: "tls.crt".into(),
        key_name: "tls.key".into(),
        tls_min_version: TlsMinVersion::Tls12,
        reload_interval: RELOAD_INTERVAL,
        settings: Settings::default(),
    })
    .await
    .expect_err("a key of another certificate is refused");
    let chain = capd::runtime::error_chain(&error);
    assert!(chain.contains("failed to pair the key in"), "{chain}");
}
