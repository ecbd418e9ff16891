//! Shared set-up of the Gardener extension tests: a test Kubernetes API server with the test-only
//! `Infrastructure` and `Cluster` CRDs, the controller running in-process on a given container
//! runtime, what gardenlet does to the objects, and builders and waits that read as sentences.

// Each test crate uses a different subset of these helpers.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use capd::docker::{ContainerRuntime, DockerEngine};
use capd::gardener::cluster::{Cluster, ClusterSpec};
use capd::gardener::trigger::Mode;
use capd::gardener::{Infrastructure, InfrastructureContext, InfrastructureStatus};
use capd::runtime::{Metrics, Readiness};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Config};
use serde_json::{Value, json};
use testapiserver::{Handle, Options, TestApiServer};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The test-only CRD, as shipped under `e2e/gardener/`.
pub const CRD_YAML: &str = include_str!("../../e2e/gardener/infrastructures.crd.yaml");

/// The test-only `Cluster` CRD.
pub const CLUSTER_CRD_YAML: &str = include_str!("../../e2e/gardener/clusters.crd.yaml");

/// How the in-process controller runs.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Gardener's predicate, or the ignore-operation-annotation mode.
    pub mode: Mode,
    /// The drift check period of the ignore-operation-annotation mode.
    pub sync_period: Duration,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            mode: Mode::RespectOperationAnnotation,
            sync_period: Duration::from_secs(600),
        }
    }
}

/// How long a wait may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A test API server, a client, and the controller running until dropped.
pub struct Env {
    pub server: Handle,
    pub client: Client,
    pub namespace: String,
    stop: CancellationToken,
    controller: Option<JoinHandle<()>>,
}

impl Env {
    /// Starts the server, installs the CRDs and runs the controller on `runtime`.
    pub async fn start(runtime: Arc<dyn ContainerRuntime>, namespace: &str) -> Self {
        Self::start_with(runtime, namespace, Setup::default()).await
    }

    /// [`Env::start`] with the controller set up as `setup` says.
    pub async fn start_with(
        runtime: Arc<dyn ContainerRuntime>,
        namespace: &str,
        setup: Setup,
    ) -> Self {
        let mut env = Self::without_controller(namespace).await;
        let recorder = Recorder::new(
            env.client.clone(),
            Reporter {
                controller: "capd-rs-test".into(),
                instance: None,
            },
        );
        let ctx = Arc::new(
            InfrastructureContext::new(
                env.client.clone(),
                runtime,
                recorder,
                Metrics::new(),
                setup.sync_period,
            )
            .with_mode(setup.mode),
        );
        env.controller = Some(tokio::spawn(capd::gardener::run(
            ctx,
            Api::all(env.client.clone()),
            watcher::Config::default(),
            Readiness::new(),
            env.stop.clone(),
        )));
        env
    }

    /// Starts the server with the CRD and the namespace, but no controller (another process
    /// runs it).
    pub async fn without_controller(namespace: &str) -> Self {
        // Logs with RUST_LOG=capd=debug, shown for failed tests.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let server = TestApiServer::start(Options::default())
            .await
            .expect("the test API server starts");
        let kubeconfig = Kubeconfig::from_yaml(server.kubeconfig_yaml()).expect("kubeconfig");
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("client config");
        let client = Client::try_from(config).expect("client");
        for crd in [CRD_YAML, CLUSTER_CRD_YAML] {
            install_crd(
                &client,
                serde_saphyr::from_str(crd).expect("the test CRD parses"),
            )
            .await;
        }
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": namespace}})).expect("namespace");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("the namespace is created");
        Self {
            server,
            client,
            namespace: namespace.to_string(),
            stop: CancellationToken::new(),
            controller: None,
        }
    }

    /// `Infrastructure` objects in the test namespace.
    pub fn api(&self) -> Api<Infrastructure> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Creates an `Infrastructure` of `type_` with `provider_config`.
    pub async fn create(&self, name: &str, type_: &str, provider_config: Option<Value>) {
        self.create_annotated(name, type_, provider_config, None)
            .await;
    }

    /// Creates an `Infrastructure` carrying `gardener.cloud/operation: <operation>`, as
    /// gardenlet creates them (`reconcile`, or `wait-for-state` during a migration).
    pub async fn create_annotated(
        &self,
        name: &str,
        type_: &str,
        provider_config: Option<Value>,
        operation: Option<&str>,
    ) {
        let mut spec = json!({
            "type": type_,
            "region": "local",
            "secretRef": {"name": "cloudprovider", "namespace": self.namespace},
        });
        if let Some(config) = provider_config {
            spec["providerConfig"] = config;
        }
        let mut metadata = json!({"name": name, "namespace": self.namespace});
        if let Some(operation) = operation {
            metadata["annotations"] = json!({"gardener.cloud/operation": operation});
        }
        let object: Infrastructure = serde_json::from_value(json!({
            "apiVersion": "extensions.gardener.cloud/v1alpha1",
            "kind": "Infrastructure",
            "metadata": metadata,
            "spec": spec,
        }))
        .expect("a valid Infrastructure");
        self.api()
            .create(&PostParams::default(), &object)
            .await
            .expect("the Infrastructure is created");
    }

    /// The current object.
    pub async fn get(&self, name: &str) -> Infrastructure {
        self.api()
            .get(name)
            .await
            .expect("the Infrastructure exists")
    }

    /// Replaces `spec.providerConfig` and asks for a reconcile in the same patch, as gardenlet
    /// does when the Shoot changes.
    pub async fn set_provider_config(&self, name: &str, provider_config: Value) {
        let patch = json!({
            "metadata": {"annotations": {"gardener.cloud/operation": "reconcile"}},
            "spec": {"providerConfig": provider_config},
        });
        self.api()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the spec is patched");
    }

    /// Replaces `spec.providerConfig` without asking for anything (a new generation only).
    pub async fn set_provider_config_only(&self, name: &str, provider_config: Value) {
        let patch = json!({"spec": {"providerConfig": provider_config}});
        self.api()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the spec is patched");
    }

    /// Adds a label (a change Gardener's predicate ignores).
    pub async fn label(&self, name: &str, key: &str, value: &str) {
        let patch = json!({"metadata": {"labels": {key: value}}});
        self.api()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the label is set");
    }

    /// Writes `status.state` as gardenlet does from the ShootState during a restore (a merge
    /// patch of the status).
    pub async fn write_state(&self, name: &str, state: &Value) {
        self.api()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {"state": state}})),
            )
            .await
            .expect("the state is written");
    }

    /// Creates (or replaces the Shoot of) the `Cluster` of the test namespace, as gardenlet
    /// keeps it.
    pub async fn set_shoot(&self, shoot: Value) {
        let clusters: Api<Cluster> = Api::all(self.client.clone());
        let mut cluster = Cluster::new(
            &self.namespace,
            ClusterSpec {
                shoot: Some(shoot),
                cloud_profile: Some(
                    json!({"apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile"}),
                ),
                seed: None,
            },
        );
        match clusters.get_opt(&self.namespace).await.expect("readable") {
            None => {
                clusters
                    .create(&PostParams::default(), &cluster)
                    .await
                    .expect("the Cluster is created");
            }
            Some(current) => {
                cluster.metadata.resource_version = current.metadata.resource_version;
                clusters
                    .replace(&self.namespace, &PostParams::default(), &cluster)
                    .await
                    .expect("the Cluster is replaced");
            }
        }
    }

    /// The writes the server counted on `Infrastructure` objects and their status.
    pub fn infrastructure_writes(&self) -> Vec<(String, u64)> {
        self.server
            .write_counts()
            .into_iter()
            .filter(|(key, _)| key.contains("infrastructures"))
            .collect()
    }

    /// Sets the `gardener.cloud/operation` annotation (as gardenlet does).
    pub async fn annotate(&self, name: &str, operation: &str) {
        let patch = json!({"metadata": {"annotations": {"gardener.cloud/operation": operation}}});
        self.api()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the annotation is set");
    }

    /// Asks for deletion.
    pub async fn delete(&self, name: &str) {
        self.api()
            .delete(name, &DeleteParams::default())
            .await
            .expect("the deletion is accepted");
    }

    /// Waits until `check` holds for the object, returning it; fails with `what` and the last
    /// object seen.
    pub async fn wait_for(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Infrastructure) -> bool,
    ) -> Infrastructure {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let current = self.get(name).await;
            if check(&current) {
                return current;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; last seen:\n{}",
                    serde_json::to_string_pretty(&current).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the object is gone.
    pub async fn wait_gone(&self, name: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.api().get_opt(name).await.expect("readable").is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "Infrastructure {name} is still there"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the last operation is `type_` in `state` for the current generation.
    pub async fn wait_operation(&self, name: &str, type_: &str, state: &str) -> Infrastructure {
        self.wait_for(name, &format!("lastOperation {type_} {state}"), |i| {
            last_operation(i) == Some((type_.to_string(), state.to_string()))
                && i.status.as_ref().and_then(|s| s.observed_generation) == i.metadata.generation
        })
        .await
    }

    /// Waits until the migration is complete: `Migrate` succeeded, our finalizer and the
    /// operation annotation removed.
    pub async fn wait_migrated(&self, name: &str) -> Infrastructure {
        self.wait_for(name, "the migration to complete", |i| {
            last_operation(i) == Some(("Migrate".to_string(), "Succeeded".to_string()))
                && !has_finalizer(i)
                && operation(i).is_none()
        })
        .await
    }

    /// Stops the controller.
    pub async fn stop(self) {
        self.stop.cancel();
        if let Some(controller) = self.controller {
            let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
        }
    }
}

/// Creates a CRD and waits until it is Established.
pub async fn install_crd(client: &Client, crd: CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("the CRD is created");
    let name = crd.metadata.name.clone().expect("a named CRD");
    for _ in 0..250 {
        let current = crds.get(&name).await.expect("the CRD is readable");
        let established = current
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the CRD {name} never became Established");
}

/// `(type, state)` of `status.lastOperation`.
pub fn last_operation(infra: &Infrastructure) -> Option<(String, String)> {
    infra
        .status
        .as_ref()
        .and_then(|s| s.last_operation.as_ref())
        .map(|l| (l.type_.clone(), l.state.clone()))
}

/// The decoded `status.providerStatus`.
pub fn provider_status(infra: &Infrastructure) -> InfrastructureStatus {
    InfrastructureStatus::from_value(
        infra
            .status
            .as_ref()
            .and_then(|s| s.provider_status.as_ref()),
    )
    .expect("status.providerStatus is our InfrastructureStatus")
}

/// `status.lastError.codes`.
pub fn error_codes(infra: &Infrastructure) -> Vec<String> {
    infra
        .status
        .as_ref()
        .and_then(|s| s.last_error.as_ref())
        .map(|e| e.codes.clone())
        .unwrap_or_default()
}

/// Whether the object carries the extension's finalizer.
pub fn has_finalizer(infra: &Infrastructure) -> bool {
    infra
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == capd::gardener::FINALIZER)
}

/// The `gardener.cloud/operation` annotation.
pub fn operation(infra: &Infrastructure) -> Option<String> {
    infra
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("gardener.cloud/operation").cloned())
}

/// An `InfrastructureConfig` with `networks`.
pub fn config(networks: Value) -> Value {
    json!({
        "apiVersion": "docker.provider.extensions.gardener.cloud/v1alpha1",
        "kind": "InfrastructureConfig",
        "networks": networks,
    })
}

/// Removes the listed Docker networks when dropped (also when the test panics).
pub struct Cleanup {
    /// Network names.
    pub networks: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let names = std::mem::take(&mut self.networks);
        // A fresh runtime on another thread: Drop may run inside the test's runtime.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a cleanup runtime");
            runtime.block_on(async {
                let Ok(engine) = DockerEngine::connect().await else {
                    return;
                };
                for name in names {
                    if let Err(e) = engine.remove_network(&name).await {
                        eprintln!("cleanup: removing Docker network {name} failed: {e}");
                    }
                }
            });
        })
        .join();
    }
}
