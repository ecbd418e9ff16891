//! [`CountingRuntime`]: a [`ContainerRuntime`] that counts the calls it forwards, for the
//! benchmark (`e2e/bench`). The manager wraps its engine client in it only when
//! [`COUNT_ENV`] names a file, so production runs pay nothing.
//!
//! After every call the counts are written to that file as a JSON object keyed by operation
//! (`{"exec": 12, "inspect_container": 4, ...}`), over the same bytes of the same file: counts
//! only grow, so the text never gets shorter and needs no truncation. The file used to be
//! replaced (a new file renamed over it) after every call: a file created and one freed per
//! Docker call, under the lock every call takes; on a journal-less ext4 every later creation
//! nearby, the engine's among them, passes over the inodes freed recently.
//! A reader may see a write half done; the benchmark reads once the manager is idle, and reads
//! again when the text does not parse.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use super::runtime::{ContainerRuntime, LineMatch, Removal, RuntimeError};
use super::types::{
    ContainerInfo, ContainerSpec, ContainerSummary, Engine, ExecOutput, ExecRequest, HostInfo,
    Labels, NetworkInfo, NetworkSpec,
};

/// Environment variable naming the file the manager writes its Docker call counts to.
pub const COUNT_ENV: &str = "CAPD_RS_COUNT_DOCKER_CALLS";

/// Forwards every call to `inner` and counts it by operation.
#[derive(Debug)]
pub struct CountingRuntime {
    inner: Arc<dyn ContainerRuntime>,
    path: PathBuf,
    counts: Mutex<Counts>,
}

/// The counts, and the file they are written to (`None` when it could not be created).
#[derive(Debug)]
struct Counts {
    by_operation: BTreeMap<&'static str, u64>,
    file: Option<File>,
}

impl CountingRuntime {
    /// Wraps `inner`; counts are written to `path` (created empty, or emptied) after every call.
    pub fn new(inner: Arc<dyn ContainerRuntime>, path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let file = File::create(&path)
            .inspect_err(|error| {
                tracing::warn!(file = %path.display(), %error, "Creating the Docker call counts file failed");
            })
            .ok();
        CountingRuntime {
            inner,
            path,
            counts: Mutex::new(Counts {
                by_operation: BTreeMap::new(),
                file,
            }),
        }
    }

    /// The counts so far, by operation.
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_operation
            .clone()
    }

    fn count(&self, operation: &'static str) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let Counts { by_operation, file } = &mut *counts;
        *by_operation.entry(operation).or_default() += 1;
        // Written under the lock: one writer at a time, the file always holds the latest counts.
        if let Some(file) = file
            && let Err(error) = write_counts(file, by_operation)
        {
            tracing::warn!(file = %self.path.display(), %error, "Writing the Docker call counts failed");
        }
    }
}

/// Writes `counts` over the start of `file`; the text is never shorter than the one before.
fn write_counts(file: &File, counts: &BTreeMap<&'static str, u64>) -> std::io::Result<()> {
    let text = serde_json::to_string(counts).map_err(std::io::Error::other)?;
    file.write_all_at(text.as_bytes(), 0)
}

#[async_trait]
impl ContainerRuntime for CountingRuntime {
    fn engine(&self) -> Engine {
        self.inner.engine()
    }

    async fn host_info(&self) -> Result<HostInfo, RuntimeError> {
        self.count("host_info");
        self.inner.host_info().await
    }

    async fn ping(&self) -> Result<(), RuntimeError> {
        self.count("ping");
        self.inner.ping().await
    }

    async fn inspect_network(&self, name: &str) -> Result<Option<NetworkInfo>, RuntimeError> {
        self.count("inspect_network");
        self.inner.inspect_network(name).await
    }

    async fn list_networks(&self, labels: &Labels) -> Result<Vec<NetworkInfo>, RuntimeError> {
        self.count("list_networks");
        self.inner.list_networks(labels).await
    }

    async fn create_network(&self, spec: &NetworkSpec) -> Result<String, RuntimeError> {
        self.count("create_network");
        self.inner.create_network(spec).await
    }

    async fn remove_network(&self, name: &str) -> Result<(), RuntimeError> {
        self.count("remove_network");
        self.inner.remove_network(name).await
    }

    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError> {
        self.count("image_exists");
        self.inner.image_exists(image).await
    }

    async fn pull_image(&self, image: &str) -> Result<(), RuntimeError> {
        self.count("pull_image");
        self.inner.pull_image(image).await
    }

    async fn run_container(&self, spec: &ContainerSpec) -> Result<String, RuntimeError> {
        self.count("run_container");
        self.inner.run_container(spec).await
    }

    async fn inspect_container(&self, name: &str) -> Result<Option<ContainerInfo>, RuntimeError> {
        self.count("inspect_container");
        self.inner.inspect_container(name).await
    }

    async fn list_containers(
        &self,
        labels: &Labels,
    ) -> Result<Vec<ContainerSummary>, RuntimeError> {
        self.count("list_containers");
        self.inner.list_containers(labels).await
    }

    async fn exec(
        &self,
        container: &str,
        request: &ExecRequest,
    ) -> Result<ExecOutput, RuntimeError> {
        self.count("exec");
        self.inner.exec(container, request).await
    }

    async fn kill_container(&self, name: &str, signal: &str) -> Result<(), RuntimeError> {
        self.count("kill_container");
        self.inner.kill_container(name, signal).await
    }

    async fn delete_container(&self, name: &str) -> Result<Removal, RuntimeError> {
        self.count("delete_container");
        self.inner.delete_container(name).await
    }

    async fn container_logs(&self, name: &str) -> Result<String, RuntimeError> {
        self.count("container_logs");
        self.inner.container_logs(name).await
    }

    async fn follow_logs(
        &self,
        name: &str,
        matches: &LineMatch,
        timeout: Duration,
    ) -> Result<bool, RuntimeError> {
        self.count("follow_logs");
        self.inner.follow_logs(name, matches, timeout).await
    }

    async fn start_container(&self, name: &str) -> Result<(), RuntimeError> {
        self.count("start_container");
        self.inner.start_container(name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::FakeRuntime;

    #[tokio::test]
    async fn calls_are_forwarded_counted_and_written_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("calls.json");
        let fake = FakeRuntime::new();
        fake.add_image("node:1");
        let counting = CountingRuntime::new(Arc::new(fake), &file);
        assert!(counting.image_exists("node:1").await.unwrap());
        assert!(!counting.image_exists("absent:1").await.unwrap());
        assert!(counting.inspect_container("c1").await.unwrap().is_none());
        let written: BTreeMap<String, u64> =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            written,
            BTreeMap::from([
                ("image_exists".to_string(), 2),
                ("inspect_container".to_string(), 1)
            ])
        );
        assert_eq!(counting.counts().values().sum::<u64>(), 3);
    }

    #[tokio::test]
    async fn the_file_is_rewritten_in_place_and_a_stale_one_is_emptied() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("calls.json");
        // Longer than anything written below: a file not emptied at the start would keep its tail.
        std::fs::write(
            &file,
            r#"{"exec":12345678901234567890,"inspect_network":987654321}"#,
        )
        .unwrap();
        let counting = CountingRuntime::new(Arc::new(FakeRuntime::new()), &file);
        let inode = std::fs::metadata(&file).unwrap().ino();
        for _ in 0..12 {
            assert!(counting.inspect_container("c1").await.unwrap().is_none());
        }
        counting.ping().await.unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            r#"{"inspect_container":12,"ping":1}"#,
            "the previous run's longer text is gone, and each write covers the one before"
        );
        assert_eq!(
            std::fs::metadata(&file).unwrap().ino(),
            inode,
            "one file, no replacement"
        );
    }
}
