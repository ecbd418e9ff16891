//! Leader election I/O: reads and writes the Lease, following the decisions of [`super::leader`].
//!
//! Writes are `replace` calls carrying the `resourceVersion` that was read, so two candidates
//! racing for the Lease cannot both win: the loser gets a 409 and tries again later.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::leader::{
    Decision, JITTER_FACTOR, LeaderElectionConfig, LeaseRecord, Observation, decide, next_record,
    observe, released, renew_deadline_passed,
};
use crate::runtime::{Metrics, error_chain};

/// Why leadership ended or an attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Reading or writing the Lease failed.
    #[error("{action} Lease {namespace}/{name}")]
    Api {
        /// What was attempted: "get", "create", "update".
        action: &'static str,
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The leader could not renew within the renew deadline, or saw another holder.
    #[error("leader election lost: {reason}")]
    Lost {
        /// What happened.
        reason: String,
    },
}

/// The result of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the Lease.
    Leading,
    /// Someone else holds it.
    Standby {
        /// Its holder.
        holder: String,
    },
}

/// Campaigns for, holds and releases the Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    metrics: Metrics,
    observation: Option<Observation>,
}

impl LeaderElector {
    /// An elector for the Lease described by `config`.
    pub fn new(client: Client, config: LeaderElectionConfig, metrics: Metrics) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        Self {
            api,
            config,
            metrics,
            observation: None,
        }
    }

    /// The identity this elector writes as `holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    fn api_error(&self, action: &'static str, source: kube::Error) -> LeaseError {
        LeaseError::Api {
            action,
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    /// One attempt: read the Lease, decide, and create or update it if the decision says so.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, LeaseError> {
        let current = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.api_error("get", e))?;
        let now = Instant::now().into_std();
        let record = current
            .as_ref()
            .map(|lease| LeaseRecord::from_spec(&lease.spec.clone().unwrap_or_default()));
        self.observation = record.map(|r| observe(self.observation.take(), r, now));
        let decision = decide(self.observation.as_ref(), &self.config.identity, now);
        let Some(desired) = next_record(
            &decision,
            self.observation.as_ref().map(|o| &o.record),
            &self.config.identity,
            self.config.lease_duration,
            Timestamp::now(),
        ) else {
            let holder = match decision {
                Decision::Wait { holder, .. } => holder,
                _ => String::new(),
            };
            return Ok(Attempt::Standby { holder });
        };

        let written = match current {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(desired.to_spec()),
                };
                self.api
                    .create(&PostParams::default(), &lease)
                    .await
                    .map_err(|e| self.api_error("create", e))?
            }
            Some(mut lease) => {
                lease.spec = Some(desired.to_spec());
                self.api
                    .replace(&self.config.name, &PostParams::default(), &lease)
                    .await
                    .map_err(|e| self.api_error("update", e))?
            }
        };
        let written = LeaseRecord::from_spec(&written.spec.unwrap_or_default());
        self.observation = Some(observe(None, written, Instant::now().into_std()));
        let previous_holder = match &decision {
            Decision::Renew | Decision::Wait { .. } => None,
            Decision::Create => Some(""),
            Decision::TakeOver { previous_holder } => {
                Some(previous_holder.as_deref().unwrap_or(""))
            }
        };
        if let Some(previous_holder) = previous_holder {
            tracing::info!(
                lease = %format!("{}/{}", self.config.namespace, self.config.name),
                identity = %self.config.identity,
                previous_holder,
                "Acquired leader election Lease"
            );
        }
        Ok(Attempt::Leading)
    }

    /// Campaigns until the Lease is ours (`true`) or shutdown is requested (`false`).
    pub async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        tracing::info!(
            lease = %format!("{}/{}", self.config.namespace, self.config.name),
            identity = %self.config.identity,
            "Attempting to acquire leader election Lease"
        );
        self.metrics.set_leader(&self.config.name, false);
        let mut last_holder = String::new();
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => {
                    self.metrics.set_leader(&self.config.name, true);
                    return true;
                }
                Ok(Attempt::Standby { holder }) => {
                    if holder != last_holder {
                        tracing::info!(holder = %holder, "Leader election Lease is held by another manager; waiting");
                        last_holder = holder;
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %error_chain(&error), "Leader election attempt failed");
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return false,
                () = tokio::time::sleep(jittered(self.config.retry_period)) => {}
            }
        }
    }

    /// Renews the Lease every retry period until shutdown (`Ok`) or until leadership is lost:
    /// another holder shows up, or no renewal succeeded for the renew deadline.
    pub async fn hold(&mut self, shutdown: &CancellationToken) -> Result<(), LeaseError> {
        let mut last_renewed = Instant::now();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
            let budget = self
                .config
                .renew_deadline
                .saturating_sub(last_renewed.elapsed())
                .max(Duration::from_millis(1));
            let attempt = tokio::time::timeout(budget, self.try_acquire_or_renew()).await;
            match attempt {
                Ok(Ok(Attempt::Leading)) => last_renewed = Instant::now(),
                Ok(Ok(Attempt::Standby { holder })) => {
                    self.metrics.set_leader(&self.config.name, false);
                    return Err(LeaseError::Lost {
                        reason: format!("the Lease is now held by {holder}"),
                    });
                }
                Ok(Err(error)) => {
                    tracing::warn!(error = %error_chain(&error), "Leader election Lease renewal failed");
                }
                Err(_) => tracing::warn!("Leader election Lease renewal timed out"),
            }
            if renew_deadline_passed(
                last_renewed.into_std(),
                Instant::now().into_std(),
                self.config.renew_deadline,
            ) {
                self.metrics.set_leader(&self.config.name, false);
                return Err(LeaseError::Lost {
                    reason: format!(
                        "could not renew the Lease within {}",
                        crate::api::duration::format_go_duration(self.config.renew_deadline)
                    ),
                });
            }
        }
    }

    /// Gives the Lease up if we still hold it, so a successor takes over at once. Best effort:
    /// failures are logged, the Lease then simply expires.
    pub async fn release(&mut self) {
        self.metrics.set_leader(&self.config.name, false);
        let result = async {
            let Some(mut lease) = self
                .api
                .get_opt(&self.config.name)
                .await
                .map_err(|e| self.api_error("get", e))?
            else {
                return Ok(false);
            };
            let record = LeaseRecord::from_spec(&lease.spec.clone().unwrap_or_default());
            if record.holder.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(false);
            }
            lease.spec = Some(released(&record, Timestamp::now()).to_spec());
            self.api
                .replace(&self.config.name, &PostParams::default(), &lease)
                .await
                .map_err(|e| self.api_error("update", e))?;
            Ok::<_, LeaseError>(true)
        };
        match tokio::time::timeout(self.config.retry_period, result).await {
            Ok(Ok(true)) => tracing::info!("Released leader election Lease"),
            Ok(Ok(false)) => {}
            Ok(Err(error)) => {
                tracing::warn!(error = %error_chain(&error), "Could not release leader election Lease")
            }
            Err(_) => tracing::warn!("Releasing leader election Lease timed out"),
        }
    }
}

/// `period` stretched by a random factor in [1, 1.2), as client-go does, so candidates that
/// started together do not stay in lockstep.
fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + (JITTER_FACTOR - 1.0) * fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_client_gos_bounds() {
        for _ in 0..1000 {
            let d = jittered(Duration::from_secs(2));
            assert!(
                d >= Duration::from_secs(2) && d < Duration::from_millis(2400),
                "{d:?}"
            );
        }
    }
}
