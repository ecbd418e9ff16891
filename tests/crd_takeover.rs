//! Our CRDs replace CAPD 1.12's in place on an installation that once stored objects in the
//! retired versions: for each of our kinds (the Dev kinds, which CAPD introduced in v1beta1, have
//! none), CAPD's CRD is installed, an object stored, and `status.storedVersions` set to every
//! version CAPD's CRD lists (as an installation upgraded since `v1alpha3` whose migrator never
//! ran has it). The API server refuses our CRD, which no longer lists v1alpha3 and v1alpha4
//! (as CAPD 1.13); once our CRD migrator has run against CAPD's CRD, it is accepted and the
//! object reads back, the same object.
//!
//! Runs against the test API server, which applies kube-apiserver's storedVersions rule. Reads
//! `../shared/reference/crds/capd-release-1.12/`; skips with a message when it is absent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use capd::crdmigrator::{Migrator, Phases};
use capd::runtime::Metrics;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};
use testapiserver::{Options, TestApiServer};

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/reference/crds/capd-release-1.12"
);
const NS: &str = "default";
const IMAGE: &str = "kindest/node:v1.34.0";

async fn client(api: &testapiserver::Handle) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(api.kubeconfig_yaml()).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// A v1beta2 spec with something to recognise after the takeover.
fn sample_spec(kind: &str) -> Value {
    match kind {
        "DockerCluster" => json!({"loadBalancer": {"imageTag": "v20230510-486859a6"}}),
        "DockerClusterTemplate" => {
            json!({"template": {"spec": {"loadBalancer": {"imageTag": "v20230510-486859a6"}}}})
        }
        "DockerMachine" => json!({"customImage": IMAGE}),
        "DockerMachineTemplate" => json!({"template": {"spec": {"customImage": IMAGE}}}),
        "DockerMachinePool" => json!({"template": {"customImage": IMAGE}}),
        "DockerMachinePoolTemplate" => {
            json!({"template": {"spec": {"template": {"customImage": IMAGE}}}})
        }
        "DevCluster" => {
            json!({"backend": {"docker": {"loadBalancer": {"imageTag": "v20230510-486859a6"}}}})
        }
        "DevClusterTemplate" => json!({"template": {"spec": {"backend": {"docker": {
            "loadBalancer": {"imageTag": "v20230510-486859a6"}}}}}}),
        "DevMachine" => json!({"backend": {"docker": {"customImage": IMAGE}}}),
        "DevMachineTemplate" => {
            json!({"template": {"spec": {"backend": {"docker": {"customImage": IMAGE}}}}})
        }
        _ => json!({}),
    }
}

fn version_names(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.spec.versions.iter().map(|v| v.name.clone()).collect()
}

async fn wait_established(crds: &Api<CustomResourceDefinition>, name: &str) {
    for _ in 0..250 {
        let crd = crds.get(name).await.unwrap();
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{name} never became Established");
}

/// `crd` as an update of the live CRD `name`.
async fn at_live_version(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
    mut crd: CustomResourceDefinition,
) -> CustomResourceDefinition {
    crd.metadata.resource_version = crds.get(name).await.unwrap().metadata.resource_version;
    crd
}

/// Installs CAPD's CRD of `ours`, stores an object and marks every CAPD version as stored; then
/// checks that `ours` is refused (when CAPD lists a version ours does not), runs the CRD migrator,
/// and checks that `ours` is accepted, the object reading back. Returns the versions the refusal
/// named.
async fn take_over(
    client: &Client,
    capd: CustomResourceDefinition,
    ours: CustomResourceDefinition,
) -> Vec<String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = capd.metadata.name.clone().unwrap();
    let kind = ours.spec.names.kind.clone();
    let old_versions = version_names(&capd);
    crds.create(&PostParams::default(), &capd).await.unwrap();
    wait_established(&crds, &name).await;

    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&ours.spec.group, "v1beta2", &kind),
        &ours.spec.names.plural,
    );
    let objects: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource);
    let spec = sample_spec(&kind);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": resource.api_version,
        "kind": kind,
        "metadata": {"name": "made-by-capd", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
        "spec": spec,
    }))
    .unwrap();
    let created = objects
        .create(&PostParams::default(), &object)
        .await
        .unwrap();

    // As an installation that stored objects in every version CAPD ever served has it.
    crds.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"storedVersions": old_versions}})),
    )
    .await
    .unwrap();

    let mut refused_for = Vec::new();
    let dropped: Vec<&String> = old_versions
        .iter()
        .filter(|v| !version_names(&ours).contains(v))
        .collect();
    if !dropped.is_empty() {
        let update = at_live_version(&crds, &name, ours.clone()).await;
        let err = match crds.replace(&name, &PostParams::default(), &update).await {
            Err(kube::Error::Api(status)) => status,
            other => panic!("{kind}: a CRD without {dropped:?} must be refused, got {other:?}"),
        };
        assert_eq!(err.code, 422, "{kind}: {}", err.message);
        for version in &dropped {
            assert!(
                err.message.contains(&format!(
                    "Invalid value: \"{version}\": missing from spec.versions"
                )),
                "{kind}: {}",
                err.message
            );
            refused_for.push(format!("{kind} {version}"));
        }
    }

    // What the manager does at start-up, here against CAPD's CRD.
    let migrator = Migrator::new(
        client.clone(),
        vec![name.clone()],
        Phases::without(&[]),
        Metrics::new(),
    );
    let outcome = migrator.migrate(&name).await.unwrap();
    assert_eq!(outcome.rewritten, 1, "{kind}");
    assert_eq!(outcome.stored_versions, ["v1beta2"], "{kind}");

    let update = at_live_version(&crds, &name, ours).await;
    let replaced = crds
        .replace(&name, &PostParams::default(), &update)
        .await
        .unwrap_or_else(|e| panic!("{kind}: our CRD must replace CAPD's: {e}"));
    let stored = replaced
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default();
    assert_eq!(stored, ["v1beta2"], "{kind}");
    wait_established(&crds, &name).await;

    let read = objects.get("made-by-capd").await.unwrap();
    assert_eq!(read.metadata.uid, created.metadata.uid, "{kind}");
    assert_eq!(read.data["spec"], spec, "{kind}: the spec reads back whole");
    let listed = objects.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1, "{kind}");
    refused_for
}

#[tokio::test]
async fn our_crds_replace_capd_crds_that_list_retired_stored_versions_once_migrated() {
    let dir = Path::new(REFERENCE);
    if !dir.is_dir() {
        println!("SKIPPED: reference CRDs not found at {REFERENCE}");
        return;
    }
    let api = TestApiServer::start(Options::default()).await.unwrap();
    let client = client(&api).await;
    let mut refused = Vec::new();
    for ours in capd::api::crd::all().unwrap() {
        let path = dir.join(capd::api::crd::file_name(&ours));
        let kind = ours.spec.names.kind.as_str();
        if capd::api::crd::V1BETA2_ONLY.contains(&kind) {
            // Introduced by CAPD 1.13: 1.12 has no CRD of it to replace.
            assert!(!path.exists(), "CAPD 1.12 has a CRD for {kind}");
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("no CAPD CRD for {}: {e}", ours.spec.names.kind));
        let capd: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap();
        refused.extend(take_over(&client, capd, ours).await);
    }
    println!("refused until the migrator ran: {}", refused.join(", "));
    // The negative half ran: CAPD 1.12 lists retired versions for the Docker kinds; the Dev kinds
    // have none, so their takeover never needs them.
    assert!(
        refused.contains(&"DockerMachine v1alpha3".to_string()),
        "{refused:?}"
    );
    assert!(!refused.iter().any(|r| r.starts_with("Dev")), "{refused:?}");
}
