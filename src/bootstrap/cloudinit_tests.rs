use super::*;
use crate::bootstrap::tests::support::*;
use crate::bootstrap::{Format, KindMode, translate as translate_any};
use serde_json::Value;

const INIT: &str = include_str!("testdata/cabpk-init.yaml");
const JOIN: &str = include_str!("testdata/cabpk-join.yaml");

fn plan(yaml: &str) -> Plan {
    translate_any(yaml.as_bytes(), Format::CloudConfig, &Options::default()).unwrap()
}

fn error(yaml: &str) -> Error {
    translate_any(yaml.as_bytes(), Format::CloudConfig, &Options::default()).unwrap_err()
}

fn kubeadm_docs(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text).unwrap()
}

#[test]
fn cabpk_init_control_plane() {
    let plan = plan(INIT);
    let mut expected = Vec::new();
    for (path, mode) in [
        ("/etc/kubernetes/pki/ca.crt", "0640"),
        ("/etc/kubernetes/pki/ca.key", "0600"),
        ("/etc/kubernetes/pki/etcd/ca.crt", "0640"),
        ("/etc/kubernetes/pki/etcd/ca.key", "0600"),
        ("/etc/kubernetes/pki/front-proxy-ca.crt", "0640"),
        ("/etc/kubernetes/pki/front-proxy-ca.key", "0600"),
        ("/etc/kubernetes/pki/sa.pub", "0640"),
        ("/etc/kubernetes/pki/sa.key", "0600"),
        ("/etc/kubernetes/audit/policy.yaml", "0600"),
        ("/run/kubeadm/kubeadm.yaml", "0640"),
        ("/run/cluster-api/placeholder", "0640"),
    ] {
        expected.push(format!("write {path}"));
        expected.push(format!("set mode {mode} on {path}"));
    }
    expected.push("runcmd[0] (shell: sed)".into());
    expected.push("runcmd[1]: kubeadm, after writing the bootstrap sentinel".into());
    expected.push("runcmd[2] (systemctl)".into());
    assert_eq!(descriptions(&plan), expected);
    assert_eq!(
        plan.warnings,
        [
            "cloud-init module ntp skipped: node containers use the host clock",
            "cloud-init module users skipped: user accounts are not managed in node containers",
        ]
    );

    assert!(
        written(&plan, "/etc/kubernetes/pki/ca.key").starts_with(
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAPRIVATEKEYcaKeyMaterial"
        )
    );
    assert_eq!(
        written(&plan, "/etc/kubernetes/audit/policy.yaml"),
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
    );
    let docs = kubeadm_docs(&written(&plan, "/run/kubeadm/kubeadm.yaml"));
    let kinds: Vec<_> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ClusterConfiguration",
            "InitConfiguration",
            "KubeProxyConfiguration"
        ]
    );
    let registration = &docs[1]["nodeRegistration"];
    assert_eq!(
        registration["criSocket"],
        "unix:///var/run/containerd/containerd.sock"
    );
    assert_eq!(registration["kubeletExtraArgs"]["cgroup-root"], "/kubelet");
    assert_eq!(registration["imagePullPolicy"], "IfNotPresent");
    assert_eq!(docs[2]["conntrack"]["maxPerCore"], 0);

    assert_eq!(
        argv_of(
            &plan,
            "runcmd[1]: kubeadm, after writing the bootstrap sentinel"
        ),
        [
            "/bin/sh",
            "-c",
            "mkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started && { kubeadm init --ignore-preflight-errors=SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete\n}",
        ]
    );
    assert_eq!(
        argv_of(&plan, "runcmd[0] (shell: sed)")[2],
        r#"sed -ri "/\sswap\s/s/^#?/#/" /etc/fstab"#
    );
    assert_eq!(
        argv_of(&plan, "runcmd[2] (systemctl)"),
        ["systemctl", "restart", "kubelet"]
    );
    for command in &plan.commands {
        let expected = if command.description.starts_with("runcmd") {
            0
        } else {
            5
        };
        assert_eq!(command.retries, expected, "{}", command.description);
    }
}

#[test]
fn cabpk_join_worker() {
    let opts = Options {
        kind_mode: KindMode::V0_19,
        kubernetes_version: Some("v1.31.0".into()),
    };
    let plan = translate_any(JOIN.as_bytes(), Format::CloudConfig, &opts).unwrap();
    // bootcmd runs first even though the document lists it after write_files.
    assert_eq!(plan.commands[0].argv, ["echo", "booting"]);
    assert_eq!(plan.commands[0].description, "bootcmd[0] (echo)");
    assert_eq!(
        written(&plan, "/usr/local/bin/prepare-node.sh"),
        "#!/bin/sh\necho preparing the node\n"
    );
    assert_eq!(
        argv_of(&plan, "set mode 0755 on /usr/local/bin/prepare-node.sh"),
        ["chmod", "0755", "/usr/local/bin/prepare-node.sh"]
    );
    let hosts = plan
        .commands
        .iter()
        .find(|c| c.description == "append to /etc/hosts")
        .unwrap();
    assert_eq!(
        hosts.stdin.as_deref(),
        Some(&b"172.18.0.3 api.quick-start.internal\n"[..])
    );
    assert!(hosts.argv[2].contains("cat >> \"$1\""));

    let docs = kubeadm_docs(&written(&plan, "/run/kubeadm/kubeadm-join-config.yaml"));
    assert_eq!(docs.len(), 1, "no kube-proxy document on join");
    assert_eq!(docs[0]["apiVersion"], "kubeadm.k8s.io/v1beta4");
    let args = docs[0]["nodeRegistration"]["kubeletExtraArgs"]
        .as_array()
        .unwrap();
    let names: Vec<_> = args.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "v",
            "image-gc-high-threshold",
            "eviction-hard",
            "fail-swap-on"
        ]
    );

    let last = plan.commands.last().unwrap();
    assert_eq!(
        last.description,
        "runcmd[1]: kubeadm, after writing the bootstrap sentinel"
    );
    assert!(last.argv[2].contains(
        "{ kubeadm join --ignore-preflight-errors=SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables --config /run/kubeadm/kubeadm-join-config.yaml"
    ));
    assert_eq!(
        plan.warnings,
        [
            "cloud-init module mounts skipped: mounts are managed by the container runtime",
            "cloud-init module disk_setup skipped: disks are managed by the container runtime",
            "cloud-init module fs_setup skipped: file systems are managed by the container runtime",
        ]
    );
}

#[test]
fn encodings_all_yield_the_original_content() {
    // "hello\n" in each encoding, including a !!binary gzip stream.
    let cases = [
        ("", "\"hello\\n\""),
        ("text/plain", "|\n    hello"),
        ("b64", "aGVsbG8K"),
        ("BASE64", "aGVs\n    bG8K"),
        ("gz", "!!binary H4sIAAAAAAACA8tIzcnJ5wIAIDA6NgYAAAA="),
        ("gzip", "!!binary H4sIAAAAAAACA8tIzcnJ5wIAIDA6NgYAAAA="),
        ("gz+b64", "H4sIAAAAAAACA8tIzcnJ5wIAIDA6NgYAAAA="),
        ("gzip+base64", "H4sIAAAAAAACA8tIzcnJ5wIAIDA6NgYAAAA="),
        ("gz+base64", "H4sIAAAAAAACA8tIzcnJ5wIAIDA6NgYAAAA="),
        ("gzip+b64", "H4sIAAAAAAACA8tIzcnJ5wIAIDA6NgYAAAA="),
    ];
    for (encoding, content) in cases {
        let yaml = format!(
            "write_files:\n- path: /etc/hello\n  encoding: '{encoding}'\n  content: {content}\n"
        );
        assert_eq!(
            written(&plan(&yaml), "/etc/hello"),
            "hello\n",
            "encoding {encoding}"
        );
    }
}

#[test]
fn permissions_table() {
    let cases: &[(&str, Option<&str>)] = &[
        ("'0640'", Some("0640")),
        ("'640'", Some("0640")),
        ("0640", Some("0640")),
        ("'0o755'", Some("0755")),
        ("0o755", Some("0755")),
        ("420", Some("0644")),
        ("'4755'", Some("4755")),
        ("~", Some("0644")),
        ("'0999'", None),
        ("'17777'", None),
        ("-1", None),
        ("rwx", None),
        ("true", None),
        ("''", None),
    ];
    for (value, expected) in cases {
        let yaml = format!("write_files:\n- path: /etc/f\n  permissions: {value}\n");
        match expected {
            Some(mode) => assert_eq!(
                argv_of(&plan(&yaml), &format!("set mode {mode} on /etc/f")),
                ["chmod", *mode, "/etc/f"]
            ),
            None => assert_eq!(
                error(&yaml),
                Error::file("/etc/f", FileProblem::InvalidPermissions),
                "{value}"
            ),
        }
    }
}

#[test]
fn owner_and_append() {
    let plan = plan(
        "write_files:\n- path: /var/lib/etcd/x\n  owner: etcd:etcd\n  append: yes\n  content: a\n- path: /etc/y\n  owner: root:root\n",
    );
    assert_eq!(
        descriptions(&plan),
        [
            "append to /var/lib/etcd/x",
            "set mode 0644 on /var/lib/etcd/x",
            "set owner etcd:etcd on /var/lib/etcd/x",
            "write /etc/y",
            "set mode 0644 on /etc/y",
        ]
    );
    assert_eq!(
        plan.commands[2].argv,
        ["chown", "etcd:etcd", "/var/lib/etcd/x"]
    );
    assert_eq!(written(&plan, "/etc/y"), "");
}

#[test]
fn runcmd_forms() {
    let plan = plan(
        "runcmd:\n- echo one\n- [sleep, 5]\n- ~\n- []\n- [/usr/bin/kubeadm, init, --config, /x.yaml]\n- 42\n- [bash, -c, 'kubeadm join --config /j.yaml']\n",
    );
    let argvs: Vec<_> = plan.commands.iter().map(|c| c.argv.clone()).collect();
    assert_eq!(argvs[0], ["/bin/sh", "-c", "echo one"]);
    assert_eq!(argvs[1], ["sleep", "5"]);
    assert_eq!(
        argvs[2][3..],
        [
            "kubeadm-bootstrap",
            "/usr/bin/kubeadm",
            "init",
            kubeadm::CLOUD_INIT_PREFLIGHT_FLAG,
            "--config",
            "/x.yaml"
        ]
    );
    assert_eq!(argvs[3], ["/bin/sh", "-c", "42"]);
    assert_eq!(argvs[4][..2], ["bash", "-c"]);
    assert!(argvs[4][2].starts_with("mkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started && { kubeadm join --ignore-preflight-errors="));
    assert_eq!(plan.commands.len(), 5);
    assert_eq!(
        plan.warnings,
        ["runcmd item 3 is an empty list and was skipped"]
    );
    assert!(
        plan.commands
            .iter()
            .all(|c| c.retries == 0 && c.stdin.is_none())
    );
    // A bare string instead of a list is taken as one command.
    assert_eq!(
        self::plan("runcmd: echo hi\n").commands[0].argv,
        ["/bin/sh", "-c", "echo hi"]
    );
}

#[test]
fn document_order_is_kept_and_bootcmd_goes_first() {
    let plan = plan(
        "runcmd: [[first]]\nwrite_files: [{path: /second}]\nbootcmd: [[zeroth]]\nruncmd2: x\n",
    );
    assert_eq!(
        descriptions(&plan),
        [
            "bootcmd[0] (zeroth)",
            "runcmd[0] (first)",
            "write /second",
            "set mode 0644 on /second"
        ]
    );
    assert_eq!(
        plan.warnings,
        [
            "cloud-init module runcmd2 skipped: not supported in node containers",
            crate::bootstrap::NO_SENTINEL_WARNING
        ]
    );
}

#[test]
fn headers_and_empty_modules() {
    for header in ["", "#cloud-config\n", "## template: jinja\n#cloud-config\n"] {
        let plan = plan(&format!("{header}runcmd: [[true]]\nusers: []\nntp: ~\n"));
        assert_eq!(descriptions(&plan), ["runcmd[0] (true)"], "{header:?}");
        assert_eq!(plan.warnings, [crate::bootstrap::NO_SENTINEL_WARNING]);
    }
    let jinja = plan(
        "## template: jinja\n#cloud-config\nruncmd: ['hostname {{ ds.meta_data.hostname }}']\n",
    );
    assert_eq!(
        jinja.warnings,
        [
            "the cloud-config is a jinja template: its {{ }} expressions were not rendered",
            crate::bootstrap::NO_SENTINEL_WARNING
        ]
    );
    assert!(plan("#cloud-config\n").commands.is_empty());
    let odd = plan("? [a, b]\n: c\n\"we!rd key\": 1\n");
    assert_eq!(
        odd.warnings,
        [
            "a top-level key that is not a module name was skipped",
            "a top-level key that is not a known module name was skipped"
        ]
    );
}

#[test]
fn kubeadm_config_appended_to_is_not_patched() {
    let plan = plan(
        "write_files:\n- path: /run/kubeadm/kubeadm.yaml\n  append: true\n  content: 'x: 1'\n",
    );
    assert_eq!(plan.commands[0].stdin.as_deref(), Some(&b"x: 1"[..]));
}

#[test]
fn malformed_cloud_config() {
    let cases: Vec<(&str, Error)> = vec![
        ("a: [1\n", Error::InvalidYaml { line: 1, column: 4 }),
        ("- a\n- b\n", Error::NotCloudConfig { found: "a list" }),
        ("just text\n", Error::NotCloudConfig { found: "a scalar" }),
        (
            "#!/bin/bash\necho hi\n",
            Error::NotCloudConfig {
                found: "a shell script",
            },
        ),
        (
            "Content-Type: multipart/mixed\n",
            Error::NotCloudConfig {
                found: "a MIME multi-part message",
            },
        ),
        (
            "write_files:\n- path: etc/x\n",
            Error::file("etc/x", FileProblem::NotAbsolute),
        ),
        (
            "write_files:\n- path: \"/etc/a\\nb\"\n",
            Error::file("/etc/a\nb", FileProblem::ControlCharacter),
        ),
        (
            "write_files:\n- path: /etc/x/\n",
            Error::file("/etc/x/", FileProblem::NamesDirectory),
        ),
        (
            "write_files:\n- path: /x\n  encoding: rot13\n",
            Error::file("/x", FileProblem::UnknownEncoding("rot13".into())),
        ),
        (
            "write_files:\n- path: /x\n  encoding: b64\n  content: '%%%'\n",
            Error::file("/x", FileProblem::BadBase64),
        ),
        (
            "write_files:\n- path: /x\n  encoding: gzip+b64\n  content: aGVsbG8K\n",
            Error::file("/x", FileProblem::BadGzip),
        ),
        (
            "write_files:\n- path: /x\n  encoding: gz\n  content: plain\n",
            Error::file("/x", FileProblem::BadGzip),
        ),
        (
            "write_files:\n- path: /x\n  owner: '-R'\n",
            Error::file("/x", FileProblem::InvalidOwner),
        ),
        (
            "write_files:\n- path: /x\n  owner: 5\n",
            Error::file("/x", FileProblem::WrongType("owner")),
        ),
        (
            "write_files:\n- path: /x\n  append: maybe\n",
            Error::file("/x", FileProblem::WrongType("append")),
        ),
        (
            "write_files:\n- path: /x\n  content: {a: b}\n",
            Error::file("/x", FileProblem::WrongType("content")),
        ),
        (
            "write_files:\n- path: /x\n  source: {uri: 'https://example.invalid/f'}\n",
            Error::file("/x", FileProblem::RemoteSource("source.uri".into())),
        ),
        (
            "write_files:\n- content: x\n",
            Error::InvalidModule {
                module: "write_files",
                problem: "entry 0 has no path".into(),
            },
        ),
        (
            "write_files:\n- /etc/x\n",
            Error::InvalidModule {
                module: "write_files",
                problem: "entry 0 is a string, not a mapping".into(),
            },
        ),
        (
            "write_files: {path: /x}\n",
            Error::InvalidModule {
                module: "write_files",
                problem: "expected a list of files, found a mapping".into(),
            },
        ),
        (
            "runcmd: {a: b}\n",
            Error::InvalidModule {
                module: "runcmd",
                problem: "expected a list of commands, found a mapping".into(),
            },
        ),
        (
            "runcmd:\n- [echo, [nested]]\n",
            Error::InvalidModule {
                module: "runcmd",
                problem: "item 0 has a list among its arguments".into(),
            },
        ),
        (
            "bootcmd:\n- {a: b}\n",
            Error::InvalidModule {
                module: "bootcmd",
                problem: "item 0 is a mapping, not a command string or list".into(),
            },
        ),
    ];
    for (yaml, expected) in cases {
        assert_eq!(error(yaml), expected, "{yaml}");
    }
}

#[test]
fn error_messages_read_well() {
    assert_eq!(
        error("write_files:\n- path: /etc/x y\n  encoding: b64\n  content: '!'\n").to_string(),
        "translate file \"/etc/x y\": the content is not valid base64"
    );
    assert_eq!(
        error("a: [1\n").to_string(),
        "parse cloud-config: invalid YAML at line 1, column 4"
    );
}
