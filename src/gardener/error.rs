//! Errors of the Gardener infrastructure controller, with their Gardener error codes.

use super::config::ConfigErrors;
use super::operation::{
    ERR_CONFIGURATION_PROBLEM, ERR_INFRA_RESOURCES_DEPLETED, ERR_RETRYABLE_INFRA_DEPENDENCIES,
};
use crate::docker::network::NetworkError;
use crate::docker::{DOCKER_UNREACHABLE, RuntimeError, caused_by_unreachable_engine};

/// Why a reconcile of an `Infrastructure` failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `spec.providerConfig` is invalid.
    #[error("invalid providerConfig")]
    InvalidConfig(#[source] ConfigErrors),
    /// The configured network exists but does not match the configuration.
    #[error("network {name} does not match the providerConfig: {}", problems.join("; "))]
    NetworkMismatch {
        /// Network name.
        name: String,
        /// Each difference.
        problems: Vec<String>,
    },
    /// A configured subnet overlaps another Docker network.
    #[error("create network {name}: subnet {subnet} overlaps {}", other.as_deref().map_or("another Docker network".to_string(), |o| format!("Docker network {o}")))]
    SubnetOverlap {
        /// Network name.
        name: String,
        /// The configured subnet.
        subnet: String,
        /// The network already using it, when found.
        other: Option<String>,
    },
    /// IPv6 was asked for but the engine cannot do it.
    #[error(
        "create network {name}: the Docker engine has no IPv6 support (enable it in the daemon or turn ipv6 off)"
    )]
    Ipv6Unavailable {
        /// Network name.
        name: String,
    },
    /// Every derived IPv6 subnet overlaps another network.
    #[error("create network {name}: every derived IPv6 subnet is in use (set networks.ipv6.cidr)")]
    Ipv6Exhausted {
        /// Network name.
        name: String,
    },
    /// Containers still use the network to delete.
    #[error("delete network {name}: still used by {containers} container(s)")]
    NetworkInUse {
        /// Network name.
        name: String,
        /// How many containers are attached.
        containers: usize,
    },
    /// The Docker engine failed.
    #[error("{action}")]
    Docker {
        /// What was being done.
        action: String,
        /// Engine error.
        #[source]
        source: RuntimeError,
    },
    /// A network helper failed.
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// The Kubernetes API failed.
    #[error("{action}")]
    Kube {
        /// What was being done.
        action: String,
        /// API error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A short stable word for metric labels and Event reasons ([`DOCKER_UNREACHABLE`] for
    /// every failure caused by an engine that cannot be reached).
    pub fn category(&self) -> &'static str {
        if caused_by_unreachable_engine(self) {
            return DOCKER_UNREACHABLE;
        }
        match self {
            Self::InvalidConfig(_) => "invalid_config",
            Self::NetworkMismatch { .. } => "network_mismatch",
            Self::SubnetOverlap { .. } => "subnet_overlap",
            Self::Ipv6Unavailable { .. } => "ipv6_unavailable",
            Self::Ipv6Exhausted { .. } => "ipv6_exhausted",
            Self::NetworkInUse { .. } => "network_in_use",
            Self::Docker { source, .. } => source.category(),
            Self::Network(e) => e.category(),
            Self::Kube { .. } => "kube",
        }
    }

    /// Gardener error codes for `status.lastError.codes`.
    pub fn codes(&self) -> &'static [&'static str] {
        match self {
            Self::InvalidConfig(_)
            | Self::NetworkMismatch { .. }
            | Self::SubnetOverlap { .. }
            | Self::Ipv6Unavailable { .. } => &[ERR_CONFIGURATION_PROBLEM],
            Self::Ipv6Exhausted { .. } => &[ERR_INFRA_RESOURCES_DEPLETED],
            Self::NetworkInUse { .. } => &[ERR_RETRYABLE_INFRA_DEPENDENCIES],
            Self::Docker { .. } | Self::Network(_) | Self::Kube { .. } => &[],
        }
    }

    /// Whether only a change of the configuration (or of the Docker engine by hand) fixes it,
    /// so retrying soon is pointless.
    pub fn is_configuration_problem(&self) -> bool {
        self.codes().contains(&ERR_CONFIGURATION_PROBLEM)
    }

    /// Builds a [`Error::Docker`] mapper for `action`.
    pub(crate) fn docker(action: impl Into<String>) -> impl FnOnce(RuntimeError) -> Self {
        let action = action.into();
        move |source| Self::Docker { action, source }
    }

    /// Builds a [`Error::Kube`] mapper for `action`.
    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gardener::config::FieldError;
    use crate::manager::error_chain;

    #[test]
    fn configuration_problems_carry_their_code_and_details() {
        let err = Error::InvalidConfig(ConfigErrors(vec![FieldError {
            field: "providerConfig.networks.cidr".into(),
            message: "\"10.0.0.1/24\" has host bits set: the network address is 10.0.0.0/24".into(),
        }]));
        assert_eq!(err.codes(), &[ERR_CONFIGURATION_PROBLEM]);
        assert!(err.is_configuration_problem());
        assert_eq!(
            error_chain(&err),
            "invalid providerConfig: providerConfig.networks.cidr: \"10.0.0.1/24\" has host bits set: the network address is 10.0.0.0/24"
        );
        let overlap = Error::SubnetOverlap {
            name: "n".into(),
            subnet: "10.1.0.0/24".into(),
            other: Some("kind".into()),
        };
        assert_eq!(
            overlap.to_string(),
            "create network n: subnet 10.1.0.0/24 overlaps Docker network kind"
        );
        assert!(overlap.is_configuration_problem());
    }

    #[test]
    fn engine_failures_are_retried_without_a_code() {
        let err = Error::docker("inspect network n")(RuntimeError::from_status(
            "inspect network n",
            500,
            "boom",
        ));
        assert!(err.codes().is_empty());
        assert!(!err.is_configuration_problem());
        assert_eq!(err.category(), "api");
        let in_use = Error::NetworkInUse {
            name: "n".into(),
            containers: 2,
        };
        assert_eq!(in_use.codes(), &[ERR_RETRYABLE_INFRA_DEPENDENCIES]);
        assert_eq!(
            in_use.to_string(),
            "delete network n: still used by 2 container(s)"
        );
    }
}
