use super::*;
use crate::bootstrap::tests::support::*;
use crate::bootstrap::{Format, translate as translate_any};

const V2: &str = include_str!("testdata/ignition-v2.json");
const V3: &str = include_str!("testdata/ignition-v3.json");

fn plan(json: &str) -> Plan {
    translate_any(json.as_bytes(), Format::Ignition, &Options::default()).unwrap()
}

fn error(json: &str) -> Error {
    translate_any(json.as_bytes(), Format::Ignition, &Options::default()).unwrap_err()
}

/// A v3 config with one file entry.
fn with_file(file: &str) -> String {
    format!(r#"{{"ignition": {{"version": "3.2.0"}}, "storage": {{"files": [{file}]}}}}"#)
}

#[test]
fn cabpk_like_v2_config() {
    let plan = plan(V2);
    assert_eq!(
        descriptions(&plan),
        [
            "write /etc/kubernetes/pki/ca.crt",
            "set mode 0640 on /etc/kubernetes/pki/ca.crt",
            "write /etc/kubernetes/pki/ca.key",
            "set mode 0600 on /etc/kubernetes/pki/ca.key",
            "write /etc/kubeadm.sh",
            "set mode 0700 on /etc/kubeadm.sh",
            "write /etc/kubeadm.yml",
            "set mode 0600 on /etc/kubeadm.yml",
            "append to /etc/hosts",
            "set mode 0644 on /etc/hosts",
            "write /etc/systemd/system/kubeadm.service",
            "set mode 0644 on /etc/systemd/system/kubeadm.service",
            "write /etc/systemd/system/containerd.service.d/10-limits.conf",
            "set mode 0644 on /etc/systemd/system/containerd.service.d/10-limits.conf",
            "reload systemd unit files",
            "enable and start unit kubeadm.service",
        ]
    );
    assert_eq!(
        plan.warnings,
        ["ignition section passwd.users skipped: not supported in node containers"]
    );
    assert_eq!(
        written(&plan, "/etc/kubernetes/pki/ca.key"),
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAPRIVATEKEYignitionKeyNeverLogged\n-----END RSA PRIVATE KEY-----\n"
    );
    let script = written(&plan, "/etc/kubeadm.sh");
    assert!(
        script.contains("\nmkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started && kubeadm init --ignore-preflight-errors=all --config /etc/kubeadm.yml\n"),
        "{script}"
    );
    assert!(
        script.starts_with("#!/bin/bash\nset -e\n\nswapoff -a\n"),
        "{script}"
    );
    let config = written(&plan, "/etc/kubeadm.yml");
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&config).unwrap();
    let kinds: Vec<_> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ClusterConfiguration",
            "InitConfiguration",
            "KubeProxyConfiguration"
        ]
    );
    assert_eq!(docs[1]["nodeRegistration"]["kubeletExtraArgs"]["v"], "2");
    assert_eq!(
        docs[1]["nodeRegistration"]["kubeletExtraArgs"]["fail-swap-on"],
        "false"
    );
    assert!(
        written(&plan, "/etc/systemd/system/kubeadm.service")
            .contains("ExecStart=/etc/kubeadm.sh\n")
    );
    let start = plan.commands.last().unwrap();
    assert_eq!(
        start.argv,
        ["systemctl", "enable", "--now", "kubeadm.service"]
    );
    assert_eq!(
        start.retries, 0,
        "starting kubeadm.service must never be retried"
    );
}

#[test]
fn v3_config_with_directories_links_appends_and_unit_states() {
    let plan = plan(V3);
    assert_eq!(
        descriptions(&plan),
        [
            "create directory /var/lib/app",
            "set mode 0700 on /var/lib/app",
            "set owner app:1000 on /var/lib/app",
            "write /etc/app/compressed.txt",
            "set mode 0644 on /etc/app/compressed.txt",
            "write /etc/app/config with space.conf",
            "set mode 0644 on /etc/app/config with space.conf",
            "append to /etc/app/log",
            "append to /etc/app/log",
            "set mode 0600 on /etc/app/log",
            "append to /etc/app/touched",
            "set mode 0644 on /etc/app/touched",
            "create symbolic link /usr/local/bin/app",
            "create hard link /etc/app/hard",
            "write /etc/systemd/system/app.service",
            "set mode 0644 on /etc/systemd/system/app.service",
            "write /etc/systemd/system/app.service.d/debug.conf",
            "set mode 0644 on /etc/systemd/system/app.service.d/debug.conf",
            "reload systemd unit files",
            "enable and start unit app.service",
            "mask unit update-engine.service",
            "disable unit locksmithd.service",
        ]
    );
    assert_eq!(
        plan.warnings,
        [
            "ignition section kernelArguments skipped: not supported in node containers",
            crate::bootstrap::NO_SENTINEL_WARNING
        ]
    );
    assert_eq!(
        written(&plan, "/etc/app/compressed.txt"),
        "compressed payload\n"
    );
    assert_eq!(
        written(&plan, "/etc/app/config with space.conf"),
        "key=value\n"
    );
    let appended: Vec<_> = plan
        .commands
        .iter()
        .filter_map(write_target)
        .filter(|(path, append, _)| *path == "/etc/app/log" && *append)
        .map(|(_, _, stdin)| stdin.to_vec())
        .collect();
    assert_eq!(appended, [b"line one\n".to_vec(), b"line two\n".to_vec()]);
    assert_eq!(
        argv_of(&plan, "create symbolic link /usr/local/bin/app")[4..],
        ["/usr/local/bin/app", "/opt/app/bin/app"]
    );
}

#[test]
fn links_and_files_work_in_a_real_shell() {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().display().to_string();
    let json = format!(
        r#"{{"ignition": {{"version": "3.0.0"}}, "storage": {{
            "files": [{{"path": "{base}/d ir/it's.txt", "contents": {{"source": "data:,hi%0A"}}, "mode": 420}}],
            "links": [{{"path": "{base}/links/soft link", "target": "{base}/d ir/it's.txt"}},
                      {{"path": "{base}/links/hard", "target": "{base}/d ir/it's.txt", "hard": true}}]}}}}"#
    );
    for command in &plan(&json).commands {
        run_locally(command);
    }
    for path in ["d ir/it's.txt", "links/soft link", "links/hard"] {
        assert_eq!(
            std::fs::read_to_string(root.path().join(path)).unwrap(),
            "hi\n",
            "{path}"
        );
    }
    let soft = std::fs::symlink_metadata(root.path().join("links/soft link")).unwrap();
    assert!(soft.file_type().is_symlink());
}

#[test]
fn ownership_from_ids_and_names() {
    let cases = [
        (r#""user": {"id": 0}, "group": {"name": "root"}"#, None),
        (r#""user": {"name": "core"}"#, Some("core")),
        (
            r#""user": {"id": 500}, "group": {"id": 500}"#,
            Some("500:500"),
        ),
        (r#""group": {"name": "docker"}"#, Some(":docker")),
    ];
    for (fields, expected) in cases {
        let plan = plan(&with_file(&format!(r#"{{"path": "/f", {fields}}}"#)));
        let chown = plan.commands.iter().find(|c| c.argv[0] == "chown");
        assert_eq!(chown.map(|c| c.argv[1].as_str()), expected, "{fields}");
    }
}

#[test]
fn empty_and_sectionless_configs() {
    let plan = plan(r#"{"ignition": {"version": "3.1.0"}}"#);
    assert!(plan.commands.is_empty() && plan.warnings.is_empty());
    let plan = self::plan(
        r#"{"ignition": {"version": "2.2.0", "config": {"append": [{"source": "https://x"}]}}}"#,
    );
    assert_eq!(
        plan.warnings,
        [
            "ignition section ignition.config (merging or replacing configs) skipped: not supported in node containers"
        ]
    );
}

#[test]
fn malformed_ignition() {
    let cases: Vec<(String, Error)> = vec![
        ("{".into(), Error::InvalidJson { line: 1, column: 1 }),
        ("[]".into(), Error::InvalidIgnition("the config is not a JSON object".into())),
        ("{}".into(), Error::InvalidIgnition("ignition.version is missing".into())),
        (r#"{"ignition": {"version": "1.0.0"}}"#.into(), Error::UnsupportedIgnitionVersion("1.0.0".into())),
        (r#"{"ignition": {"version": "3.0.0"}, "storage": []}"#.into(), Error::InvalidIgnition("storage is not an object".into())),
        (r#"{"ignition": {"version": "3.0.0"}, "storage": {"files": {}}}"#.into(), Error::InvalidIgnition("storage.files is not a list".into())),
        (with_file(r#"{"contents": {}}"#), Error::InvalidIgnition("a storage file entry has no path".into())),
        (with_file(r#"{"path": "relative"}"#), Error::file("relative", FileProblem::NotAbsolute)),
        (with_file(r#"{"path": "/f", "mode": -1}"#), Error::file("/f", FileProblem::InvalidPermissions)),
        (with_file(r#"{"path": "/f", "mode": 4096}"#), Error::file("/f", FileProblem::InvalidPermissions)),
        (with_file(r#"{"path": "/f", "mode": "0644"}"#), Error::file("/f", FileProblem::InvalidPermissions)),
        (with_file(r#"{"path": "/f", "contents": {"source": "https://example.invalid/f"}}"#), Error::file("/f", FileProblem::RemoteSource("https".into()))),
        (with_file(r#"{"path": "/f", "contents": {"source": "data:,x", "compression": "xz"}}"#), Error::file("/f", FileProblem::UnsupportedCompression("xz".into()))),
        (with_file(r#"{"path": "/f", "contents": {"source": "data:,x", "compression": "gzip"}}"#), Error::file("/f", FileProblem::BadGzip)),
        (with_file(r#"{"path": "/f", "contents": {"source": "data:;base64,!!"}}"#), Error::file("/f", FileProblem::BadBase64)),
        (with_file(r#"{"path": "/f", "append": true}"#), Error::file("/f", FileProblem::WrongType("append"))),
        (with_file(r#"{"path": "/f", "user": {"name": "-R"}}"#), Error::file("/f", FileProblem::InvalidOwner)),
        (
            r#"{"ignition": {"version": "3.0.0"}, "storage": {"links": [{"path": "/l"}]}}"#.into(),
            Error::file("/l", FileProblem::InvalidLinkTarget),
        ),
        (
            r#"{"ignition": {"version": "3.0.0"}, "systemd": {"units": [{"name": "../evil.service"}]}}"#.into(),
            Error::file("/etc/systemd/system/<unit>", FileProblem::InvalidUnitName),
        ),
        (
            r#"{"ignition": {"version": "3.0.0"}, "systemd": {"units": [{"name": "--now"}]}}"#.into(),
            Error::file("/etc/systemd/system/<unit>", FileProblem::InvalidUnitName),
        ),
        (
            r#"{"ignition": {"version": "3.0.0"}, "systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x/y.conf"}]}]}}"#.into(),
            Error::file("/etc/systemd/system/a.service.d/<drop-in>", FileProblem::InvalidUnitName),
        ),
        (
            r#"{"ignition": {"version": "3.0.0"}, "systemd": {"units": [{"name": "a.service", "enabled": "yes"}]}}"#.into(),
            Error::file("/etc/systemd/system/a.service", FileProblem::WrongType("enabled")),
        ),
    ];
    for (json, expected) in cases {
        assert_eq!(error(&json), expected, "{json}");
    }
}
