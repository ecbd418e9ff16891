//! Errors of the Gardener infrastructure controller, with their Gardener error codes: a code
//! is final (`ERR_CONFIGURATION_PROBLEM`, `ERR_INFRA_UNAUTHENTICATED`, `ERR_INFRA_UNAUTHORIZED`:
//! gardenlet stops retrying the shoot) only when nothing but a change of the spec or of the
//! engine's credentials can fix it; what can heal by itself is retryable.

use super::config::ConfigErrors;
use super::operation::{
    ERR_CONFIGURATION_PROBLEM, ERR_INFRA_RESOURCES_DEPLETED, ERR_INFRA_UNAUTHENTICATED,
    ERR_INFRA_UNAUTHORIZED, ERR_RETRYABLE_CONFIGURATION_PROBLEM, ERR_RETRYABLE_INFRA_DEPENDENCIES,
    NON_RETRYABLE_CODES,
};
use crate::docker::network::NetworkError;
use crate::docker::{DOCKER_UNREACHABLE, RuntimeError, caused_by_unreachable_engine};
use crate::runtime::error_chain;

/// Why a reconcile of an `Infrastructure` failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `spec.providerConfig` is invalid.
    #[error("invalid providerConfig")]
    InvalidConfig(#[source] ConfigErrors),
    /// The configured network exists but does not match the configuration.
    #[error("network {name} does not match the providerConfig: {}{}", problems.join("; "), in_use_note(*managed, *attached))]
    NetworkMismatch {
        /// Network name.
        name: String,
        /// Each difference.
        problems: Vec<String>,
        /// Whether we created it for this `Infrastructure` (then it is recreated once unused).
        managed: bool,
        /// How many containers are attached to it.
        attached: usize,
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
        /// Whether that network was created by this provider (for another `Infrastructure`, or
        /// the previous network of this one): a leftover that goes away with its owner.
        other_ours: bool,
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
    /// The Shoot in the shoot namespace's `Cluster` cannot be decoded.
    #[error("decode the Shoot of Cluster {cluster}")]
    ShootUndecodable {
        /// Name of the `Cluster` (the shoot namespace).
        cluster: String,
        /// Decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// The Kubernetes API failed.
    #[error("{action}")]
    Kube {
        /// What was being done.
        action: String,
        /// API error.
        #[source]
        source: kube::Error,
    },
    /// The attempt ran longer than the reconcile timeout and was abandoned.
    #[error("reconcile abandoned after {} s (the reconcile timeout)", .0.as_secs())]
    TimedOut(std::time::Duration),
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
            Self::ShootUndecodable { .. } => "shoot_undecodable",
            Self::SubnetOverlap { .. } => "subnet_overlap",
            Self::Ipv6Unavailable { .. } => "ipv6_unavailable",
            Self::Ipv6Exhausted { .. } => "ipv6_exhausted",
            Self::NetworkInUse { .. } => "network_in_use",
            Self::Docker { source, .. } => source.category(),
            Self::Network(e) => e.category(),
            Self::Kube { .. } => "kube",
            Self::TimedOut(_) => "timeout",
        }
    }

    /// Gardener error codes for `status.lastError.codes`.
    pub fn codes(&self) -> &'static [&'static str] {
        match self {
            Self::InvalidConfig(_) => &[ERR_CONFIGURATION_PROBLEM],
            // Our network in use: recreated to fit once its containers are gone.
            Self::NetworkMismatch {
                managed: true,
                attached: 1..,
                ..
            } => &[ERR_RETRYABLE_CONFIGURATION_PROBLEM],
            Self::NetworkMismatch { .. } => &[ERR_CONFIGURATION_PROBLEM],
            // A leftover of ours goes away with its owner; a foreign network does not.
            Self::SubnetOverlap {
                other_ours: true, ..
            } => &[ERR_RETRYABLE_CONFIGURATION_PROBLEM],
            Self::SubnetOverlap { .. } => &[ERR_CONFIGURATION_PROBLEM],
            // The engine's IPv6 pool is the operator's to set up, not the shoot owner's.
            Self::Ipv6Unavailable { .. } => &[ERR_RETRYABLE_CONFIGURATION_PROBLEM],
            Self::Ipv6Exhausted { .. } => &[ERR_INFRA_RESOURCES_DEPLETED],
            Self::NetworkInUse { .. } => &[ERR_RETRYABLE_INFRA_DEPENDENCIES],
            Self::Docker { .. } | Self::Network(_) => match engine_refusal(self) {
                Some(Refusal::Unauthenticated) => &[ERR_INFRA_UNAUTHENTICATED],
                Some(Refusal::Unauthorized) => &[ERR_INFRA_UNAUTHORIZED],
                None => &[],
            },
            Self::ShootUndecodable { .. } | Self::Kube { .. } | Self::TimedOut(_) => &[],
        }
    }

    /// Whether one of its codes says retrying cannot help (Gardener's
    /// `HasNonRetryableErrorCode`), so retrying soon is pointless.
    pub fn is_permanent(&self) -> bool {
        self.codes()
            .iter()
            .any(|code| NON_RETRYABLE_CODES.contains(code))
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

/// The note on a network mismatch saying why it is not fixed now.
fn in_use_note(managed: bool, attached: usize) -> String {
    if managed && attached > 0 {
        format!(" (recreated once its {attached} container(s) are gone)")
    } else {
        String::new()
    }
}

/// How the engine refused us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// Our credentials: HTTP 401, or a TLS handshake failing on a certificate.
    Unauthenticated,
    /// The request: an authorization plugin's HTTP 403.
    Unauthorized,
}

/// Words of a TLS handshake failing on a certificate (rustls: "invalid peer certificate:
/// UnknownIssuer", "received fatal alert: BadCertificate", ...).
const TLS_REFUSALS: [&str; 2] = ["certificate", "fatal alert"];

/// The refusal among the engine errors in `error`'s chain, if any.
fn engine_refusal(error: &(dyn std::error::Error + 'static)) -> Option<Refusal> {
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(refusal) = current
            .downcast_ref::<RuntimeError>()
            .and_then(runtime_refusal)
        {
            return Some(refusal);
        }
        next = current.source();
    }
    None
}

fn runtime_refusal(error: &RuntimeError) -> Option<Refusal> {
    match error {
        RuntimeError::Api { status: 401, .. } => Some(Refusal::Unauthenticated),
        // Docker answers 403 for other things too ("Pool overlaps with other one ...").
        RuntimeError::Api {
            status: 403,
            message,
            ..
        } if message.contains("authorization denied") => Some(Refusal::Unauthorized),
        RuntimeError::Connect { .. }
        | RuntimeError::Unreachable { .. }
        | RuntimeError::Transport { .. } => {
            let chain = error_chain(error).to_lowercase();
            TLS_REFUSALS
                .iter()
                .any(|word| chain.contains(word))
                .then_some(Refusal::Unauthenticated)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gardener::config::FieldError;

    #[test]
    fn configuration_problems_carry_their_code_and_details() {
        let err = Error::InvalidConfig(ConfigErrors(vec![FieldError {
            field: "providerConfig.networks.cidr".into(),
            message: "\"10.0.0.1/24\" has host bits set: the network address is 10.0.0.0/24".into(),
        }]));
        assert_eq!(err.codes(), &[ERR_CONFIGURATION_PROBLEM]);
        assert!(err.is_permanent());
        assert_eq!(
            error_chain(&err),
            "invalid providerConfig: providerConfig.networks.cidr: \"10.0.0.1/24\" has host bits set: the network address is 10.0.0.0/24"
        );
        let overlap = Error::SubnetOverlap {
            name: "n".into(),
            subnet: "10.1.0.0/24".into(),
            other: Some("kind".into()),
            other_ours: false,
        };
        assert_eq!(
            overlap.to_string(),
            "create network n: subnet 10.1.0.0/24 overlaps Docker network kind"
        );
        assert!(overlap.is_permanent());
    }

    #[test]
    fn what_can_heal_by_itself_is_retryable() {
        let leftover = Error::SubnetOverlap {
            name: "n".into(),
            subnet: "10.1.0.0/24".into(),
            other: Some("gardener-shoot--old--s-infra".into()),
            other_ours: true,
        };
        assert_eq!(leftover.codes(), &[ERR_RETRYABLE_CONFIGURATION_PROBLEM]);
        assert!(!leftover.is_permanent());
        let mismatch = |managed, attached| Error::NetworkMismatch {
            name: "n".into(),
            problems: vec!["it has subnets 10.0.0.0/24, not 10.1.0.0/24".into()],
            managed,
            attached,
        };
        assert_eq!(
            mismatch(true, 2).codes(),
            &[ERR_RETRYABLE_CONFIGURATION_PROBLEM]
        );
        assert_eq!(
            mismatch(true, 2).to_string(),
            "network n does not match the providerConfig: it has subnets 10.0.0.0/24, not 10.1.0.0/24 (recreated once its 2 container(s) are gone)"
        );
        assert_eq!(mismatch(false, 2).codes(), &[ERR_CONFIGURATION_PROBLEM]);
        assert_eq!(mismatch(false, 0).codes(), &[ERR_CONFIGURATION_PROBLEM]);
        let no_pool = Error::Ipv6Unavailable { name: "n".into() };
        assert_eq!(no_pool.codes(), &[ERR_RETRYABLE_CONFIGURATION_PROBLEM]);
        assert!(!no_pool.is_permanent());
    }

    #[test]
    fn engine_refusals_carry_gardener_auth_codes() {
        let api = |status, message: &str| {
            Error::docker("create network n")(RuntimeError::from_status(
                "create network n",
                status,
                message,
            ))
        };
        assert_eq!(
            api(401, "Unauthorized").codes(),
            &[ERR_INFRA_UNAUTHENTICATED]
        );
        let denied = api(
            403,
            "authorization denied by plugin opa-docker-authz: request rejected",
        );
        assert_eq!(denied.codes(), &[ERR_INFRA_UNAUTHORIZED]);
        assert!(denied.is_permanent());
        assert!(
            api(403, "Pool overlaps with other one on this address space")
                .codes()
                .is_empty(),
            "Docker's 403 for an overlap is no authorization problem"
        );
        let tls = Error::Network(NetworkError::Inspect {
            name: "n".into(),
            source: RuntimeError::Unreachable {
                action: "inspect network n".into(),
                source: "client error (Connect): invalid peer certificate: UnknownIssuer".into(),
            },
        });
        assert_eq!(tls.codes(), &[ERR_INFRA_UNAUTHENTICATED]);
        let alert = Error::docker("inspect network n")(RuntimeError::Transport {
            action: "inspect network n".into(),
            source: "received fatal alert: BadCertificate".into(),
        });
        assert_eq!(alert.codes(), &[ERR_INFRA_UNAUTHENTICATED]);
        let down = Error::docker("inspect network n")(RuntimeError::Unreachable {
            action: "inspect network n".into(),
            source: "connection refused".into(),
        });
        assert!(down.codes().is_empty(), "an engine that is down is retried");
    }

    #[test]
    fn engine_failures_are_retried_without_a_code() {
        let err = Error::docker("inspect network n")(RuntimeError::from_status(
            "inspect network n",
            500,
            "boom",
        ));
        assert!(err.codes().is_empty());
        assert!(!err.is_permanent());
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
