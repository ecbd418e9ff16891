//! The errors of node container operations, shared by the operations and the address readers.

use std::time::Duration;

use crate::docker::runtime::RuntimeError;

/// Errors of node container operations.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The cluster's pod/service CIDRs are not usable.
    #[error("read the cluster network: {detail}")]
    InvalidClusterNetwork {
        /// What is wrong.
        detail: String,
    },
    /// The container has no address of a family the cluster needs.
    #[error("read addresses of container {container}: no {family} address")]
    MissingAddress {
        /// Container name.
        container: String,
        /// `IPv4` or `IPv6`.
        family: String,
    },
    /// The container is not attached to the provider's network.
    #[error("read addresses of container {container}: not attached to network {network}")]
    NotOnNetwork {
        /// Container name.
        container: String,
        /// Network name.
        network: String,
    },
    /// The container does not exist.
    #[error("find container {container}: not found")]
    NotFound {
        /// Container name.
        container: String,
    },
    /// Several containers of the cluster carry the same name.
    #[error("find container {container}: {count} containers match in cluster {cluster}")]
    Ambiguous {
        /// Cluster name.
        cluster: String,
        /// Container name.
        container: String,
        /// Number of matches.
        count: usize,
    },
    /// The engine failed an operation on a container.
    #[error("{action} container {container}")]
    Runtime {
        /// What was being done (`run`, `inspect`, `delete`, `list`, ...).
        action: &'static str,
        /// Container (or cluster, for listings) name.
        container: String,
        /// Engine error.
        #[source]
        source: RuntimeError,
    },
    /// The node image is not available.
    #[error("prepare image {image}")]
    Image {
        /// Image reference.
        image: String,
        /// Why.
        #[source]
        source: RuntimeError,
    },
    /// A command could not be run.
    #[error("{action} in container {container}")]
    Exec {
        /// What the command does.
        action: String,
        /// Container name.
        container: String,
        /// Engine error.
        #[source]
        source: RuntimeError,
    },
    /// A command ran and failed.
    #[error("{action} in container {container}: exited with status {exit_code}: {output}")]
    CommandFailed {
        /// What the command does.
        action: String,
        /// Container name.
        container: String,
        /// Exit code.
        exit_code: i64,
        /// Tail of stdout and stderr.
        output: String,
    },
    /// A wait ran out of time.
    #[error("wait for {what} in container {container}: timed out after {timeout:?}")]
    WaitTimeout {
        /// What was awaited.
        what: String,
        /// Container name.
        container: String,
        /// The limit.
        timeout: Duration,
    },
}

impl NodeError {
    /// A short stable word for metric labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::InvalidClusterNetwork { .. } => "invalid_cluster_network",
            Self::MissingAddress { .. } | Self::NotOnNetwork { .. } => "missing_address",
            Self::NotFound { .. } => "container_not_found",
            Self::Ambiguous { .. } => "container_ambiguous",
            Self::Runtime { .. } => "runtime",
            Self::Image { .. } => "image_unavailable",
            Self::Exec { .. } => "exec",
            Self::CommandFailed { .. } => "command_failed",
            Self::WaitTimeout { .. } => "wait_timeout",
        }
    }
}
