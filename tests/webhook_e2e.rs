//! End to end through a Kubernetes API: our CRDs (as generated into `config/crd/bases/`) installed
//! in the test API server with conversion through our webhook server, reached like a cluster
//! Service (`webhook-service.system.svc`) with a CA bundle. A v1beta1 client reads and writes
//! objects stored as v1beta2, and what it cannot see survives its writes. The test API server
//! does not call admission webhooks, so the tests send the AdmissionReviews a kube-apiserver
//! would send (the object as converted to v1beta2) to the same webhook server themselves.

// Test helpers: a failed expectation anywhere in this test crate is a test failure with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

mod webhook_support;

use base64::Engine;
use capd::api::{v1beta1, v1beta2};
use capd::webhooks::{Endpoint, Kind};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use webhook_support::cluster::{Cluster, GROUP, NS, cluster, dynamic, one_of_every_kind};
use webhook_support::{client_config, request};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_client_reads_and_writes_docker_clusters_stored_as_v1beta2() {
    let cluster = cluster().await;
    let old: Api<v1beta1::DockerCluster> = Api::namespaced(cluster.client.clone(), NS);
    let new: Api<v1beta2::DockerCluster> = Api::namespaced(cluster.client.clone(), NS);

    // Created through v1beta1 (failure domains as a map) ...
    let created: v1beta1::DockerCluster = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1beta1"),
        "kind": "DockerCluster",
        "metadata": {"name": "c1"},
        "spec": {
            "controlPlaneEndpoint": {"host": "", "port": 6443},
            "failureDomains": {"fd2": {"controlPlane": true}, "fd1": {}},
        },
    }))
    .unwrap();
    old.create(&PostParams::default(), &created).await.unwrap();

    // ... is a v1beta2 object (a sorted list) for v1beta2 clients.
    let stored = new.get("c1").await.unwrap();
    let domains: Vec<(String, Option<bool>)> = stored
        .spec
        .failure_domains
        .iter()
        .map(|d| (d.name.clone(), d.control_plane))
        .collect();
    assert_eq!(
        domains,
        [("fd1".into(), Some(false)), ("fd2".into(), Some(true))]
    );
    assert_eq!(stored.spec.control_plane_endpoint.port, 6443);

    // The controller (a v1beta2 client) reports provisioning and a condition ...
    let status = json!({
        "apiVersion": format!("{GROUP}/v1beta2"),
        "kind": "DockerCluster",
        "status": {
            "initialization": {"provisioned": true},
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "Ready", "message": "",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
            }],
        },
    });
    new.patch_status("c1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();

    // ... which a v1beta1 client sees as `ready` ...
    let seen = old.get("c1").await.unwrap();
    assert!(seen.status.as_ref().unwrap().ready, "{seen:?}");

    // ... and its spec edit through v1beta1 keeps the v1beta2-only data.
    let mut edited = seen.clone();
    edited.spec.load_balancer.image_tag = "v2".into();
    old.replace("c1", &PostParams::default(), &edited)
        .await
        .unwrap();
    let after = new.get("c1").await.unwrap();
    assert_eq!(after.spec.load_balancer.image_tag, "v2");
    let status = after.status.unwrap();
    assert_eq!(status.initialization.provisioned, Some(true));
    assert_eq!(status.conditions.len(), 1);
    assert_eq!(status.conditions[0].type_, "Ready");
    assert!(
        !after
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(capd::api::CONVERSION_DATA_ANNOTATION),
        "the conversion-data annotation never reaches v1beta2 clients"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_round_trips_through_a_v1beta1_writer() {
    let cluster = cluster().await;
    let objects = one_of_every_kind();
    for (kind, spec) in objects {
        if capd::api::crd::V1BETA2_ONLY.contains(&kind) {
            continue; // no v1beta1 to write through
        }
        let hub = dynamic(&cluster.client, "v1beta2", kind);
        let spoke = dynamic(&cluster.client, "v1beta1", kind);
        let name = kind.to_lowercase();
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/v1beta2"),
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        }))
        .unwrap();
        hub.create(&PostParams::default(), &object).await.unwrap();

        // A v1beta1 client reads it and writes it back with a label of its own.
        let mut seen = spoke.get(&name).await.unwrap();
        assert_eq!(
            seen.types.as_ref().unwrap().api_version,
            format!("{GROUP}/v1beta1"),
            "{kind}"
        );
        seen.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("edited-by".into(), "v1beta1".into());
        spoke
            .replace(&name, &PostParams::default(), &seen)
            .await
            .unwrap();

        let after = hub.get(&name).await.unwrap();
        assert_eq!(
            after.data["spec"], spec,
            "{kind}: spec survives the v1beta1 write"
        );
        assert_eq!(
            after.metadata.labels.unwrap_or_default()["edited-by"],
            "v1beta1",
            "{kind}"
        );
    }
}

/// What our mutating webhook makes of `object` on creation: the object with the response's
/// patch applied.
async fn defaulted(cluster: &Cluster, object: &Value) -> Value {
    let kind: Kind = Kind::ALL
        .into_iter()
        .find(|k| object["kind"] == k.name())
        .unwrap();
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("mutate-{}", object["metadata"]["name"].as_str().unwrap()),
        "kind": {"group": GROUP, "version": "v1beta2", "kind": kind.name()},
        "resource": {"group": GROUP, "version": "v1beta2", "resource": kind.plural()},
        "namespace": NS,
        "operation": "CREATE",
        "object": object,
    }});
    let answer = request_json(
        cluster,
        &Endpoint::Mutate(kind).path(),
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{response}");
    let mut object = object.clone();
    if let Some(patch) = response["patch"].as_str() {
        let patch = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
    }
    object
}

/// What a kube-apiserver asks our validating webhook about `object` (a v1beta2 object, as the
/// API server converts it for a `matchPolicy: Equivalent` webhook); returns the response.
async fn admit(
    cluster: &Cluster,
    operation: &str,
    object: &Value,
    old: Option<&Value>,
    dry_run: bool,
) -> Value {
    let kind: Kind = Kind::ALL
        .into_iter()
        .find(|k| object["kind"] == k.name())
        .unwrap();
    let mut request = json!({
        "uid": format!("{operation}-{}", object["metadata"]["name"].as_str().unwrap()),
        "kind": {"group": GROUP, "version": "v1beta2", "kind": kind.name()},
        "resource": {"group": GROUP, "version": "v1beta2", "resource": kind.plural()},
        "name": object["metadata"]["name"],
        "namespace": NS,
        "operation": operation,
        "object": object,
        "dryRun": dry_run,
    });
    if let Some(old) = old {
        request["oldObject"] = old.clone();
    }
    let review =
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let answer = request_json(
        cluster,
        &Endpoint::Validate(kind).path(),
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    answer["response"].clone()
}

async fn request_json(cluster: &Cluster, path: &str, body: Vec<u8>) -> Value {
    let answer = request(
        cluster.webhook,
        client_config(&[cluster.ca.der()], &[&rustls::version::TLS13]),
        "POST",
        path,
        Some("application/json"),
        body,
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200, "{path}");
    answer.json()
}

/// Issue 12, "done when": the pool objects exactly as CAPD 1.12's templates write them are
/// accepted through our CRDs, conversion and admission webhooks: the quick-start ClusterClass's
/// DockerMachinePoolTemplate (as release 1.12 writes it, and in the v1beta1 form of earlier
/// releases), the DockerMachinePool of the machine-pool example (no spec at all, v1beta1), and
/// the DockerMachinePool the topology controller makes from the template for
/// `workers.machinePools` of the development-mp flavor, with the ClusterClass's customImage patch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capd_pool_objects_are_accepted_through_conversion_and_admission() {
    let cluster = cluster().await;
    let quick_start = json!({"spec": {"template": {"spec": {"template": {}}}}});
    let objects = [
        (
            "v1beta2",
            "DockerMachinePoolTemplate",
            "quick-start-default-worker-machinepooltemplate",
            quick_start.clone(),
        ),
        (
            "v1beta1",
            "DockerMachinePoolTemplate",
            "quick-start-default-worker-machinepooltemplate-v1beta1",
            quick_start,
        ),
        ("v1beta1", "DockerMachinePool", "worker-dmp-0", json!({})),
        (
            "v1beta2",
            "DockerMachinePool",
            "dev-mp-mp-0-x7k2p",
            json!({
                "metadata": {"labels": {
                    "cluster.x-k8s.io/cluster-name": "dev-mp",
                    "topology.cluster.x-k8s.io/owned": "",
                    "topology.cluster.x-k8s.io/pool-name": "mp-0",
                }},
                "spec": {"template": {"customImage": "kindest/node:v1.34.0"}},
            }),
        ),
    ];
    for (version, kind, name, body) in objects {
        let mut object = json!({
            "apiVersion": format!("{GROUP}/{version}"),
            "kind": kind,
            "metadata": {"name": name, "namespace": NS},
        });
        if let Some(labels) = body.pointer("/metadata/labels") {
            object["metadata"]["labels"] = labels.clone();
        }
        if let Some(spec) = body.get("spec") {
            object["spec"] = spec.clone();
        }
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        dynamic(&cluster.client, version, kind)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{kind} {version} {name} refused: {e}"));
        // What our validating webhook gets: the object converted to v1beta2.
        let hub = dynamic(&cluster.client, "v1beta2", kind)
            .get(name)
            .await
            .unwrap();
        let hub = serde_json::to_value(&hub).unwrap();
        let response = admit(&cluster, "CREATE", &hub, None, false).await;
        assert_eq!(
            response["allowed"], true,
            "{kind} {version} {name}: {response}"
        );
    }

    // The topology controller computes the pool template with the ClusterClass's customImage
    // patch (/spec/template/spec/template/customImage) in a dry run: allowed. The same change
    // for real is refused, as for DockerMachineTemplate: templates are immutable.
    let stored = dynamic(&cluster.client, "v1beta2", "DockerMachinePoolTemplate")
        .get("quick-start-default-worker-machinepooltemplate")
        .await
        .unwrap();
    let old = serde_json::to_value(&stored).unwrap();
    let mut patched = old.clone();
    patched["spec"]["template"]["spec"]["template"]["customImage"] = json!("kindest/node:v1.34.0");
    patched["metadata"]["annotations"] = json!({"topology.cluster.x-k8s.io/dry-run": ""});
    let response = admit(&cluster, "UPDATE", &patched, Some(&old), true).await;
    assert_eq!(response["allowed"], true, "{response}");
    let response = admit(&cluster, "UPDATE", &patched, Some(&old), false).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"]["details"]["causes"][0]["field"], "spec.template.spec",
        "{response}"
    );

    // A pool's own image may change (that is a rollout), and a broken one is refused.
    let pools = dynamic(&cluster.client, "v1beta2", "DockerMachinePool");
    let old = serde_json::to_value(pools.get("dev-mp-mp-0-x7k2p").await.unwrap()).unwrap();
    let mut upgraded = old.clone();
    upgraded["spec"]["template"]["customImage"] = json!("kindest/node:v1.35.0");
    let response = admit(&cluster, "UPDATE", &upgraded, Some(&old), false).await;
    assert_eq!(response["allowed"], true, "{response}");
    upgraded["spec"]["template"]["customImage"] = json!("kindest/Node:v1.35.0");
    let response = admit(&cluster, "UPDATE", &upgraded, Some(&old), false).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"]["details"]["causes"][0]["field"], "spec.template.customImage",
        "{response}"
    );
}

/// CAPD 1.12 DevCluster and DevMachine manifests leave out `spec.backend`, which the CRD
/// requires: as in a kube-apiserver, our defaulting runs first and adds `backend.docker: {}`, so
/// the API accepts them (and our validation too), and v1beta1 clients see the same backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capd_dev_manifests_without_a_backend_are_defaulted_to_docker() {
    let cluster = cluster().await;
    let manifests = [
        json!({"apiVersion": format!("{GROUP}/v1beta2"), "kind": "DevCluster",
               "metadata": {"name": "dev", "namespace": NS}, "spec": {}}),
        json!({"apiVersion": format!("{GROUP}/v1beta2"), "kind": "DevMachine",
               "metadata": {"name": "dev-control-plane-x7k2p", "namespace": NS},
               "spec": {}}),
    ];
    for manifest in manifests {
        let kind = manifest["kind"].as_str().unwrap();
        let name = manifest["metadata"]["name"].as_str().unwrap();
        let object = defaulted(&cluster, &manifest).await;
        assert_eq!(object["spec"]["backend"], json!({"docker": {}}), "{kind}");
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        dynamic(&cluster.client, "v1beta2", kind)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{kind} refused: {e}"));
        let stored = dynamic(&cluster.client, "v1beta2", kind)
            .get(name)
            .await
            .unwrap();
        let stored = serde_json::to_value(&stored).unwrap();
        let response = admit(&cluster, "CREATE", &stored, None, false).await;
        assert_eq!(response["allowed"], true, "{kind}: {response}");
        let seen = dynamic(&cluster.client, "v1beta1", kind)
            .get(name)
            .await
            .unwrap();
        assert_eq!(
            seen.data["spec"]["backend"],
            json!({"docker": {}}),
            "{kind}"
        );
    }
    let cluster_spec = dynamic(&cluster.client, "v1beta2", "DevCluster")
        .get("dev")
        .await
        .unwrap()
        .data["spec"]
        .clone();
    assert_eq!(cluster_spec["controlPlaneEndpoint"], json!({"port": 6443}));
}
