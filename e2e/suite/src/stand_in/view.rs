//! The stand-in's live view: a few lines in the manner of `clusterctl describe cluster`, the
//! Cluster, its infrastructure and its Machines with their `Ready` conditions, redrawn in place on
//! a terminal and printed again when it changed otherwise.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use kube::api::DynamicObject;
use serde_json::Value;

use crate::core::{condition, is_control_plane};

/// What the view shows of one cluster.
#[derive(Debug, Default)]
pub struct Objects {
    /// The Cluster.
    pub cluster: Option<DynamicObject>,
    /// Its DockerCluster.
    pub infra_cluster: Option<DynamicObject>,
    /// Its Machines, control planes first, each with its DockerMachine.
    pub machines: Vec<(DynamicObject, Option<DynamicObject>)>,
}

/// The longest message shown, in characters.
const MESSAGE_WIDTH: usize = 60;

/// One line of the view: tree prefix and name, then `Ready` status, reason and message.
struct Row {
    name: String,
    ready: String,
    reason: String,
    message: String,
}

impl Row {
    fn new(name: String, (ready, reason, message): (String, String, String)) -> Row {
        Row {
            name,
            ready,
            reason,
            message,
        }
    }
}

fn deleting(object: &DynamicObject) -> bool {
    object.metadata.deletion_timestamp.is_some()
}

/// Status, reason and message of an object's `Ready` condition ("Deleting" while it is).
fn ready(object: &DynamicObject) -> (String, String, String) {
    let text = |c: &Value, key: &str| c[key].as_str().unwrap_or_default().to_string();
    let (status, reason, message) = match condition(object, "Ready") {
        Some(c) => (text(&c, "status"), text(&c, "reason"), text(&c, "message")),
        None => ("Unknown".into(), "Pending".into(), String::new()),
    };
    if deleting(object) {
        return (status, "Deleting".into(), message);
    }
    (status, reason, message)
}

/// The Cluster's state as the stand-in (playing core) set it.
fn cluster_state(cluster: &DynamicObject) -> (String, String, String) {
    let init = &cluster.data["status"]["initialization"];
    let (status, reason) = if deleting(cluster) {
        ("False", "Deleting")
    } else if init["controlPlaneInitialized"] == Value::Bool(true) {
        ("True", "ControlPlaneInitialized")
    } else if init["infrastructureProvisioned"] == Value::Bool(true) {
        ("False", "WaitingForControlPlane")
    } else {
        ("False", "WaitingForInfrastructure")
    };
    (status.into(), reason.into(), String::new())
}

fn machine_rows(
    rows: &mut Vec<Row>,
    indent: &str,
    machines: &[&(DynamicObject, Option<DynamicObject>)],
) {
    for (i, (machine, infra)) in machines.iter().enumerate() {
        let branch = if i + 1 == machines.len() {
            "└─"
        } else {
            "├─"
        };
        let name = machine.metadata.name.as_deref().unwrap_or_default();
        let state = match infra {
            Some(infra) => ready(infra),
            None if deleting(machine) => ("False".into(), "Deleting".into(), String::new()),
            None => (
                "False".into(),
                "WaitingForInfrastructure".into(),
                String::new(),
            ),
        };
        rows.push(Row::new(format!("{indent}{branch}Machine/{name}"), state));
    }
}

/// The view's lines: a header, then the tree of the cluster's objects.
pub fn render(name: &str, objects: &Objects) -> Vec<String> {
    let mut rows = Vec::new();
    let Some(cluster) = &objects.cluster else {
        return vec![format!("Cluster/{name}: not there (yet)")];
    };
    rows.push(Row::new(format!("Cluster/{name}"), cluster_state(cluster)));
    let infra = match &objects.infra_cluster {
        Some(infra) => (
            format!("├─ClusterInfrastructure - {}/{name}", kind_of(infra)),
            ready(infra),
        ),
        None => (
            "├─ClusterInfrastructure".to_string(),
            ("False".into(), "NotCreated".into(), String::new()),
        ),
    };
    rows.push(Row::new(infra.0, infra.1));
    let (control_planes, workers): (Vec<_>, Vec<_>) = objects
        .machines
        .iter()
        .partition(|(m, _)| is_control_plane(m));
    rows.push(Row::new("├─ControlPlane".into(), Default::default()));
    machine_rows(&mut rows, "│ ", &control_planes);
    rows.push(Row::new("└─Workers".into(), Default::default()));
    machine_rows(&mut rows, "  ", &workers);

    let width = |f: fn(&Row) -> &String, title: &str| {
        rows.iter()
            .map(|r| f(r).chars().count())
            .chain([title.len()])
            .max()
            .unwrap_or_default()
    };
    let (name_w, ready_w, reason_w) = (
        width(|r| &r.name, "NAME"),
        width(|r| &r.ready, "READY"),
        width(|r| &r.reason, "REASON"),
    );
    let line = |name: &str, ready: &str, reason: &str, message: &str| {
        let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w - s.chars().count()));
        format!(
            "{}  {}  {}  {message}",
            pad(name, name_w),
            pad(ready, ready_w),
            pad(reason, reason_w)
        )
        .trim_end()
        .to_string()
    };
    let mut lines = vec![line("NAME", "READY", "REASON", "MESSAGE")];
    for row in &rows {
        lines.push(line(
            &row.name,
            &row.ready,
            &row.reason,
            &short(&row.message),
        ));
    }
    lines
}

fn kind_of(object: &DynamicObject) -> &str {
    object
        .types
        .as_ref()
        .map(|t| t.kind.as_str())
        .unwrap_or("DockerCluster")
}

/// A message on one line, cut to [`MESSAGE_WIDTH`] characters.
fn short(message: &str) -> String {
    let one_line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= MESSAGE_WIDTH {
        return one_line;
    }
    let cut: String = one_line.chars().take(MESSAGE_WIDTH - 1).collect();
    format!("{cut}…")
}

/// Where the view is printed: redrawn in place on a terminal, printed again below (with the time
/// since the start) when it changed otherwise.
pub struct Screen {
    terminal: bool,
    shown: Vec<String>,
    drawn: usize,
    started: Instant,
}

impl Default for Screen {
    fn default() -> Self {
        Self::new(std::io::stdout().is_terminal())
    }
}

impl Screen {
    /// A screen that redraws in place when `terminal`.
    pub fn new(terminal: bool) -> Screen {
        Screen {
            terminal,
            shown: Vec::new(),
            drawn: 0,
            started: Instant::now(),
        }
    }

    /// Shows `lines` when they differ from what is shown.
    pub fn show(&mut self, lines: Vec<String>) {
        if lines == self.shown {
            return;
        }
        let mut out = String::new();
        if self.terminal && self.drawn > 0 {
            // Up to the view's first line, and clear to the end of the screen.
            out.push_str(&format!("\x1b[{}A\x1b[J", self.drawn));
        }
        if !self.terminal {
            out.push_str(&format!(
                "[{:5.1}s]\n",
                self.started.elapsed().as_secs_f64()
            ));
        }
        for line in &lines {
            out.push_str(line);
            out.push('\n');
        }
        print!("{out}");
        let _ = std::io::stdout().flush();
        self.drawn = lines.len() + usize::from(!self.terminal);
        self.shown = lines;
    }

    /// Prints `text` below the view; the view is drawn again under it at its next change.
    pub fn say(&mut self, text: &str) {
        println!("{text}");
        self.drawn = 0;
        self.shown.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    fn ready_condition(status: &str, reason: &str, message: &str) -> Value {
        json!({"status": {"conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message}]}})
    }

    fn machine(name: &str, control_plane: bool) -> DynamicObject {
        let labels = if control_plane {
            json!({"cluster.x-k8s.io/control-plane": ""})
        } else {
            json!({})
        };
        object(
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": name, "labels": labels}}),
        )
    }

    fn docker_object(kind: &str, name: &str, status: Value) -> DynamicObject {
        let mut value = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": name}});
        value["status"] = status["status"].clone();
        object(value)
    }

    #[test]
    fn a_cluster_being_built_reads_like_clusterctl_describe() {
        let objects = Objects {
            cluster: Some(object(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "metadata": {"name": "demo"},
                "status": {"initialization": {"infrastructureProvisioned": true}}
            }))),
            infra_cluster: Some(docker_object(
                "DockerCluster",
                "demo",
                ready_condition("True", "Ready", ""),
            )),
            machines: vec![
                (
                    machine("control-plane-0", true),
                    Some(docker_object(
                        "DockerMachine",
                        "control-plane-0",
                        ready_condition(
                            "False",
                            "BootstrapRunning",
                            "running the bootstrap\ncommands (2 of 5)",
                        ),
                    )),
                ),
                (machine("worker-0", false), None),
            ],
        };
        assert_eq!(
            render("demo", &objects),
            vec![
                "NAME                                          READY  REASON                    MESSAGE",
                "Cluster/demo                                  False  WaitingForControlPlane",
                "├─ClusterInfrastructure - DockerCluster/demo  True   Ready",
                "├─ControlPlane",
                "│ └─Machine/control-plane-0                   False  BootstrapRunning          running the bootstrap commands (2 of 5)",
                "└─Workers",
                "  └─Machine/worker-0                          False  WaitingForInfrastructure",
            ]
        );
    }

    #[test]
    fn deletion_and_long_messages_show_on_one_short_line() {
        let mut dm = docker_object(
            "DockerMachine",
            "worker-0",
            ready_condition("True", "Ready", &"x".repeat(100)),
        );
        dm.metadata.deletion_timestamp =
            serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap();
        let objects = Objects {
            cluster: Some(object(
                json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "demo"}}),
            )),
            infra_cluster: None,
            machines: vec![(machine("worker-0", false), Some(dm))],
        };
        let lines = render("demo", &objects);
        assert!(lines[1].contains("WaitingForInfrastructure"), "{lines:?}");
        assert!(lines[2].contains("├─ClusterInfrastructure") && lines[2].contains("NotCreated"));
        let worker = lines.last().unwrap();
        assert!(worker.contains("Deleting"), "{worker}");
        assert!(
            worker.ends_with(&format!("{}…", "x".repeat(MESSAGE_WIDTH - 1))),
            "{worker}"
        );
    }

    #[test]
    fn no_cluster_is_one_line() {
        assert_eq!(
            render("demo", &Objects::default()),
            vec!["Cluster/demo: not there (yet)"]
        );
    }
}
