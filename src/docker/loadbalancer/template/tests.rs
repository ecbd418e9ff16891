//! Templates render what Go's `text/template` renders (expected outputs written by
//! `hack/haproxy-golden.sh`), and what Go refuses, or what runs past a limit, is an error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::docker::loadbalancer::{Backend, ConfigData, DEFAULT_TEMPLATE, render_config};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/docker/testdata/haproxy")
}

/// The data sets of `data.json`, read as CAPD's `ConfigData` fields.
fn data_sets() -> BTreeMap<String, ConfigData> {
    let text = std::fs::read_to_string(testdata().join("data.json")).unwrap();
    let sets: BTreeMap<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
    sets.into_iter()
        .map(|(name, set)| {
            assert_eq!(set["BackendControlPlanePort"], "6443", "{name}");
            let backends = set["BackendServers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(server, b)| Backend {
                    name: server.clone(),
                    address: b["Address"].as_str().unwrap().to_string(),
                    weight: u32::try_from(b["Weight"].as_u64().unwrap()).unwrap(),
                })
                .collect();
            let data = ConfigData {
                frontend_port: set["FrontendControlPlanePort"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
                backends,
                ipv6: set["IPv6"].as_bool().unwrap(),
            };
            (name, data)
        })
        .collect()
}

/// Every template of the suite: the default one and the user templates, by file stem.
fn templates() -> Vec<(String, String)> {
    let mut all = vec![("default.cfg".to_string(), DEFAULT_TEMPLATE.to_string())];
    let mut files: Vec<_> = std::fs::read_dir(testdata().join("templates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        all.push((stem, std::fs::read_to_string(&path).unwrap()));
    }
    all
}

#[test]
fn every_template_renders_byte_for_byte_what_go_renders() {
    let sets = data_sets();
    let mut compared = 0;
    for (name, src) in templates() {
        for (set, data) in &sets {
            let expected = testdata().join("expected").join(&name);
            let rendered = render_config(data, Some(&src));
            match std::fs::read_to_string(expected.join(format!("{set}.cfg"))) {
                Ok(want) => assert_eq!(
                    rendered.unwrap_or_else(|e| panic!("{name} with {set}: {e:?}")),
                    want,
                    "{name} with {set} differs from Go (hack/haproxy-golden.sh)"
                ),
                Err(_) => {
                    let go_error =
                        std::fs::read_to_string(expected.join(format!("{set}.err"))).unwrap();
                    assert!(
                        rendered.is_err(),
                        "{name} with {set}: Go refuses it ({go_error}) but it rendered"
                    );
                }
            }
            compared += 1;
        }
    }
    assert_eq!(compared, templates().len() * sets.len());
    // The suite exercises what the old subset refused.
    let suite: String = templates().into_iter().map(|(_, src)| src).collect();
    for construct in [
        "| printf",
        "printf \"",
        "{{- with",
        "else with",
        "index ",
        "range $i, $e",
        "define \"",
        "template \"",
        "block \"",
        "continue",
        "break",
        "$n = 1",
    ] {
        assert!(suite.contains(construct), "no template uses {construct:?}");
    }
}

#[test]
fn the_default_template_is_what_go_renders_without_a_user_template() {
    for (set, data) in data_sets() {
        let want = std::fs::read_to_string(
            testdata()
                .join("expected/default.cfg")
                .join(format!("{set}.cfg")),
        )
        .unwrap();
        assert_eq!(render_config(&data, None).unwrap(), want, "{set}");
    }
}

/// The error chain as the DockerCluster's condition shows it.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

fn render_err(src: &str) -> TemplateError {
    let data = ConfigData::default();
    match render_config(&data, Some(src)) {
        Ok(out) => panic!("{src:?} rendered {out:?}"),
        Err(e) => e,
    }
}

#[test]
fn refused_templates_say_where_and_why() {
    let cases = [
        (
            "a\n{{ .X",
            "template_parse",
            "parse template: template: loadbalancer-config:2:",
        ),
        (
            "x\n{{ .FrontendControlPlanePort | upper }}",
            "template_parse",
            "parse template: template: loadbalancer-config:2:32: function \"upper\" not defined",
        ),
        (
            "a\n{{ if .IPv6 }}x",
            "template_parse",
            "loadbalancer-config:2:1: unexpected EOF",
        ),
        (
            "{{ \"{{ if\" }}{{/* {{ range }} */}}{{ end }}",
            "template_parse",
            "loadbalancer-config:1:35: unexpected {{end}}",
        ),
        (
            "{{ .ClusterName }}",
            "template_render",
            "render template: map has no entry for key: ClusterName",
        ),
        (
            "{{ JoinHostPort \"10.0.0.1\" 6443 }}",
            "template_render",
            "JoinHostPort: wrong type for value; expected string; got int",
        ),
        (
            "{{ JoinHostPort .IPv6 }}",
            "template_render",
            "wrong number of args for JoinHostPort: want 2 got 1",
        ),
    ];
    for (src, category, want) in cases {
        let err = render_err(src);
        assert_eq!(err.category(), category, "{src:?}");
        let text = chain(&crate::docker::loadbalancer::LoadBalancerError::Template(
            err,
        ));
        assert!(
            text.starts_with("render haproxy config: ") && text.contains(want),
            "{src:?}: {text}"
        );
    }
}

#[test]
fn templates_that_call_themselves_or_fan_out_are_refused() {
    let endless = r#"{{ define "a" }}{{ if . }}{{ template "b" . }}{{ end }}{{ end }}
{{- define "b" }}{{ range . }}{{ template "a" . }}{{ end }}{{ end }}{{ template "a" . }}"#;
    let err = render_err(endless);
    assert_eq!(err.category(), "template_limit");
    assert_eq!(
        err.to_string(),
        r#"render template: template "a" calls itself (loadbalancer-config -> a -> b -> a)"#
    );
    // Seven levels of templates that each call the next twice: 255 renders, and no output
    // that the output limit would catch.
    let mut src = String::from(r#"{{ define "t0" }}{{ end }}"#);
    for level in 1..=7 {
        let below = level - 1;
        src.push_str(&format!(
            r#"{{{{ define "t{level}" }}}}{{{{ template "t{below}" }}}}{{{{ template "t{below}" }}}}{{{{ end }}}}"#
        ));
    }
    let fan_out = format!(r#"{src}{{{{ template "t7" }}}}"#);
    assert_eq!(
        render_err(&fan_out).to_string(),
        "render template: template calls expand to 256 renders, more than 100"
    );
    let fewer = format!(r#"{src}{{{{ template "t5" }}}}"#);
    assert_eq!(
        render_config(&ConfigData::default(), Some(&fewer)).unwrap(),
        ""
    );
    // Near the worst that is accepted: each of 9801 loop iterations expands to 64 renders.
    let worst = Template::parse(&format!(
        r#"{src}{{{{ range .L }}}}{{{{ range $.L }}}}{{{{ template "t5" }}}}{{{{ end }}}}{{{{ end }}}}"#
    ))
    .unwrap();
    assert_eq!(worst.render(&list(99)).unwrap(), "");
}

#[test]
fn nesting_is_bounded_within_a_worker_thread_stack() {
    // Blocks nested deeper than 100 in the text are refused by the parser.
    let deep = format!("{}x{}", "{{ with . }}".repeat(101), "{{ end }}".repeat(101));
    let err = render_err(&deep);
    assert_eq!(err.category(), "template_parse");
    assert!(
        chain(&err).contains("template nesting depth exceeded 100"),
        "{err:?}"
    );
    // A chain of 90 templates, each calling the next inside two blocks, runs 270 deep. Tokio's
    // worker threads have 2 MiB stacks: the depth limit must stop it well inside one.
    let mut chained = String::from(r#"{{ define "t0" }}x{{ end }}"#);
    for level in 1..=90 {
        let below = level - 1;
        chained.push_str(&format!(
            r#"{{{{ define "t{level}" }}}}{{{{ with . }}}}{{{{ if true }}}}{{{{ template "t{below}" . }}}}{{{{ end }}}}{{{{ end }}}}{{{{ end }}}}"#
        ));
    }
    chained.push_str(r#"{{ template "t90" . }}"#);
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || render_config(&ConfigData::default(), Some(&chained)).unwrap_err())
        .unwrap();
    let err = handle.join().unwrap();
    assert_eq!(err.category(), "template_limit");
    assert_eq!(
        err.to_string(),
        "render template: nesting deeper than 200 blocks or template calls"
    );
}

fn list(n: i64) -> Value {
    let items: Vec<Value> = (0..n).map(Value::Int).collect();
    Value::Map(Arc::new(BTreeMap::from([(
        Arc::from("L"),
        Value::List(items.into()),
    )])))
}

#[test]
fn output_and_loops_are_bounded() {
    let text = "x".repeat(500);
    let wide = Template::parse(&format!(
        "{{{{ range .L }}}}{{{{ range $.L }}}}{text}{{{{ end }}}}{{{{ end }}}}"
    ))
    .unwrap();
    // 50 x 50 x 500 bytes: 1.25 MB.
    let err = wide.render(&list(50)).unwrap_err();
    assert_eq!(err.category(), "template_limit");
    assert_eq!(
        err.to_string(),
        "render template: output exceeds 1048576 bytes"
    );
    assert_eq!(wide.render(&list(40)).unwrap().len(), 40 * 40 * 500);

    let nested = Template::parse("{{ range .L }}{{ range $.L }}{{ end }}{{ end }}").unwrap();
    assert_eq!(
        nested.render(&list(101)).unwrap_err().to_string(),
        "render template: more than 10000 range iterations"
    );
    assert_eq!(nested.render(&list(99)).unwrap(), "");
}

#[test]
fn other_dialects_get_their_functions_and_missing_keys() {
    let mut functions = FuncMap::new();
    let shout: gotmpl::ValueFunc = Arc::new(|args: &[Value]| {
        Ok(Value::from(
            args.first()
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_uppercase(),
        ))
    });
    functions.insert("shout".into(), shout);
    let t = Template::parse_with(
        "{{ .a | shout }} {{ .missing }}",
        functions,
        MissingKey::Invalid,
    )
    .unwrap();
    let data = Value::Map(Arc::new(BTreeMap::from([(
        Arc::from("a"),
        Value::from("hi"),
    )])));
    assert_eq!(t.render(&data).unwrap(), "HI <no value>");
    // The haproxy dialect has no such function.
    assert_eq!(
        Template::parse("{{ shout 1 }}").unwrap_err().category(),
        "template_parse"
    );
}

proptest::proptest! {
    #![proptest_config(crate::fuzz::config(256))]

    /// Any text parses or fails with an error; rendering a parsed template never panics.
    #[test]
    fn fuzz_templates(src in "([{}$.a-zA-Z \"`|()\\-]|\\{\\{|\\}\\}|if |end|range |with |define |template |else|:=|,|\n){0,40}") {
        if let Ok(t) = Template::parse(&src) {
            let _ = t.render(&ConfigData::default().to_value());
        }
    }
}

/// Where CAPD's typed data shows through: its backends are Go structs, ours are maps. Printing a
/// whole backend, or indexing a server name that does not exist, gives other text than Go. No
/// haproxy directive takes such a value.
#[test]
fn known_differences_from_go() {
    let data = ConfigData {
        frontend_port: 6443,
        backends: vec![Backend {
            name: "a".into(),
            address: "10.0.0.1".into(),
            weight: 100,
        }],
        ipv6: false,
    };
    let r = |src: &str| render_config(&data, Some(src)).unwrap();
    // Go: "{10.0.0.1 100}".
    assert_eq!(
        r("{{ range .BackendServers }}{{ . }}{{ end }}"),
        "map[Address:10.0.0.1 Weight:100]"
    );
    // Go: the zero struct, which is true and has an empty Address.
    assert_eq!(
        r(r#"{{ with index .BackendServers "b" }}zero{{ else }}missing{{ end }}"#),
        "missing"
    );
}
