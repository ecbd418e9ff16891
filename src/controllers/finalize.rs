//! kube's finalizer helper, made harmless for the one case a cache makes common: a pass that
//! reads the object as it was before this manager added its finalizer.
//!
//! The helper adds the finalizer with a JSON patch that first tests the finalizers it saw
//! (`null`, or the list), so that two writers never overwrite each other's entries, and
//! returns, relying on the watch to bring the object back with the finalizer. Another event
//! (the owner Machine or Cluster changing) can start a pass before the watch did: that pass
//! sees no finalizer, patches again, the test fails against the finalizer already there, and the
//! API server answers 422; the pass failed, with an ERROR line and a retry after the error
//! backoff, for nothing.
//!
//! So each finalizer this manager adds is remembered with the resourceVersion of the copy it
//! was added to, and a pass that reads that very copy again waits for the watch instead (the
//! newer copy is on its way: the add changed the object). A copy with another resourceVersion is
//! newer (resourceVersions are compared only for equality, as the API conventions ask) and goes
//! to the helper as before, so a finalizer removed by someone else is added again, and a 422
//! from a real concurrent edit is still a transient error and retried.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::TryFuture;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, Event};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The copies this manager added its finalizers to, per object (`Kind/namespace/name`).
#[derive(Debug, Default)]
pub struct AddedFinalizers {
    entries: Mutex<HashMap<String, Added>>,
}

#[derive(Debug, PartialEq, Eq)]
struct Added {
    uid: String,
    resource_version: String,
    finalizer: String,
}

/// The object's key in [`AddedFinalizers`].
fn key_of<K: Resource<DynamicType = ()>>(object: &K) -> String {
    let meta = object.meta();
    format!(
        "{}/{}/{}",
        K::kind(&()),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The copy the helper would add `finalizer` to; `None` when it would not add it (present
/// already, or the object is being deleted), or when the copy has no resourceVersion to tell
/// it from a newer one.
fn adding<K: Resource<DynamicType = ()>>(object: &K, finalizer: &str) -> Option<Added> {
    let meta = object.meta();
    if meta.deletion_timestamp.is_some() || object.finalizers().iter().any(|f| f == finalizer) {
        return None;
    }
    Some(Added {
        uid: meta.uid.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone()?,
        finalizer: finalizer.to_string(),
    })
}

impl AddedFinalizers {
    fn with<T>(&self, work: impl FnOnce(&mut HashMap<String, Added>) -> T) -> T {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        work(&mut entries)
    }

    /// Whether `copy` of the object at `key` is the one this manager added the finalizer to.
    fn already_added(&self, key: &str, copy: &Added) -> bool {
        self.with(|entries| entries.get(key) == Some(copy))
    }

    fn record(&self, key: String, copy: Added) {
        self.with(|entries| entries.insert(key, copy));
    }

    /// Forgets the object at `key` (its finalizer is seen, or it is gone).
    fn forget(&self, key: &str) {
        self.with(|entries| entries.remove(key));
    }

    /// How many objects are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.with(|entries| entries.len())
    }
}

/// [`kube::runtime::finalizer::finalizer`], skipping the add for a copy this manager already
/// added the finalizer to (the module's documentation says why): that pass waits for the watch.
///
/// # Errors
/// As the helper's.
pub async fn finalizer<K, ReconcileFut>(
    added: &AddedFinalizers,
    api: &Api<K>,
    finalizer_name: &str,
    object: Arc<K>,
    reconcile: impl FnOnce(Event<K>) -> ReconcileFut,
) -> Result<Action, finalizer::Error<ReconcileFut::Error>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
    ReconcileFut: TryFuture<Ok = Action>,
    ReconcileFut::Error: std::error::Error + 'static,
{
    let key = key_of(object.as_ref());
    let Some(copy) = adding(object.as_ref(), finalizer_name) else {
        // Seen with the finalizer, or being deleted: nothing to remember any more.
        added.forget(&key);
        return finalizer::finalizer(api, finalizer_name, object, reconcile).await;
    };
    if added.already_added(&key, &copy) {
        tracing::debug!(
            finalizer = finalizer_name,
            "The cache has not yet seen the finalizer added; waiting for the watch"
        );
        return Ok(Action::await_change());
    }
    let result = finalizer::finalizer(api, finalizer_name, object, reconcile).await;
    if result.is_ok() {
        added.record(key, copy);
    }
    result
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
    use serde_json::json;

    use super::*;
    use crate::controllers::error::Error;
    use crate::controllers::fixtures::{NAMESPACE, test_api_server};

    const NAME: &str = "infrastructure.cluster.x-k8s.io";

    /// One pass: whether the reconcile ran, or the helper's error.
    async fn pass(
        added: &AddedFinalizers,
        api: &Api<ConfigMap>,
        copy: &ConfigMap,
    ) -> Result<bool, finalizer::Error<Error>> {
        let ran = std::sync::atomic::AtomicBool::new(false);
        finalizer(added, api, NAME, Arc::new(copy.clone()), |_| async {
            ran.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, Error>(Action::await_change())
        })
        .await?;
        Ok(ran.load(std::sync::atomic::Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_stale_copy_does_not_add_the_finalizer_again_and_a_newer_one_does() {
        let (_server, client) = test_api_server().await;
        let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
        let object = ConfigMap {
            metadata: ObjectMeta {
                name: Some("m1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let created = api.create(&PostParams::default(), &object).await.unwrap();
        let added = AddedFinalizers::default();

        // The first pass adds the finalizer and waits for the watch.
        assert!(!pass(&added, &api, &created).await.unwrap());
        let with_finalizer = api.get("m1").await.unwrap();
        assert_eq!(with_finalizer.finalizers(), [NAME]);

        // A pass on the copy the cache still holds: kube's helper alone fails with a 422 ...
        let stale = finalizer::finalizer(&api, NAME, Arc::new(created.clone()), |_| async {
            Ok::<_, Error>(Action::await_change())
        })
        .await
        .expect_err("the patch tests the finalizers the stale copy has");
        assert!(
            matches!(&stale, finalizer::Error::AddFinalizer(kube::Error::Api(s)) if s.code == 422),
            "{stale:?}"
        );
        // ... and this one waits for the watch, without a write.
        assert!(!pass(&added, &api, &created).await.unwrap());
        assert_eq!(
            api.get("m1").await.unwrap().metadata.resource_version,
            with_finalizer.metadata.resource_version
        );

        // The watch brings the copy with the finalizer: the reconcile runs, the memory is
        // emptied.
        assert!(pass(&added, &api, &with_finalizer).await.unwrap());
        assert_eq!(added.len(), 0);

        // Someone removes it: the newer copy gets it again.
        let removed = api
            .patch(
                "m1",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .unwrap();
        assert!(removed.finalizers().is_empty());
        assert!(!pass(&added, &api, &removed).await.unwrap());
        assert_eq!(api.get("m1").await.unwrap().finalizers(), [NAME]);
    }

    #[tokio::test]
    async fn a_concurrent_edit_of_the_finalizers_is_still_an_error() {
        let (_server, client) = test_api_server().await;
        let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
        let object = ConfigMap {
            metadata: ObjectMeta {
                name: Some("m1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let created = api.create(&PostParams::default(), &object).await.unwrap();
        // Another controller adds its finalizer after our cache saw the object.
        api.patch(
            "m1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["other.example.com"]}})),
        )
        .await
        .unwrap();
        let added = AddedFinalizers::default();
        let error = pass(&added, &api, &created)
            .await
            .expect_err("never overwrite another writer's finalizers");
        assert!(
            matches!(&error, finalizer::Error::AddFinalizer(kube::Error::Api(s)) if s.code == 422),
            "{error:?}"
        );
        assert_eq!(
            api.get("m1").await.unwrap().finalizers(),
            ["other.example.com"]
        );
        assert_eq!(added.len(), 0, "nothing remembered of a failed add");
    }
}
