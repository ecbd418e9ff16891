//! clusterctl variables: finding `${VAR}` / `${VAR:=default}` references, substituting them the way
//! clusterctl does, and reading the README's variables tables.

use std::collections::BTreeMap;

use super::repo_root;

/// One clusterctl variable reference found in the components text.
#[derive(Debug, PartialEq)]
pub struct Variable {
    pub name: String,
    pub default: Option<String>,
}

/// Finds every clusterctl variable reference; `Err` for a syntax clusterctl users should not meet
/// (bare `$VAR`, `${VAR:-x}`, unterminated braces, lowercase names).
pub fn variables(text: &str) -> Result<Vec<Variable>, String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        let after = &rest[at + 1..];
        if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| format!("unterminated ${{ in {:.40}", after))?;
            let inner = &body[..end];
            let (name, default) = match inner.split_once(":=") {
                Some((name, default)) => (name, Some(default.to_string())),
                None => (inner, None),
            };
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !valid {
                return Err(format!("unsupported variable syntax ${{{inner}}}"));
            }
            found.push(Variable {
                name: name.to_string(),
                default,
            });
            rest = &body[end + 1..];
        } else if after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return Err(format!("bare variable {:.40}: write ${{VAR}}", &rest[at..]));
        } else {
            rest = after;
        }
    }
    Ok(found)
}

/// Replaces every `${VAR}` / `${VAR:=default}` the way clusterctl does, from `values` or the default.
pub fn substitute(text: &str, values: &BTreeMap<&str, &str>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let body = &rest[at + 2..];
        let end = body.find('}').expect("terminated variable");
        let (name, default) = body[..end].split_once(":=").unwrap_or((&body[..end], ""));
        out.push_str(values.get(name).copied().unwrap_or(default));
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The rows `| `NAME` | `default` | ... |` of the README section whose heading contains `heading`.
pub fn readme_table(heading: &str) -> BTreeMap<String, String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("read README.md");
    let mut rows = BTreeMap::new();
    let mut inside = false;
    for line in readme.lines() {
        if line.starts_with('#') {
            inside = line.contains(heading);
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if !inside || cells.len() < 4 {
            continue;
        }
        if let Some(name) = cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
            let default = cells[2].trim_matches('`').to_string();
            rows.insert(name.to_string(), default);
        }
    }
    assert!(
        !rows.is_empty(),
        "README.md has no variables table under a heading with {heading:?}"
    );
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_syntax_check_rejects_what_clusterctl_users_should_not_meet() {
        let ok = variables("a: ${A_1:=x}\nb: ${B}\npattern: ^[a-z]$\nc: $\n").expect("valid");
        assert_eq!(ok.len(), 2);
        assert_eq!(
            ok[0],
            Variable {
                name: "A_1".into(),
                default: Some("x".into())
            }
        );
        for bad in ["a: $HOME", "a: ${lower}", "a: ${A:-x}", "a: ${A"] {
            assert!(variables(bad).is_err(), "{bad} must be rejected");
        }
    }
}
