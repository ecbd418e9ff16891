//! ClusterClass inline patches (`enabledIf`, `valueFrom.template`) rendered as Cluster API does:
//! Go's `text/template` (the provider's own implementation, the one its haproxy templates use)
//! over the variables as JSON, a missing key printing `<no value>`, plus the two sprig functions
//! the patches call: `replace` (`replace OLD NEW STRING`) and `semverCompare` (one comparison:
//! `<`, `<=`, `>`, `>=`, `=`, `!=`). Any other function is an error naming it, so a patch that
//! cannot be rendered fails the test instead of passing unrendered.

use std::collections::BTreeMap;
use std::sync::Arc;

use capd::docker::loadbalancer::template::{FuncMap, MissingKey, Template, Value};
use serde_json::Value as Json;

/// Renders `template` with `data` (the variables and `builtin`), as Cluster API would.
pub fn render(template: &str, data: &Json) -> Result<String, String> {
    Template::parse_with(template, sprig(), MissingKey::Invalid)
        .and_then(|t| t.render(&value(data)))
        .map_err(|e| chain(&e))
}

fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text = format!("{text}: {e}");
        source = e.source();
    }
    text
}

/// JSON as template data: objects are maps, numbers integers when they are.
fn value(json: &Json) -> Value {
    match json {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => n
            .as_i64()
            .map(Value::Int)
            .or_else(|| n.as_u64().map(Value::Uint))
            .unwrap_or_else(|| Value::Float(n.as_f64().unwrap_or_default())),
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => Value::List(items.iter().map(value).collect()),
        Json::Object(map) => Value::Map(Arc::new(
            map.iter()
                .map(|(k, v)| (Arc::from(k.as_str()), value(v)))
                .collect::<BTreeMap<_, _>>(),
        )),
    }
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

fn fail(message: String) -> gotmpl::TemplateError {
    gotmpl::TemplateError::Exec(message)
}

/// sprig's `replace` and `semverCompare`.
fn sprig() -> FuncMap {
    let mut functions = FuncMap::new();
    functions.insert(
        "replace".into(),
        Arc::new(|args: &[Value]| match args {
            [old, new, s] => Ok(Value::from(text(s).replace(&text(old), &text(new)))),
            _ => Err(fail(format!(
                "replace takes 3 arguments, got {}",
                args.len()
            ))),
        }),
    );
    functions.insert(
        "semverCompare".into(),
        Arc::new(|args: &[Value]| match args {
            [constraint, version] => semver_compare(&text(constraint), &text(version))
                .map(Value::Bool)
                .map_err(fail),
            _ => Err(fail(format!(
                "semverCompare takes 2 arguments, got {}",
                args.len()
            ))),
        }),
    );
    functions
}

fn version(text: &str) -> Result<(u64, u64, u64), String> {
    let core = text.trim().trim_start_matches('v');
    let core = core.split(['+', '-']).next().unwrap_or("");
    let mut parts = core.split('.').map(str::parse::<u64>);
    let mut next = || {
        parts
            .next()
            .unwrap_or(Ok(0))
            .map_err(|e| format!("{text:?}: {e}"))
    };
    Ok((next()?, next()?, next()?))
}

fn semver_compare(constraint: &str, v: &str) -> Result<bool, String> {
    let constraint = constraint.trim();
    let (op, wanted) = ["<=", ">=", "!=", "<", ">", "="]
        .into_iter()
        .find_map(|op| constraint.strip_prefix(op).map(|rest| (op, rest)))
        .unwrap_or(("=", constraint));
    let (have, wanted) = (version(v)?, version(wanted)?);
    Ok(match op {
        "<=" => have <= wanted,
        ">=" => have >= wanted,
        "!=" => have != wanted,
        "<" => have < wanted,
        ">" => have > wanted,
        _ => have == wanted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_forms_clusterclass_patches_use() {
        let data = json!({"repo": "", "pss": {"enabled": true, "enforce": "baseline"},
            "builtin": {"controlPlane": {"version": "v1.34.0+k3s1"}}});
        let r = |t: &str| render(t, &data).unwrap();
        assert_eq!(r(r#"{{ ne .repo "" }}"#), "false");
        assert_eq!(r("{{ .pss.enabled }}"), "true");
        assert_eq!(r("level: {{ .pss.enforce }}"), "level: baseline");
        assert_eq!(
            r(r#"kindest/node:{{ .builtin.controlPlane.version | replace "+" "_" }}"#),
            "kindest/node:v1.34.0_k3s1"
        );
        assert_eq!(
            r(r#"v1{{ if semverCompare "< v1.25" .builtin.controlPlane.version }}beta1{{ end }}"#),
            "v1"
        );
        assert_eq!(
            r(
                r#"{{ if semverCompare ">= v1.34" .builtin.controlPlane.version }}new{{ else }}old{{ end }}"#
            ),
            "new"
        );
        assert!(
            render("{{ .a | upper }}", &data)
                .unwrap_err()
                .contains("upper")
        );
        assert!(render("{{ if .a }}x", &data).is_err());
    }
}
