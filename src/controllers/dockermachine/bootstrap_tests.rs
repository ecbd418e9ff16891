//! Scenario tests of the bootstrap task against the fake runtime, with a simulated runner in the
//! node (the runner script itself is tested with a real shell in `runner_tests`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::bootstrap::{BootstrapJob, run};
use crate::bootstrap::{Command, Plan};
use crate::controllers::tasks::{TaskKind, TaskRegistry, TaskState};
use crate::docker::node::{NodeRole, NodeSpec, create_node};
use crate::docker::{ContainerRuntime, ExecOutput, ExecRequest, ExecStdin, FakeRuntime};

/// What the simulated node holds.
#[derive(Default)]
struct Node {
    launched: bool,
    sentinel: bool,
    /// CABPK's `/run/cluster-api/bootstrap-success.complete`.
    success_file: bool,
    /// The container runtime does not answer `crictl ps`.
    runtime_down: bool,
    launches: u32,
    /// Scripts that became the node's runner.
    stages: Vec<Vec<u8>>,
    /// Status files returned by successive probes once launched (the last one repeats).
    statuses: Vec<String>,
    probes: usize,
    tail: String,
    /// Commands that tried to kill something in the node.
    kills: Vec<String>,
    /// How many probes get their output cut short after the first line, once `cut_after`
    /// probes were answered whole.
    cut_probes: usize,
    cut_after: usize,
    seen_probes: usize,
}

fn out(stdout: &str) -> Option<ExecOutput> {
    Some(ExecOutput {
        stdout: stdout.as_bytes().to_vec(),
        ..Default::default()
    })
}

fn simulate(fake: &FakeRuntime, node: Arc<Mutex<Node>>) {
    fake.on_exec(move |_, request: &ExecRequest| {
        let script = request.argv.get(2)?.clone();
        let mut node = node.lock().unwrap();
        // The launch request stages, launches (unless bootstrap happened here) and probes.
        let mut text = String::new();
        if script.contains("launch=already-launched") {
            if node.success_file || (node.sentinel && !node.launched) {
                text.push_str("launch=skipped\n");
            } else if node.launched {
                text.push_str("launch=already-launched\n");
            } else if node.runtime_down {
                text.push_str("launch=runtime-not-ready\nruntime=crictl ps exited with status 1: connect: connection refused\n");
            } else {
                // Only a launched script stays in the node (the launch removes the others).
                if let Some(ExecStdin::Bytes(data)) = &request.stdin {
                    node.stages.push(data.clone());
                }
                node.launched = true;
                node.launches += 1;
                text.push_str("launch=launched\n");
            }
        }
        if script.contains("echo \"now=") {
            text.push_str("now=1700000100\n");
            if node.success_file {
                text.push_str("success=true\n");
            }
            if node.launched {
                let index = node.probes.min(node.statuses.len().saturating_sub(1));
                node.probes += 1;
                text.push_str("launched=true\n");
                text.push_str(
                    node.statuses
                        .get(index)
                        .map_or("state=pending", String::as_str),
                );
            } else if node.sentinel {
                text.push_str("sentinel=true\n");
            }
            node.seen_probes += 1;
            if node.seen_probes > node.cut_after && node.cut_probes > 0 {
                node.cut_probes -= 1;
                return out("now=1700000100\n");
            }
            text.push_str("end=true\n");
            return out(&text);
        }
        if script.contains("tail -n") {
            return out(&node.tail.clone());
        }
        if script.contains("kill") {
            node.kills.push(script);
            return out("");
        }
        None
    });
}

fn status(state: &str, step: usize, exit: &str) -> String {
    format!(
        "state={state}\nstep={step}\ntotal=3\nexit={exit}\nstarted=1700000000\nfinished=\npid=77\ndescription=run kubeadm join\n"
    )
}

fn plan() -> Plan {
    Plan {
        commands: vec![Command {
            argv: vec!["/bin/sh".into(), "-c".into(), "cat > /etc/secret".into()],
            stdin: Some(b"super-secret-key".to_vec()),
            retries: 5,
            description: "write /etc/secret".into(),
        }],
        warnings: vec![],
    }
}

async fn run_job(
    node: Node,
    plan: Result<Plan, String>,
    timeout: Duration,
) -> (TaskState, Arc<Mutex<Node>>) {
    let (state, node, _) = run_job_watching(node, plan, timeout, |_, _| {}).await;
    (state, node)
}

/// Runs the task to its end; `watch` sees every state the task publishes (and may change the
/// node meanwhile). Returns the outcome, the node and the states seen before the outcome.
async fn run_job_watching(
    node: Node,
    plan: Result<Plan, String>,
    timeout: Duration,
    mut watch: impl FnMut(&TaskState, &mut Node),
) -> (TaskState, Arc<Mutex<Node>>, Vec<TaskState>) {
    let fake = FakeRuntime::new();
    fake.add_image("node:test");
    fake.add_network(crate::docker::NetworkInfo {
        id: "net".into(),
        name: "kind".into(),
        ..Default::default()
    });
    let spec = NodeSpec::new("c1", "c1-m1", NodeRole::Worker, "node:test", "kind");
    create_node(&fake, &spec, None).await.unwrap();
    let node = Arc::new(Mutex::new(node));
    simulate(&fake, node.clone());
    let job = BootstrapJob {
        runtime: Arc::new(fake) as Arc<dyn ContainerRuntime>,
        container: "c1-m1".into(),
        plan,
        timeout,
        attempt: "a1".into(),
        poll_interval: Duration::from_millis(5),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let tasks = TaskRegistry::new(tx);
    let machine = crate::controllers::kinds::MachineRef::docker("default", "m1");
    tasks.start(&machine, "u", TaskKind::Bootstrap, "", |p| run(job, p));
    let mut seen: Vec<TaskState> = Vec::new();
    let state = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            rx.recv().await.unwrap();
            let Some(state) = tasks.state(&machine, "u", TaskKind::Bootstrap) else {
                continue;
            };
            watch(&state, &mut node.lock().unwrap());
            if !matches!(state, TaskState::Running(_) | TaskState::Overdue(_)) {
                return state;
            }
            if seen.last() != Some(&state) {
                seen.push(state);
            }
        }
    })
    .await
    .unwrap();
    (state, node, seen)
}

const FIVE_MINUTES: Duration = Duration::from_secs(300);

#[tokio::test]
async fn a_node_whose_container_runtime_does_not_answer_is_not_launched_and_retried() {
    let node = Node {
        runtime_down: true,
        ..Default::default()
    };
    let (state, node) = run_job(node, Ok(plan()), FIVE_MINUTES).await;
    assert_eq!(
        state,
        TaskState::Failed {
            message: "The container runtime in the node does not answer: crictl ps exited with status 1: connect: connection refused".into(),
            terminal: false,
        }
    );
    assert_eq!(node.lock().unwrap().launches, 0);
}

#[tokio::test]
async fn a_fresh_node_is_bootstrapped_once_by_a_detached_runner() {
    let node = Node {
        statuses: vec![status("running", 2, ""), status("succeeded", 3, "0")],
        ..Default::default()
    };
    let (state, node) = run_job(node, Ok(plan()), FIVE_MINUTES).await;
    assert_eq!(
        state,
        TaskState::Succeeded("ran 3 bootstrap commands".into())
    );
    let node = node.lock().unwrap();
    assert_eq!(node.launches, 1);
    assert_eq!(node.stages.len(), 1);
    let script = String::from_utf8_lossy(&node.stages[0]);
    assert!(script.contains("step 1 'write /etc/secret'"), "{script}");
    assert!(
        !script.contains("super-secret-key"),
        "stdin travels base64-encoded, never as shell text"
    );
}

#[tokio::test]
async fn a_restarted_manager_only_observes_a_runner_already_launched() {
    let node = Node {
        launched: true,
        statuses: vec![status("running", 2, ""), status("succeeded", 3, "0")],
        ..Default::default()
    };
    let (state, node) = run_job(node, Err("secret gone".into()), FIVE_MINUTES).await;
    assert!(matches!(state, TaskState::Succeeded(_)));
    let node = node.lock().unwrap();
    assert_eq!(node.launches, 0, "no second bootstrap");
    assert!(node.stages.is_empty());
}

#[tokio::test]
async fn a_node_bootstrapped_by_another_provider_is_not_bootstrapped_again() {
    let node = Node {
        sentinel: true,
        ..Default::default()
    };
    let (state, node) = run_job(node, Ok(plan()), FIVE_MINUTES).await;
    assert!(matches!(state, TaskState::Succeeded(_)));
    assert_eq!(node.lock().unwrap().launches, 0);
}

#[tokio::test]
async fn a_status_read_cut_short_is_a_failure_to_retry_never_a_fresh_node() {
    // Bootstrapped by CAPD before: the sentinel line is what the cut output loses.
    let node = Node {
        sentinel: true,
        cut_probes: 1,
        ..Default::default()
    };
    let (state, node) = run_job(node, Ok(plan()), FIVE_MINUTES).await;
    let TaskState::Failed { message, terminal } = state else {
        panic!("expected a failure, got {state:?}");
    };
    assert!(!terminal, "retried once the engine answers whole");
    assert!(message.contains("cut short"), "{message}");
    let node = node.lock().unwrap();
    assert_eq!(node.launches, 0, "no bootstrap over CAPD's");
    assert!(node.stages.is_empty());
}

#[tokio::test]
async fn a_followed_runner_survives_status_reads_cut_short() {
    let node = Node {
        launched: true,
        cut_after: 1,
        cut_probes: 2,
        statuses: vec![status("running", 2, ""), status("succeeded", 3, "0")],
        ..Default::default()
    };
    let (state, node) = run_job(node, Err("secret gone".into()), FIVE_MINUTES).await;
    assert!(matches!(state, TaskState::Succeeded(_)), "{state:?}");
    let node = node.lock().unwrap();
    assert_eq!(node.launches, 0);
    assert_eq!(
        node.seen_probes, 4,
        "the two reads cut short were read again"
    );
}

#[tokio::test]
async fn a_failed_command_is_final_and_its_output_is_redacted() {
    let node = Node {
        statuses: vec![status("failed", 3, "1")],
        tail: "### [3/3] run kubeadm join\n[preflight] Running pre-flight checks\nkubeadm join 172.18.0.3:6443 --token abcdef.0123456789abcdef\nerror execution phase preflight: couldn't validate the identity of the API Server\n### exit code 1\n".into(),
        ..Default::default()
    };
    let (state, _) = run_job(node, Ok(plan()), FIVE_MINUTES).await;
    let TaskState::Failed { message, terminal } = state else {
        panic!("expected a failure, got {state:?}");
    };
    assert!(terminal);
    assert!(
        message
            .starts_with("Bootstrap command [run kubeadm join] (3 of 3) failed with exit code 1"),
        "{message}"
    );
    assert!(
        message.contains("couldn't validate the identity"),
        "{message}"
    );
    assert!(!message.contains("abcdef.0123456789abcdef"), "{message}");
}

#[tokio::test]
async fn missing_bootstrap_data_launches_nothing_and_can_be_retried() {
    let (state, node) = run_job(
        Node::default(),
        Err("Bootstrap data secret default/m1 not found".into()),
        FIVE_MINUTES,
    )
    .await;
    assert_eq!(
        state,
        TaskState::Failed {
            message: "Bootstrap data secret default/m1 not found".into(),
            terminal: false
        }
    );
    assert_eq!(node.lock().unwrap().launches, 0);
}

fn still_running_after_a_minute() -> Node {
    Node {
        launched: true,
        statuses: vec![status("running", 2, "")],
        tail: "waiting for the kubelet\n".into(),
        ..Default::default()
    }
}

const ONE_MINUTE: Duration = Duration::from_secs(60);

/// Follows a bootstrap still running a minute after its start (the runner started 100 s ago on
/// the node's clock) with a timeout of one minute, and applies `then` to the node once the task
/// reports itself overdue. Returns the outcome, the overdue messages and what was killed.
async fn past_the_timeout(then: impl Fn(&mut Node)) -> (TaskState, Vec<String>, Vec<String>) {
    let mut applied = false;
    let (state, node, seen) = run_job_watching(
        still_running_after_a_minute(),
        Ok(plan()),
        ONE_MINUTE,
        |state, node| {
            if matches!(state, TaskState::Overdue(_)) && !applied {
                applied = true;
                then(node);
            }
        },
    )
    .await;
    let overdue = seen
        .into_iter()
        .filter_map(|s| match s {
            TaskState::Overdue(message) => Some(message),
            _ => None,
        })
        .collect();
    let kills = node.lock().unwrap().kills.clone();
    (state, overdue, kills)
}

#[tokio::test]
async fn a_bootstrap_past_its_timeout_is_reported_not_stopped_and_accepted_when_it_completes() {
    // The slow node finishes after the timeout.
    let (state, overdue, kills) =
        past_the_timeout(|node| node.statuses.push(status("succeeded", 3, "0"))).await;
    assert_eq!(overdue.len(), 1, "{overdue:?}");
    assert!(
        overdue[0].starts_with(
            "Bootstrap did not complete within 60s (spec.bootstrapTimeout) and is still running command [run kubeadm join] (2 of 3)"
        ),
        "{}",
        overdue[0]
    );
    assert_eq!(
        state,
        TaskState::Succeeded("ran 3 bootstrap commands".into())
    );
    assert!(kills.is_empty(), "nothing is killed: {kills:?}");
}

#[tokio::test]
async fn cabpk_success_file_completes_a_bootstrap_past_its_timeout() {
    // kubeadm succeeded; the runner is still busy with a later command.
    let (state, overdue, kills) = past_the_timeout(|node| node.success_file = true).await;
    assert_eq!(overdue.len(), 1, "{overdue:?}");
    assert_eq!(
        state,
        TaskState::Succeeded(
            "bootstrap completed (/run/cluster-api/bootstrap-success.complete found)".into()
        )
    );
    assert!(kills.is_empty(), "{kills:?}");
}

#[tokio::test]
async fn a_command_failing_after_the_timeout_is_still_final() {
    let (state, overdue, kills) =
        past_the_timeout(|node| node.statuses.push(status("failed", 2, "1"))).await;
    assert_eq!(overdue.len(), 1, "{overdue:?}");
    let TaskState::Failed { message, terminal } = state else {
        panic!("expected a failure, got {state:?}");
    };
    assert!(terminal);
    assert!(
        message
            .starts_with("Bootstrap command [run kubeadm join] (2 of 3) failed with exit code 1"),
        "{message}"
    );
    assert!(kills.is_empty(), "{kills:?}");
}

#[tokio::test]
async fn a_node_with_cabpk_success_file_is_never_bootstrapped_again() {
    let node = Node {
        success_file: true,
        ..Default::default()
    };
    let (state, node) = run_job(node, Ok(plan()), FIVE_MINUTES).await;
    assert_eq!(
        state,
        TaskState::Succeeded(
            "bootstrap completed before (/run/cluster-api/bootstrap-success.complete found); not starting it again"
                .into()
        )
    );
    let node = node.lock().unwrap();
    assert_eq!(node.launches, 0, "kubeadm is not run again");
    assert!(node.stages.is_empty(), "no script is left in the node");
}
