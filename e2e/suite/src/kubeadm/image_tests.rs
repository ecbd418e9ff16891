//! `e2e/images/real/build.sh` with the Kubernetes binaries a user brings: what it accepts and
//! each refusal, checked with `--dry-run` (no root, no engine) on stand-in binaries that answer
//! `kubeadm version -o short`, `kubeadm config images list` and `--version` as the real ones do.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::supported_version;
use crate::workspace_root;

const COMMANDS: [&str; 6] = [
    "kubelet",
    "kubeadm",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
];

/// What `kubeadm config images list --kubernetes-version v1.28.4` prints.
const IMAGES: &str = "registry.k8s.io/kube-apiserver:v1.28.4
registry.k8s.io/kube-controller-manager:v1.28.4
registry.k8s.io/kube-scheduler:v1.28.4
registry.k8s.io/kube-proxy:v1.28.4
registry.k8s.io/pause:3.9
registry.k8s.io/etcd:3.5.9-0
registry.k8s.io/coredns/coredns:v1.10.1";

fn write_executable(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `kubernetes/server/bin/` under `root`, as the release archive lays it out, with every binary
/// saying `version` except those in `versions`, which say theirs.
fn server_bin(root: &Path, version: &str, versions: &[(&str, &str)]) -> PathBuf {
    let bin = root.join("kubernetes/server/bin");
    std::fs::create_dir_all(&bin).unwrap();
    for cmd in COMMANDS {
        let said = versions
            .iter()
            .find(|(c, _)| *c == cmd)
            .map_or(version, |(_, v)| *v);
        let script = if cmd == "kubeadm" {
            format!(
                "#!/bin/sh\ncase \"$1\" in\n  version) echo {said} ;;\n  config) cat <<'EOF'\n{IMAGES}\nEOF\n ;;\n  *) exit 1 ;;\nesac\n"
            )
        } else {
            format!("#!/bin/sh\n[ \"$1\" = --version ] && echo 'Kubernetes {said}'\n")
        };
        write_executable(&bin.join(cmd), &script);
    }
    bin
}

/// Runs `build.sh --dry-run --kubernetes-server <server>`: (success, stdout, stderr).
fn dry_run(server: Option<&Path>) -> (bool, String, String) {
    let mut command = Command::new("bash");
    command
        .arg(workspace_root().join("e2e/images/real/build.sh"))
        .arg("--dry-run")
        .env_remove("CAPD_KUBERNETES_SERVER");
    if let Some(server) = server {
        command.arg("--kubernetes-server").arg(server);
    }
    let out = command.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn image_of(stdout: &str) -> &str {
    stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("CAPD_REAL_NODE_IMAGE="))
        .unwrap_or_else(|| panic!("no CAPD_REAL_NODE_IMAGE= line in {stdout:?}"))
}

#[test]
fn a_folder_of_release_binaries_names_the_image_after_kubeadms_version() {
    let dir = tempfile::tempdir().unwrap();
    server_bin(dir.path(), "v1.28.4", &[]);
    let (ok, stdout, stderr) = dry_run(Some(dir.path()));
    assert!(ok, "{stderr}");
    let image = image_of(&stdout);
    let tag = image
        .strip_prefix("capd-test/realnode:v1.28.4-")
        .unwrap_or_else(|| panic!("{image} is not named after v1.28.4"));
    assert_eq!(tag.len(), 12, "{image}");
    assert!(tag.chars().all(|c| c.is_ascii_hexdigit()), "{image}");
    // The images come from kubeadm's own list: etcd and pause under the names it asks for.
    assert!(stderr.contains("registry.k8s.io/etcd:3.5.9-0"), "{stderr}");
    assert!(stderr.contains("registry.k8s.io/pause:3.9"), "{stderr}");

    // The same binaries in the release archive name the same image; other binaries another.
    let archive = dir.path().join("kubernetes-server-linux-amd64.tar.gz");
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(dir.path())
        .arg("kubernetes")
        .status()
        .unwrap();
    assert!(status.success());
    let (ok, from_archive, stderr) = dry_run(Some(&archive));
    assert!(ok, "{stderr}");
    assert_eq!(image_of(&from_archive), image);

    let other = tempfile::tempdir().unwrap();
    let bin = server_bin(other.path(), "v1.28.4", &[]);
    std::fs::write(
        bin.join("kubelet"),
        "#!/bin/sh\necho 'Kubernetes v1.28.4'\n# rebuilt\n",
    )
    .unwrap();
    let (ok, stdout, stderr) = dry_run(Some(&bin));
    assert!(ok, "{stderr}");
    assert_ne!(
        image_of(&stdout),
        image,
        "a changed binary must change the image"
    );
}

#[test]
fn a_missing_binary_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let bin = server_bin(dir.path(), "v1.28.4", &[]);
    std::fs::remove_file(bin.join("kube-proxy")).unwrap();
    std::fs::remove_file(bin.join("kube-scheduler")).unwrap();
    let (ok, stdout, stderr) = dry_run(Some(dir.path()));
    assert!(!ok, "accepted a folder without kube-proxy: {stdout}");
    assert!(
        stderr.contains("missing in") && stderr.contains("kube-scheduler kube-proxy"),
        "{stderr}"
    );
    assert!(!stdout.contains("CAPD_REAL_NODE_IMAGE"), "{stdout}");
}

#[test]
fn binaries_of_different_versions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    server_bin(
        dir.path(),
        "v1.28.4",
        &[("kubelet", "v1.28.3"), ("kube-apiserver", "v1.29.0")],
    );
    let (ok, stdout, stderr) = dry_run(Some(dir.path()));
    assert!(!ok, "accepted mixed versions: {stdout}");
    assert!(
        stderr.contains("disagree on the version: kubeadm v1.28.4")
            && stderr.contains("kubelet v1.28.3")
            && stderr.contains("kube-apiserver v1.29.0"),
        "{stderr}"
    );
}

#[test]
fn no_binaries_at_all_is_refused_with_the_way_to_give_them() {
    let (ok, _, stderr) = dry_run(None);
    assert!(!ok);
    assert!(
        stderr.contains("--kubernetes-server PATH") && stderr.contains("CAPD_KUBERNETES_SERVER"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = dry_run(Some(&dir.path().join("nowhere")));
    assert!(!ok);
    assert!(stderr.contains("no such file or folder"), "{stderr}");
    let not_an_archive = dir.path().join("k.tar.gz");
    std::fs::write(&not_an_archive, "not gzip").unwrap();
    let (ok, _, stderr) = dry_run(Some(&not_an_archive));
    assert!(!ok);
    assert!(
        stderr.contains("is not Kubernetes' server release archive"),
        "{stderr}"
    );
}

#[test]
fn the_suite_takes_the_versions_its_kubeadm_configuration_serves() {
    assert_eq!(supported_version("v1.28.4").unwrap(), "v1.28.4");
    assert_eq!(supported_version("v1.23.0").unwrap(), "v1.23.0");
    assert_eq!(supported_version("v1.30.14").unwrap(), "v1.30.14");
    let newer = supported_version("v1.31.0").unwrap_err();
    assert!(newer.contains("1.23 to 1.30"), "{newer}");
    assert!(supported_version("v1.22.17").is_err());
    assert!(
        supported_version("latest")
            .unwrap_err()
            .contains("not a Kubernetes version")
    );
}
