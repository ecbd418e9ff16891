//! The small JSONPath subset CRD printer columns use: `.a.b`, `['a.b']`, `[0]`, `[*]`,
//! `[?(@.k=="v")]`.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter(Vec<String>, Value),
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let start = i + 1;
                let mut j = start;
                while j < chars.len() && chars[j] != '.' && chars[j] != '[' {
                    j += 1;
                }
                let name: String = chars[start..j].iter().collect();
                if !name.is_empty() {
                    steps.push(Step::Field(name));
                }
                i = j;
            }
            '[' => {
                let close = bracket_end(&chars, i)?;
                let inner: String = chars[i + 1..close].iter().collect();
                steps.push(parse_bracket(inner.trim())?);
                i = close + 1;
            }
            '$' | '@' => i += 1,
            _ => return None,
        }
    }
    Some(steps)
}

fn bracket_end(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    for (k, c) in chars.iter().enumerate().skip(open) {
        match (quote, c) {
            (Some(q), c) if *c == q && chars.get(k.wrapping_sub(1)) != Some(&'\\') => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(*c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    let inner = s
        .strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| s.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
        .unwrap_or(s);
    inner.replace("\\.", ".")
}

fn parse_bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(i) = inner.parse() {
        return Some(Step::Index(i));
    }
    if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
        let (left, right) = filter.split_once("==")?;
        let field = left.trim().strip_prefix("@.")?;
        let right = right.trim();
        let value = if right.starts_with('"') || right.starts_with('\'') {
            Value::String(unquote(right))
        } else {
            serde_json::from_str(right).ok()?
        };
        return Some(Step::Filter(
            field.split('.').map(String::from).collect(),
            value,
        ));
    }
    Some(Step::Field(unquote(inner)))
}

/// Evaluates a printer-column JSONPath; no match gives an empty list.
pub fn find(object: &Value, path: &str) -> Vec<Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut current = vec![object.clone()];
    for step in steps {
        let mut next = Vec::new();
        for v in current {
            match &step {
                Step::Field(f) => {
                    if let Some(c) = v.get(f) {
                        next.push(c.clone());
                    }
                }
                Step::Index(i) => {
                    if let Some(c) = v.get(*i) {
                        next.push(c.clone());
                    }
                }
                Step::All => match v {
                    Value::Array(items) => next.extend(items),
                    Value::Object(m) => next.extend(m.into_iter().map(|(_, v)| v)),
                    _ => {}
                },
                Step::Filter(field, expected) => {
                    for item in v.as_array().into_iter().flatten() {
                        let mut at = item;
                        for f in field {
                            at = &at[f.as_str()];
                        }
                        if at == expected {
                            next.push(item.clone());
                        }
                    }
                }
            }
        }
        current = next;
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn printer_column_paths_resolve() {
        let o = json!({
            "metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1"}, "ownerReferences": [{"kind": "Machine", "name": "m"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Paused", "status": "False"}]}
        });
        assert_eq!(
            find(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![json!("True")]
        );
        assert_eq!(
            find(&o, ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"),
            vec![json!("c1")]
        );
        assert_eq!(
            find(&o, ".metadata.ownerReferences[?(@.kind==\"Machine\")].name"),
            vec![json!("m")]
        );
        assert!(find(&o, ".spec.missing").is_empty());
    }
}
