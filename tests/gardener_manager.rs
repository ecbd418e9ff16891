//! The real `manager` binary with `--gardener-infrastructure`, against the test Kubernetes API
//! server and the real Docker engine: the flag starts the controller, which creates and deletes
//! the shoot's network. Skips (with a message) when no Docker engine answers.

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod gardener_support;

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use capd::docker::{ContainerRuntime, DockerEngine};
use common::unique;
use gardener_support::*;
use serde_json::json;

const MANAGER: &str = env!("CARGO_BIN_EXE_manager");

/// The manager process, killed when dropped; its log goes to a file shown on failure.
struct Manager {
    child: Child,
    log: PathBuf,
}

impl Manager {
    fn start(kubeconfig: &std::path::Path) -> Self {
        let log = std::env::temp_dir().join(format!("capd-gardener-manager-{}.log", unique("m")));
        let out = File::create(&log).unwrap();
        let child = Command::new(MANAGER)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args([
                "--gardener-infrastructure",
                "--health-addr=0",
                "--diagnostics-address=0",
            ])
            .env_remove("KUBECONFIG")
            .env_remove("CAPD_DOCKER_NETWORK")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(out))
            .spawn()
            .expect("the manager starts");
        Self { child, log }
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
    let manager = Manager::start(env.server.kubeconfig_path());

    env.create("infra", "docker", Some(config(json!({"name": network}))))
        .await;
    let created = env.wait_operation("infra", "Create", "Succeeded").await;
    let docker = engine.inspect_network(&network).await.unwrap();
    assert_eq!(
        docker.map(|n| n.id),
        Some(provider_status(&created).network.id),
        "the manager created the network it reports"
    );

    env.delete("infra").await;
    env.wait_gone("infra").await;
    assert_eq!(engine.inspect_network(&network).await.unwrap(), None);
    assert!(
        manager.log().contains("gardener-infrastructure"),
        "the manager names the controller it started"
    );
}
