use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::*;

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

/// The files of a cloud-config, `path -> content`.
fn files(cloud_config: &str) -> Vec<(String, String)> {
    yaml(cloud_config)["write_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn content<'a>(files: &'a [(String, String)], path: &str) -> &'a str {
    &files.iter().find(|(p, _)| p == path).unwrap().1
}

/// Runs `openssl <args>` with `stdin`; `None` when openssl is not installed.
fn openssl(args: &[&str], stdin: &[u8]) -> Option<std::process::Output> {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    Some(child.wait_with_output().unwrap())
}

#[test]
fn the_ca_hash_is_what_kubeadm_and_openssl_compute_from_the_public_key() {
    let ca = Authority::generate();
    let hash = ca.spki_hash();
    assert!(
        hash.starts_with("sha256:") && hash.len() == 7 + 64,
        "{hash}"
    );
    // `openssl x509 -pubkey | openssl pkey -pubin -outform der | sha256sum`
    let Some(pubkey) = openssl(&["x509", "-pubkey", "-noout"], ca.cert_pem().as_bytes()) else {
        eprintln!("note: no openssl; the hash is checked against the key alone");
        return;
    };
    assert!(pubkey.status.success());
    let der = openssl(&["pkey", "-pubin", "-outform", "der"], &pubkey.stdout).unwrap();
    assert!(der.status.success());
    assert_eq!(hash, spki_hash(&der.stdout));
}

#[test]
fn an_admin_certificate_is_signed_by_the_ca_for_system_masters() {
    let ca = Authority::generate();
    let admin = ca.client_certificate("kubernetes-admin", &["system:masters"]);
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.crt");
    std::fs::write(&ca_path, ca.cert_pem()).unwrap();
    let Some(verified) = openssl(
        &[
            "verify",
            "-purpose",
            "sslclient",
            "-CAfile",
            ca_path.to_str().unwrap(),
        ],
        admin.cert_pem.as_bytes(),
    ) else {
        return;
    };
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    let subject = openssl(&["x509", "-noout", "-subject"], admin.cert_pem.as_bytes()).unwrap();
    let subject = String::from_utf8_lossy(&subject.stdout).replace(' ', "");
    assert!(subject.contains("O=system:masters"), "{subject}");
    assert!(subject.contains("CN=kubernetes-admin"), "{subject}");
    let ca_text = openssl(&["x509", "-noout", "-text"], ca.cert_pem().as_bytes()).unwrap();
    let ca_text = String::from_utf8_lossy(&ca_text.stdout);
    assert!(ca_text.contains("CA:TRUE, pathlen:0"), "{ca_text}");
    assert!(ca_text.contains("Certificate Sign"), "{ca_text}");
}

#[test]
fn certificate_secrets_are_named_and_shaped_as_cabpk_stores_them() {
    let certificates = ClusterCertificates::generate();
    let secrets = certificates.secrets("real", "ns");
    let names: Vec<_> = secrets
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["real-ca", "real-etcd", "real-proxy", "real-sa"]);
    for secret in &secrets {
        assert_eq!(secret.type_.as_deref(), Some(CLUSTER_SECRET_TYPE));
        assert_eq!(
            secret.metadata.labels.as_ref().unwrap()[CLUSTER_NAME_LABEL],
            "real"
        );
        let data = secret.data.as_ref().unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), ["tls.crt", "tls.key"]);
    }
    let sa = secrets[3].data.as_ref().unwrap();
    assert!(String::from_utf8_lossy(&sa["tls.crt"].0).starts_with("-----BEGIN PUBLIC KEY-----"));
    assert!(String::from_utf8_lossy(&sa["tls.key"].0).starts_with("-----BEGIN PRIVATE KEY-----"));
}

#[test]
fn the_init_cloud_config_writes_the_pki_and_three_kubeadm_documents() {
    let certificates = ClusterCertificates::generate();
    let text = init_control_plane(
        &ClusterSettings::example(),
        &KubeadmConfigSpec::real_node(),
        &certificates,
    );
    assert!(text.starts_with(
        "## template: jinja\n#cloud-config\n\nwrite_files:\n-   path: /etc/kubernetes/pki/ca.crt\n"
    ));
    let files = files(&text);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/etc/kubernetes/pki/ca.crt",
            "/etc/kubernetes/pki/ca.key",
            "/etc/kubernetes/pki/etcd/ca.crt",
            "/etc/kubernetes/pki/etcd/ca.key",
            "/etc/kubernetes/pki/front-proxy-ca.crt",
            "/etc/kubernetes/pki/front-proxy-ca.key",
            "/etc/kubernetes/pki/sa.pub",
            "/etc/kubernetes/pki/sa.key",
            "/run/kubeadm/kubeadm.yaml",
            "/run/cluster-api/placeholder",
        ]
    );
    // Contents come back byte for byte (plus the line of spaces the template leaves).
    assert_eq!(
        content(&files, "/etc/kubernetes/pki/ca.crt").trim_end(),
        certificates.ca.cert_pem().trim_end()
    );
    let kubeadm = content(&files, "/run/kubeadm/kubeadm.yaml");
    let parts: Vec<&str> = kubeadm.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{kubeadm}");
    assert_eq!(parts[0], "");
    let cluster_configuration = yaml(parts[1]);
    assert_eq!(cluster_configuration["kind"], "ClusterConfiguration");
    assert_eq!(
        cluster_configuration["apiVersion"],
        "kubeadm.k8s.io/v1beta3"
    );
    assert_eq!(
        cluster_configuration["controlPlaneEndpoint"],
        "10.89.0.2:6443"
    );
    assert_eq!(cluster_configuration["kubernetesVersion"], "v1.28.4");
    assert_eq!(cluster_configuration["clusterName"], "real");
    assert_eq!(
        cluster_configuration["networking"]["podSubnet"],
        "10.244.0.0/16"
    );
    assert_eq!(
        cluster_configuration["networking"]["serviceSubnet"],
        "10.96.0.0/12"
    );
    assert_eq!(
        cluster_configuration["apiServer"]["certSANs"],
        serde_json::json!(["localhost", "127.0.0.1", "0.0.0.0", "host.docker.internal"])
    );
    assert_eq!(
        cluster_configuration["controllerManager"]["extraArgs"]["enable-hostpath-provisioner"],
        "true"
    );
    let init = yaml(parts[2]);
    assert_eq!(init["kind"], "InitConfiguration");
    assert_eq!(init["nodeRegistration"]["imagePullPolicy"], "Never");
    assert_eq!(
        init["nodeRegistration"]["kubeletExtraArgs"]["eviction-hard"],
        "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"
    );
    assert_eq!(init["nodeRegistration"]["taints"], Value::Null);
    assert_eq!(init["skipPhases"], serde_json::json!(["addon/coredns"]));
    assert_eq!(
        yaml(&text)["runcmd"],
        serde_json::json!([
            "kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete"
        ])
    );
}

#[test]
fn a_worker_joins_with_a_token_the_ca_hash_and_the_uninitialized_taint() {
    let certificates = ClusterCertificates::generate();
    let text = join_worker(
        &KubeadmConfigSpec::real_node(),
        &Discovery::example(&certificates.ca),
    );
    let files = files(&text);
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/run/kubeadm/kubeadm-join-config.yaml",
            "/run/cluster-api/placeholder"
        ]
    );
    let join = content(&files, "/run/kubeadm/kubeadm-join-config.yaml");
    assert!(
        join.starts_with("---\napiVersion: kubeadm.k8s.io/v1beta3\n"),
        "{join}"
    );
    let join = yaml(join.trim_start_matches("---\n"));
    assert_eq!(join["kind"], "JoinConfiguration");
    let token = &join["discovery"]["bootstrapToken"];
    assert_eq!(token["apiServerEndpoint"], "10.89.0.2:6443");
    assert_eq!(token["token"], "abcdef.0123456789abcdef");
    assert_eq!(
        token["caCertHashes"],
        serde_json::json!([certificates.ca.spki_hash()])
    );
    assert_eq!(join["controlPlane"], Value::Null);
    // Workers keep the default pull policy: their join runs no image check.
    assert_eq!(join["nodeRegistration"]["imagePullPolicy"], Value::Null);
    assert_eq!(
        join["nodeRegistration"]["taints"],
        serde_json::json!([{"effect": "NoSchedule", "key": NODE_UNINITIALIZED_TAINT}])
    );
    assert_eq!(
        yaml(&text)["runcmd"],
        serde_json::json!([
            "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete"
        ])
    );
}

#[test]
fn a_control_plane_joins_with_the_shared_certificates_and_a_local_api_endpoint() {
    let certificates = ClusterCertificates::generate();
    let text = join_control_plane(
        &KubeadmConfigSpec::real_node(),
        &Discovery::example(&certificates.ca),
        &certificates,
    );
    let files = files(&text);
    assert_eq!(files.len(), 10);
    assert_eq!(
        content(&files, "/etc/kubernetes/pki/etcd/ca.key").trim_end(),
        certificates.etcd.key_pem().trim_end()
    );
    let join = content(&files, "/run/kubeadm/kubeadm-join-config.yaml");
    assert!(
        join.starts_with("apiVersion: kubeadm.k8s.io/v1beta3\n"),
        "{join}"
    );
    let join = yaml(join);
    assert_eq!(
        join["controlPlane"],
        serde_json::json!({"localAPIEndpoint": {}})
    );
    assert_eq!(join["nodeRegistration"]["imagePullPolicy"], "Never");
    assert_eq!(join["nodeRegistration"]["taints"], Value::Null);
}

#[test]
fn the_quick_start_spec_sets_no_real_node_tweaks() {
    let init = yaml(&init_configuration(&KubeadmConfigSpec::default()));
    assert_eq!(init["skipPhases"], Value::Null);
    assert_eq!(init["nodeRegistration"]["imagePullPolicy"], Value::Null);
}

#[test]
fn a_bootstrap_token_secret_is_shaped_as_cabpk_creates_it() {
    let token = BootstrapToken::generate();
    let text = token.to_string();
    let (id, secret) = text.split_once('.').unwrap();
    assert_eq!((id.len(), secret.len()), (6, 16));
    assert!(
        text.chars()
            .all(|c| c == '.' || c.is_ascii_lowercase() || c.is_ascii_digit())
    );
    assert!(!format!("{token:?}").contains(secret));
    let object = token.secret(DEFAULT_TOKEN_TTL);
    assert_eq!(
        object.metadata.name.unwrap(),
        format!("bootstrap-token-{id}")
    );
    assert_eq!(object.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        object.type_.as_deref(),
        Some("bootstrap.kubernetes.io/token")
    );
    let data = object.data.unwrap();
    let get = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
    assert_eq!(get("token-id"), id);
    assert_eq!(get("token-secret"), secret);
    assert_eq!(get("usage-bootstrap-authentication"), "true");
    assert_eq!(get("usage-bootstrap-signing"), "true");
    assert_eq!(get("auth-extra-groups"), DEFAULT_NODE_TOKEN_GROUP);
    let expiration: jiff::Timestamp = get("expiration").parse().unwrap();
    let left = expiration.as_second() - jiff::Timestamp::now().as_second();
    assert!((890..=900).contains(&left), "{left}");
    assert!(get("expiration").ends_with('Z'));
}

#[test]
fn the_admin_kubeconfig_has_cores_names_and_the_ca() {
    let ca = Authority::generate();
    let text = admin_kubeconfig("real", "https://10.89.0.2:6443", &ca);
    let config = kube::config::Kubeconfig::from_yaml(&text).unwrap();
    assert_eq!(config.current_context.as_deref(), Some("real-admin@real"));
    let cluster = config.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(config.clusters[0].name, "real");
    assert_eq!(cluster.server.as_deref(), Some("https://10.89.0.2:6443"));
    use base64::Engine;
    let ca_data = base64::engine::general_purpose::STANDARD
        .decode(cluster.certificate_authority_data.as_ref().unwrap())
        .unwrap();
    assert_eq!(String::from_utf8(ca_data).unwrap(), ca.cert_pem());
    let context = config.contexts[0].context.as_ref().unwrap();
    assert_eq!(
        (context.cluster.as_str(), context.user.as_deref()),
        ("real", Some("real-admin"))
    );
    assert_eq!(config.auth_infos[0].name, "real-admin");
}

#[test]
fn yaml_scalars_are_quoted_where_go_quotes_them() {
    assert_eq!(config::scalar("true"), "\"true\"");
    assert_eq!(config::scalar("100"), "\"100\"");
    assert_eq!(config::scalar(""), "\"\"");
    assert_eq!(config::scalar("127.0.0.1"), "127.0.0.1");
    assert_eq!(config::scalar("10.89.0.2:6443"), "10.89.0.2:6443");
    assert_eq!(
        config::scalar("nodefs.available<0%,nodefs.inodesFree<0%"),
        "nodefs.available<0%,nodefs.inodesFree<0%"
    );
    assert_eq!(config::scalar("*.svc"), "\"*.svc\"");
}

#[test]
fn indent_prefixes_every_line_as_cabpk_does() {
    assert_eq!(indent(2, "a\nb\n"), "  a\n  b\n  ");
    assert_eq!(indent(2, "a"), "  a");
}

#[test]
fn http_answers_are_read_plain_or_chunked() {
    let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    assert_eq!(parse_http_answer(plain).unwrap(), (200, "{}".into()));
    let chunked =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
    assert_eq!(
        parse_http_answer(chunked).unwrap(),
        (200, "{\"a\":1}".into())
    );
    assert!(parse_http_answer(b"garbage").is_err());
}
