use super::*;

const CLUSTER_V1BETA3: &str = "apiServer:
  certSANs:
  - localhost
  - 127.0.0.1
apiVersion: kubeadm.k8s.io/v1beta3
clusterName: quick-start
controlPlaneEndpoint: 172.18.0.3:6443
controllerManager:
  extraArgs:
    enable-hostpath-provisioner: \"true\"
kind: ClusterConfiguration
kubernetesVersion: v1.30.0
networking:
  dnsDomain: cluster.local
  podSubnet: 192.168.0.0/16
  serviceSubnet: 10.128.0.0/12
";

fn patched(content: &str, opts: &Options) -> String {
    patched_with_warnings(INIT_CONFIG_PATH, content, opts).0
}

fn patched_with_warnings(path: &str, content: &str, opts: &Options) -> (String, Vec<String>) {
    let mut warnings = Vec::new();
    let out = patch(path, content.as_bytes(), opts, &mut warnings).unwrap();
    (String::from_utf8(out).unwrap(), warnings)
}

fn docs(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text).unwrap()
}

fn by_kind<'a>(all: &'a [Value], kind: &str) -> &'a Value {
    all.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {all:?}"))
}

#[test]
fn init_v1beta3_gets_defaults_kube_proxy_and_keeps_cluster_configuration_verbatim() {
    let input = format!(
        "---\n{CLUSTER_V1BETA3}---\napiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\nlocalAPIEndpoint: {{}}\nnodeRegistration:\n  kubeletExtraArgs:\n    eviction-hard: nodefs.available<10%\n  taints: null\n"
    );
    let (out, warnings) = patched_with_warnings(INIT_CONFIG_PATH, &input, &Options::default());
    assert_eq!(
        warnings,
        [
            "/run/kubeadm/kubeadm.yaml: kubelet argument eviction-hard was replaced by \
             nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%, which kind nodes need"
        ]
    );
    assert!(
        out.starts_with(&format!("---\n{CLUSTER_V1BETA3}---\n")),
        "{out}"
    );
    let all = docs(&out);
    assert_eq!(all.len(), 3, "{out}");
    let init = by_kind(&all, "InitConfiguration");
    assert_eq!(init["apiVersion"], "kubeadm.k8s.io/v1beta3");
    let registration = &init["nodeRegistration"];
    assert_eq!(registration["criSocket"], CRI_SOCKET);
    assert_eq!(
        registration["kubeletExtraArgs"],
        serde_json::json!({
            "eviction-hard": "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%",
            "image-gc-high-threshold": "100",
            "fail-swap-on": "false",
            "cgroup-root": "/kubelet",
            "runtime-cgroups": "/system.slice/containerd.service",
        })
    );
    assert_eq!(registration["taints"], Value::Null);
    let proxy = by_kind(&all, "KubeProxyConfiguration");
    assert_eq!(proxy["conntrack"]["maxPerCore"], 0);
    assert_eq!(proxy["apiVersion"], "kubeproxy.config.k8s.io/v1alpha1");
}

#[test]
fn join_v1beta4_gets_list_style_arguments_and_no_kube_proxy() {
    let input = "---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 172.18.0.3:6443\n    token: abcdef.0123456789abcdef\n    caCertHashes:\n    - sha256:0123\nnodeRegistration:\n  criSocket: unix:///run/custom.sock\n  kubeletExtraArgs:\n  - name: fail-swap-on\n    value: \"true\"\n  - name: v\n    value: \"4\"\n";
    let (out, warnings) = patched_with_warnings(
        JOIN_CONFIG_PATH,
        input,
        &Options {
            kind_mode: KindMode::V0_19,
            kubernetes_version: None,
        },
    );
    assert_eq!(
        warnings,
        [
            "/run/kubeadm/kubeadm-join-config.yaml: kubelet argument fail-swap-on was replaced by false, which kind nodes need"
        ]
    );
    let all = docs(&out);
    assert_eq!(all.len(), 1, "{out}");
    let join = &all[0];
    assert_eq!(join["apiVersion"], "kubeadm.k8s.io/v1beta4");
    assert_eq!(
        join["discovery"]["bootstrapToken"]["token"],
        "abcdef.0123456789abcdef"
    );
    assert_eq!(
        join["nodeRegistration"]["criSocket"],
        "unix:///run/custom.sock"
    );
    assert_eq!(
        join["nodeRegistration"]["kubeletExtraArgs"],
        serde_json::json!([
            {"name": "fail-swap-on", "value": "false"},
            {"name": "v", "value": "4"},
            {"name": "image-gc-high-threshold", "value": "100"},
            {"name": "eviction-hard", "value": "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"},
        ])
    );
    // Quoted numbers stay strings for kubeadm (Go YAML would otherwise read them as integers).
    assert!(out.contains("value: \"4\""), "{out}");
}

#[test]
fn shape_follows_api_version_then_kubernetes_version() {
    let cases = [
        (Some("kubeadm.k8s.io/v1beta3"), Some("v1.33.0"), false),
        (Some("kubeadm.k8s.io/v1beta4"), Some("v1.29.0"), true),
        (Some("kubeadm.k8s.io/v1beta5"), None, true),
        (None, Some("v1.31.0"), true),
        (None, Some("1.30.9+k3s"), false),
        (None, Some("garbage"), false),
        (None, None, false),
    ];
    for (api, k8s, expected) in cases {
        assert_eq!(list_style_for(api, k8s), expected, "{api:?} {k8s:?}");
    }
}

#[test]
fn missing_node_registration_is_created_in_the_shape_of_the_api_version() {
    let input = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n";
    let all = docs(&patched(input, &Options::default()));
    let args = &by_kind(&all, "InitConfiguration")["nodeRegistration"]["kubeletExtraArgs"];
    assert_eq!(args.as_array().map(Vec::len), Some(5), "{args}");
}

#[test]
fn existing_kube_proxy_configuration_is_completed_not_duplicated() {
    let input = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\n---\napiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n";
    let all = docs(&patched(input, &Options::default()));
    assert_eq!(all.len(), 2);
    let proxy = by_kind(&all, "KubeProxyConfiguration");
    assert_eq!(proxy["mode"], "ipvs");
    assert_eq!(proxy["conntrack"]["maxPerCore"], 0);

    let explicit = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: 4\n";
    assert_eq!(patched(explicit, &Options::default()), explicit);
}

#[test]
fn already_complete_configuration_is_unchanged() {
    let input = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\nnodeRegistration:\n  criSocket: unix:///x.sock\n  kubeletExtraArgs:\n    image-gc-high-threshold: 100\n    eviction-hard: nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%\n    fail-swap-on: false\n    cgroup-root: /kubelet\n    runtime-cgroups: /system.slice/containerd.service\n";
    let (out, warnings) = patched_with_warnings(JOIN_CONFIG_PATH, input, &Options::default());
    assert_eq!(out, input);
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn kind_required_kubelet_arguments_win_over_the_users_and_each_is_named() {
    let input = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\nnodeRegistration:\n  criSocket: unix:///x.sock\n  kubeletExtraArgs:\n    image-gc-high-threshold: \"90\"\n    eviction-hard: \"\"\n    fail-swap-on: \"true\"\n    cgroup-root: /k\n    runtime-cgroups: /r\n    v: \"2\"\n";
    let (out, warnings) = patched_with_warnings(JOIN_CONFIG_PATH, input, &Options::default());
    let args = &docs(&out)[0]["nodeRegistration"]["kubeletExtraArgs"];
    assert_eq!(
        *args,
        serde_json::json!({
            "image-gc-high-threshold": "100",
            "eviction-hard": "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%",
            "fail-swap-on": "false",
            "cgroup-root": "/kubelet",
            "runtime-cgroups": "/system.slice/containerd.service",
            "v": "2",
        })
    );
    let named: Vec<&str> = warnings
        .iter()
        .map(|w| {
            w.split("kubelet argument ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .unwrap()
        })
        .collect();
    assert_eq!(
        named,
        [
            "image-gc-high-threshold",
            "eviction-hard",
            "fail-swap-on",
            "cgroup-root",
            "runtime-cgroups"
        ]
    );
    // The user's replaced values never reach the warnings.
    assert!(
        warnings
            .iter()
            .all(|w| !w.contains("/k,") && !w.contains("90")),
        "{warnings:?}"
    );
}

#[test]
fn jinja_expressions_survive_reserialisation() {
    let input = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\nnodeRegistration:\n  name: '{{ ds.meta_data.local_hostname }}'\n";
    let all = docs(
        &String::from_utf8(
            patch(
                JOIN_CONFIG_PATH,
                input.as_bytes(),
                &Options::default(),
                &mut Vec::new(),
            )
            .unwrap(),
        )
        .unwrap(),
    );
    assert_eq!(
        all[0]["nodeRegistration"]["name"],
        "{{ ds.meta_data.local_hostname }}"
    );
}

#[test]
fn malformed_configurations_are_errors_without_content() {
    let secret = "s3cr3t-t0ken";
    let cases = [
        (
            format!("apiVersion: v1\n---\nkind: InitConfiguration\ntoken: [{secret}\n"),
            "document 2 is not valid YAML",
        ),
        (
            "kind: JoinConfiguration\nnodeRegistration: [a]\n".to_owned(),
            "nodeRegistration is not a mapping",
        ),
        (
            "kind: JoinConfiguration\nnodeRegistration:\n  kubeletExtraArgs: 5\n".to_owned(),
            "neither a mapping nor a list",
        ),
    ];
    for (input, expected) in cases {
        let err = patch(
            JOIN_CONFIG_PATH,
            input.as_bytes(),
            &Options::default(),
            &mut Vec::new(),
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(message.contains(expected), "{message}");
        assert!(message.contains(JOIN_CONFIG_PATH), "{message}");
        assert!(!message.contains(secret), "{message}");
    }
    let err = patch(
        JOIN_CONFIG_PATH,
        &[0xff, 0xfe],
        &Options::default(),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("not UTF-8"));
}

#[test]
fn yaml_error_lines_count_from_the_start_of_the_file() {
    let input = "a: 1\n---\nb: 2\nc: [\n";
    let err = patch(
        INIT_CONFIG_PATH,
        input.as_bytes(),
        &Options::default(),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("line 4") || err.to_string().contains("line 5"),
        "{err}"
    );
}
