//! The Go template subset ClusterClass inline patches use (`enabledIf`, `valueFrom.template`):
//! text, `{{ .field.path }}`, literals, pipes, `if`/`else`/`end`, and the functions `eq`, `ne`,
//! `not`, `replace` (sprig's `replace OLD NEW STRING`) and `semverCompare` (one comparison:
//! `<`, `<=`, `>`, `>=`, `=`, `!=`). Anything else is an error naming what was not understood, so a
//! patch this module cannot render fails the test instead of passing unrendered.

use serde_json::Value;

/// Renders `template` with `data` (the variables and `builtin`), as Cluster API would.
pub fn render(template: &str, data: &Value) -> Result<String, String> {
    let mut out = String::new();
    // One entry per open `if`: whether its branch is being written.
    let mut open: Vec<(bool, bool)> = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let writing = open.iter().all(|(on, _)| *on);
        if writing {
            out.push_str(&rest[..start]);
        }
        let end = rest[start..]
            .find("}}")
            .ok_or_else(|| format!("unclosed action in {template:?}"))?;
        let action = rest[start + 2..start + end].trim_matches('-').trim();
        rest = &rest[start + end + 2..];
        if let Some(condition) = action.strip_prefix("if ") {
            let on = writing && truthy(&pipeline(condition, data)?);
            open.push((on, writing));
        } else if action == "else" {
            let (on, parent) = open.pop().ok_or("else without if")?;
            open.push((parent && !on, parent));
        } else if action == "end" {
            open.pop().ok_or("end without if")?;
        } else if writing {
            out.push_str(&show(&pipeline(action, data)?));
        }
    }
    if !open.is_empty() {
        return Err(format!("if without end in {template:?}"));
    }
    out.push_str(rest);
    Ok(out)
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<no value>".into(),
        other => other.to_string(),
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Splits an action into words, keeping quoted strings whole.
fn words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut word = String::from('"');
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => word.push(chars.next().ok_or("dangling escape")?),
                    Some(c) => word.push(c),
                    None => return Err(format!("unterminated string in {text:?}")),
                }
            }
            words.push(word);
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
            words.push(word);
        }
    }
    Ok(words)
}

fn pipeline(text: &str, data: &Value) -> Result<Value, String> {
    let all = words(text)?;
    let mut value: Option<Value> = None;
    for command in all.split(|w| w == "|") {
        value = Some(call(command, value, data)?);
    }
    value.ok_or_else(|| format!("empty action {text:?}"))
}

fn operand(word: &str, data: &Value) -> Result<Value, String> {
    if let Some(s) = word.strip_prefix('"') {
        return Ok(Value::String(s.to_string()));
    }
    if let Some(path) = word.strip_prefix('.') {
        let pointer = format!("/{}", path.replace('.', "/"));
        return Ok(data.pointer(&pointer).cloned().unwrap_or(Value::Null));
    }
    match word {
        "true" => Ok(Value::Bool(true)),
        "false" => Ok(Value::Bool(false)),
        _ => word
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("operand {word:?} is not understood")),
    }
}

fn call(command: &[String], piped: Option<Value>, data: &Value) -> Result<Value, String> {
    let (name, args) = command.split_first().ok_or("empty command")?;
    if name.starts_with('.') || name.starts_with('"') || (args.is_empty() && piped.is_none()) {
        return operand(name, data);
    }
    let mut args: Vec<Value> = args
        .iter()
        .map(|a| operand(a, data))
        .collect::<Result<_, _>>()?;
    args.extend(piped);
    let text = |v: &Value| v.as_str().map(str::to_string).unwrap_or_else(|| show(v));
    match (name.as_str(), args.as_slice()) {
        ("eq", [a, b]) => Ok(Value::Bool(a == b)),
        ("ne", [a, b]) => Ok(Value::Bool(a != b)),
        ("not", [a]) => Ok(Value::Bool(!truthy(a))),
        ("replace", [old, new, s]) => Ok(Value::String(text(s).replace(&text(old), &text(new)))),
        ("semverCompare", [constraint, version]) => {
            semver_compare(&text(constraint), &text(version)).map(Value::Bool)
        }
        _ => Err(format!(
            "function {name} with {} argument(s) is not understood",
            args.len()
        )),
    }
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
