//! Tracked background tasks of DockerMachines: the slow steps (waiting for the node's init,
//! preloading images, running bootstrap) run here, never in a reconcile worker.
//!
//! A task is keyed by machine (namespace, name, uid) and [`TaskKind`]. Its state is read by the
//! reconcile (which turns it into conditions); a change of state sends the machine's reference
//! on the trigger channel, which the controller turns into a reconcile: the end of a task at
//! once, its progress at most once per [`PROGRESS_DELAY`] (what a task reports meanwhile is
//! coalesced, and a task that ends first shows only its end), so a quick step costs no status
//! write of its own.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::kinds::{MachineRef, Served};

/// The slow steps of a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskKind {
    /// Wait for systemd's multi-user target in the node (bootstrap's launch checks `crictl`).
    CGroups,
    /// Import `spec.preLoadImages` into the node's containerd.
    PreloadImages,
    /// Run (or keep watching) the bootstrap commands inside the node.
    Bootstrap,
}

/// What a task reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    /// Still running; the text says what it is doing.
    Running(String),
    /// Still running past its time limit; the text says so and what it is doing. Not a
    /// failure: the task goes on and may still succeed (bootstrap is never stopped).
    Overdue(String),
    /// Finished successfully; the text says what was done.
    Succeeded(String),
    /// Finished unsuccessfully. `terminal` failures are final (bootstrap commands never run
    /// twice); others are retried by the reconcile after a pause.
    Failed {
        /// Message for conditions and Events (already free of secrets).
        message: String,
        /// Whether retrying is forbidden.
        terminal: bool,
    },
}

/// Identity of one machine's task.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TaskKey {
    served: Served,
    namespace: String,
    name: String,
    kind: TaskKind,
}

struct Entry {
    uid: String,
    state: Arc<Mutex<TaskState>>,
    handle: JoinHandle<()>,
}

/// How long a task's progress waits before it wakes the reconcile: what the task reports
/// within that time is shown together, and a task that ends within it shows only its end.
pub const PROGRESS_DELAY: Duration = Duration::from_secs(2);

/// Lets a running task publish progress.
#[derive(Clone)]
pub struct Progress {
    state: Arc<Mutex<TaskState>>,
    trigger: mpsc::UnboundedSender<MachineRef>,
    object: MachineRef,
    /// Set while a wake-up for reported progress is scheduled.
    progress_pending: Arc<AtomicBool>,
}

impl Progress {
    /// Publishes what the task is doing now (triggers a reconcile when it changed).
    pub fn report(&self, text: impl Into<String>) {
        self.publish(TaskState::Running(text.into()));
    }

    /// Publishes that the task is still at work past its time limit, and what it is doing
    /// (triggers a reconcile when it changed).
    pub fn report_overdue(&self, text: impl Into<String>) {
        self.publish(TaskState::Overdue(text.into()));
    }

    fn publish(&self, next: TaskState) {
        let changed = {
            let mut state = lock(&self.state);
            let changed = *state != next;
            *state = next;
            changed
        };
        if changed && !self.progress_pending.swap(true, Ordering::AcqRel) {
            // The wake-up holds the state weakly: a task aborted meanwhile (its machine
            // deleted, its step reset) is dropped with its entry and wakes nothing.
            let state = Arc::downgrade(&self.state);
            let pending = self.progress_pending.clone();
            let trigger = self.trigger.clone();
            let object = self.object.clone();
            tokio::spawn(async move {
                tokio::time::sleep(PROGRESS_DELAY).await;
                pending.store(false, Ordering::Release);
                if still_running(&state) {
                    let _ = trigger.send(object);
                }
            });
        }
    }

    fn finish(&self, outcome: TaskState) {
        *lock(&self.state) = outcome;
        let _ = self.trigger.send(self.object.clone());
    }
}

fn still_running(state: &Weak<Mutex<TaskState>>) -> bool {
    state
        .upgrade()
        .is_some_and(|state| matches!(*lock(&state), TaskState::Running(_) | TaskState::Overdue(_)))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The registry of running and finished tasks.
pub struct TaskRegistry {
    entries: Mutex<HashMap<TaskKey, Entry>>,
    trigger: mpsc::UnboundedSender<MachineRef>,
}

impl std::fmt::Debug for TaskRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskRegistry")
            .field("tasks", &lock(&self.entries).len())
            .finish()
    }
}

/// The outcome a task future returns.
pub type TaskResult = Result<String, TaskFailure>;

/// How a task failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFailure {
    /// Message free of secrets.
    pub message: String,
    /// Whether the failure is final.
    pub terminal: bool,
}

impl TaskFailure {
    /// A failure the reconcile retries after a pause.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            terminal: false,
        }
    }

    /// A final failure.
    pub fn terminal(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            terminal: true,
        }
    }
}

impl TaskRegistry {
    /// A registry whose tasks send machine references on `trigger` when their state changes.
    pub fn new(trigger: mpsc::UnboundedSender<MachineRef>) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            trigger,
        }
    }

    fn key(machine: &MachineRef, kind: TaskKind) -> TaskKey {
        TaskKey {
            served: machine.served,
            namespace: machine.namespace.clone(),
            name: machine.name.clone(),
            kind,
        }
    }

    /// The state of a machine's task, if one was started for this incarnation (`uid`) of it.
    pub fn state(&self, machine: &MachineRef, uid: &str, kind: TaskKind) -> Option<TaskState> {
        let entries = lock(&self.entries);
        entries
            .get(&Self::key(machine, kind))
            .filter(|e| e.uid == uid)
            .map(|e| lock(&e.state).clone())
    }

    /// Starts a task unless one of this kind already exists for the machine (running or
    /// finished); returns whether it started. `work` gets a [`Progress`] handle.
    pub fn start<F, Fut>(
        &self,
        machine: &MachineRef,
        uid: &str,
        kind: TaskKind,
        initial: impl Into<String>,
        work: F,
    ) -> bool
    where
        F: FnOnce(Progress) -> Fut,
        Fut: Future<Output = TaskResult> + Send + 'static,
    {
        let key = Self::key(machine, kind);
        let mut entries = lock(&self.entries);
        if entries.get(&key).is_some_and(|e| e.uid == uid) {
            return false;
        }
        if let Some(stale) = entries.remove(&key) {
            stale.handle.abort();
        }
        let state = Arc::new(Mutex::new(TaskState::Running(initial.into())));
        let progress = Progress {
            state: state.clone(),
            trigger: self.trigger.clone(),
            object: machine.clone(),
            progress_pending: Arc::new(AtomicBool::new(false)),
        };
        let future = work(progress.clone());
        let handle = tokio::spawn(async move {
            let outcome = match future.await {
                Ok(done) => TaskState::Succeeded(done),
                Err(failure) => TaskState::Failed {
                    message: failure.message,
                    terminal: failure.terminal,
                },
            };
            progress.finish(outcome);
        });
        entries.insert(
            key,
            Entry {
                uid: uid.to_string(),
                state,
                handle,
            },
        );
        true
    }

    /// Forgets a finished task so it can be started again (after a retryable failure). A task
    /// still running is aborted.
    pub fn reset(&self, machine: &MachineRef, kind: TaskKind) {
        if let Some(entry) = lock(&self.entries).remove(&Self::key(machine, kind)) {
            entry.handle.abort();
        }
    }

    /// Aborts and forgets every task of a machine (on deletion).
    pub fn cancel_all(&self, machine: &MachineRef) {
        let mut entries = lock(&self.entries);
        entries.retain(|key, entry| {
            let ours = key.served == machine.served
                && key.namespace == machine.namespace
                && key.name == machine.name;
            if ours {
                entry.handle.abort();
            }
            !ours
        });
    }

    /// Number of tasks still running.
    pub fn running(&self) -> usize {
        lock(&self.entries)
            .values()
            .filter(|e| {
                matches!(
                    *lock(&e.state),
                    TaskState::Running(_) | TaskState::Overdue(_)
                )
            })
            .count()
    }

    /// Aborts every task (manager shutdown). Work inside node containers that runs detached
    /// (bootstrap) continues and is observed again by the next manager.
    pub fn abort_all(&self) {
        for (_, entry) in lock(&self.entries).drain() {
            entry.handle.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn machine() -> MachineRef {
        MachineRef::docker("ns", "m1")
    }

    #[tokio::test]
    async fn a_finished_task_triggers_a_reconcile_and_keeps_its_outcome() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tasks = TaskRegistry::new(tx);
        assert!(tasks.start(
            &machine(),
            "uid-1",
            TaskKind::CGroups,
            "waiting",
            |_| async { Ok("ready".to_string()) }
        ));
        let triggered = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(triggered, machine());
        assert_eq!(
            tasks.state(&machine(), "uid-1", TaskKind::CGroups),
            Some(TaskState::Succeeded("ready".into()))
        );
        assert!(
            !tasks.start(&machine(), "uid-1", TaskKind::CGroups, "again", |_| async {
                Ok(String::new())
            }),
            "a task runs once per machine until reset"
        );
        assert_eq!(
            tasks.state(&machine(), "other-uid", TaskKind::CGroups),
            None,
            "a recreated machine does not inherit the task"
        );
    }

    #[tokio::test]
    async fn progress_is_visible_and_cancel_forgets_everything() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tasks = TaskRegistry::new(tx);
        tasks.start(
            &machine(),
            "u",
            TaskKind::Bootstrap,
            "starting",
            |p| async move {
                p.report("step 2 of 3");
                std::future::pending::<()>().await;
                Ok(String::new())
            },
        );
        rx.recv().await.unwrap();
        assert_eq!(
            tasks.state(&machine(), "u", TaskKind::Bootstrap),
            Some(TaskState::Running("step 2 of 3".into()))
        );
        assert_eq!(tasks.running(), 1);
        tasks.cancel_all(&machine());
        assert_eq!(tasks.state(&machine(), "u", TaskKind::Bootstrap), None);
        assert_eq!(tasks.running(), 0);
    }

    /// Drains the trigger channel as it stands now.
    fn triggers(rx: &mut mpsc::UnboundedReceiver<MachineRef>) -> usize {
        std::iter::from_fn(|| rx.try_recv().ok()).count()
    }

    #[tokio::test(start_paused = true)]
    async fn progress_wakes_the_reconcile_once_per_delay_and_a_quick_task_only_at_its_end() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tasks = TaskRegistry::new(tx);
        let (step_tx, mut step_rx) = mpsc::unbounded_channel::<&'static str>();
        tasks.start(
            &machine(),
            "u",
            TaskKind::Bootstrap,
            "starting",
            |p| async move {
                while let Some(step) = step_rx.recv().await {
                    if step == "end" {
                        return Ok("done".to_string());
                    }
                    p.report(step);
                }
                Ok(String::new())
            },
        );
        // Three steps within one delay: one wake-up, after the delay, showing the last.
        for step in ["step 1", "step 2", "step 3"] {
            step_tx.send(step).unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(triggers(&mut rx), 0, "progress waits for the delay");
        tokio::time::sleep(PROGRESS_DELAY).await;
        assert_eq!(triggers(&mut rx), 1);
        assert_eq!(
            tasks.state(&machine(), "u", TaskKind::Bootstrap),
            Some(TaskState::Running("step 3".into()))
        );
        // A step, then the end within the delay: the end wakes at once, the step never.
        step_tx.send("step 4").unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        step_tx.send("end").unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(triggers(&mut rx), 1, "the end, at once");
        tokio::time::sleep(PROGRESS_DELAY * 2).await;
        assert_eq!(
            triggers(&mut rx),
            0,
            "no wake-up for progress of a task that ended"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_progress_of_a_cancelled_task_wakes_nothing() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tasks = TaskRegistry::new(tx);
        tasks.start(&machine(), "u", TaskKind::Bootstrap, "", |p| async move {
            p.report("step 1");
            std::future::pending::<()>().await;
            Ok(String::new())
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        tasks.cancel_all(&machine());
        tokio::time::sleep(PROGRESS_DELAY * 2).await;
        assert_eq!(triggers(&mut rx), 0);
    }

    #[tokio::test]
    async fn an_overdue_task_is_reported_and_still_counts_as_running() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tasks = TaskRegistry::new(tx);
        tasks.start(&machine(), "u", TaskKind::Bootstrap, "", |p| async move {
            p.report_overdue("still at step 2 of 3 after its time limit");
            std::future::pending::<()>().await;
            Ok(String::new())
        });
        rx.recv().await.unwrap();
        assert_eq!(
            tasks.state(&machine(), "u", TaskKind::Bootstrap),
            Some(TaskState::Overdue(
                "still at step 2 of 3 after its time limit".into()
            ))
        );
        assert_eq!(tasks.running(), 1);
    }

    #[tokio::test]
    async fn a_retryable_failure_can_be_reset_and_restarted() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tasks = TaskRegistry::new(tx);
        tasks.start(&machine(), "u", TaskKind::PreloadImages, "", |_| async {
            Err(TaskFailure::retryable("image missing"))
        });
        rx.recv().await.unwrap();
        assert_eq!(
            tasks.state(&machine(), "u", TaskKind::PreloadImages),
            Some(TaskState::Failed {
                message: "image missing".into(),
                terminal: false
            })
        );
        tasks.reset(&machine(), TaskKind::PreloadImages);
        assert!(
            tasks.start(&machine(), "u", TaskKind::PreloadImages, "", |_| async {
                Ok(String::new())
            })
        );
    }
}
