//! The README's parts the template tests keep in step with the templates.

use std::collections::BTreeMap;

use super::{repo_root, values};

/// The README's "Template variables" rows: name → (default, templates column).
pub fn template_variables() -> BTreeMap<String, (String, String)> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("read README.md");
    let mut rows = BTreeMap::new();
    let mut inside = false;
    for line in readme.lines() {
        if line.starts_with('#') {
            inside = line.contains("Template variables");
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if !inside || cells.len() < 6 {
            continue;
        }
        if let Some(name) = cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
            let default = cells[2].trim_matches('`').to_string();
            rows.insert(name.to_string(), (default, cells[3].to_string()));
        }
    }
    assert!(
        !rows.is_empty(),
        "README.md has no Template variables table"
    );
    rows
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
