//! The CRD migrator: at start-up, and whenever one of our CRDs changes, every object of the CRD is
//! rewritten in the storage version and `status.storedVersions` is set to that version alone, so
//! that the next release may drop an old version from the CRD (kube-apiserver refuses a CRD that
//! drops a version still listed in `status.storedVersions`). Cluster API 1.13 took this job away
//! from `clusterctl upgrade`; CAPD's manager does it (`controllers/crdmigrator` in Cluster API),
//! and so does ours, with the same phases, flag, annotation and RBAC:
//!
//! - `StorageVersionMigration`: when `status.storedVersions` is not `[<storage version>]`, a no-op
//!   merge patch (name, namespace, resourceVersion) of every object makes the API server write it
//!   again in the storage version, then `status.storedVersions` becomes `[<storage version>]`
//!   (with the CRD's resourceVersion as precondition, so a CRD changed meanwhile is redone).
//! - `CleanupManagedFields`: managedFields entries of versions the CRD no longer serves are
//!   removed (kube-apiserver cannot apply to an object that keeps them, kubernetes#111937).
//! - `--skip-crd-migration-phases` turns either off; with both off the migrator does not run.
//! - The CRD's generation is recorded in the annotation
//!   [`OBSERVED_GENERATION_ANNOTATION`]; a CRD whose annotation equals its generation is done.
//!
//! The CRDs it migrates are the ones `crdgen` generates ([`crate::api::crd::all`]): a new kind is
//! migrated as soon as it has a CRD. CRDs that are not installed are skipped.
//!
//! Safety: it runs in the leader only (it starts with the controllers, after the Lease), and it
//! is idempotent, so two managers without leader election, or a restart in the middle, are safe:
//! an object write that meets a Conflict was already rewritten by its writer (every write stores
//! the storage version), a rewrite of an object already in the storage version changes nothing,
//! and `storedVersions` is only trimmed by a patch conditioned on the CRD's resourceVersion seen
//! before the objects were listed. Objects are listed in pages of [`PAGE_SIZE`]; an expired
//! `continue` token (410) restarts the list, skipping the objects already done.

mod objects;
mod run;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::runtime::Metrics;

pub use run::{MIGRATOR, run};

/// The annotation recording the CRD generation the migrator last finished (Cluster API's
/// `clusterv1.CRDMigrationObservedGenerationAnnotation`).
pub const OBSERVED_GENERATION_ANNOTATION: &str =
    "crd-migration.cluster.x-k8s.io/observed-generation";

/// Objects listed per request.
pub const PAGE_SIZE: u32 = 500;

/// The field manager of the migrator's writes.
pub const FIELD_MANAGER: &str = "capd-crd-migrator";

/// A phase of the migration, named as in Cluster API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Rewrite every object in the storage version, then trim `status.storedVersions`.
    StorageVersionMigration,
    /// Remove managedFields entries of versions no longer served.
    CleanupManagedFields,
}

impl Phase {
    /// Every phase, in the order they run.
    pub const ALL: [Phase; 2] = [Phase::StorageVersionMigration, Phase::CleanupManagedFields];

    /// The phase's name, as `--skip-crd-migration-phases` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::StorageVersionMigration => "StorageVersionMigration",
            Phase::CleanupManagedFields => "CleanupManagedFields",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--skip-crd-migration-phases` value that names no phase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid CRD migration phase {0:?}: expected StorageVersionMigration or CleanupManagedFields"
)]
pub struct UnknownPhase(pub String);

impl FromStr for Phase {
    type Err = UnknownPhase;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Phase::ALL
            .into_iter()
            .find(|p| p.name() == s.trim())
            .ok_or_else(|| UnknownPhase(s.to_owned()))
    }
}

/// One `--skip-crd-migration-phases` value: phases, comma-separated; empty for none (as pflag's
/// string slices read `--skip-crd-migration-phases=`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PhaseList(pub Vec<Phase>);

impl FromStr for PhaseList {
    type Err = UnknownPhase;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        s.split(',')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// The phases that run: all but the skipped ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phases(BTreeSet<Phase>);

impl Phases {
    /// Every phase but those in `skipped`.
    pub fn without(skipped: &[Phase]) -> Self {
        Self(
            Phase::ALL
                .into_iter()
                .filter(|p| !skipped.contains(p))
                .collect(),
        )
    }

    /// Whether `phase` runs.
    pub fn runs(&self, phase: Phase) -> bool {
        self.0.contains(&phase)
    }

    /// Whether no phase runs (the migrator is then not started).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Phases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|p| p.name()).collect();
        f.write_str(&names.join(","))
    }
}

/// Why migrating one CRD failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    /// The CRD could not be read.
    #[error("failed to read the CustomResourceDefinition {crd}")]
    ReadCrd {
        /// Name of the CRD.
        crd: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// The CRD marks no version as the storage version.
    #[error("the CustomResourceDefinition {crd} has no storage version")]
    NoStorageVersion {
        /// Name of the CRD.
        crd: String,
    },
    /// The objects could not be listed.
    #[error("failed to list {kind} objects")]
    List {
        /// Kind of the objects.
        kind: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// Some objects could not be written.
    #[error("{phase} failed for {failed} {kind} objects (first: {first})")]
    Objects {
        /// The phase that failed.
        phase: Phase,
        /// Kind of the objects.
        kind: String,
        /// How many failed.
        failed: usize,
        /// The first failure: the object and the error chain.
        first: String,
    },
    /// `status.storedVersions` could not be set.
    #[error("failed to set status.storedVersions of {crd}")]
    StoredVersions {
        /// Name of the CRD.
        crd: String,
        /// What the API server said (a Conflict when the CRD changed during the migration).
        #[source]
        source: kube::Error,
    },
    /// The observed-generation annotation could not be set.
    #[error("failed to annotate {crd} with the observed generation")]
    Annotate {
        /// Name of the CRD.
        crd: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
}

impl MigrationError {
    /// A short label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            MigrationError::ReadCrd { .. } => "read_crd",
            MigrationError::NoStorageVersion { .. } => "no_storage_version",
            MigrationError::List { .. } => "list",
            MigrationError::Objects { .. } => "objects",
            MigrationError::StoredVersions { .. } => "stored_versions",
            MigrationError::Annotate { .. } => "annotate",
        }
    }
}

/// What one pass over a CRD did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Outcome {
    /// The CRD is not installed.
    pub absent: bool,
    /// The annotation already named the CRD's generation: nothing was read or written.
    pub up_to_date: bool,
    /// Objects rewritten in the storage version.
    pub rewritten: u64,
    /// Objects whose managedFields were cleaned up.
    pub cleaned: u64,
    /// `status.storedVersions` after the pass.
    pub stored_versions: Vec<String>,
}

/// Migrates our CRDs. Cheap to clone.
#[derive(Clone)]
pub struct Migrator {
    client: kube::Client,
    crds: Vec<String>,
    phases: Phases,
    metrics: Metrics,
    page_size: u32,
}

impl Migrator {
    /// A migrator of the CRDs named `crds` (`<plural>.<group>`).
    pub fn new(client: kube::Client, crds: Vec<String>, phases: Phases, metrics: Metrics) -> Self {
        Self {
            client,
            crds,
            phases,
            metrics,
            page_size: PAGE_SIZE,
        }
    }

    /// Lists objects `page_size` at a time (tests use small pages).
    pub fn with_page_size(mut self, page_size: u32) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    /// The CRDs it migrates.
    pub fn crds(&self) -> &[String] {
        &self.crds
    }

    /// Migrates every CRD once, in order; returns each one's result.
    pub async fn migrate_all(&self) -> Vec<(String, Result<Outcome, MigrationError>)> {
        let mut results = Vec::with_capacity(self.crds.len());
        for name in &self.crds {
            results.push((name.clone(), self.migrate(name).await));
        }
        results
    }

    /// Migrates one CRD: the phases that are on, then the observed-generation annotation.
    #[tracing::instrument(skip_all, fields(crd = %name))]
    pub async fn migrate(&self, name: &str) -> Result<Outcome, MigrationError> {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let Some(crd) = crds
            .get_opt(name)
            .await
            .map_err(|source| MigrationError::ReadCrd {
                crd: name.to_owned(),
                source,
            })?
        else {
            tracing::info!("CRD is not installed; nothing to migrate");
            return Ok(Outcome {
                absent: true,
                ..Outcome::default()
            });
        };
        let generation = crd.metadata.generation.unwrap_or_default().to_string();
        let stored = crd
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.clone())
            .unwrap_or_default();
        self.metrics.set_crd_stored_versions(name, stored.len());
        if crd
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(OBSERVED_GENERATION_ANNOTATION))
            == Some(&generation)
        {
            return Ok(Outcome {
                up_to_date: true,
                stored_versions: stored,
                ..Outcome::default()
            });
        }
        let storage = crd
            .spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.clone())
            .ok_or_else(|| MigrationError::NoStorageVersion {
                crd: name.to_owned(),
            })?;
        let migrate_storage =
            self.phases.runs(Phase::StorageVersionMigration) && stored != [storage.as_str()];
        let cleanup = self.phases.runs(Phase::CleanupManagedFields);
        let mut outcome = Outcome {
            stored_versions: stored.clone(),
            ..Outcome::default()
        };
        if migrate_storage || cleanup {
            let target = objects::Target::new(&crd, &storage);
            tracing::info!(
                storage_version = %storage,
                stored_versions = %stored.join(","),
                generation = %generation,
                phases = %self.phases,
                "Migrating {} objects",
                target.kind()
            );
            let done = objects::migrate(self, &target, migrate_storage, cleanup).await?;
            outcome.rewritten = done.rewritten;
            outcome.cleaned = done.cleaned;
        }
        if migrate_storage {
            trim_stored_versions(&crds, &crd, &storage).await?;
            tracing::info!(
                storage_version = %storage,
                previously = %stored.join(","),
                rewritten = outcome.rewritten,
                "Set status.storedVersions to the storage version alone"
            );
            outcome.stored_versions = vec![storage];
            self.metrics.set_crd_stored_versions(name, 1);
        }
        // Not conditioned: a CRD changed meanwhile has a newer generation, which is migrated again.
        let body =
            json!({"metadata": {"annotations": {OBSERVED_GENERATION_ANNOTATION: generation}}});
        crds.patch(name, &PatchParams::default(), &Patch::Merge(body))
            .await
            .map_err(|source| MigrationError::Annotate {
                crd: name.to_owned(),
                source,
            })?;
        Ok(outcome)
    }
}

/// Sets `status.storedVersions` to `[storage]`, conditioned on the CRD's resourceVersion. When
/// the CRD changed since `read` (a Conflict), it is read again: if its spec (generation) is the
/// same, the objects rewritten are still in the storage version and the trim is retried with the
/// new resourceVersion (another migrator may have done it already); if the spec changed, the
/// migration is redone later for the new generation.
async fn trim_stored_versions(
    crds: &Api<CustomResourceDefinition>,
    read: &CustomResourceDefinition,
    storage: &str,
) -> Result<(), MigrationError> {
    let name = read.metadata.name.clone().unwrap_or_default();
    let error = |source| MigrationError::StoredVersions {
        crd: name.clone(),
        source,
    };
    let mut resource_version = read.metadata.resource_version.clone();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let body = json!({
            "metadata": {"resourceVersion": resource_version},
            "status": {"storedVersions": [storage]},
        });
        match crds
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(body))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 && attempts < 5 => {
                let fresh = crds.get(&name).await.map_err(error)?;
                let same_spec = fresh.metadata.generation == read.metadata.generation;
                if !same_spec {
                    return Err(error(kube::Error::Api(status)));
                }
                let stored = fresh.status.and_then(|s| s.stored_versions);
                if stored.as_deref() == Some(&[storage.to_owned()][..]) {
                    return Ok(());
                }
                resource_version = fresh.metadata.resource_version;
            }
            Err(source) => return Err(error(source)),
        }
    }
}
