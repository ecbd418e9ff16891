//! What the suite prints when a scenario fails, and the release of an existing cluster's
//! namespaces. Both run on a thread of their own with their own runtime: they are called from
//! `Drop`, possibly while a panic unwinds through the scenario's runtime.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::Env;
use crate::core::kinds;
use crate::docker::cluster_containers_table;
use crate::env::client_from_yaml;

/// Lines of the manager log a failure report shows.
const LOG_TAIL: usize = 150;
/// Warning and error lines of the manager log the report's short summary repeats.
const PROBLEM_TAIL: usize = 20;

/// Runs `work` on a fresh thread and runtime, giving up after a minute.
fn on_own_runtime<F, Fut, T>(work: F) -> Option<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
    T: Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        if let Ok(runtime) = runtime {
            let _ = tx.send(runtime.block_on(work()));
        }
    });
    rx.recv_timeout(Duration::from_secs(60)).ok()
}

/// The manager log tail, our objects as YAML, their Events and `docker ps -a` for the clusters,
/// then a short summary (every object's conditions, one line each, and the manager's last
/// warnings and errors): a log that keeps only a failure's head and tail still shows why.
pub fn failure_report(env: &Env) -> String {
    let log = env.manager_log();
    let lines: Vec<&str> = log.lines().collect();
    let start = lines.len().saturating_sub(LOG_TAIL);
    let kubeconfig = env.kubeconfig_path();
    let mut namespaces = env.namespaces.clone();
    if !namespaces.contains(&env.namespace) {
        namespaces.push(env.namespace.clone());
    }
    let (objects, conditions) = on_own_runtime(move || objects_yaml(kubeconfig, namespaces))
        .unwrap_or_else(|| {
            let none = "(the management API did not answer)".to_string();
            (none.clone(), none)
        });
    let problems: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
        .collect();
    let problems = &problems[problems.len().saturating_sub(PROBLEM_TAIL)..];
    format!(
        "---- manager log (last {LOG_TAIL} lines) ----\n{}\n---- objects ----\n{objects}\n---- docker ps -a (our clusters) ----\n{}\n---- conditions ----\n{conditions}---- manager warnings and errors (last {PROBLEM_TAIL}) ----\n{}",
        lines[start..].join("\n"),
        cluster_containers_table(&env.clusters),
        problems.join("\n")
    )
}

/// One line per condition of an object: `Kind/name Type=Status Reason: message`.
fn condition_lines(kind: &str, object: &DynamicObject) -> String {
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let conditions = object.data["status"]["conditions"].as_array();
    let mut out = String::new();
    for c in conditions.into_iter().flatten() {
        let text = |key: &str| c[key].as_str().unwrap_or_default().to_string();
        out.push_str(&format!(
            "{kind}/{name} {}={} {}: {}\n",
            text("type"),
            text("status"),
            text("reason"),
            text("message")
        ));
    }
    out
}

/// Our objects as YAML with their Events, and their conditions one line each.
async fn objects_yaml(kubeconfig: PathBuf, namespaces: Vec<String>) -> (String, String) {
    let Ok(yaml) = std::fs::read_to_string(&kubeconfig) else {
        let error = format!("(cannot read {})", kubeconfig.display());
        return (error.clone(), error);
    };
    let client = client_from_yaml(&yaml).await;
    let mut out = String::new();
    let mut conditions = String::new();
    for namespace in &namespaces {
        for kind in kinds() {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &kind);
            let Ok(list) = api.list(&ListParams::default()).await else {
                continue;
            };
            for mut object in list.items {
                conditions.push_str(&condition_lines(&kind.kind, &object));
                object.metadata.managed_fields = None;
                let mut value = serde_json::to_value(&object).unwrap_or_default();
                value["apiVersion"] = json!(kind.api_version);
                value["kind"] = json!(kind.kind);
                out.push_str("---\n");
                out.push_str(&serde_saphyr::to_string(&value).unwrap_or_default());
            }
        }
        let events: Api<Event> = Api::namespaced(client.clone(), namespace);
        if let Ok(list) = events.list(&ListParams::default()).await {
            out.push_str(&format!("---- events in {namespace} ----\n"));
            for e in list.items {
                out.push_str(&format!(
                    "{} {} {}/{}: {}\n",
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.involved_object.kind.unwrap_or_default(),
                    e.involved_object.name.unwrap_or_default(),
                    e.message.unwrap_or_default()
                ));
            }
        }
    }
    (out, conditions)
}

/// Against an existing cluster: strips the finalizers of our objects in the namespaces the suite
/// created (the manager is gone) and deletes the namespaces.
pub fn release_namespaces(kubeconfig: &Path, namespaces: &[String]) {
    let kubeconfig = kubeconfig.to_path_buf();
    let namespaces = namespaces.to_vec();
    let _ = on_own_runtime(move || async move {
        let Ok(yaml) = std::fs::read_to_string(&kubeconfig) else {
            return String::new();
        };
        let client = client_from_yaml(&yaml).await;
        for namespace in &namespaces {
            for kind in kinds() {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), namespace, &kind);
                let Ok(list) = api.list(&ListParams::default()).await else {
                    continue;
                };
                for object in list.items {
                    let name = object.metadata.name.unwrap_or_default();
                    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
                    let _ = api.patch(&name, &PatchParams::default(), &patch).await;
                }
            }
            let api: Api<Namespace> = Api::all(client.clone());
            let _ = api.delete(namespace, &Default::default()).await;
        }
        String::new()
    });
}
