//! The Cluster API and CAPD CRDs of release 1.12, and the CRDs this repository ships, install
//! (their schemas are structural, which the server checks like kube-apiserver), establish and
//! validate real objects.

use std::path::{Path, PathBuf};

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use crate::common::{install_crd, start, status};

fn crd_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/reference/crds"
    ));
    dir.is_dir().then_some(dir)
}

/// The CRDs of the YAML files in `dir`, by file name.
fn crds_in(dir: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| serde_saphyr::from_str::<Value>(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect()
}

fn load_crds(dir: &Path) -> Vec<Value> {
    ["capi-release-1.12", "capd-release-1.12"]
        .iter()
        .flat_map(|sub| crds_in(&dir.join(sub)))
        .collect()
}

/// Our CRDs (config/crd/bases, with the unserved legacy versions) and the Gardener extension
/// CRD the provider tests install.
fn our_crds() -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut crds = crds_in(&root.join("config/crd/bases"));
    let gardener = std::fs::read_to_string(root.join("e2e/gardener/infrastructures.crd.yaml"));
    crds.push(serde_saphyr::from_str(&gardener.unwrap()).unwrap());
    crds
}

#[tokio::test]
async fn every_crd_we_ship_or_follow_is_accepted() {
    let ours = our_crds();
    assert!(ours.len() >= 7, "config/crd/bases has our six kinds");
    let mut sets = vec![("ours", ours)];
    match crd_dir() {
        Some(dir) => sets.push(("Cluster API and CAPD 1.12", load_crds(&dir))),
        None => println!("SKIP: shared/reference/crds not found next to the repository"),
    }
    for (what, crds) in sets {
        // Ours and CAPD's define the same resources: one server per set.
        let (_h, client) = start().await;
        for crd in crds {
            let name = crd["metadata"]["name"].as_str().unwrap().to_string();
            let installed = install_crd(&client, crd).await;
            assert_eq!(
                installed.metadata.name.as_deref(),
                Some(name.as_str()),
                "{what}"
            );
        }
    }
}

fn api(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), "default", &ar)
}

#[tokio::test]
async fn cluster_api_crds_serve_and_validate_objects() {
    let Some(dir) = crd_dir() else {
        println!("SKIP: shared/reference/crds not found next to the repository");
        return;
    };
    let (_h, client) = start().await;
    for crd in load_crds(&dir) {
        install_crd(&client, crd).await;
    }
    let machines = api(
        &client,
        "infrastructure.cluster.x-k8s.io",
        "v1beta2",
        "DockerMachine",
        "dockermachines",
    );
    let dm: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "DockerMachine",
        "metadata": {"name": "m0", "labels": {"cluster.x-k8s.io/cluster-name": "c"}},
        "spec": {"customImage": "kindest/node:v1.34.0", "unknownField": 1}
    }))
    .unwrap();
    let created = machines.create(&PostParams::default(), &dm).await.unwrap();
    assert!(
        created.data["spec"].get("unknownField").is_none(),
        "pruned by the real schema"
    );

    let status_patch = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "DockerMachine",
        "status": {
            "initialization": {"provisioned": true},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                            "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 1}]
        }
    });
    let patched = machines
        .patch_status(
            "m0",
            &PatchParams::apply("capd-manager").force(),
            &Patch::Apply(&status_patch),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["conditions"][0]["type"], "Ready");

    let bad_condition = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "DockerMachine",
        "status": {"conditions": [{"type": "Ready", "status": "Maybe", "reason": "x", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    });
    let err = status(
        machines
            .patch_status(
                "m0",
                &PatchParams::apply("capd-manager").force(),
                &Patch::Apply(&bad_condition),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422, "{}", err.message);
    assert!(
        err.message
            .contains("status.conditions[0].status: Unsupported value: \"Maybe\""),
        "{}",
        err.message
    );

    let old = api(
        &client,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "DockerMachine",
        "dockermachines",
    );
    let as_v1beta1 = old.get("m0").await.unwrap();
    assert_eq!(
        as_v1beta1.types.unwrap().api_version,
        "infrastructure.cluster.x-k8s.io/v1beta1"
    );

    let clusters = api(
        &client,
        "cluster.x-k8s.io",
        "v1beta2",
        "Cluster",
        "clusters",
    );
    let cluster: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": "c"},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "c"}}
    }))
    .unwrap();
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
}
