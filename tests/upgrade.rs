//! Upgrades as `clusterctl upgrade` makes them, on the test API server: the old components' CRDs
//! installed and objects stored in older versions, then the components replaced (our CRDs applied
//! over the old ones), then the new manager started, whose CRD migrator rewrites every object in
//! the storage version and trims `status.storedVersions`. Objects keep their identity (uid) and
//! content, and the next release, which drops v1beta1 (as Cluster API plans for 1.16), applies.
//!
//! The manager runs in-process (`capd::manager::run`) without controllers; conversions go to our
//! webhook server, which also stands in for CAPD 1.12.7's (the same conversions).
//!
//! - from CAPD 1.12.7's CRDs (`../shared/reference/crds/capd-release-1.12/`; skipped with a
//!   message when absent), objects stored at v1beta1, and at v1alpha4;
//! - from this project's previous release (its CRDs read with `git show 1c38a3c:...`; skipped
//!   with a message without git or that commit);
//! - a second manager starting in the middle of a migration;
//! - without the storage version phase, the same upgrade leaves v1beta1 stored and the next
//!   release's CRD is refused: what the scenarios check fails without the migrator.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod webhook_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use capd::crdmigrator::OBSERVED_GENERATION_ANNOTATION;
use capd::manager::{Args, Wiring};
use clap::Parser;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use webhook_support::cluster::{Cluster, GROUP, NS, bare_cluster, dynamic};

const CAPD_1_12: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/reference/crds/capd-release-1.12"
);
/// The commit before this work: our previous release's components.
const PREVIOUS_RELEASE: &str = "1c38a3c";
const IMAGE: &str = "kindest/node:v1.31.0";

/// Minimal stand-ins of Cluster API core's Cluster and Machine CRDs, which the manager waits for.
fn core_crds() -> Vec<Value> {
    ["Cluster", "Machine"]
        .iter()
        .map(|kind| {
            let plural = format!("{}s", kind.to_lowercase());
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.cluster.x-k8s.io")},
                "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
                         "names": {"plural": plural, "kind": kind},
                         "versions": [{"name": "v1beta2", "served": true, "storage": true,
                                       "schema": {"openAPIV3Schema": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": true}}}]},
            })
        })
        .collect()
}

/// CAPD 1.12.7's CRDs as its components install them (kustomize's patch makes conversion go
/// through the webhook); `None` without the reference.
fn capd_1_12_crds() -> Option<Vec<Value>> {
    let dir = Path::new(CAPD_1_12);
    if !dir.is_dir() {
        println!("SKIPPED: CAPD 1.12 CRDs not found at {CAPD_1_12}");
        return None;
    }
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    Some(
        files
            .iter()
            .map(|path| {
                let mut crd: Value =
                    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
                crd["spec"]["conversion"] = json!({"strategy": "Webhook",
                    "webhook": {"conversionReviewVersions": ["v1", "v1beta1"]}});
                crd
            })
            .collect(),
    )
}

/// Our previous release's CRDs, from git; `None` (with a message) without git or the commit.
fn previous_release_crds() -> Option<Vec<Value>> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let Some(listing) = git(&[
        "ls-tree",
        "--name-only",
        PREVIOUS_RELEASE,
        "config/crd/bases/",
    ]) else {
        println!("SKIPPED: git or commit {PREVIOUS_RELEASE} not available");
        return None;
    };
    Some(
        listing
            .lines()
            .filter(|f| f.ends_with(".yaml"))
            .map(|file| {
                let text = git(&["show", &format!("{PREVIOUS_RELEASE}:{file}")]).unwrap();
                serde_saphyr::from_str(&text).unwrap()
            })
            .collect(),
    )
}

/// Our CRDs, as committed.
fn our_crds() -> Vec<Value> {
    capd::api::crd::all()
        .unwrap()
        .iter()
        .map(|crd| {
            let path = format!(
                "{}/config/crd/bases/{}",
                env!("CARGO_MANIFEST_DIR"),
                capd::api::crd::file_name(crd)
            );
            serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        })
        .collect()
}

fn name_of(crd: &Value) -> String {
    crd["metadata"]["name"].as_str().unwrap().to_owned()
}

/// Creates or replaces each CRD, as `clusterctl` applies a provider's components; returns the
/// API server's refusals.
async fn apply_crds(cluster: &Cluster, crds: Vec<Value>) -> Vec<String> {
    let api: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let mut refused = Vec::new();
    for crd in crds {
        let mut crd: CustomResourceDefinition =
            serde_json::from_value(cluster.converting_through_our_webhook(crd)).unwrap();
        let name = crd.metadata.name.clone().unwrap();
        let result = match api.get_opt(&name).await.unwrap() {
            Some(live) => {
                crd.metadata.resource_version = live.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &crd).await
            }
            None => api.create(&PostParams::default(), &crd).await,
        };
        if let Err(kube::Error::Api(status)) = result {
            refused.push(status.message);
        }
    }
    refused
}

async fn crd(cluster: &Cluster, name: &str) -> CustomResourceDefinition {
    Api::<CustomResourceDefinition>::all(cluster.client.clone())
        .get(name)
        .await
        .unwrap()
}

fn stored_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default()
}

fn crd_name(kind: &str) -> String {
    format!("{}s.{GROUP}", kind.to_lowercase())
}

/// Stores an object of `kind` at `version`, as the components of the time did when `version` was
/// the storage version: the CRD made to serve and store it for the write, then put back.
async fn store_at(cluster: &Cluster, kind: &str, version: &str, name: &str, spec: Value) {
    let api: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let live = crd(cluster, &crd_name(kind)).await;
    let mut then = live.clone();
    let subresources = live
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .and_then(|v| v.subresources.clone());
    for v in &mut then.spec.versions {
        v.storage = v.name == version;
        if v.storage {
            v.served = true;
            v.subresources = subresources.clone();
        }
    }
    api.replace(&crd_name(kind), &PostParams::default(), &then)
        .await
        .unwrap();
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/{version}"), "kind": kind,
        "metadata": {"name": name, "namespace": NS}, "spec": spec,
    }))
    .unwrap();
    dynamic(&cluster.client, version, kind)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let mut back = live;
    back.metadata.resource_version = crd(cluster, &crd_name(kind))
        .await
        .metadata
        .resource_version;
    api.replace(&crd_name(kind), &PostParams::default(), &back)
        .await
        .unwrap();
}

/// Starts a manager (no controllers: the migrator runs before them) with `flags`.
fn start_manager(
    cluster: &Cluster,
    flags: &[&str],
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let kubeconfig = format!("--kubeconfig={}", cluster.api.kubeconfig_path().display());
    let mut argv = vec![
        "manager",
        kubeconfig.as_str(),
        "--health-addr=0",
        "--diagnostics-address=0",
        "--webhook-cert-dir=/nonexistent/capd-upgrade-test",
    ];
    argv.extend(flags);
    let args = Args::try_parse_from(argv).unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let task = tokio::spawn(async move {
        capd::manager::run(args, Wiring::without_controllers(), token)
            .await
            .unwrap();
    });
    (stop, task)
}

/// Waits (up to 20 s) until the migrator has finished every CRD of ours: its annotation names
/// the CRD's generation.
async fn wait_migrated(cluster: &Cluster) {
    for _ in 0..200 {
        let mut done = true;
        for name in our_crds().iter().map(name_of) {
            let crd = crd(cluster, &name).await;
            let observed = crd
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(OBSERVED_GENERATION_ANNOTATION).cloned());
            done &= observed == crd.metadata.generation.map(|g| g.to_string());
        }
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the migrator did not finish within 20 s");
}

/// `kind/name` → uid of every object of `kinds`, read at v1beta2.
async fn identities(cluster: &Cluster, kinds: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for kind in kinds {
        for o in dynamic(&cluster.client, "v1beta2", kind)
            .list(&Default::default())
            .await
            .unwrap()
        {
            out.insert(
                format!("{kind}/{}", o.metadata.name.unwrap()),
                o.metadata.uid.unwrap(),
            );
        }
    }
    out
}

/// The next release without v1beta1: applies only once nothing is stored at v1beta1.
async fn drop_v1beta1(cluster: &Cluster, kind: &str) -> Result<(), String> {
    let mut crd = our_crds()
        .into_iter()
        .find(|c| c["spec"]["names"]["kind"] == kind)
        .unwrap();
    crd["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .retain(|v| v["name"] != "v1beta1");
    match apply_crds(cluster, vec![crd]).await.pop() {
        None => Ok(()),
        Some(refusal) => Err(refusal),
    }
}

const KINDS: [&str; 3] = ["DockerCluster", "DockerMachine", "DevMachine"];

/// Old components' CRDs installed, one object of each of [`KINDS`] stored at v1beta1.
async fn installation(old_crds: Vec<Value>) -> Cluster {
    let cluster = bare_cluster().await;
    assert!(apply_crds(&cluster, core_crds()).await.is_empty());
    let refused = apply_crds(&cluster, old_crds).await;
    assert!(refused.is_empty(), "{refused:?}");
    store_at(&cluster, "DockerCluster", "v1beta1", "c1", json!({})).await;
    store_at(
        &cluster,
        "DockerMachine",
        "v1beta1",
        "m1",
        json!({"customImage": IMAGE}),
    )
    .await;
    store_at(
        &cluster,
        "DevMachine",
        "v1beta1",
        "d1",
        json!({"backend": {"docker": {"customImage": IMAGE}}}),
    )
    .await;
    for kind in KINDS {
        let stored = stored_versions(&crd(&cluster, &crd_name(kind)).await);
        assert!(
            stored.contains(&"v1beta1".to_string()),
            "{kind}: {stored:?}"
        );
    }
    cluster
}

/// Components replaced, the new manager run: every CRD ends with `[v1beta2]` stored, the objects
/// are the same ones with the same content, and v1beta1 can go.
async fn upgrade_and_check(cluster: &Cluster) {
    let before = identities(cluster, &KINDS).await;
    let refused = apply_crds(cluster, our_crds()).await;
    assert!(
        refused.is_empty(),
        "clusterctl's CRD update refused: {refused:?}"
    );
    let (stop, manager) = start_manager(cluster, &[]);
    wait_migrated(cluster).await;
    stop.cancel();
    manager.await.unwrap();
    for name in our_crds().iter().map(name_of) {
        assert_eq!(
            stored_versions(&crd(cluster, &name).await),
            ["v1beta2"],
            "{name}"
        );
    }
    assert_eq!(
        identities(cluster, &KINDS).await,
        before,
        "nothing recreated"
    );
    let m1 = dynamic(&cluster.client, "v1beta2", "DockerMachine")
        .get("m1")
        .await
        .unwrap();
    assert_eq!(m1.data["spec"]["customImage"], IMAGE);
    for kind in KINDS {
        drop_v1beta1(cluster, kind).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_capd_1_12_with_objects_stored_at_v1beta1() {
    let Some(old) = capd_1_12_crds() else { return };
    let cluster = installation(old).await;
    upgrade_and_check(&cluster).await;
}

/// An installation whose CRDs still list v1alpha4 in `status.storedVersions`: the CRD update is
/// refused (CAPD 1.13 and we dropped v1alpha4) until the objects are migrated, which CAPD 1.12.7's
/// manager does at its start-up (here our manager against CAPD's CRDs, the same migration through
/// the same conversions); then the upgrade goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_capd_1_12_with_objects_stored_at_v1alpha4() {
    let Some(old) = capd_1_12_crds() else { return };
    let cluster = installation(old.clone()).await;
    store_at(
        &cluster,
        "DockerMachine",
        "v1alpha4",
        "m0",
        json!({"customImage": IMAGE}),
    )
    .await;
    let refused = apply_crds(&cluster, our_crds()).await;
    assert!(
        refused
            .iter()
            .any(|r| r.contains(
                r#"status.storedVersions[0]: Invalid value: "v1alpha4": missing from spec.versions"#
            ) || r.contains(r#"Invalid value: "v1alpha4": missing from spec.versions"#)),
        "{refused:?}"
    );
    // The old CRDs are still in place (a refused update changes nothing); their manager migrates.
    assert!(apply_crds(&cluster, old).await.is_empty());
    let (stop, manager) = start_manager(&cluster, &[]);
    let machines = crd_name("DockerMachine");
    for _ in 0..200 {
        if stored_versions(&crd(&cluster, &machines).await) == ["v1beta2"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
    manager.await.unwrap();
    assert_eq!(
        stored_versions(&crd(&cluster, &machines).await),
        ["v1beta2"]
    );
    upgrade_and_check(&cluster).await;
    let m0 = dynamic(&cluster.client, "v1beta2", "DockerMachine")
        .get("m0")
        .await
        .unwrap();
    assert_eq!(m0.data["spec"]["customImage"], IMAGE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_our_previous_release_with_objects_stored_at_v1beta1() {
    let Some(old) = previous_release_crds() else {
        return;
    };
    let listed: Vec<String> = old.iter().map(name_of).collect();
    assert!(listed.contains(&crd_name("DockerMachine")), "{listed:?}");
    let cluster = installation(old).await;
    upgrade_and_check(&cluster).await;
}

/// Two managers during a rollout, without leader election: the second starts while the first is
/// migrating; both finish and agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_manager_starting_in_the_middle_of_a_migration() {
    let cluster = bare_cluster().await;
    assert!(apply_crds(&cluster, core_crds()).await.is_empty());
    assert!(apply_crds(&cluster, our_crds()).await.is_empty());
    for i in 0..150 {
        store_or_create(&cluster, i).await;
    }
    let before = identities(&cluster, &["DockerMachine"]).await;
    assert_eq!(before.len(), 150);
    cluster.api.reset_write_counts();
    let (stop_a, a) = start_manager(&cluster, &[]);
    let patches = format!("patch dockermachines.{GROUP}/status");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first manager did not start migrating within 60 s"
        );
        let written = cluster
            .api
            .write_counts()
            .get(&patches)
            .copied()
            .unwrap_or(0);
        if written >= 10 {
            assert!(
                written < 150,
                "the first manager finished before the second started"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let (stop_b, b) = start_manager(&cluster, &[]);
    wait_migrated(&cluster).await;
    let machines = crd(&cluster, &crd_name("DockerMachine")).await;
    assert_eq!(stored_versions(&machines), ["v1beta2"]);
    stop_a.cancel();
    stop_b.cancel();
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(identities(&cluster, &["DockerMachine"]).await, before);
    drop_v1beta1(&cluster, "DockerMachine").await.unwrap();
}

/// The first object stored at v1beta1 (the CRD switched once), the others created at v1beta1
/// while v1beta1 is still the storage version.
async fn store_or_create(cluster: &Cluster, i: usize) {
    if i == 0 {
        store_at(
            cluster,
            "DockerMachine",
            "v1beta1",
            "m0",
            json!({"customImage": IMAGE}),
        )
        .await;
        // Keep v1beta1 stored for the rest (put back at the end by the first apply of ours).
        let api: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
        let mut live = crd(cluster, &crd_name("DockerMachine")).await;
        for v in &mut live.spec.versions {
            v.storage = v.name == "v1beta1";
        }
        api.replace(&crd_name("DockerMachine"), &PostParams::default(), &live)
            .await
            .unwrap();
        return;
    }
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1beta1"), "kind": "DockerMachine",
        "metadata": {"name": format!("m{i}"), "namespace": NS}, "spec": {"customImage": IMAGE},
    }))
    .unwrap();
    dynamic(&cluster.client, "v1beta1", "DockerMachine")
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    if i == 149 {
        assert!(apply_crds(cluster, our_crds()).await.is_empty());
    }
}

/// The same upgrade with the storage version phase skipped: v1beta1 stays stored and the next
/// release's CRD is refused with kube-apiserver's message. The scenarios above fail without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_migration_the_next_release_is_refused() {
    let Some(old) = previous_release_crds().or_else(capd_1_12_crds) else {
        return;
    };
    let cluster = installation(old).await;
    assert!(apply_crds(&cluster, our_crds()).await.is_empty());
    let (stop, manager) = start_manager(
        &cluster,
        &["--skip-crd-migration-phases=StorageVersionMigration"],
    );
    wait_migrated(&cluster).await;
    stop.cancel();
    manager.await.unwrap();
    let stored = stored_versions(&crd(&cluster, &crd_name("DockerMachine")).await);
    assert!(stored.contains(&"v1beta1".to_string()), "{stored:?}");
    let refusal = drop_v1beta1(&cluster, "DockerMachine").await.unwrap_err();
    assert!(
        refusal.contains(r#"Invalid value: "v1beta1": missing from spec.versions; v1beta1 was previously a storage version"#),
        "{refusal}"
    );
}
