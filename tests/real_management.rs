//! `hack/real-management.sh`, the real management plane from binaries the user brings: what it says
//! before it starts anything. Without the binaries (the usual case: nothing of Kubernetes or
//! Cluster API is built here) it must name each one that is missing and where it looked, refuse
//! bad arguments, and leave nothing running. Starting a plane needs those binaries and is run by
//! hand (docs/src/contributing.md, "A real management plane").

// Test crate: a failed expectation anywhere is a test failure with its message.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Runs the script with `args` (and `--dir` in `state`); returns (exit code, stdout, stderr).
fn run(state: &Path, args: &[&str]) -> (i32, String, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/real-management.sh");
    let output = Command::new("bash")
        .arg(script)
        .args(args)
        .args(["--dir", state.to_str().unwrap()])
        .output()
        .expect("bash runs the script");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// An executable file at `dir/name` that does nothing.
fn fake_binary(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn help_names_both_commands_and_what_the_user_brings() {
    let state = tempfile::tempdir().unwrap();
    let (code, out, _) = run(state.path(), &["--help"]);
    assert_eq!(code, 0);
    for word in [
        "up --kubernetes-server DIR --cluster-api DIR",
        "down",
        "restart-manager",
        "CAPD_E2E_MANAGER_RESTART",
        "kube-apiserver",
        "kubeadm-control-plane-manager",
        "ClusterTopology=true",
    ] {
        assert!(out.contains(word), "--help says {word:?}:\n{out}");
    }
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let state = tempfile::tempdir().unwrap();
    for (args, says) in [
        (vec![], "say up, down or restart-manager"),
        (vec!["up", "--frobnicate"], "unknown argument --frobnicate"),
        (vec!["up", "--port", "80"], "--port 80: expected a number"),
        (
            vec!["up", "--engine", "lxc"],
            "--engine lxc: expected auto, docker or podman",
        ),
        (vec!["up", "--cluster-api"], "--cluster-api needs a value"),
    ] {
        let (code, _, err) = run(state.path(), &args);
        assert_eq!(code, 2, "{args:?} exits 2: {err}");
        assert!(err.contains(says), "{args:?} says {says:?}: {err}");
    }
}

#[test]
fn up_without_the_binaries_says_which_to_bring() {
    let state = tempfile::tempdir().unwrap();
    let (code, _, err) = run(state.path(), &["up"]);
    assert_eq!(code, 1);
    assert!(err.contains("pass --kubernetes-server DIR"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    let empty_dir = empty.path().to_str().unwrap();
    let (code, _, err) = run(state.path(), &["up", "--kubernetes-server", empty_dir]);
    assert_eq!(code, 1);
    assert!(err.contains("pass --cluster-api DIR"), "{err}");

    let (code, _, err) = run(
        state.path(),
        &[
            "up",
            "--kubernetes-server",
            empty_dir,
            "--cluster-api",
            empty_dir,
        ],
    );
    assert_eq!(code, 1, "{err}");
    for name in [
        "kube-apiserver (in --kubernetes-server",
        "kube-controller-manager (in --kubernetes-server",
        "manager (in --cluster-api",
        "kubeadm-bootstrap-manager (in --cluster-api",
        "kubeadm-control-plane-manager (in --cluster-api",
        "Cluster API's core manifests (core-components.yaml or the source tree's config/default/",
        "Cluster API's control-plane manifests",
    ] {
        assert!(err.contains(name), "names {name:?}:\n{err}");
    }
    assert!(
        !state.path().join("pids").exists(),
        "nothing was started, so nothing is recorded"
    );
}

#[test]
fn binaries_found_in_the_release_layouts_are_not_named_missing() {
    let state = tempfile::tempdir().unwrap();
    let kubernetes = tempfile::tempdir().unwrap();
    // Kubernetes' release archive unpacked: kubernetes/server/bin/.
    let server_bin = kubernetes.path().join("kubernetes/server/bin");
    fake_binary(&server_bin, "kube-apiserver");
    let capi = tempfile::tempdir().unwrap();
    fake_binary(&capi.path().join("bin"), "manager");
    fake_binary(capi.path(), "kubeadm-bootstrap-manager");
    std::fs::write(capi.path().join("core-components.yaml"), "").unwrap();
    let (code, _, err) = run(
        state.path(),
        &[
            "up",
            "--kubernetes-server",
            kubernetes.path().to_str().unwrap(),
            "--cluster-api",
            capi.path().to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{err}");
    for missing in [
        "kube-controller-manager (in",
        "kubeadm-control-plane-manager (in",
        "Cluster API's bootstrap manifests",
    ] {
        assert!(err.contains(missing), "names {missing:?}:\n{err}");
    }
    for found in [
        "- kube-apiserver",
        "- manager (in",
        "- kubeadm-bootstrap-manager",
        "core manifests",
    ] {
        assert!(!err.contains(found), "does not name {found:?}:\n{err}");
    }
}

#[test]
fn down_with_nothing_running_stops_nothing_and_succeeds() {
    let state = tempfile::tempdir().unwrap();
    let (code, out, err) = run(state.path(), &["down"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("stopped"), "{out}");
}

#[test]
fn restart_manager_without_a_plane_says_so() {
    let state = tempfile::tempdir().unwrap();
    let (code, _, err) = run(state.path(), &["restart-manager"]);
    assert_eq!(code, 1);
    assert!(err.contains("no manager of ours recorded"), "{err}");
}

/// `restart-manager` kills the recorded process with SIGKILL and starts the recorded command line
/// again, waiting for its readiness URL: here a `sleep` stands in for the running manager and a
/// Python HTTP server for the restarted one.
#[test]
fn restart_manager_kills_the_recorded_manager_and_starts_its_command_again() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path();
    std::fs::create_dir_all(dir.join("pids")).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    // Started in the background of a shell that exits, as `up` starts the manager: its parent
    // is then init, which reaps it once killed (a child of this test would stay a zombie).
    let started = Command::new("sh")
        .args(["-c", "sleep 600 >/dev/null 2>&1 & echo $!"])
        .output()
        .unwrap();
    let old_pid = String::from_utf8_lossy(&started.stdout).trim().to_string();
    std::fs::write(dir.join("pids/capd-rs-manager.pid"), &old_pid).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        dir.join("capd-rs-manager.command"),
        format!("python3 -m http.server {port} --bind 127.0.0.1 "),
    )
    .unwrap();
    std::fs::write(
        dir.join("capd-rs-manager.ready"),
        format!("http://127.0.0.1:{port}/\n"),
    )
    .unwrap();

    let (code, out, err) = run(dir, &["restart-manager"]);
    let new_pid = std::fs::read_to_string(dir.join("pids/capd-rs-manager.pid"))
        .unwrap()
        .trim()
        .to_string();
    let runs = |pid: &str| {
        Command::new("kill")
            .args(["-0", pid])
            .status()
            .unwrap()
            .success()
    };
    let (old_runs, new_runs) = (runs(&old_pid), runs(&new_pid));
    // Leave nothing running, whatever the assertions say.
    let _ = Command::new("kill").args(["-9", &old_pid]).status();
    let _ = Command::new("kill").arg(&new_pid).status();
    assert_eq!(code, 0, "{out}{err}");
    assert!(!old_runs, "the old manager was killed");
    assert_ne!(new_pid, old_pid, "a new process");
    assert!(new_runs, "the restarted manager runs");
    assert!(out.contains("started again"), "{out}");
}
