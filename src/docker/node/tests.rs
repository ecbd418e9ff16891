//! Tests of node naming, labels, run options, addresses and operations.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::docker::fake::{Call, FakeRuntime, Op};
use crate::docker::runtime::{ContainerRuntime, RuntimeError};
use crate::docker::types::{
    ContainerInfo, EndpointAddresses, ExecOutput, ExecRequest, NetworkSpec, RestartPolicy,
};

fn cp_spec() -> NodeSpec {
    NodeSpec::new(
        "c1",
        "c1-cp-abc",
        NodeRole::ControlPlane,
        "kindest/node:v1.31.0",
        "kind",
    )
}

#[test]
fn container_names_follow_capd() {
    assert_eq!(machine_container_name("c1", "md-0-xyz"), "c1-md-0-xyz");
    assert_eq!(machine_container_name("c1", "c1-md-0-xyz"), "c1-md-0-xyz");
    assert_eq!(load_balancer_container_name("c1"), "c1-lb");
}

#[test]
fn provider_ids_round_trip() {
    assert_eq!(provider_id("c1-cp-abc"), "docker:////c1-cp-abc");
    assert_eq!(
        container_from_provider_id("docker:////c1-cp-abc"),
        Some("c1-cp-abc")
    );
    assert_eq!(container_from_provider_id("aws:///i-1"), None);
    assert_eq!(container_from_provider_id("docker:////"), None);
}

#[test]
fn labels_are_kind_compatible() {
    let mut spec = cp_spec();
    spec.failure_domain = Some("fd1".into());
    spec.machine_pool = Some((MACHINE_POOL_LABEL.into(), "pool-a".into()));
    let labels = spec.labels();
    assert_eq!(labels["io.x-k8s.kind.cluster"], "c1");
    assert_eq!(labels["io.x-k8s.kind.role"], "control-plane");
    assert_eq!(labels["io.x-k8s.cluster.failureDomain"], "fd1");
    assert_eq!(labels["docker.cluster.x-k8s.io/machine-pool"], "pool-a");
    let worker = NodeSpec::new("c1", "c1-w", NodeRole::Worker, "img", "kind");
    assert_eq!(worker.labels()[ROLE_LABEL], "worker");
    assert!(!worker.labels().contains_key(FAILURE_DOMAIN_LABEL));
}

#[test]
fn control_plane_run_options_match_capd() {
    let spec = cp_spec().container_spec();
    assert_eq!(spec.hostname.as_deref(), Some("c1-cp-abc"));
    assert!(spec.privileged && spec.tty);
    assert_eq!(
        spec.security_opt,
        vec!["seccomp=unconfined", "apparmor=unconfined"]
    );
    assert_eq!(spec.tmpfs.keys().collect::<Vec<_>>(), vec!["/run", "/tmp"]);
    assert_eq!(spec.volumes, vec!["/var"]);
    assert_eq!(
        spec.mounts[0].to_bind_string(),
        "/lib/modules:/lib/modules:ro"
    );
    assert_eq!(spec.restart, RestartPolicy::OnFailure { max_retries: 1 });
    assert!(spec.private_cgroupns);
    assert!(spec.sysctls.is_empty());
    assert_eq!(spec.network, "kind");
    assert_eq!(
        spec.env,
        vec![(
            "KUBECONFIG".to_string(),
            "/etc/kubernetes/admin.conf".to_string()
        )]
    );
    assert_eq!(
        spec.ports,
        vec![PortPublish {
            container_port: 6443,
            host_ip: "127.0.0.1".into(),
            host_port: None
        }]
    );
    assert!(spec.entrypoint.is_none() && spec.cmd.is_none());
}

#[test]
fn workers_publish_nothing_and_old_images_share_the_cgroup_namespace() {
    let mut spec = NodeSpec::new("c1", "c1-w", NodeRole::Worker, "img", "kind");
    spec.mode = crate::docker::kind::KindMode::Kind0_19;
    let spec = spec.container_spec();
    assert!(spec.ports.is_empty());
    assert!(spec.env.is_empty());
    assert!(!spec.private_cgroupns);
}

#[test]
fn ipv6_clusters_get_sysctls() {
    for family in [IpFamily::V6, IpFamily::Dual] {
        let mut spec = cp_spec();
        spec.ip_family = family;
        let sysctls = spec.container_spec().sysctls;
        assert_eq!(sysctls["net.ipv6.conf.all.disable_ipv6"], "0");
        assert_eq!(sysctls["net.ipv6.conf.all.forwarding"], "1");
    }
}

#[test]
fn host_quirks_and_extra_mounts() {
    let mut spec = cp_spec();
    spec.host = HostQuirks {
        needs_dev_mapper: true,
        userns_remap: true,
        rootless: true,
        selinux_enforcing: true,
    };
    spec.extra_mounts = vec![ExtraMount {
        container_path: "/var/run/docker.sock".into(),
        host_path: "/var/run/docker.sock".into(),
        read_only: false,
    }];
    spec.publish_address = "0.0.0.0".into();
    let c = spec.container_spec();
    let binds: Vec<String> = c.mounts.iter().map(|m| m.to_bind_string()).collect();
    assert_eq!(
        binds,
        vec![
            "/lib/modules:/lib/modules:ro",
            "/dev/mapper:/dev/mapper:ro",
            "/var/run/docker.sock:/var/run/docker.sock:Z"
        ]
    );
    assert!(c.userns_host);
    assert_eq!(c.devices[0].host_path, "/dev/fuse");
    assert_eq!(c.ports[0].host_ip, "0.0.0.0");
}

#[test]
fn proxy_variables_extend_no_proxy() {
    let mut spec = cp_spec();
    spec.network_subnets = vec![
        "172.18.0.0/16".parse().unwrap(),
        "fc00:f853:ccd:e793::/64".parse().unwrap(),
    ];
    spec.proxy = ProxyEnv {
        http_proxy: Some("http://proxy:3128".into()),
        https_proxy: None,
        no_proxy: Some("localhost,10.0.0.0/8".into()),
    };
    let env: BTreeMap<String, String> = spec.container_spec().env.into_iter().collect();
    let expected = "172.18.0.0/16,fc00:f853:ccd:e793::/64,localhost,10.0.0.0/8,c1-cp-abc,.svc,.svc.cluster,.svc.cluster.local";
    assert_eq!(env["NO_PROXY"], expected);
    assert_eq!(env["no_proxy"], expected);
    assert_eq!(env["HTTP_PROXY"], "http://proxy:3128");
    assert_eq!(env["http_proxy"], "http://proxy:3128");
    assert!(!env.contains_key("HTTPS_PROXY"));
}

#[test]
fn no_proxy_is_untouched_without_a_proxy() {
    assert!(ProxyEnv::default().container_env(&[], "n").is_empty());
    assert_eq!(
        no_proxy_list(None, &[], "n"),
        "n,.svc,.svc.cluster,.svc.cluster.local"
    );
}

#[test]
fn ip_family_follows_cluster_api() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(ip_family_from_cidrs(&[], &[]).unwrap(), IpFamily::V4);
    assert_eq!(
        ip_family_from_cidrs(&s(&["fd00::/48"]), &[]).unwrap(),
        IpFamily::V6
    );
    assert_eq!(
        ip_family_from_cidrs(&[], &s(&["fd01::/108"])).unwrap(),
        IpFamily::V6
    );
    assert_eq!(
        ip_family_from_cidrs(&s(&["10.0.0.0/16", "fd00::/48"]), &s(&["10.96.0.0/12"])).unwrap(),
        IpFamily::Dual
    );
    let err = ip_family_from_cidrs(&s(&["10.0.0.0/16"]), &s(&["fd01::/108"])).unwrap_err();
    assert!(err.to_string().contains("mismatch"));
    assert!(ip_family_from_cidrs(&s(&["a", "b", "c"]), &[]).is_err());
    assert!(ip_family_from_cidrs(&s(&["not-a-cidr"]), &[]).is_err());
}

#[test]
fn addresses_per_family() {
    let ep = EndpointAddresses {
        ipv4: Some("172.18.0.3".parse().unwrap()),
        ipv6: Some("fc00::3".parse().unwrap()),
    };
    let text = |v: Vec<MachineAddress>| {
        v.into_iter()
            .map(|a| format!("{}={}", a.kind.as_str(), a.address))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        text(machine_addresses("n1", &ep, IpFamily::V4).unwrap()),
        vec![
            "Hostname=n1",
            "InternalIP=172.18.0.3",
            "ExternalIP=172.18.0.3"
        ]
    );
    assert_eq!(
        text(machine_addresses("n1", &ep, IpFamily::V6).unwrap()),
        vec!["Hostname=n1", "InternalIP=fc00::3", "ExternalIP=fc00::3"]
    );
    assert_eq!(
        machine_addresses("n1", &ep, IpFamily::Dual).unwrap().len(),
        5
    );
    let v4_only = EndpointAddresses {
        ipv4: ep.ipv4,
        ipv6: None,
    };
    let err = machine_addresses("n1", &v4_only, IpFamily::Dual).unwrap_err();
    assert_eq!(
        err.to_string(),
        "read addresses of container n1: no IPv6 address"
    );
}

#[test]
fn addresses_come_from_the_provider_network_only() {
    let info = ContainerInfo {
        networks: BTreeMap::from([
            (
                "aaa-other".to_string(),
                EndpointAddresses {
                    ipv4: Some("10.1.0.2".parse().unwrap()),
                    ipv6: None,
                },
            ),
            (
                "kind".to_string(),
                EndpointAddresses {
                    ipv4: Some("172.18.0.2".parse().unwrap()),
                    ipv6: None,
                },
            ),
        ]),
        ..Default::default()
    };
    assert_eq!(
        endpoint_on_network(&info, "kind")
            .unwrap()
            .ipv4
            .unwrap()
            .to_string(),
        "172.18.0.2"
    );
    assert!(endpoint_on_network(&info, "missing").is_none());
}

#[test]
fn multi_user_line_matches_with_colour_codes() {
    assert!(is_multi_user_line(
        "[  OK  ] Reached target Multi-User System."
    ));
    assert!(is_multi_user_line(
        "[\u{1b}[0;32m  OK  \u{1b}[0m] Reached target \u{1b}[0;1;39mMulti-User System\u{1b}[0m."
    ));
    assert!(!is_multi_user_line("Reached target Basic System."));
}

async fn fake_with_network() -> FakeRuntime {
    let fake = FakeRuntime::new();
    let net = NetworkSpec {
        name: "kind".into(),
        driver: "bridge".into(),
        ..Default::default()
    };
    fake.create_network(&net).await.unwrap();
    fake
}

#[tokio::test]
async fn create_node_never_pulls_a_present_image() {
    let fake = fake_with_network().await;
    fake.add_image("kindest/node:v1.31.0");
    let info = create_node(&fake, &cp_spec(), None).await.unwrap();
    assert!(info.running);
    assert!(info.host_port(6443).is_some());
    assert!(!fake.calls().iter().any(|c| matches!(c, Call::PullImage(_))));
    let addresses = node_addresses(&fake, "c1-cp-abc", "kind", IpFamily::V4)
        .await
        .unwrap();
    assert_eq!(addresses[0].address, "c1-cp-abc");
    assert!(
        find_container(&fake, "c1", "c1-cp-abc")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        find_container(&fake, "c2", "c1-cp-abc")
            .await
            .unwrap()
            .is_none()
    );
    // One inspect answers the same, with the addresses in it.
    let found = inspect_node(&fake, "c1", "c1-cp-abc")
        .await
        .unwrap()
        .unwrap();
    assert!(is_running(&found));
    assert_eq!(
        addresses_on_network(&found, "kind", IpFamily::V4).unwrap(),
        addresses
    );
    assert!(
        inspect_node(&fake, "c2", "c1-cp-abc")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        inspect_node(&fake, "c1", "c1-absent")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn missing_image_is_a_clear_error() {
    let fake = fake_with_network().await;
    let err = create_node(&fake, &cp_spec(), None).await.unwrap_err();
    assert_eq!(err.category(), "image_unavailable");
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert_eq!(
        source,
        "image kindest/node:v1.31.0 not found locally and pull failed"
    );
    assert!(fake.containers().is_empty());
}

#[tokio::test]
async fn failed_start_is_reported_and_leaves_nothing() {
    let fake = fake_with_network().await;
    fake.add_image("kindest/node:v1.31.0");
    fake.fail_next(
        Op::RunContainer,
        RuntimeError::from_status(
            "start container c1-cp-abc",
            500,
            "OCI runtime create failed: unable to apply cgroup configuration",
        ),
    );
    let err = create_node(&fake, &cp_spec(), None).await.unwrap_err();
    assert_eq!(err.to_string(), "run container c1-cp-abc");
    assert!(fake.containers().is_empty());
    delete_node(&fake, "c1-cp-abc").await.unwrap();
}

#[tokio::test]
async fn exec_checked_reports_output_of_failures() {
    let fake = fake_with_network().await;
    fake.add_image("kindest/node:v1.31.0");
    create_node(&fake, &cp_spec(), None).await.unwrap();
    fake.on_exec(|_, r| {
        (r.argv[0] == "kubeadm").then(|| ExecOutput {
            stdout: b"preflight\n".to_vec(),
            stderr: b"error: port 6443 in use".to_vec(),
            exit_code: 1,
        })
    });
    let err = exec_checked(
        &fake,
        "c1-cp-abc",
        &ExecRequest::new(["kubeadm", "init"]),
        "run kubeadm",
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "run kubeadm in container c1-cp-abc: exited with status 1: preflight\nerror: port 6443 in use"
    );
}

#[tokio::test]
async fn waits_for_the_multi_user_target() {
    let fake = fake_with_network().await;
    fake.add_image("kindest/node:v1.31.0");
    create_node(&fake, &cp_spec(), None).await.unwrap();
    let err = wait_for_multi_user(&fake, "c1-cp-abc", Duration::from_millis(10))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "wait_timeout");
    fake.set_logs(
        "c1-cp-abc",
        "Welcome\n[  OK  ] Reached target Multi-User System.\n",
    );
    wait_for_multi_user(&fake, "c1-cp-abc", Duration::from_millis(10))
        .await
        .unwrap();
}

#[tokio::test]
async fn the_boot_line_is_seen_as_it_is_written_with_one_request() {
    let fake = fake_with_network().await;
    fake.add_image("kindest/node:v1.31.0");
    create_node(&fake, &cp_spec(), None).await.unwrap();
    let node = fake.clone();
    let boot = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        node.set_logs("c1-cp-abc", "[  OK  ] Reached target Multi-User System.\n");
    });
    wait_for_multi_user(&fake, "c1-cp-abc", Duration::from_secs(30))
        .await
        .unwrap();
    boot.await.unwrap();
    let follows = fake
        .calls()
        .into_iter()
        .filter(|c| matches!(c, Call::FollowLogs(_) | Call::ContainerLogs(_)))
        .count();
    assert_eq!(
        follows, 1,
        "the logs are followed, not read again and again"
    );
}

#[tokio::test]
async fn preload_streams_the_image_export_into_ctr_without_a_file() {
    let fake = fake_with_network().await;
    fake.add_image("kindest/node:v1.31.0")
        .add_image("busybox:1");
    create_node(&fake, &cp_spec(), None).await.unwrap();
    preload_image(&fake, "c1-cp-abc", "busybox:1")
        .await
        .unwrap();
    let execs = fake.execs("c1-cp-abc");
    assert_eq!(
        execs[0].argv,
        vec!["ctr", "--namespace=k8s.io", "images", "import", "-"]
    );
    assert_eq!(
        execs[0].stdin,
        Some(crate::docker::types::ExecStdin::Image(
            "busybox:1".to_string()
        )),
        "the engine's export of the image is the import's stdin"
    );
}

#[tokio::test]
async fn preload_of_an_image_that_cannot_be_pulled_fails_before_any_import() {
    let fake = fake_with_network().await;
    fake.add_image("kindest/node:v1.31.0");
    create_node(&fake, &cp_spec(), None).await.unwrap();
    let err = preload_image(&fake, "c1-cp-abc", "absent:1")
        .await
        .unwrap_err();
    assert_eq!(err.category(), "image_unavailable");
    assert!(fake.execs("c1-cp-abc").is_empty(), "nothing imported");
}
