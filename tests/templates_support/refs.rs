//! Cross-references inside a set of objects that make one cluster: every reference points to an
//! object of the set with the kind, group (or apiVersion) and name it names, a topology Cluster uses
//! only classes (of machine deployments and machine pools) and variables its ClusterClass defines,
//! and every ClusterClass patch selects a template of the class and writes to a path the template's
//! schema has.

use serde_json::Value;

use super::schema::{self, Problem};
use super::{Crds, describe, group_of, str_at};

fn items<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn namespace_of(o: &Value) -> &str {
    str_at(o, "/metadata/namespace")
}

/// Every cross-reference problem of `objects`, one line each.
pub fn check(objects: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for o in objects {
        let mut refs: Vec<String> = match str_at(o, "/kind") {
            "Cluster" => vec![
                "/spec/infrastructureRef".into(),
                "/spec/controlPlaneRef".into(),
            ],
            "KubeadmControlPlane" => vec!["/spec/machineTemplate/spec/infrastructureRef".into()],
            "MachineDeployment" | "MachinePool" => vec![
                "/spec/template/spec/bootstrap/configRef".into(),
                "/spec/template/spec/infrastructureRef".into(),
            ],
            _ => Vec::new(),
        };
        refs.retain(|p| o.pointer(p).is_some());
        for pointer in refs {
            if let Err(e) = contract_ref(objects, o, &pointer) {
                problems.push(format!("{}: {pointer}: {e}", describe(o)));
            }
        }
        match str_at(o, "/kind") {
            "MachineDeployment" | "MachinePool" => cluster_name(objects, o, &mut problems),
            "ClusterClass" => {
                for (pointer, _) in class_template_refs(o) {
                    if let Err(e) = template_ref(objects, o, &pointer) {
                        problems.push(format!("{}: {pointer}: {e}", describe(o)));
                    }
                }
                patch_selections(o, &mut problems);
            }
            "Cluster" if o.pointer("/spec/topology").is_some() => {
                topology(objects, o, &mut problems)
            }
            _ => {}
        }
    }
    problems
}

/// A v1beta2 contract reference `{apiGroup, kind, name}` to an object in the same namespace.
fn contract_ref(objects: &[Value], from: &Value, pointer: &str) -> Result<(), String> {
    let r = from.pointer(pointer).unwrap_or(&Value::Null);
    let (group, kind, name) = (
        str_at(r, "/apiGroup"),
        str_at(r, "/kind"),
        str_at(r, "/name"),
    );
    let found = objects.iter().any(|o| {
        group_of(str_at(o, "/apiVersion")) == group
            && str_at(o, "/kind") == kind
            && str_at(o, "/metadata/name") == name
            && namespace_of(o) == namespace_of(from)
    });
    if found {
        Ok(())
    } else {
        Err(format!(
            "refers to {kind} {name:?} of group {group:?}, which is not defined next to it"
        ))
    }
}

/// A ClusterClass template reference `{apiVersion, kind, name}`.
fn template_ref(objects: &[Value], class: &Value, pointer: &str) -> Result<(), String> {
    let r = class.pointer(pointer).unwrap_or(&Value::Null);
    let (api_version, kind, name) = (
        str_at(r, "/apiVersion"),
        str_at(r, "/kind"),
        str_at(r, "/name"),
    );
    let found = objects.iter().any(|o| {
        str_at(o, "/apiVersion") == api_version
            && str_at(o, "/kind") == kind
            && str_at(o, "/metadata/name") == name
            && namespace_of(o) == namespace_of(class)
    });
    if found {
        Ok(())
    } else {
        Err(format!(
            "refers to {kind} {name:?} ({api_version}), which is not defined next to it"
        ))
    }
}

/// One kind of worker class of a ClusterClass and how Cluster API names it.
pub struct Workers {
    /// The list under `spec.workers` (class) and `spec.topology.workers` (Cluster).
    pub field: &'static str,
    /// The role of its templates: the prefix of `<prefix><class>`.
    pub role_prefix: &'static str,
    /// The patch selector's `matchResources` field that names its classes.
    pub selector: &'static str,
    /// The `builtin` variable its templates are patched with.
    pub builtin: &'static str,
    /// How a message names one of them.
    pub what: &'static str,
}

pub const WORKERS: [Workers; 2] = [
    Workers {
        field: "machineDeployments",
        role_prefix: "md:",
        selector: "machineDeploymentClass",
        builtin: "machineDeployment",
        what: "machine deployment",
    },
    Workers {
        field: "machinePools",
        role_prefix: "mp:",
        selector: "machinePoolClass",
        builtin: "machinePool",
        what: "machine pool",
    },
];

/// The worker kind and class of a worker role (`md:<class>`, `mp:<class>`); `None` for the others.
pub fn worker_role(role: &str) -> Option<(&'static Workers, &str)> {
    WORKERS
        .iter()
        .find_map(|w| role.strip_prefix(w.role_prefix).map(|class| (w, class)))
}

/// The template references of a ClusterClass, with what a patch selector matches them by:
/// `controlPlane`, `infrastructureCluster`, `md:<class>` or `mp:<class>`.
pub fn class_template_refs(class: &Value) -> Vec<(String, String)> {
    let mut refs = vec![
        (
            "/spec/infrastructure/templateRef".to_string(),
            "infrastructureCluster".to_string(),
        ),
        (
            "/spec/controlPlane/templateRef".into(),
            "controlPlane".into(),
        ),
    ];
    if class
        .pointer("/spec/controlPlane/machineInfrastructure")
        .is_some()
    {
        refs.push((
            "/spec/controlPlane/machineInfrastructure/templateRef".into(),
            "controlPlane".into(),
        ));
    }
    for workers in &WORKERS {
        let field = workers.field;
        for (i, worker) in items(class, &format!("/spec/workers/{field}"))
            .iter()
            .enumerate()
        {
            let role = format!("{}{}", workers.role_prefix, str_at(worker, "/class"));
            for part in ["bootstrap", "infrastructure"] {
                refs.push((
                    format!("/spec/workers/{field}/{i}/{part}/templateRef"),
                    role.clone(),
                ));
            }
        }
    }
    refs
}

/// The Cluster of a MachineDeployment or MachinePool, and of its machine template.
fn cluster_name(objects: &[Value], workers: &Value, problems: &mut Vec<String>) {
    for pointer in ["/spec/clusterName", "/spec/template/spec/clusterName"] {
        let name = str_at(workers, pointer);
        let found = objects.iter().any(|o| {
            str_at(o, "/kind") == "Cluster"
                && str_at(o, "/metadata/name") == name
                && namespace_of(o) == namespace_of(workers)
        });
        if !found {
            problems.push(format!(
                "{}: {pointer}: no Cluster {name:?} next to it",
                describe(workers)
            ));
        }
    }
}

/// Names a Go template or `enabledIf` reads at its top level (`.name`, `.builtin`).
pub fn template_names(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    for action in template.split("{{").skip(1) {
        let action = action.split("}}").next().unwrap_or("");
        let mut rest = action;
        while let Some(at) = rest.find('.') {
            let before = rest[..at].chars().last();
            let after = &rest[at + 1..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let starts_field = before.is_none_or(|c| c.is_whitespace() || c == '(');
            if starts_field && !name.is_empty() && !names.contains(&name) {
                names.push(name);
            }
            rest = after;
        }
    }
    names
}

/// Patch selectors select templates the class uses; variables they read are defined.
fn patch_selections(class: &Value, problems: &mut Vec<String>) {
    let defined: Vec<&str> = items(class, "/spec/variables")
        .iter()
        .map(|v| str_at(v, "/name"))
        .collect();
    let known = |name: &str| name == "builtin" || defined.contains(&name);
    let targets: Vec<(Value, String)> = class_template_refs(class)
        .into_iter()
        .filter_map(|(p, role)| class.pointer(&p).map(|r| (r.clone(), role)))
        .collect();
    for (p, patch) in items(class, "/spec/patches").iter().enumerate() {
        let at = format!("{}: patch {:?}", describe(class), str_at(patch, "/name"));
        for name in template_names(str_at(patch, "/enabledIf")) {
            if !known(&name) {
                problems.push(format!("{at}: enabledIf reads undefined variable {name:?}"));
            }
        }
        for (d, def) in items(patch, "/definitions").iter().enumerate() {
            let selector = &def["selector"];
            let roles = selected_roles(selector);
            let hits = targets.iter().any(|(r, role)| {
                str_at(r, "/apiVersion") == str_at(selector, "/apiVersion")
                    && str_at(r, "/kind") == str_at(selector, "/kind")
                    && roles.contains(role)
            });
            if !hits {
                problems.push(format!(
                    "{at}: definitions[{d}] selects no template of the class ({} {} for {roles:?}); \
                     patch {p} would never apply",
                    str_at(selector, "/kind"),
                    str_at(selector, "/apiVersion"),
                ));
            }
            for (j, json_patch) in items(def, "/jsonPatches").iter().enumerate() {
                let variable = str_at(json_patch, "/valueFrom/variable");
                let mut read = template_names(str_at(json_patch, "/valueFrom/template"));
                if !variable.is_empty() {
                    read.push(variable.split('.').next().unwrap_or("").to_string());
                }
                for name in read.iter().filter(|n| !known(n)) {
                    problems.push(format!(
                        "{at}: definitions[{d}].jsonPatches[{j}] reads undefined variable {name:?}"
                    ));
                }
            }
        }
    }
}

fn selected_roles(selector: &Value) -> Vec<String> {
    let mut roles = Vec::new();
    for flag in ["controlPlane", "infrastructureCluster"] {
        if selector.pointer(&format!("/matchResources/{flag}")) == Some(&Value::Bool(true)) {
            roles.push(flag.to_string());
        }
    }
    for workers in &WORKERS {
        let names = format!("/matchResources/{}/names", workers.selector);
        for name in items(selector, &names) {
            roles.push(format!(
                "{}{}",
                workers.role_prefix,
                name.as_str().unwrap_or("")
            ));
        }
    }
    roles
}

/// A topology Cluster: its class exists, its machine deployments and machine pools use classes of
/// it, its variables are defined by it, and the required ones without a default are set.
fn topology(objects: &[Value], cluster: &Value, problems: &mut Vec<String>) {
    let class_name = str_at(cluster, "/spec/topology/classRef/name");
    let class_namespace = cluster
        .pointer("/spec/topology/classRef/namespace")
        .and_then(Value::as_str)
        .unwrap_or(namespace_of(cluster));
    let Some(class) = objects.iter().find(|o| {
        str_at(o, "/kind") == "ClusterClass"
            && str_at(o, "/metadata/name") == class_name
            && namespace_of(o) == class_namespace
    }) else {
        problems.push(format!(
            "{}: /spec/topology/classRef: no ClusterClass {class_name:?} in namespace {class_namespace:?}",
            describe(cluster)
        ));
        return;
    };
    for workers in &WORKERS {
        let classes: Vec<&str> = items(class, &format!("/spec/workers/{}", workers.field))
            .iter()
            .map(|c| str_at(c, "/class"))
            .collect();
        for worker in items(
            cluster,
            &format!("/spec/topology/workers/{}", workers.field),
        ) {
            let name = str_at(worker, "/class");
            if !classes.contains(&name) {
                problems.push(format!(
                    "{}: {} {:?} uses class {name:?}, which {class_name} does not define",
                    describe(cluster),
                    workers.what,
                    str_at(worker, "/name")
                ));
            }
        }
    }
    for p in variable_problems(class, items(cluster, "/spec/topology/variables")) {
        problems.push(format!("{}: {p}", describe(cluster)));
    }
}

/// Checks Cluster topology variables against the ClusterClass variable definitions with the schema
/// validator: names defined, values valid, required variables without a default present.
pub fn variable_problems(class: &Value, set: &[Value]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let definitions = items(class, "/spec/variables");
    for (i, variable) in set.iter().enumerate() {
        let name = str_at(variable, "/name");
        let path = format!("spec.topology.variables[{i}].value");
        match definitions.iter().find(|d| str_at(d, "/name") == name) {
            Some(def) => problems.extend(schema::validate_value(
                &variable["value"],
                &def["schema"]["openAPIV3Schema"],
                &path,
            )),
            None => problems.push(Problem {
                path: format!("spec.topology.variables[{i}]"),
                message: format!("variable {name:?} is not defined by the ClusterClass"),
            }),
        }
    }
    for def in definitions {
        let name = str_at(def, "/name");
        let required = def["required"] == Value::Bool(true);
        let defaulted = def.pointer("/schema/openAPIV3Schema/default").is_some();
        let present = set.iter().any(|v| str_at(v, "/name") == name);
        if required && !defaulted && !present {
            problems.push(Problem {
                path: "spec.topology.variables".into(),
                message: format!("required variable {name:?} is not set"),
            });
        }
    }
    problems
}

/// The schema under a JSON pointer, walking `properties`, `additionalProperties` and `items`
/// (`-` or an index); `Err` names the first segment the schema does not have.
pub fn schema_at<'a>(schema: &'a Value, pointer: &str) -> Result<&'a Value, String> {
    let mut at = schema;
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        let next = if at.get("type").and_then(Value::as_str) == Some("array") {
            (segment == "-" || segment.parse::<usize>().is_ok())
                .then(|| at.get("items"))
                .flatten()
        } else {
            at.pointer(&format!("/properties/{}", segment.replace('/', "~1")))
                .or(at.get("additionalProperties").filter(|a| a.is_object()))
        };
        at = next.ok_or_else(|| format!("the schema has no {segment:?} in {pointer}"))?;
    }
    Ok(at)
}

/// Every ClusterClass JSON patch writes to a path its target kind has, and a literal `value` is
/// valid there; a `valueFrom.variable` has the type of the target field.
pub fn patch_path_problems(class: &Value, crds: &Crds) -> Vec<String> {
    let mut problems = Vec::new();
    let variables = items(class, "/spec/variables");
    for patch in items(class, "/spec/patches") {
        for (d, def) in items(patch, "/definitions").iter().enumerate() {
            let api_version = str_at(def, "/selector/apiVersion");
            let kind = str_at(def, "/selector/kind");
            let at = format!("patch {:?} definitions[{d}]", str_at(patch, "/name"));
            if !crds.knows_group(group_of(api_version)) {
                continue;
            }
            let root = match crds.schema(api_version, kind) {
                Ok(root) => root,
                Err(e) => {
                    problems.push(format!("{at}: {e}"));
                    continue;
                }
            };
            for json_patch in items(def, "/jsonPatches") {
                let path = str_at(json_patch, "/path");
                let target = match schema_at(root, path) {
                    Ok(target) => target,
                    Err(e) => {
                        problems.push(format!("{at}: {kind}: {e}"));
                        continue;
                    }
                };
                if let Some(value) = json_patch.get("value") {
                    for p in schema::validate_value(value, target, path) {
                        problems.push(format!("{at}: value: {p}"));
                    }
                }
                let variable = str_at(json_patch, "/valueFrom/variable");
                if let Some(def) = variables.iter().find(|v| str_at(v, "/name") == variable) {
                    let from = str_at(def, "/schema/openAPIV3Schema/type");
                    let to = str_at(target, "/type");
                    if from != to {
                        problems.push(format!(
                            "{at}: variable {variable:?} is a {from}, {kind} {path} takes a {to}"
                        ));
                    }
                }
            }
        }
    }
    problems
}
