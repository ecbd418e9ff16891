//! The test API server with our CRDs (as generated into `config/crd/bases/`), converting through
//! our webhook server reached like a cluster Service (`webhook-service.system.svc`) with a CA
//! bundle, and one object of every kind to store in it.

use std::time::Duration;

use base64::Engine;
use capd::serving::TlsMinVersion;
use capd::webhooks::{Settings, WebhookConfig, WebhookServer};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};
use testapiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

use super::{Ca, write_pair};

pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";
pub const NS: &str = "default";

/// The test API server with our CRDs, converting through our webhook server.
pub struct Cluster {
    pub client: Client,
    /// The CA bundle a CRD needs to call our webhook server.
    pub ca_bundle: String,
    /// Our webhook server.
    pub webhook: std::net::SocketAddr,
    pub ca: Ca,
    pub api: testapiserver::Handle,
    _certs: tempfile::TempDir,
    stop: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub async fn cluster() -> Cluster {
    cluster_with(Some(false)).await
}

/// The test API server and our webhook server, without any CRD (tests install their own, pointed
/// at the webhook with [`Cluster::converting_through_our_webhook`]).
pub async fn bare_cluster() -> Cluster {
    cluster_with(None).await
}

/// The test API server with our CRDs in CAPD 1.10 to 1.12's shape: the retired versions v1alpha3
/// and v1alpha4 listed too (unserved, with an open schema), as CAPD's CRDs list them while our
/// manager serves their conversion webhook (a drop-in behind CAPD 1.12's components).
pub async fn cluster_with_retired_versions() -> Cluster {
    cluster_with(Some(true)).await
}

impl Cluster {
    /// `crd` (JSON) with its conversion webhook at our server's Service, as kustomize and
    /// cert-manager's CA injector leave it (any CRD with a `Webhook` strategy, CAPD's too).
    pub fn converting_through_our_webhook(&self, mut crd: Value) -> Value {
        if crd["spec"]["conversion"]["strategy"] == "Webhook" {
            crd["spec"]["conversion"]["webhook"]["clientConfig"] = json!({
                "service": {"name": "webhook-service", "namespace": "system", "path": "/convert"},
                "caBundle": self.ca_bundle,
            });
        }
        crd
    }
}

/// `retired`: `None` installs no CRD, else ours, with the retired versions when `true`.
async fn cluster_with(retired: Option<bool>) -> Cluster {
    let ca = Ca::new("capd-webhook-e2e");
    let certs = tempfile::tempdir().unwrap();
    // cert-manager's Certificate covers <service>.<namespace>.svc; the CRDs in bases/ name the
    // Service before kustomize prefixes it.
    // `localhost` too: the tests call the admission endpoints themselves.
    write_pair(
        certs.path(),
        &ca.issue_for(&["webhook-service.system.svc", "localhost"]),
    );
    let server = WebhookServer::bind(WebhookConfig {
        host: Some("127.0.0.1".into()),
        port: 0,
        cert_dir: certs.path().to_path_buf(),
        cert_name: "tls.crt".into(),
        key_name: "tls.key".into(),
        tls_min_version: TlsMinVersion::Tls12,
        reload_interval: Duration::from_secs(5),
        settings: Settings::default(),
    })
    .await
    .unwrap();
    let webhook = server.local_addr().unwrap();
    let port = webhook.port();
    let stop = CancellationToken::new();
    tokio::spawn(server.serve(stop.clone()));

    let mut options = Options::default();
    options
        .service_endpoints
        .insert("system/webhook-service".into(), format!("127.0.0.1:{port}"));
    let api = TestApiServer::start(options).await.unwrap();
    let kubeconfig = Kubeconfig::from_yaml(api.kubeconfig_yaml()).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = Client::try_from(config).unwrap();

    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca.pem());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // Every CRD we generate, as committed.
    let ours_to_install = match retired {
        Some(_) => capd::api::crd::all().unwrap(),
        None => Vec::new(),
    };
    let retired = retired == Some(true);
    for ours in ours_to_install {
        let plural = &ours.spec.names.plural;
        let path = format!(
            "{}/config/crd/bases/{}",
            env!("CARGO_MANIFEST_DIR"),
            capd::api::crd::file_name(&ours)
        );
        let mut crd: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let client_config = &mut crd["spec"]["conversion"]["webhook"]["clientConfig"];
        assert_eq!(
            client_config["service"]["path"], "/convert",
            "{plural}: conversion through our webhook"
        );
        // What cert-manager's CA injector does for `cert-manager.io/inject-ca-from`.
        client_config["caBundle"] = json!(ca_bundle);
        if retired {
            let kind = ours.spec.names.kind.as_str();
            for name in capd::api::crd::retired_versions(kind) {
                crd["spec"]["versions"].as_array_mut().unwrap().push(json!({
                    "name": name, "served": false, "storage": false, "deprecated": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                }));
            }
        }
        let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    Cluster {
        client,
        ca_bundle,
        webhook,
        ca,
        api,
        _certs: certs,
        stop,
    }
}

pub fn dynamic(client: &Client, version: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    };
    Api::namespaced_with(client.clone(), NS, &resource)
}

/// One v1beta2 spec of every kind, with the fields whose shape differs between versions set.
pub fn one_of_every_kind() -> [(&'static str, Value); 12] {
    [
        (
            "DockerCluster",
            json!({"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443},
               "failureDomains": [{"name": "a", "controlPlane": true, "attributes": {"zone": "1"}}]}),
        ),
        (
            "DockerClusterTemplate",
            json!({"template": {"metadata": {"labels": {"tier": "gold"}},
                            "spec": {"loadBalancer": {"imageRepository": "kindest"}}}}),
        ),
        (
            "DockerMachine",
            json!({"customImage": "kindest/node:v1.31.0", "preLoadImages": ["nginx"],
               "extraMounts": [{"containerPath": "/a", "hostPath": "/b", "readOnly": true}],
               "bootstrapTimeout": "7m"}),
        ),
        (
            "DockerMachineTemplate",
            json!({"template": {"spec": {"customImage": "kindest/node:v1.31.0"}}}),
        ),
        (
            "DockerMachinePool",
            json!({"template": {"customImage": "kindest/node:v1.31.0", "preLoadImages": ["nginx"]},
               "providerIDList": ["docker:////c1-p1-a"]}),
        ),
        (
            "DockerMachinePoolTemplate",
            json!({"template": {"spec": {"template": {"extraMounts": [{"containerPath": "/a", "hostPath": "/b"}]}}}}),
        ),
        (
            "DevCluster",
            json!({"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443},
               "backend": {"docker": {"failureDomains": [{"name": "b"}, {"name": "a", "controlPlane": true}]}}}),
        ),
        (
            "DevClusterTemplate",
            json!({"template": {"metadata": {"labels": {"tier": "gold"}},
                            "spec": {"backend": {"docker": {"loadBalancer": {"imageTag": "v2"}}}}}}),
        ),
        (
            "DevMachine",
            json!({"backend": {"docker": {"customImage": "kindest/node:v1.31.0", "bootstrapTimeout": "7m"}}}),
        ),
        (
            "DevMachineTemplate",
            json!({"template": {"spec": {"backend": {"inMemory": {"vm": {"provisioning": {"startupDuration": "10s"}}}}}}}),
        ),
        (
            "DevMachinePool",
            json!({"backend": {"docker": {"customImage": "kindest/node:v1.31.0", "preLoadImages": ["nginx"]}},
               "providerIDList": ["docker:////c1-p1-a"]}),
        ),
        (
            "DevMachinePoolTemplate",
            json!({"template": {"spec": {"backend": {"docker": {"extraMounts": [{"containerPath": "/a", "hostPath": "/b"}]}}}}}),
        ),
    ]
}
