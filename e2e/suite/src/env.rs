//! One scenario's world: a management API (its own test API server, or an existing cluster), a
//! workload API server, the CRDs, the real manager (its binary, or its image as shipped), and what
//! to clean up in the engine.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Config};
use serde_json::{Value, json};
use testapiserver::{Handle, Options, TestApiServer};

use crate::docker::{Images, images, remove_clusters_and_networks};
use crate::manager::Manager;
use crate::{eventually, unique, workspace_root};

/// The namespace of the controllers' integration tests (each has its own API server).
pub const NAMESPACE: &str = "default";

/// Set to `true` to run the suite against the cluster of `CAPD_E2E_KUBECONFIG` or `KUBECONFIG`.
pub const USE_EXISTING_CLUSTER_ENV: &str = "CAPD_E2E_USE_EXISTING_CLUSTER";

/// The management API of an [`Env`].
pub enum Management {
    /// A test API server started for this environment alone.
    TestServer(Handle),
    /// An existing cluster, reached through a kubeconfig file.
    Existing(PathBuf),
}

impl Management {
    /// The management API the e2e suite uses: an existing cluster when
    /// `CAPD_E2E_USE_EXISTING_CLUSTER=true`, else a fresh test API server.
    pub async fn from_environment() -> Management {
        let existing = std::env::var(USE_EXISTING_CLUSTER_ENV).is_ok_and(|v| v == "true");
        if !existing {
            return Self::test_server().await;
        }
        let path = ["CAPD_E2E_KUBECONFIG", "KUBECONFIG"]
            .iter()
            .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
            .expect("CAPD_E2E_USE_EXISTING_CLUSTER=true needs CAPD_E2E_KUBECONFIG or KUBECONFIG");
        // A KUBECONFIG list: the manager takes one file, the first.
        let first = path.split(':').next().unwrap_or_default().to_string();
        Management::Existing(PathBuf::from(first))
    }

    /// A fresh test API server.
    pub async fn test_server() -> Management {
        Management::TestServer(TestApiServer::start(Options::default()).await.unwrap())
    }

    fn is_existing(&self) -> bool {
        matches!(self, Management::Existing(_))
    }

    fn kubeconfig_path(&self) -> PathBuf {
        match self {
            Management::TestServer(handle) => handle.kubeconfig_path().to_path_buf(),
            Management::Existing(path) => path.clone(),
        }
    }
}

/// A client for the API behind a kubeconfig text.
pub async fn client_from_yaml(yaml: &str) -> Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// A client for a test API server.
pub async fn client_for(handle: &Handle) -> Client {
    client_from_yaml(handle.kubeconfig_yaml()).await
}

/// One scenario's world.
pub struct Env {
    management: Management,
    /// The workload cluster's API server (always a test API server).
    pub workload: Handle,
    /// A client of the management API.
    pub client: Client,
    /// A client of the workload API.
    pub workload_client: Client,
    /// The namespace objects are created in and read from.
    pub namespace: String,
    /// The Docker network the manager puts clusters on (unique to this environment).
    pub network: String,
    /// The test images.
    pub images: Images,
    /// The `cluster.x-k8s.io/watch-filter` value of this environment's manager and objects
    /// (against an existing cluster, so that parallel scenarios leave each other alone).
    pub watch_filter: Option<String>,
    /// The infrastructure kinds the suite makes: Docker* (the default) or Dev* with the docker
    /// backend ([`Env::use_dev_kinds`]).
    pub kinds: crate::core::InfraKinds,
    pub(crate) manager: Option<Manager>,
    /// The manager image, when the manager runs as shipped ([`crate::shipped`]).
    pub(crate) shipped_image: Option<String>,
    /// The kubeconfig the manager gets instead of the management API's own
    /// ([`Env::give_manager_kubeconfig`]).
    pub(crate) manager_kubeconfig: Option<PathBuf>,
    /// The CA bundle mounted over the image's ([`Env::mount_ca_bundle`]).
    pub(crate) ca_bundle: Option<PathBuf>,
    pub(crate) extra_args: Vec<String>,
    /// Environment variables of the manager process, on top of the suite's own.
    pub(crate) manager_env: Vec<(String, String)>,
    /// Where the manager serves metrics, when [`Env::serve_metrics`] was called.
    pub(crate) metrics_port: Option<u16>,
    pub(crate) log: PathBuf,
    pub(crate) clusters: Vec<String>,
    pub(crate) namespaces: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Env {
    /// Starts a test API server for management and one for the workload, installs the CRDs and
    /// starts the manager (the controllers' integration tests).
    pub async fn start(test: &str) -> Env {
        Self::start_with(test, &[]).await
    }

    /// As [`Env::start`], with extra manager flags.
    pub async fn start_with(test: &str, extra_args: &[&str]) -> Env {
        Self::launch(Management::test_server().await, test, extra_args).await
    }

    /// An e2e scenario's environment: the management API from [`Management::from_environment`],
    /// a namespace of its own, CRDs installed, the manager started and ready.
    pub async fn scenario(test: &str, extra_args: &[&str]) -> Env {
        let management = Management::from_environment().await;
        let env = Self::launch_with(management, test, extra_args, None).await;
        env.wait_ready().await;
        env
    }

    /// As [`Env::scenario`], but the manager is not started: the scenario prepares the world
    /// first (objects and containers left by another provider), then calls
    /// [`Env::start_manager`] and [`Env::wait_ready`].
    pub async fn scenario_without_manager(test: &str, extra_args: &[&str]) -> Env {
        let management = Management::from_environment().await;
        let isolate = management.is_existing();
        Self::prepare(management, test, extra_args, None, isolate).await
    }

    /// The sandbox's environment (`hack/run.sh`, the Cluster API stand-in): the existing
    /// management API of `kubeconfig`, whose manager runs already and puts clusters on `network`.
    /// Objects go to the namespace `default` without a watch filter, as a user's would; no
    /// manager is started. Dropping it removes the containers of [`Env::adopt_cluster`]'s
    /// clusters and `network` when they are left.
    pub async fn attach(kubeconfig: PathBuf, network: &str) -> Env {
        let management = Management::Existing(kubeconfig);
        let mut env = Self::prepare(management, "sandbox", &[], None, false).await;
        env.network = network.to_string();
        env
    }

    /// As [`Env::scenario`], with the manager run from `image` as shipped: a container under the
    /// Deployment's restrictions ([`crate::shipped`]).
    pub async fn scenario_as_shipped(test: &str, image: &str) -> Env {
        let management = Management::from_environment().await;
        let env = Self::launch_with(management, test, &[], Some(image.to_string())).await;
        env.wait_ready().await;
        env
    }

    /// As [`Env::scenario_as_shipped`], but the manager is not started: the scenario changes how
    /// it runs first ([`Env::give_manager_kubeconfig`], [`Env::mount_ca_bundle`]), then calls
    /// [`Env::start_manager`].
    pub async fn scenario_as_shipped_without_manager(test: &str, image: &str) -> Env {
        let management = Management::from_environment().await;
        let isolate = management.is_existing();
        Self::prepare(management, test, &[], Some(image.to_string()), isolate).await
    }

    /// Sets up an environment on a management API and starts the manager binary.
    pub async fn launch(management: Management, test: &str, extra_args: &[&str]) -> Env {
        Self::launch_with(management, test, extra_args, None).await
    }

    /// Sets up an environment on a management API and starts the manager: from `shipped_image`
    /// as a container when given, else the binary.
    pub async fn launch_with(
        management: Management,
        test: &str,
        extra_args: &[&str],
        shipped_image: Option<String>,
    ) -> Env {
        let isolate = management.is_existing();
        let mut env = Self::prepare(management, test, extra_args, shipped_image, isolate).await;
        env.start_manager();
        env
    }

    /// Sets up an environment on a management API (CRDs, namespace), without a manager. When
    /// `isolate` (a shared cluster), it keeps to a namespace of its own and a unique watch filter.
    async fn prepare(
        management: Management,
        test: &str,
        extra_args: &[&str],
        shipped_image: Option<String>,
        isolate: bool,
    ) -> Env {
        let images = images();
        let workload = TestApiServer::start(Options {
            context_name: "workload".into(),
            ..Options::default()
        })
        .await
        .unwrap();
        let yaml = std::fs::read_to_string(management.kubeconfig_path()).unwrap();
        let client = client_from_yaml(&yaml).await;
        let workload_client = client_for(&workload).await;
        let dir = tempfile::tempdir().unwrap();
        let mut extra_args: Vec<String> = extra_args.iter().map(|a| a.to_string()).collect();
        let watch_filter = isolate.then(|| unique("capd-e2e-"));
        if let Some(filter) = &watch_filter {
            extra_args.push(format!("--watch-filter={filter}"));
        }
        let mut env = Env {
            log: dir.path().join("manager.log"),
            management,
            workload,
            client,
            workload_client,
            namespace: NAMESPACE.to_string(),
            network: unique(&format!("capdit-{test}-")),
            images,
            watch_filter,
            kinds: crate::core::InfraKinds::Docker,
            manager: None,
            shipped_image,
            manager_kubeconfig: None,
            ca_bundle: None,
            extra_args,
            manager_env: Vec::new(),
            metrics_port: None,
            clusters: Vec::new(),
            namespaces: Vec::new(),
            _dir: dir,
        };
        env.install_crds().await;
        if isolate {
            // Against a shared cluster, every environment keeps to namespaces of its own.
            env.namespace = env.create_namespace(&format!("e2e-{test}-")).await;
        }
        env
    }

    /// The test API server of the management cluster; panics against an existing cluster.
    pub fn mgmt(&self) -> &Handle {
        self.test_server()
            .expect("this check needs the test API server (not an existing cluster)")
    }

    /// As [`Env::mgmt`], to restart it ([`Handle::restart`]).
    pub fn mgmt_mut(&mut self) -> &mut Handle {
        match &mut self.management {
            Management::TestServer(handle) => handle,
            Management::Existing(_) => {
                panic!("this check needs the test API server (not an existing cluster)")
            }
        }
    }

    /// The test API server of the management cluster, `None` against an existing cluster.
    pub fn test_server(&self) -> Option<&Handle> {
        match &self.management {
            Management::TestServer(handle) => Some(handle),
            Management::Existing(_) => None,
        }
    }

    /// The kubeconfig file of the management API.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.management.kubeconfig_path()
    }

    /// Creates a namespace whose name starts with `prefix` (unique), removed at the end.
    pub async fn create_namespace(&mut self, prefix: &str) -> String {
        let name = unique(prefix);
        let api: Api<Namespace> = Api::all(self.client.clone());
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        api.create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        self.namespaces.push(name.clone());
        name
    }

    async fn install_crds(&self) {
        let mut crds: Vec<CustomResourceDefinition> = Vec::new();
        let bases = workspace_root().join("config/crd/bases");
        for entry in std::fs::read_dir(bases).unwrap() {
            crds.push(crd_from_file(&entry.unwrap().path()));
        }
        let reference = workspace_root().join("../shared/reference/crds/capi-release-1.12");
        if reference.is_dir() {
            for file in [
                "cluster.x-k8s.io_clusters.yaml",
                "cluster.x-k8s.io_machines.yaml",
                "cluster.x-k8s.io_machinepools.yaml",
            ] {
                crds.push(crd_from_file(&reference.join(file)));
            }
        } else {
            println!(
                "note: {} not found; using minimal Cluster, Machine and MachinePool CRDs",
                reference.display()
            );
            crds.push(minimal_capi_crd("Cluster", "clusters"));
            crds.push(minimal_capi_crd("Machine", "machines"));
            crds.push(minimal_capi_crd("MachinePool", "machinepools"));
        }
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for crd in &crds {
            match api.create(&PostParams::default(), crd).await {
                Ok(_) => {}
                // An existing cluster may have them already (from an earlier run or clusterctl).
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => panic!("cannot install a CRD: {error}"),
            }
        }
        for crd in &crds {
            let name = crd.metadata.name.clone().unwrap();
            eventually(Duration::from_secs(30), "CRDs to be established", || {
                let api = api.clone();
                let name = name.clone();
                async move {
                    let crd = api.get(&name).await.ok()?;
                    crd.status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                        .then_some(())
                }
            })
            .await;
        }
    }

    /// A unique cluster name, whose containers are removed when the environment ends.
    pub fn cluster_name(&mut self) -> String {
        let name = unique("it");
        self.clusters.push(name.clone());
        name
    }

    /// Takes a cluster name of the caller's choosing: its containers are removed when the
    /// environment ends, as [`Env::cluster_name`]'s are.
    pub fn adopt_cluster(&mut self, name: &str) {
        self.clusters.push(name.to_string());
    }

    /// Objects of a kind in the current namespace.
    pub fn api(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, resource)
    }

    /// Creates an object (in the current namespace unless it names one).
    pub async fn create(&self, resource: &ApiResource, mut object: Value) -> DynamicObject {
        if object["metadata"]["namespace"].is_null() {
            object["metadata"]["namespace"] = json!(self.namespace);
        }
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap()
            .to_string();
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        Api::namespaced_with(self.client.clone(), &namespace, resource)
            .create(&PostParams::default(), &object)
            .await
            .unwrap()
    }

    /// An object of the current namespace, `None` when absent.
    pub async fn get(&self, resource: &ApiResource, name: &str) -> Option<DynamicObject> {
        self.api(resource).get_opt(name).await.unwrap()
    }

    /// A JSON merge patch.
    pub async fn merge_patch(&self, resource: &ApiResource, name: &str, patch: Value) {
        self.api(resource)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// A JSON merge patch of the status.
    pub async fn merge_patch_status(&self, resource: &ApiResource, name: &str, patch: Value) {
        self.api(resource)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// Deletes an object.
    pub async fn delete(&self, resource: &ApiResource, name: &str) {
        let _ = self
            .api(resource)
            .delete(name, &Default::default())
            .await
            .unwrap();
    }

    /// Waits until an object of the current namespace is gone.
    pub async fn wait_gone(&self, resource: &ApiResource, name: &str, timeout: Duration) {
        eventually(
            timeout,
            &format!("{} {name} to be gone", resource.kind),
            || async { self.get(resource, name).await.is_none().then_some(()) },
        )
        .await;
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.stop_manager(true);
        let failed = std::thread::panicking();
        if failed || std::env::var("CAPD_IT_SHOW_LOG").is_ok() {
            eprintln!("{}", crate::report::failure_report(self));
        }
        remove_clusters_and_networks(&self.clusters, std::slice::from_ref(&self.network));
        if matches!(self.management, Management::Existing(_)) {
            crate::report::release_namespaces(&self.kubeconfig_path(), &self.namespaces);
        }
    }
}

/// A minimal CRD for a Cluster API core kind, used when the reference CRDs are not available.
pub fn minimal_capi_crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.cluster.x-k8s.io")},
        "spec": {
            "group": "cluster.x-k8s.io",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1beta2",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap()
}

fn crd_from_file(path: &Path) -> CustomResourceDefinition {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}
