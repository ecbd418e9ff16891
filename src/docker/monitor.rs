//! [`MonitoredRuntime`]: a [`ContainerRuntime`] that notices when the engine stops answering and
//! when it answers again, without polling an engine that works.
//!
//! Every call goes to the inner runtime, unchanged (but for the host facts, below). A call that
//! fails because the engine could not be reached ([`RuntimeError::Unreachable`]), or that has had
//! no answer for [`Timings::slow_call`] (beyond the wait it makes by design: following a log until
//! a line appears), wakes the [`EngineWatcher`], which pings the engine: a ping without an
//! answer within [`Timings::ping_timeout`] is an outage, reported once ([`EngineReport::Down`]).
//! The watcher then pings every [`Timings::retry_interval`] (and at once when a call gets an
//! answer) until the engine answers, and reports [`EngineReport::Up`]. A ping that is answered
//! changes nothing: one cut stream or one slow command is not an outage. A manager at rest makes
//! no call, so it pings nothing either.
//!
//! After an answered ping, slow calls wake the watcher at most once per [`Timings::slow_call`]:
//! a busy engine (hundreds of nodes created at once) holds many calls past that time together,
//! and one answered ping says what one for each would (at N = 300 the benchmark counted 1.3
//! pings a machine). A call the engine could not answer still wakes it at once. So a hung
//! engine is reported within about two [`Timings::slow_call`]s and a [`Timings::ping_timeout`]
//! of the first call it holds, a refused connection at once.
//!
//! One answer is kept: the host facts ([`ContainerRuntime::host_info`]), which every node
//! container's spec needs, are read once and asked again only after a sign that the engine went
//! away (a call it could not answer, or a ping without an answer), since an engine that restarts
//! may come back with other settings. A slow answer is no such sign: the engine that gave it
//! is the one that was there.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::runtime::{ContainerRuntime, LineMatch, Removal, RuntimeError};
use super::types::{
    ContainerInfo, ContainerSpec, ContainerSummary, Engine, ExecOutput, ExecRequest, HostInfo,
    Labels, NetworkInfo, NetworkSpec,
};

/// How the watcher paces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// A call without an answer for this long makes the watcher ping (the call goes on); after
    /// an answered ping, slow calls make it ping again at most once per this long.
    pub slow_call: Duration,
    /// A ping without an answer for this long counts as failed.
    pub ping_timeout: Duration,
    /// How often the engine is pinged while it cannot be reached.
    pub retry_interval: Duration,
}

impl Default for Timings {
    /// 5 s, 5 s and 2 s: a refused connection is noticed at once, a hung engine within 10 to
    /// 15 s of the first call it holds, and a recovery within 2 s. A healthy engine answers a
    /// ping in milliseconds even when busy.
    fn default() -> Self {
        Self {
            slow_call: Duration::from_secs(5),
            ping_timeout: Duration::from_secs(5),
            retry_interval: Duration::from_secs(2),
        }
    }
}

/// What the watcher reports.
#[derive(Debug)]
pub enum EngineReport {
    /// The engine stopped answering; why the ping failed.
    Down(RuntimeError),
    /// The engine answers again.
    Up,
}

#[derive(Debug, Default)]
struct Shared {
    down: AtomicBool,
    wake: Notify,
    /// A call the engine could not answer: ends the watcher's wait after an answered ping, so
    /// that it checks at once (it leaves no permit: `wake` has one).
    failed: Notify,
    /// The host facts last read. Held while they are read, so that machines created together
    /// wait for one read rather than each making its own.
    host: tokio::sync::Mutex<Option<HostInfo>>,
    /// The engine was suspected gone since the host facts were read: read them again.
    host_stale: AtomicBool,
}

impl Shared {
    fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    /// A call has had no answer for [`Timings::slow_call`]: the watcher checks (once, while
    /// the engine is up).
    fn slow(&self) {
        if !self.is_down() {
            self.wake.notify_one();
        }
    }

    /// A call the engine could not answer: the host facts are read again, and the watcher
    /// checks at once (once, while the engine is up).
    fn failed(&self) {
        self.host_stale.store(true, Ordering::SeqCst);
        if !self.is_down() {
            self.wake.notify_one();
            self.failed.notify_waiters();
        }
    }

    /// The engine answered a call: while it is reported down, have the watcher check at once.
    fn answered(&self) {
        if self.is_down() {
            self.wake.notify_one();
        }
    }
}

/// Forwards every call to the inner runtime and tells its [`EngineWatcher`] what it sees.
#[derive(Debug)]
pub struct MonitoredRuntime {
    inner: Arc<dyn ContainerRuntime>,
    shared: Arc<Shared>,
    slow_call: Duration,
}

/// Decides whether the engine is up; see the module documentation. Run it with
/// [`EngineWatcher::run`].
#[derive(Debug)]
pub struct EngineWatcher {
    inner: Arc<dyn ContainerRuntime>,
    shared: Arc<Shared>,
    timings: Timings,
}

/// Wraps `inner` with the default [`Timings`].
pub fn monitor(inner: Arc<dyn ContainerRuntime>) -> (Arc<MonitoredRuntime>, EngineWatcher) {
    monitor_with(inner, Timings::default())
}

/// Wraps `inner`; the engine is assumed up (the manager checked it before starting).
pub fn monitor_with(
    inner: Arc<dyn ContainerRuntime>,
    timings: Timings,
) -> (Arc<MonitoredRuntime>, EngineWatcher) {
    let shared = Arc::new(Shared::default());
    let runtime = MonitoredRuntime {
        inner: inner.clone(),
        shared: shared.clone(),
        slow_call: timings.slow_call,
    };
    let watcher = EngineWatcher {
        inner,
        shared,
        timings,
    };
    (Arc::new(runtime), watcher)
}

impl MonitoredRuntime {
    /// Whether the watcher last found the engine unreachable.
    pub fn is_down(&self) -> bool {
        self.shared.is_down()
    }

    async fn observe<T>(
        &self,
        call: impl Future<Output = Result<T, RuntimeError>>,
    ) -> Result<T, RuntimeError> {
        self.observe_waiting(Duration::ZERO, call).await
    }

    /// [`Self::observe`] for a call that waits by design for up to `wait` (a log line still to
    /// be written): it counts as slow only once it has had no answer for `wait` more.
    async fn observe_waiting<T>(
        &self,
        wait: Duration,
        call: impl Future<Output = Result<T, RuntimeError>>,
    ) -> Result<T, RuntimeError> {
        let mut call = std::pin::pin!(call);
        let result = tokio::select! {
            result = &mut call => result,
            () = tokio::time::sleep(self.slow_call + wait) => {
                self.shared.slow();
                call.await
            }
        };
        match &result {
            Err(error) if error.is_unreachable() => self.shared.failed(),
            _ => self.shared.answered(),
        }
        result
    }
}

impl EngineWatcher {
    /// Watches until `stop` is cancelled, calling `report` on every change.
    pub async fn run(self, mut report: impl FnMut(EngineReport) + Send, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = self.shared.wake.notified() => {}
                () = stop.cancelled() => return,
            }
            // Listening for failed calls from before the ping, so that none falls between.
            let mut failed = std::pin::pin!(self.shared.failed.notified());
            failed.as_mut().enable();
            let Err(why) = self.ping().await else {
                // Slow calls of the next `slow_call` are checked by one ping at its end (the
                // wake they leave), a failed call at once.
                tokio::select! {
                    () = tokio::time::sleep(self.timings.slow_call) => {}
                    () = failed => {}
                    () = stop.cancelled() => return,
                }
                continue;
            };
            self.shared.host_stale.store(true, Ordering::SeqCst);
            self.shared.down.store(true, Ordering::SeqCst);
            report(EngineReport::Down(why));
            loop {
                tokio::select! {
                    () = tokio::time::sleep(self.timings.retry_interval) => {}
                    () = self.shared.wake.notified() => {}
                    () = stop.cancelled() => return,
                }
                if self.ping().await.is_ok() {
                    break;
                }
            }
            self.shared.down.store(false, Ordering::SeqCst);
            report(EngineReport::Up);
        }
    }

    /// `Err` when the engine could not be reached or did not answer in time; an engine that
    /// answers, even with an error, is up.
    async fn ping(&self) -> Result<(), RuntimeError> {
        let timeout = self.timings.ping_timeout;
        match tokio::time::timeout(timeout, self.inner.ping()).await {
            Ok(Err(error)) if error.is_unreachable() => Err(error),
            Ok(_) => Ok(()),
            Err(_) => Err(RuntimeError::Unreachable {
                action: "ping the engine".to_string(),
                source: format!("no answer within {}s", timeout.as_secs()).into(),
            }),
        }
    }
}

#[async_trait]
impl ContainerRuntime for MonitoredRuntime {
    fn engine(&self) -> Engine {
        self.inner.engine()
    }

    async fn host_info(&self) -> Result<HostInfo, RuntimeError> {
        let mut kept = self.shared.host.lock().await;
        if self.shared.host_stale.swap(false, Ordering::SeqCst) {
            *kept = None;
        }
        if let Some(host) = kept.as_ref() {
            return Ok(host.clone());
        }
        let host = self.observe(self.inner.host_info()).await?;
        *kept = Some(host.clone());
        Ok(host)
    }

    async fn ping(&self) -> Result<(), RuntimeError> {
        self.observe(self.inner.ping()).await
    }

    async fn inspect_network(&self, name: &str) -> Result<Option<NetworkInfo>, RuntimeError> {
        self.observe(self.inner.inspect_network(name)).await
    }

    async fn list_networks(&self, labels: &Labels) -> Result<Vec<NetworkInfo>, RuntimeError> {
        self.observe(self.inner.list_networks(labels)).await
    }

    async fn create_network(&self, spec: &NetworkSpec) -> Result<String, RuntimeError> {
        self.observe(self.inner.create_network(spec)).await
    }

    async fn remove_network(&self, name: &str) -> Result<(), RuntimeError> {
        self.observe(self.inner.remove_network(name)).await
    }

    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError> {
        self.observe(self.inner.image_exists(image)).await
    }

    async fn pull_image(&self, image: &str) -> Result<(), RuntimeError> {
        self.observe(self.inner.pull_image(image)).await
    }

    async fn run_container(&self, spec: &ContainerSpec) -> Result<String, RuntimeError> {
        self.observe(self.inner.run_container(spec)).await
    }

    async fn inspect_container(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError> {
        self.observe(self.inner.inspect_container(name)).await
    }

    async fn list_containers(
        &self,
        labels: &Labels,
    ) -> Result<Vec<ContainerSummary>, RuntimeError> {
        self.observe(self.inner.list_containers(labels)).await
    }

    async fn exec(
        &self,
        container: &str,
        request: &ExecRequest,
    ) -> Result<ExecOutput, RuntimeError> {
        self.observe(self.inner.exec(container, request)).await
    }

    async fn kill_container(&self, name: &str, signal: &str) -> Result<(), RuntimeError> {
        self.observe(self.inner.kill_container(name, signal)).await
    }

    async fn delete_container(&self, name: &str) -> Result<Removal, RuntimeError> {
        self.observe(self.inner.delete_container(name)).await
    }

    async fn container_logs(&self, name: &str) -> Result<String, RuntimeError> {
        self.observe(self.inner.container_logs(name)).await
    }

    async fn follow_logs(
        &self,
        name: &str,
        matches: &LineMatch,
        timeout: Duration,
    ) -> Result<bool, RuntimeError> {
        self.observe_waiting(timeout, self.inner.follow_logs(name, matches, timeout))
            .await
    }

    async fn start_container(&self, name: &str) -> Result<(), RuntimeError> {
        self.observe(self.inner.start_container(name)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::FakeRuntime;
    use crate::docker::fake::Call;
    use tokio::sync::mpsc;

    const FAST: Timings = Timings {
        slow_call: Duration::from_secs(5),
        ping_timeout: Duration::from_secs(5),
        retry_interval: Duration::from_millis(20),
    };

    /// The monitored fake, and the watcher's reports as `"down"` / `"up"`.
    fn watched(
        fake: &FakeRuntime,
    ) -> (
        Arc<MonitoredRuntime>,
        mpsc::UnboundedReceiver<&'static str>,
        CancellationToken,
    ) {
        let (runtime, watcher) = monitor_with(Arc::new(fake.clone()), FAST);
        let (tx, rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        tokio::spawn(watcher.run(
            move |report| {
                let _ = tx.send(match report {
                    EngineReport::Down(_) => "down",
                    EngineReport::Up => "up",
                });
            },
            stop.clone(),
        ));
        (runtime, rx, stop)
    }

    /// The next report; `None` once the watcher stopped. Panics when nothing comes.
    async fn next(reports: &mut mpsc::UnboundedReceiver<&'static str>) -> Option<&'static str> {
        tokio::time::timeout(Duration::from_secs(30), reports.recv())
            .await
            .expect("a report or the end of the watcher")
    }

    /// How often the engine was pinged.
    fn pings(fake: &FakeRuntime) -> usize {
        fake.calls().iter().filter(|c| **c == Call::Ping).count()
    }

    /// How often the host facts were read.
    fn host_reads(fake: &FakeRuntime) -> usize {
        fake.calls()
            .iter()
            .filter(|c| **c == Call::HostInfo)
            .count()
    }

    #[tokio::test]
    async fn the_host_facts_are_read_once_and_again_after_the_engine_was_away() {
        let fake = FakeRuntime::new();
        let (runtime, mut reports, stop) = watched(&fake);
        let reads = || host_reads(&fake);
        let before = HostInfo {
            storage_driver: "overlay2".into(),
            ..Default::default()
        };
        fake.set_host_info(before.clone());
        assert_eq!(runtime.host_info().await.unwrap(), before);
        assert_eq!(runtime.host_info().await.unwrap(), before);
        assert_eq!(reads(), 1, "one read serves every node container");
        let runtime_b = runtime.clone();
        fake.set_unreachable(true);
        runtime.inspect_container("c1").await.unwrap_err();
        fake.set_unreachable(false);
        let (a, b) = tokio::join!(runtime.host_info(), runtime_b.host_info());
        assert_eq!((a.unwrap(), b.unwrap()), (before.clone(), before.clone()));
        assert_eq!(
            reads(),
            2,
            "after a failed call the facts are read again, once for machines created together"
        );

        // The engine goes away and comes back with other settings.
        fake.set_unreachable(true);
        runtime.inspect_container("c1").await.unwrap_err();
        assert_eq!(next(&mut reports).await, Some("down"));
        let after = HostInfo {
            storage_driver: "btrfs".into(),
            ..Default::default()
        };
        fake.set_host_info(after.clone());
        fake.set_unreachable(false);
        assert_eq!(next(&mut reports).await, Some("up"));
        assert_eq!(runtime.host_info().await.unwrap(), after);
        assert_eq!(reads(), 3);
        stop.cancel();
    }

    #[tokio::test]
    async fn an_outage_is_reported_once_and_its_end_by_itself() {
        let fake = FakeRuntime::new();
        let (runtime, mut reports, stop) = watched(&fake);
        fake.set_unreachable(true);
        for _ in 0..3 {
            let error = runtime.inspect_container("c1").await.unwrap_err();
            assert!(
                error.is_unreachable(),
                "calls fail as the engine makes them"
            );
        }
        assert_eq!(next(&mut reports).await, Some("down"));
        assert!(runtime.is_down());
        fake.set_unreachable(false);
        assert_eq!(
            next(&mut reports).await,
            Some("up"),
            "recovery is noticed without any call"
        );
        assert!(!runtime.is_down());
        assert!(runtime.inspect_container("c1").await.unwrap().is_none());
        stop.cancel();
        assert_eq!(next(&mut reports).await, None, "one outage, one recovery");
    }

    #[tokio::test]
    async fn a_failed_call_of_an_engine_that_answers_pings_is_not_an_outage() {
        let fake = FakeRuntime::new();
        let (runtime, mut reports, stop) = watched(&fake);
        fake.fail_next(
            crate::docker::fake::Op::Exec,
            RuntimeError::Unreachable {
                action: "exec `sh` in container c1".into(),
                source: "connection reset by peer".into(),
            },
        );
        let request = ExecRequest::new(["sh"]);
        assert!(
            runtime
                .exec("c1", &request)
                .await
                .unwrap_err()
                .is_unreachable()
        );
        for _ in 0..2000 {
            if pings(&fake) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(pings(&fake), 1, "the failure made the watcher check");
        stop.cancel();
        assert_eq!(next(&mut reports).await, None, "nothing reported");
        assert!(!runtime.is_down());
    }

    #[tokio::test(start_paused = true)]
    async fn a_log_line_awaited_longer_than_a_slow_call_is_no_sign_of_an_outage() {
        let fake = FakeRuntime::new();
        fake.add_image("node:test");
        fake.add_network(NetworkInfo {
            id: "net".into(),
            name: "kind".into(),
            ..Default::default()
        });
        let spec = ContainerSpec {
            name: "c1".into(),
            image: "node:test".into(),
            network: "kind".into(),
            ..Default::default()
        };
        fake.run_container(&spec).await.unwrap();
        let (runtime, mut reports, stop) = watched(&fake);
        // A node that takes twice the slow-call time to boot.
        let writer = fake.clone();
        tokio::spawn(async move {
            tokio::time::sleep(FAST.slow_call * 2).await;
            writer.set_logs("c1", "Reached target Multi-User System.\n");
        });
        let booted = |line: &str| line.contains("Multi-User System");
        assert!(
            runtime
                .follow_logs("c1", &booted, Duration::from_secs(30))
                .await
                .unwrap()
        );
        stop.cancel();
        assert_eq!(next(&mut reports).await, None);
        assert_eq!(pings(&fake), 0, "waiting for the line is no slow answer");
    }

    /// Lets the spawned watcher run until it waits again (time is paused in these tests).
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn slow_calls_of_a_busy_engine_are_checked_by_one_ping_per_slow_call_time() {
        let fake = FakeRuntime::new();
        let (runtime, mut reports, stop) = watched(&fake);
        runtime.host_info().await.unwrap();
        // A hundred calls pass the slow-call time together: one ping.
        for _ in 0..100 {
            runtime.shared.slow();
        }
        settle().await;
        assert_eq!(pings(&fake), 1);
        // More slow calls soon after the answered ping wait for the end of its slow-call time.
        tokio::time::advance(FAST.slow_call / 2).await;
        for _ in 0..100 {
            runtime.shared.slow();
        }
        settle().await;
        assert_eq!(
            pings(&fake),
            1,
            "checked once, after the engine's last answer"
        );
        tokio::time::advance(FAST.slow_call / 2).await;
        settle().await;
        assert_eq!(pings(&fake), 2, "and not forgotten");
        // A call the engine could not answer is checked at once, however recent the last ping.
        fake.fail_next(
            crate::docker::fake::Op::InspectContainer,
            RuntimeError::Unreachable {
                action: "inspect container c1".into(),
                source: "connection refused".into(),
            },
        );
        runtime.inspect_container("c1").await.unwrap_err();
        settle().await;
        assert_eq!(pings(&fake), 3);
        stop.cancel();
        assert_eq!(next(&mut reports).await, None, "a busy engine is no outage");
        let reads = host_reads(&fake);
        runtime.host_info().await.unwrap();
        assert_eq!(
            host_reads(&fake),
            reads + 1,
            "the failed call made the host facts stale"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn slow_answers_keep_the_host_facts() {
        let fake = FakeRuntime::new();
        let (runtime, mut reports, stop) = watched(&fake);
        runtime.host_info().await.unwrap();
        runtime.shared.slow();
        settle().await;
        assert_eq!(pings(&fake), 1);
        runtime.host_info().await.unwrap();
        assert_eq!(
            host_reads(&fake),
            1,
            "the engine that answered slowly is the one that was there"
        );
        stop.cancel();
        assert_eq!(next(&mut reports).await, None);
    }

    #[tokio::test]
    async fn an_engine_that_answers_is_never_pinged() {
        let fake = FakeRuntime::new();
        let (runtime, mut reports, stop) = watched(&fake);
        runtime.list_containers(&Labels::new()).await.unwrap();
        let request = ExecRequest::new(["true"]);
        runtime.exec("absent", &request).await.unwrap_err();
        tokio::task::yield_now().await;
        stop.cancel();
        assert_eq!(next(&mut reports).await, None);
        assert_eq!(pings(&fake), 0, "{:?}", fake.calls());
    }
}
