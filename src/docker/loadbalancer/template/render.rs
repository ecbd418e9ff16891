//! Evaluation of parsed templates.

use super::{Expr, Node, Operand, TemplateError, Value};

fn render_err(line: usize, message: impl Into<String>) -> TemplateError {
    TemplateError::Render {
        line,
        message: message.into(),
    }
}

pub(super) struct Scope {
    pub(super) vars: Vec<(String, Value)>,
}

fn lookup(value: &Value, path: &[String], line: usize) -> Result<Value, TemplateError> {
    let mut current = value;
    for field in path {
        current = match current {
            Value::Map(m) => m
                .get(field)
                .ok_or_else(|| render_err(line, format!("no field {field:?}")))?,
            other => {
                return Err(render_err(
                    line,
                    format!("cannot read field {field:?} of a {}", other.kind()),
                ));
            }
        };
    }
    Ok(current.clone())
}

fn eval_operand(
    op: &Operand,
    dot: &Value,
    scope: &Scope,
    line: usize,
) -> Result<Value, TemplateError> {
    match op {
        Operand::Dot(path) => lookup(dot, path, line),
        Operand::Var(name, path) => {
            let (_, value) = scope
                .vars
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .ok_or_else(|| render_err(line, format!("undefined variable {name}")))?;
            lookup(value, path, line)
        }
        Operand::Lit(v) => Ok(v.clone()),
        Operand::Call(expr) => eval(expr, dot, scope, line),
    }
}

fn text_of(v: &Value, line: usize) -> Result<String, TemplateError> {
    match v {
        Value::Str(s) => Ok(s.clone()),
        Value::Int(i) => Ok(i.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(render_err(line, format!("cannot print a {}", other.kind()))),
    }
}

fn eval(expr: &Expr, dot: &Value, scope: &Scope, line: usize) -> Result<Value, TemplateError> {
    let (name, ops) = match expr {
        Expr::Operand(op) => return eval_operand(op, dot, scope, line),
        Expr::Func(name, ops) => (name.as_str(), ops),
    };
    let args: Vec<Value> = ops
        .iter()
        .map(|o| eval_operand(o, dot, scope, line))
        .collect::<Result<_, _>>()?;
    let arity = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(render_err(
                line,
                format!("{name} takes {n} arguments, got {}", args.len()),
            ))
        }
    };
    Ok(match name {
        "JoinHostPort" => {
            arity(2)?;
            let host = text_of(&args[0], line)?;
            let port = text_of(&args[1], line)?;
            if host.contains(':') {
                Value::Str(format!("[{host}]:{port}"))
            } else {
                Value::Str(format!("{host}:{port}"))
            }
        }
        "eq" if args.len() >= 2 => Value::Bool(args[1..].contains(&args[0])),
        "ne" => {
            arity(2)?;
            Value::Bool(args[0] != args[1])
        }
        "not" => {
            arity(1)?;
            Value::Bool(!args[0].truthy())
        }
        "and" if !args.is_empty() => Value::Bool(args.iter().all(Value::truthy)),
        "or" if !args.is_empty() => Value::Bool(args.iter().any(Value::truthy)),
        "len" => {
            arity(1)?;
            let n = match &args[0] {
                Value::Str(s) => s.len(),
                Value::Map(m) => m.len(),
                Value::List(l) => l.len(),
                other => return Err(render_err(line, format!("len of a {}", other.kind()))),
            };
            Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
        }
        _ => {
            return Err(render_err(
                line,
                format!("{name}: wrong number of arguments"),
            ));
        }
    })
}

pub(super) fn render_nodes(
    nodes: &[Node],
    dot: &Value,
    scope: &mut Scope,
    out: &mut String,
) -> Result<(), TemplateError> {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Output(expr, line) => {
                out.push_str(&text_of(&eval(expr, dot, scope, *line)?, *line)?)
            }
            Node::If {
                branches,
                otherwise: else_body,
                line,
            } => {
                let mut taken = None;
                for (cond, body) in branches {
                    if eval(cond, dot, scope, *line)?.truthy() {
                        taken = Some(body);
                        break;
                    }
                }
                render_nodes(taken.unwrap_or(else_body), dot, scope, out)?;
            }
            Node::Range {
                key,
                value,
                over: expr,
                body,
                otherwise: else_body,
                line,
            } => {
                let items: Vec<(Value, Value)> = match eval(expr, dot, scope, *line)? {
                    Value::Map(m) => m.into_iter().map(|(k, v)| (Value::Str(k), v)).collect(),
                    Value::List(l) => l
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| (Value::Int(i64::try_from(i).unwrap_or(i64::MAX)), v))
                        .collect(),
                    other => {
                        return Err(render_err(
                            *line,
                            format!("cannot range over a {}", other.kind()),
                        ));
                    }
                };
                if items.is_empty() {
                    render_nodes(else_body, dot, scope, out)?;
                }
                for (k, v) in items {
                    let depth = scope.vars.len();
                    if let Some(name) = key {
                        scope.vars.push((name.clone(), k));
                    }
                    if let Some(name) = value {
                        scope.vars.push((name.clone(), v.clone()));
                    }
                    let result = render_nodes(body, &v, scope, out);
                    scope.vars.truncate(depth);
                    result?;
                }
            }
        }
    }
    Ok(())
}
