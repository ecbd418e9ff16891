//! Go's `text/template` for haproxy configuration templates, as CAPD renders
//! `customHAProxyConfigTemplateRef`: the [`gotmpl`] crate with CAPD's one extra function,
//! `JoinHostPort`, and limits on what one render may cost.
//!
//! Accepted: everything `text/template` of Go 1.23 accepts — pipes, `printf`/`print`/`println`,
//! `if`/`else if`, `range` (with `$i, $e`, `else`, `break`, `continue`), `with` (and `else with`),
//! variables (`:=`, `=`), `define`/`template`/`block`, comments and trim markers, and the built-in
//! functions (`and`, `or`, `not`, `eq`, `ne`, `lt`, `le`, `gt`, `ge`, `len`, `index`, `slice`,
//! `call`, `html`, `js`, `urlquery`). The expected outputs of the tests are what Go renders
//! (`hack/haproxy-golden.sh`).
//!
//! Refused, each with an error that ends on the DockerCluster's condition: what Go's parser
//! refuses (a block without `end`, a function Go does not know, sprig's included, as in CAPD), a
//! field the data does not have (CAPD's data is a struct), and, so that a render always ends soon,
//! a template that calls itself (directly or not; Go allows it), template calls that expand to
//! more than [`MAX_TEMPLATE_CALLS`] renders, blocks nested more than 100 deep in the text, runs
//! nested deeper than [`MAX_DEPTH`], more than [`MAX_RANGE_ITERATIONS`] loop iterations, and an
//! output larger than [`MAX_OUTPUT_BYTES`]. Errors of a render name no line (Go's do).
//!
//! Where CAPD's typed data shows through (its backends are Go structs, ours are maps), the text
//! differs: printing a whole backend gives `map[Address:.. Weight:..]` where Go prints `{.. ..}`,
//! and `index` of a server name that does not exist gives no value where Go gives an empty
//! backend.

use std::collections::BTreeMap;
use std::sync::Arc;

use gotmpl::parse::{Expr, Node, PipeNode};
pub use gotmpl::{FuncMap, MissingKey, Value};

/// The name errors give the template (CAPD's).
const NAME: &str = "loadbalancer-config";

/// Largest configuration a template may produce (a ConfigMap holds at most 1 MiB).
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Most `range` iterations one render may run, summed over every loop.
pub const MAX_RANGE_ITERATIONS: u64 = 10_000;
/// Most template renders that `{{ template }}` and `{{ block }}` calls may expand to, counting
/// each loop body once (calls inside a loop run once per iteration).
pub const MAX_TEMPLATE_CALLS: u64 = 100;
/// Deepest nesting of blocks and `template` calls (gotmpl's fixed limit; Go allows 100000).
pub const MAX_DEPTH: usize = 200;

/// Errors of template parsing and rendering.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template text is not valid, or calls a function that does not exist.
    #[error("parse template")]
    Parse(#[source] gotmpl::TemplateError),
    /// The template is valid but does not fit the data.
    #[error("render template")]
    Render(#[source] gotmpl::TemplateError),
    /// The template recursed or looped past the limits.
    #[error("render template: {0}")]
    Limit(String),
}

impl TemplateError {
    /// A short stable word for metric labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Parse(_) => "template_parse",
            Self::Render(_) => "template_render",
            Self::Limit(_) => "template_limit",
        }
    }
}

/// A parsed template.
#[derive(Clone)]
pub struct Template {
    inner: gotmpl::Template,
}

impl std::fmt::Debug for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Template")
            .field("templates", &self.inner.templates())
            .finish_non_exhaustive()
    }
}

impl Template {
    /// Parses an haproxy configuration template as CAPD does: Go's built-in functions and
    /// `JoinHostPort`, and reading a field the data does not have is an error.
    ///
    /// # Errors
    /// [`TemplateError::Parse`] naming the line and column of the first problem.
    pub fn parse(src: &str) -> Result<Self, TemplateError> {
        Self::parse_with(src, haproxy_functions(), MissingKey::Error)
    }

    /// Parses a template with extra functions and a rule for missing map keys (Go's
    /// `Option("missingkey=...")`; the default prints `<no value>`, as Go does for maps).
    ///
    /// # Errors
    /// [`TemplateError::Parse`] naming the line and column of the first problem.
    pub fn parse_with(
        src: &str,
        functions: FuncMap,
        missing_key: MissingKey,
    ) -> Result<Self, TemplateError> {
        check_blocks(src)?;
        let functions_known: Vec<String> = functions.keys().cloned().collect();
        let inner = gotmpl::Template::new(NAME)
            .funcs(functions)
            .missing_key(missing_key)
            .max_range_iters(MAX_RANGE_ITERATIONS)
            .parse(src)
            .map_err(TemplateError::Parse)?;
        let mut calls = BTreeMap::new();
        for name in inner.templates() {
            if let Some(tree) = inner.lookup(name) {
                check_functions(&tree.nodes, &functions_known, src)?;
                let mut called = Vec::new();
                template_calls(&tree.nodes, &mut called);
                calls.insert(name.to_string(), called);
            }
        }
        let mut expansion = BTreeMap::new();
        let renders = expand(NAME, &calls, &mut Vec::new(), &mut expansion)?;
        if renders > MAX_TEMPLATE_CALLS {
            return Err(TemplateError::Limit(format!(
                "template calls expand to {renders} renders, more than {MAX_TEMPLATE_CALLS}"
            )));
        }
        Ok(Template { inner })
    }

    /// Renders the template with `data` as `.` and `$`.
    ///
    /// # Errors
    /// [`TemplateError::Render`] when the template does not fit the data,
    /// [`TemplateError::Limit`] when it runs past a limit.
    pub fn render(&self, data: &Value) -> Result<String, TemplateError> {
        let mut out = Bounded {
            text: String::new(),
            overflow: false,
        };
        match self.inner.execute_fmt(&mut out, data) {
            Ok(()) => Ok(out.text),
            Err(_) if out.overflow => Err(TemplateError::Limit(format!(
                "output exceeds {MAX_OUTPUT_BYTES} bytes"
            ))),
            Err(gotmpl::TemplateError::RecursionLimit) => Err(TemplateError::Limit(format!(
                "nesting deeper than {MAX_DEPTH} blocks or template calls"
            ))),
            Err(gotmpl::TemplateError::RangeIterLimit) => Err(TemplateError::Limit(format!(
                "more than {MAX_RANGE_ITERATIONS} range iterations"
            ))),
            Err(e) => Err(TemplateError::Render(e)),
        }
    }
}

fn parse_error(src: &str, offset: usize, message: String) -> TemplateError {
    let before = src.get(..offset).unwrap_or(src);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    TemplateError::Parse(gotmpl::TemplateError::Parse {
        name: Some(NAME.to_string()),
        line: before.matches('\n').count() + 1,
        col: offset - line_start + 1,
        message,
    })
}

/// Refuses what Go's parser refuses and gotmpl's accepts: a block (`if`, `range`, `with`,
/// `define`, `block`) left open at the end, and an `end` or `else` outside any block.
fn check_blocks(src: &str) -> Result<(), TemplateError> {
    let mut open: Vec<usize> = Vec::new();
    let mut rest = 0;
    while let Some(found) = src[rest..].find("{{") {
        let start = rest + found;
        let body_start = start + 2;
        let Some(close) = find_close(&src[body_start..]) else {
            // gotmpl reports the unclosed action.
            return Ok(());
        };
        let body = src[body_start..body_start + close].trim_start_matches('-');
        let keyword = body
            .trim_start()
            .split(|c: char| c.is_whitespace() || c == '-' || c == '(')
            .next()
            .unwrap_or("");
        match keyword {
            "if" | "range" | "with" | "define" | "block" => open.push(start),
            "end" if open.pop().is_none() => {
                return Err(parse_error(src, start, "unexpected {{end}}".into()));
            }
            "else" if open.is_empty() => {
                return Err(parse_error(src, start, "unexpected {{else}}".into()));
            }
            _ => {}
        }
        rest = body_start + close + 2;
    }
    match open.last() {
        Some(&start) => Err(parse_error(
            src,
            start,
            "unexpected EOF: this block has no {{end}}".into(),
        )),
        None => Ok(()),
    }
}

/// Position of the `}}` closing an action, skipping string, raw string and character literals
/// and comments.
fn find_close(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    let trimmed = s.trim_start_matches('-').trim_start();
    if trimmed.starts_with("/*") {
        let comment_end = s.find("*/")?;
        return s[comment_end..].find("}}").map(|i| comment_end + i);
    }
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (Some(b'"' | b'\''), b'\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (None, b'"' | b'`' | b'\'') => quote = Some(bytes[i]),
            (None, b'}') if bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Names of the templates that `{{ template }}` and `{{ block }}` call, once per call site.
fn template_calls(nodes: &[Node], out: &mut Vec<String>) {
    for node in nodes {
        match node {
            Node::List(list) => template_calls(&list.nodes, out),
            Node::If(branch) | Node::Range(branch) | Node::With(branch) => {
                template_calls(&branch.body.nodes, out);
                if let Some(otherwise) = &branch.else_body {
                    template_calls(&otherwise.nodes, out);
                }
            }
            Node::Template(call) => out.push(call.name.to_string()),
            Node::Define(define) => template_calls(&define.body.nodes, out),
            Node::Text(_) | Node::Action(_) | Node::Break(_) | Node::Continue(_) => {}
        }
    }
}

/// How many renders one render of `name` expands to (itself and every call, each loop body
/// counted once); a template that reaches itself again is refused.
fn expand(
    name: &str,
    calls: &BTreeMap<String, Vec<String>>,
    path: &mut Vec<String>,
    memo: &mut BTreeMap<String, u64>,
) -> Result<u64, TemplateError> {
    if let Some(&known) = memo.get(name) {
        return Ok(known);
    }
    if path.iter().any(|p| p == name) {
        path.push(name.to_string());
        return Err(TemplateError::Limit(format!(
            "template {name:?} calls itself ({})",
            path.join(" -> ")
        )));
    }
    path.push(name.to_string());
    let mut total: u64 = 1;
    for callee in calls.get(name).into_iter().flatten() {
        // A call of an undefined template fails when it runs, as in Go.
        if calls.contains_key(callee) {
            total = total.saturating_add(expand(callee, calls, path, memo)?);
        }
    }
    path.pop();
    memo.insert(name.to_string(), total);
    Ok(total)
}

/// Go's built-in template functions.
const BUILTINS: &[&str] = &[
    "and", "call", "eq", "ge", "gt", "html", "index", "js", "le", "len", "lt", "ne", "not", "or",
    "print", "printf", "println", "slice", "urlquery",
];

/// Refuses a call of a function that does not exist, anywhere in the template, as Go's parser
/// does (gotmpl would only fail when the call runs).
fn check_functions(nodes: &[Node], known: &[String], src: &str) -> Result<(), TemplateError> {
    for node in nodes {
        match node {
            Node::List(list) => check_functions(&list.nodes, known, src)?,
            Node::Action(action) => check_pipe(&action.pipe, known, src)?,
            Node::If(branch) | Node::Range(branch) | Node::With(branch) => {
                check_pipe(&branch.pipe, known, src)?;
                check_functions(&branch.body.nodes, known, src)?;
                if let Some(otherwise) = &branch.else_body {
                    check_functions(&otherwise.nodes, known, src)?;
                }
            }
            Node::Template(call) => {
                if let Some(pipe) = &call.pipe {
                    check_pipe(pipe, known, src)?;
                }
            }
            Node::Define(define) => check_functions(&define.body.nodes, known, src)?,
            Node::Text(_) | Node::Break(_) | Node::Continue(_) => {}
        }
    }
    Ok(())
}

fn check_pipe(pipe: &PipeNode, known: &[String], src: &str) -> Result<(), TemplateError> {
    pipe.commands
        .iter()
        .flat_map(|command| &command.args)
        .try_for_each(|arg| check_expr(arg, known, src))
}

fn check_expr(expr: &Expr, known: &[String], src: &str) -> Result<(), TemplateError> {
    match expr {
        Expr::Identifier(pos, name)
            if !BUILTINS.contains(&name.as_str()) && !known.iter().any(|k| k == name.as_str()) =>
        {
            let line_start = src
                .get(..pos.offset)
                .and_then(|before| before.rfind('\n'))
                .map_or(0, |i| i + 1);
            Err(TemplateError::Parse(gotmpl::TemplateError::Parse {
                name: Some(NAME.to_string()),
                line: pos.line,
                col: pos.offset.saturating_sub(line_start) + 1,
                message: format!("function {:?} not defined", name.as_str()),
            }))
        }
        Expr::Pipe(_, pipe) => check_pipe(pipe, known, src),
        Expr::Chain(_, inner, _) => check_expr(inner, known, src),
        _ => Ok(()),
    }
}

/// Output that refuses to grow past [`MAX_OUTPUT_BYTES`].
struct Bounded {
    text: String,
    overflow: bool,
}

impl std::fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.text.len() + s.len() > MAX_OUTPUT_BYTES {
            self.overflow = true;
            return Err(std::fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}

/// CAPD's template functions: `JoinHostPort` (Go's `net.JoinHostPort`: two strings, the host
/// bracketed when it holds a colon), and `index` as Go has it.
pub fn haproxy_functions() -> FuncMap {
    let join: gotmpl::ValueFunc = Arc::new(|args: &[Value]| match args {
        [Value::String(host), Value::String(port)] if host.contains(':') => {
            Ok(Value::from(format!("[{host}]:{port}")))
        }
        [Value::String(host), Value::String(port)] => Ok(Value::from(format!("{host}:{port}"))),
        [_, _] => Err(gotmpl::TemplateError::Exec(format!(
            "JoinHostPort: wrong type for value; expected string; got {}",
            args.iter()
                .find(|a| !matches!(a, Value::String(_)))
                .map_or("string", Value::type_name)
        ))),
        _ => Err(gotmpl::TemplateError::Exec(format!(
            "wrong number of args for JoinHostPort: want 2 got {}",
            args.len()
        ))),
    });
    // Go's `index` also takes no keys (returning its argument); gotmpl's wants one.
    let index: gotmpl::ValueFunc = Arc::new(|args: &[Value]| match args {
        [item, keys @ ..] => keys
            .iter()
            .try_fold(item.clone(), |value, key| value.index(key)),
        [] => Err(gotmpl::TemplateError::Exec(
            "wrong number of args for index: want at least 1 got 0".into(),
        )),
    });
    FuncMap::from([
        ("JoinHostPort".to_string(), join),
        ("index".to_string(), index),
    ])
}

#[cfg(test)]
mod tests;
