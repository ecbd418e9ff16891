//! The error type shared by the controllers, with a stable [`Error::category`] for metric labels
//! and Event reasons.

use kube::runtime::finalizer;

use crate::api::capi::CapiError;
use crate::docker::kind::KindError;
use crate::docker::loadbalancer::LoadBalancerError;
use crate::docker::network::NetworkError;
use crate::docker::node::NodeError;
use crate::docker::{DOCKER_UNREACHABLE, Removal, RuntimeError, caused_by_unreachable_engine};

/// Why a reconcile failed. Every variant is transient from the controller's point of view: the
/// object is retried with a per-object backoff. Terminal machine failures are not errors; they are
/// recorded in conditions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the management cluster's API server failed.
    #[error("{action}")]
    Kube {
        /// What was being done, e.g. `patch status of DockerCluster ns/name`.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A call to the container engine failed.
    #[error("{action}")]
    Runtime {
        /// What was being done.
        action: String,
        /// The engine error.
        #[source]
        source: RuntimeError,
    },
    /// A node container operation failed.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// Ensuring or deleting the Docker network failed.
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// A load balancer operation failed.
    #[error(transparent)]
    LoadBalancer(#[from] LoadBalancerError),
    /// No node image fits the Machine's Kubernetes version.
    #[error("choose the node image")]
    NodeImage(#[source] KindError),
    /// A Cluster API object could not be decoded (its content does not fit the schema we read).
    #[error("decode {kind} {namespace}/{name}: {detail}")]
    InvalidObject {
        /// Kind of the object.
        kind: &'static str,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The decoder's complaint.
        detail: String,
    },
    /// The Cluster's pod or service CIDR blocks do not give a usable IP family.
    #[error("read the IP family of Cluster {namespace}/{name}")]
    ClusterNetwork {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: CapiError,
    },
    /// The load balancer has no address on the provider network yet.
    #[error("read the address of load balancer container {container} on network {network}")]
    LoadBalancerAddress {
        /// Container name.
        container: String,
        /// Network name.
        network: String,
    },
    /// The custom haproxy template ConfigMap lacks the `value` key.
    #[error("read haproxy template ConfigMap {namespace}/{name}: no key \"value\"")]
    HaproxyTemplateKey {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// Something must finish before the object can move on (used by cleanup, which must not
    /// report success before the infrastructure is really gone).
    #[error("wait for {what}")]
    NotFinished {
        /// What is still in progress.
        what: String,
    },
    /// The workload cluster's API server could not be used.
    #[error("{action} in workload cluster {namespace}/{cluster}")]
    Workload {
        /// What was being done.
        action: String,
        /// Namespace of the Cluster.
        namespace: String,
        /// Cluster name.
        cluster: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A fake workload cluster of the in-memory backend could not be made or served.
    #[error("{action} for fake cluster {cluster}")]
    InMemory {
        /// What was being done.
        action: String,
        /// `<namespace>/<cluster>`.
        cluster: String,
        /// Why.
        #[source]
        source: crate::inmemory::InMemoryError,
    },
    /// A fake workload cluster refused a write.
    #[error("{action} in fake cluster {cluster}")]
    FakeCluster {
        /// What was being done.
        action: String,
        /// `<namespace>/<cluster>`.
        cluster: String,
        /// Why.
        #[source]
        source: crate::inmemory::StoreError,
    },
    /// A reconcile took longer than its limit and was abandoned (CAPD: 6 minutes).
    #[error("finish the reconcile within {seconds}s")]
    ReconcileTimeout {
        /// The limit.
        seconds: u64,
    },
    /// The kube finalizer helper failed (wraps the reconcile error or the finalizer patch error).
    #[error(transparent)]
    Finalizer(Box<finalizer::Error<Error>>),
}

impl Error {
    /// Builds a [`Error::Kube`] mapper for `map_err`.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }

    /// Builds a [`Error::Runtime`] mapper for `map_err`.
    pub fn runtime(action: impl Into<String>) -> impl FnOnce(RuntimeError) -> Self {
        let action = action.into();
        move |source| Self::Runtime { action, source }
    }

    /// A short stable word for metric labels and Event reasons. Every failure caused by an
    /// engine that cannot be reached is [`DOCKER_UNREACHABLE`] (Event reason
    /// `DockerUnreachable`), whichever step it stopped.
    pub fn category(&self) -> &'static str {
        if caused_by_unreachable_engine(self) {
            return DOCKER_UNREACHABLE;
        }
        match self {
            Self::Kube { source, .. } => kube_category(source),
            Self::Runtime { source, .. } => source.category(),
            Self::Node(e) => e.category(),
            Self::Network(e) => e.category(),
            Self::LoadBalancer(e) => e.category(),
            Self::NodeImage(e) => e.category(),
            Self::InvalidObject { .. } => "invalid_object",
            Self::ClusterNetwork { .. } => "invalid_cluster_network",
            Self::LoadBalancerAddress { .. } => "load_balancer_address",
            Self::HaproxyTemplateKey { .. } => "haproxy_template",
            Self::NotFinished { .. } => "not_finished",
            Self::Workload { .. } => "workload_cluster",
            Self::InMemory { source, .. } => source.category(),
            Self::FakeCluster { .. } => "fake_cluster",
            Self::ReconcileTimeout { .. } => "reconcile_timeout",
            Self::Finalizer(e) => match e.as_ref() {
                finalizer::Error::ApplyFailed(inner) | finalizer::Error::CleanupFailed(inner) => {
                    inner.category()
                }
                finalizer::Error::AddFinalizer(source)
                | finalizer::Error::RemoveFinalizer(source) => kube_category(source),
                finalizer::Error::UnnamedObject | finalizer::Error::InvalidFinalizer => "finalizer",
            },
        }
    }

    /// How long the API server asked us to wait before trying again (`Retry-After`, as
    /// `details.retryAfterSeconds` of the error Status), when it did. kube's client already
    /// honours it for the 429s, 503s and 504s it retries itself; this covers the answers it gives
    /// up on or does not retry (a 500 "please try again later").
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        let source = match self.inner() {
            Self::Kube { source, .. } => source,
            Self::Finalizer(e) => match e.as_ref() {
                finalizer::Error::AddFinalizer(source)
                | finalizer::Error::RemoveFinalizer(source) => source,
                _ => return None,
            },
            _ => return None,
        };
        match source {
            kube::Error::Api(status) => status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|seconds| *seconds > 0)
                .map(|seconds| std::time::Duration::from_secs(u64::from(seconds))),
            _ => None,
        }
    }

    /// The innermost controller error (unwraps the finalizer helper's wrapping).
    pub fn inner(&self) -> &Error {
        match self {
            Self::Finalizer(e) => match e.as_ref() {
                finalizer::Error::ApplyFailed(inner) | finalizer::Error::CleanupFailed(inner) => {
                    inner.inner()
                }
                _ => self,
            },
            _ => self,
        }
    }
}

impl From<finalizer::Error<Error>> for Error {
    fn from(error: finalizer::Error<Error>) -> Self {
        Self::Finalizer(Box::new(error))
    }
}

/// `Ok` when a removal left `container` gone; [`Error::NotFinished`] while another removal of it
/// is still in progress, so that cleanup does not report success (and release its finalizer)
/// before the container is really gone.
///
/// # Errors
/// [`Error::NotFinished`] for [`Removal::InProgress`].
pub fn removed(removal: Removal, container: impl std::fmt::Display) -> Result<()> {
    match removal {
        Removal::Gone => Ok(()),
        Removal::InProgress => Err(Error::NotFinished {
            what: format!("{container} to be removed"),
        }),
    }
}

/// Category of a Kubernetes client error. Conflicts (409) and invalid patches (422, which the
/// finalizer helper's JSON patch test gets when another controller edited the finalizers at the
/// same time) are transient and retried like any other error.
pub fn kube_category(error: &kube::Error) -> &'static str {
    match error {
        kube::Error::Api(status) => match status.code {
            404 => "not_found",
            409 => "conflict",
            422 => "invalid",
            401 | 403 => "forbidden",
            429 => "throttled",
            500..=599 => "apiserver_error",
            _ => "kube_api",
        },
        kube::Error::SerdeError(_) => "decode",
        _ => "kube_transport",
    }
}

/// Whether a client error says the object does not exist.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Maps the finalizer helper's error: a finalizer removal that finds the object gone means a
/// previous reconcile finished the deletion (this one ran on a cached copy), which is success.
pub fn finalizer_gone(error: finalizer::Error<Error>) -> Result<kube::runtime::controller::Action> {
    match error {
        finalizer::Error::RemoveFinalizer(source) if is_not_found(&source) => {
            Ok(kube::runtime::controller::Action::await_change())
        }
        other => Err(Error::from(other)),
    }
}

/// How long one reconcile may take before it is abandoned and retried (CAPD's
/// `ReconciliationTimeout` of the DockerMachine controller).
pub const RECONCILE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(6 * 60);

/// Runs a reconcile with [`RECONCILE_TIMEOUT`].
pub async fn with_timeout<T>(reconcile: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(RECONCILE_TIMEOUT, reconcile)
        .await
        .unwrap_or(Err(Error::ReconcileTimeout {
            seconds: RECONCILE_TIMEOUT.as_secs(),
        }))
}

/// Result of controller operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removal_still_in_progress_is_not_finished() {
        assert!(removed(Removal::Gone, "container c1-m1").is_ok());
        let err = removed(Removal::InProgress, "container c1-m1").unwrap_err();
        assert!(matches!(err, Error::NotFinished { .. }));
        assert_eq!(err.to_string(), "wait for container c1-m1 to be removed");
    }

    #[test]
    fn categories_are_stable_words() {
        let err = Error::NotFinished {
            what: "container x to stop".into(),
        };
        assert_eq!(err.category(), "not_finished");
        assert_eq!(err.to_string(), "wait for container x to stop");
        let wrapped = Error::from(finalizer::Error::CleanupFailed(err));
        assert_eq!(wrapped.category(), "not_finished");
        assert!(matches!(wrapped.inner(), Error::NotFinished { .. }));
    }

    #[test]
    fn a_retry_after_from_the_api_server_is_read_through_the_finalizer_wrapping() {
        let throttled = |seconds| {
            let mut status =
                kube::core::Status::failure("try later", "InternalError").with_code(500);
            status.details = serde_json::from_value(serde_json::json!({
                "retryAfterSeconds": seconds
            }))
            .ok();
            kube::Error::Api(Box::new(status))
        };
        let direct = Error::kube("patch status")(throttled(7));
        assert_eq!(
            direct.retry_after(),
            Some(std::time::Duration::from_secs(7))
        );
        let wrapped = Error::from(finalizer::Error::ApplyFailed(Error::kube("get")(
            throttled(3),
        )));
        assert_eq!(
            wrapped.retry_after(),
            Some(std::time::Duration::from_secs(3))
        );
        let finalizer = Error::from(finalizer::Error::<Error>::AddFinalizer(throttled(2)));
        assert_eq!(
            finalizer.retry_after(),
            Some(std::time::Duration::from_secs(2))
        );
        assert_eq!(Error::kube("get")(throttled(0)).retry_after(), None);
        let other = Error::NotFinished {
            what: "container x to stop".into(),
        };
        assert_eq!(other.retry_after(), None);
    }

    #[test]
    fn every_step_stopped_by_an_unreachable_engine_has_one_category() {
        use crate::docker::node::NodeError;
        let unreachable = || RuntimeError::Unreachable {
            action: "list containers".into(),
            source: "connection refused".into(),
        };
        let node = Error::Node(NodeError::Runtime {
            action: "find",
            container: "c1".into(),
            source: unreachable(),
        });
        assert_eq!(node.category(), "docker_unreachable");
        let in_cleanup = Error::from(finalizer::Error::CleanupFailed(Error::runtime(
            "delete container c1",
        )(unreachable())));
        assert_eq!(in_cleanup.category(), "docker_unreachable");
        assert_eq!(
            crate::controllers::context::event_reason(in_cleanup.category()),
            "DockerUnreachable"
        );
        let answered = Error::Node(NodeError::Runtime {
            action: "find",
            container: "c1".into(),
            source: RuntimeError::from_status("list containers", 500, "boom"),
        });
        assert_eq!(answered.category(), "runtime");
    }

    #[test]
    fn unprocessable_finalizer_patches_are_transient_invalid() {
        let status = kube::core::Status::failure("test failed", "Invalid").with_code(422);
        let err = Error::from(finalizer::Error::<Error>::AddFinalizer(kube::Error::Api(
            Box::new(status),
        )));
        assert_eq!(err.category(), "invalid");
    }
}
