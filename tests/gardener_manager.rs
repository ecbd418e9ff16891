//! The real `manager` binary running the Gardener controller, against the test Kubernetes API
//! server and the real Docker engine: with `--gardener-infrastructure` next to the Cluster API
//! controllers, and alone (`--controllers=gardener-infrastructure`) on a seed with no Cluster API
//! CRD. The controller creates and deletes the shoot's network. Skips (with a message) when no
//! Docker engine answers.

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod gardener_support;
mod manager_support;

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capd::docker::{ContainerRuntime, DockerEngine};
use common::unique;
use gardener_support::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use manager_support::{free_port, http_get};
use serde_json::json;

const MANAGER: &str = env!("CARGO_BIN_EXE_manager");

/// How long the manager may take to report ready: three managers start at once, and on a loaded
/// machine one was seen still not listening after 30 s (`hack/run.sh` allows 90 s too).
const READY_WITHIN: Duration = Duration::from_secs(90);

/// The manager process, killed when dropped; its log goes to a file shown on failure.
struct Manager {
    child: Child,
    log: PathBuf,
    health_port: u16,
}

impl Manager {
    /// Starts the manager with `flags` choosing its controllers.
    fn start(kubeconfig: &std::path::Path, flags: &[&str]) -> Self {
        Self::start_in(kubeconfig, flags, None)
    }

    /// Starts the manager with `flags`, as a pod of `namespace` (`POD_NAMESPACE`) when given.
    fn start_in(kubeconfig: &std::path::Path, flags: &[&str], namespace: Option<&str>) -> Self {
        let log = std::env::temp_dir().join(format!("capd-gardener-manager-{}.log", unique("m")));
        let out = File::create(&log).unwrap();
        let (health_port, webhook_port) = (free_port(), free_port());
        let mut command = Command::new(MANAGER);
        command.env_remove("POD_NAMESPACE");
        if let Some(namespace) = namespace {
            command.env("POD_NAMESPACE", namespace);
        }
        let child = command
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--health-addr=127.0.0.1:{health_port}"))
            .arg(format!("--webhook-port={webhook_port}"))
            .arg("--diagnostics-address=0")
            .args(flags)
            .env_remove("KUBECONFIG")
            .env_remove("CAPD_DOCKER_NETWORK")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(out))
            .spawn()
            .expect("the manager starts");
        Self {
            child,
            log,
            health_port,
        }
    }

    /// Waits until `/readyz` answers 200, failing with its last answer.
    async fn wait_ready(&self) {
        let mut last = String::new();
        let ready = tokio::time::timeout(READY_WITHIN, async {
            loop {
                match http_get(self.health_port, "/readyz").await {
                    Ok((200, _)) => return,
                    Ok((code, body)) => last = format!("{code} {body}"),
                    Err(e) => last = e.to_string(),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        assert!(ready.is_ok(), "the manager is not ready: {last}");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("manager log:\n{}", self.log());
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// An `Infrastructure` naming `network` gets it created and reported in its status, then removed
/// with the object.
async fn creates_and_deletes_the_network(env: &Env, engine: &DockerEngine, network: &str) {
    env.create("infra", "docker", Some(config(json!({"name": network}))))
        .await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    let docker = engine.inspect_network(network).await.unwrap();
    assert_eq!(
        docker.map(|n| n.id),
        Some(provider_status(&created).network.id),
        "the manager created the network it reports"
    );
    env.delete("infra").await;
    env.wait_gone("infra").await;
    assert_eq!(engine.inspect_network(network).await.unwrap(), None);
}

#[tokio::test]
async fn the_flag_runs_the_controller_in_the_manager() {
    let engine = match DockerEngine::connect().await {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("SKIPPED: no Docker engine answers ({e}); this test needs one");
            return;
        }
    };
    let network = unique("capd-gardener-it-manager");
    let _cleanup = Cleanup {
        networks: vec![network.clone()],
    };
    let env = Env::without_controller("shoot--it--manager").await;
    // The manager waits for its own CRDs and Cluster API core's Cluster and Machine before it
    // starts controllers (minimal stand-ins for the latter: this test does not exercise them).
    let bases = concat!(env!("CARGO_MANIFEST_DIR"), "/config/crd/bases");
    for entry in std::fs::read_dir(bases).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        install_crd(&env.client, serde_saphyr::from_str(&text).unwrap()).await;
    }
    for (kind, plural) in [("Cluster", "clusters"), ("Machine", "machines")] {
        install_crd(&env.client, capd_e2e::env::minimal_capi_crd(kind, plural)).await;
    }
    let manager = Manager::start(env.server.kubeconfig_path(), &["--gardener-infrastructure"]);
    manager.wait_ready().await;

    creates_and_deletes_the_network(&env, &engine, &network).await;
    let log = manager.log();
    assert!(
        log.contains("controllers=cluster-api,gardener-infrastructure"),
        "the manager names the controllers it runs: {log}"
    );
    assert!(
        log.contains("dockercluster") && log.contains("gardener-infrastructure"),
        "both kinds of controller started: {log}"
    );
}

#[tokio::test]
async fn alone_the_gardener_controller_needs_no_cluster_api_crd_and_no_webhook() {
    let engine = match DockerEngine::connect().await {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("SKIPPED: no Docker engine answers ({e}); this test needs one");
            return;
        }
    };
    let network = unique("capd-gardener-it-alone");
    let _cleanup = Cleanup {
        networks: vec![network.clone()],
    };
    // A seed as Gardener makes it: the Infrastructure CRD, nothing of Cluster API or CAPD.
    let env = Env::without_controller("shoot--it--alone").await;
    let manager = Manager::start(
        env.server.kubeconfig_path(),
        &["--controllers=gardener-infrastructure"],
    );
    manager.wait_ready().await;

    creates_and_deletes_the_network(&env, &engine, &network).await;

    let asked: Vec<String> = env
        .server
        .request_counts()
        .into_keys()
        .filter(|key| key.contains("x-k8s.io"))
        .collect();
    assert!(asked.is_empty(), "asked for Cluster API objects: {asked:?}");
    let log = manager.log();
    assert!(
        !log.contains("x-k8s.io") && !log.contains("Waiting for CRDs"),
        "the manager neither waits for nor mentions Cluster API groups: {log}"
    );
    assert!(
        log.contains("Webhooks are not served"),
        "no webhook server runs (so no certificate is waited for): {log}"
    );
    assert!(
        !log.contains("dockercluster"),
        "no Cluster API controller started: {log}"
    );
}

#[tokio::test]
async fn the_manager_keeps_the_heartbeat_and_honours_the_ignore_operation_annotation_flag() {
    let engine = match DockerEngine::connect().await {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("SKIPPED: no Docker engine answers ({e}); this test needs one");
            return;
        }
    };
    let (first, second) = (
        unique("capd-gardener-it-gen1"),
        unique("capd-gardener-it-gen2"),
    );
    let _cleanup = Cleanup {
        networks: vec![first.clone(), second.clone()],
    };
    let env = Env::without_controller("shoot--it--ignore").await;
    let manager = Manager::start_in(
        env.server.kubeconfig_path(),
        &[
            "--controllers=gardener-infrastructure",
            "--gardener-ignore-operation-annotation",
        ],
        Some(&env.namespace),
    );
    manager.wait_ready().await;

    // The heartbeat Lease appears in the manager's namespace.
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.namespace);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let lease = loop {
        if let Some(lease) = leases
            .get_opt("gardener-extension-heartbeat")
            .await
            .unwrap()
        {
            break lease;
        }
        assert!(tokio::time::Instant::now() < deadline, "no heartbeat Lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("provider-docker"));
    assert_eq!(spec.lease_duration_seconds, Some(30));

    // Without any annotation: a new object, then a new generation, are reconciled.
    env.create("infra", "docker", Some(config(json!({"name": first}))))
        .await;
    env.wait_operation("infra", "Create", "Succeeded").await;
    env.set_provider_config_only("infra", config(json!({"name": second})))
        .await;
    let moved = env.wait_operation("infra", "Reconcile", "Succeeded").await;
    assert_eq!(provider_status(&moved).network.name, second);
    assert!(engine.inspect_network(&second).await.unwrap().is_some());
    assert_eq!(
        engine.inspect_network(&first).await.unwrap(),
        None,
        "the previous network of ours is removed"
    );
    env.delete("infra").await;
    env.wait_gone("infra").await;
}
