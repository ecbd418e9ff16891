//! Background garbage collection: dependents of deleted owners, foreground and orphan
//! finalizers, namespace termination and CRD cleanup.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::deletion::{DeleteOptions, Propagation, delete_object};
use crate::resources::{Representation, ResKey, ResourceDef};
use crate::state::Shared;
use crate::store::{Store, object_key};

/// Runs until shutdown, sweeping after every write and at `gc_interval`.
pub async fn run(shared: Arc<Shared>) {
    let shutdown = shared.shutdown.clone();
    loop {
        tokio::select! {
            _ = shared.gc_wakeup.notified() => {}
            _ = tokio::time::sleep(shared.gc_interval) => {}
            _ = crate::state::until_shutdown(shutdown.clone()) => return,
        }
        let mut store = shared.store.lock().await;
        for _ in 0..1000 {
            if !sweep(&mut store) {
                break;
            }
        }
    }
}

struct Item {
    key: ResKey,
    object: Arc<Value>,
}

fn finalizers(o: &Value) -> Vec<String> {
    o["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn has(o: &Value, finalizer: &str) -> bool {
    finalizers(o).iter().any(|f| f == finalizer)
}

fn deleting(o: &Value) -> bool {
    !o["metadata"]["deletionTimestamp"].is_null()
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
            && finalizers(&i.object)
                .iter()
                .any(|f| f == crate::crd::CLEANUP_FINALIZER)
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
                    without_finalizer(&i.object, crate::crd::CLEANUP_FINALIZER),
                );
                crate::crd::sync(store);
                return true;
            }
        }
    }
    false
}
