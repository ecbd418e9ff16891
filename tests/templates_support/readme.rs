//! The documentation the template tests keep in step with the templates: the tables of the book's
//! chapter on clusterctl variables and flavors, and the README's quick start.

use std::collections::BTreeMap;

use super::{repo_root, values};

/// The book's chapter holding the "Flavors" and "Template variables" tables.
pub const CHAPTER: &str = "docs/src/clusterctl.md";

/// The cells of the rows of the chapter's table under the heading `section`, header and separator
/// left out.
fn table(section: &str) -> Vec<Vec<String>> {
    let chapter = std::fs::read_to_string(repo_root().join(CHAPTER))
        .unwrap_or_else(|e| panic!("read {CHAPTER}: {e}"));
    let mut rows = Vec::new();
    let mut inside = false;
    for line in chapter.lines() {
        if line.starts_with('#') {
            inside = line.trim_start_matches('#').trim() == section;
            continue;
        }
        if inside && line.starts_with('|') && !line.starts_with("|---") {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            rows.push(
                cells[1..cells.len() - 1]
                    .iter()
                    .map(|c| c.to_string())
                    .collect(),
            );
        }
    }
    assert!(rows.len() > 1, "{CHAPTER} has no {section} table");
    rows.remove(0);
    rows
}

/// The chapter's "Template variables" rows: name → (default, templates column).
pub fn template_variables() -> BTreeMap<String, (String, String)> {
    let mut rows = BTreeMap::new();
    for cells in table("Template variables") {
        if let Some(name) = cells[0].strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
            let default = cells[1].trim_matches('`').to_string();
            rows.insert(name.to_string(), (default, cells[2].clone()));
        }
    }
    rows
}

/// The chapter's "Flavors" rows: (flavor, `""` for `(none)`; template file).
pub fn flavors() -> Vec<(String, String)> {
    table("Flavors")
        .into_iter()
        .map(|cells| {
            let flavor = match cells[0].as_str() {
                "(none)" => String::new(),
                other => other.trim_matches('`').to_string(),
            };
            (flavor, cells[1].trim_matches('`').to_string())
        })
        .collect()
}

/// The variables of the README's quick-start `clusterctl generate cluster` command, and its flavor.
pub fn quick_start() -> (String, BTreeMap<String, String>) {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("read README.md");
    let start = readme
        .find("clusterctl generate cluster ")
        .expect("the README's quick start runs clusterctl generate cluster");
    let command: String = readme[start..]
        .lines()
        .map(|l| l.trim().trim_end_matches('\\'))
        .take_while(|l| !l.starts_with('|'))
        .collect::<Vec<_>>()
        .join(" ")
        .split('|')
        .next()
        .unwrap_or("")
        .to_string();
    let words: Vec<&str> = command.split_whitespace().skip(3).collect();
    let mut v = values(&[
        ("NAMESPACE", "default"),
        ("CONTROL_PLANE_MACHINE_COUNT", "1"),
        ("WORKER_MACHINE_COUNT", "0"),
    ]);
    v.insert("CLUSTER_NAME".into(), words[0].to_string());
    let mut flavor = String::new();
    for pair in words[1..].chunks(2) {
        let (flag, value) = (pair[0], pair.get(1).copied().unwrap_or(""));
        let (flag, value) = flag.split_once('=').unwrap_or((flag, value));
        let name = match flag {
            "--flavor" => {
                flavor = value.to_string();
                continue;
            }
            "--kubernetes-version" => "KUBERNETES_VERSION",
            "--control-plane-machine-count" => "CONTROL_PLANE_MACHINE_COUNT",
            "--worker-machine-count" => "WORKER_MACHINE_COUNT",
            "--target-namespace" | "-n" => "NAMESPACE",
            other => panic!("the README's quick start uses {other}, which this test does not know"),
        };
        v.insert(name.into(), value.to_string());
    }
    (flavor, v)
}
