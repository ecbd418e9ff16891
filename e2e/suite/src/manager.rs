//! The real manager, run against the environment's management API: the binary as a process, or
//! (the as-shipped lane, [`crate::shipped`]) its image as a container.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use crate::docker::{docker, privileged_allowed, target_dir};
use crate::shipped::{Ports, ShippedRun, write_serving_certificate};
use crate::{Env, eventually, unique, workspace_root};

/// Overrides where the manager binary is (default: `manager` next to the test executable's
/// `deps` folder, which `cargo test --workspace` builds).
pub const MANAGER_ENV: &str = "CAPD_E2E_MANAGER";

/// A running manager.
pub struct Manager {
    run: Run,
    /// Where its `/healthz` and `/readyz` answer.
    pub health_port: u16,
}

enum Run {
    /// The binary, as a child process.
    Process(Child),
    /// The image, as the container of this name.
    Container(String),
}

/// The manager binary; panics with instructions when it is missing, warns when it may be older
/// than the sources.
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
    // A hint, not a failure: cargo may keep an up-to-date binary with an older mtime.
    let built = modified(&path).unwrap_or(SystemTime::UNIX_EPOCH);
    if let Some(newest) = newest_source(&workspace_root().join("src"))
        && newest > built
    {
        eprintln!(
            "note: {} may be older than the sources: `cargo build --bin manager` (cargo test --workspace does)",
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
    /// Starts (or restarts) the manager: its image when the environment runs as shipped, else
    /// the binary.
    pub fn start_manager(&mut self) {
        assert!(self.manager.is_none(), "the manager already runs");
        let health_port = free_port();
        let unprivileged = !privileged_allowed(&self.images.node);
        let run = match self.shipped_image.clone() {
            Some(image) => Run::Container(self.start_container(image, health_port, unprivileged)),
            None => Run::Process(self.start_process(health_port, unprivileged)),
        };
        self.manager = Some(Manager { run, health_port });
    }

    fn start_process(&self, health_port: u16, unprivileged: bool) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        Command::new(manager_binary())
            .args([
                &format!("--kubeconfig={}", self.manager_kubeconfig_path().display()),
                &format!("--health-addr=127.0.0.1:{health_port}"),
                "--diagnostics-address=0",
                &format!("--docker-network={}", self.network),
            ])
            .args(&self.extra_args)
            .env_remove("RUST_LOG")
            .envs(self.manager_env.iter().map(|(k, v)| (k, v)))
            .env("CAPD_DOCKER_NETWORK", &self.network)
            .env(
                "CAPD_RS_UNPRIVILEGED_CONTAINERS",
                if unprivileged { "true" } else { "false" },
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    /// `docker run`s the manager image under the Deployment's restrictions; returns the name.
    fn start_container(&self, image: String, health_port: u16, unprivileged: bool) -> String {
        let cert_dir = self.log.with_file_name("serving-certs");
        if !cert_dir.join("tls.crt").is_file() {
            write_serving_certificate(&cert_dir);
        }
        let run = ShippedRun {
            name: unique("capd-e2e-manager-"),
            image,
            kubeconfig: self.manager_kubeconfig_path(),
            cert_dir,
            namespace: self.namespace.clone(),
            network: self.network.clone(),
            ports: Ports {
                health: health_port,
                webhook: free_port(),
                diagnostics: free_port(),
            },
            unprivileged,
            extra_args: self.extra_args.clone(),
            ca_bundle: self.ca_bundle.clone(),
        };
        let mut args = vec!["run".to_string()];
        args.extend(run.docker_run_args());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, out) = docker(&args);
        assert!(ok, "docker run of the manager image failed: {out}");
        run.name
    }

    /// The kubeconfig the manager gets: [`Env::give_manager_kubeconfig`]'s, else the management
    /// API's.
    fn manager_kubeconfig_path(&self) -> PathBuf {
        self.manager_kubeconfig
            .clone()
            .unwrap_or_else(|| self.kubeconfig_path())
    }

    /// Has the manager use the kubeconfig `yaml` from its next start instead of the management
    /// API's own (the suite's clients keep using that one).
    pub fn give_manager_kubeconfig(&mut self, yaml: &str) {
        self.manager_kubeconfig = Some(self.write_manager_file("kubeconfig", yaml));
    }

    /// Has the manager's container find the CA bundle `pem` where the image ships its own
    /// ([`crate::shipped::CA_BUNDLE`]), from its next start, as an operator mounting a bundle
    /// over it would.
    pub fn mount_ca_bundle(&mut self, pem: &str) {
        assert!(
            self.shipped_image.is_some(),
            "only the manager as shipped has an image whose CA bundle a mount can replace"
        );
        self.ca_bundle = Some(self.write_manager_file("ca-certificates.crt", pem));
    }

    /// Writes `text` to `name` in a folder of the environment that a root without capabilities
    /// (the manager as shipped) can read.
    fn write_manager_file(&self, name: &str, text: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.log.with_file_name("manager-files");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        path
    }

    /// Stops the manager: SIGKILL when `crash`, else SIGTERM and a wait for its exit. A
    /// container's log is kept in the environment's log file, and the container removed.
    pub fn stop_manager(&mut self, crash: bool) {
        let Some(manager) = self.manager.take() else {
            return;
        };
        match manager.run {
            Run::Process(mut child) => {
                if crash {
                    let _ = child.kill();
                } else {
                    let pid = child.id().to_string();
                    let _ = Command::new("kill").args(["-TERM", &pid]).status();
                }
                let _ = child.wait();
            }
            Run::Container(name) => {
                if crash {
                    docker(&["kill", &name]);
                } else {
                    // The Deployment's terminationGracePeriodSeconds.
                    docker(&["stop", "--time=10", &name]);
                }
                let mut log = std::fs::read_to_string(&self.log).unwrap_or_default();
                log.push_str(&container_log(&name));
                let _ = std::fs::write(&self.log, log);
                docker(&["rm", "--force", &name]);
            }
        }
    }

    /// The manager's process id (on the host, also for a container).
    pub fn manager_pid(&self) -> u32 {
        match &self.manager.as_ref().expect("the manager runs").run {
            Run::Process(child) => child.id(),
            Run::Container(name) => docker(&["inspect", "--format", "{{.State.Pid}}", name])
                .1
                .parse()
                .unwrap(),
        }
    }

    /// The name of the manager's container, when it runs as shipped.
    pub fn manager_container(&self) -> Option<String> {
        match &self.manager.as_ref()?.run {
            Run::Container(name) => Some(name.clone()),
            Run::Process(_) => None,
        }
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
        eventually(
            Duration::from_secs(30),
            "the manager to be ready",
            || async move { (self.readyz().await?.0 == 200).then_some(()) },
        )
        .await;
    }

    /// What `/readyz` of the manager answers (status and body), `None` when it does not.
    pub async fn readyz(&self) -> Option<(u16, String)> {
        http_get(self.manager.as_ref()?.health_port, "/readyz").await
    }

    /// Has the manager serve its metrics over plain HTTP on a port of its own, from its next
    /// start; returns the port.
    pub fn serve_metrics(&mut self) -> u16 {
        let port = free_port();
        self.extra_args.extend([
            format!("--diagnostics-address=127.0.0.1:{port}"),
            "--insecure-diagnostics".to_string(),
        ]);
        self.metrics_port = Some(port);
        port
    }

    /// The manager's metrics exposition; panics unless [`Env::serve_metrics`] was called.
    pub async fn metrics(&self) -> Option<String> {
        let port = self
            .metrics_port
            .expect("call serve_metrics() before starting the manager");
        let (status, body) = http_get(port, "/metrics").await?;
        (status == 200).then_some(body)
    }

    /// Has the manager reach the Docker engine at `docker_host` (for example through an
    /// [`EngineProxy`](crate::engine_proxy::EngineProxy)), from its next start. The suite's own
    /// checks keep using the engine directly.
    pub fn route_docker_through(&mut self, docker_host: &str) {
        assert!(
            self.shipped_image.is_none(),
            "the manager as shipped reaches the engine through the mounted socket"
        );
        self.manager_env
            .push(("DOCKER_HOST".to_string(), docker_host.to_string()));
    }

    /// The manager's log so far (of every run).
    pub fn manager_log(&self) -> String {
        let mut log = std::fs::read_to_string(&self.log).unwrap_or_default();
        if let Some(Manager {
            run: Run::Container(name),
            ..
        }) = &self.manager
        {
            log.push_str(&container_log(name));
        }
        log
    }
}

/// `GET path` on `127.0.0.1:port` over plain HTTP/1.1: status and body, `None` when nothing
/// answers.
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// The value of the sample `series` (name and labels, as exposed) in a metrics exposition.
pub fn metric(exposition: &str, series: &str) -> Option<f64> {
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// What a container wrote to stdout and stderr.
fn container_log(name: &str) -> String {
    let out = Command::new("docker")
        .args(["logs", name])
        .output()
        .unwrap();
    let mut log = String::from_utf8_lossy(&out.stdout).into_owned();
    log.push_str(&String::from_utf8_lossy(&out.stderr));
    log
}
