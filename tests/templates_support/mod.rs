//! Shared by the template tests: the templates, clusterctl's rendering, the CRD schemas they are
//! validated against, and the cross-reference checks.

pub mod cel;
#[cfg(test)]
mod class_tests;
#[cfg(test)]
mod dev_tests;
pub use capd_e2e::envsubst;
pub mod gotemplate;
#[cfg(test)]
mod inmemory_tests;
pub mod patches;
#[cfg(test)]
mod pool_tests;
pub mod readme;
pub mod refs;
pub mod schema;
#[cfg(test)]
mod schema_tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use schema::Problem;

/// What clusterctl sets for `clusterctl generate cluster demo --kubernetes-version v1.34.0
/// --control-plane-machine-count 1 --worker-machine-count 1` in namespace `default`.
pub const DEMO: [(&str, &str); 5] = [
    ("CLUSTER_NAME", "demo"),
    ("NAMESPACE", "default"),
    ("KUBERNETES_VERSION", "v1.34.0"),
    ("CONTROL_PLANE_MACHINE_COUNT", "1"),
    ("WORKER_MACHINE_COUNT", "1"),
];

/// The variables `clusterctl generate cluster` always sets from its arguments, with the book's
/// wording of their default (`docs/src/clusterctl.md`).
pub const FROM_CLUSTERCTL: [(&str, &str); 5] = [
    ("CLUSTER_NAME", "(required)"),
    ("NAMESPACE", "current namespace"),
    ("KUBERNETES_VERSION", "(required)"),
    ("CONTROL_PLANE_MACHINE_COUNT", "1"),
    ("WORKER_MACHINE_COUNT", "0"),
];

pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Cluster API's CRDs of release 1.12, outside the repository (never copied into it).
pub fn capi_crds_dir() -> PathBuf {
    repo_root().join("../shared/reference/crds/capi-release-1.12")
}

pub fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// File names of every `templates/*.yaml`, sorted (a new template is tested without a test edit).
pub fn template_files() -> Vec<String> {
    let dir = repo_root().join("templates");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("read a templates/ entry").file_name())
        .filter_map(|name| name.to_str().map(str::to_string))
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    files.sort();
    files
}

pub fn template_text(file: &str) -> String {
    let path = repo_root().join("templates").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Renders a template with clusterctl's rules and parses its documents.
pub fn render(file: &str, values: &BTreeMap<String, String>) -> Vec<Value> {
    let text = envsubst::render(&template_text(file), values)
        .unwrap_or_else(|e| panic!("clusterctl would not render {file}: {e}"));
    parse_documents(&text, file)
}

/// The documents of a multi-document YAML text, empty ones left out.
pub fn parse_documents(text: &str, what: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .unwrap_or_else(|e| panic!("{what} is not valid multi-document YAML: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

pub fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

pub fn describe(o: &Value) -> String {
    format!(
        "{} {} ({})",
        str_at(o, "/kind"),
        str_at(o, "/metadata/name"),
        str_at(o, "/apiVersion")
    )
}

/// The object of `kind` named `name` among `objects`.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| str_at(o, "/kind") == kind && str_at(o, "/metadata/name") == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// One served version of a kind.
pub struct Served {
    pub schema: Value,
    pub served: bool,
}

/// The CRD schemas templates are validated against: ours from `config/crd/bases/`, Cluster API's
/// from [`capi_crds_dir`] when that folder exists.
pub struct Crds {
    /// (group, kind) → version → schema.
    kinds: BTreeMap<(String, String), BTreeMap<String, Served>>,
    pub capi_present: bool,
}

pub fn crds() -> &'static Crds {
    static CRDS: OnceLock<Crds> = OnceLock::new();
    CRDS.get_or_init(|| {
        let mut crds = Crds {
            kinds: BTreeMap::new(),
            capi_present: capi_crds_dir().is_dir(),
        };
        crds.load_dir(&repo_root().join("config/crd/bases"));
        if crds.capi_present {
            crds.load_dir(&capi_crds_dir());
        }
        crds
    })
}

/// The group of an apiVersion (`""` for the core group).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

impl Crds {
    fn load_dir(&mut self, dir: &Path) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("read a CRD folder entry").path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            for crd in parse_documents(&text, &path.display().to_string()) {
                let group = str_at(&crd, "/spec/group").to_string();
                let kind = str_at(&crd, "/spec/names/kind").to_string();
                let versions = crd["spec"]["versions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let entry = self.kinds.entry((group, kind)).or_default();
                for v in versions {
                    entry.insert(
                        str_at(&v, "/name").to_string(),
                        Served {
                            schema: v["schema"]["openAPIV3Schema"].clone(),
                            served: v["served"] == Value::Bool(true),
                        },
                    );
                }
            }
        }
    }

    /// Whether the kind's schemas are at hand (Cluster API kinds only when the folder exists).
    pub fn knows_group(&self, group: &str) -> bool {
        group == "infrastructure.cluster.x-k8s.io" || self.capi_present
    }

    /// The schema of a served version, or why there is none.
    pub fn schema(&self, api_version: &str, kind: &str) -> Result<&Value, String> {
        let (group, version) = api_version
            .rsplit_once('/')
            .ok_or_else(|| format!("apiVersion {api_version:?} names no group"))?;
        let versions = self
            .kinds
            .get(&(group.to_string(), kind.to_string()))
            .ok_or_else(|| format!("no CRD defines {kind} in group {group}"))?;
        match versions.get(version) {
            Some(v) if v.served => Ok(&v.schema),
            Some(_) => Err(format!("{kind} {version} is not served")),
            None => Err(format!(
                "{kind} has no version {version} (known: {})",
                versions.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// Problems of one object against its CRD; `None` when its group's CRDs are absent.
    pub fn validate(&self, object: &Value) -> Option<Vec<Problem>> {
        let api_version = str_at(object, "/apiVersion");
        if !self.knows_group(group_of(api_version)) {
            return None;
        }
        Some(match self.schema(api_version, str_at(object, "/kind")) {
            Ok(schema) => schema::validate_object(object, schema),
            Err(e) => vec![Problem {
                path: "apiVersion".into(),
                message: e,
            }],
        })
    }
}

/// Prints why a test skips the Cluster API kinds; `true` when they are absent.
pub fn skip_capi(test: &str) -> bool {
    let absent = !crds().capi_present;
    if absent {
        println!(
            "{test}: SKIPPING the Cluster API kinds: {} is absent (the shared reference CRDs are \
             not beside this checkout); only the capd-rs kinds are validated",
            capi_crds_dir().display()
        );
    }
    absent
}

/// Validates every object, returning `file: Kind name: path: message` lines, and how many objects
/// were left out because their CRDs are absent.
pub fn problems_of(file: &str, objects: &[Value]) -> (Vec<String>, usize) {
    let mut lines = Vec::new();
    let mut skipped = 0;
    for object in objects {
        match crds().validate(object) {
            Some(problems) => lines.extend(
                problems
                    .into_iter()
                    .map(|p| format!("{file}: {}: {p}", describe(object))),
            ),
            None => skipped += 1,
        }
    }
    (lines, skipped)
}

/// The template file of a flavor (`""` is the default template), as clusterctl names it.
pub fn flavor_file(flavor: &str) -> String {
    if flavor.is_empty() {
        "cluster-template.yaml".into()
    } else {
        format!("cluster-template-{flavor}.yaml")
    }
}

/// What `clusterctl generate cluster --flavor FLAVOR` prints against an empty management cluster:
/// the rendered template, plus `clusterclass-<class>.yaml` rendered with the same variables for
/// each class its topology Clusters use that it does not define, and every object moved to the
/// target namespace (`NAMESPACE`).
pub fn generate(flavor: &str, values: &BTreeMap<String, String>) -> Vec<Value> {
    with_classes(render(&flavor_file(flavor), values), values)
}

/// The rendered objects of a cluster template as `clusterctl generate cluster` completes them: the
/// classes its topology Clusters use added, every object in the target namespace.
pub fn with_classes(mut objects: Vec<Value>, values: &BTreeMap<String, String>) -> Vec<Value> {
    let mut classes: Vec<String> = objects
        .iter()
        .filter(|o| str_at(o, "/kind") == "Cluster")
        .map(|o| str_at(o, "/spec/topology/classRef/name").to_string())
        .filter(|name| !name.is_empty())
        .collect();
    classes.sort();
    classes.dedup();
    for class in classes {
        let defined = objects
            .iter()
            .any(|o| str_at(o, "/kind") == "ClusterClass" && str_at(o, "/metadata/name") == class);
        if !defined {
            objects.extend(render(&format!("clusterclass-{class}.yaml"), values));
        }
    }
    let namespace = values.get("NAMESPACE").cloned().unwrap_or_default();
    for o in &mut objects {
        o["metadata"]["namespace"] = Value::String(namespace.clone());
    }
    objects
}

/// The variables of [`DEMO`].
pub fn demo() -> BTreeMap<String, String> {
    values(&DEMO)
}

/// The flavors of the shipped `cluster-template*.yaml` files (`""` for the default one).
pub fn flavors() -> Vec<String> {
    template_files()
        .iter()
        .filter_map(|f| f.strip_prefix("cluster-template")?.strip_suffix(".yaml"))
        .map(|f| f.trim_start_matches('-').to_string())
        .collect()
}

/// Fails with every problem listed.
pub fn assert_clean(what: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{what}: {} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
