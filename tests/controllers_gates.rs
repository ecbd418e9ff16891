//! What keeps the controllers from acting: pause, externally managed infrastructure, missing or
//! malformed bootstrap data (reported clearly, without leaking it), and the `MachinePool`
//! feature gate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capd_e2e::*;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::json;

async fn provisioned_cluster(env: &mut Env) -> String {
    let name = env.cluster_name();
    env.provisioned_cluster(&name, json!({})).await;
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_cluster_is_left_alone_until_it_resumes() {
    let mut env = Env::start("pause").await;
    env.wait_ready().await;
    let name = env.cluster_name();
    let cluster = env.create_cluster(&name, true).await;
    env.create_docker_cluster(&cluster, json!({})).await;
    let dc = eventually(Duration::from_secs(30), "the Paused condition", || async {
        let dc = env.get(&infra("DockerCluster"), &name).await?;
        (condition_state(&dc, "Paused")? == ("True".into(), "Paused".into())).then_some(dc)
    })
    .await;
    env.create_secret("w1-bootstrap", &cloud_config(0)).await;
    env.create_machine(&name, "w1", false, Some("w1-bootstrap"))
        .await;
    eventually(
        Duration::from_secs(30),
        "the machine's Paused condition",
        || async {
            let dm = env.get(&infra("DockerMachine"), "w1").await?;
            (condition_state(&dm, "Paused")? == ("True".into(), "Paused".into())).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        cluster_containers(&name).is_empty(),
        "nothing is created while paused"
    );
    let again = env.get(&infra("DockerCluster"), &name).await.unwrap();
    assert_eq!(
        again.metadata.resource_version,
        dc.metadata.resource_version
    );
    assert!(again.data["status"]["initialization"]["provisioned"].is_null());

    env.merge_patch(&capi("Cluster"), &name, json!({"spec": {"paused": false}}))
        .await;
    eventually(
        Duration::from_secs(90),
        "the DockerCluster to be provisioned",
        || async {
            let dc = env.get(&infra("DockerCluster"), &name).await?;
            (dc.data["status"]["initialization"]["provisioned"] == json!(true)
                && condition_state(&dc, "Paused")? == ("False".into(), "NotPaused".into()))
                .then_some(())
        },
    )
    .await;
    env.mark_control_plane_initialized(&name).await;
    let dm = eventually(
        Duration::from_secs(90),
        "the worker to be bootstrapped",
        || async {
            let dm = env.get(&infra("DockerMachine"), "w1").await?;
            (condition_state(&dm, "BootstrapCompleted")?.0 == "True").then_some(dm)
        },
    )
    .await;
    assert_eq!(condition_state(&dm, "Paused").unwrap().0, "False");
    assert_eq!(
        cluster_containers(&name),
        vec![format!("{name}-lb"), format!("{name}-w1")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_externally_managed_cluster_is_never_touched() {
    let mut env = Env::start("extern").await;
    env.wait_ready().await;
    let name = env.cluster_name();
    let cluster = env.create_cluster(&name, false).await;
    let created = env
        .create_docker_cluster(
            &cluster,
            json!({"cluster.x-k8s.io/managed-by": "someone-else"}),
        )
        .await;
    // A second, ordinary cluster shows the manager is at work meanwhile.
    let witness = env.cluster_name();
    let witness_cluster = env.create_cluster(&witness, false).await;
    env.create_docker_cluster(&witness_cluster, json!({})).await;
    eventually(
        Duration::from_secs(90),
        "the ordinary cluster to be provisioned",
        || async {
            let dc = env.get(&infra("DockerCluster"), &witness).await?;
            (dc.data["status"]["initialization"]["provisioned"] == json!(true)).then_some(())
        },
    )
    .await;
    let dc = env.get(&infra("DockerCluster"), &name).await.unwrap();
    assert_eq!(
        dc.metadata.resource_version,
        created.metadata.resource_version
    );
    assert!(dc.metadata.finalizers.is_none());
    assert!(dc.data["status"].is_null(), "{}", dc.data["status"]);
    assert!(cluster_containers(&name).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_malformed_bootstrap_data_is_reported_without_leaking_it() {
    let mut env = Env::start("secret").await;
    env.wait_ready().await;
    let name = provisioned_cluster(&mut env).await;
    env.create_machine(&name, "cp1", true, Some("cp1-bootstrap"))
        .await;
    let container = format!("{name}-cp1");

    let message = |reason: &'static str| {
        let env = &env;
        async move {
            let dm = env.get(&infra("DockerMachine"), "cp1").await?;
            let c = condition(&dm, "BootstrapCompleted")?;
            (c["status"] == "False" && c["reason"] == reason)
                .then(|| c["message"].as_str().map(str::to_string))
                .flatten()
        }
    };
    let missing = eventually(
        Duration::from_secs(60),
        "the missing secret to be reported",
        || message("NotCompleted"),
    )
    .await;
    assert_eq!(
        missing,
        "Bootstrap data secret default/cp1-bootstrap not found"
    );

    const LEAK: &str = "zzsecretzz.0123456789abcdef";
    env.create_secret(
        "cp1-bootstrap",
        &format!(
            "#cloud-config\nwrite_files:\n- path: /etc/x\n  content: {LEAK}\n  bad: [unclosed\n"
        ),
    )
    .await;
    let malformed = eventually(
        Duration::from_secs(60),
        "the malformed secret to be reported",
        || async {
            message("NotCompleted")
                .await
                .filter(|m| m.starts_with("Invalid bootstrap data"))
        },
    )
    .await;
    assert!(
        malformed.starts_with(
            "Invalid bootstrap data in secret default/cp1-bootstrap: parse cloud-config"
        ),
        "{malformed}"
    );
    assert!(!malformed.contains("zzsecretzz"), "{malformed}");
    assert!(
        !docker(&[
            "exec",
            &container,
            "test",
            "-e",
            "/run/cluster-api/capd-bootstrap"
        ])
        .0,
        "nothing was launched in the node"
    );

    // Once the bootstrap provider writes valid data, bootstrap completes.
    env.merge_patch(
        &capi("Machine"),
        "cp1",
        json!({"metadata": {"labels": {"retry": "1"}}}),
    )
    .await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(env.client.clone(), NAMESPACE);
    secrets
        .delete("cp1-bootstrap", &Default::default())
        .await
        .unwrap();
    env.create_secret("cp1-bootstrap", &cloud_config(0)).await;
    eventually(Duration::from_secs(90), "bootstrap to complete", || async {
        let dm = env.get(&infra("DockerMachine"), "cp1").await?;
        (condition_state(&dm, "BootstrapCompleted")?.0 == "True").then_some(())
    })
    .await;

    let events: Api<Event> = Api::namespaced(env.client.clone(), NAMESPACE);
    let all = events.list(&ListParams::default()).await.unwrap();
    assert!(
        all.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("BootstrapNotCompleted")),
        "the problem was published as an Event"
    );
    for event in &all.items {
        let text = serde_json::to_string(event).unwrap();
        assert!(
            !text.contains("zzsecretzz"),
            "an Event leaks bootstrap data: {text}"
        );
        assert!(
            !text.contains("abcdef.0123456789abcdef"),
            "an Event leaks a token: {text}"
        );
    }
    assert!(
        !env.manager_log().contains("zzsecretzz"),
        "the log leaks bootstrap data"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_load_balancer_is_recreated_with_its_backends() {
    let mut env = Env::start_with("lbgone", &["--sync-period=3s"]).await;
    env.wait_ready().await;
    let name = provisioned_cluster(&mut env).await;
    env.create_secret("cp1-bootstrap", &cloud_config(0)).await;
    env.create_machine(&name, "cp1", true, Some("cp1-bootstrap"))
        .await;
    let lb = format!("{name}-lb");
    let backend = format!("server {name}-cp1 ");
    let config = || docker_exec(&lb, &["cat", "/usr/local/etc/haproxy/haproxy.cfg"]);
    eventually(
        Duration::from_secs(90),
        "the control plane behind the load balancer",
        || async { config().contains(&backend).then_some(()) },
    )
    .await;
    let before = env.get(&infra("DockerCluster"), &name).await.unwrap();
    let old_id = docker(&["inspect", "--format", "{{.Id}}", &lb]).1;

    assert!(docker(&["rm", "-fv", &lb]).0);
    eventually(
        Duration::from_secs(60),
        "a new load balancer with the backend",
        || async {
            let id = docker(&["inspect", "--format", "{{.Id}}", &lb]).1;
            (!id.is_empty() && id != old_id && config().contains(&backend)).then_some(())
        },
    )
    .await;
    // The reconcile that rewrote the configuration writes the status after it: wait until the
    // DockerCluster stops changing (two reads 2 s apart), then it must stay at rest.
    let mut after = env.get(&infra("DockerCluster"), &name).await.unwrap();
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let again = env.get(&infra("DockerCluster"), &name).await.unwrap();
        let settled = again.metadata.resource_version == after.metadata.resource_version;
        after = again;
        if settled {
            break;
        }
    }
    assert_eq!(
        condition_state(&after, "LoadBalancerAvailable").unwrap().0,
        "True"
    );
    assert_eq!(
        after.data["spec"]["controlPlaneEndpoint"], before.data["spec"]["controlPlaneEndpoint"],
        "the endpoint does not move"
    );

    // Reconciles every 3 s at rest write nothing.
    let version = after.metadata.resource_version.clone();
    tokio::time::sleep(Duration::from_secs(7)).await;
    let later = env.get(&infra("DockerCluster"), &name).await.unwrap();
    assert_eq!(later.metadata.resource_version, version);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_and_watch_filter_limit_what_the_manager_touches() {
    let mut env = Env::start_with("filter", &["--namespace=default", "--watch-filter=mine"]).await;
    env.wait_ready().await;
    let labelled = env.cluster_name();
    let unlabelled = env.cluster_name();
    for name in [&labelled, &unlabelled] {
        let cluster = env.create_cluster(name, false).await;
        env.create_docker_cluster(&cluster, json!({})).await;
    }
    env.merge_patch(
        &infra("DockerCluster"),
        &labelled,
        json!({"metadata": {"labels": {"cluster.x-k8s.io/watch-filter": "mine"}}}),
    )
    .await;
    env.merge_patch(
        &capi("Cluster"),
        &labelled,
        json!({"metadata": {"labels": {"cluster.x-k8s.io/watch-filter": "mine"}}}),
    )
    .await;
    // The same, labelled, in another namespace.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client.clone());
    namespaces
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"metadata": {"name": "elsewhere"}})).unwrap(),
        )
        .await
        .unwrap();
    let elsewhere = env.cluster_name();
    let clusters = Api::<kube::api::DynamicObject>::namespaced_with(
        env.client.clone(),
        "elsewhere",
        &capi("Cluster"),
    );
    let other_cluster = clusters
        .create(
            &Default::default(),
            &serde_json::from_value(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Cluster",
                "metadata": {"name": elsewhere, "namespace": "elsewhere", "labels": {"cluster.x-k8s.io/watch-filter": "mine"}},
                "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": elsewhere}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let dcs = Api::<kube::api::DynamicObject>::namespaced_with(
        env.client.clone(),
        "elsewhere",
        &infra("DockerCluster"),
    );
    dcs.create(
        &Default::default(),
        &serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "DockerCluster",
            "metadata": {
                "name": elsewhere,
                "namespace": "elsewhere",
                "labels": {"cluster.x-k8s.io/watch-filter": "mine"},
                "ownerReferences": [owner("Cluster", &other_cluster)]
            },
            "spec": {"loadBalancer": {"imageRepository": env.images.haproxy_repository, "imageTag": env.images.haproxy_tag}}
        }))
        .unwrap(),
    )
    .await
    .unwrap();

    eventually(
        Duration::from_secs(90),
        "the labelled cluster to be provisioned",
        || async {
            let dc = env.get(&infra("DockerCluster"), &labelled).await?;
            (dc.data["status"]["initialization"]["provisioned"] == json!(true)).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let untouched = env.get(&infra("DockerCluster"), &unlabelled).await.unwrap();
    assert!(untouched.metadata.finalizers.is_none() && untouched.data["status"].is_null());
    let other = dcs.get(&elsewhere).await.unwrap();
    assert!(other.metadata.finalizers.is_none() && other.data["status"].is_null());
    assert!(cluster_containers(&unlabelled).is_empty());
    assert!(cluster_containers(&elsewhere).is_empty());
}

/// The manager binary against `api`, reaching the engine at `docker_host`, with no servers on
/// fixed ports: for the start-up checks of the engine.
fn manager_on_engine(api: &testapiserver::Handle, docker_host: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_manager"));
    command
        .args([
            &format!("--kubeconfig={}", api.kubeconfig_path().display()),
            "--health-addr=0",
            "--diagnostics-address=0",
        ])
        .env("DOCKER_HOST", docker_host)
        .env_remove("RUST_LOG");
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_docker_engine_stops_the_manager_with_a_clear_error() {
    let api = testapiserver::TestApiServer::start(testapiserver::Options::default())
        .await
        .unwrap();
    let output = manager_on_engine(&api, "unix:///nonexistent/docker.sock")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot use the container engine"),
        "{stderr}"
    );
}

/// The rootless engine of the podman lane (`hack/podman.sh rootless`).
const ROOTLESS_ENV: &str = "CAPD_TEST_ROOTLESS_DOCKER_HOST";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rootless_engine_lacking_what_nodes_need_stops_the_manager_naming_it() {
    let Some(host) = std::env::var(ROOTLESS_ENV).ok().filter(|h| !h.is_empty()) else {
        eprintln!("SKIPPED: {ROOTLESS_ENV} is not set (the podman lane of hack/test.sh sets it)");
        return;
    };
    let address = capd::docker::EngineAddress {
        host: host.clone(),
        tls: None,
    };
    use capd::docker::ContainerRuntime;
    let engine = capd::docker::DockerEngine::connect_to(&address)
        .await
        .unwrap();
    let facts = engine.host_info().await.unwrap();
    assert!(
        facts.rootless(),
        "{ROOTLESS_ENV}={host} is not rootless: {facts:?}"
    );
    let api = testapiserver::TestApiServer::start(testapiserver::Options::default())
        .await
        .unwrap();
    let mut manager = manager_on_engine(&api, &host)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    match facts.rootless_shortfall() {
        // This CI machine: cgroup v1.
        Some(shortfall) => {
            let output = tokio::time::timeout(Duration::from_secs(60), manager.wait_with_output())
                .await
                .unwrap()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(1), "{stderr}");
            let expected = format!(
                "cannot use the container engine: {} cannot run nodes: {shortfall}",
                engine.engine()
            );
            assert!(stderr.contains(&expected), "{expected:?} not in {stderr}");
        }
        // A host with cgroup v2 delegation: the start-up check lets the engine through.
        None => {
            use tokio::io::AsyncBufReadExt;
            let stderr = manager.stderr.take().unwrap();
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            let reachable = tokio::time::timeout(Duration::from_secs(60), async {
                while let Some(line) = lines.next_line().await.unwrap() {
                    if line.contains("Container engine is reachable") {
                        return true;
                    }
                }
                false
            })
            .await
            .unwrap();
            assert!(reachable, "the manager did not accept the rootless engine");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_machine_pools_off_pools_and_pool_templates_are_left_alone() {
    let mut env = Env::start_with("nopools", &["--feature-gates=MachinePool=false"]).await;
    env.wait_ready().await;
    // A MachinePool of 2 with its DockerMachinePool, in a cluster whose infrastructure is ready.
    let name = env.cluster_name();
    env.provisioned_cluster(&name, json!({})).await;
    env.mark_control_plane_initialized(&name).await;
    env.create_secret("pool-bootstrap", &cloud_config(0)).await;
    let pool = env
        .create_machine_pool(&name, "pool", 2, &[], "pool-bootstrap")
        .await;
    // And one of CAPD 1.14's DevMachinePools.
    env.kinds = InfraKinds::Dev;
    let dev_pool = env
        .create_machine_pool(&name, "devpool", 1, &[], "pool-bootstrap")
        .await;
    env.kinds = InfraKinds::Docker;
    for (kind, spec) in [
        (
            "DockerMachinePoolTemplate",
            json!({"template": {"spec": {"template": {}}}}),
        ),
        ("DockerMachineTemplate", json!({"template": {"spec": {}}})),
    ] {
        env.create(
            &infra(kind),
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": kind,
                "metadata": {"name": "workers", "namespace": NAMESPACE},
                "spec": spec,
            }),
        )
        .await;
    }
    // The machine template controller runs (and would have served both by now) ...
    eventually(
        Duration::from_secs(30),
        "the machine template capacity",
        || async {
            let t = env.get(&infra("DockerMachineTemplate"), "workers").await?;
            t.data["status"]["capacity"].is_object().then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // ... the pool template one does not.
    let pool_template = env
        .get(&infra("DockerMachinePoolTemplate"), "workers")
        .await
        .unwrap();
    assert!(
        pool_template.data.get("status").is_none(),
        "{:?}",
        pool_template.data
    );
    // Nor does the pool controller: no finalizer, no status, no container.
    let dmp = env
        .get(&infra("DockerMachinePool"), &pool.name)
        .await
        .unwrap();
    assert!(dmp.metadata.finalizers.is_none(), "{:?}", dmp.metadata);
    assert!(dmp.data.get("status").is_none(), "{:?}", dmp.data);
    let dev = env
        .get(&infra("DevMachinePool"), &dev_pool.name)
        .await
        .unwrap();
    assert!(dev.metadata.finalizers.is_none(), "{:?}", dev.metadata);
    assert!(dev.data.get("status").is_none(), "{:?}", dev.data);
    assert_eq!(cluster_containers(&name), vec![format!("{name}-lb")]);
    // What a running pool controller logs: its watches (`controller="…"`) and its reconciles
    // (`kind=…`). The CRD migrator names the pool CRDs too, which is no controller.
    let log = env.manager_log();
    for (controller, kind) in [
        ("dockermachinepool", "DockerMachinePool"),
        ("devmachinepool", "DevMachinePool"),
    ] {
        for mark in [
            format!("controller=\"{controller}\""),
            format!("kind={kind} "),
        ] {
            assert!(
                !log.contains(&mark),
                "no {controller} controller runs ({mark}):\n{log}"
            );
        }
    }
}
