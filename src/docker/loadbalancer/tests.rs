//! Tests of the load balancer: container spec and the apply procedure (templates are tested in
//! `template/tests.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::docker::fake::{Call, FakeRuntime};
use crate::docker::types::{EndpointAddresses, ExecOutput, NetworkSpec};

#[test]
fn image_defaults_and_overrides() {
    assert_eq!(image(None, None), "kindest/haproxy:v20230606-42a2262b");
    assert_eq!(
        image(Some(""), Some(" ")),
        "kindest/haproxy:v20230606-42a2262b"
    );
    assert_eq!(
        image(Some("registry.local/mirror/"), Some("v1")),
        "registry.local/mirror/haproxy:v1"
    );
}

#[test]
fn container_spec_publishes_the_frontend_port() {
    let mut spec = LoadBalancerSpec::new("c1", "kindest/haproxy:v1", "kind");
    let c = spec.container_spec();
    assert_eq!(c.name, "c1-lb");
    assert_eq!(
        c.labels[crate::docker::node::ROLE_LABEL],
        "external-load-balancer"
    );
    assert_eq!(c.labels[crate::docker::node::CLUSTER_LABEL], "c1");
    assert_eq!(
        c.entrypoint.unwrap(),
        vec![
            "haproxy",
            "-W",
            "-db",
            "-f",
            "/usr/local/etc/haproxy/haproxy.cfg"
        ]
    );
    let ports: Vec<(u16, &str)> = c
        .ports
        .iter()
        .map(|p| (p.container_port, p.host_ip.as_str()))
        .collect();
    assert_eq!(ports, vec![(6443, "127.0.0.1"), (8404, "127.0.0.1")]);
    assert!(c.privileged && !c.private_cgroupns);
    assert_eq!(
        c.restart,
        crate::docker::types::RestartPolicy::OnFailure { max_retries: 1 }
    );

    spec.frontend_port = 7777;
    spec.publish_address = "0.0.0.0".into();
    spec.ip_family = IpFamily::V6;
    let c = spec.container_spec();
    assert_eq!(
        c.ports[0].container_port, 7777,
        "published port must reach haproxy's frontend"
    );
    let published: Vec<u16> = c.ports.iter().map(|p| p.container_port).collect();
    assert_eq!(
        published,
        [7777, 6443, 8404],
        "6443/tcp stays published for kind get kubeconfig"
    );
    assert!(c.ports.iter().all(|p| p.host_ip == "0.0.0.0"));
    assert_eq!(c.sysctls["net.ipv6.conf.all.disable_ipv6"], "0");
}

#[test]
fn load_balancer_ip_follows_the_family() {
    let info = ContainerInfo {
        networks: [(
            "kind".to_string(),
            EndpointAddresses {
                ipv4: Some("172.18.0.2".parse().unwrap()),
                ipv6: Some("fc00::2".parse().unwrap()),
            },
        )]
        .into(),
        ..Default::default()
    };
    assert_eq!(
        load_balancer_ip(&info, "kind", IpFamily::V4)
            .unwrap()
            .to_string(),
        "172.18.0.2"
    );
    assert_eq!(
        load_balancer_ip(&info, "kind", IpFamily::Dual)
            .unwrap()
            .to_string(),
        "172.18.0.2"
    );
    assert_eq!(
        load_balancer_ip(&info, "kind", IpFamily::V6)
            .unwrap()
            .to_string(),
        "fc00::2"
    );
    assert!(load_balancer_ip(&info, "other", IpFamily::V4).is_none());
}

async fn running_lb() -> FakeRuntime {
    let fake = FakeRuntime::new();
    fake.add_image("kindest/haproxy:v1");
    let net = NetworkSpec {
        name: "kind".into(),
        driver: "bridge".into(),
        ..Default::default()
    };
    fake.create_network(&net).await.unwrap();
    create_load_balancer(
        &fake,
        &LoadBalancerSpec::new("c1", "kindest/haproxy:v1", "kind"),
        None,
    )
    .await
    .unwrap();
    fake
}

fn sighups(fake: &FakeRuntime) -> usize {
    fake.calls()
        .iter()
        .filter(|c| matches!(c, Call::KillContainer(n, s) if n == "c1-lb" && s == "SIGHUP"))
        .count()
}

#[tokio::test]
async fn apply_writes_validates_and_reloads_once() {
    let fake = running_lb().await;
    assert_eq!(
        find_load_balancer(&fake, "c1").await.unwrap().unwrap().name,
        "c1-lb"
    );
    let outcome = apply_config(&fake, "c1-lb", "config v1\n").await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Reloaded);
    assert_eq!(fake.file("c1-lb", CONFIG_PATH).unwrap(), b"config v1\n");
    let argv: Vec<Vec<String>> = fake.execs("c1-lb").into_iter().map(|r| r.argv).collect();
    assert!(argv.contains(&vec![
        "haproxy".into(),
        "-c".into(),
        "-f".into(),
        "/usr/local/etc/haproxy/haproxy.cfg.new".into()
    ]));
    assert_eq!(sighups(&fake), 1);

    assert_eq!(
        apply_config(&fake, "c1-lb", "config v1\n").await.unwrap(),
        ApplyOutcome::Unchanged
    );
    assert_eq!(
        sighups(&fake),
        1,
        "an unchanged config must not reload haproxy"
    );
}

#[tokio::test]
async fn invalid_config_keeps_the_running_one() {
    let fake = running_lb().await;
    apply_config(&fake, "c1-lb", "good\n").await.unwrap();
    fake.on_exec(|_, r| {
        (r.argv[0] == "haproxy").then(|| ExecOutput {
            stdout: Vec::new(),
            stderr: b"[ALERT] config : parsing [haproxy.cfg.new:1] : unknown keyword 'bad'"
                .to_vec(),
            exit_code: 1,
        })
    });
    let err = apply_config(&fake, "c1-lb", "bad\n").await.unwrap_err();
    assert_eq!(err.category(), "invalid_config");
    assert!(err.to_string().contains("unknown keyword 'bad'"));
    assert_eq!(fake.file("c1-lb", CONFIG_PATH).unwrap(), b"good\n");
    assert_eq!(sighups(&fake), 1);
}

#[tokio::test]
async fn image_without_haproxy_applies_unvalidated() {
    let fake = running_lb().await;
    fake.on_exec(|_, r| {
        (r.argv[0] == "haproxy").then(|| ExecOutput {
            exit_code: 127,
            ..Default::default()
        })
    });
    assert_eq!(
        apply_config(&fake, "c1-lb", "cfg\n").await.unwrap(),
        ApplyOutcome::ReloadedUnvalidated
    );
    assert_eq!(sighups(&fake), 1);
}

#[tokio::test]
async fn read_back_mismatch_restores_the_previous_config() {
    let fake = running_lb().await;
    apply_config(&fake, "c1-lb", "old\n").await.unwrap();
    let reads = Arc::new(AtomicUsize::new(0));
    let counter = reads.clone();
    fake.on_exec(move |_, r| {
        let is_read = r.argv == ["cp", CONFIG_PATH, "/dev/stdout"];
        // The first read (the previous config) is real; the read-back after writing is corrupted.
        (is_read && counter.fetch_add(1, Ordering::SeqCst) == 1).then(|| ExecOutput {
            stdout: b"trunc".to_vec(),
            ..Default::default()
        })
    });
    let err = apply_config(&fake, "c1-lb", "new\n").await.unwrap_err();
    assert_eq!(err.category(), "config_mismatch");
    assert_eq!(fake.file("c1-lb", CONFIG_PATH).unwrap(), b"old\n");
    assert_eq!(sighups(&fake), 1, "a mismatching config must not be loaded");
}

#[tokio::test]
async fn stopped_load_balancer_is_reported() {
    let fake = running_lb().await;
    fake.stop_container("c1-lb");
    let err = apply_config(&fake, "c1-lb", "cfg\n").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "find load balancer container c1-lb: not found or not running"
    );
}

#[tokio::test]
async fn delete_is_idempotent() {
    let fake = running_lb().await;
    delete_load_balancer(&fake, "c1").await.unwrap();
    delete_load_balancer(&fake, "c1").await.unwrap();
    assert!(find_load_balancer(&fake, "c1").await.unwrap().is_none());
}
