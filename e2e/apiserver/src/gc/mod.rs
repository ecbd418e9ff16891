//! Background garbage collection: dependents of deleted owners, foreground and orphan
//! finalizers, namespace termination and CRD cleanup.
//!
//! Every stored change passes through [`Index::changed`], which keeps the owners and owner
//! references of the store and says whether the change can give the collector something to do.
//! The collector looks at the store only after such a change, as kube's collector acts only on
//! what its graph builder queues from the events (`processGraphChanges` in
//! `pkg/controller/garbagecollector/graph_builder.go`: the dependents of an owner that went, an
//! owner being deleted with `orphan` or `foregroundDeletion`, an owner reference to an absent
//! object, the owners waiting for a dependent that went); a write that touches no owner relation
//! (a status update, an Event) costs it nothing.
//! The pass itself stays a walk over the whole store (kube keeps a graph instead): what changed is
//! cheap to judge, what to do about it is not, and it is rare.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

mod index;

pub use self::index::{CLEANUP_FINALIZER, Index};
use self::index::{deleting, finalizers, has};
use crate::deletion::{DeleteOptions, Propagation, delete_object};
use crate::resources::{Representation, ResKey, ResourceDef};
use crate::state::Shared;
use crate::store::{Store, object_key};

/// Runs until shutdown: woken by every write and every `gc_interval` (for changes made without
/// a wake-up), it sweeps when a change since the last sweep concerned the collector
/// ([`Index::changed`]), until a sweep finds nothing more to do.
pub async fn run(shared: Arc<Shared>) {
    let shutdown = shared.shutdown.clone();
    loop {
        tokio::select! {
            _ = shared.gc_wakeup.notified() => {}
            _ = tokio::time::sleep(shared.gc_interval) => {}
            _ = crate::state::until_shutdown(shutdown.clone()) => return,
        }
        let mut store = shared.store.lock().await;
        if !store.gc.pending {
            continue;
        }
        for _ in 0..1000 {
            if !sweep(&mut store) {
                // The last sweep saw every change the sweeps before it made.
                store.gc.pending = false;
                break;
            }
        }
    }
}

struct Item {
    key: ResKey,
    object: Arc<Value>,
}

fn def_for(store: &Store, key: &ResKey) -> Option<ResourceDef> {
    store
        .defs
        .iter()
        .find(|d| &d.storage == key && d.representation == Representation::Native)
        .cloned()
}

/// Stores a changed object, or removes it when it is being deleted and has no finalizers left.
fn save(store: &mut Store, key: &ResKey, mut object: Value) {
    let namespace_waiting = key == &(String::new(), "namespaces".to_string())
        && object["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
    let done = deleting(&object) && finalizers(&object).is_empty() && !namespace_waiting;
    if done {
        let (ns, name) = object_key(&object);
        store.remove(key, &ns, &name);
        return;
    }
    if object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(Vec::is_empty)
        && let Some(m) = object["metadata"].as_object_mut()
    {
        m.remove("finalizers");
    }
    store.put(key, object);
}

fn without_finalizer(object: &Value, finalizer: &str) -> Value {
    let mut o = object.clone();
    let rest: Vec<String> = finalizers(object)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    o["metadata"]["finalizers"] = json!(rest);
    o
}

fn delete(store: &mut Store, key: &ResKey, object: &Value, propagation: Propagation) {
    let Some(def) = def_for(store, key) else {
        return;
    };
    let (ns, name) = object_key(object);
    let opts = DeleteOptions {
        propagation: Some(propagation),
        ..Default::default()
    };
    if let Err(e) = delete_object(store, &def, &ns, &name, &opts) {
        tracing::debug!(%ns, %name, error = %e, "Garbage collection could not delete");
    }
}

/// One pass; true when something changed.
pub fn sweep(store: &mut Store) -> bool {
    let items: Vec<Item> = store
        .all()
        .into_iter()
        .map(|(key, object)| Item { key, object })
        .collect();
    let by_uid: HashMap<String, &Item> = items
        .iter()
        .filter_map(|i| {
            i.object["metadata"]["uid"]
                .as_str()
                .map(|u| (u.to_string(), i))
        })
        .collect();
    let mut has_dependents: HashMap<&str, bool> = HashMap::new();
    let mut blocking: HashMap<&str, bool> = HashMap::new();
    for i in &items {
        for r in i.object["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(uid) = r["uid"].as_str() {
                has_dependents.insert(uid, true);
                if r["blockOwnerDeletion"] == json!(true) {
                    blocking.insert(uid, true);
                }
            }
        }
    }
    // Dependents.
    for i in &items {
        let Some(refs) = i.object["metadata"]["ownerReferences"].as_array() else {
            continue;
        };
        let (mut solid, mut dangling, mut orphaning, mut waiting) = (Vec::new(), 0, Vec::new(), 0);
        for r in refs {
            let uid = r["uid"].as_str().unwrap_or_default();
            // A namespaced dependent can only be owned from its own namespace or by a
            // cluster-scoped object; anything else counts as absent, as for kube's collector.
            let dependent_ns = i.object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default();
            let owner = by_uid.get(uid).filter(|o| {
                let owner_ns = o.object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default();
                owner_ns.is_empty() || owner_ns == dependent_ns
            });
            match owner {
                None => dangling += 1,
                Some(owner) if deleting(&owner.object) && has(&owner.object, "orphan") => {
                    orphaning.push(uid)
                }
                Some(owner)
                    if deleting(&owner.object) && has(&owner.object, "foregroundDeletion") =>
                {
                    waiting += 1
                }
                Some(_) => solid.push(r.clone()),
            }
        }
        if !solid.is_empty() {
            if dangling + orphaning.len() + waiting > 0 {
                let mut o = (*i.object).clone();
                o["metadata"]["ownerReferences"] = json!(solid);
                save(store, &i.key, o);
                return true;
            }
            continue;
        }
        if !orphaning.is_empty() {
            let mut o = (*i.object).clone();
            let kept: Vec<Value> = refs
                .iter()
                .filter(|r| !orphaning.contains(&r["uid"].as_str().unwrap_or_default()))
                .cloned()
                .collect();
            if kept.is_empty() {
                if let Some(m) = o["metadata"].as_object_mut() {
                    m.remove("ownerReferences");
                }
            } else {
                o["metadata"]["ownerReferences"] = json!(kept);
            }
            save(store, &i.key, o);
            return true;
        }
        if deleting(&i.object) || (waiting == 0 && dangling == 0) {
            continue;
        }
        let uid = i.object["metadata"]["uid"].as_str().unwrap_or_default();
        let policy = if waiting > 0 && has_dependents.contains_key(uid) {
            Propagation::Foreground
        } else {
            Propagation::Background
        };
        delete(store, &i.key, &i.object, policy);
        return true;
    }
    // Owners waiting on dependents.
    for i in items.iter().filter(|i| deleting(&i.object)) {
        let uid = i.object["metadata"]["uid"].as_str().unwrap_or_default();
        let f = finalizers(&i.object);
        if f.iter().any(|f| f == "foregroundDeletion") && !blocking.contains_key(uid) {
            let still_dependents = items.iter().any(|d| {
                d.object["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|r| r["uid"] == json!(uid) && r["blockOwnerDeletion"] == json!(true))
            });
            if !still_dependents {
                save(
                    store,
                    &i.key,
                    without_finalizer(&i.object, "foregroundDeletion"),
                );
                return true;
            }
        }
        if f.iter().any(|f| f == "orphan") && !has_dependents.contains_key(uid) {
            save(store, &i.key, without_finalizer(&i.object, "orphan"));
            return true;
        }
    }
    namespaces_and_crds(store, &items)
}

fn namespaces_and_crds(store: &mut Store, items: &[Item]) -> bool {
    for i in items.iter().filter(|i| deleting(&i.object)) {
        if i.key == (String::new(), "namespaces".to_string()) {
            let ns = i.object["metadata"]["name"].as_str().unwrap_or_default();
            let contents: Vec<&Item> = items
                .iter()
                .filter(|d| d.object["metadata"]["namespace"].as_str() == Some(ns))
                .collect();
            let mut acted = false;
            for d in &contents {
                if !deleting(&d.object) {
                    delete(store, &d.key, &d.object, Propagation::Background);
                    acted = true;
                }
            }
            if acted {
                return true;
            }
            if contents.is_empty()
                && i.object["spec"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| !f.is_empty())
            {
                let mut o = (*i.object).clone();
                o["spec"]["finalizers"] = json!([]);
                save(store, &i.key, o);
                return true;
            }
        }
        if i.key
            == (
                "apiextensions.k8s.io".to_string(),
                "customresourcedefinitions".to_string(),
            )
            && finalizers(&i.object).iter().any(|f| f == CLEANUP_FINALIZER)
        {
            let Some(def) = crate::crd::resource_def(&i.object) else {
                continue;
            };
            let key = def.key();
            let crs: Vec<Arc<Value>> = store.list(&key, None);
            let mut acted = false;
            for cr in &crs {
                if !deleting(cr) {
                    delete(store, &key, cr, Propagation::Background);
                    acted = true;
                }
            }
            if acted {
                return true;
            }
            if crs.is_empty() {
                save(
                    store,
                    &i.key,
                    without_finalizer(&i.object, CLEANUP_FINALIZER),
                );
                crate::crd::sync(store);
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(group: &str, plural: &str) -> ResKey {
        (group.to_string(), plural.to_string())
    }

    fn object(ns: &str, uid: &str, owners: &[&str]) -> Value {
        let refs: Vec<Value> = owners.iter().map(|o| json!({"uid": o})).collect();
        json!({"metadata": {"namespace": ns, "uid": uid, "ownerReferences": refs}})
    }

    fn deleting_with(mut o: Value, finalizers: &[&str]) -> Value {
        o["metadata"]["deletionTimestamp"] = json!("2026-12-02T00:00:00Z");
        o["metadata"]["finalizers"] = json!(finalizers);
        o
    }

    /// An index holding a Machine `m` and the DockerMachine `dm` it owns, with nothing pending.
    fn machine_and_infra() -> (Index, ResKey, Value, Value) {
        let mut index = Index::default();
        let dms = key("infrastructure.cluster.x-k8s.io", "dockermachines");
        let machine = object("ns", "m", &[]);
        let dm = object("ns", "dm", &["m"]);
        index.changed(&key("cluster.x-k8s.io", "machines"), None, Some(&machine));
        index.changed(&dms, None, Some(&dm));
        assert!(
            !index.pending,
            "an owner and its dependent give nothing to do"
        );
        (index, dms, machine, dm)
    }

    #[test]
    fn writes_that_touch_no_owner_relation_leave_the_collector_asleep() {
        let (mut index, dms, _, dm) = machine_and_infra();
        let mut updated = dm.clone();
        updated["status"] = json!({"ready": true});
        index.changed(&dms, Some(&dm), Some(&updated));
        let event = object("ns", "e", &[]);
        index.changed(&key("events.k8s.io", "events"), None, Some(&event));
        let finalizing = deleting_with(
            updated.clone(),
            &["dockermachine.infrastructure.cluster.x-k8s.io"],
        );
        index.changed(&dms, Some(&updated), Some(&finalizing));
        index.changed(&dms, Some(&finalizing), None);
        assert!(
            !index.pending,
            "status writes, Events and an unowned removal: {index:?}"
        );
    }

    #[test]
    fn an_owner_that_goes_wakes_the_collector_for_its_dependents() {
        let (mut index, _, machine, _) = machine_and_infra();
        index.changed(&key("cluster.x-k8s.io", "machines"), Some(&machine), None);
        assert!(index.pending);
    }

    #[test]
    fn a_dependent_of_an_absent_foreign_or_deleting_owner_wakes_the_collector() {
        let dms = key("infrastructure.cluster.x-k8s.io", "dockermachines");
        let mut absent = Index::default();
        absent.changed(&dms, None, Some(&object("ns", "dm", &["nobody"])));
        assert!(absent.pending, "absent owner");

        let mut foreign = Index::default();
        foreign.changed(
            &key("", "configmaps"),
            None,
            Some(&object("other", "cm", &[])),
        );
        assert!(!foreign.pending);
        foreign.changed(&dms, None, Some(&object("ns", "dm", &["cm"])));
        assert!(
            foreign.pending,
            "an owner in another namespace counts as absent"
        );

        let (mut deleting, dms, machine, dm) = machine_and_infra();
        let machines = key("cluster.x-k8s.io", "machines");
        let background = deleting_with(machine.clone(), &["machine.cluster.x-k8s.io"]);
        deleting.changed(&machines, Some(&machine), Some(&background));
        assert!(
            !deleting.pending,
            "a background deletion waits for the owner to go"
        );
        deleting.changed(&dms, Some(&dm), None);
        assert!(deleting.pending, "a dependent of a deleting owner went");
    }

    #[test]
    fn orphan_and_foreground_deletions_and_terminating_namespaces_wake_the_collector() {
        let machines = key("cluster.x-k8s.io", "machines");
        for finalizer in ["orphan", "foregroundDeletion"] {
            let (mut index, _, machine, _) = machine_and_infra();
            let deleting = deleting_with(machine.clone(), &[finalizer]);
            index.changed(&machines, Some(&machine), Some(&deleting));
            assert!(index.pending, "{finalizer}");
        }

        let mut index = Index::default();
        let namespaces = key("", "namespaces");
        let ns = json!({"metadata": {"name": "ns", "uid": "n"}});
        index.changed(&namespaces, None, Some(&ns));
        let terminating = deleting_with(ns.clone(), &[]);
        index.changed(&namespaces, Some(&ns), Some(&terminating));
        assert!(index.pending, "a namespace being deleted");
        index.pending = false;
        index.changed(&key("", "configmaps"), None, Some(&object("ns", "cm", &[])));
        assert!(
            index.pending,
            "any change while a namespace is being emptied"
        );
        index.changed(&namespaces, Some(&terminating), None);
        index.pending = false;
        index.changed(
            &key("", "configmaps"),
            None,
            Some(&object("ns", "cm2", &[])),
        );
        assert!(!index.pending, "the namespace is gone");
    }
}
