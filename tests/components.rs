//! Packaging: the clusterctl components file rendered from `config/` by `hack/build-components.sh`,
//! `metadata.yaml` and `clusterctl-settings.json`, checked the way clusterctl and a cluster will see them.
//!
//! Needs `kubectl` (its built-in kustomize renders `config/default`) and the generated CRDs in
//! `config/crd/bases/`.

// Test helpers: a failed expectation anywhere in this test crate is a test failure with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

#[path = "components/as_shipped.rs"]
mod as_shipped;
mod packaging;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use packaging::variables::{CHAPTER, documented_table, substitute, variables};
use packaging::*;

#[test]
fn components_parse_and_are_reproducible() {
    let first = built();
    assert!(
        first.objects.len() >= 10,
        "expected the namespace, CRDs, RBAC and the Deployment, got {} objects",
        first.objects.len()
    );
    for o in &first.objects {
        assert!(
            o["apiVersion"].is_string()
                && o["kind"].is_string()
                && o["metadata"]["name"].is_string(),
            "every document must be a Kubernetes object with apiVersion, kind and metadata.name: {o}"
        );
    }
    let again = tempfile::tempdir().expect("create a temporary output folder");
    assert!(
        run_build_script(again.path()) == first.text,
        "two runs of hack/build-components.sh produced different {COMPONENTS_FILE}"
    );
}

#[test]
fn every_object_carries_the_provider_label() {
    for o in &built().objects {
        assert_eq!(
            str_at(
                o,
                &format!("/metadata/labels/{}", PROVIDER_LABEL.replace('/', "~1"))
            ),
            PROVIDER,
            "{} lacks the clusterctl inventory label {PROVIDER_LABEL}: {PROVIDER}",
            describe(o)
        );
    }
    let deployment = object("Deployment", "capd-controller-manager");
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    assert_eq!(
        selector[PROVIDER_LABEL], PROVIDER,
        "the Deployment selector lacks the label"
    );
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in selector.as_object().expect("selector.matchLabels") {
        assert_eq!(
            &pod_labels[key], value,
            "the pod template does not match selector {key}"
        );
    }
}

#[test]
fn namespaced_objects_live_in_the_provider_namespace() {
    let namespaces: Vec<_> = objects_of("Namespace").collect();
    assert_eq!(namespaces.len(), 1, "exactly one Namespace expected");
    let ns = namespaces[0];
    assert_eq!(str_at(ns, "/metadata/name"), NAMESPACE);
    assert_eq!(
        str_at(ns, "/metadata/labels/pod-security.kubernetes.io~1enforce"),
        "privileged",
        "the manager's hostPath socket mount needs Pod Security level privileged"
    );
    for o in &built().objects {
        let namespace = o.pointer("/metadata/namespace").and_then(Value::as_str);
        if CLUSTER_SCOPED.contains(&str_at(o, "/kind")) {
            assert_eq!(
                namespace,
                None,
                "cluster-scoped {} has a namespace",
                describe(o)
            );
        } else {
            assert_eq!(
                namespace,
                Some(NAMESPACE),
                "{} is not in {NAMESPACE}",
                describe(o)
            );
        }
    }
    let services: BTreeSet<&str> = objects_of("Service")
        .map(|s| str_at(s, "/metadata/name"))
        .collect();
    for crd in objects_of("CustomResourceDefinition") {
        let service = &crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"];
        assert_eq!(
            service["namespace"],
            NAMESPACE,
            "conversion webhook of {}",
            describe(crd)
        );
        if !services.is_empty() {
            let name = service["name"].as_str().unwrap_or("");
            assert!(
                services.contains(name),
                "{} converts through missing Service {name}",
                describe(crd)
            );
        }
    }
}

#[test]
fn rbac_binds_the_manager_service_account() {
    object("ServiceAccount", SERVICE_ACCOUNT);
    let bindings: Vec<_> = objects_of("ClusterRoleBinding")
        .chain(objects_of("RoleBinding"))
        .collect();
    assert!(
        bindings.len() >= 2,
        "expected the manager and leader-election bindings"
    );
    for binding in bindings {
        let role_kind = str_at(binding, "/roleRef/kind");
        object(role_kind, str_at(binding, "/roleRef/name"));
        let subjects = binding["subjects"].as_array().expect("binding subjects");
        assert!(!subjects.is_empty(), "{} binds nobody", describe(binding));
        for subject in subjects {
            assert_eq!(
                (
                    str_at(subject, "/kind"),
                    str_at(subject, "/name"),
                    str_at(subject, "/namespace")
                ),
                ("ServiceAccount", SERVICE_ACCOUNT, NAMESPACE),
                "{} must bind the manager's service account",
                describe(binding)
            );
        }
    }
    let deployment = object("Deployment", "capd-controller-manager");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        SERVICE_ACCOUNT
    );
}

#[test]
fn manager_role_grants_what_the_controllers_use_and_no_more() {
    let role = object("ClusterRole", "capd-manager-role");
    let infra = "infrastructure.cluster.x-k8s.io";
    let needed = [
        (infra, "dockerclusters", "watch"),
        (infra, "dockerclusters", "patch"),
        (infra, "dockerclusters/status", "patch"),
        (infra, "dockermachines", "watch"),
        (infra, "dockermachines", "patch"),
        (infra, "dockermachines/status", "patch"),
        (infra, "dockermachinetemplates", "watch"),
        (infra, "dockermachinetemplates/status", "patch"),
        // The DockerMachinePool controller: its pools, their DockerMachines (one per instance,
        // owned by the pool), MachinePools read and owner Machines deleted to scale down.
        (infra, "dockermachinepools", "watch"),
        (infra, "dockermachinepools", "patch"),
        (infra, "dockermachinepools/status", "patch"),
        (infra, "dockermachines", "create"),
        (infra, "dockermachines", "delete"),
        (infra, "dockermachinepooltemplates", "watch"),
        (infra, "dockermachinepooltemplates/status", "patch"),
        // DevCluster, DevMachine (docker backend) and DevMachineTemplate capacity, through the
        // Docker kinds' reconcilers.
        (infra, "devclusters", "watch"),
        (infra, "devclusters", "patch"),
        (infra, "devclusters/status", "patch"),
        (infra, "devmachines", "watch"),
        (infra, "devmachines", "patch"),
        (infra, "devmachines/status", "patch"),
        (infra, "devmachinetemplates", "watch"),
        (infra, "devmachinetemplates/status", "patch"),
        // DevMachinePool, through the pool controller: its DevMachines, one per instance.
        (infra, "devmachinepools", "watch"),
        (infra, "devmachinepools", "patch"),
        (infra, "devmachinepools/status", "patch"),
        (infra, "devmachines", "create"),
        (infra, "devmachines", "delete"),
        (infra, "devmachinepooltemplates", "watch"),
        (infra, "devmachinepooltemplates/status", "patch"),
        ("cluster.x-k8s.io", "clusters", "watch"),
        ("cluster.x-k8s.io", "machines", "list"),
        ("cluster.x-k8s.io", "machinepools", "watch"),
        ("cluster.x-k8s.io", "machines", "delete"),
        // The in-memory backend, as CAPD 1.14: the bootstrapped annotation on Machines, and the
        // kubeconfig Secret pointed at the manager's new address.
        ("cluster.x-k8s.io", "machines", "patch"),
        ("", "secrets", "patch"),
        ("", "secrets", "get"),
        ("", "configmaps", "get"),
        // The contract: read access to every type the provider defines.
        (infra, "dockerclustertemplates", "get"),
        (infra, "dockerclustertemplates", "list"),
        (infra, "dockerclustertemplates", "watch"),
        (infra, "devclustertemplates", "get"),
        (infra, "devclustertemplates", "list"),
        (infra, "devclustertemplates", "watch"),
        ("", "events", "create"),
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
        // The CRD migrator: a no-op patch of every object (through /status where the kind has
        // one), managedFields cleanup, and on our CRDs (by name) storedVersions and an annotation.
        (infra, "dockermachinetemplates", "patch"),
        (infra, "dockermachinepooltemplates", "patch"),
        (infra, "devmachinetemplates", "patch"),
        (infra, "devmachinepooltemplates", "patch"),
        (infra, "dockerclustertemplates", "patch"),
        (infra, "devclustertemplates", "patch"),
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    ];
    for (group, resource, verb) in needed {
        assert!(
            allows(role, group, resource, verb),
            "manager role lacks {verb} {group}/{resource}"
        );
    }
    let forbidden = [
        (infra, "dockerclusters", "delete"),
        (infra, "dockerclusters", "update"),
        (infra, "dockermachines", "update"),
        (infra, "dockermachinepools", "update"),
        (infra, "dockermachinepools/finalizers", "update"),
        (infra, "dockermachinepools", "create"),
        (infra, "dockermachinepools", "delete"),
        // Pools are made by Cluster API core, and the cluster templates are only read.
        (infra, "devmachinepools", "create"),
        (infra, "devmachinepools", "delete"),
        (infra, "devmachinepools", "update"),
        (infra, "devclusters", "delete"),
        (infra, "dockerclustertemplates", "update"),
        (infra, "devclustertemplates", "delete"),
        ("cluster.x-k8s.io", "machines", "update"),
        ("cluster.x-k8s.io", "machinepools", "patch"),
        ("cluster.x-k8s.io", "machinepools", "delete"),
        ("cluster.x-k8s.io", "clusters", "update"),
        ("", "secrets", "create"),
        ("", "secrets", "update"),
        ("", "secrets", "delete"),
        ("", "configmaps", "list"),
        ("", "pods", "get"),
        ("", "nodes", "get"),
    ];
    for (group, resource, verb) in forbidden {
        assert!(
            !allows(role, group, resource, verb),
            "manager role grants {verb} {group}/{resource}"
        );
    }
    // A Dev kind gets exactly what its Docker twin gets.
    for (docker, dev) in [
        ("dockerclusters", "devclusters"),
        ("dockerclusters/status", "devclusters/status"),
        ("dockermachines", "devmachines"),
        ("dockermachines/status", "devmachines/status"),
        ("dockermachinetemplates", "devmachinetemplates"),
        (
            "dockermachinetemplates/status",
            "devmachinetemplates/status",
        ),
        ("dockerclustertemplates", "devclustertemplates"),
        ("dockermachinepools", "devmachinepools"),
        ("dockermachinepools/status", "devmachinepools/status"),
        ("dockermachinepooltemplates", "devmachinepooltemplates"),
        (
            "dockermachinepooltemplates/status",
            "devmachinepooltemplates/status",
        ),
    ] {
        assert_eq!(
            verbs(role, infra, dev),
            verbs(role, infra, docker),
            "manager role: {dev} and {docker}"
        );
    }
    for rule in role["rules"].as_array().expect("rules") {
        let writes_crds = strings(rule.get("resources")).contains(&"customresourcedefinitions")
            && strings(rule.get("verbs"))
                .iter()
                .any(|v| ["patch", "update"].contains(v));
        assert!(
            !writes_crds || !strings(rule.get("resourceNames")).is_empty(),
            "CRD writes must be limited to our CRDs by name: {rule}"
        );
        for field in ["apiGroups", "resources", "verbs"] {
            assert!(
                !strings(rule.get(field)).contains(&"*"),
                "wildcard {field} in {rule}"
            );
        }
    }

    let leader = object("Role", "capd-leader-election-role");
    for verb in ["create", "get", "update"] {
        assert!(
            allows(leader, "coordination.k8s.io", "leases", verb),
            "leases {verb} missing"
        );
    }
    let named = leader["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .any(|rule| {
            strings(rule.get("resourceNames")) == [LEASE]
                && strings(rule.get("verbs")).contains(&"update")
        });
    assert!(named, "renewing the lease must be limited to {LEASE}");

    let aggregated = objects_of("ClusterRole")
        .find(|r| str_at(r, "/metadata/labels/cluster.x-k8s.io~1aggregate-to-manager") == "true")
        .expect("a ClusterRole aggregated into Cluster API's manager role");
    for (kind, plural) in KINDS {
        for verb in ["get", "list", "watch", "create", "patch", "delete"] {
            assert!(
                allows(aggregated, infra, plural, verb),
                "Cluster API cannot {verb} {kind}"
            );
        }
    }
}

#[test]
fn deployment_mounts_the_docker_socket_and_serves_probes() {
    let deployment = object("Deployment", "capd-controller-manager");
    assert_eq!(deployment["spec"]["replicas"], 1);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["terminationGracePeriodSeconds"], 10);
    let containers = pod["containers"].as_array().expect("containers");
    let manager = containers
        .iter()
        .find(|c| c["name"] == "manager")
        .expect("a container named manager");
    let image = str_at(manager, "/image");
    assert!(
        !image.is_empty() && image != "controller",
        "image placeholder left: {image:?}"
    );
    assert!(
        is_canonical(image),
        "clusterctl init and upgrade refuse {image:?}: it parses every image of the components \
         with reference.ParseNamed, which wants a canonical name (a registry host first, such as \
         localhost/ or docker.io/library/)"
    );

    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["hostPath"]["path"] == DOCKER_SOCKET)
        .expect("a hostPath volume for the Docker socket");
    let mounted = manager["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .any(|m| m["name"] == volume["name"] && m["mountPath"] == DOCKER_SOCKET);
    assert!(
        mounted,
        "the Docker socket volume is not mounted at {DOCKER_SOCKET}"
    );

    let ports: BTreeMap<&str, i64> = manager["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| (str_at(p, "/name"), p["containerPort"].as_i64().unwrap_or(0)))
        .collect();
    assert_eq!(ports.get("healthz"), Some(&9440));
    assert_eq!(ports.get("metrics"), Some(&8443));
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &manager[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe} path");
        let port = match &get["port"] {
            Value::String(name) => ports.get(name.as_str()).copied(),
            other => other.as_i64(),
        };
        assert_eq!(port, Some(9440), "{probe} must target the health port 9440");
    }

    let args = strings(manager.get("args"));
    assert!(args.contains(&"--leader-elect"), "args: {args:?}");
    let env: BTreeMap<&str, &Value> = manager["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| (str_at(e, "/name"), e))
        .collect();
    for (name, field) in [
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_NAME", "metadata.name"),
        ("POD_IP", "status.podIP"),
    ] {
        assert_eq!(
            str_at(env[name], "/valueFrom/fieldRef/fieldPath"),
            field,
            "env {name}"
        );
    }
    for name in ["DOCKER_HOST", "CAPD_DOCKER_NETWORK", "CAPD_PUBLISH_ADDRESS"] {
        assert!(env.contains_key(name), "env {name} missing");
    }
    let security = &manager["securityContext"];
    assert_ne!(
        security["privileged"], true,
        "the manager must not run privileged"
    );
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert!(strings(security["capabilities"].get("drop")).contains(&"ALL"));
    let tolerated: Vec<&str> = pod["tolerations"]
        .as_array()
        .expect("tolerations")
        .iter()
        .map(|t| str_at(t, "/key"))
        .collect();
    assert!(
        tolerated.contains(&"node-role.kubernetes.io/control-plane"),
        "{tolerated:?}"
    );
}

#[test]
fn crds_are_present_with_contract_labels() {
    for (kind, plural) in KINDS {
        let crd = object(
            "CustomResourceDefinition",
            &format!("{plural}.infrastructure.cluster.x-k8s.io"),
        );
        assert_eq!(crd["spec"]["names"]["kind"], kind);
        for version in ["v1beta1", "v1beta2"] {
            assert_eq!(
                str_at(
                    crd,
                    &format!("/metadata/labels/cluster.x-k8s.io~1{version}")
                ),
                version,
                "{kind} CRD lacks the contract label cluster.x-k8s.io/{version}"
            );
        }
        assert_eq!(
            crd["spec"]["conversion"]["strategy"], "Webhook",
            "{kind} conversion"
        );
        assert_eq!(
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"],
            "/convert"
        );
    }
}

#[test]
fn clusterctl_variables_use_supported_syntax_and_are_documented() {
    let used = variables(&built().text).unwrap_or_else(|e| panic!("{COMPONENTS_FILE}: {e}"));
    let mut defaults: BTreeMap<&str, &Option<String>> = BTreeMap::new();
    for v in &used {
        if let Some(previous) = defaults.insert(&v.name, &v.default) {
            assert_eq!(
                previous, &v.default,
                "{} has two different defaults",
                v.name
            );
        }
    }
    let documented = documented_table("Components variables");
    for (name, default) in &defaults {
        let row = documented
            .get(*name)
            .unwrap_or_else(|| panic!("{name} is used by {COMPONENTS_FILE} but not in {CHAPTER}"));
        let expected = default.as_deref().unwrap_or("(required)");
        assert_eq!(row, expected, "{CHAPTER}: default of {name}");
    }
    for name in documented.keys() {
        assert!(
            defaults.contains_key(name.as_str()),
            "{CHAPTER} documents unused variable {name}"
        );
    }
}

#[test]
fn substituted_components_give_the_manager_the_expected_settings() {
    let env_of = |text: &str| -> (BTreeMap<String, Value>, Vec<String>) {
        let objects = parse_documents(text);
        let deployment = objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("the Deployment");
        let manager = &deployment["spec"]["template"]["spec"]["containers"][0];
        let env = manager["env"]
            .as_array()
            .expect("env")
            .iter()
            .map(|e| (str_at(e, "/name").to_string(), e["value"].clone()))
            .collect();
        (
            env,
            strings(manager.get("args"))
                .into_iter()
                .map(String::from)
                .collect(),
        )
    };

    let (env, args) = env_of(&substitute(&built().text, &BTreeMap::new()));
    assert_eq!(
        env["DOCKER_HOST"], "",
        "unset CAPD_DOCKER_HOST must give an empty DOCKER_HOST"
    );
    assert_eq!(env["CAPD_DOCKER_NETWORK"], "kind");
    assert_eq!(env["CAPD_PUBLISH_ADDRESS"], "127.0.0.1");
    for arg in [
        "--diagnostics-address=:8443",
        "--insecure-diagnostics=false",
        // CAPD 1.14's gates and variables.
        "--feature-gates=MachinePool=true,ClusterTopology=false,PriorityQueue=true,\
         ReconcilerRateLimiting=true",
    ] {
        assert!(args.iter().any(|a| a == arg), "{arg} missing from {args:?}");
    }

    let values = BTreeMap::from([
        ("CAPD_DOCKER_HOST", "tcp://127.0.0.1:2375"),
        ("CAPD_DOCKER_NETWORK", "capd"),
        ("CAPD_PUBLISH_ADDRESS", "0.0.0.0"),
        ("CLUSTER_TOPOLOGY", "true"),
        ("EXP_PRIORITY_QUEUE", "false"),
        ("EXP_RECONCILER_RATE_LIMITING", "false"),
    ]);
    let (env, args) = env_of(&substitute(&built().text, &values));
    assert_eq!(env["DOCKER_HOST"], "tcp://127.0.0.1:2375");
    assert_eq!(env["CAPD_DOCKER_NETWORK"], "capd");
    assert_eq!(env["CAPD_PUBLISH_ADDRESS"], "0.0.0.0");
    assert!(
        args.iter().any(|a| a
            == "--feature-gates=MachinePool=true,ClusterTopology=true,PriorityQueue=false,\
                ReconcilerRateLimiting=false"),
        "{args:?}"
    );
}

#[test]
fn clusterctl_metadata_and_settings_agree_with_the_crate_version() {
    let crate_version = env!("CARGO_PKG_VERSION");
    let mut series = crate_version
        .split('.')
        .map(|p| p.parse::<u64>().expect("numeric version"));
    let (major, minor) = (series.next().expect("major"), series.next().expect("minor"));

    let metadata_text =
        std::fs::read_to_string(repo_root().join("metadata.yaml")).expect("read metadata.yaml");
    let metadata: Value = serde_saphyr::from_str(&metadata_text).expect("metadata.yaml parses");
    assert_eq!(
        metadata["apiVersion"],
        "clusterctl.cluster.x-k8s.io/v1alpha3"
    );
    assert_eq!(metadata["kind"], "Metadata");
    let releases = metadata["releaseSeries"].as_array().expect("releaseSeries");
    let contract_of = |major: u64, minor: u64| {
        releases
            .iter()
            .find(|r| r["major"].as_u64() == Some(major) && r["minor"].as_u64() == Some(minor))
            .map(|r| str_at(r, "/contract"))
    };
    assert_eq!(
        contract_of(major, minor),
        Some("v1beta2"),
        "metadata.yaml must map the crate's series {major}.{minor} to contract v1beta2"
    );
    // clusterctl upgrade from an installed CAPD looks its version up here (docs/src/upgrading.md).
    for capd_minor in [12, 13, 14] {
        assert_eq!(
            contract_of(1, capd_minor),
            Some("v1beta2"),
            "without CAPD's series 1.{capd_minor}, clusterctl refuses to upgrade a CAPD v1.{capd_minor}.x \
             installation to ours"
        );
    }

    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("clusterctl-settings.json"))
            .expect("read clusterctl-settings.json"),
    )
    .expect("clusterctl-settings.json parses");
    assert_eq!(settings["name"], PROVIDER);
    let config = &settings["config"];
    assert_eq!(config["componentsFile"], COMPONENTS_FILE);
    assert!(
        repo_root()
            .join(str_at(config, "/configFolder"))
            .join("kustomization.yaml")
            .is_file()
    );
    let next = str_at(config, "/nextVersion");
    let parts: Vec<u64> = next
        .strip_prefix('v')
        .unwrap_or_else(|| panic!("nextVersion {next:?} must start with v"))
        .split('.')
        .map(|p| p.parse().expect("numeric nextVersion"))
        .collect();
    assert_eq!(
        parts.len(),
        3,
        "nextVersion {next:?} must be vMAJOR.MINOR.PATCH"
    );
    assert_eq!(
        (parts[0], parts[1]),
        (major, minor),
        "nextVersion is not in the crate's series"
    );

    let local = built()
        .dir
        .path()
        .join("repository")
        .join(PROVIDER)
        .join(next);
    let components = std::fs::read_to_string(local.join(COMPONENTS_FILE)).unwrap_or_else(|e| {
        panic!(
            "local repository {} lacks the components: {e}",
            local.display()
        )
    });
    assert!(
        components == built().text,
        "local repository components differ"
    );
    let copied = std::fs::read_to_string(local.join("metadata.yaml")).expect("local metadata.yaml");
    assert_eq!(
        copied, metadata_text,
        "local repository metadata.yaml differs"
    );
}

/// Whether `image` is a canonical reference, as docker/distribution's `reference.ParseNamed`
/// (what clusterctl's `util/container.ImageFromString` calls) requires: its normalized form is
/// itself, so its first path component must be a registry host (one with a `.` or a `:`, or
/// `localhost`); `capd-rs-manager:dev` normalizes to `docker.io/library/capd-rs-manager:dev`.
fn is_canonical(image: &str) -> bool {
    let name = image.split('@').next().unwrap_or_default();
    let path = match name.rsplit_once(':') {
        Some((path, tag)) if !tag.contains('/') => path,
        _ => name,
    };
    match path.split_once('/') {
        Some((host, rest)) => {
            (host.contains('.') || host.contains(':') || host == "localhost")
                && !rest.is_empty()
                && rest == rest.to_lowercase()
        }
        None => false,
    }
}

#[test]
fn canonical_image_names_are_told_apart_as_clusterctl_tells_them() {
    for image in [
        "localhost/capd-rs-manager:dev",
        "gcr.io/k8s-staging-cluster-api/capd-manager:dev",
        "docker.io/library/capd-rs-manager:dev",
        "localhost:5000/capd-rs-manager@sha256:0123",
    ] {
        assert!(is_canonical(image), "{image}");
    }
    for image in [
        "capd-rs-manager:dev",
        "kindest/node:v1.34.0",
        "library/x",
        "localhost",
    ] {
        assert!(!is_canonical(image), "{image}");
    }
}
