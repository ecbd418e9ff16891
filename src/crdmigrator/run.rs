//! The migrator's life in the manager: one pass over every CRD before the controllers start, then
//! a watch of the CRDs that migrates again a CRD whose generation changed, and retries a failed
//! one with a growing delay.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{MigrationError, Migrator, OBSERVED_GENERATION_ANNOTATION, Outcome};
use crate::runtime::error_chain;

/// The migrator's name in logs, metrics and the manager's task list.
pub const MIGRATOR: &str = "crdmigrator";

/// First delay before a failed CRD is migrated again; it doubles up to [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_secs(5);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

impl Migrator {
    /// Migrates every CRD once, logging and counting each result; stops early when `stop` is
    /// cancelled. Returns the CRDs that failed (the watch of [`run`] retries them).
    pub async fn start_up(&self, stop: &CancellationToken) -> Vec<String> {
        tracing::info!(crds = self.crds.len(), phases = %self.phases, "Running the CRD migrator");
        let mut failed = Vec::new();
        for name in &self.crds {
            let result = tokio::select! {
                () = stop.cancelled() => return failed,
                result = self.migrate(name) => result,
            };
            if !self.report(name, &result) {
                failed.push(name.clone());
            }
        }
        failed
    }

    /// Logs and counts one pass; returns whether it succeeded.
    fn report(&self, name: &str, result: &Result<Outcome, MigrationError>) -> bool {
        match result {
            Ok(outcome) => {
                if !outcome.absent && !outcome.up_to_date {
                    tracing::info!(
                        crd = name,
                        rewritten = outcome.rewritten,
                        cleaned = outcome.cleaned,
                        stored_versions = %outcome.stored_versions.join(","),
                        "CRD migrated"
                    );
                }
                self.metrics.crd_migration_finished(name, Ok(()));
                true
            }
            Err(error) => {
                tracing::error!(crd = name, error = %error_chain(error), "CRD migration failed");
                self.metrics
                    .crd_migration_finished(name, Err(error.category()));
                false
            }
        }
    }
}

/// Watches our CRDs (metadata only) until `stop`: a CRD whose observed-generation annotation is
/// not its generation is migrated; one whose migration failed is retried after a delay. `failed`
/// are the CRDs the start-up pass could not migrate.
pub async fn run(migrator: Migrator, failed: Vec<String>, stop: CancellationToken) {
    let crds: Api<PartialObjectMeta<CustomResourceDefinition>> = Api::all(migrator.client.clone());
    let mut events = watcher(crds, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    // CRD name -> (when to try again, the delay after that).
    let mut retries: BTreeMap<String, (Instant, Duration)> = failed
        .into_iter()
        .map(|name| {
            (
                name,
                (Instant::now() + FIRST_RETRY_DELAY, FIRST_RETRY_DELAY),
            )
        })
        .collect();
    loop {
        let next_retry = retries.values().map(|(at, _)| *at).min();
        let due = async {
            match next_retry {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let name = tokio::select! {
            () = stop.cancelled() => return,
            () = due => {
                let now = Instant::now();
                match retries.iter().find(|(_, (at, _))| *at <= now) {
                    Some((name, _)) => name.clone(),
                    None => continue,
                }
            }
            event = events.next() => match event {
                Some(Ok(crd)) => {
                    let Some(name) = crd.metadata.name.clone() else { continue };
                    let observed = crd
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(OBSERVED_GENERATION_ANNOTATION).cloned());
                    let generation = crd.metadata.generation.map(|g| g.to_string());
                    if !migrator.crds.contains(&name) || observed == generation {
                        continue;
                    }
                    name
                }
                Some(Err(error)) => {
                    tracing::warn!(error = %error_chain(&error), "Watching CustomResourceDefinitions failed; retrying");
                    continue;
                }
                None => return,
            },
        };
        let result = tokio::select! {
            () = stop.cancelled() => return,
            result = migrator.migrate(&name) => result,
        };
        if migrator.report(&name, &result) {
            retries.remove(&name);
        } else {
            let delay = retries
                .get(&name)
                .map_or(FIRST_RETRY_DELAY, |(_, d)| (*d * 2).min(MAX_RETRY_DELAY));
            tracing::info!(crd = %name, retry_in_s = delay.as_secs(), "Migrating the CRD again later");
            retries.insert(name, (Instant::now() + delay, delay));
        }
    }
}
