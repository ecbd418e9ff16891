//! The crate's layering: the manager (`src/manager/`) is the process wiring on top, and nothing
//! below it imports it. What the controllers, webhooks and Gardener extension share with the
//! manager lives in `src/runtime/`. Only `src/main.rs` (the binary) and `src/lib.rs` (which
//! declares the module) may name `crate::manager` or `capd::manager` outside `src/manager/`.
//!
//! Below the manager, files are layered too: read as a graph of imports (every `crate::`,
//! `super::` and `self::` path, to the file defining the module it names), no loop of files in
//! `src/` is longer than 3, and none in the test API server (`e2e/apiserver/src/`) longer than 4.
//! The book's page on the code's layout (`docs/src/layout.md`) draws the layers.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Files allowed to import the manager, relative to the crate root.
const ALLOWED: [&str; 2] = ["src/main.rs", "src/lib.rs"];

/// The manager itself.
const MANAGER_DIR: &str = "src/manager";

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The code of a line: what precedes a `//` comment (doc comments may name the manager in prose).
fn code_of(line: &str) -> &str {
    line.find("//").map_or(line, |at| &line[..at])
}

/// Whether `text` names the `manager` module right at `at` (not `managers`, `manager_x`).
fn is_manager_at(text: &str, at: usize) -> bool {
    text[at..].starts_with("manager")
        && !text[at + "manager".len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// The paths into the manager that `code` uses: `crate::manager`, `super::manager`,
/// `capd::manager`, or `manager` inside a `crate::{..}` / `capd::{..}` group (nested groups
/// included). `code` may span lines; each finding is reported with its line number (1-based).
fn manager_paths(code: &str) -> Vec<(usize, String)> {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let line_text = |at: usize| {
        let start = code[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = code[at..].find('\n').map_or(code.len(), |i| at + i);
        code[start..end].trim().to_owned()
    };
    let mut found = Vec::new();
    for prefix in ["crate::", "super::", "capd::"] {
        for (at, _) in code.match_indices(prefix) {
            let after = at + prefix.len();
            if is_manager_at(code, after) {
                found.push((line_of(at), line_text(at)));
            } else if prefix != "super::" && code[after..].starts_with('{') {
                let mut depth = 0usize;
                for (offset, c) in code[after..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                    let at_word = after + offset;
                    let starts_word = !code[..at_word]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
                    if depth == 1 && starts_word && is_manager_at(code, at_word) {
                        found.push((line_of(at_word), line_text(at_word)));
                    }
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// A file's code with comments blanked, lines kept in place.
fn code_only(text: &str) -> String {
    text.lines().map(code_of).collect::<Vec<_>>().join("\n")
}

#[test]
fn nothing_below_the_manager_imports_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offending = Vec::new();
    for file in rust_files(&root.join("src")).unwrap() {
        let relative = file.strip_prefix(root).unwrap();
        let name = relative.to_string_lossy().replace('\\', "/");
        if name.starts_with(&format!("{MANAGER_DIR}/")) || ALLOWED.contains(&name.as_str()) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        for (line, code) in manager_paths(&code_only(&text)) {
            offending.push(format!("{name}:{line}: {code}"));
        }
    }
    assert!(
        offending.is_empty(),
        "these files import the manager, which only src/main.rs may; move what they need \
         into src/runtime/ (or another module below the manager):\n{}",
        offending.join("\n")
    );
}

#[test]
fn the_scan_sees_every_way_of_naming_the_manager() {
    let code = code_only(
        "use crate::manager::Metrics;\n\
         use super::super::manager;\n\
         let c = capd::manager::error_chain(&e);\n\
         use crate::{api, manager::Context};\n\
         use crate::{\n    docker,\n    manager,\n};\n\
         use crate::{api::{manager}, managers, runtime};\n\
         // see crate::manager::wiring\n\
         use crate::manager_like;\n",
    );
    let lines: Vec<usize> = manager_paths(&code).into_iter().map(|(l, _)| l).collect();
    assert_eq!(lines, [1, 2, 3, 4, 7]);
}

// ---------------------------------------------------------------------------------------------
// Import loops: files of one crate that import each other in a circle must be read (and changed)
// together. A loop of a few files is a unit; a longer one means the layers are tangled.
//
// What counts as an import: a path starting with `crate`, `super` or `self`, in a `use` (groups
// `{..}` nested, over several lines) or anywhere in code, names the file defining the module it
// reaches (`a::b::Item`: the file of `a::b`, `a/b.rs` or `a/b/mod.rs`); when that file only
// re-exports the item (`pub use inner::Item;`), the import is of the file defining it. Paths
// that start with a child module's name (`child::f()` in a `mod.rs`) are a folder's front
// declaring its parts, not an edge. Comments, strings and `#[cfg(test)]` modules inside a file do
// not count (tests sit on top of what they test); test files are files like any other.

/// Longest loop allowed in the provider's crate (`src/`).
const MAX_LOOP_SRC: usize = 3;

/// Longest loop allowed in the test API server (`e2e/apiserver/src/`).
const MAX_LOOP_APISERVER: usize = 4;

/// The module a file defines when nothing renames it: `lib.rs` the crate root, `a/mod.rs` and
/// `a.rs` module `a`, `a/b.rs` module `a::b`.
fn default_module(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative.split('/').map(str::to_owned).collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" {
            parts.push(stem.to_owned());
        }
    }
    parts
}

/// A file's text with comments, string and character literals blanked (newlines kept), so that
/// only code is left to read.
fn strip_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    blank(&mut out, '/');
                    blank(&mut out, '*');
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    blank(&mut out, '*');
                    blank(&mut out, '/');
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if (c == 'r' || c == 'b')
            && !chars[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
            && let Some((start, hashes)) = raw_string_hashes(&chars[i..])
        {
            let mut j = i + start;
            while j < chars.len() {
                if chars[j] == '"'
                    && chars[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|h| **h == '#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &c in &chars[i..j.min(chars.len())] {
                blank(&mut out, c);
            }
            i = j;
        } else if c == '"' {
            blank(&mut out, c);
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            if i < chars.len() {
                blank(&mut out, '"');
                i += 1;
            }
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{..}'); a lifetime ('a) has no closing quote.
            blank(&mut out, c);
            i += 1;
            if chars.get(i) == Some(&'\\') {
                blank(&mut out, '\\');
                i += 1;
            }
            while i < chars.len() && chars[i] != '\'' {
                blank(&mut out, chars[i]);
                i += 1;
            }
            if i < chars.len() {
                blank(&mut out, '\'');
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether `chars` starts a raw string (`r"`, `r#"`, `br"`…): the offset of its body and the
/// number of `#`.
fn raw_string_hashes(chars: &[char]) -> Option<(usize, usize)> {
    let mut i = usize::from(chars.first() == Some(&'b'));
    if chars.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let hashes = chars[i..].iter().take_while(|c| **c == '#').count();
    (chars.get(i + hashes) == Some(&'"')).then_some((i + hashes + 1, hashes))
}

/// The tokens of stripped code that matter to paths: identifiers, `::` and single punctuation.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The full paths a `use` tree names, starting at `tokens[at]` (after `use`), up to its `;`.
/// `a::{b, c::{d, self}}` gives `a::b`, `a::c::d` and `a::c`.
fn use_tree(
    tokens: &[String],
    at: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix.to_vec();
    while let Some(token) = tokens.get(*at) {
        match token.as_str() {
            "::" => *at += 1,
            "{" => {
                *at += 1;
                loop {
                    use_tree(tokens, at, &path, out);
                    match tokens.get(*at).map(String::as_str) {
                        Some(",") => *at += 1,
                        Some("}") => {
                            *at += 1;
                            break;
                        }
                        _ => break,
                    }
                    if tokens.get(*at).map(String::as_str) == Some("}") {
                        *at += 1;
                        break;
                    }
                }
                return;
            }
            "*" => {
                *at += 1;
                out.push((path, None));
                return;
            }
            "as" => {
                let alias = tokens.get(*at + 1).filter(|t| *t != "_").cloned();
                *at += 2;
                out.push((path, alias));
                return;
            }
            "," | "}" | ";" => {
                let name = path.last().cloned();
                out.push((path, name));
                return;
            }
            // `self` in a group names the group's prefix (`use a::{self, b}` binds `a`).
            "self" if !prefix.is_empty() && path.len() == prefix.len() => *at += 1,
            _ => {
                path.push(token.clone());
                *at += 1;
            }
        }
    }
    let name = path.last().cloned();
    out.push((path, name));
}

/// Whether `token` is an identifier.
fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// A path that a file names, made absolute; `binds` is the name a `use` at the file's top level
/// gives it (`use a::B` binds `B`, `use a::B as C` binds `C`), through which other files may
/// name it in turn (a re-export).
struct Named {
    path: Vec<String>,
    binds: Option<String>,
    /// Whether the path starts with `crate`, `super` or `self` (not with a child module's name).
    prefixed: bool,
}

/// The paths that `code` (a file's stripped code, defining module `module`) names: paths starting
/// with `crate::`, `super::`, `self::` or a child module (`child::item`), in `use` declarations
/// (groups `{..}` nested) and in code. Inline modules (`mod tests { .. }`) move `super` and `self`.
fn named_paths(code: &str, module: &[String], is_module: &dyn Fn(&[String]) -> bool) -> Vec<Named> {
    let tokens = tokens(code);
    let mut found = Vec::new();
    let mut depth = 0usize;
    // Inline modules open at a brace depth: (name, depth inside).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let here: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        let token = tokens[i].as_str();
        let path_start = is_ident(token)
            && tokens.get(i + 1).map(String::as_str) == Some("::")
            && (i == 0 || tokens[i - 1] != "::");
        match token {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                while inline.last().is_some_and(|(_, d)| *d > depth) {
                    inline.pop();
                }
            }
            "mod"
                if tokens.get(i + 2).map(String::as_str) == Some("{")
                    && is_test_only(&tokens[..i]) =>
            {
                // A test module sits on top of the file's code: what it imports is not the code's.
                let mut open = 0usize;
                i += 2;
                while let Some(token) = tokens.get(i) {
                    match token.as_str() {
                        "{" => open += 1,
                        "}" => open -= 1,
                        _ => {}
                    }
                    i += 1;
                    if open == 0 {
                        break;
                    }
                }
                continue;
            }
            "mod" if tokens.get(i + 2).map(String::as_str) == Some("{") => {
                inline.push((tokens[i + 1].clone(), depth + 1));
                depth += 1;
                i += 3;
                continue;
            }
            "use" => {
                let top_level = depth == 0;
                let mut at = i + 1;
                let mut paths = Vec::new();
                use_tree(&tokens, &mut at, &[], &mut paths);
                for (path, binds) in paths {
                    let prefixed = is_prefixed(&path);
                    if let Some(path) = resolve(&path, &here, is_module) {
                        found.push(Named {
                            path,
                            binds: binds.filter(|_| top_level),
                            prefixed,
                        });
                    }
                }
                i = at.max(i + 1);
                continue;
            }
            _ if path_start => {
                let mut path = vec![tokens[i].clone()];
                let mut at = i + 1;
                while tokens.get(at).map(String::as_str) == Some("::")
                    && tokens.get(at + 1).is_some_and(|t| is_ident(t))
                {
                    path.push(tokens[at + 1].clone());
                    at += 2;
                }
                let prefixed = is_prefixed(&path);
                if let Some(path) = resolve(&path, &here, is_module) {
                    found.push(Named {
                        path,
                        binds: None,
                        prefixed,
                    });
                }
                i = at;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// Whether `path` starts with `crate`, `super` or `self`.
fn is_prefixed(path: &[String]) -> bool {
    path.first()
        .is_some_and(|first| ["crate", "super", "self"].contains(&first.as_str()))
}

/// Whether the item after `before` is compiled for tests only (`#[cfg(test)]` right before it).
fn is_test_only(before: &[String]) -> bool {
    before.ends_with(&["#", "[", "cfg", "(", "test", ")", "]"].map(str::to_owned))
}

/// The absolute path `path` names from module `here`, or `None` for another crate's path (or
/// anything else not starting with `crate`, `super`, `self` or a child module of `here`).
fn resolve(
    path: &[String],
    here: &[String],
    is_module: &dyn Fn(&[String]) -> bool,
) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &path[1..];
        }
        Some("self") => {
            base = here.to_vec();
            rest = &path[1..];
        }
        Some("super") => {
            base = here.to_vec();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some(first) => {
            base = here.to_vec();
            base.push(first.to_owned());
            if !is_module(&base) {
                return None;
            }
            rest = &path[1..];
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// One crate's files and the imports between them.
struct ImportGraph {
    /// File names, relative to the crate's source folder, by index.
    files: Vec<String>,
    /// For each file, the files it imports (indexes, itself excluded).
    edges: Vec<BTreeSet<usize>>,
}

impl ImportGraph {
    /// The graph of a crate whose source files are `sources` (name relative to the source folder,
    /// text). The crate root is `lib.rs`; `main.rs` (when there is a `lib.rs`) and `bin/` are other
    /// crates and left out. `#[path = "x.rs"] mod name;` places a file as module `name`.
    fn of(sources: &[(String, String)]) -> ImportGraph {
        let has_lib = sources.iter().any(|(name, _)| name == "lib.rs");
        let sources: Vec<&(String, String)> = sources
            .iter()
            .filter(|(name, _)| !(name.starts_with("bin/") || has_lib && name == "main.rs"))
            .collect();
        let mut modules: BTreeMap<Vec<String>, usize> = BTreeMap::new();
        let mut module_of: Vec<Vec<String>> = sources
            .iter()
            .map(|(name, _)| default_module(name))
            .collect();
        // `#[path]` renames: the file named becomes the child `name` of the declaring module.
        for (index, (name, text)) in sources.iter().enumerate() {
            let folder = name.rfind('/').map_or("", |at| &name[..=at]);
            let lines: Vec<&str> = text.lines().collect();
            for (at, line) in lines.iter().enumerate() {
                let Some(target) = line
                    .trim()
                    .strip_prefix("#[path = \"")
                    .and_then(|t| t.strip_suffix("\"]"))
                else {
                    continue;
                };
                let Some(child) = lines[at + 1..].iter().find_map(|l| {
                    let l = l.trim();
                    let l = l.strip_prefix("pub ").unwrap_or(l);
                    l.strip_prefix("mod ")
                        .and_then(|rest| rest.strip_suffix(';'))
                }) else {
                    continue;
                };
                let target = format!("{folder}{target}");
                if let Some(file) = sources.iter().position(|(n, _)| *n == target) {
                    let mut module = module_of[index].clone();
                    module.push(child.trim().to_owned());
                    module_of[file] = module;
                }
            }
        }
        for (index, module) in module_of.iter().enumerate() {
            modules.insert(module.clone(), index);
        }
        let is_module = |path: &[String]| modules.contains_key(path);
        let named: Vec<Vec<Named>> = sources
            .iter()
            .enumerate()
            .map(|(index, (_, text))| {
                named_paths(&strip_literals(text), &module_of[index], &is_module)
            })
            .collect();
        // What each file's top-level `use` declarations bind: name → the path it stands for.
        let bound: Vec<BTreeMap<&str, &[String]>> = named
            .iter()
            .map(|paths| {
                paths
                    .iter()
                    .filter_map(|n| n.binds.as_deref().map(|name| (name, n.path.as_slice())))
                    .collect()
            })
            .collect();
        // The file defining what `path` names: the file of the longest prefix that is a module,
        // or, when the rest starts with a name that file imports (`pub use error::Error;` in a
        // `mod.rs`), the file that name comes from.
        let defining = |path: &[String]| {
            let mut path = path.to_vec();
            for _ in 0..16 {
                let (len, &file) = (0..=path.len())
                    .rev()
                    .find_map(|len| modules.get(&path[..len]).map(|f| (len, f)))?;
                match path
                    .get(len)
                    .and_then(|name| bound[file].get(name.as_str()))
                {
                    Some(through) if **through != path[..=len] => {
                        path = through.iter().chain(&path[len + 1..]).cloned().collect();
                    }
                    _ => return Some(file),
                }
            }
            None
        };
        let mut edges = vec![BTreeSet::new(); sources.len()];
        for (index, paths) in named.iter().enumerate() {
            for named in paths.iter().filter(|named| named.prefixed) {
                if let Some(target) = defining(&named.path)
                    && target != index
                {
                    edges[index].insert(target);
                }
            }
        }
        ImportGraph {
            files: sources.iter().map(|(name, _)| name.clone()).collect(),
            edges,
        }
    }

    /// The graph of the crate whose source folder is `dir`.
    fn read(dir: &Path) -> std::io::Result<ImportGraph> {
        let mut sources = Vec::new();
        for file in rust_files(dir)? {
            let name = file
                .strip_prefix(dir)
                .unwrap_or(&file)
                .to_string_lossy()
                .replace('\\', "/");
            sources.push((name, fs::read_to_string(&file)?));
        }
        Ok(ImportGraph::of(&sources))
    }

    /// The loops: strongly connected components of more than one file, each sorted, longest first.
    fn loops(&self) -> Vec<Vec<String>> {
        // Tarjan's algorithm, iterative.
        let n = self.files.len();
        let mut index = vec![usize::MAX; n];
        let mut low = vec![0; n];
        let mut on_stack = vec![false; n];
        let mut stack = Vec::new();
        let mut next = 0;
        let mut components = Vec::new();
        for start in 0..n {
            if index[start] != usize::MAX {
                continue;
            }
            let mut work: Vec<(usize, Vec<usize>)> = vec![(start, Vec::new())];
            index[start] = next;
            low[start] = next;
            next += 1;
            stack.push(start);
            on_stack[start] = true;
            work[0].1 = self.edges[start].iter().rev().copied().collect();
            while let Some((node, pending)) = work.last_mut() {
                let node = *node;
                if let Some(to) = pending.pop() {
                    if index[to] == usize::MAX {
                        index[to] = next;
                        low[to] = next;
                        next += 1;
                        stack.push(to);
                        on_stack[to] = true;
                        work.push((to, self.edges[to].iter().rev().copied().collect()));
                    } else if on_stack[to] {
                        low[node] = low[node].min(index[to]);
                    }
                    continue;
                }
                work.pop();
                if let Some((parent, _)) = work.last() {
                    low[*parent] = low[*parent].min(low[node]);
                }
                if low[node] == index[node] {
                    let mut component = Vec::new();
                    while let Some(member) = stack.pop() {
                        on_stack[member] = false;
                        component.push(self.files[member].clone());
                        if member == node {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort();
                        components.push(component);
                    }
                }
            }
        }
        components.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        components
    }
}

/// Fails naming the files of every loop of `graph` (the crate at `dir`) longer than `max`.
fn assert_no_loop_longer_than(graph: &ImportGraph, dir: &str, max: usize) {
    let loops = graph.loops();
    for found in &loops {
        println!(
            "{dir}: a loop of {} files: {}",
            found.len(),
            found.join(", ")
        );
    }
    let long: Vec<String> = loops
        .iter()
        .filter(|found| found.len() > max)
        .map(|found| format!("{} files: {}", found.len(), found.join(", ")))
        .collect();
    assert!(
        long.is_empty(),
        "files of {dir} import each other in a loop of more than {max} files; move what they \
         share into a module below them:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_long_import_loop_in_the_provider() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graph = ImportGraph::read(&root.join("src")).unwrap();
    assert_no_loop_longer_than(&graph, "src", MAX_LOOP_SRC);
}

#[test]
fn no_long_import_loop_in_the_test_api_server() {
    let (root, dir) = (Path::new(env!("CARGO_MANIFEST_DIR")), "e2e/apiserver/src");
    let graph = ImportGraph::read(&root.join(dir)).unwrap();
    assert_no_loop_longer_than(&graph, dir, MAX_LOOP_APISERVER);
}

/// The edges of `graph` as `from -> to` lines, sorted.
fn edge_lines(graph: &ImportGraph) -> Vec<String> {
    let mut lines = Vec::new();
    for (from, targets) in graph.edges.iter().enumerate() {
        for &to in targets {
            lines.push(format!("{} -> {}", graph.files[from], graph.files[to]));
        }
    }
    lines.sort();
    lines
}

#[test]
fn the_import_scan_sees_every_way_of_naming_a_module() {
    let file = |name: &str, text: &str| (name.to_owned(), text.to_owned());
    let graph = ImportGraph::of(&[
        file(
            "lib.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod e;\n",
        ),
        // A folder's mod.rs: its re-export is followed to the file defining the item.
        file(
            "a/mod.rs",
            "pub mod inner;\npub use inner::Thing;\npub struct Own;\n",
        ),
        // `super::super::`, and `self` in a group naming the group's prefix.
        file(
            "a/inner.rs",
            "use super::super::e::{self, Leaf};\npub struct Thing;\n",
        ),
        // A multi-line group with a nested group; the re-exported Thing goes to a/inner.rs.
        file(
            "b.rs",
            "use crate::{\n    a::{Own, Thing as Renamed},\n    c::{\n        self,\n    },\n};\n",
        ),
        // Paths in code, not in `use`; comments, strings and test modules do not count.
        file(
            "c.rs",
            "// use crate::d::Commented;\n\
             const S: &str = \"crate::d::Quoted\";\n\
             const R: &str = r#\"super::d::Raw\"#;\n\
             fn f() -> u8 { crate::d::g('x') }\n\
             #[cfg(test)]\nmod tests {\n    use crate::e::Leaf;\n}\n\
             #[path = \"c_tests.rs\"]\n#[cfg(test)]\nmod tests2;\n",
        ),
        // A `#[path]` test file is a child of c: its `super` is c.
        file("c_tests.rs", "use super::*;\n"),
        // A path starting with a child module's name (here an inline one) is no edge: see a/mod.rs.
        file(
            "d.rs",
            "pub fn g(c: char) -> u8 { inner::h(c) }\nmod inner { pub fn h(_: char) -> u8 { 0 } }\n",
        ),
        file("e.rs", "pub struct Leaf;\n"),
    ]);
    assert_eq!(
        edge_lines(&graph),
        [
            "a/inner.rs -> e.rs",
            "b.rs -> a/inner.rs",
            "b.rs -> a/mod.rs",
            "b.rs -> c.rs",
            "c.rs -> d.rs",
            "c_tests.rs -> c.rs",
        ]
    );
    assert!(graph.loops().is_empty());
}

#[test]
fn a_loop_is_named_by_its_files() {
    let file = |name: &str, text: &str| (name.to_owned(), text.to_owned());
    let graph = ImportGraph::of(&[
        file("lib.rs", "mod w;\nmod x;\nmod y;\nmod z;\nmod pair;\n"),
        file("w.rs", "use crate::x::X;\npub struct W;\n"),
        file("x.rs", "use super::y::Y;\npub struct X;\n"),
        file("y.rs", "pub struct Y(crate::z::Z);\n"),
        file("z.rs", "use crate::{w::W, pair};\npub struct Z;\n"),
        file(
            "pair/mod.rs",
            "mod one;\nuse self::one::One;\npub struct Pair;\n",
        ),
        file("pair/one.rs", "use super::Pair;\npub struct One;\n"),
    ]);
    assert_eq!(
        graph.loops(),
        [
            vec!["w.rs", "x.rs", "y.rs", "z.rs"],
            vec!["pair/mod.rs", "pair/one.rs"]
        ]
    );
}
