//! The retired versions v1alpha3 and v1alpha4 through a Kubernetes API (issue 38), with our CRDs
//! in CAPD 1.12's shape (listing those versions, which ours no longer do) in the test API server,
//! converting through our webhook server: the case of our manager behind CAPD 1.12's CRDs.
//!
//! - kube-apiserver keeps a watch cache for every version a CRD lists, served or not, and fills
//!   it by converting every stored object into that version through the webhook; a refused
//!   conversion makes its cacher fail and retry forever. The test API server does the same, and
//!   counts what each cache met.
//! - An installation upgraded from CAPD's v1alpha3 and v1alpha4 days holds objects stored in
//!   those versions, named in `status.storedVersions`: they are read, written by a controller's
//!   server-side apply, and migrated as CAPD 1.12's CRD migrator migrates them.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

mod webhook_support;

use std::collections::BTreeMap;
use std::time::Duration;

use capd::api::v1beta2;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testapiserver::cacher::WatchCacheStats;
use webhook_support::cluster::{
    Cluster, GROUP, NS, cluster_with_retired_versions as cluster, dynamic, one_of_every_kind,
};

/// Every version every CRD lists in CAPD 1.12's shape, as the test API server keys its watch
/// caches (a CRD with one version, DevMachinePool's, needs no conversion: nothing to check there).
fn listed_versions() -> Vec<String> {
    capd::api::crd::all()
        .unwrap()
        .iter()
        .filter(|crd| crd.spec.versions.len() > 1)
        .flat_map(|crd| {
            let retired = capd::api::crd::retired_versions(&crd.spec.names.kind);
            crd.spec
                .versions
                .iter()
                .map(|v| v.name.as_str())
                .chain(retired.iter().copied())
                .map(|v| format!("{}.{}/{v}", crd.spec.names.plural, crd.spec.group))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Waits (up to 20 s) until every cache in `keys` has been filled or has failed; returns them.
async fn caches_when_tried(
    cluster: &Cluster,
    keys: &[String],
) -> BTreeMap<String, WatchCacheStats> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let caches = cluster.api.watch_caches();
        let tried = keys
            .iter()
            .all(|k| caches.get(k).is_some_and(|s| s.fills + s.failures > 0));
        if tried || tokio::time::Instant::now() > deadline {
            return caches;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_kind_stored_every_listed_version_converts_and_none_is_refused() {
    let cluster = cluster().await;
    for (kind, spec) in one_of_every_kind() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/v1beta2"),
            "kind": kind,
            "metadata": {"name": kind.to_lowercase()},
            "spec": spec,
        }))
        .unwrap();
        dynamic(&cluster.client, "v1beta2", kind)
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
    let keys = listed_versions();
    for unserved in [
        "dockerclusters.infrastructure.cluster.x-k8s.io/v1alpha3",
        "dockerclustertemplates.infrastructure.cluster.x-k8s.io/v1alpha4",
        "dockermachinepools.infrastructure.cluster.x-k8s.io/v1alpha4",
    ] {
        assert!(keys.contains(&unserved.to_string()), "{keys:?}");
    }
    let caches = caches_when_tried(&cluster, &keys).await;
    let refused: Vec<String> = caches
        .iter()
        .filter(|(_, s)| s.failures > 0)
        .map(|(k, s)| format!("{k}: {}", s.last_error.clone().unwrap_or_default()))
        .collect();
    assert!(refused.is_empty(), "refused conversions: {refused:#?}");
    let unfilled: Vec<&String> = keys
        .iter()
        .filter(|k| caches.get(*k).is_none_or(|s| s.fills == 0))
        .collect();
    assert!(unfilled.is_empty(), "never filled: {unfilled:?}");
}

// ---- takeover of objects stored in the retired versions ----------------------------------------

/// An object as CAPD stored it in a retired version: kind, version, spec, status.
struct Stored {
    kind: &'static str,
    version: &'static str,
    spec: Value,
    status: Option<Value>,
}

impl Stored {
    fn name(&self) -> String {
        format!("{}-{}", self.kind.to_lowercase(), self.version)
    }
}

const READY: &str = "2021-06-01T00:00:00Z";

/// One object per kind and retired version its CRD lists, in CAPD's shapes of the time.
fn stored_by_capd() -> Vec<Stored> {
    let condition = json!([{"type": "Ready", "status": "True", "lastTransitionTime": READY}]);
    let mut out = Vec::new();
    for version in ["v1alpha3", "v1alpha4"] {
        let mut cluster_spec = json!({
            "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
            "failureDomains": {"fd2": {"controlPlane": true}, "fd1": {}},
        });
        if version == "v1alpha4" {
            cluster_spec["loadBalancer"] = json!({"imageTag": "v20210601"});
        }
        out.push(Stored {
            kind: "DockerCluster",
            version,
            spec: cluster_spec.clone(),
            status: Some(json!({"ready": true, "conditions": condition})),
        });
        if version == "v1alpha4" {
            out.push(Stored {
                kind: "DockerClusterTemplate",
                version,
                spec: json!({"template": {"spec": cluster_spec}}),
                status: None,
            });
        }
        out.push(Stored {
            kind: "DockerMachine",
            version,
            spec: json!({"providerID": "docker:////c1-m1", "customImage": "kindest/node:v1.21.1",
                         "bootstrapped": true}),
            status: Some(json!({"ready": true, "loadBalancerConfigured": true,
                                "addresses": [{"type": "InternalIP", "address": "172.18.0.4"}],
                                "conditions": condition})),
        });
        out.push(Stored {
            kind: "DockerMachineTemplate",
            version,
            spec: json!({"template": {"spec": {"customImage": "kindest/node:v1.21.1"}}}),
            status: None,
        });
        out.push(Stored {
            kind: "DockerMachinePool",
            version,
            spec: json!({"template": {"customImage": "kindest/node:v1.21.1"},
                         "providerIDList": ["docker:////c1-p1-a"]}),
            status: Some(json!({"ready": true, "replicas": 1,
                                "instances": [{"instanceName": "c1-p1-a", "ready": true}]})),
        });
    }
    out
}

/// Our CRD of `kind`, as installed by the harness.
async fn our_crd(cluster: &Cluster, kind: &str) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let name = format!("{}s.{GROUP}", kind.to_lowercase());
    crds.get(&name).await.unwrap()
}

/// Replaces the live CRD with `crd` and waits until the API server serves what it says.
async fn replace_crd(cluster: &Cluster, mut crd: CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let name = crd.metadata.name.clone().unwrap();
    crd.metadata.resource_version = crds.get(&name).await.unwrap().metadata.resource_version;
    crds.replace(&name, &PostParams::default(), &crd)
        .await
        .unwrap();
}

/// Stores `object` as CAPD did when `object.version` was the storage version: our CRD with that
/// version served and stored (as CAPD's CRD then had it), the object written in it, our CRD back.
async fn store_as_capd(cluster: &Cluster, object: &Stored) {
    let ours = our_crd(cluster, object.kind).await;
    let mut then = ours.clone();
    for version in &mut then.spec.versions {
        let old = version.name == object.version;
        version.served = old || version.served;
        version.storage = old;
        if old {
            version.subresources = ours
                .spec
                .versions
                .iter()
                .find(|v| v.storage)
                .and_then(|v| v.subresources.clone());
        }
    }
    replace_crd(cluster, then).await;
    let api = dynamic(&cluster.client, object.version, object.kind);
    let created: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/{}", object.version),
        "kind": object.kind,
        "metadata": {"name": object.name(), "namespace": NS},
        "spec": object.spec,
    }))
    .unwrap();
    api.create(&PostParams::default(), &created).await.unwrap();
    if let Some(status) = &object.status {
        api.patch_status(
            &object.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap();
    }
    replace_crd(cluster, ours).await;
}

/// What the v1beta2 object must hold of what CAPD stored (CAPD 1.12's field mapping).
fn assert_read_as_v1beta2(object: &Stored, hub: &Value) {
    let what = format!("{} {}", object.kind, object.version);
    let spec = &hub["spec"];
    let status = &hub["status"];
    match object.kind {
        "DockerCluster" => {
            assert_eq!(
                spec["failureDomains"],
                json!([{"name": "fd1", "controlPlane": false}, {"name": "fd2", "controlPlane": true}]),
                "{what}"
            );
            assert_eq!(status["initialization"]["provisioned"], true, "{what}");
            assert_eq!(
                status["deprecated"]["v1beta1"]["conditions"][0]["type"], "Ready",
                "{what}"
            );
            let tag = if object.version == "v1alpha4" {
                json!("v20210601")
            } else {
                Value::Null
            };
            assert_eq!(spec["loadBalancer"]["imageTag"], tag, "{what}");
        }
        "DockerClusterTemplate" => {
            assert_eq!(
                spec["template"]["spec"]["loadBalancer"]["imageTag"],
                "v20210601"
            );
            assert_eq!(spec["template"]["spec"]["failureDomains"][1]["name"], "fd2");
        }
        "DockerMachine" => {
            assert_eq!(spec["providerID"], "docker:////c1-m1", "{what}");
            // CAPD 1.14 removed `bootstrapped`: the node's files and its Node say it now.
            assert_eq!(spec["bootstrapped"], Value::Null, "{what}");
            assert_eq!(status["initialization"]["provisioned"], true, "{what}");
            assert_eq!(status["loadBalancerConfigured"], true, "{what}");
            assert_eq!(status["addresses"][0]["address"], "172.18.0.4", "{what}");
            assert_eq!(
                status["deprecated"]["v1beta1"]["conditions"][0]["lastTransitionTime"], READY,
                "{what}"
            );
        }
        "DockerMachineTemplate" => {
            assert_eq!(
                spec["template"]["spec"]["customImage"], "kindest/node:v1.21.1",
                "{what}"
            );
        }
        "DockerMachinePool" => {
            assert_eq!(spec["providerIDList"][0], "docker:////c1-p1-a", "{what}");
            assert_eq!(status["replicas"], 1, "{what}");
            assert_eq!(status["instances"][0]["instanceName"], "c1-p1-a", "{what}");
        }
        other => panic!("no expectation for {other}"),
    }
}

/// Decodes `hub` as the v1beta2 type our controllers read.
fn decodes_as_our_type(kind: &str, hub: &Value) -> Result<(), serde_json::Error> {
    let hub = hub.clone();
    match kind {
        "DockerCluster" => serde_json::from_value::<v1beta2::DockerCluster>(hub).map(drop),
        "DockerClusterTemplate" => {
            serde_json::from_value::<v1beta2::DockerClusterTemplate>(hub).map(drop)
        }
        "DockerMachine" => serde_json::from_value::<v1beta2::DockerMachine>(hub).map(drop),
        "DockerMachineTemplate" => {
            serde_json::from_value::<v1beta2::DockerMachineTemplate>(hub).map(drop)
        }
        _ => serde_json::from_value::<v1beta2::DockerMachinePool>(hub).map(drop),
    }
}

/// CAPD 1.12's CRD migrator's write: an apply of nothing but the object's identity, through the
/// status subresource for the kinds it configures so (DockerCluster, DockerMachine).
async fn migrate(api: &Api<DynamicObject>, kind: &str, live: &DynamicObject) -> DynamicObject {
    let name = live.metadata.name.clone().unwrap();
    let identity = json!({
        "apiVersion": format!("{GROUP}/v1beta2"),
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": live.metadata.uid,
            "resourceVersion": live.metadata.resource_version,
        },
    });
    let params = PatchParams::apply("crdmigrator");
    if matches!(kind, "DockerCluster" | "DockerMachine") {
        api.patch_status(&name, &params, &Patch::Apply(identity))
            .await
            .unwrap()
    } else {
        api.patch(&name, &params, &Patch::Apply(identity))
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_capd_stored_in_the_retired_versions_are_read_written_and_migrated() {
    let cluster = cluster().await;
    let objects = stored_by_capd();
    for object in &objects {
        store_as_capd(&cluster, object).await;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    for kind in [
        "DockerCluster",
        "DockerMachine",
        "DockerMachineTemplate",
        "DockerMachinePool",
    ] {
        let mut stored = our_crd(&cluster, kind)
            .await
            .status
            .unwrap()
            .stored_versions
            .unwrap();
        stored.sort();
        assert_eq!(stored, ["v1alpha3", "v1alpha4", "v1beta2"], "{kind}");
    }

    for object in &objects {
        let what = format!("{} {}", object.kind, object.version);
        let hub_api = dynamic(&cluster.client, "v1beta2", object.kind);
        // Read: in v1beta2, as our controllers read it, and in v1beta1.
        let hub = hub_api.get(&object.name()).await.unwrap();
        let hub_json = serde_json::to_value(&hub).unwrap();
        assert_read_as_v1beta2(object, &hub_json);
        decodes_as_our_type(object.kind, &hub_json)
            .unwrap_or_else(|e| panic!("{what}: our controllers cannot decode it: {e}"));
        let old = dynamic(&cluster.client, "v1beta1", object.kind)
            .get(&object.name())
            .await
            .unwrap();
        assert_eq!(old.metadata.uid, hub.metadata.uid, "{what}");
        assert!(
            hub.metadata
                .annotations
                .as_ref()
                .is_none_or(|a| !a.contains_key(capd::api::CONVERSION_DATA_ANNOTATION)),
            "{what}: no conversion data shows in v1beta2"
        );

        // Migrated as CAPD's CRD migrator does: the no-op apply rewrites the object in the
        // storage version (its resourceVersion moves), and a second one changes nothing.
        let migrated = migrate(&hub_api, object.kind, &hub).await;
        assert_ne!(
            migrated.metadata.resource_version, hub.metadata.resource_version,
            "{what}: rewritten in v1beta2"
        );
        assert_eq!(migrated.data["spec"], hub.data["spec"], "{what}");
        assert_eq!(migrated.data["status"], hub.data["status"], "{what}");
        let again = migrate(&hub_api, object.kind, &migrated).await;
        assert_eq!(
            again.metadata.resource_version, migrated.metadata.resource_version,
            "{what}: already in the storage version"
        );
    }

    // Written by a controller: our DockerMachine controller's status apply on a migrated object.
    let machines = dynamic(&cluster.client, "v1beta2", "DockerMachine");
    let status = json!({
        "apiVersion": format!("{GROUP}/v1beta2"), "kind": "DockerMachine",
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                   "message": "", "lastTransitionTime": READY}]},
    });
    machines
        .patch_status(
            "dockermachine-v1alpha3",
            &PatchParams::apply("capd-controller-manager").force(),
            &Patch::Apply(status),
        )
        .await
        .unwrap();
    let written = machines.get("dockermachine-v1alpha3").await.unwrap();
    assert_eq!(written.data["status"]["conditions"][0]["reason"], "Ready");
    assert_eq!(
        written.data["status"]["initialization"]["provisioned"],
        true
    );

    // Our CRD migrator rewrites every object in the storage version and trims storedVersions;
    // our CRDs, without the retired versions, are then accepted.
    let names: Vec<String> = [
        "DockerCluster",
        "DockerClusterTemplate",
        "DockerMachine",
        "DockerMachineTemplate",
        "DockerMachinePool",
    ]
    .iter()
    .map(|kind| format!("{}s.{GROUP}", kind.to_lowercase()))
    .collect();
    let migrator = capd::crdmigrator::Migrator::new(
        cluster.client.clone(),
        names.clone(),
        capd::crdmigrator::Phases::without(&[]),
        capd::runtime::Metrics::new(),
    );
    for (name, result) in migrator.migrate_all().await {
        let outcome = result.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(outcome.stored_versions, ["v1beta2"], "{name}");
    }
    for name in &names {
        let mut without_retired = crds.get(name).await.unwrap();
        without_retired.spec.versions.retain(|v| v.served);
        replace_crd(&cluster, without_retired).await;
    }
    for object in &objects {
        let read = dynamic(&cluster.client, "v1beta2", object.kind)
            .get(&object.name())
            .await
            .unwrap();
        assert_read_as_v1beta2(object, &serde_json::to_value(&read).unwrap());
    }
}
