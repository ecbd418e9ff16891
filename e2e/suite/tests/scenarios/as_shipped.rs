//! The manager as shipped (issue 18): its image (`hack/image-build.sh`) run as a container under
//! the Deployment's restrictions (read-only root file system, no capability, no privilege
//! escalation, uid 0, the socket, certificate and kubeconfig mounts). Quick start with
//! `preLoadImages`, pause, then deletion. Set `CAPD_E2E_MANAGER_IMAGE` (hack/test.sh does); without
//! it the scenario is skipped with a message, or fails when `CI=true`.
//!
//! Then the CA roots of the image (issue 32): a kubeconfig without CA data, once with
//! `insecure-skip-tls-verify: true`, once trusting the API server through the CA bundle at the
//! path the image ships it.

use std::time::Duration;

use capd_e2e::shipped::{
    CA_BUNDLE, Trust, image_from_environment, pem_certificates, shipped_ca_bundle, without_ca_data,
};
use capd_e2e::*;
use serde_json::json;

use crate::PROVISION;

/// Where the node image's `ctr` stand-in keeps the archives it imported.
const IMPORTED: &str = "/var/lib/capd-standin/imported";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_image_runs_quick_start_with_preloaded_images_pause_and_deletion() {
    if !capd_e2e::installed::runs_with_stand_in(
        "the_shipped_image_runs_quick_start_with_preloaded_images_pause_and_deletion",
    ) {
        return;
    }
    let Some(image) = image_from_environment() else {
        return;
    };
    let mut env = Env::scenario_as_shipped("shipped", &image).await;
    let manager = env
        .manager_container()
        .expect("the manager runs as a container");
    let inspect = |format: &str| docker(&["inspect", "--format", format, &manager]).1;
    // Podman names an image loaded from an archive localhost/<name>.
    let running = inspect("{{.Config.Image}}");
    assert!(
        running == image || running == format!("localhost/{image}"),
        "{running}"
    );
    assert_eq!(inspect("{{.State.Running}}"), "true");
    assert_eq!(inspect("{{.HostConfig.ReadonlyRootfs}}"), "true");
    // Docker reports `--cap-drop=ALL` as it was given; Podman lists what it dropped, which must
    // be every capability a container gets by default.
    let dropped = inspect("{{.HostConfig.CapDrop}}");
    let defaults = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "NET_RAW",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let listed: Vec<&str> = dropped
        .trim_matches(['[', ']'])
        .split_whitespace()
        .collect();
    assert!(
        listed == ["ALL"] || defaults.iter().all(|c| listed.contains(c)),
        "capabilities dropped: {dropped}"
    );
    assert_eq!(inspect("{{.HostConfig.CapAdd}}"), "[]");
    assert_eq!(inspect("{{.Config.User}}"), "0:0");
    // Webhooks start before readiness, from the certificate mounted where the pod has it.
    assert!(
        env.manager_log().contains(r#"Serving server="webhook""#),
        "the webhook server serves the mounted certificate:\n{}",
        env.manager_log()
    );

    // Quick start: one control plane, one worker preloading a local image (the test haproxy).
    let name = env.cluster_name();
    let (cp, worker) = (format!("{name}-cp"), format!("{name}-md"));
    let preload = format!(
        "{}/haproxy:{}",
        env.images.haproxy_repository, env.images.haproxy_tag
    );
    env.create_kubeconfig_secret(&name).await;
    let dc = env.provisioned_cluster(&name, json!({})).await;
    env.create_secret("cp-bootstrap", &cloud_config(0)).await;
    env.create_secret("md-bootstrap", &cloud_config(0)).await;
    let control_plane = MachineSpec {
        control_plane: true,
        bootstrap_secret: Some("cp-bootstrap".into()),
        ..MachineSpec::default()
    };
    let worker_spec = MachineSpec {
        bootstrap_secret: Some("md-bootstrap".into()),
        preload_images: vec![preload.clone()],
        ..MachineSpec::default()
    };
    env.create_machine_with(&name, "cp", &control_plane).await;
    env.create_machine_with(&name, "md", &worker_spec).await;
    env.wait_machine_provisioned("cp", PROVISION).await;
    env.mark_control_plane_initialized(&name).await;
    let md = env.wait_machine_provisioned("md", PROVISION).await;
    assert_eq!(
        condition_state(&md, "PreLoadedImagesReady").map(|c| c.0),
        Some("True".into()),
        "conditions: {}",
        md.data["status"]["conditions"]
    );
    let lb = format!("{name}-lb");
    assert_eq!(
        dc.data["spec"]["controlPlaneEndpoint"]["host"],
        json!(ip_on(&lb, &env.network))
    );
    assert_eq!(
        cluster_containers(&name),
        vec![cp.clone(), lb.clone(), worker.clone()]
    );

    // The image arrived in the worker's containerd: one archive, a `docker save` of it.
    assert_eq!(docker_exec(&worker, &["ls", IMPORTED]), "0.tar");
    let manifest = docker_exec(
        &worker,
        &["tar", "-xOf", &format!("{IMPORTED}/0.tar"), "manifest.json"],
    );
    assert!(manifest.contains(&preload), "manifest: {manifest}");
    assert_eq!(
        docker_exec(
            &cp,
            &["sh", "-c", &format!("ls {IMPORTED} 2>/dev/null || true")]
        ),
        "",
        "nothing is preloaded where none was asked for"
    );

    // Pause: a new worker gets no container while the cluster is paused, then one once resumed.
    env.merge_patch(&capi("Cluster"), &name, json!({"spec": {"paused": true}}))
        .await;
    eventually(Duration::from_secs(30), "the Paused condition", || async {
        let dm = env.get(&infra("DockerMachine"), "cp").await?;
        (condition_state(&dm, "Paused")?.0 == "True").then_some(())
    })
    .await;
    env.create_secret("md2-bootstrap", &cloud_config(0)).await;
    env.create_machine(&name, "md2", false, Some("md2-bootstrap"))
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        cluster_containers(&name),
        vec![cp.clone(), lb.clone(), worker.clone()],
        "no container while paused"
    );
    env.merge_patch(&capi("Cluster"), &name, json!({"spec": {"paused": false}}))
        .await;
    let md2 = env.wait_machine_provisioned("md2", PROVISION).await;
    assert_eq!(condition_state(&md2, "Paused").unwrap().0, "False");

    // Deletion as core does it leaves nothing behind.
    env.delete_cluster_as_core(&name, Duration::from_secs(90))
        .await;
    assert_eq!(cluster_containers(&name), Vec::<String>::new());
    assert!(
        !network_exists(&env.network),
        "the network the provider created is removed"
    );
    let log = env.manager_log();
    assert!(
        !log.contains("read-only file system") && !log.contains("Read-only file system"),
        "the manager tried to write to its root file system:\n{log}"
    );
}

/// What the manager logs when it finds no root at all (the image before it shipped a bundle).
const NO_ROOTS: &str = "No CA certificates were loaded from the system";

/// A kubeconfig without `certificate-authority-data` and with `insecure-skip-tls-verify: true`:
/// the manager as shipped starts and gets ready. Before the image carried a CA bundle it exited
/// at once, because kube builds its system-roots verifier even when verification is off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_image_runs_with_a_kubeconfig_that_skips_tls_verification() {
    if !capd_e2e::installed::runs_with_stand_in(
        "the_shipped_image_runs_with_a_kubeconfig_that_skips_tls_verification",
    ) {
        return;
    }
    let Some(image) = image_from_environment() else {
        return;
    };
    let mut env = Env::scenario_as_shipped_without_manager("shipped-insecure", &image).await;
    let management = std::fs::read_to_string(env.kubeconfig_path()).unwrap();
    let (kubeconfig, _) = without_ca_data(&management, Trust::SkipVerification);
    assert!(
        !kubeconfig.contains("certificate-authority")
            && kubeconfig.contains("insecure-skip-tls-verify"),
        "{kubeconfig}"
    );
    env.give_manager_kubeconfig(&kubeconfig);
    env.start_manager();
    env.wait_ready().await;
    let log = env.manager_log();
    assert!(!log.contains(NO_ROOTS), "{log}");
    assert!(
        log.contains("Kubernetes API server is reachable"),
        "the manager talked to the API server:\n{log}"
    );
}

/// A kubeconfig without CA data, verifying the server: the manager as shipped trusts exactly the
/// roots at the path where the image ships its bundle. The image's own bundle (Debian's public
/// roots) does not hold the test API server's CA, so the manager refuses the server's certificate
/// (and does not fail for want of roots); with the same bundle plus that CA mounted at the same
/// path, as an operator trusting a private CA would, it gets ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_image_trusts_the_server_through_the_ca_bundle_where_it_ships_it() {
    if !capd_e2e::installed::runs_with_stand_in(
        "the_shipped_image_trusts_the_server_through_the_ca_bundle_where_it_ships_it",
    ) {
        return;
    }
    let Some(image) = image_from_environment() else {
        return;
    };
    let mut env = Env::scenario_as_shipped_without_manager("shipped-roots", &image).await;
    let management = std::fs::read_to_string(env.kubeconfig_path()).unwrap();
    let (kubeconfig, server_ca) = without_ca_data(&management, Trust::SystemRoots);
    assert!(
        !kubeconfig.contains("certificate-authority"),
        "{kubeconfig}"
    );
    assert!(
        !kubeconfig.contains("insecure-skip-tls-verify"),
        "{kubeconfig}"
    );

    // What the image ships: Debian's public roots, every one a certificate, none of them the
    // server's CA, and nothing of this host's own trust store.
    let shipped = shipped_ca_bundle(&image);
    let roots = pem_certificates(&shipped);
    assert!(
        roots.len() >= 100,
        "{CA_BUNDLE} holds {} certificates",
        roots.len()
    );
    let server_ca_der = pem_certificates(&server_ca);
    assert_eq!(server_ca_der.len(), 1);
    assert!(!roots.contains(&server_ca_der[0]));
    let host_additions = std::fs::read_dir("/usr/local/share/ca-certificates")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path()).ok());
    for pem in host_additions {
        for certificate in pem_certificates(&pem) {
            assert!(
                !roots.contains(&certificate),
                "the image ships a CA this host added to its own trust store"
            );
        }
    }

    // As shipped: the server's certificate chains to no shipped root.
    env.give_manager_kubeconfig(&kubeconfig);
    env.start_manager();
    let log = eventually(
        Duration::from_secs(60),
        "the manager to refuse the server's certificate",
        || async {
            let log = env.manager_log();
            log.contains("Manager failed").then_some(log)
        },
    )
    .await;
    assert!(log.contains("UnknownIssuer"), "{log}");
    assert!(
        !log.contains(NO_ROOTS),
        "the shipped bundle was not read:\n{log}"
    );
    env.stop_manager(false);

    // The shipped roots plus the server's CA, where the image has its bundle: trusted.
    env.mount_ca_bundle(&format!("{shipped}{server_ca}"));
    env.start_manager();
    env.wait_ready().await;
}
