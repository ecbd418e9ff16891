//! Shared helpers of the Docker integration tests: test images, engine connection, unique names,
//! a cleanup guard, and a TLS client.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use capd::docker::{ContainerRuntime, DockerEngine, Labels};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `GET https://127.0.0.1:<port><path>` without verifying the (self-signed) certificate.
pub async fn https_get(port: u16, path: &str) -> Result<Answer, String> {
    let config = crate::common::accept_any_certificate(rustls::DEFAULT_VERSIONS)
        .map_err(|e| e.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let work = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let name =
            rustls::pki_types::ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: {e}"))?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        tls.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut raw = Vec::new();
        // The stand-in closes without a TLS close_notify; keep what arrived.
        let _ = tls.read_to_end(&mut raw).await;
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("no HTTP answer: {text:?}"))?;
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line in {head:?}"))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        Ok(Answer {
            status,
            headers,
            body: body.to_string(),
        })
    };
    tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .map_err(|_| "timed out".to_string())?
}

/// Retries `https_get` until `accept` holds or `deadline` passes; returns the last answer or error.
pub async fn https_get_until(
    port: u16,
    path: &str,
    deadline: Duration,
    accept: impl Fn(&Answer) -> bool,
) -> Result<Answer, String> {
    let start = std::time::Instant::now();
    loop {
        let result = https_get(port, path).await;
        if let Ok(answer) = &result
            && accept(answer)
        {
            return result;
        }
        if start.elapsed() > deadline {
            return result;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
