//! clusterctl's variable substitution (`clusterctl generate cluster`, `clusterctl generate yaml`).
//!
//! clusterctl's simple YAML processor (`cmd/clusterctl/client/yamlprocessor/simple_processor.go`)
//! first rewrites the legacy spellings `${ VAR }`, `${ VAR}` and `${VAR }` to `${VAR}`, then parses
//! the text with drone/envsubst and:
//! - collects every top-level `${...}` expression; the first occurrence of a name decides whether it
//!   has a default (an expression with a non-empty default counts; `${VAR:=}` does not);
//! - fails with `value for variables [A, B] is not set...` when variables without a default have no
//!   value (sorted, every missing variable at once);
//! - replaces `${VAR}` by its value, and `${VAR:=default}` / `${VAR=default}` / `${VAR:-default}` by
//!   the value, or the default when the value is unset or empty. Defaults may nest `${OTHER}`,
//!   which is replaced by its value (empty when unset: nested names are not checked for missing).
//!
//! In plain text `$$` stands for `$` (so `$${VAR}` is the literal `${VAR}`), `\\` for `\` and `\/`
//! for `/`; any other `$` is kept. The other bash forms drone/envsubst knows (`${#VAR}`, `${VAR^^}`,
//! `${VAR/a/b}`, `${VAR:1:2}`, `${VAR:?x}`, ...) are outside what clusterctl documents and are
//! reported as unsupported here. Names are made of letters, digits, `_` and `-`, as drone/envsubst
//! scans them, so `${VAR-default}` is the variable `VAR-default`, not a default.

use std::collections::BTreeMap;
use std::fmt;

/// Why a template could not be rendered.
#[derive(Debug, PartialEq)]
pub enum SubstError {
    /// Variables without a default that have no value, sorted.
    Missing(Vec<String>),
    /// Text that drone/envsubst rejects ("bad substitution"), with the byte offset.
    BadSubstitution { at: usize, near: String },
    /// A bash expression outside clusterctl's documented syntax.
    Unsupported { expression: String },
}

impl fmt::Display for SubstError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubstError::Missing(names) => write!(
                f,
                "value for variables [{}] is not set. Please set the value using os environment \
                 variables or the clusterctl config file",
                names.join(", ")
            ),
            SubstError::BadSubstitution { at, near } => {
                write!(f, "bad substitution at byte {at} near {near:?}")
            }
            SubstError::Unsupported { expression } => write!(
                f,
                "unsupported expression {expression}: clusterctl documents only ${{VAR}} and \
                 ${{VAR:=default}}"
            ),
        }
    }
}

/// One variable reference: its name and, when it has one, its default (nested references shown as
/// `${NAME}`, as `clusterctl generate yaml --list-variables` does).
#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    pub name: String,
    pub default: Option<String>,
}

#[derive(Debug)]
enum Node {
    Text(String),
    Var { name: String, default: Vec<Node> },
}

/// Renders `text` the way `clusterctl generate cluster` does, with `values` as the variables
/// clusterctl knows (environment, clusterctl.yaml and the command-line options).
pub fn render(text: &str, values: &BTreeMap<String, String>) -> Result<String, SubstError> {
    let nodes = parse(&convert_legacy(text))?;
    let mut missing: Vec<String> = variables_of(&nodes)
        .into_iter()
        .filter(|v| v.default.is_none() && !values.contains_key(&v.name))
        .map(|v| v.name)
        .collect();
    if !missing.is_empty() {
        missing.sort();
        return Err(SubstError::Missing(missing));
    }
    let mut out = String::with_capacity(text.len());
    eval(&nodes, values, &mut out);
    Ok(out)
}

/// Every variable of `text`, first occurrence first, each name once.
pub fn variables(text: &str) -> Result<Vec<Variable>, SubstError> {
    Ok(variables_of(&parse(&convert_legacy(text))?))
}

fn variables_of(nodes: &[Node]) -> Vec<Variable> {
    let mut found: Vec<Variable> = Vec::new();
    for node in nodes {
        if let Node::Var { name, default } = node
            && !found.iter().any(|v| &v.name == name)
        {
            found.push(Variable {
                name: name.clone(),
                default: (!default.is_empty()).then(|| show(default)),
            });
        }
    }
    found
}

fn show(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| match n {
            Node::Text(t) => t.clone(),
            Node::Var { name, .. } => format!("${{{name}}}"),
        })
        .collect()
}

fn eval(nodes: &[Node], values: &BTreeMap<String, String>, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Var { name, default } => {
                let value = values.get(name).map(String::as_str).unwrap_or("");
                if value.is_empty() && !default.is_empty() {
                    eval(default, values, out);
                } else {
                    out.push_str(value);
                }
            }
        }
    }
}

/// `${ VAR }`, `${ VAR}`, `${VAR }` → `${VAR}` (clusterctl's legacy-variable rewrite; names made of
/// ASCII letters, digits, `_` and `$`).
fn convert_legacy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let body = &rest[at + 2..];
        let legacy = body.find('}').and_then(|end| {
            let inner = &body[..end];
            let name = inner.trim_matches(|c: char| c.is_ascii_whitespace());
            let spaced = name.len() != inner.len();
            let plain = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
            (spaced && plain).then_some((name, end))
        });
        match legacy {
            Some((name, end)) => {
                out.push_str("${");
                out.push_str(name);
                out.push('}');
                rest = &body[end + 1..];
            }
            None => {
                out.push_str("${");
                rest = body;
            }
        }
    }
    out.push_str(rest);
    out
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

fn parse(text: &str) -> Result<Vec<Node>, SubstError> {
    let mut p = Parser { text, pos: 0 };
    let mut nodes = Vec::new();
    let mut literal = String::new();
    while let Some(c) = p.peek() {
        let rest = p.rest();
        if rest.starts_with("${") {
            if !literal.is_empty() {
                nodes.push(Node::Text(std::mem::take(&mut literal)));
            }
            p.pos += 2;
            nodes.push(p.expression()?);
        } else if rest.starts_with("$$") || rest.starts_with("\\\\") || rest.starts_with("\\/") {
            literal.push_str(&rest[1..2]);
            p.pos += 2;
        } else {
            literal.push(c);
            p.pos += c.len_utf8();
        }
    }
    if !literal.is_empty() {
        nodes.push(Node::Text(literal));
    }
    Ok(nodes)
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bad(&self) -> SubstError {
        SubstError::BadSubstitution {
            at: self.pos,
            near: self.rest().chars().take(30).collect(),
        }
    }

    /// After `${`: a name, then `}` or a default operator and its default.
    fn expression(&mut self) -> Result<Node, SubstError> {
        let start = self.pos - 2;
        let name_len = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(self.rest().len());
        if name_len == 0 {
            return Err(match self.peek() {
                Some('#') => self.unsupported(start),
                _ => self.bad(),
            });
        }
        let name = self.rest()[..name_len].to_string();
        self.pos += name_len;
        let rest = self.rest();
        let operator = ["}", ":=", ":-", "="]
            .into_iter()
            .find(|op| rest.starts_with(op));
        match operator {
            Some("}") => {
                self.pos += 1;
                Ok(Node::Var {
                    name,
                    default: Vec::new(),
                })
            }
            Some(op) => {
                self.pos += op.len();
                let default = self.default_value()?;
                Ok(Node::Var { name, default })
            }
            None if rest.starts_with([':', ',', '^', '/', '#', '%']) => {
                Err(self.unsupported(start))
            }
            None => Err(self.bad()),
        }
    }

    fn unsupported(&self, start: usize) -> SubstError {
        let end = self.text[start..]
            .find('}')
            .map_or(self.text.len(), |e| start + e + 1);
        SubstError::Unsupported {
            expression: self.text[start..end].to_string(),
        }
    }

    /// Text and nested `${...}` up to the closing `}` (no escapes inside a default).
    fn default_value(&mut self) -> Result<Vec<Node>, SubstError> {
        let mut nodes = Vec::new();
        loop {
            let rest = self.rest();
            if rest.starts_with('}') {
                self.pos += 1;
                return Ok(nodes);
            }
            if rest.starts_with("${") {
                self.pos += 2;
                nodes.push(self.expression()?);
                continue;
            }
            let end = match (rest.find('}'), rest.find("${")) {
                (Some(close), Some(open)) => close.min(open),
                (Some(close), None) => close,
                (None, _) => return Err(self.bad()),
            };
            nodes.push(Node::Text(rest[..end].to_string()));
            self.pos += end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn values_defaults_and_empty_values() {
        let v = values(&[("A", "x"), ("EMPTY", "")]);
        assert_eq!(
            render("a: ${A}, b: ${B:=d}, c: ${EMPTY:=d}, e: ${EMPTY}", &v).unwrap(),
            "a: x, b: d, c: d, e: "
        );
        assert_eq!(render("${B=d} ${B:-e}", &v).unwrap(), "d e");
        assert_eq!(
            render("cidr: ${POD_CIDR:=[\"192.168.0.0/16\"]}", &v).unwrap(),
            "cidr: [\"192.168.0.0/16\"]"
        );
    }

    #[test]
    fn every_missing_variable_is_reported_sorted_once() {
        let err = render("${Z} ${A} ${Z} ${D:=x}", &values(&[])).unwrap_err();
        assert_eq!(err, SubstError::Missing(vec!["A".into(), "Z".into()]));
        assert!(
            err.to_string()
                .starts_with("value for variables [A, Z] is not set")
        );
    }

    #[test]
    fn the_first_occurrence_decides_whether_a_variable_has_a_default() {
        let err = render("${X} ${X:=d}", &values(&[])).unwrap_err();
        assert_eq!(err, SubstError::Missing(vec!["X".into()]));
        assert!(render("${X:=d} ${X}", &values(&[])).is_ok());
        let empty_default = render("${X:=}", &values(&[])).unwrap_err();
        assert_eq!(empty_default, SubstError::Missing(vec!["X".into()]));
    }

    #[test]
    fn nested_defaults_escapes_and_legacy_spelling() {
        let v = values(&[("DEF", "foo"), ("A", "1")]);
        assert_eq!(render("${X:=pre-${DEF}-post}", &v).unwrap(), "pre-foo-post");
        assert_eq!(
            render("$${A} costs $$5 and $A", &v).unwrap(),
            "${A} costs $5 and $A"
        );
        assert_eq!(render(r"a\\b\/c\d", &v).unwrap(), r"a\b/c\d");
        assert_eq!(render("${ A } ${A } ${ A}", &v).unwrap(), "1 1 1");
        assert_eq!(
            variables("${X:=pre${DEF}} ${A}").unwrap(),
            vec![
                Variable {
                    name: "X".into(),
                    default: Some("pre${DEF}".into())
                },
                Variable {
                    name: "A".into(),
                    default: None
                }
            ]
        );
    }

    #[test]
    fn bash_forms_outside_the_documented_syntax_are_errors() {
        let v = values(&[("A", "abc")]);
        for text in ["${A^^}", "${#A}", "${A/a/b}", "${A:1}", "${A:?x}", "${A%c}"] {
            assert!(
                matches!(render(text, &v), Err(SubstError::Unsupported { .. })),
                "{text} must be unsupported"
            );
        }
        for text in ["${A", "${}", "${A:=x", "${A.b}"] {
            assert!(
                matches!(render(text, &v), Err(SubstError::BadSubstitution { .. })),
                "{text} must be a bad substitution"
            );
        }
        assert_eq!(
            render("${A-x}", &v).unwrap_err(),
            SubstError::Missing(vec!["A-x".into()]),
            "drone/envsubst reads A-x as one name"
        );
    }
}
