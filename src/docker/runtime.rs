//! The [`ContainerRuntime`] trait: the only door from the provider to a container engine.

use std::time::Duration;

use async_trait::async_trait;

use super::types::{
    ContainerInfo, ContainerSpec, ContainerSummary, Engine, ExecOutput, ExecRequest, HostInfo,
    Labels, NetworkInfo, NetworkSpec,
};

/// A boxed error kept as the source of a [`RuntimeError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A test of one line of a container's output (see [`ContainerRuntime::follow_logs`]).
pub type LineMatch = dyn Fn(&str) -> bool + Send + Sync;

/// The category (metric label, and Event reason `DockerUnreachable`) of every error caused by an
/// engine that cannot be reached, however deep the [`RuntimeError::Unreachable`] is wrapped.
pub const DOCKER_UNREACHABLE: &str = "docker_unreachable";

/// Whether `error` or one of its sources is a [`RuntimeError::Unreachable`]: the error of a
/// step that failed because the engine could not be reached, whatever the step's own error type.
pub fn caused_by_unreachable_engine(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error
            .downcast_ref::<RuntimeError>()
            .is_some_and(RuntimeError::is_unreachable)
        {
            return true;
        }
        next = error.source();
    }
    false
}

/// Operations the provider needs from a container engine, in the provider's words.
///
/// Object safe: controllers hold it as `Arc<dyn ContainerRuntime>`. Lookups of absent objects
/// return `Ok(None)`, and deleting something already gone succeeds.
#[async_trait]
pub trait ContainerRuntime: Send + Sync + std::fmt::Debug {
    /// Which engine serves the API, as read when the client connected (no call).
    fn engine(&self) -> Engine;

    /// Facts about the engine's host (CPU count, memory, storage driver, security options).
    async fn host_info(&self) -> Result<HostInfo, RuntimeError>;

    /// Asks the engine whether it answers (the cheapest request it serves: `GET /_ping`).
    async fn ping(&self) -> Result<(), RuntimeError>;

    /// A network by name, or `None` when absent.
    async fn inspect_network(&self, name: &str) -> Result<Option<NetworkInfo>, RuntimeError>;

    /// Networks carrying all of `labels` (all networks when empty).
    async fn list_networks(&self, labels: &Labels) -> Result<Vec<NetworkInfo>, RuntimeError>;

    /// Creates a network and returns its id.
    async fn create_network(&self, spec: &NetworkSpec) -> Result<String, RuntimeError>;

    /// Removes a network; succeeds when it is already absent.
    async fn remove_network(&self, name: &str) -> Result<(), RuntimeError>;

    /// Whether an image is present locally.
    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError>;

    /// Pulls an image from its registry, draining the progress stream.
    async fn pull_image(&self, image: &str) -> Result<(), RuntimeError>;

    /// Creates and starts a container and returns its id. The image must be present.
    /// If the start fails the container is removed (with its anonymous volumes) before the error
    /// is returned, so a failed run leaves nothing behind.
    async fn run_container(&self, spec: &ContainerSpec) -> Result<String, RuntimeError>;

    /// A container by name or id, or `None` when absent.
    async fn inspect_container(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError>;

    /// Containers, running or not, carrying all of `labels`.
    async fn list_containers(&self, labels: &Labels)
    -> Result<Vec<ContainerSummary>, RuntimeError>;

    /// Runs a command in a running container and returns once the process has ended.
    /// A non-zero exit code is not an error here: callers decide with [`ExecOutput::success`].
    /// After [`ExecRequest::timeout`] the call fails with [`RuntimeError::Timeout`]; the engine
    /// offers no way to stop an exec, so the process may still run in the container then.
    async fn exec(
        &self,
        container: &str,
        request: &ExecRequest,
    ) -> Result<ExecOutput, RuntimeError>;

    /// Sends a signal (for example `SIGHUP`) to a container's main process.
    async fn kill_container(&self, name: &str, signal: &str) -> Result<(), RuntimeError>;

    /// Removes a container by force with its anonymous volumes; succeeds when it is already
    /// absent, and says whether it is gone or another removal of it is still in progress.
    async fn delete_container(&self, name: &str) -> Result<Removal, RuntimeError>;

    /// Everything the container wrote to stdout and stderr so far, as text.
    async fn container_logs(&self, name: &str) -> Result<String, RuntimeError>;

    /// Follows what the container writes to stdout and stderr, from its start, until a line
    /// satisfies `matches` (`true`): one request, answered as soon as the line is written.
    /// `false` when the output ended (the container stopped) or `timeout` passed without such a
    /// line.
    async fn follow_logs(
        &self,
        name: &str,
        matches: &LineMatch,
        timeout: Duration,
    ) -> Result<bool, RuntimeError>;

    /// Starts an existing, stopped container again with its configuration, volumes and network
    /// endpoints (`docker start`); succeeds when it already runs.
    async fn start_container(&self, name: &str) -> Result<(), RuntimeError>;
}

/// What a request to remove a container found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The container is gone: removed now, or absent already.
    Gone,
    /// Another removal of the container is in progress; it is still there for now.
    InProgress,
}

/// Errors of the container runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The engine could not be reached or configured.
    #[error("connect to the container engine at {host}")]
    Connect {
        /// Engine address.
        host: String,
        /// Underlying error.
        #[source]
        source: BoxError,
    },
    /// The engine answered that the object does not exist.
    #[error("{action}: not found: {message}")]
    NotFound {
        /// What was being done.
        action: String,
        /// Engine message.
        message: String,
    },
    /// The engine answered with a conflict (name in use, container not running, ...).
    #[error("{action}: conflict: {message}")]
    Conflict {
        /// What was being done.
        action: String,
        /// Engine message.
        message: String,
    },
    /// The engine refused the request.
    #[error("{action}: engine answered {status}: {message}")]
    Api {
        /// What was being done.
        action: String,
        /// HTTP status code.
        status: u16,
        /// Engine message.
        message: String,
    },
    /// The engine could not be reached: the connection was refused or cut, or no answer came
    /// within the request timeout. The engine may be down, restarting or hung.
    #[error("{action}: the Docker engine cannot be reached")]
    Unreachable {
        /// What was being done.
        action: String,
        /// Underlying error.
        #[source]
        source: BoxError,
    },
    /// The request failed on the way to or from the engine for another reason (a request that
    /// cannot be built, an answer that cannot be decoded).
    #[error("{action}")]
    Transport {
        /// What was being done.
        action: String,
        /// Underlying error.
        #[source]
        source: BoxError,
    },
    /// An image is neither present locally nor pullable.
    #[error("image {image} not found locally and pull failed")]
    ImageUnavailable {
        /// Image reference.
        image: String,
        /// Why the pull failed.
        #[source]
        source: Box<RuntimeError>,
    },
    /// An operation did not finish in time.
    #[error("{action}: timed out after {timeout:?}")]
    Timeout {
        /// What was being done.
        action: String,
        /// The limit that was reached.
        timeout: Duration,
    },
    /// A local file could not be read or written.
    #[error("{action}")]
    Io {
        /// What was being done.
        action: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The engine answered something the provider cannot use.
    #[error("{action}: unexpected answer from the engine: {detail}")]
    InvalidResponse {
        /// What was being done.
        action: String,
        /// What was wrong.
        detail: String,
    },
}

impl RuntimeError {
    /// A short stable word for metric labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Connect { .. } => "connect",
            Self::NotFound { .. } => "not_found",
            Self::Conflict { .. } => "conflict",
            Self::Api { .. } => "api",
            Self::Unreachable { .. } => DOCKER_UNREACHABLE,
            Self::Transport { .. } => "transport",
            Self::ImageUnavailable { .. } => "image_unavailable",
            Self::Timeout { .. } => "timeout",
            Self::Io { .. } => "io",
            Self::InvalidResponse { .. } => "invalid_response",
        }
    }

    /// Whether the engine could not be reached (see [`RuntimeError::Unreachable`]).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }

    /// Whether the engine said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// Whether the engine reported a conflict (for example a name already in use).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }

    /// The engine's own message, when it sent one.
    pub fn engine_message(&self) -> Option<&str> {
        match self {
            Self::NotFound { message, .. }
            | Self::Conflict { message, .. }
            | Self::Api { message, .. } => Some(message),
            _ => None,
        }
    }

    /// Whether a network could not be created because its subnet overlaps another one.
    pub fn is_pool_overlap(&self) -> bool {
        self.engine_message().is_some_and(|m| {
            m.contains("Pool overlaps with other one on this address space")
                || m.contains("networks have overlapping")
                // Podman's words.
                || m.contains("is already used on the host or by another config")
        })
    }

    /// Whether a container could not start because a host port it publishes is taken (Docker's
    /// port allocator, or the bind of its proxy: Docker's and Podman's words).
    pub fn is_host_port_taken(&self) -> bool {
        self.engine_message().is_some_and(|m| {
            m.contains("port is already allocated") || m.contains("bind: address already in use")
        })
    }

    /// Whether a container could not start because an address it asks for is taken (Docker's
    /// and Podman's IPAM).
    pub fn is_address_taken(&self) -> bool {
        self.engine_message().is_some_and(|m| {
            m.contains("Address already in use") || m.contains("is already allocated to container")
        })
    }

    /// Whether a network could not be created because the engine has no IPv6 support.
    pub fn is_ipv6_unavailable(&self) -> bool {
        self.engine_message().is_some_and(|m| {
            m.contains("Cannot read IPv6 setup for bridge")
                || m.contains("IPv6 is disabled")
                || m.contains("could not find an available, non-overlapping IPv6 address pool")
        })
    }

    /// Builds the error for an engine HTTP answer, mapping 404 and 409 to their own variants.
    /// Podman answers a name already taken (by a container or a network) with 500 and its own
    /// words, where Docker answers 409: that is a conflict too.
    pub fn from_status(action: impl Into<String>, status: u16, message: impl Into<String>) -> Self {
        const PODMAN_NAME_TAKEN: [&str; 2] =
            ["that name is already in use", "network already exists"];
        let action = action.into();
        let message = message.into();
        match status {
            404 => Self::NotFound { action, message },
            409 => Self::Conflict { action, message },
            500 if PODMAN_NAME_TAKEN.iter().any(|m| message.contains(m)) => {
                Self::Conflict { action, message }
            }
            _ => Self::Api {
                action,
                status,
                message,
            },
        }
    }
}

/// Makes sure `image` is present locally: an image already present is never pulled.
///
/// # Errors
/// [`RuntimeError::ImageUnavailable`] when the image is absent and the pull fails.
pub async fn ensure_image(runtime: &dyn ContainerRuntime, image: &str) -> Result<(), RuntimeError> {
    if runtime.image_exists(image).await? {
        return Ok(());
    }
    runtime
        .pull_image(image)
        .await
        .map_err(|source| RuntimeError::ImageUnavailable {
            image: image.to_string(),
            source: Box::new(source),
        })
}

/// Why [`run_from_image`] could not run a container.
#[derive(Debug)]
pub enum RunFailure {
    /// Its image is neither present nor pullable ([`RuntimeError::ImageUnavailable`]).
    Image(RuntimeError),
    /// The engine refused to create or start it.
    Container(RuntimeError),
}

/// Creates and starts the container of `spec`; returns its id. The image is asked for only when
/// the engine does not find something the container needs: then it is pulled when absent
/// ([`ensure_image`]), and the container is run once more. An image already present costs no
/// call of its own.
///
/// # Errors
/// [`RunFailure`] says whether the image or the container failed.
pub async fn run_from_image(
    runtime: &dyn ContainerRuntime,
    spec: &ContainerSpec,
) -> Result<String, RunFailure> {
    match runtime.run_container(spec).await {
        Err(e) if e.is_not_found() => {
            ensure_image(runtime, &spec.image)
                .await
                .map_err(RunFailure::Image)?;
            runtime
                .run_container(spec)
                .await
                .map_err(RunFailure::Container)
        }
        run => run.map_err(RunFailure::Container),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_statuses_map_to_variants() {
        assert!(
            RuntimeError::from_status("inspect container x", 404, "No such container")
                .is_not_found()
        );
        assert!(RuntimeError::from_status("create container x", 409, "name in use").is_conflict());
        // Podman's answers, as its 4.3 service gives them.
        let podman_container = "container create: creating container storage: the container name \"x\" is already in use by 8675. You have to remove that container to be able to reuse that name: that name is already in use";
        assert!(
            RuntimeError::from_status("create container x", 500, podman_container).is_conflict()
        );
        let podman_network = "network name kind already used: network already exists";
        assert!(
            RuntimeError::from_status("create network kind", 500, podman_network).is_conflict()
        );
        assert!(!RuntimeError::from_status("create network kind", 500, "no space").is_conflict());
        let podman_overlap =
            "subnet 10.213.5.0/24 is already used on the host or by another config";
        assert!(
            RuntimeError::from_status("create network kind", 500, podman_overlap).is_pool_overlap()
        );
        let err = RuntimeError::from_status(
            "create network n",
            403,
            "Pool overlaps with other one on this address space",
        );
        assert!(err.is_pool_overlap());
        assert_eq!(err.category(), "api");
        assert_eq!(
            err.to_string(),
            "create network n: engine answered 403: Pool overlaps with other one on this address space"
        );
    }

    #[tokio::test]
    async fn runtime_is_object_safe_and_shares_state() {
        let fake = crate::docker::FakeRuntime::new();
        let runtime: std::sync::Arc<dyn ContainerRuntime> = std::sync::Arc::new(fake.clone());
        fake.add_image("img:1");
        assert!(runtime.image_exists("img:1").await.unwrap());
        assert!(format!("{runtime:?}").contains("FakeRuntime"));
    }

    #[tokio::test]
    async fn present_images_are_never_pulled_and_absent_ones_fail_clearly() {
        let fake = crate::docker::FakeRuntime::new();
        fake.add_image("present:1");
        ensure_image(&fake, "present:1").await.unwrap();
        let err = ensure_image(&fake, "absent:1").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "image absent:1 not found locally and pull failed"
        );
        assert_eq!(err.category(), "image_unavailable");
        let pulls: Vec<_> = fake
            .calls()
            .into_iter()
            .filter(|c| matches!(c, crate::docker::fake::Call::PullImage(_)))
            .collect();
        assert_eq!(
            pulls,
            vec![crate::docker::fake::Call::PullImage("absent:1".into())]
        );
        fake.allow_pull("later:1");
        ensure_image(&fake, "later:1").await.unwrap();
        assert!(fake.image_exists("later:1").await.unwrap());
    }

    #[tokio::test]
    async fn a_container_runs_from_a_present_image_without_asking_for_it_and_pulls_an_absent_one() {
        use crate::docker::fake::Call;
        let fake = crate::docker::FakeRuntime::new();
        fake.add_network(NetworkInfo {
            id: "net".into(),
            name: "kind".into(),
            ..Default::default()
        });
        let spec = |name: &str, image: &str| ContainerSpec {
            name: name.into(),
            image: image.into(),
            network: "kind".into(),
            ..Default::default()
        };
        fake.add_image("present:1");
        run_from_image(&fake, &spec("a", "present:1"))
            .await
            .unwrap();
        assert!(
            !fake
                .calls()
                .iter()
                .any(|c| matches!(c, Call::ImageExists(_) | Call::PullImage(_))),
            "{:?}",
            fake.calls()
        );

        fake.allow_pull("later:1");
        run_from_image(&fake, &spec("b", "later:1")).await.unwrap();
        assert!(fake.inspect_container("b").await.unwrap().is_some());
        assert!(fake.calls().contains(&Call::PullImage("later:1".into())));

        let Err(RunFailure::Image(err)) = run_from_image(&fake, &spec("c", "absent:1")).await
        else {
            panic!("an image that cannot be pulled is the image's failure");
        };
        assert_eq!(err.category(), "image_unavailable");
        assert!(fake.inspect_container("c").await.unwrap().is_none());
    }

    #[test]
    fn an_unreachable_engine_is_recognised_however_deep_it_is_wrapped() {
        #[derive(Debug, thiserror::Error)]
        #[error("start node container c1")]
        struct Step(#[source] RuntimeError);

        let unreachable = || RuntimeError::Unreachable {
            action: "inspect container c1".into(),
            source: "connection refused".into(),
        };
        assert_eq!(unreachable().category(), DOCKER_UNREACHABLE);
        assert_eq!(
            unreachable().to_string(),
            "inspect container c1: the Docker engine cannot be reached"
        );
        assert!(caused_by_unreachable_engine(&Step(unreachable())));
        let answered = RuntimeError::from_status("inspect container c1", 500, "boom");
        assert!(!caused_by_unreachable_engine(&Step(answered)));
        let slow_command = RuntimeError::Timeout {
            action: "exec `kubeadm`".into(),
            timeout: Duration::from_secs(60),
        };
        assert!(
            !caused_by_unreachable_engine(&slow_command),
            "a command that outlives its own limit is not an outage"
        );
    }

    #[test]
    fn ipv6_unavailable_is_recognised() {
        let err = RuntimeError::from_status(
            "create network n",
            500,
            "Cannot read IPv6 setup for bridge br-1234: open /proc/sys/net/ipv6: no such file",
        );
        assert!(err.is_ipv6_unavailable());
        assert!(!err.is_pool_overlap());
    }
}
