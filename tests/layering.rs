//! The crate's layering: the manager (`src/manager/`) is the process wiring on top, and nothing
//! below it imports it. What the controllers, webhooks and Gardener extension share with the
//! manager lives in `src/runtime/`. Only `src/main.rs` (the binary) and `src/lib.rs` (which
//! declares the module) may name `crate::manager` or `capd::manager` outside `src/manager/`.

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
