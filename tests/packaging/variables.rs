//! clusterctl variables of the components file: which ones it uses (through the template tests'
//! clusterctl substitution, [`envsubst`]), held to the spelling clusterctl documents, and the
//! book's variables table.

use std::collections::BTreeMap;

use super::envsubst::{self, Variable};
use super::repo_root;

/// Every clusterctl variable the text uses, first occurrence first; `Err` for what clusterctl
/// cannot render and for a spelling its users should not meet: a bare `$VAR` (clusterctl leaves
/// it as it is), a default written other than `${VAR:=default}`, a name that is not
/// `UPPER_SNAKE_CASE`.
pub fn variables(text: &str) -> Result<Vec<Variable>, String> {
    let found = envsubst::variables(text).map_err(|e| e.to_string())?;
    for v in &found {
        let upper_snake = v
            .name
            .starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
            && v.name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !upper_snake {
            return Err(format!(
                "unsupported variable name {:?}: write UPPER_SNAKE_CASE",
                v.name
            ));
        }
        for other in [":-", "="] {
            if text.contains(&format!("${{{}{other}", v.name)) {
                return Err(format!(
                    "${{{}{other}...}}: write defaults as ${{{}:=default}}",
                    v.name, v.name
                ));
            }
        }
    }
    let unescaped = text.replace("$$", "");
    if let Some(at) = unescaped
        .match_indices('$')
        .map(|(at, _)| at)
        .find(|at| unescaped[at + 1..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
    {
        return Err(format!(
            "bare variable {:.40}: clusterctl substitutes only ${{VAR}}",
            &unescaped[at..]
        ));
    }
    Ok(found)
}

/// The text as clusterctl renders it with `values` (the environment and clusterctl.yaml).
pub fn substitute(text: &str, values: &BTreeMap<&str, &str>) -> String {
    let values: BTreeMap<String, String> = values
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    envsubst::render(text, &values).unwrap_or_else(|e| panic!("clusterctl would not render: {e}"))
}

/// The book's chapter holding the "Components variables" table.
pub const CHAPTER: &str = "docs/src/clusterctl.md";

/// The rows `| `NAME` | `default` | ... |` of the chapter's section whose heading contains `heading`.
pub fn documented_table(heading: &str) -> BTreeMap<String, String> {
    let chapter = std::fs::read_to_string(repo_root().join(CHAPTER))
        .unwrap_or_else(|e| panic!("read {CHAPTER}: {e}"));
    let mut rows = BTreeMap::new();
    let mut inside = false;
    for line in chapter.lines() {
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
        "{CHAPTER} has no variables table under a heading with {heading:?}"
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
        for bad in [
            "a: $HOME",
            "a: ${lower}",
            "a: ${A:-x}",
            "a: ${A=x}",
            "a: ${A",
            "a: ${A^^}",
        ] {
            assert!(variables(bad).is_err(), "{bad} must be rejected");
        }
        assert!(variables("price: $$5, literal: $${A}").unwrap().is_empty());
    }
}
