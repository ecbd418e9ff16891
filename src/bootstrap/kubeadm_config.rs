//! Patches of kubeadm configuration files for node containers.
//!
//! Only the documents that need a change are re-serialised (`InitConfiguration`,
//! `JoinConfiguration`, `KubeProxyConfiguration`); the others (for example the
//! `ClusterConfiguration`) are kept byte for byte. Each patched document keeps its own
//! `apiVersion`: kubeadm v1beta3 and older take `kubeletExtraArgs` as a mapping, v1beta4 as a
//! list of `{name, value}`.

use serde_json::{Map, Value};

use super::{Error, KindMode, Options};

/// cloud-init path of the `kubeadm init` configuration written by Cluster API's kubeadm bootstrap.
pub(crate) const INIT_CONFIG_PATH: &str = "/run/kubeadm/kubeadm.yaml";
/// cloud-init path of the `kubeadm join` configuration.
pub(crate) const JOIN_CONFIG_PATH: &str = "/run/kubeadm/kubeadm-join-config.yaml";
/// Ignition path of the kubeadm configuration (init or join).
pub(crate) const IGNITION_CONFIG_PATH: &str = "/etc/kubeadm.yml";

const CRI_SOCKET: &str = "unix:///var/run/containerd/containerd.sock";

/// Appended when an init configuration has no kube-proxy configuration: kube-proxy must not try
/// to raise `nf_conntrack_max`, a sysctl that is read-only inside a container.
const KUBE_PROXY_DOCUMENT: &str = "---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
conntrack:
  # Skip setting the sysctl net.netfilter.nf_conntrack_max: it is read-only in a container.
  maxPerCore: 0
";

/// Kubelet flags a node container needs. As in CAPD 1.12 they win over the configuration's own
/// value: a node container cannot run the kubelet without them (swap, cgroups, eviction on the
/// host's disk). A replaced value is reported in the plan's warnings by argument name.
fn kubelet_defaults(mode: KindMode) -> Vec<(&'static str, &'static str)> {
    let mut args = vec![
        // Disk pressure on the host must not make the kubelet evict pods or delete images.
        ("image-gc-high-threshold", "100"),
        (
            "eviction-hard",
            "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%",
        ),
        ("fail-swap-on", "false"),
    ];
    if mode == KindMode::V0_20 {
        args.push(("cgroup-root", "/kubelet"));
        args.push(("runtime-cgroups", "/system.slice/containerd.service"));
    }
    args
}

/// One YAML document of a multi-document file, with the separator line that preceded it.
struct Document<'a> {
    separator: &'a str,
    body: &'a str,
    /// Number of lines before the body, to report positions in the whole file.
    line_offset: u64,
}

fn split_documents(text: &str) -> Vec<Document<'_>> {
    let mut docs = Vec::new();
    let mut separator = "";
    let mut body_start = 0;
    let mut line_offset = 0;
    let mut position = 0;
    for (line_number, line) in (0u64..).zip(text.split_inclusive('\n')) {
        let content = line.trim_end();
        if content == "---" || content.starts_with("--- ") {
            docs.push(Document {
                separator,
                body: &text[body_start..position],
                line_offset,
            });
            separator = line;
            body_start = position + line.len();
            line_offset = line_number + 1;
        }
        position += line.len();
    }
    docs.push(Document {
        separator,
        body: &text[body_start..],
        line_offset,
    });
    docs
}

/// Applies the node-container settings to a kubeadm configuration file. Every kubelet argument
/// whose value the file set otherwise is named in `warnings`.
pub(crate) fn patch(
    path: &str,
    content: &[u8],
    opts: &Options,
    warnings: &mut Vec<String>,
) -> Result<Vec<u8>, Error> {
    let fail = |problem: String| Error::KubeadmConfig {
        path: super::error::shorten(path),
        problem,
    };
    let text = std::str::from_utf8(content).map_err(|_| fail("the content is not UTF-8".into()))?;
    let mut out = String::with_capacity(text.len() + KUBE_PROXY_DOCUMENT.len() + 512);
    let mut has_init = false;
    let mut has_proxy = false;
    for (index, doc) in split_documents(text).into_iter().enumerate() {
        out.push_str(doc.separator);
        let mut value: Value = match serde_saphyr::from_str(doc.body) {
            Ok(Some(value)) => value,
            Ok(None) => {
                out.push_str(doc.body);
                continue;
            }
            Err(e) => {
                let (line, column) = e
                    .location()
                    .map_or((0, 0), |l| (l.line() + doc.line_offset, l.column()));
                return Err(fail(format!(
                    "document {} is not valid YAML (line {line}, column {column})",
                    index + 1
                )));
            }
        };
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let changed = match kind {
            "InitConfiguration" => {
                has_init = true;
                patch_node_registration(&mut value, opts, path, warnings).map_err(fail)?
            }
            "JoinConfiguration" => {
                patch_node_registration(&mut value, opts, path, warnings).map_err(fail)?
            }
            "KubeProxyConfiguration" => {
                has_proxy = true;
                patch_kube_proxy(&mut value).map_err(fail)?
            }
            _ => false,
        };
        if changed {
            let yaml = serde_saphyr::to_string(&value)
                .map_err(|_| fail(format!("document {} cannot be written back", index + 1)))?;
            out.push_str(&yaml);
            if !yaml.ends_with('\n') {
                out.push('\n');
            }
        } else {
            out.push_str(doc.body);
        }
    }
    if has_init && !has_proxy {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(KUBE_PROXY_DOCUMENT);
    }
    Ok(out.into_bytes())
}

/// Sets the CRI socket when unset and the kind-required kubelet arguments, replacing other
/// values of them (named in `warnings`); returns whether anything changed.
fn patch_node_registration(
    doc: &mut Value,
    opts: &Options,
    path: &str,
    warnings: &mut Vec<String>,
) -> Result<bool, String> {
    let list_style_by_version = list_style_for(
        doc.get("apiVersion").and_then(Value::as_str),
        opts.kubernetes_version.as_deref(),
    );
    let Some(doc) = doc.as_object_mut() else {
        return Err("the configuration document is not a mapping".into());
    };
    let registration = doc
        .entry("nodeRegistration")
        .or_insert_with(|| Value::Object(Map::new()));
    if registration.is_null() {
        *registration = Value::Object(Map::new());
    }
    let Some(registration) = registration.as_object_mut() else {
        return Err("nodeRegistration is not a mapping".into());
    };
    let mut changed = false;
    let socket_unset = match registration.get("criSocket") {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    if socket_unset {
        registration.insert("criSocket".into(), Value::String(CRI_SOCKET.into()));
        changed = true;
    }
    let args = registration
        .entry("kubeletExtraArgs")
        .or_insert(Value::Null);
    if args.is_null() {
        *args = if list_style_by_version {
            Value::Array(Vec::new())
        } else {
            Value::Object(Map::new())
        };
    }
    for (name, value) in kubelet_defaults(opts.kind_mode) {
        let slot = match args {
            Value::Object(map) => map.get_mut(name),
            Value::Array(list) => list
                .iter_mut()
                .find(|arg| arg.get("name").and_then(Value::as_str) == Some(name))
                .and_then(|arg| arg.get_mut("value")),
            _ => {
                return Err(
                    "nodeRegistration.kubeletExtraArgs is neither a mapping nor a list".into(),
                );
            }
        };
        match slot {
            Some(current) if same_argument_value(current, value) => {}
            Some(current) => {
                *current = Value::String(value.into());
                warnings.push(format!(
                    "{}: kubelet argument {name} was replaced by {value}, which kind nodes need",
                    super::error::shorten(path)
                ));
                changed = true;
            }
            None => {
                match args {
                    Value::Object(map) => {
                        map.insert(name.into(), Value::String(value.into()));
                    }
                    Value::Array(list) => {
                        let mut arg = Map::new();
                        arg.insert("name".into(), Value::String(name.into()));
                        arg.insert("value".into(), Value::String(value.into()));
                        list.push(Value::Object(arg));
                    }
                    _ => {}
                }
                changed = true;
            }
        }
    }
    Ok(changed)
}

/// Whether a configured argument already has `expected` (YAML may give `false` or `100` unquoted).
fn same_argument_value(current: &Value, expected: &str) -> bool {
    match current {
        Value::String(s) => s == expected,
        Value::Bool(b) => b.to_string() == expected,
        Value::Number(n) => n.to_string() == expected,
        _ => false,
    }
}

/// Whether `kubeletExtraArgs` is a list of `{name, value}` (kubeadm v1beta4 and later).
fn list_style_for(api_version: Option<&str>, kubernetes_version: Option<&str>) -> bool {
    if let Some(version) = api_version.and_then(|v| v.strip_prefix("kubeadm.k8s.io/")) {
        return !matches!(version, "v1beta1" | "v1beta2" | "v1beta3");
    }
    // kubeadm introduced v1beta4 with Kubernetes 1.31.
    kubernetes_version
        .and_then(parse_minor)
        .is_some_and(|(major, minor)| (major, minor) >= (1, 31))
}

fn parse_minor(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((major, minor))
}

/// Sets `conntrack.maxPerCore: 0` unless the configuration sets it.
fn patch_kube_proxy(doc: &mut Value) -> Result<bool, String> {
    let Some(doc) = doc.as_object_mut() else {
        return Err("the kube-proxy document is not a mapping".into());
    };
    let conntrack = doc
        .entry("conntrack")
        .or_insert_with(|| Value::Object(Map::new()));
    if conntrack.is_null() {
        *conntrack = Value::Object(Map::new());
    }
    let Some(conntrack) = conntrack.as_object_mut() else {
        return Err("conntrack is not a mapping".into());
    };
    if conntrack.get("maxPerCore").is_none_or(Value::is_null) {
        conntrack.insert("maxPerCore".into(), Value::from(0));
        return Ok(true);
    }
    Ok(false)
}

#[cfg(test)]
#[path = "kubeadm_config_tests.rs"]
mod tests;
