//! Tests of the load balancer: container spec, config rendering (golden files), template
//! language and the apply procedure.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::template::{Template, Value};
use super::*;
use crate::docker::fake::{Call, FakeRuntime};
use crate::docker::types::{EndpointAddresses, ExecOutput, NetworkSpec};

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/docker/testdata/haproxy")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "read golden file {} ({e}); run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    assert_eq!(
        actual,
        expected,
        "rendering differs from {}",
        path.display()
    );
}

fn two_backends() -> Vec<Backend> {
    vec![
        Backend {
            name: "c1-cp-b".into(),
            address: "172.18.0.4".into(),
            weight: 0,
        },
        Backend {
            name: "c1-cp-a".into(),
            address: "172.18.0.3".into(),
            weight: 100,
        },
    ]
}

#[test]
fn default_config_ipv4_two_backends() {
    let data = ConfigData {
        frontend_port: 6443,
        backends: two_backends(),
        ipv6: false,
    };
    golden(
        "ipv4-two-backends.cfg",
        &render_config(&data, None).unwrap(),
    );
}

#[test]
fn default_config_ipv6_custom_port() {
    let data = ConfigData {
        frontend_port: 7777,
        backends: vec![Backend {
            name: "c6-cp-a".into(),
            address: "fc00:f853:ccd:e793::3".into(),
            weight: 100,
        }],
        ipv6: true,
    };
    golden("ipv6-port-7777.cfg", &render_config(&data, None).unwrap());
}

#[test]
fn default_config_without_backends_and_port_zero() {
    let data = ConfigData {
        frontend_port: 0,
        backends: Vec::new(),
        ipv6: false,
    };
    let rendered = render_config(&data, None).unwrap();
    assert!(rendered.contains("  bind *:6443\n"));
    golden("no-backends.cfg", &rendered);
}

/// A user template written for CAPD's Go templates renders the same here.
const CAPD_STYLE_TEMPLATE: &str = r#"global
  maxconn 5000
frontend control-plane
  bind *:{{ .FrontendControlPlanePort }}
  {{ if .IPv6 -}}
  bind :::{{ .FrontendControlPlanePort }};
  {{- end }}
  default_backend kube-apiservers
backend kube-apiservers
  option httpchk GET /healthz
  {{- /* one line per control plane */ -}}
  {{range $server, $backend := .BackendServers}}
  server {{ $server }} {{ JoinHostPort $backend.Address $.BackendControlPlanePort }} weight {{ $backend.Weight }} check check-ssl verify none resolve-prefer {{ if $.IPv6 -}} ipv6 {{- else -}} ipv4 {{- end }}
  {{- end}}
"#;

#[test]
fn capd_style_user_template() {
    let data = ConfigData {
        frontend_port: 6443,
        backends: two_backends(),
        ipv6: false,
    };
    golden(
        "user-template.cfg",
        &render_config(&data, Some(CAPD_STYLE_TEMPLATE)).unwrap(),
    );
}

fn render(src: &str, data: &Value) -> String {
    Template::parse(src).unwrap().render(data).unwrap()
}

fn sample() -> Value {
    ConfigData {
        frontend_port: 6443,
        backends: two_backends(),
        ipv6: true,
    }
    .to_value()
}

#[test]
fn template_language_basics() {
    let data = sample();
    assert_eq!(render("a {{- \" b \" -}} c", &data), "a b c");
    assert_eq!(
        render(
            "{{ if .IPv6 }}6{{ else if true }}x{{ else }}4{{ end }}",
            &data
        ),
        "6"
    );
    assert_eq!(
        render(
            "{{ if not .IPv6 }}6{{ else if eq .FrontendControlPlanePort \"6443\" }}p{{ end }}",
            &data
        ),
        "p"
    );
    assert_eq!(
        render(
            "{{ range $n, $b := .BackendServers }}{{ $n }}={{ $b.Weight }};{{ end }}",
            &data
        ),
        "c1-cp-a=100;c1-cp-b=0;"
    );
    assert_eq!(
        render("{{ range .BackendServers }}{{ .Address }} {{ end }}", &data),
        "172.18.0.3 172.18.0.4 "
    );
    assert_eq!(
        render(
            "{{ range $b := .Missing }}{{ end }}",
            &Value::Map([("Missing".to_string(), Value::List(vec![]))].into())
        ),
        ""
    );
    assert_eq!(
        render(
            "{{ range .BackendServers }}x{{ else }}none{{ end }}",
            &ConfigData::default().to_value()
        ),
        "none"
    );
    assert_eq!(
        render(
            "{{ JoinHostPort \"fc00::1\" $.BackendControlPlanePort }}",
            &data
        ),
        "[fc00::1]:6443"
    );
    assert_eq!(
        render(
            "{{ len .BackendServers }} {{ and .IPv6 (eq 1 1) }} {{ or false 0 }}",
            &data
        ),
        "2 true false"
    );
    assert_eq!(
        render("{{/* comment */}}x{{- /* trimmed */ -}} y", &data),
        "xy"
    );
    assert_eq!(render("{{ `raw {{ }}` }}", &data), "raw {{ }}");
}

#[test]
fn invalid_templates_are_clear_errors() {
    let cases = [
        ("a\n{{ .X", "parse template at line 2: unclosed action"),
        (
            "{{ if .IPv6 }}x",
            "parse template at line 1: missing {{ end }} for {{ if }}",
        ),
        (
            "x\n\n{{ end }}",
            "parse template at line 3: unexpected {{ end }}",
        ),
        (
            "{{ printf \"%d\" 1 }}",
            "parse template at line 1: unknown function \"printf\"",
        ),
        (
            "{{ .A | len }}",
            "parse template at line 1: pipelines (|) are not supported",
        ),
        (
            "{{ with .A }}{{ end }}",
            "parse template at line 1: \"with\" is not supported here",
        ),
        (
            "{{ $x := 1 }}",
            "parse template at line 1: variable assignment is only supported in range",
        ),
        ("{{ \"open }}", "parse template at line 1: unclosed action"),
        ("{{ }}", "parse template at line 1: empty action"),
    ];
    for (src, want) in cases {
        let err = Template::parse(src).unwrap_err();
        assert_eq!(err.to_string(), want, "{src:?}");
        assert_eq!(err.category(), "template_parse");
    }
    let data = sample();
    let render_cases = [
        (
            "\n{{ .Nope }}",
            "render template at line 2: no field \"Nope\"",
        ),
        (
            "{{ .BackendServers }}",
            "render template at line 1: cannot print a map",
        ),
        (
            "{{ $undefined }}",
            "render template at line 1: undefined variable $undefined",
        ),
        (
            "{{ range .IPv6 }}{{ end }}",
            "render template at line 1: cannot range over a bool",
        ),
        (
            "{{ JoinHostPort .IPv6 }}",
            "render template at line 1: JoinHostPort takes 2 arguments, got 1",
        ),
    ];
    for (src, want) in render_cases {
        let err = Template::parse(src).unwrap().render(&data).unwrap_err();
        assert_eq!(err.to_string(), want, "{src:?}");
    }
    let err = render_config(&ConfigData::default(), Some("{{ if }}")).unwrap_err();
    assert_eq!(
        LoadBalancerError::Template(err).to_string(),
        "render haproxy config"
    );
}

#[test]
fn image_defaults_and_overrides() {
    assert_eq!(image(None, None), "kindest/haproxy:v20230606-42a2262b");
    assert_eq!(
        image(Some(""), Some(" ")),
        "kindest/haproxy:v20230606-42a2262b"
    );
    assert_eq!(
        image(Some("registry.local/mirror/"), Some("v1")),
        "registry.local/mirror/haproxy:v1"
    );
}

#[test]
fn container_spec_publishes_the_frontend_port() {
    let mut spec = LoadBalancerSpec::new("c1", "kindest/haproxy:v1", "kind");
    let c = spec.container_spec();
    assert_eq!(c.name, "c1-lb");
    assert_eq!(
        c.labels[crate::docker::node::ROLE_LABEL],
        "external-load-balancer"
    );
    assert_eq!(c.labels[crate::docker::node::CLUSTER_LABEL], "c1");
    assert_eq!(
        c.entrypoint.unwrap(),
        vec![
            "haproxy",
            "-W",
            "-db",
            "-f",
            "/usr/local/etc/haproxy/haproxy.cfg"
        ]
    );
    let ports: Vec<(u16, &str)> = c
        .ports
        .iter()
        .map(|p| (p.container_port, p.host_ip.as_str()))
        .collect();
    assert_eq!(ports, vec![(6443, "127.0.0.1"), (8404, "127.0.0.1")]);
    assert!(c.privileged && !c.private_cgroupns);
    assert_eq!(
        c.restart,
        crate::docker::types::RestartPolicy::OnFailure { max_retries: 1 }
    );

    spec.frontend_port = 7777;
    spec.publish_address = "0.0.0.0".into();
    spec.ip_family = IpFamily::V6;
    let c = spec.container_spec();
    assert_eq!(
        c.ports[0].container_port, 7777,
        "published port must reach haproxy's frontend"
    );
    let published: Vec<u16> = c.ports.iter().map(|p| p.container_port).collect();
    assert_eq!(
        published,
        [7777, 6443, 8404],
        "6443/tcp stays published for kind get kubeconfig"
    );
    assert!(c.ports.iter().all(|p| p.host_ip == "0.0.0.0"));
    assert_eq!(c.sysctls["net.ipv6.conf.all.disable_ipv6"], "0");
}

#[test]
fn load_balancer_ip_follows_the_family() {
    let info = ContainerInfo {
        networks: [(
            "kind".to_string(),
            EndpointAddresses {
                ipv4: Some("172.18.0.2".parse().unwrap()),
                ipv6: Some("fc00::2".parse().unwrap()),
            },
        )]
        .into(),
        ..Default::default()
    };
    assert_eq!(
        load_balancer_ip(&info, "kind", IpFamily::V4)
            .unwrap()
            .to_string(),
        "172.18.0.2"
    );
    assert_eq!(
        load_balancer_ip(&info, "kind", IpFamily::Dual)
            .unwrap()
            .to_string(),
        "172.18.0.2"
    );
    assert_eq!(
        load_balancer_ip(&info, "kind", IpFamily::V6)
            .unwrap()
            .to_string(),
        "fc00::2"
    );
    assert!(load_balancer_ip(&info, "other", IpFamily::V4).is_none());
}

async fn running_lb() -> FakeRuntime {
    let fake = FakeRuntime::new();
    fake.add_image("kindest/haproxy:v1");
    let net = NetworkSpec {
        name: "kind".into(),
        driver: "bridge".into(),
        ..Default::default()
    };
    fake.create_network(&net).await.unwrap();
    create_load_balancer(
        &fake,
        &LoadBalancerSpec::new("c1", "kindest/haproxy:v1", "kind"),
    )
    .await
    .unwrap();
    fake
}

fn sighups(fake: &FakeRuntime) -> usize {
    fake.calls()
        .iter()
        .filter(|c| matches!(c, Call::KillContainer(n, s) if n == "c1-lb" && s == "SIGHUP"))
        .count()
}

#[tokio::test]
async fn apply_writes_validates_and_reloads_once() {
    let fake = running_lb().await;
    assert_eq!(
        find_load_balancer(&fake, "c1").await.unwrap().unwrap().name,
        "c1-lb"
    );
    let outcome = apply_config(&fake, "c1-lb", "config v1\n").await.unwrap();
    assert_eq!(outcome, ApplyOutcome::Reloaded);
    assert_eq!(fake.file("c1-lb", CONFIG_PATH).unwrap(), b"config v1\n");
    let argv: Vec<Vec<String>> = fake.execs("c1-lb").into_iter().map(|r| r.argv).collect();
    assert!(argv.contains(&vec![
        "haproxy".into(),
        "-c".into(),
        "-f".into(),
        "/usr/local/etc/haproxy/haproxy.cfg.new".into()
    ]));
    assert_eq!(sighups(&fake), 1);

    assert_eq!(
        apply_config(&fake, "c1-lb", "config v1\n").await.unwrap(),
        ApplyOutcome::Unchanged
    );
    assert_eq!(
        sighups(&fake),
        1,
        "an unchanged config must not reload haproxy"
    );
}

#[tokio::test]
async fn invalid_config_keeps_the_running_one() {
    let fake = running_lb().await;
    apply_config(&fake, "c1-lb", "good\n").await.unwrap();
    fake.on_exec(|_, r| {
        (r.argv[0] == "haproxy").then(|| ExecOutput {
            stdout: Vec::new(),
            stderr: b"[ALERT] config : parsing [haproxy.cfg.new:1] : unknown keyword 'bad'"
                .to_vec(),
            exit_code: 1,
        })
    });
    let err = apply_config(&fake, "c1-lb", "bad\n").await.unwrap_err();
    assert_eq!(err.category(), "invalid_config");
    assert!(err.to_string().contains("unknown keyword 'bad'"));
    assert_eq!(fake.file("c1-lb", CONFIG_PATH).unwrap(), b"good\n");
    assert_eq!(sighups(&fake), 1);
}

#[tokio::test]
async fn image_without_haproxy_applies_unvalidated() {
    let fake = running_lb().await;
    fake.on_exec(|_, r| {
        (r.argv[0] == "haproxy").then(|| ExecOutput {
            exit_code: 127,
            ..Default::default()
        })
    });
    assert_eq!(
        apply_config(&fake, "c1-lb", "cfg\n").await.unwrap(),
        ApplyOutcome::ReloadedUnvalidated
    );
    assert_eq!(sighups(&fake), 1);
}

#[tokio::test]
async fn read_back_mismatch_restores_the_previous_config() {
    let fake = running_lb().await;
    apply_config(&fake, "c1-lb", "old\n").await.unwrap();
    let reads = Arc::new(AtomicUsize::new(0));
    let counter = reads.clone();
    fake.on_exec(move |_, r| {
        let is_read = r.argv == ["cp", CONFIG_PATH, "/dev/stdout"];
        // The first read (the previous config) is real; the read-back after writing is corrupted.
        (is_read && counter.fetch_add(1, Ordering::SeqCst) == 1).then(|| ExecOutput {
            stdout: b"trunc".to_vec(),
            ..Default::default()
        })
    });
    let err = apply_config(&fake, "c1-lb", "new\n").await.unwrap_err();
    assert_eq!(err.category(), "config_mismatch");
    assert_eq!(fake.file("c1-lb", CONFIG_PATH).unwrap(), b"old\n");
    assert_eq!(sighups(&fake), 1, "a mismatching config must not be loaded");
}

#[tokio::test]
async fn stopped_load_balancer_is_reported() {
    let fake = running_lb().await;
    fake.stop_container("c1-lb");
    let err = apply_config(&fake, "c1-lb", "cfg\n").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "find load balancer container c1-lb: not found or not running"
    );
}

proptest::proptest! {
    #![proptest_config(crate::fuzz::config(256))]

    /// Any text parses or fails with an error; rendering a parsed template never panics.
    #[test]
    fn fuzz_templates(src in "([{}$.a-zA-Z \"`|()\\-]|\\{\\{|\\}\\}|if |end|range |else|:=|,|\n){0,40}") {
        if let Ok(t) = Template::parse(&src) {
            let _ = t.render(&sample());
        }
    }
}

#[tokio::test]
async fn delete_is_idempotent() {
    let fake = running_lb().await;
    delete_load_balancer(&fake, "c1").await.unwrap();
    delete_load_balancer(&fake, "c1").await.unwrap();
    assert!(find_load_balancer(&fake, "c1").await.unwrap().is_none());
}
