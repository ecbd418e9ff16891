use super::*;
use std::path::Path;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn insert_flag_table() {
    let f = "--F";
    let cases: &[(&str, Option<&str>)] = &[
        ("kubeadm init", Some("kubeadm init --F")),
        (
            "kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete",
            Some(
                "kubeadm init --F --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete",
            ),
        ),
        (
            "/usr/bin/kubeadm join --config x",
            Some("/usr/bin/kubeadm join --F --config x"),
        ),
        (
            "timeout 300 kubeadm\tjoin;echo",
            Some("timeout 300 kubeadm\tjoin --F;echo"),
        ),
        (
            "kubeadm init phase preflight",
            Some("kubeadm init phase preflight"),
        ),
        ("kubeadm reset -f", None),
        ("kubeadm initialize", None),
        ("cat /run/kubeadm/kubeadm.yaml", None),
        ("echo kubeadm-init", None),
        ("mykubeadm init", None),
        (
            "kubeadm version && kubeadm join x",
            Some("kubeadm version && kubeadm join --F x"),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(
            insert_flag(input, f).as_deref(),
            *expected,
            "input {input:?}"
        );
    }
}

#[test]
fn list_form_keeps_arguments_as_argv() {
    let argv = strings(&[
        "kubeadm",
        "join",
        "--config",
        "/run/kubeadm/kubeadm-join-config.yaml",
    ]);
    let out = rewrite_argv(&argv).unwrap();
    assert_eq!(
        out,
        strings(&[
            "/bin/sh",
            "-c",
            "mkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started && exec \"$@\"",
            "kubeadm-bootstrap",
            "kubeadm",
            "join",
            CLOUD_INIT_PREFLIGHT_FLAG,
            "--config",
            "/run/kubeadm/kubeadm-join-config.yaml",
        ])
    );
}

#[test]
fn shell_form_is_grouped_after_the_sentinel() {
    let argv = strings(&[
        "/bin/sh",
        "-c",
        "kubeadm init --config /run/kubeadm/kubeadm.yaml || exit 1",
    ]);
    let out = rewrite_argv(&argv).unwrap();
    assert_eq!(out[..2], strings(&["/bin/sh", "-c"]));
    assert_eq!(
        out[2],
        format!(
            "mkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started && {{ kubeadm init {CLOUD_INIT_PREFLIGHT_FLAG} --config /run/kubeadm/kubeadm.yaml || exit 1\n}}"
        )
    );
}

#[test]
fn other_commands_are_left_alone() {
    for argv in [
        strings(&["kubeadm", "reset"]),
        strings(&["/bin/sh", "-c", "echo hello"]),
        strings(&["systemctl", "restart", "kubelet"]),
        strings(&["bash", "-x"]),
        vec![],
    ] {
        assert_eq!(rewrite_argv(&argv), None, "{argv:?}");
    }
}

#[test]
fn ignition_script_lines() {
    let script = "#!/bin/bash\nset -e\n\nkubeadm init --config /etc/kubeadm.yml\nmkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\nmv /etc/kubeadm.yml /tmp/\n";
    let out = rewrite_script(script).unwrap();
    assert_eq!(
        out,
        "#!/bin/bash\nset -e\n\nmkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started && kubeadm init --ignore-preflight-errors=all --config /etc/kubeadm.yml\nmkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\nmv /etc/kubeadm.yml /tmp/\n"
    );
    let nested =
        "#!/bin/bash\nif timeout 600 kubeadm join --config /etc/kubeadm.yml; then\n  echo ok\nfi";
    assert_eq!(
        rewrite_script(nested).unwrap(),
        "#!/bin/bash\nmkdir -p /run/cluster-api && echo started > /run/cluster-api/capd.bootstrap.started\nif timeout 600 kubeadm join --ignore-preflight-errors=all --config /etc/kubeadm.yml; then\n  echo ok\nfi"
    );
    assert_eq!(rewrite_script("#!/bin/sh\necho no kubeadm here\n"), None);
}

/// A fake `kubeadm` on PATH records its arguments; the rewritten command runs in a real shell.
struct FakeNode {
    dir: tempfile::TempDir,
}

impl FakeNode {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let fake = bin.join("kubeadm");
        let log = dir.path().join("args");
        std::fs::write(
            &fake,
            format!("#!/bin/sh\nprintf '%s\\0' \"$@\" > '{}'\n", log.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeNode { dir }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    fn sentinel(&self) -> String {
        self.path("run/cluster-api/capd.bootstrap.started")
            .display()
            .to_string()
    }

    fn run(&self, argv: &[String]) {
        let path = format!(
            "{}:{}",
            self.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let status = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .env("PATH", path)
            .status()
            .unwrap();
        assert!(status.success(), "{argv:?} failed");
    }

    fn kubeadm_args(&self) -> Vec<String> {
        let raw = std::fs::read(self.path("args")).unwrap();
        let mut args: Vec<String> = raw
            .split(|b| *b == 0)
            .map(|a| String::from_utf8(a.to_vec()).unwrap())
            .collect();
        args.pop();
        args
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn list_form_runs_kubeadm_with_untouched_arguments_after_the_sentinel() {
    let node = FakeNode::new();
    let tricky = ["--token", "abc.def'0 \"$(id)\"", "--node-name=a b", "*"];
    let mut argv = strings(&["kubeadm", "join"]);
    argv.extend(strings(&tricky));
    node.run(&rewrite_argv_with(&argv, &node.sentinel()).unwrap());
    assert_eq!(read(Path::new(&node.sentinel())), "started\n");
    let mut expected = strings(&["join", CLOUD_INIT_PREFLIGHT_FLAG]);
    expected.extend(strings(&tricky));
    assert_eq!(node.kubeadm_args(), expected);
}

#[test]
fn string_form_runs_kubeadm_then_the_rest_of_the_line() {
    let node = FakeNode::new();
    let success = node.path("bootstrap-success.complete");
    let script = format!(
        "kubeadm init --config '/run/kubeadm/my file.yaml' && echo success > '{}'",
        success.display()
    );
    let argv = strings(&["/bin/sh", "-c", &script]);
    node.run(&rewrite_argv_with(&argv, &node.sentinel()).unwrap());
    assert_eq!(read(Path::new(&node.sentinel())), "started\n");
    assert_eq!(read(&success), "success\n");
    assert_eq!(
        node.kubeadm_args(),
        strings(&[
            "init",
            CLOUD_INIT_PREFLIGHT_FLAG,
            "--config",
            "/run/kubeadm/my file.yaml"
        ])
    );
}

#[test]
fn ignition_script_runs_in_a_real_shell() {
    let node = FakeNode::new();
    let script = "#!/bin/sh\nset -e\nkubeadm join --config /etc/kubeadm.yml\n";
    let rewritten = rewrite_script_with(script, &node.sentinel()).unwrap();
    node.run(&strings(&["/bin/sh", "-c", &rewritten]));
    assert_eq!(read(Path::new(&node.sentinel())), "started\n");
    assert_eq!(
        node.kubeadm_args(),
        strings(&[
            "join",
            IGNITION_PREFLIGHT_FLAG,
            "--config",
            "/etc/kubeadm.yml"
        ])
    );
}
