//! [`DockerEngine`]: the [`ContainerRuntime`] backed by a Docker engine through bollard.
//!
//! This is the only module of the crate that imports bollard.

mod convert;
mod exec;
mod libpod;

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, KillContainerOptionsBuilder,
    ListContainersOptionsBuilder, ListNetworksOptionsBuilder, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use futures::StreamExt;

use self::convert::map_err;
use super::runtime::{ContainerRuntime, LineMatch, Removal, RuntimeError};
use super::types::{
    ContainerInfo, ContainerSpec, ContainerSummary, Engine, EngineKind, ExecOutput, ExecRequest,
    HostInfo, Labels, NetworkInfo, NetworkSpec,
};

/// The engine address used when `DOCKER_HOST` is not set.
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";

/// Where the engine is and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineAddress {
    /// `unix:///...`, `tcp://host:port`, `http://...` or `https://...`.
    pub host: String,
    /// Client certificate and the CA that signed the engine's certificate: TLS with the engine's
    /// certificate verified (`DOCKER_TLS_VERIFY`). Used for `tcp://` and `https://` hosts.
    pub tls: Option<TlsFiles>,
}

/// The files of a TLS connection to the engine, named as the Docker CLI names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `ca.pem`: the CA the engine's certificate must be signed by.
    pub ca: PathBuf,
    /// `cert.pem`: the client certificate.
    pub cert: PathBuf,
    /// `key.pem`: the client key.
    pub key: PathBuf,
}

impl TlsFiles {
    /// `ca.pem`, `cert.pem` and `key.pem` in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        }
    }
}

impl EngineAddress {
    /// The address this process's environment names.
    ///
    /// # Errors
    /// As [`EngineAddress::from_lookup`].
    pub fn from_env() -> Result<Self, RuntimeError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The address the variables of `lookup` name, read as the Docker CLI reads them:
    /// `DOCKER_HOST` (default: the local socket); a non-empty `DOCKER_TLS_VERIFY` means TLS with
    /// the engine's certificate verified, using `ca.pem`, `cert.pem` and `key.pem` in
    /// `DOCKER_CERT_PATH` (default: `$HOME/.docker`).
    ///
    /// # Errors
    /// [`RuntimeError::Connect`] for `DOCKER_TLS` without `DOCKER_TLS_VERIFY` (TLS without
    /// verifying the engine, which this provider does not offer), and for TLS with neither
    /// `DOCKER_CERT_PATH` nor `HOME`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, RuntimeError> {
        let set = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let host = set("DOCKER_HOST").unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_string());
        let refuse = |message: &str| RuntimeError::Connect {
            host: host.clone(),
            source: message.into(),
        };
        if set("DOCKER_TLS_VERIFY").is_none() {
            if set("DOCKER_TLS").is_some() {
                return Err(refuse(
                    "DOCKER_TLS without DOCKER_TLS_VERIFY (TLS without verifying the engine) is not supported: set DOCKER_TLS_VERIFY=1",
                ));
            }
            return Ok(Self { host, tls: None });
        }
        let dir = match (set("DOCKER_CERT_PATH"), set("HOME")) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(home)) => Path::new(&home).join(".docker"),
            (None, None) => {
                return Err(refuse(
                    "DOCKER_TLS_VERIFY is set but neither DOCKER_CERT_PATH nor HOME says where ca.pem, cert.pem and key.pem are",
                ));
            }
        };
        Ok(Self {
            host,
            tls: Some(TlsFiles::in_dir(&dir)),
        })
    }
}

/// Time limit of one request to the engine, its answer included: a hung engine fails the call
/// instead of holding a reconcile worker forever. Streams are not bounded by it as a whole: an
/// exec has its own limit ([`ExecRequest::timeout`], bootstrap itself runs detached and is only
/// polled), and an image pull fails only when no progress arrives for this long. Two minutes,
/// because the slowest single calls of a healthy but busy engine (removing a node container with
/// its volumes, creating one while others start) take tens of seconds; the outage itself is
/// noticed much sooner (`docker::monitor`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A Docker engine reached over its API, with the API version negotiated down to what the engine
/// speaks (engines older than bollard's default, such as 20.10 / API 1.41, work). Podman's
/// Docker-compatible service is reached the same way; which engine answered is read at connection
/// ([`ContainerRuntime::engine`]).
///
/// Containers and execs run privileged when asked, as CAPD's do, unless
/// [`DockerEngine::without_privileges`] was called.
#[derive(Debug, Clone)]
pub struct DockerEngine {
    docker: Docker,
    engine: Engine,
    /// What Podman's own API says of the host (rootless, cgroups), read once at connection.
    podman_host: Option<libpod::PodmanHost>,
    host: String,
    allow_privileged: bool,
    request_timeout: Duration,
}

impl DockerEngine {
    /// Connects to the engine that `DOCKER_HOST`, `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH`
    /// name, as the Docker CLI reads them (see [`EngineAddress::from_env`]).
    ///
    /// # Errors
    /// [`RuntimeError::Connect`] when the address is unusable or the engine does not answer.
    pub async fn connect() -> Result<Self, RuntimeError> {
        Self::connect_to(&EngineAddress::from_env()?).await
    }

    /// Connects to the engine at `address` and negotiates the API version.
    ///
    /// # Errors
    /// [`RuntimeError::Connect`] when the address is unusable or the engine does not answer.
    pub async fn connect_to(address: &EngineAddress) -> Result<Self, RuntimeError> {
        let host = address.host.as_str();
        let connect_err = |e: bollard::errors::Error| RuntimeError::Connect {
            host: host.to_string(),
            source: Box::new(e),
        };
        let docker = match (&address.tls, host.split_once("://")) {
            (Some(tls), Some(("tcp" | "https", _))) => {
                // bollard reads the client key with the process's default provider; another
                // part of the process may have installed it already, which is as good.
                let _ = rustls::crypto::ring::default_provider().install_default();
                Docker::connect_with_ssl(
                    host,
                    &tls.key,
                    &tls.cert,
                    &tls.ca,
                    REQUEST_TIMEOUT.as_secs(),
                    bollard::API_DEFAULT_VERSION,
                )
            }
            (_, Some(("tcp" | "http", _))) => Docker::connect_with_http(
                host,
                REQUEST_TIMEOUT.as_secs(),
                bollard::API_DEFAULT_VERSION,
            ),
            // The Docker CLI ignores TLS settings for a local socket.
            _ => Docker::connect_with_host(host),
        };
        let docker = docker
            .map_err(connect_err)?
            .with_timeout(REQUEST_TIMEOUT)
            .negotiate_version()
            .await
            .map_err(connect_err)?;
        let version = tokio::time::timeout(REQUEST_TIMEOUT, docker.version())
            .await
            .map_err(|_| RuntimeError::Connect {
                host: host.to_string(),
                source: format!("no answer to /version within {REQUEST_TIMEOUT:?}").into(),
            })?
            .map_err(connect_err)?;
        let engine = convert::engine(&version);
        // Over TLS only the compatible API's facts are known: the libpod reader speaks plain
        // HTTP, so a rootless Podman behind TLS is not recognised as rootless.
        let podman_host = match (engine.kind, &address.tls) {
            (EngineKind::Podman, None) => libpod::host(host, REQUEST_TIMEOUT).await?,
            _ => None,
        };
        Ok(Self {
            docker,
            engine,
            podman_host,
            host: host.to_string(),
            allow_privileged: true,
            request_timeout: REQUEST_TIMEOUT,
        })
    }

    /// Runs every container and exec unprivileged, whatever the spec asks. Only for engines that
    /// refuse privileged containers (sandboxed CI whose daemon lacks some capabilities), with
    /// stand-in images that need no privileges; real `kindest/node` images do need them.
    pub fn without_privileges(mut self) -> Self {
        self.allow_privileged = false;
        self
    }

    /// Uses `timeout` instead of [`REQUEST_TIMEOUT`] (whole seconds, at least one): for tests
    /// that check a hung engine fails calls instead of holding them.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        let timeout = Duration::from_secs(timeout.as_secs().max(1));
        self.docker = self.docker.with_timeout(timeout);
        self.request_timeout = timeout;
        self
    }

    /// Whether containers and execs may run privileged.
    pub fn allows_privileged(&self) -> bool {
        self.allow_privileged
    }

    /// The engine address this client talks to.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The API version in use after negotiation, such as `1.41`.
    pub fn api_version(&self) -> String {
        let v = self.docker.client_version();
        format!("{}.{}", v.major_version, v.minor_version)
    }

    fn err(
        &self,
        action: impl Into<String>,
    ) -> impl FnOnce(bollard::errors::Error) -> RuntimeError {
        let action = action.into();
        let timeout = self.request_timeout;
        move |e| map_err(action, timeout, e)
    }

    /// Runs one request whose answer is read whole, within the request timeout (bollard's own
    /// limit stops at the answer's headers).
    async fn call<T>(
        &self,
        action: impl Into<String>,
        request: impl Future<Output = Result<T, bollard::errors::Error>>,
    ) -> Result<T, RuntimeError> {
        let action = action.into();
        match tokio::time::timeout(self.request_timeout, request).await {
            Ok(answer) => answer.map_err(self.err(action)),
            Err(_) => Err(convert::unanswered(action, self.request_timeout)),
        }
    }

    /// Runs a request that reads container states: [`Self::call`], asked again while the engine
    /// reports a state Docker's API does not have. Podman names two passing states of its own,
    /// `stopped` (exited, not yet cleaned up) and `configured` (being created), which no Docker
    /// client can read; each lasts a few milliseconds.
    async fn read_states<T, F, Fut>(
        &self,
        action: impl Into<String>,
        request: F,
    ) -> Result<T, RuntimeError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, bollard::errors::Error>>,
    {
        const ATTEMPTS: u32 = 20;
        const PAUSE: Duration = Duration::from_millis(50);
        let action = action.into();
        let mut attempt = 1;
        loop {
            match self.call(action.clone(), request()).await {
                Err(e) if attempt < ATTEMPTS && convert::is_passing_podman_state(&e) => {
                    attempt += 1;
                    tokio::time::sleep(PAUSE).await;
                }
                answer => return answer,
            }
        }
    }

    fn label_filters(labels: &Labels) -> std::collections::HashMap<String, Vec<String>> {
        let values: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if values.is_empty() {
            std::collections::HashMap::new()
        } else {
            std::collections::HashMap::from([("label".to_string(), values)])
        }
    }

    async fn remove_quietly(&self, name: &str) -> Result<Removal, RuntimeError> {
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        let removed = self.docker.remove_container(name, Some(options));
        match self.call(format!("delete container {name}"), removed).await {
            Ok(()) => Ok(Removal::Gone),
            Err(e) if e.is_not_found() => Ok(Removal::Gone),
            // The engine refuses while a removal of the same container is in progress.
            Err(e)
                if e.engine_message()
                    .is_some_and(|m| m.contains("already in progress")) =>
            {
                Ok(Removal::InProgress)
            }
            Err(e) => Err(e),
        }
    }
}

/// `Ok(None)` for an object the engine says does not exist.
fn absent_as_none<T>(result: Result<T, RuntimeError>) -> Result<Option<T>, RuntimeError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

#[async_trait]
impl ContainerRuntime for DockerEngine {
    fn engine(&self) -> Engine {
        self.engine.clone()
    }

    async fn host_info(&self) -> Result<HostInfo, RuntimeError> {
        let info = self.call("read engine info", self.docker.info()).await?;
        let mut host = convert::host_info(info);
        // Podman's compatible /info says neither whether it is rootless nor which controllers
        // it has: take them from its own API, in Docker's words.
        if let Some(podman) = &self.podman_host {
            if podman.rootless && !host.rootless() {
                host.security_options.push("name=rootless".to_string());
            }
            host.cgroup_version = podman.cgroup_version.clone().or(host.cgroup_version);
            host.cgroup_controllers = Some(podman.cgroup_controllers.clone());
        }
        Ok(host)
    }

    async fn ping(&self) -> Result<(), RuntimeError> {
        self.call("ping the engine", self.docker.ping()).await?;
        Ok(())
    }

    async fn inspect_network(&self, name: &str) -> Result<Option<NetworkInfo>, RuntimeError> {
        let inspected = self.docker.inspect_network(name, None);
        let net = absent_as_none(
            self.call(format!("inspect network {name}"), inspected)
                .await,
        )?;
        Ok(net.map(convert::network_info))
    }

    async fn list_networks(&self, labels: &Labels) -> Result<Vec<NetworkInfo>, RuntimeError> {
        let options = ListNetworksOptionsBuilder::default()
            .filters(&Self::label_filters(labels))
            .build();
        let nets = self
            .call("list networks", self.docker.list_networks(Some(options)))
            .await?;
        Ok(nets.into_iter().map(convert::network_summary).collect())
    }

    async fn create_network(&self, spec: &NetworkSpec) -> Result<String, RuntimeError> {
        let created = self.docker.create_network(convert::network_request(spec));
        let resp = self
            .call(format!("create network {}", spec.name), created)
            .await?;
        Ok(resp.id)
    }

    async fn remove_network(&self, name: &str) -> Result<(), RuntimeError> {
        let removed = self.docker.remove_network(name);
        absent_as_none(self.call(format!("remove network {name}"), removed).await)?;
        Ok(())
    }

    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError> {
        let inspected = self.docker.inspect_image(image);
        let found = absent_as_none(self.call(format!("inspect image {image}"), inspected).await)?;
        Ok(found.is_some())
    }

    async fn pull_image(&self, image: &str) -> Result<(), RuntimeError> {
        let action = format!("pull image {image}");
        let options = CreateImageOptionsBuilder::default()
            .from_image(image)
            .build();
        let mut stream = self.docker.create_image(Some(options), None, None);
        // A pull may take long; it fails only when the engine stops reporting progress.
        loop {
            let progress = match tokio::time::timeout(self.request_timeout, stream.next()).await {
                Ok(Some(progress)) => progress.map_err(self.err(action.clone()))?,
                Ok(None) => return Ok(()),
                Err(_) => return Err(convert::unanswered(action, self.request_timeout)),
            };
            if let Some(detail) = progress.error_detail {
                let message = detail
                    .message
                    .unwrap_or_else(|| "unknown error".to_string());
                return Err(RuntimeError::from_status(action, 500, message));
            }
        }
    }

    async fn run_container(&self, spec: &ContainerSpec) -> Result<String, RuntimeError> {
        let options = CreateContainerOptionsBuilder::default()
            .name(&spec.name)
            .build();
        let create = self.docker.create_container(
            Some(options),
            convert::container_body(spec, self.allow_privileged),
        );
        let created = self
            .call(format!("create container {}", spec.name), create)
            .await?;
        let start = self.docker.start_container(&created.id, None);
        if let Err(start_err) = self
            .call(format!("start container {}", spec.name), start)
            .await
        {
            if let Err(cleanup) = self.remove_quietly(&created.id).await {
                tracing::warn!(container = %spec.name, error = %cleanup, "Removing a container that failed to start failed");
            }
            return Err(start_err);
        }
        Ok(created.id)
    }

    async fn inspect_container(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError> {
        let found = absent_as_none(
            self.read_states(format!("inspect container {name}"), || {
                self.docker.inspect_container(name, None)
            })
            .await,
        )?;
        Ok(found.map(convert::container_info))
    }

    async fn list_containers(
        &self,
        labels: &Labels,
    ) -> Result<Vec<ContainerSummary>, RuntimeError> {
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&Self::label_filters(labels))
            .build();
        let list = self
            .read_states("list containers", || {
                self.docker.list_containers(Some(options.clone()))
            })
            .await?;
        Ok(list.into_iter().map(convert::container_summary).collect())
    }

    async fn exec(
        &self,
        container: &str,
        request: &ExecRequest,
    ) -> Result<ExecOutput, RuntimeError> {
        exec::run(
            &self.docker,
            self.request_timeout,
            self.allow_privileged,
            container,
            request,
        )
        .await
    }

    async fn kill_container(&self, name: &str, signal: &str) -> Result<(), RuntimeError> {
        let options = KillContainerOptionsBuilder::default()
            .signal(signal)
            .build();
        let killed = self.docker.kill_container(name, Some(options));
        self.call(format!("send {signal} to container {name}"), killed)
            .await
    }

    async fn delete_container(&self, name: &str) -> Result<Removal, RuntimeError> {
        self.remove_quietly(name).await
    }

    async fn container_logs(&self, name: &str) -> Result<String, RuntimeError> {
        let action = format!("read logs of container {name}");
        let options = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .build();
        // Not followed: the stream ends with what the container wrote so far.
        let read = async {
            let mut stream = self.docker.logs(name, Some(options));
            let mut text = Vec::new();
            while let Some(chunk) = stream.next().await {
                text.extend_from_slice(chunk?.as_ref());
            }
            Ok(text)
        };
        let text = self.call(action, read).await?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    }

    async fn follow_logs(
        &self,
        name: &str,
        matches: &LineMatch,
        timeout: Duration,
    ) -> Result<bool, RuntimeError> {
        let action = format!("follow logs of container {name}");
        let options = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .follow(true)
            .build();
        let follow = async {
            let mut stream = self.docker.logs(name, Some(options));
            let mut pending = Vec::new();
            while let Some(chunk) = stream.next().await {
                pending.extend_from_slice(chunk.map_err(self.err(action.clone()))?.as_ref());
                if complete_lines_match(&mut pending, matches) {
                    return Ok(true);
                }
            }
            // The output ended (the container stopped): its last line may lack a newline.
            Ok::<_, RuntimeError>(String::from_utf8_lossy(&pending).lines().any(matches))
        };
        tokio::time::timeout(timeout, follow)
            .await
            .unwrap_or(Ok(false))
    }

    async fn start_container(&self, name: &str) -> Result<(), RuntimeError> {
        // The engine answers 304 Not Modified for a running container, which bollard counts
        // as success.
        let started = self.docker.start_container(name, None);
        self.call(format!("start container {name}"), started).await
    }
}

/// Whether one of the complete lines in `pending` satisfies `matches`; they are taken out, and
/// what follows the last newline stays for the next chunk of output.
fn complete_lines_match(pending: &mut Vec<u8>, matches: &LineMatch) -> bool {
    let Some(end) = pending.iter().rposition(|b| *b == b'\n') else {
        return false;
    };
    let complete: Vec<u8> = pending.drain(..=end).collect();
    String::from_utf8_lossy(&complete).lines().any(matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_split_across_chunks_of_output_is_matched_once_complete() {
        let matches = |line: &str| line == "[  OK  ] Reached target Multi-User System.";
        let mut pending = b"booting\r\n[  OK  ] Reached tar".to_vec();
        assert!(!complete_lines_match(&mut pending, &matches));
        assert_eq!(pending, b"[  OK  ] Reached tar", "the partial line is kept");
        pending.extend_from_slice(b"get Multi-User System.");
        assert!(
            !complete_lines_match(&mut pending, &matches),
            "a line is judged only once it ends"
        );
        pending.extend_from_slice(b"\r\nmore");
        assert!(complete_lines_match(&mut pending, &matches));
    }

    fn address(vars: &[(&str, &str)]) -> Result<EngineAddress, RuntimeError> {
        EngineAddress::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_string())
        })
    }

    #[test]
    fn the_environment_is_read_as_the_docker_cli_reads_it() {
        assert_eq!(
            address(&[]).unwrap(),
            EngineAddress {
                host: DEFAULT_DOCKER_HOST.into(),
                tls: None
            }
        );
        assert_eq!(
            address(&[
                ("DOCKER_HOST", "tcp://10.0.0.1:2376"),
                ("DOCKER_TLS_VERIFY", "")
            ])
            .unwrap()
            .tls,
            None,
            "an empty DOCKER_TLS_VERIFY means no TLS"
        );
        let tls = address(&[
            ("DOCKER_HOST", "tcp://10.0.0.1:2376"),
            ("DOCKER_TLS_VERIFY", "1"),
            ("DOCKER_CERT_PATH", "/certs"),
            ("HOME", "/root"),
        ])
        .unwrap();
        assert_eq!(tls.host, "tcp://10.0.0.1:2376");
        assert_eq!(
            tls.tls,
            Some(TlsFiles {
                ca: "/certs/ca.pem".into(),
                cert: "/certs/cert.pem".into(),
                key: "/certs/key.pem".into(),
            })
        );
        let home = address(&[("DOCKER_TLS_VERIFY", "1"), ("HOME", "/home/me")]).unwrap();
        assert_eq!(
            home.tls.map(|t| t.ca),
            Some(PathBuf::from("/home/me/.docker/ca.pem"))
        );
    }

    #[test]
    fn tls_settings_that_cannot_be_honoured_are_refused_with_the_reason() {
        let err = address(&[("DOCKER_HOST", "tcp://h:2376"), ("DOCKER_TLS", "1")]).unwrap_err();
        assert_eq!(err.category(), "connect");
        let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(chain.contains("set DOCKER_TLS_VERIFY=1"), "{chain}");
        let err = address(&[("DOCKER_TLS_VERIFY", "1")]).unwrap_err();
        let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(
            chain.contains("neither DOCKER_CERT_PATH nor HOME"),
            "{chain}"
        );
    }
}
