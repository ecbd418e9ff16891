//! Shared helpers: start a server, build clients, define a test CRD.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};
use testapiserver::{Handle, Options, TestApiServer};

/// Starts a server with default options and a client for it.
pub async fn start() -> (Handle, Client) {
    start_with(Options::default()).await
}

/// Starts a server with the given options and a client for it.
pub async fn start_with(options: Options) -> (Handle, Client) {
    let handle = TestApiServer::start(options).await.expect("server starts");
    let client = client(&handle).await;
    (handle, client)
}

/// The client configuration of the server's kubeconfig, as any program would read it.
pub async fn config(handle: &Handle) -> Config {
    let kubeconfig = Kubeconfig::from_yaml(handle.kubeconfig_yaml()).expect("kubeconfig parses");
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config from kubeconfig")
}

/// A client built from the server's kubeconfig, as any program would.
pub async fn client(handle: &Handle) -> Client {
    Client::try_from(config(handle).await).expect("client")
}

/// A ConfigMap with only a name.
pub fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The error status of a failed call.
pub fn status(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The schema of the test CRD's v1.
pub fn widget_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "replicas": {"type": "integer", "default": 1},
                    "color": {"type": "string", "enum": ["red", "blue"]},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                    "address": {"x-kubernetes-int-or-string": true},
                    "when": {"type": "string", "format": "date-time"},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set", "maxItems": 3},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"},
                            "port": {"type": "integer", "default": 80}
                        }}
                    },
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 2}
                }
            },
            "status": {
                "type": "object",
                "properties": {
                    "phase": {"type": "string"},
                    "ready": {"type": "boolean"},
                    "conditions": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"],
                        "items": {"type": "object", "required": ["type", "status"], "properties": {
                            "type": {"type": "string"},
                            "status": {"type": "string"},
                            "reason": {"type": "string"}
                        }}
                    }
                }
            }
        }
    })
}

/// The test CRD `widgets.example.com`: v1 (storage) and v2, both served, with a status subresource.
pub fn widget_crd(conversion: Value) -> Value {
    let v2_schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "conversion": conversion,
            "versions": [
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": widget_schema()}},
                {"name": "v2", "served": true, "storage": false, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": v2_schema}}
            ]
        }
    })
}

/// Creates a CRD and waits until it reports Established.
pub async fn install_crd(client: &Client, crd: Value) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("crd parses");
    let name = crd.metadata.name.clone().unwrap_or_default();
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("crd created");
    for _ in 0..100 {
        let current = crds.get(&name).await.expect("crd readable");
        let established = current
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return current;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("crd {name} never became Established");
}

/// The test CRD with conversion None, installed.
pub async fn install_widgets(client: &Client) -> CustomResourceDefinition {
    install_crd(client, widget_crd(json!({"strategy": "None"}))).await
}

/// The ApiResource of widgets in a version.
pub fn widget_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", version, "Widget"),
        "widgets",
    )
}

/// Widgets in `default`, served as v1.
pub fn widgets(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "default", &widget_resource("v1"))
}

/// A v1 Widget object.
pub fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("widget parses")
}

/// Waits until `check` holds, polling every 20ms for up to 5s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..250 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Serves `app` over HTTPS on a free port with a certificate for 127.0.0.1 and `names`, as a
/// webhook; returns the port and the CA bundle (base64, as `caBundle` holds it).
pub async fn start_webhook_with(
    names: &[String],
    app: axum::Router,
) -> (u16, String, tokio::task::JoinHandle<std::io::Result<()>>) {
    use testapiserver::tls::{ServingCerts, TlsListener};
    let certs = ServingCerts::generate(names).unwrap();
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let listener = TlsListener::new(tcp, certs.server_config().unwrap()).unwrap();
    let task = tokio::spawn(async move { axum::serve(listener, app).await });
    use base64::Engine;
    (
        port,
        base64::engine::general_purpose::STANDARD.encode(&certs.ca_pem),
        task,
    )
}
