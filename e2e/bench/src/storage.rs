//! How long the engine's file system holds back the inodes of a deletion.
//!
//! Every node container gets a fresh anonymous `/var` volume, and the engine copies the image's
//! `/var` into it: about 600 files per node. On an ext4 without a journal, the kernel's inode
//! allocator passes over an inode freed less than 60 s ago, or less than 360 s ago while the block
//! of the inode table that holds it is dirty (`recently_deleted` in `fs/ext4/ialloc.c`), with one
//! buffer lookup for each inode it passes over. The nodes a phase creates land in the block
//! groups that the last deletion emptied, and each new inode dirties its block, so a phase that
//! starts within 360 s of a deletion of N nodes pays for up to 600 × N inodes passed over, again
//! and again. Measured here at N=100 under `perf`: up to 9.5 cpu-s of the engine's time, in the
//! phase that ran after the other's deletion. A fair comparison starts every phase outside that
//! window. With a journal the kernel makes no such check, and nothing needs to wait.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest an ext4 without a journal holds a freed inode back (`RECENTCY_MIN` +
/// `RECENTCY_DIRTY`), with 5 s to spare for the clock's granularity of one second.
pub const EXT4_NO_JOURNAL_HOLD_BACK: Duration = Duration::from_secs(60 + 300 + 5);

/// The mount that holds `path`, from `/proc/self/mountinfo`: the longest mount point that is
/// `path` or one of its parents (the last such line, where mounts are stacked). Returns the
/// device (`major:minor`) and the file-system type.
fn mount_of(mountinfo: &str, path: &Path) -> Option<(String, String)> {
    let mut best: Option<(usize, String, String)> = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(device), Some(point), Some(fstype)) =
            (fields.get(2), fields.get(4), fields.get(sep + 1))
        else {
            continue;
        };
        let point = Path::new(point);
        if !path.starts_with(point) {
            continue;
        }
        let depth = point.components().count();
        if best.as_ref().is_none_or(|(d, _, _)| depth >= *d) {
            best = Some((depth, (*device).to_string(), (*fstype).to_string()));
        }
    }
    best.map(|(_, device, fstype)| (device, fstype))
}

/// What the engine's data root is on, and how long a deletion's inodes are held back there.
#[derive(Debug, Clone, PartialEq)]
pub struct HoldBack {
    /// How long to wait after a deletion before a phase that creates nodes.
    pub wait: Duration,
    /// Why, for the log and the table.
    pub reason: String,
}

impl HoldBack {
    /// Reads it for the engine data root `root` on this machine (`/proc/self/mountinfo`, and
    /// `/sys/fs/ext4/<device>/journal_task`, which reads `<none>` without a journal).
    fn of_local(root: &Path) -> HoldBack {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let Some((device, fstype)) = mount_of(&mountinfo, root) else {
            return HoldBack::none(format!(
                "{} is not on a file system of this machine",
                root.display()
            ));
        };
        if fstype != "ext4" {
            return HoldBack::none(format!("{} is on {fstype}", root.display()));
        }
        // /sys/dev/block/<major:minor> links to the device's directory, whose name is the one
        // /sys/fs/ext4 uses (vda, dm-0, ...).
        let name = std::fs::read_link(format!("/sys/dev/block/{device}"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        let journal = name.as_ref().and_then(|n| {
            std::fs::read_to_string(PathBuf::from("/sys/fs/ext4").join(n).join("journal_task")).ok()
        });
        HoldBack::for_ext4(root, name.as_deref().unwrap_or(&device), journal.as_deref())
    }

    /// A wait of `wait`, for `reason`.
    pub fn fixed(wait: Duration, reason: impl Into<String>) -> HoldBack {
        HoldBack {
            wait,
            reason: reason.into(),
        }
    }

    fn none(reason: impl Into<String>) -> HoldBack {
        HoldBack::fixed(Duration::ZERO, reason)
    }

    /// Reads it for the engine's data root as `docker info` reports it (`None` when it could
    /// not be read: no wait).
    pub fn of_engine(root: Option<&str>) -> HoldBack {
        match root.filter(|r| !r.is_empty()) {
            Some(root) => HoldBack::of_local(Path::new(root)),
            None => HoldBack::none("the engine's data root could not be read"),
        }
    }

    /// The wait of a run: `deletion_wait` seconds when given; none with `quick`, whose point is
    /// a short run (the reason says what is not waited for); else what `engine` says of the
    /// engine's data root.
    pub fn of_run(
        deletion_wait: Option<u64>,
        quick: bool,
        engine: impl FnOnce() -> HoldBack,
    ) -> HoldBack {
        match deletion_wait {
            Some(secs) => HoldBack::fixed(Duration::from_secs(secs), "--deletion-wait"),
            None if quick => {
                let engine = engine();
                if engine.wait.is_zero() {
                    engine
                } else {
                    HoldBack::none(format!(
                        "--quick waits for none of them, though {}: every repetition after the first pays for the deletions before it",
                        engine.reason
                    ))
                }
            }
            None => engine(),
        }
    }

    /// An ext4 data root on `device`; `journal_task` is the content of its sysfs file, if read.
    fn for_ext4(root: &Path, device: &str, journal_task: Option<&str>) -> HoldBack {
        match journal_task.map(str::trim) {
            Some("<none>") => HoldBack::fixed(
                EXT4_NO_JOURNAL_HOLD_BACK,
                format!(
                    "{} is on an ext4 without a journal ({device}), which holds freed inodes back for up to 360 s",
                    root.display()
                ),
            ),
            Some(_) => HoldBack::none(format!(
                "{} is on an ext4 with a journal ({device})",
                root.display()
            )),
            None => HoldBack::none(format!(
                "{} is on ext4 ({device}), but whether it has a journal could not be read",
                root.display()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
23 22 0:21 / /proc rw,nosuid shared:2 - proc proc rw
30 22 0:26 / /var/lib rw shared:9 - tmpfs tmpfs rw
31 30 254:16 / /var/lib/docker rw,relatime shared:10 - xfs /dev/vdb rw
32 22 254:0 /var/lib/docker /var/lib/docker2 rw,relatime shared:11 - ext4 /dev/vda rw
";

    #[test]
    fn the_mount_is_the_deepest_that_holds_the_path() {
        let at = |p: &str| mount_of(MOUNTINFO, Path::new(p));
        assert_eq!(at("/var/lib/docker"), Some(("254:16".into(), "xfs".into())));
        assert_eq!(
            at("/var/lib/docker/volumes"),
            Some(("254:16".into(), "xfs".into()))
        );
        assert_eq!(
            at("/var/lib/dockerd"),
            Some(("0:26".into(), "tmpfs".into())),
            "a path component, not a prefix of the string"
        );
        assert_eq!(
            at("/var/lib/docker2"),
            Some(("254:0".into(), "ext4".into()))
        );
        assert_eq!(at("/home"), Some(("254:0".into(), "ext4".into())));
        assert_eq!(mount_of("", Path::new("/var/lib/docker")), None);
        assert_eq!(mount_of("garbage line\n", Path::new("/")), None);
    }

    #[test]
    fn a_quick_run_waits_for_no_deletion_and_the_full_run_for_the_engines_window() {
        let ext4 = || HoldBack::for_ext4(Path::new("/var/lib/docker"), "vda", Some("<none>"));
        assert_eq!(HoldBack::of_run(None, false, ext4), ext4(), "the full run");
        let quick = HoldBack::of_run(None, true, ext4);
        assert_eq!(quick.wait, Duration::ZERO);
        assert!(
            quick.reason.starts_with("--quick waits for none of them, though /var/lib/docker is on an ext4 without a journal"),
            "{}",
            quick.reason
        );
        let journaled = || HoldBack::for_ext4(Path::new("/d"), "vda", Some("jbd2/vda-8"));
        assert_eq!(HoldBack::of_run(None, true, journaled), journaled());
        for quick in [false, true] {
            let given = HoldBack::of_run(Some(30), quick, ext4);
            assert_eq!(given.wait, Duration::from_secs(30), "--deletion-wait wins");
        }
    }

    #[test]
    fn only_an_ext4_without_a_journal_holds_inodes_back() {
        let root = Path::new("/var/lib/docker");
        let none = HoldBack::for_ext4(root, "vda", Some("<none>\n"));
        assert_eq!(none.wait, Duration::from_secs(365));
        assert!(
            none.reason.contains("without a journal (vda)"),
            "{}",
            none.reason
        );
        assert_eq!(
            HoldBack::for_ext4(root, "vda", Some("jbd2/vda-8\n")).wait,
            Duration::ZERO
        );
        let unknown = HoldBack::for_ext4(root, "254:0", None);
        assert_eq!(unknown.wait, Duration::ZERO);
        assert!(
            unknown.reason.contains("could not be read"),
            "{}",
            unknown.reason
        );
    }
}
