//! Shared helpers of the Docker integration tests: test images, engine connection, unique names,
//! and a cleanup guard (the TLS client is `capd_e2e::tls`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use capd::docker::{ContainerRuntime, DockerEngine, Labels};

/// Label put on everything a test creates; its value identifies the test.
pub const TEST_LABEL: &str = "io.x-k8s.capd-test.run";

/// The test images built by `e2e/images/build.sh`.
pub struct Images {
    pub node: String,
    pub haproxy: String,
}

fn image_from_env_file(key: &str) -> Option<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e/images/.build/images.env");
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.trim().to_string())
}

fn image(key: &str) -> String {
    let image = std::env::var(key)
        .ok()
        .filter(|v| !v.is_empty())
        .or_else(|| image_from_env_file(key));
    let Some(image) = image else {
        panic!(
            "{key} is not set and e2e/images/.build/images.env is missing: run `bash e2e/images/build.sh` first"
        );
    };
    let present = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", &image])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        present,
        "test image {image} is not in the engine: run `bash e2e/images/build.sh` first"
    );
    image
}

/// The test images; panics with instructions when they were not built.
pub fn images() -> &'static Images {
    static IMAGES: OnceLock<Images> = OnceLock::new();
    IMAGES.get_or_init(|| Images {
        node: image("CAPD_TEST_NODE_IMAGE"),
        haproxy: image("CAPD_TEST_HAPROXY_IMAGE"),
    })
}

/// Whether the engine can run privileged containers (sandboxed engines cannot).
fn privileged_allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let ok = Command::new("docker")
            .args([
                "run",
                "--rm",
                "--privileged",
                "--entrypoint",
                "true",
                &images().node,
            ])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            eprintln!(
                "note: this engine refuses privileged containers; running the tests unprivileged"
            );
        }
        ok
    })
}

/// A client of the local engine (unprivileged when the engine refuses privileged containers).
pub async fn engine() -> DockerEngine {
    let engine = DockerEngine::connect()
        .await
        .expect("connect to the docker engine");
    if privileged_allowed() {
        engine
    } else {
        engine.without_privileges()
    }
}

/// A name unique to this process and call, starting with `prefix`.
pub fn unique(prefix: &str) -> String {
    crate::common::unique(&format!("capdt-{prefix}"))
}

fn docker_lines(args: &[&str]) -> Vec<String> {
    Command::new("docker")
        .args(args)
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes everything labelled with its id when dropped, even when the test panicked.
pub struct Guard {
    pub id: String,
    volumes: std::sync::Mutex<Vec<String>>,
}

impl Guard {
    pub fn new(test: &str) -> Self {
        Guard {
            id: unique(test),
            volumes: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The label set marking what this test creates.
    pub fn labels(&self) -> Labels {
        Labels::from([(TEST_LABEL.to_string(), self.id.clone())])
    }

    /// Remembers volumes to check (and remove) at the end.
    pub fn track_volumes(&self, volumes: &[String]) {
        self.volumes.lock().unwrap().extend(volumes.iter().cloned());
    }

    fn leftovers(&self) -> (Vec<String>, Vec<String>, Vec<String>) {
        let filter = format!("label={TEST_LABEL}={}", self.id);
        let containers = docker_lines(&["ps", "-aq", "--filter", &filter]);
        let networks = docker_lines(&["network", "ls", "-q", "--filter", &filter]);
        let existing = docker_lines(&["volume", "ls", "-q"]);
        let volumes = self
            .volumes
            .lock()
            .unwrap()
            .iter()
            .filter(|v| existing.contains(v))
            .cloned()
            .collect();
        (containers, networks, volumes)
    }

    /// Asserts, through the runtime, that nothing labelled for this test remains.
    pub async fn assert_clean(&self, runtime: &dyn ContainerRuntime) {
        let containers = runtime.list_containers(&self.labels()).await.unwrap();
        assert!(containers.is_empty(), "containers left: {containers:?}");
        let networks = runtime.list_networks(&self.labels()).await.unwrap();
        assert!(networks.is_empty(), "networks left: {networks:?}");
        let (_, _, volumes) = self.leftovers();
        assert!(volumes.is_empty(), "volumes left: {volumes:?}");
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let (containers, networks, volumes) = self.leftovers();
        for c in &containers {
            let _ = Command::new("docker").args(["rm", "-fv", c]).output();
        }
        for n in &networks {
            let _ = Command::new("docker").args(["network", "rm", n]).output();
        }
        for v in &volumes {
            let _ = Command::new("docker")
                .args(["volume", "rm", "-f", v])
                .output();
        }
        let nothing_left = containers.is_empty() && networks.is_empty() && volumes.is_empty();
        if !std::thread::panicking() && !nothing_left {
            eprintln!(
                "guard {} removed leftovers: {containers:?} {networks:?} {volumes:?}",
                self.id
            );
        }
    }
}
