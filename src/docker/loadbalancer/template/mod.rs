//! A small, safe subset of Go's `text/template`, enough for haproxy config templates written for
//! CAPD (which renders them with Go templates).
//!
//! Supported:
//! - text, `{{ expr }}` output, comments `{{/* ... */}}`, trim markers `{{- ` and ` -}}`;
//! - `{{ if expr }} ... {{ else if expr }} ... {{ else }} ... {{ end }}`;
//! - `{{ range $key, $value := expr }}`, `{{ range $value := expr }}`, `{{ range expr }}`, with an
//!   optional `{{ else }}` for empty collections; maps iterate in key order, as in Go;
//! - operands: `.`, `.Field.Sub`, `$`, `$.Field`, `$var`, `$var.Field`, `"strings"`, integers,
//!   `true`/`false`, and parenthesised calls;
//! - functions: `JoinHostPort host port` (brackets IPv6 hosts), `eq a b...`, `ne a b`, `not a`,
//!   `and a b...`, `or a b...`, `len x`.
//!
//! Anything else (pipes, `with`, `define`, variable assignment outside `range`) is a parse error
//! naming the line. Rendering has no side effects and always terminates.

use std::collections::BTreeMap;

/// A value templates can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Text.
    Str(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// Named fields or map entries (iterated in key order).
    Map(BTreeMap<String, Value>),
    /// A list.
    List(Vec<Value>),
}

impl Value {
    fn truthy(&self) -> bool {
        match self {
            Value::Str(s) => !s.is_empty(),
            Value::Int(i) => *i != 0,
            Value::Bool(b) => *b,
            Value::Map(m) => !m.is_empty(),
            Value::List(l) => !l.is_empty(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Int(_) => "int",
            Value::Bool(_) => "bool",
            Value::Map(_) => "map",
            Value::List(_) => "list",
        }
    }
}

/// Errors of template parsing and rendering.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template text is not valid.
    #[error("parse template at line {line}: {message}")]
    Parse {
        /// 1-based line of the offending action.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The template is valid but does not fit the data.
    #[error("render template at line {line}: {message}")]
    Render {
        /// 1-based line of the offending action.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl TemplateError {
    /// A short stable word for metric labels and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Parse { .. } => "template_parse",
            Self::Render { .. } => "template_render",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Operand {
    Dot(Vec<String>),
    Var(String, Vec<String>),
    Lit(Value),
    Call(Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    Operand(Operand),
    Func(String, Vec<Operand>),
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    /// Literal text.
    Text(String),
    /// `{{ expr }}` at a line.
    Output(Expr, usize),
    /// `{{ if }}` with its `else if` branches and `else` body.
    If {
        branches: Vec<(Expr, Vec<Node>)>,
        otherwise: Vec<Node>,
        line: usize,
    },
    /// `{{ range }}` with optional key and value variables and an `else` body for empty input.
    Range {
        key: Option<String>,
        value: Option<String>,
        over: Expr,
        body: Vec<Node>,
        otherwise: Vec<Node>,
        line: usize,
    },
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    nodes: Vec<Node>,
}

impl Template {
    /// Parses template text.
    ///
    /// # Errors
    /// [`TemplateError::Parse`] naming the line of the first problem.
    pub fn parse(src: &str) -> Result<Self, TemplateError> {
        Ok(Template {
            nodes: parse_template(src)?,
        })
    }

    /// Renders the template with `data` as `.` and `$`.
    ///
    /// # Errors
    /// [`TemplateError::Render`] when the template reads something the data does not have.
    pub fn render(&self, data: &Value) -> Result<String, TemplateError> {
        let mut out = String::new();
        let mut scope = Scope {
            vars: vec![("$".to_string(), data.clone())],
        };
        render_nodes(&self.nodes, data, &mut scope, &mut out)?;
        Ok(out)
    }
}

mod parse;
mod render;

use parse::parse_template;
use render::{Scope, render_nodes};
