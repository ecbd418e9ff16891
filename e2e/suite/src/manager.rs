//! The real manager binary, run as a process against the environment's management API.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use crate::docker::{privileged_allowed, target_dir};
use crate::{Env, eventually, workspace_root};

/// Overrides where the manager binary is (default: `manager` next to the test executable's
/// `deps` folder, which `cargo test --workspace` builds).
pub const MANAGER_ENV: &str = "CAPD_E2E_MANAGER";

/// A running manager process.
pub struct Manager {
    child: Child,
    /// Where its `/healthz` and `/readyz` answer.
    pub health_port: u16,
}

/// The manager binary; panics with instructions when it is missing or older than the sources.
pub fn manager_binary() -> PathBuf {
    if let Ok(path) = std::env::var(MANAGER_ENV)
        && !path.is_empty()
    {
        return PathBuf::from(path);
    }
    let path = target_dir()
        .map(|dir| dir.join("manager"))
        .filter(|p| p.is_file())
        .expect("the manager binary is missing: run `cargo build --bin manager` (or `cargo test --workspace`), or set CAPD_E2E_MANAGER");
    let built = modified(&path).unwrap_or(SystemTime::UNIX_EPOCH);
    if let Some(newest) = newest_source(&workspace_root().join("src"))
        && newest > built
    {
        panic!(
            "{} is older than the sources: run `cargo build --bin manager` first (cargo test --workspace does)",
            path.display()
        );
    }
    path
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).ok()?.modified().ok()
}

/// The newest modification time of the manager's sources (`src/`, without other binaries).
fn newest_source(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "bin") {
                continue;
            }
            newest_source(&path)
        } else {
            modified(&path)
        };
        newest = newest.max(time);
    }
    newest
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Clock ticks per second of `/proc/<pid>/stat` times.
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

impl Env {
    /// Starts (or restarts) the manager binary.
    pub fn start_manager(&mut self) {
        assert!(self.manager.is_none(), "the manager already runs");
        let health_port = free_port();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(manager_binary())
            .args([
                &format!("--kubeconfig={}", self.kubeconfig_path().display()),
                &format!("--health-addr=127.0.0.1:{health_port}"),
                "--diagnostics-address=0",
                &format!("--docker-network={}", self.network),
            ])
            .args(&self.extra_args)
            .env_remove("RUST_LOG")
            .env("CAPD_DOCKER_NETWORK", &self.network)
            .env(
                "CAPD_RS_UNPRIVILEGED_CONTAINERS",
                if privileged_allowed(&self.images.node) {
                    "false"
                } else {
                    "true"
                },
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.manager = Some(Manager { child, health_port });
    }

    /// Stops the manager: SIGKILL when `crash`, else SIGTERM and a wait for its exit.
    pub fn stop_manager(&mut self, crash: bool) {
        let Some(mut manager) = self.manager.take() else {
            return;
        };
        if crash {
            let _ = manager.child.kill();
        } else {
            let pid = manager.child.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
        }
        let _ = manager.child.wait();
    }

    /// The manager's process id.
    pub fn manager_pid(&self) -> u32 {
        self.manager.as_ref().expect("the manager runs").child.id()
    }

    /// CPU time (user + system) the manager process used so far.
    pub fn manager_cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.manager_pid())).unwrap();
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line; `rest` starts at field 3.
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        Duration::from_secs_f64(ticks / clock_ticks())
    }

    /// Waits until `/readyz` of the manager answers 200.
    pub async fn wait_ready(&self) {
        let port = self.manager.as_ref().unwrap().health_port;
        eventually(
            Duration::from_secs(30),
            "the manager to be ready",
            || async move {
                let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()?;
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                stream
                    .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .await
                    .ok()?;
                let mut answer = String::new();
                stream.read_to_string(&mut answer).await.ok()?;
                answer.starts_with("HTTP/1.1 200").then_some(())
            },
        )
        .await;
    }

    /// The manager's log so far.
    pub fn manager_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
