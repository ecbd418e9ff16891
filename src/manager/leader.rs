//! Leader election on a `coordination.k8s.io/v1` Lease: the pure decisions.
//!
//! Same rules as client-go's leader election: a Lease held by another identity is only taken
//! over once it has not changed for its whole `leaseDurationSeconds`, measured on this process's
//! monotonic clock from the moment the current record was first seen (never by comparing the
//! holder's `renewTime` with our wall clock, so clock skew between nodes cannot cause two
//! leaders). The I/O loop lives in [`super::lease`].

use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// The Lease CAPD uses, so a Go CAPD and this manager never lead at the same time.
pub const LEASE_NAME: &str = "controller-leader-election-capd";

/// client-go's jitter factor: candidates wait between 1 and 1.2 retry periods.
pub const JITTER_FACTOR: f64 = 1.2;

/// Why the leader election settings are unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaderConfigError {
    /// client-go's rule: the renew deadline must be shorter than the lease duration.
    #[error(
        "--leader-elect-lease-duration ({lease}) must be greater than --leader-elect-renew-deadline ({renew})"
    )]
    RenewDeadlineTooLong {
        /// The lease duration, Go-formatted.
        lease: String,
        /// The renew deadline, Go-formatted.
        renew: String,
    },
    /// client-go's rule: the renew deadline must exceed 1.2 retry periods.
    #[error(
        "--leader-elect-renew-deadline ({renew}) must be greater than 1.2 x --leader-elect-retry-period ({retry})"
    )]
    RetryPeriodTooLong {
        /// The renew deadline, Go-formatted.
        renew: String,
        /// The retry period, Go-formatted.
        retry: String,
    },
    /// A zero retry period would spin.
    #[error("--leader-elect-retry-period must be greater than zero")]
    ZeroRetryPeriod,
}

/// Where the Lease is, who we are, and the timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// Our `holderIdentity`.
    pub identity: String,
    /// How long a Lease stays valid without renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failed renewal before giving up leadership.
    pub renew_deadline: Duration,
    /// Pause between attempts.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// Checks the timings the way client-go does.
    pub fn new(
        namespace: String,
        identity: String,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, LeaderConfigError> {
        use crate::api::duration::format_go_duration as go;
        if retry_period.is_zero() {
            return Err(LeaderConfigError::ZeroRetryPeriod);
        }
        if lease_duration <= renew_deadline {
            return Err(LeaderConfigError::RenewDeadlineTooLong {
                lease: go(lease_duration),
                renew: go(renew_deadline),
            });
        }
        if renew_deadline.as_secs_f64() <= JITTER_FACTOR * retry_period.as_secs_f64() {
            return Err(LeaderConfigError::RetryPeriodTooLong {
                renew: go(renew_deadline),
                retry: go(retry_period),
            });
        }
        Ok(Self {
            namespace,
            name: LEASE_NAME.to_owned(),
            identity,
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }
}

/// Our `holderIdentity`: the pod name (else the host name) plus a random suffix, so two
/// processes on one host, or a restarted container, never share an identity.
pub fn holder_identity(pod_name: Option<String>, hostname: Option<String>) -> String {
    let base = pod_name
        .filter(|n| !n.trim().is_empty())
        .or(hostname.filter(|n| !n.trim().is_empty()))
        .unwrap_or_else(|| "capd-manager".to_owned());
    format!("{}_{:016x}", base.trim(), fastrand::u64(..))
}

/// The Lease fields the decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Current holder; `None` or empty means free.
    pub holder: Option<String>,
    /// Validity the holder announced.
    pub lease_duration: Duration,
    /// When the current holder acquired it.
    pub acquire_time: Option<Timestamp>,
    /// When the current holder last renewed it.
    pub renew_time: Option<Timestamp>,
    /// How many times the holder changed.
    pub transitions: i32,
}

impl LeaseRecord {
    /// Reads the record out of a Lease spec (missing fields as zero or `None`).
    pub fn from_spec(spec: &LeaseSpec) -> Self {
        Self {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            lease_duration: Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            ),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// The Lease spec for this record.
    pub fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone().unwrap_or_default()),
            lease_duration_seconds: Some(
                i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.transitions),
            ..LeaseSpec::default()
        }
    }

    fn held_by(&self, identity: &str) -> bool {
        self.holder.as_deref() == Some(identity)
    }
}

/// A record and when this process first saw it in that exact state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The record as last read.
    pub record: LeaseRecord,
    /// Monotonic time at which the record was first seen unchanged.
    pub since: Instant,
}

/// Updates the observation with a freshly read record: the clock restarts only when the record
/// changed (the holder renewed, or someone else took over).
pub fn observe(previous: Option<Observation>, current: LeaseRecord, now: Instant) -> Observation {
    match previous {
        Some(previous) if previous.record == current => previous,
        _ => Observation {
            record: current,
            since: now,
        },
    }
}

/// What to do with the Lease on this attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No Lease exists: create it, holding it.
    Create,
    /// We hold it: renew it.
    Renew,
    /// It is free or its holder stopped renewing: take it over.
    TakeOver {
        /// The holder whose lease expired, if any.
        previous_holder: Option<String>,
    },
    /// Someone else holds a valid Lease.
    Wait {
        /// The current holder.
        holder: String,
        /// How long until it expires if not renewed.
        expires_in: Duration,
    },
}

/// Decides from the observed Lease (`None`: it does not exist).
pub fn decide(observation: Option<&Observation>, identity: &str, now: Instant) -> Decision {
    let Some(observation) = observation else {
        return Decision::Create;
    };
    let record = &observation.record;
    let Some(holder) = record.holder.as_deref() else {
        return Decision::TakeOver {
            previous_holder: None,
        };
    };
    if record.held_by(identity) {
        return Decision::Renew;
    }
    let expires_at = observation.since + record.lease_duration;
    if now >= expires_at {
        Decision::TakeOver {
            previous_holder: Some(holder.to_owned()),
        }
    } else {
        Decision::Wait {
            holder: holder.to_owned(),
            expires_in: expires_at - now,
        }
    }
}

/// The record to write for a decision, or `None` when we must wait.
pub fn next_record(
    decision: &Decision,
    current: Option<&LeaseRecord>,
    identity: &str,
    lease_duration: Duration,
    now: Timestamp,
) -> Option<LeaseRecord> {
    let transitions = current.map_or(0, |r| r.transitions);
    match decision {
        Decision::Wait { .. } => None,
        Decision::Create => Some(LeaseRecord {
            holder: Some(identity.to_owned()),
            lease_duration,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 0,
        }),
        Decision::Renew => Some(LeaseRecord {
            holder: Some(identity.to_owned()),
            lease_duration,
            acquire_time: current.and_then(|r| r.acquire_time).or(Some(now)),
            renew_time: Some(now),
            transitions,
        }),
        Decision::TakeOver { .. } => Some(LeaseRecord {
            holder: Some(identity.to_owned()),
            lease_duration,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: transitions.saturating_add(1),
        }),
    }
}

/// The record that gives the Lease up on a clean shutdown: no holder, a one-second duration, so
/// the next candidate takes over at once instead of waiting for the lease to expire.
pub fn released(current: &LeaseRecord, now: Timestamp) -> LeaseRecord {
    LeaseRecord {
        holder: None,
        lease_duration: Duration::from_secs(1),
        acquire_time: Some(now),
        renew_time: Some(now),
        transitions: current.transitions,
    }
}

/// Whether a leader whose last successful renewal was at `last_renewed` must give up.
pub fn renew_deadline_passed(
    last_renewed: Instant,
    now: Instant,
    renew_deadline: Duration,
) -> bool {
    now.saturating_duration_since(last_renewed) >= renew_deadline
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
