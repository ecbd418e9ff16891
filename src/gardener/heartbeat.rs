//! The extension's heartbeat: a Lease named `gardener-extension-heartbeat` in the extension's
//! own namespace, renewed every 30 s, which gardenlet reads to tell whether the health reports of
//! the extension are current (gardener/gardener `extensions/pkg/controller/heartbeat/reconciler.go`,
//! `docs/extensions/heartbeat.md`): `holderIdentity` is the extension's name,
//! `leaseDurationSeconds` the renew interval, `renewTime` the time of the renewal.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::runtime::error_chain;

/// Name of the Lease (Gardener's `HeartBeatResourceName`).
pub const LEASE_NAME: &str = "gardener-extension-heartbeat";

/// How often the Lease is renewed (Gardener's default `RenewIntervalSeconds`).
pub const RENEW_INTERVAL: Duration = Duration::from_secs(30);

/// The Lease's spec when renewed by `holder` at `now` every `interval` (pure).
pub fn lease_spec(holder: &str, interval: Duration, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(holder.to_string()),
        lease_duration_seconds: Some(i32::try_from(interval.as_secs()).unwrap_or(i32::MAX)),
        renew_time: Some(MicroTime(now)),
        ..LeaseSpec::default()
    }
}

/// Creates the Lease in `namespace`, or renews it (a merge patch of its spec) when it exists, as
/// Gardener's `CreateOrGetAndMergePatch` does.
///
/// # Errors
/// When the API refuses the read, the creation or the patch.
pub async fn renew(
    client: &Client,
    namespace: &str,
    holder: &str,
    interval: Duration,
) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let spec = lease_spec(holder, interval, Timestamp::now());
    if leases.get_opt(LEASE_NAME).await?.is_none() {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(LEASE_NAME.to_string()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        leases.create(&PostParams::default(), &lease).await?;
        return Ok(());
    }
    let patch = json!({ "spec": spec });
    leases
        .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Renews the Lease every `interval` until `stop` is cancelled; a failed renewal is logged and
/// tried again at the next interval.
pub async fn run(
    client: Client,
    namespace: String,
    holder: String,
    interval: Duration,
    stop: CancellationToken,
) {
    tracing::info!(lease = LEASE_NAME, namespace = %namespace, interval_s = interval.as_secs(), "Renewing the heartbeat Lease");
    loop {
        if let Err(error) = renew(&client, &namespace, &holder, interval).await {
            tracing::warn!(lease = LEASE_NAME, namespace = %namespace, error = %error_chain(&error), "Renewing the heartbeat Lease failed");
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_names_the_extension_and_its_interval() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let spec = lease_spec("provider-docker", RENEW_INTERVAL, now);
        assert_eq!(spec.holder_identity.as_deref(), Some("provider-docker"));
        assert_eq!(spec.lease_duration_seconds, Some(30));
        assert_eq!(spec.renew_time, Some(MicroTime(now)));
        assert_eq!(spec.acquire_time, None);
    }
}
