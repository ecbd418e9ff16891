//! The real `manager` binary: `--help` documents every flag, bad flags and an unreachable API
//! server fail fast with a clear message.

// Test crate: helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod manager_support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use manager_support::{FakeApi, eventually, free_port, http_get};

const MANAGER: &str = env!("CARGO_BIN_EXE_manager");

/// Every flag CAPD's manager has that this one supports, plus ours.
const FLAGS: &[&str] = &[
    "--namespace",
    "--watch-filter",
    "--leader-elect",
    "--leader-elect-lease-duration",
    "--leader-elect-renew-deadline",
    "--leader-elect-retry-period",
    "--health-addr",
    "--diagnostics-address",
    "--insecure-diagnostics",
    "--tls-min-version",
    "--sync-period",
    "--dockermachine-concurrency",
    "--dockercluster-concurrency",
    "--dockermachinetemplate-concurrency",
    "--dockermachinepool-concurrency",
    "--devmachine-concurrency",
    "--devcluster-concurrency",
    "--devmachinetemplate-concurrency",
    "--devmachinepool-concurrency",
    "--kube-api-qps",
    "--kube-api-burst",
    "--clustercache-client-qps",
    "--clustercache-client-burst",
    "--skip-crd-migration-phases",
    "--feature-gates",
    "--webhook-port",
    "--webhook-cert-dir",
    "--webhook-cert-name",
    "--webhook-key-name",
    "--v",
    "--logging-format",
    "--docker-network",
    "--controllers",
    "--gardener-infrastructure",
    "--kubeconfig",
];

/// Runs the manager with `args`, killing it if it outlives `limit`.
fn run_manager(args: &[&str], envs: &[(&str, &str)], limit: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let mut command = Command::new(MANAGER);
    command
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .env_remove("CAPD_DOCKER_NETWORK")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in envs {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!(
                "manager still running after {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    (child.wait_with_output().unwrap(), elapsed)
}

/// The help text of `flag`: the lines after its heading up to the next flag.
fn help_of<'a>(help: &'a str, flag: &str) -> Vec<&'a str> {
    let mut lines = help.lines().skip_while(|line| {
        let heading = line.trim_start();
        !(heading.starts_with(flag)
            && heading[flag.len()..].starts_with([' ', '[', '=', ',', '\n'])
            || heading.starts_with(&format!("-v, {flag} ")))
    });
    let Some(_heading) = lines.next() else {
        return Vec::new();
    };
    lines
        .take_while(|line| !line.trim_start().starts_with('-'))
        .filter(|line| !line.trim().is_empty())
        .collect()
}

#[test]
fn help_documents_every_flag_with_its_default() {
    let (output, _) = run_manager(&["--help"], &[], Duration::from_secs(10));
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for flag in FLAGS {
        let text = help_of(&help, flag);
        let description = text.iter().find(|line| !line.trim_start().starts_with('['));
        assert!(
            description.is_some_and(|d| d.split_whitespace().count() >= 2),
            "{flag} has no description in --help:\n{help}"
        );
    }
    for default in [
        "[default: 15s]",
        "[default: 10s]",
        "[default: 2s]",
        "[default: :9440]",
        "[default: :8443]",
        "[default: 10m]",
        "[default: VersionTLS12]",
        "[default: kind]",
        "[default: /tmp/k8s-webhook-server/serving-certs/]",
    ] {
        assert!(help.contains(default), "--help lacks {default}");
    }
    assert!(
        help.contains("CAPD_DOCKER_NETWORK"),
        "the environment override is documented"
    );
}

#[test]
fn a_bad_flag_value_exits_2_naming_the_flag_and_the_problem() {
    let (output, _) = run_manager(
        &["--feature-gates=MachinePools=true"],
        &[],
        Duration::from_secs(10),
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("--feature-gates"), "{stderr}");
    assert!(
        stderr.contains("unrecognized feature gate \"MachinePools\""),
        "{stderr}"
    );

    let (output, _) = run_manager(&["--sync-period=10"], &[], Duration::from_secs(10));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("missing unit"), "{stderr}");
}

#[test]
fn an_unknown_or_empty_controller_set_exits_2_before_anything_starts() {
    let (output, _) = run_manager(
        &["--controllers=cluster-api,gardener"],
        &[],
        Duration::from_secs(10),
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("--controllers"), "{stderr}");
    assert!(
        stderr.contains(
            "unknown controller \"gardener\": expected cluster-api or gardener-infrastructure"
        ),
        "{stderr}"
    );

    let (output, _) = run_manager(&["--controllers="], &[], Duration::from_secs(10));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("no controller named"), "{stderr}");
}

#[test]
fn inconsistent_leader_election_timings_are_refused() {
    let (output, _) = run_manager(
        &["--leader-elect", "--leader-elect-renew-deadline=20s"],
        &[],
        Duration::from_secs(10),
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("invalid leader election settings: --leader-elect-lease-duration (15s) must be greater than --leader-elect-renew-deadline (20s)"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_api_server_exits_1_quickly_naming_its_url() {
    // A port that refuses connections: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: mgmt\n  cluster:\n    server: https://127.0.0.1:{port}\n\
             contexts:\n- name: mgmt\n  context:\n    cluster: mgmt\n    user: admin\ncurrent-context: mgmt\n\
             users:\n- name: admin\n  user:\n    token: not-a-real-token\n"
        ),
    )
    .unwrap();
    let kubeconfig_flag = format!("--kubeconfig={}", kubeconfig.display());
    let (output, elapsed) = run_manager(
        &[
            &kubeconfig_flag,
            "--health-addr=0",
            "--diagnostics-address=0",
        ],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    let failure: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("Manager failed"))
        .collect();
    assert_eq!(failure.len(), 1, "one error line:\n{stderr}");
    assert!(
        failure[0].contains(&format!(
            "cannot reach the Kubernetes API server at https://127.0.0.1:{port}/"
        )),
        "{stderr}"
    );
    assert!(
        failure[0].contains("Connection refused"),
        "the cause is in the chain: {stderr}"
    );
    assert!(
        !stderr.contains("not-a-real-token"),
        "credentials never reach the log"
    );
}

#[test]
fn json_logging_writes_one_json_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing-kubeconfig");
    let kubeconfig_flag = format!("--kubeconfig={}", missing.display());
    let (output, _) = run_manager(
        &[&kubeconfig_flag, "--logging-format=json"],
        &[("CAPD_DOCKER_NETWORK", "capd-e2e")],
        Duration::from_secs(10),
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let start = lines
        .iter()
        .find(|l| l["message"] == "Starting manager")
        .unwrap();
    assert_eq!(
        start["docker_network"], "capd-e2e",
        "the environment sets the network"
    );
    let last = lines.last().unwrap();
    assert_eq!(last["level"], "ERROR");
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .starts_with("read kubeconfig "),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_manager_cleanly_and_releases_the_lease() {
    let api = FakeApi::start(true).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig_flag = format!("--kubeconfig={}", api.kubeconfig(dir.path()).display());
    let health_port = free_port();
    let health_flag = format!("--health-addr=127.0.0.1:{health_port}");
    let child = tokio::process::Command::new(MANAGER)
        .args([
            &kubeconfig_flag,
            &health_flag,
            "--diagnostics-address=0",
            "--leader-elect",
        ])
        .env_remove("RUST_LOG")
        .env("POD_NAMESPACE", "capd-rs-test")
        .env("POD_NAME", "capd-controller-manager-abc12")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let lease_holder = || {
        let lease = api.lease("capd-rs-test", "controller-leader-election-capd")?;
        lease.spec?.holder_identity
    };
    let holder = eventually(Duration::from_secs(20), "the Lease to be taken", || async {
        lease_holder().filter(|h| !h.is_empty())
    })
    .await;
    assert!(
        holder.starts_with("capd-controller-manager-abc12_"),
        "{holder}"
    );
    // Ready once the controllers' watches synced (the fake API answers them with empty lists).
    eventually(Duration::from_secs(20), "/readyz to answer 200", || async {
        http_get(health_port, "/readyz")
            .await
            .ok()
            .filter(|(code, _)| *code == 200)
    })
    .await;

    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("the manager exits within 10s of SIGTERM")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("Received signal") && stderr.contains("SIGTERM"),
        "{stderr}"
    );
    assert!(stderr.contains("Manager stopped"), "{stderr}");
    assert_eq!(lease_holder().as_deref(), Some(""), "the Lease is released");
}
