//! Tests across formats: public API, property tests (no panics, write round trips through a real
//! shell, secrets never in descriptions, warnings or errors).

use super::*;
use proptest::prelude::*;
use std::io::Write as _;
use std::path::Path;

/// Helpers shared by the per-format tests.
pub(crate) mod support {
    use super::super::{Command, Plan};

    /// The path a write command targets, whether it appends, and its stdin.
    pub(crate) fn write_target(command: &Command) -> Option<(&str, bool, &[u8])> {
        let script = command.argv.get(2)?;
        if command.argv.first()? != "/bin/sh" || !script.contains("cat >") {
            return None;
        }
        let append = script.contains("cat >>");
        Some((command.argv.get(4)?, append, command.stdin.as_deref()?))
    }

    /// The content written to `path` by the plan (the last full write), as text.
    pub(crate) fn written(plan: &Plan, path: &str) -> String {
        let bytes = plan
            .commands
            .iter()
            .filter_map(write_target)
            .filter(|(p, append, _)| *p == path && !append)
            .map(|(_, _, stdin)| stdin)
            .next_back()
            .unwrap_or_else(|| panic!("no write of {path}: {:#?}", plan.commands));
        String::from_utf8(bytes.to_vec()).expect("utf-8 content")
    }

    pub(crate) fn descriptions(plan: &Plan) -> Vec<&str> {
        plan.commands
            .iter()
            .map(|c| c.description.as_str())
            .collect()
    }

    pub(crate) fn argv_of<'a>(plan: &'a Plan, description: &str) -> &'a [String] {
        &plan
            .commands
            .iter()
            .find(|c| c.description == description)
            .unwrap_or_else(|| panic!("no command {description:?} in {:#?}", plan.commands))
            .argv
    }

    /// Runs a command on this machine (for commands whose paths point into a temp dir).
    pub(crate) fn run_locally(command: &Command) {
        use std::io::Write as _;
        let mut child = std::process::Command::new(&command.argv[0])
            .args(&command.argv[1..])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(command.stdin.as_deref().unwrap_or_default())
            .expect("write stdin");
        drop(stdin);
        let status = child.wait().expect("wait");
        assert!(status.success(), "{} failed", command.description);
    }
}

use support::*;

#[test]
fn format_from_secret_key() {
    type Case<'a> = (Option<&'a [u8]>, Result<Format, Error>);
    let cases: &[Case] = &[
        (None, Ok(Format::CloudConfig)),
        (Some(b""), Ok(Format::CloudConfig)),
        (Some(b"cloud-config"), Ok(Format::CloudConfig)),
        (Some(b"ignition\n"), Ok(Format::Ignition)),
        (
            Some(b"Ignition"),
            Err(Error::UnknownFormat("Ignition".into())),
        ),
        (Some(b"mime"), Err(Error::UnknownFormat("mime".into()))),
    ];
    for (value, expected) in cases {
        assert_eq!(&Format::from_secret_key(*value), expected, "{value:?}");
    }
}

#[test]
fn sentinel_check_answers_true_or_false() {
    let command = sentinel_check_command();
    assert!(command.argv[2].contains(SENTINEL_PATH));
    assert_eq!(command.stdin, None);
    let output = std::process::Command::new(&command.argv[0])
        .args(&command.argv[1..])
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        sentinel_exists(&output.stdout),
        Some(Path::new(SENTINEL_PATH).exists())
    );
    assert_eq!(sentinel_exists(b"true\n"), Some(true));
    assert_eq!(sentinel_exists(b"false"), Some(false));
    assert_eq!(sentinel_exists(b"sh: test: not found"), None);
}

#[test]
fn plans_without_kubeadm_warn_that_nothing_marks_the_node() {
    let plan = translate(
        b"runcmd: [[true]]\n",
        Format::CloudConfig,
        &Options::default(),
    )
    .unwrap();
    assert_eq!(plan.warnings, [NO_SENTINEL_WARNING]);
    let with_kubeadm = translate(
        b"runcmd: [kubeadm init]\n",
        Format::CloudConfig,
        &Options::default(),
    );
    assert!(with_kubeadm.unwrap().warnings.is_empty());
    let empty = translate(b"#cloud-config\n", Format::CloudConfig, &Options::default()).unwrap();
    assert_eq!(empty.warnings, ["the cloud-config is empty"]);
}

#[test]
fn command_debug_hides_argv_and_stdin() {
    let command = Command::new(
        vec!["kubeadm".into(), "--token".into(), "abcdef.secret".into()],
        "run kubeadm",
    )
    .with_stdin(b"PRIVATE KEY".to_vec());
    let debug = format!("{command:?}");
    assert!(
        !debug.contains("secret") && !debug.contains("PRIVATE"),
        "{debug}"
    );
    assert!(
        debug.contains("run kubeadm") && debug.contains("stdin_bytes: Some(11)"),
        "{debug}"
    );
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn b64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A file name that is hard for shells: quotes, spaces, globs, `$`, backslashes, unicode.
fn tricky_name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 '\"$`\\\\*?;&|<>(){}#~!%é-]{1,24}"
        .prop_filter("not . or ..", |n| n != "." && n != "..")
}

#[derive(Debug, Clone, Copy)]
enum Enc {
    Text,
    B64,
    Gzip64,
}

const CLOUD_CONFIG_KEYS: &[&str] = &[
    "write_files",
    "runcmd",
    "bootcmd",
    "path",
    "content",
    "encoding",
    "owner",
    "permissions",
    "append",
    "users",
    "ntp",
    "hostname",
    "fqdn",
    "mounts",
    "final_message",
    "text",
    "gzip",
    "gz+b64",
    "b64",
    "base64",
];

const IGNITION_KEYS: &[&str] = &[
    "ignition",
    "version",
    "storage",
    "files",
    "directories",
    "links",
    "path",
    "contents",
    "source",
    "compression",
    "mode",
    "append",
    "overwrite",
    "systemd",
    "units",
    "name",
    "enabled",
    "mask",
    "dropins",
    "target",
    "hard",
    "user",
    "group",
    "kernelArguments",
];

const KUBEADM_KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "nodeRegistration",
    "kubeletExtraArgs",
    "name",
    "value",
    "criSocket",
    "ignorePreflightErrors",
    "taints",
    "localAPIEndpoint",
    "controlPlane",
    "discovery",
    "bootstrapToken",
    "InitConfiguration",
    "JoinConfiguration",
    "ClusterConfiguration",
    "kubeadm.k8s.io/v1beta3",
    "kubeadm.k8s.io/v1beta4",
    "eviction-hard",
    "cgroup-driver",
];

fn kubeadm_word() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(
            &[
                "kubeadm",
                "init",
                "join",
                "--config",
                "/run/kubeadm/kubeadm.yaml",
                "--ignore-preflight-errors=all",
                "&&",
                ";",
                "|",
                "'",
                "\"",
                "$(",
                "`",
                "#",
                "\n",
                "sudo",
                "sh",
                "-c",
            ][..]
        )
        .prop_map(str::to_string),
        "[ -~]{0,12}",
    ]
}

proptest! {
    #![proptest_config(crate::fuzz::config(48))]

    #[test]
    fn fuzz_arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = translate(&data, Format::CloudConfig, &Options::default());
        let _ = translate(&data, Format::Ignition, &Options::default());
    }

    #[test]
    fn fuzz_yaml_like_text(text in "(#cloud-config\n)?([a-z_]{1,10}:( [-a-z0-9'\"{}\\[\\],:]{0,12})?\n(  - [-a-z0-9 '\":]{0,12}\n){0,3}){0,5}") {
        let _ = translate(text.as_bytes(), Format::CloudConfig, &Options::default());
    }

    /// cloud-config documents of cloud-init's own keys with values of any type (JSON is YAML).
    #[test]
    fn fuzz_cloud_config_documents(document in crate::fuzz::object_with(CLOUD_CONFIG_KEYS)) {
        let text = format!("#cloud-config\n{document}");
        let _ = translate(text.as_bytes(), Format::CloudConfig, &Options::default());
    }

    /// Ignition configs of Ignition's own keys with values of any type.
    #[test]
    fn fuzz_ignition_configs(config in crate::fuzz::object_with(IGNITION_KEYS)) {
        let _ = translate(config.to_string().as_bytes(), Format::Ignition, &Options::default());
    }

    /// The kubeadm rewrites: command lines, scripts, and configuration files.
    #[test]
    fn fuzz_kubeadm_rewrites(
        argv in proptest::collection::vec(kubeadm_word(), 0..8),
        documents in proptest::collection::vec(crate::fuzz::object_with(KUBEADM_KEYS), 0..3),
    ) {
        let _ = super::kubeadm::rewrite_argv(&argv);
        let _ = super::kubeadm::rewrite_script(&argv.join(" "));
        let _ = super::kubeadm::rewrite_script(&argv.join("\n"));
        let config: Vec<String> = documents.iter().map(|d| d.to_string()).collect();
        let mut warnings = Vec::new();
        let _ = super::kubeadm_config::patch(
            "/run/kubeadm/kubeadm.yaml",
            config.join("\n---\n").as_bytes(),
            &Options::default(),
            &mut warnings,
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any file name and content, through any encoding, is written by the real shell at exactly
    /// that path with exactly that content and mode.
    #[test]
    fn write_files_round_trip_through_a_real_shell(
        dir in tricky_name(),
        name in tricky_name(),
        text in "[^\\x00]{0,200}",
        binary in proptest::collection::vec(any::<u8>(), 0..200),
        encoding in prop_oneof![Just(Enc::Text), Just(Enc::B64), Just(Enc::Gzip64)],
        mode in prop_oneof![Just(0o600u32), Just(0o640), Just(0o644), Just(0o755)],
    ) {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().unwrap();
        let path = format!("{}/{dir}/{name}", root.path().display());
        let (content, encoded, encoding_name) = match encoding {
            Enc::Text => (text.clone().into_bytes(), text, "text/plain"),
            Enc::B64 => (binary.clone(), b64(&binary), "b64"),
            Enc::Gzip64 => (binary.clone(), b64(&gzip(&binary)), "gzip+base64"),
        };
        let config = serde_json::json!({"write_files": [{
            "path": path,
            "encoding": encoding_name,
            "permissions": format!("{mode:04o}"),
            "content": encoded,
        }]});
        let yaml = format!("#cloud-config\n{}", serde_saphyr::to_string(&config).unwrap());
        let plan = translate(yaml.as_bytes(), Format::CloudConfig, &Options::default()).unwrap();
        let (target, append, stdin) = write_target(&plan.commands[0]).unwrap();
        prop_assert_eq!(target, path.as_str());
        prop_assert!(!append);
        prop_assert_eq!(stdin, content.as_slice());
        for command in &plan.commands {
            run_locally(command);
        }
        prop_assert_eq!(std::fs::read(&path).unwrap(), content);
        let actual_mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        prop_assert_eq!(actual_mode, mode);
        // Nothing else was created: one directory holding one file.
        let entries: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
        prop_assert_eq!(entries.len(), 1);
    }

    /// Secrets in file contents, commands, users and kubeadm configs never reach descriptions,
    /// warnings, `Debug` output or error messages.
    #[test]
    fn secrets_stay_out_of_descriptions_warnings_and_errors(
        suffix in "[A-Za-z0-9]{20}",
        broken in 0usize..6,
    ) {
        let secret = format!("S3CRET{suffix}");
        let good = format!(
            "#cloud-config\nwrite_files:\n- path: /etc/kubernetes/pki/ca.key\n  permissions: '0600'\n  content: |\n    {secret}\n- path: /etc/token\n  encoding: b64\n  content: {}\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta3\n    kind: JoinConfiguration\n    discovery:\n      bootstrapToken:\n        token: {secret}\nusers:\n- name: capi\n  passwd: {secret}\nruncmd:\n- kubeadm join --token {secret} 10.0.0.1:6443\n- [kubeadm, join, --token, {secret}]\n- [sh, -c, 'echo {secret}']\n- echo {secret} > /dev/null\n",
            b64(secret.as_bytes())
        );
        let bad = [
            format!("#cloud-config\nwrite_files:\n- path: /etc/x\n  encoding: b64\n  content: '{secret}!!'\n"),
            format!("#cloud-config\nwrite_files:\n- path: /etc/x\n  encoding: gzip\n  content: {secret}\n"),
            format!("#cloud-config\nruncmd: [\n  {secret}: [\n"),
            format!("#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: |\n    kind: InitConfiguration\n    token: [{secret}\n"),
            format!("#cloud-config\nruncmd:\n- - {{a: {secret}}}\n"),
            format!("{{\"ignition\": {{\"version\": \"3.0.0\"}}, \"storage\": {{\"files\": [{{\"path\": \"/x\", \"contents\": {{\"source\": \"data:;base64,{secret}!\"}}}}]}}}}"),
        ];
        let plan = translate(good.as_bytes(), Format::CloudConfig, &Options::default()).unwrap();
        prop_assert!(plan.commands.iter().any(|c| c.stdin.as_deref().is_some_and(|s| s.windows(secret.len()).any(|w| w == secret.as_bytes()))));
        let visible = format!("{plan:?} {}", plan.warnings.join(" "));
        prop_assert!(!visible.contains(&secret), "{}", visible);
        for command in &plan.commands {
            prop_assert!(!command.to_string().contains(&secret));
        }
        let format = if broken == 5 { Format::Ignition } else { Format::CloudConfig };
        let err = translate(bad[broken].as_bytes(), format, &Options::default()).unwrap_err();
        let shown = format!("{err} {err:?}");
        prop_assert!(!shown.contains(&secret), "{}", shown);
    }
}
