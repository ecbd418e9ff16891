//! Lexing and parsing of templates.

use super::{Expr, Node, Operand, TemplateError, Value};

fn parse_err(line: usize, message: impl Into<String>) -> TemplateError {
    TemplateError::Parse {
        line,
        message: message.into(),
    }
}

/// Splits the source into text and action pieces, applying trim markers and dropping comments.
fn lex(src: &str) -> Result<Vec<(bool, String, usize)>, TemplateError> {
    let mut pieces: Vec<(bool, String, usize)> = Vec::new();
    let mut rest = src;
    let mut line = 1;
    let mut trim_next = false;
    while let Some(open) = rest.find("{{") {
        let mut text = rest[..open].to_string();
        if trim_next {
            text = text.trim_start().to_string();
        }
        line += rest[..open].matches('\n').count();
        let after = &rest[open + 2..];
        let trim_prev = after.starts_with('-') && after[1..].starts_with(char::is_whitespace);
        if trim_prev {
            text = text.trim_end().to_string();
        }
        pieces.push((false, text, line));
        let body_start = if trim_prev { 1 } else { 0 };
        let close =
            find_close(&after[body_start..]).ok_or_else(|| parse_err(line, "unclosed action"))?;
        let mut body = &after[body_start..body_start + close];
        trim_next = body.ends_with('-') && body[..body.len() - 1].ends_with(char::is_whitespace);
        if trim_next {
            body = &body[..body.len() - 1];
        }
        let body = body.trim();
        if !(body.starts_with("/*") && body.ends_with("*/")) {
            pieces.push((true, body.to_string(), line));
        }
        line += after[..body_start + close].matches('\n').count();
        rest = &after[body_start + close + 2..];
    }
    let text = if trim_next { rest.trim_start() } else { rest };
    pieces.push((false, text.to_string(), line));
    Ok(pieces)
}

/// Position of the `}}` closing an action, skipping string literals.
fn find_close(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (Some(b'"'), b'\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (None, b'"') | (None, b'`') => quote = Some(bytes[i]),
            (None, b'}') if bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Splits an action body into tokens: words, string literals (kept quoted), `(`, `)`, `,`.
fn tokenize(body: &str, line: usize) -> Result<Vec<String>, TemplateError> {
    let mut tokens = Vec::new();
    let mut chars = body.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '(' || c == ')' || c == ',' || c == '|' {
            tokens.push(c.to_string());
            chars.next();
        } else if c == '"' || c == '`' {
            let mut tok = String::from(chars.next().unwrap_or(c));
            let mut closed = false;
            while let Some(ch) = chars.next() {
                tok.push(ch);
                if c == '"' && ch == '\\' {
                    if let Some(esc) = chars.next() {
                        tok.push(esc);
                    }
                } else if ch == c {
                    closed = true;
                    break;
                }
            }
            if !closed {
                return Err(parse_err(line, "unterminated string"));
            }
            tokens.push(tok);
        } else {
            let mut tok = String::new();
            while let Some(&ch) = chars.peek() {
                if ch.is_whitespace() || "(),|\"`".contains(ch) {
                    break;
                }
                tok.push(ch);
                chars.next();
            }
            tokens.push(tok);
        }
    }
    Ok(tokens)
}

fn unquote(tok: &str, line: usize) -> Result<String, TemplateError> {
    if let Some(raw) = tok.strip_prefix('`').and_then(|t| t.strip_suffix('`')) {
        return Ok(raw.to_string());
    }
    let inner = &tok[1..tok.len() - 1];
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            other => {
                return Err(parse_err(
                    line,
                    format!("unsupported escape \\{}", other.unwrap_or(' ')),
                ));
            }
        }
    }
    Ok(out)
}

fn fields(path: &str, line: usize) -> Result<Vec<String>, TemplateError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    path.split('.')
        .map(|f| {
            if !f.is_empty() && f.chars().all(|c| c.is_alphanumeric() || c == '_') {
                Ok(f.to_string())
            } else {
                Err(parse_err(line, format!("bad field name {f:?}")))
            }
        })
        .collect()
}

const FUNCTIONS: &[&str] = &["JoinHostPort", "eq", "ne", "not", "and", "or", "len"];

struct Parser<'a> {
    tokens: &'a [String],
    pos: usize,
    line: usize,
}

impl Parser<'_> {
    fn next(&mut self) -> Option<&str> {
        let tok = self.tokens.get(self.pos).map(String::as_str);
        self.pos += 1;
        tok
    }

    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.pos).map(String::as_str)
    }

    fn operand(&mut self) -> Result<Operand, TemplateError> {
        let line = self.line;
        let tok = self
            .next()
            .ok_or_else(|| parse_err(line, "missing value"))?
            .to_string();
        Ok(match tok.as_str() {
            "(" => {
                let expr = self.expr()?;
                if self.next() != Some(")") {
                    return Err(parse_err(line, "missing )"));
                }
                Operand::Call(Box::new(expr))
            }
            "true" => Operand::Lit(Value::Bool(true)),
            "false" => Operand::Lit(Value::Bool(false)),
            "|" => return Err(parse_err(line, "pipelines (|) are not supported")),
            t if t.starts_with('"') || t.starts_with('`') => {
                Operand::Lit(Value::Str(unquote(t, line)?))
            }
            t if t.starts_with('.') => Operand::Dot(fields(&t[1..], line)?),
            t if t.starts_with('$') => {
                let (name, path) = t.split_once('.').unwrap_or((t, ""));
                Operand::Var(name.to_string(), fields(path, line)?)
            }
            t if t.parse::<i64>().is_ok() => {
                Operand::Lit(Value::Int(t.parse().unwrap_or_default()))
            }
            t => return Err(parse_err(line, format!("unexpected {t:?}"))),
        })
    }

    fn expr(&mut self) -> Result<Expr, TemplateError> {
        let line = self.line;
        match self.peek() {
            Some(name) if FUNCTIONS.contains(&name) => {
                let name = name.to_string();
                self.pos += 1;
                let mut args = Vec::new();
                while !matches!(self.peek(), None | Some(")")) {
                    args.push(self.operand()?);
                }
                Ok(Expr::Func(name, args))
            }
            Some(name)
                if name.chars().next().is_some_and(char::is_alphabetic)
                    && !matches!(name, "true" | "false") =>
            {
                Err(parse_err(line, format!("unknown function {name:?}")))
            }
            _ => Ok(Expr::Operand(self.operand()?)),
        }
    }
}

fn parse_expr(tokens: &[String], line: usize) -> Result<Expr, TemplateError> {
    let mut parser = Parser {
        tokens,
        pos: 0,
        line,
    };
    let expr = parser.expr()?;
    match parser.peek() {
        None => Ok(expr),
        Some("|") => Err(parse_err(line, "pipelines (|) are not supported")),
        Some(tok) => Err(parse_err(line, format!("unexpected {tok:?}"))),
    }
}

/// What closed a block of nodes.
enum Closer {
    Eof,
    End,
    Else(Option<Expr>, usize),
}

fn parse_nodes(
    pieces: &[(bool, String, usize)],
    pos: &mut usize,
) -> Result<(Vec<Node>, Closer), TemplateError> {
    let mut nodes = Vec::new();
    while let Some((is_action, body, line)) = pieces.get(*pos) {
        let line = *line;
        *pos += 1;
        if !is_action {
            if !body.is_empty() {
                nodes.push(Node::Text(body.clone()));
            }
            continue;
        }
        let tokens = tokenize(body, line)?;
        let first = tokens.first().map(String::as_str).unwrap_or("");
        match first {
            "" => return Err(parse_err(line, "empty action")),
            "end" if tokens.len() == 1 => return Ok((nodes, Closer::End)),
            "else" if tokens.len() == 1 => return Ok((nodes, Closer::Else(None, line))),
            "else" if tokens.get(1).map(String::as_str) == Some("if") => {
                return Ok((
                    nodes,
                    Closer::Else(Some(parse_expr(&tokens[2..], line)?), line),
                ));
            }
            "if" => nodes.push(parse_if(
                parse_expr(&tokens[1..], line)?,
                pieces,
                pos,
                line,
            )?),
            "range" => nodes.push(parse_range(&tokens[1..], pieces, pos, line)?),
            "with" | "define" | "template" | "block" | "break" | "continue" | "end" | "else" => {
                return Err(parse_err(line, format!("{first:?} is not supported here")));
            }
            _ if tokens.get(1).map(String::as_str) == Some(":=")
                || tokens.get(1).map(String::as_str) == Some("=") =>
            {
                return Err(parse_err(
                    line,
                    "variable assignment is only supported in range",
                ));
            }
            _ => nodes.push(Node::Output(parse_expr(&tokens, line)?, line)),
        }
    }
    Ok((nodes, Closer::Eof))
}

fn parse_if(
    cond: Expr,
    pieces: &[(bool, String, usize)],
    pos: &mut usize,
    line: usize,
) -> Result<Node, TemplateError> {
    let mut branches = Vec::new();
    let mut cond = cond;
    loop {
        let (body, closer) = parse_nodes(pieces, pos)?;
        branches.push((cond, body));
        match closer {
            Closer::End => {
                return Ok(Node::If {
                    branches,
                    otherwise: Vec::new(),
                    line,
                });
            }
            Closer::Else(Some(next), _) => cond = next,
            Closer::Else(None, else_line) => {
                let (else_body, closer) = parse_nodes(pieces, pos)?;
                return match closer {
                    Closer::End => Ok(Node::If {
                        branches,
                        otherwise: else_body,
                        line,
                    }),
                    _ => Err(parse_err(else_line, "missing {{ end }} after {{ else }}")),
                };
            }
            Closer::Eof => return Err(parse_err(line, "missing {{ end }} for {{ if }}")),
        }
    }
}

fn parse_range(
    tokens: &[String],
    pieces: &[(bool, String, usize)],
    pos: &mut usize,
    line: usize,
) -> Result<Node, TemplateError> {
    let words: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let is_var = |w: &str| {
        w.len() > 1 && w.starts_with('$') && w[1..].chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    let (key, value, rest) = match words.as_slice() {
        [k, ",", v, ":=", rest @ ..] if is_var(k) && is_var(v) => {
            (Some(k.to_string()), Some(v.to_string()), rest.len())
        }
        [v, ":=", rest @ ..] if is_var(v) => (None, Some(v.to_string()), rest.len()),
        _ => (None, None, words.len()),
    };
    let expr = parse_expr(&tokens[tokens.len() - rest..], line)?;
    let (body, closer) = parse_nodes(pieces, pos)?;
    let else_body = match closer {
        Closer::End => Vec::new(),
        Closer::Else(None, else_line) => match parse_nodes(pieces, pos)? {
            (else_body, Closer::End) => else_body,
            _ => return Err(parse_err(else_line, "missing {{ end }} after {{ else }}")),
        },
        Closer::Else(Some(_), else_line) => {
            return Err(parse_err(
                else_line,
                "{{ else if }} is not allowed in range",
            ));
        }
        Closer::Eof => return Err(parse_err(line, "missing {{ end }} for {{ range }}")),
    };
    Ok(Node::Range {
        key,
        value,
        over: expr,
        body,
        otherwise: else_body,
        line,
    })
}

/// Parses a whole template into nodes.
pub(super) fn parse_template(src: &str) -> Result<Vec<Node>, TemplateError> {
    let pieces = lex(src)?;
    let mut pos = 0;
    match parse_nodes(&pieces, &mut pos)? {
        (nodes, Closer::Eof) => Ok(nodes),
        (_, Closer::End) => Err(parse_err(pieces[pos - 1].2, "unexpected {{ end }}")),
        (_, Closer::Else(_, line)) => Err(parse_err(line, "unexpected {{ else }}")),
    }
}
