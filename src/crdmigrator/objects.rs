//! The objects of one CRD: listed in pages at the storage version, each rewritten by a no-op patch
//! and its managedFields cleaned up.

use std::collections::HashSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::{FIELD_MANAGER, MigrationError, Migrator, Phase};
use crate::runtime::error_chain;

/// Retries of a managedFields cleanup that meets a Conflict (client-go's `retry.DefaultRetry`).
const CLEANUP_ATTEMPTS: usize = 5;

/// The resource of a CRD at its storage version.
pub(super) struct Target {
    /// Name of the CRD, the `crd` label of the metrics.
    crd: String,
    resource: ApiResource,
    /// Whether the CRD has a status subresource: the rewrite then goes through `/status`, which
    /// no admission webhook of ours intercepts, so a webhook cannot block the migration.
    through_status: bool,
    /// `<group>/<version>` of every served version.
    served: HashSet<String>,
}

impl Target {
    pub(super) fn new(crd: &CustomResourceDefinition, storage: &str) -> Self {
        let group = crd.spec.group.clone();
        let names = &crd.spec.names;
        let resource = ApiResource {
            group: group.clone(),
            version: storage.to_owned(),
            api_version: format!("{group}/{storage}"),
            kind: names.kind.clone(),
            plural: names.plural.clone(),
        };
        let through_status = crd
            .spec
            .versions
            .iter()
            .find(|v| v.name == storage)
            .and_then(|v| v.subresources.as_ref())
            .is_some_and(|s| s.status.is_some());
        let served = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| format!("{group}/{}", v.name))
            .collect();
        Self {
            crd: crd.metadata.name.clone().unwrap_or_default(),
            resource,
            through_status,
            served,
        }
    }

    pub(super) fn kind(&self) -> &str {
        &self.resource.kind
    }
}

/// What [`migrate`] wrote.
#[derive(Debug, Default)]
pub(super) struct Done {
    pub rewritten: u64,
    pub cleaned: u64,
}

/// Failures of one phase: how many, and the first.
#[derive(Default)]
struct Failures {
    count: usize,
    first: Option<String>,
}

impl Failures {
    fn add(&mut self, object: &str, error: &kube::Error) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(format!("{object}: {}", error_chain(error)));
        }
    }

    fn into_result(self, phase: Phase, kind: &str) -> Result<(), MigrationError> {
        match self.first {
            None => Ok(()),
            Some(first) => Err(MigrationError::Objects {
                phase,
                kind: kind.to_owned(),
                failed: self.count,
                first,
            }),
        }
    }
}

/// Rewrites (when `rewrite`) and cleans up (when `cleanup`) every object of `target`, page by
/// page ([`walk`]).
pub(super) async fn migrate(
    migrator: &Migrator,
    target: &Target,
    rewrite: bool,
    cleanup: bool,
) -> Result<Done, MigrationError> {
    let api: Api<DynamicObject> = Api::all_with(migrator.client.clone(), &target.resource);
    let kind = target.kind().to_owned();
    let mut done = Done::default();
    let mut rewrite_failures = Failures::default();
    let mut cleanup_failures = Failures::default();
    let mut walk = Walk::default();
    while let Some(token) = walk.next_request() {
        let mut params = ListParams::default().limit(migrator.page_size);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = api.list_metadata(&params).await.map(|page| {
            let items = page.items.into_iter().map(|item| item.metadata);
            (items.collect(), page.metadata.continue_)
        });
        let items = walk
            .received(page, &kind)
            .map_err(|source| MigrationError::List {
                kind: kind.clone(),
                source,
            })?;
        for meta in items {
            let key = (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            );
            let display = if key.0.is_empty() {
                key.1.clone()
            } else {
                format!("{}/{}", key.0, key.1)
            };
            let mut current = Some(meta);
            if rewrite {
                match rewrite_one(&api, target, &key, current.as_ref()).await {
                    Ok(after) => {
                        done.rewritten += 1;
                        let phase = Phase::StorageVersionMigration.name();
                        migrator.metrics.crd_migration_object(&target.crd, phase);
                        current = after;
                    }
                    Err(error) => {
                        rewrite_failures.add(&display, &error);
                        continue;
                    }
                }
            }
            if cleanup && let Some(meta) = current {
                match cleanup_one(&api, target, &key, meta).await {
                    Ok(true) => {
                        done.cleaned += 1;
                        let phase = Phase::CleanupManagedFields.name();
                        migrator.metrics.crd_migration_object(&target.crd, phase);
                    }
                    Ok(false) => {}
                    Err(error) => cleanup_failures.add(&display, &error),
                }
            }
        }
    }
    if rewrite {
        tracing::info!(kind = %kind, objects = done.rewritten, pages = walk.pages, "Rewrote the objects in the storage version");
    }
    rewrite_failures.into_result(Phase::StorageVersionMigration, &kind)?;
    cleanup_failures.into_result(Phase::CleanupManagedFields, &kind)?;
    Ok(done)
}

/// How many times a list whose `continue` token expired is started again before giving up (the
/// CRD is then retried later).
pub(super) const MAX_RELISTS: usize = 5;

/// A paged list, as a state machine: [`Walk::next_request`] says which page to ask for (the
/// `continue` token, `None` for the first page), [`Walk::received`] takes the answer and returns
/// the objects not handed out before. A 410 Gone on a `continue` token (the API server no longer
/// has the list's snapshot) starts the list again from the first page; the objects already handed
/// out are then skipped.
#[derive(Debug, Default)]
pub(super) struct Walk {
    seen: HashSet<(Option<String>, Option<String>)>,
    token: Option<String>,
    finished: bool,
    pub(super) pages: u64,
    pub(super) relists: usize,
}

impl Walk {
    /// The next page to ask for, or `None` when the list is complete.
    pub(super) fn next_request(&self) -> Option<Option<String>> {
        (!self.finished).then(|| self.token.clone())
    }

    /// Takes one list answer: the page's objects and its `continue` token, or the error.
    pub(super) fn received(
        &mut self,
        page: Result<(Vec<ObjectMeta>, Option<String>), kube::Error>,
        kind: &str,
    ) -> Result<Vec<ObjectMeta>, kube::Error> {
        let (items, next) = match page {
            Ok(page) => page,
            Err(kube::Error::Api(status))
                if status.code == 410 && self.token.is_some() && self.relists < MAX_RELISTS =>
            {
                self.relists += 1;
                tracing::info!(
                    kind,
                    pages = self.pages,
                    done = self.seen.len(),
                    "The list expired between pages; listing again from the start"
                );
                self.token = None;
                return Ok(Vec::new());
            }
            Err(error) => return Err(error),
        };
        self.pages += 1;
        self.token = next.filter(|t| !t.is_empty());
        self.finished = self.token.is_none();
        Ok(items
            .into_iter()
            .filter(|m| self.seen.insert((m.namespace.clone(), m.name.clone())))
            .collect())
    }
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

fn api_for(api: &Api<DynamicObject>, target: &Target, namespace: &str) -> Api<DynamicObject> {
    if namespace.is_empty() {
        api.clone()
    } else {
        Api::namespaced_with(api.clone().into_client(), namespace, &target.resource)
    }
}

/// The no-op patch: only the identity and the resourceVersion read, so the API server rewrites the
/// object as it is, in the storage version. Returns the object's metadata after the write, or
/// `None` when it is gone. A Conflict means someone wrote it since: it is in the storage version
/// already, and its metadata is read again for the cleanup.
async fn rewrite_one(
    api: &Api<DynamicObject>,
    target: &Target,
    (namespace, name): &(String, String),
    meta: Option<&ObjectMeta>,
) -> Result<Option<ObjectMeta>, kube::Error> {
    let api = api_for(api, target, namespace);
    let mut metadata = json!({"name": name});
    if !namespace.is_empty() {
        metadata["namespace"] = json!(namespace);
    }
    metadata["resourceVersion"] = json!(meta.and_then(|m| m.resource_version.clone()));
    let body = json!({
        "apiVersion": target.resource.api_version,
        "kind": target.resource.kind,
        "metadata": metadata,
    });
    let params = patch_params();
    let written = if target.through_status {
        api.patch_status(name, &params, &Patch::Merge(body)).await
    } else {
        api.patch(name, &params, &Patch::Merge(body)).await
    };
    match written {
        Ok(object) => Ok(Some(object.metadata)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(kube::Error::Api(status)) if status.code == 409 => api
            .get_metadata_opt(name)
            .await
            .map(|m| m.map(|m| m.metadata)),
        Err(error) => Err(error),
    }
}

/// Removes the managedFields entries of versions that are not served, keeping a minimal entry of
/// the first manager when none would remain (otherwise the first apply would let kube-apiserver
/// invent a co-owning entry). The patch carries the resourceVersion read: a Conflict reads the
/// object again and retries. Returns whether anything was removed.
async fn cleanup_one(
    api: &Api<DynamicObject>,
    target: &Target,
    (namespace, name): &(String, String),
    mut meta: ObjectMeta,
) -> Result<bool, kube::Error> {
    let api = api_for(api, target, namespace);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let entries = meta.managed_fields.clone().unwrap_or_default();
        let kept: Vec<Value> = entries
            .iter()
            .filter(|e| {
                e.api_version
                    .as_ref()
                    .is_some_and(|v| target.served.contains(v))
            })
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect();
        if kept.len() == entries.len() {
            return Ok(false);
        }
        let kept = match (kept.is_empty(), entries.first()) {
            (true, Some(first)) => vec![json!({
                "manager": first.manager,
                "operation": first.operation,
                "apiVersion": target.resource.api_version,
                "time": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:name": {}}},
            })],
            _ => kept,
        };
        let patch = json!([
            {"op": "replace", "path": "/metadata/managedFields", "value": kept},
            {"op": "replace", "path": "/metadata/resourceVersion", "value": meta.resource_version},
        ]);
        let patch: json_patch::Patch =
            serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
        match api
            .patch(name, &patch_params(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < CLEANUP_ATTEMPTS => {
                match api.get_metadata_opt(name).await? {
                    Some(fresh) => meta = fresh.metadata,
                    None => return Ok(false),
                }
            }
            Err(error) => return Err(error),
        }
    }
}
