//! Packaging of the webhooks in the components file rendered by `hack/build-components.sh`: the
//! Service, the webhook configurations, the cert-manager Issuer and Certificate, the CA injection
//! on CRDs and webhook configurations, and the manager's port and certificate volume, all
//! consistent with each other and with what the code serves.
//!
//! Needs `kubectl` (its built-in kustomize renders `config/default`).

// Test helpers: a failed expectation anywhere in this test crate is a test failure with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

#[allow(dead_code)]
mod packaging;

use std::collections::BTreeSet;

use capd::manager::Args;
use capd::webhooks::{CONVERT_PATH, Endpoint};
use clap::Parser;
use serde_json::{Value, json};

use packaging::*;

const SERVICE: &str = "capd-webhook-service";
const CERTIFICATE: &str = "capd-serving-cert";
const SECRET: &str = "capd-webhook-service-cert";
const INJECT_CA: &str = "/metadata/annotations/cert-manager.io~1inject-ca-from";

fn manager_container() -> &'static Value {
    let deployment = object("Deployment", "capd-controller-manager");
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == "manager")
        .expect("the manager container")
}

#[test]
fn the_webhook_service_routes_to_the_managers_webhook_port() {
    let service = object("Service", SERVICE);
    assert_eq!(str_at(service, "/metadata/namespace"), NAMESPACE);
    let ports = service["spec"]["ports"].as_array().expect("ports");
    assert_eq!(ports.len(), 1, "{ports:?}");
    assert_eq!(ports[0]["port"], 443);
    let target = str_at(&ports[0], "/targetPort");

    let container_port = manager_container()["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["name"] == target)
        .unwrap_or_else(|| panic!("the manager has no port named {target}"));
    let default_port = Args::try_parse_from(["manager"]).unwrap().webhook_port;
    assert_eq!(
        container_port["containerPort"],
        i64::from(default_port),
        "the container port must be the --webhook-port default"
    );

    let deployment = object("Deployment", "capd-controller-manager");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let selector = service["spec"]["selector"].as_object().expect("selector");
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(
            &pod_labels[key], value,
            "the Service selector {key} does not match the manager pod"
        );
    }
}

#[test]
fn the_manager_mounts_the_certificate_secret_where_it_reads_it() {
    let pod = &object("Deployment", "capd-controller-manager")["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["secret"]["secretName"] == SECRET)
        .unwrap_or_else(|| panic!("no volume of Secret {SECRET}"));
    assert!(
        volume["secret"].get("optional").is_none_or(|o| o == false),
        "the certificate Secret must be required"
    );
    let mount = manager_container()["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["name"] == volume["name"])
        .expect("the certificate volume is mounted");
    let args = Args::try_parse_from(["manager"]).unwrap();
    assert_eq!(
        std::path::Path::new(str_at(mount, "/mountPath")),
        args.webhook_cert_dir.as_path(),
        "mounted at the --webhook-cert-dir default"
    );
    assert_eq!(mount["readOnly"], true);
    assert_eq!(
        (
            args.webhook_cert_name.as_str(),
            args.webhook_key_name.as_str()
        ),
        ("tls.crt", "tls.key"),
        "cert-manager writes tls.crt and tls.key"
    );
}

#[test]
fn cert_manager_issues_the_serving_certificate_for_the_service() {
    let issuer = object("Issuer", "capd-selfsigned-issuer");
    assert_eq!(str_at(issuer, "/metadata/namespace"), NAMESPACE);
    assert_eq!(issuer["spec"], json!({"selfSigned": {}}));

    let certificate = object("Certificate", CERTIFICATE);
    assert_eq!(str_at(certificate, "/metadata/namespace"), NAMESPACE);
    assert_eq!(
        certificate["spec"]["dnsNames"],
        json!([
            format!("{SERVICE}.{NAMESPACE}.svc"),
            format!("{SERVICE}.{NAMESPACE}.svc.cluster.local"),
        ])
    );
    assert_eq!(
        certificate["spec"]["issuerRef"],
        json!({"kind": "Issuer", "name": "capd-selfsigned-issuer"})
    );
    assert_eq!(certificate["spec"]["secretName"], SECRET);
}

#[test]
fn crds_convert_through_the_service_with_an_injected_ca() {
    let expected_ca = format!("{NAMESPACE}/{CERTIFICATE}");
    for (kind, plural) in KINDS {
        let crd = object(
            "CustomResourceDefinition",
            &format!("{plural}.infrastructure.cluster.x-k8s.io"),
        );
        assert_eq!(
            str_at(crd, INJECT_CA),
            expected_ca,
            "{kind} CRD CA injection"
        );
        let webhook = &crd["spec"]["conversion"]["webhook"];
        assert_eq!(
            webhook["clientConfig"]["service"],
            json!({"name": SERVICE, "namespace": NAMESPACE, "path": CONVERT_PATH}),
            "{kind} conversion"
        );
        assert_eq!(webhook["conversionReviewVersions"], json!(["v1"]));
    }
}

#[test]
fn webhook_configurations_register_every_endpoint_the_server_serves() {
    let expected_ca = format!("{NAMESPACE}/{CERTIFICATE}");
    let mut registered = BTreeSet::new();
    for (kind, name, verb) in [
        (
            "MutatingWebhookConfiguration",
            "capd-mutating-webhook-configuration",
            "mutate",
        ),
        (
            "ValidatingWebhookConfiguration",
            "capd-validating-webhook-configuration",
            "validate",
        ),
    ] {
        let configuration = object(kind, name);
        assert_eq!(
            str_at(configuration, INJECT_CA),
            expected_ca,
            "{kind} CA injection"
        );
        for webhook in configuration["webhooks"].as_array().expect("webhooks") {
            let name = str_at(webhook, "/name");
            assert_eq!(webhook["failurePolicy"], "Fail", "{name}");
            assert_eq!(webhook["matchPolicy"], "Equivalent", "{name}");
            assert_eq!(webhook["sideEffects"], "None", "{name}");
            assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]), "{name}");
            let service = &webhook["clientConfig"]["service"];
            assert_eq!(service["name"], SERVICE, "{name}");
            assert_eq!(service["namespace"], NAMESPACE, "{name}");
            assert!(service.get("port").is_none_or(|p| p == 443), "{name}");
            let path = str_at(service, "/path");
            assert!(path.starts_with(&format!("/{verb}-")), "{name}: {path}");

            let rules = webhook["rules"].as_array().expect("rules");
            assert_eq!(rules.len(), 1, "{name}");
            let rule = &rules[0];
            assert_eq!(
                rule["apiGroups"],
                json!(["infrastructure.cluster.x-k8s.io"])
            );
            assert_eq!(rule["apiVersions"], json!(["v1beta2"]));
            assert_eq!(rule["operations"], json!(["CREATE", "UPDATE"]));
            let plural = strings(rule.get("resources"));
            let (kind_name, _) = KINDS
                .iter()
                .find(|(_, p)| plural == [*p])
                .unwrap_or_else(|| panic!("{name} matches {plural:?}, not one of our kinds"));
            assert_eq!(
                path,
                format!(
                    "/{verb}-infrastructure-cluster-x-k8s-io-v1beta2-{}",
                    kind_name.to_lowercase()
                ),
                "{name} sends {plural:?} to another kind's endpoint"
            );
            assert!(
                registered.insert(path.to_string()),
                "{path} registered twice"
            );
        }
    }
    let served: BTreeSet<String> = Endpoint::ALL.iter().map(|e| e.path()).collect();
    assert_eq!(
        registered, served,
        "the registered webhooks must be exactly the endpoints the server serves"
    );
}
