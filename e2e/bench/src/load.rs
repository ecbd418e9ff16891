//! The guard against a busy machine: the load average (`/proc/loadavg`) and the CPU time stolen
//! by the hypervisor (`/proc/stat`) at the start and end of every repetition. Other work on the
//! machine slows the floor and the provider unequally, so a ratio taken while the machine was busy
//! says little; the guard warns and the table says which repetitions it concerns. It also keeps
//! every repetition out of the window in which the engine's file system holds back the inodes of
//! the last deletion (see [`crate::storage`]).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};

use crate::stats::Row;
use crate::storage::HoldBack;

/// A 1-minute load average above this share of the cores at the start of a repetition marks the
/// machine busy. The load at the end is printed, not judged: it holds the repetition's own work
/// (N containers booting), which on a small machine lifts it above any useful limit. The 1-minute
/// average lags, so a repetition right after a large one can start above the limit by that one's
/// work: the verdict is a warning to read, not a proof.
const BUSY_LOAD_PER_CORE: f64 = 0.5;

/// CPU steal above this share of the CPU time during a repetition marks the machine busy.
const BUSY_STEAL: f64 = 0.05;

/// The machine's load at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// 1-minute load average.
    pub load: f64,
    /// CPU time stolen by the hypervisor so far, in ticks, all CPUs.
    pub steal: u64,
    /// CPU time so far, in ticks, all CPUs.
    pub total: u64,
}

impl Sample {
    /// Reads `/proc/loadavg` and `/proc/stat`.
    pub fn read() -> Result<Sample> {
        let loadavg = std::fs::read_to_string("/proc/loadavg").context("read /proc/loadavg")?;
        let stat = std::fs::read_to_string("/proc/stat").context("read /proc/stat")?;
        let load = parse_loadavg(&loadavg).ok_or_else(|| anyhow!("unreadable /proc/loadavg"))?;
        let (steal, total) =
            parse_cpu_steal(&stat).ok_or_else(|| anyhow!("unreadable /proc/stat"))?;
        Ok(Sample { load, steal, total })
    }
}

/// The 1, 5 and 15-minute load averages as `uptime` shows them (`1.57 2.14 2.65`).
pub fn load_averages() -> Result<String> {
    let text = std::fs::read_to_string("/proc/loadavg").context("read /proc/loadavg")?;
    Ok(text
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" "))
}

/// The 1-minute load average: the first field of `/proc/loadavg`.
fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Steal and total CPU ticks of all CPUs: the `cpu` line of `/proc/stat` (user nice system idle
/// iowait irq softirq steal; guest time is already counted in user).
fn parse_cpu_steal(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let steal = *ticks.get(7).unwrap_or(&0);
    Some((steal, ticks.iter().sum()))
}

/// Share of the CPU time stolen between two samples (0 when no time passed).
fn steal_share(start: &Sample, end: &Sample) -> f64 {
    let total = end.total.saturating_sub(start.total);
    if total == 0 {
        return 0.0;
    }
    end.steal.saturating_sub(start.steal) as f64 / total as f64
}

/// Why a repetition ran on a busy machine, or `None` when it was quiet.
fn busy(start: &Sample, end: &Sample, cores: usize) -> Option<String> {
    let limit = cores as f64 * BUSY_LOAD_PER_CORE;
    let mut why = Vec::new();
    if start.load > limit {
        why.push(format!("load {:.2} at the start", start.load));
    }
    let steal = steal_share(start, end);
    if steal > BUSY_STEAL {
        why.push(format!("CPU steal {:.1}%", steal * 100.0));
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// The samples of every repetition, and the verdicts.
#[derive(Debug)]
pub struct Guard {
    cores: usize,
    loads: Vec<f64>,
    steal_max: f64,
    busy: Vec<String>,
    repetitions: usize,
    hold_back: HoldBack,
    deleted: Option<Instant>,
}

impl Guard {
    /// A guard for a machine with `cores` cores whose engine holds a deletion's inodes back as
    /// `hold_back` says.
    pub fn new(cores: usize, hold_back: HoldBack) -> Guard {
        Guard {
            cores: cores.max(1),
            loads: Vec::new(),
            steal_max: 0.0,
            busy: Vec::new(),
            repetitions: 0,
            hold_back,
            deleted: None,
        }
    }

    /// Notes that node containers were deleted just now.
    pub fn deleted(&mut self) {
        self.deleted = Some(Instant::now());
    }

    /// How much longer the inodes of the last deletion are held back.
    fn held_back_for(&self) -> Duration {
        self.deleted.map_or(Duration::ZERO, |at| {
            self.hold_back.wait.saturating_sub(at.elapsed())
        })
    }

    /// Waits until the inodes of the last deletion are no longer held back, then, for at most
    /// `max`, until the 1-minute load average is no longer above the busy limit (the last
    /// repetition's own work, or a build, lifts it for a minute or two after it ended); returns
    /// the sample the repetition starts with.
    ///
    /// # Errors
    /// When `/proc` cannot be read.
    pub async fn settle(&self, label: &str, max: Duration) -> Result<Sample> {
        let held = self.held_back_for();
        if !held.is_zero() {
            eprintln!(
                "{label}: waiting {:.0} s until the last deletion is {} s old ({})",
                held.as_secs_f64(),
                self.hold_back.wait.as_secs(),
                self.hold_back.reason
            );
            tokio::time::sleep(held).await;
        }
        let limit = self.cores as f64 * BUSY_LOAD_PER_CORE;
        let started = Instant::now();
        let mut told = false;
        loop {
            let sample = Sample::read()?;
            if sample.load <= limit || started.elapsed() >= max {
                if told {
                    eprintln!(
                        "{label}: load average {:.2} after {:.0} s",
                        sample.load,
                        started.elapsed().as_secs_f64()
                    );
                }
                return Ok(sample);
            }
            if !told {
                told = true;
                eprintln!(
                    "{label}: waiting up to {} s for the load average ({:.2}) to fall to {limit:.1}",
                    max.as_secs(),
                    sample.load
                );
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }

    /// Records the repetition `label` that ran between `start` and `end`; prints both, and a
    /// warning when the machine was busy.
    pub fn record(&mut self, label: &str, start: &Sample, end: &Sample) {
        let steal = steal_share(start, end);
        eprintln!(
            "{label}: load average {:.2} → {:.2}, CPU steal {:.1}%",
            start.load,
            end.load,
            steal * 100.0
        );
        self.repetitions += 1;
        self.loads.extend([start.load, end.load]);
        self.steal_max = self.steal_max.max(steal);
        if let Some(why) = busy(start, end, self.cores) {
            eprintln!(
                "warning: {label} ran on a busy machine ({why}; {} cores): its figures are not a quiet measurement",
                self.cores
            );
            self.busy.push(format!("{label} ({why})"));
        }
    }

    /// The table's row: the load averages seen, and which repetitions ran on a busy machine.
    pub fn row(&self) -> Row {
        let verdict = if self.busy.is_empty() {
            format!("quiet in all {} repetitions", self.repetitions)
        } else {
            format!(
                "BUSY in {} of {} repetitions: {}",
                self.busy.len(),
                self.repetitions,
                self.busy.join("; ")
            )
        };
        let deletions = if self.hold_back.wait.is_zero() {
            format!("no wait after deletions ({})", self.hold_back.reason)
        } else {
            format!(
                "every repetition started at least {} s after the last deletion ({})",
                self.hold_back.wait.as_secs(),
                self.hold_back.reason
            )
        };
        Row::single("load average (1 min)", "load", &self.loads).note(format!(
            "at the start and end of every repetition (busy: above {:.1} at the start); CPU steal at most {:.1}%; {verdict}; {deletions}",
            self.cores as f64 * BUSY_LOAD_PER_CORE,
            self.steal_max * 100.0
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  4705 356 584 3699 23 23 0 12 0 0\ncpu0 1393 280 260 1800 10 20 0 6 0 0\nintr 114930548 113199788 3\n";

    fn sample(load: f64, steal: u64, total: u64) -> Sample {
        Sample { load, steal, total }
    }

    #[test]
    fn the_one_minute_load_and_the_steal_are_read() {
        assert_eq!(parse_loadavg("2.51 3.20 3.65 3/700 5889\n"), Some(2.51));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(
            parse_cpu_steal(STAT),
            Some((12, 4705 + 356 + 584 + 3699 + 23 + 23 + 12))
        );
        assert_eq!(
            parse_cpu_steal("cpu  1 2 3 4\n"),
            Some((0, 10)),
            "an old kernel without a steal column steals nothing"
        );
        assert_eq!(parse_cpu_steal("intr 1 2\n"), None);
        assert_eq!(parse_cpu_steal("cpu  1 x 3 4\n"), None);
    }

    #[test]
    fn a_quiet_machine_is_not_busy() {
        assert_eq!(busy(&sample(0.4, 0, 1000), &sample(0.9, 10, 2000), 2), None);
        assert_eq!(steal_share(&sample(0.0, 5, 100), &sample(0.0, 5, 100)), 0.0);
    }

    #[test]
    fn load_at_the_start_or_steal_makes_the_machine_busy() {
        let quiet = sample(0.2, 0, 1000);
        assert_eq!(
            busy(&sample(1.5, 0, 1000), &sample(0.2, 0, 2000), 2).as_deref(),
            Some("load 1.50 at the start")
        );
        assert_eq!(busy(&sample(1.5, 0, 1000), &quiet, 8), None, "8 cores");
        assert_eq!(
            busy(&quiet, &sample(6.0, 0, 2000), 2),
            None,
            "the load at the end holds the repetition's own work"
        );
        assert_eq!(
            busy(&quiet, &sample(0.2, 100, 2000), 2).as_deref(),
            Some("CPU steal 10.0%")
        );
    }

    #[test]
    fn a_deletion_holds_the_next_repetition_back() {
        let mut guard = Guard::new(
            2,
            HoldBack::fixed(Duration::from_secs(365), "ext4 without a journal"),
        );
        assert_eq!(guard.held_back_for(), Duration::ZERO, "nothing deleted yet");
        guard.deleted();
        let held = guard.held_back_for();
        assert!(
            held > Duration::from_secs(360) && held <= Duration::from_secs(365),
            "{held:?}"
        );
        assert!(guard.row().note.ends_with(
            "every repetition started at least 365 s after the last deletion (ext4 without a journal)"
        ));

        let mut short = Guard::new(
            2,
            HoldBack::fixed(Duration::from_millis(1), "a short window"),
        );
        short.deleted();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            short.held_back_for(),
            Duration::ZERO,
            "the window has passed"
        );

        let mut journaled = Guard::new(2, HoldBack::fixed(Duration::ZERO, "ext4 with a journal"));
        journaled.deleted();
        assert_eq!(journaled.held_back_for(), Duration::ZERO);
    }

    #[test]
    fn the_row_names_the_busy_repetitions() {
        let mut guard = Guard::new(2, HoldBack::fixed(Duration::ZERO, "tmpfs"));
        guard.record(
            "N=1 repetition 1/2",
            &sample(0.1, 0, 0),
            &sample(0.3, 0, 100),
        );
        assert!(
            guard
                .row()
                .note
                .ends_with("quiet in all 1 repetitions; no wait after deletions (tmpfs)")
        );
        guard.record(
            "N=1 repetition 2/2",
            &sample(2.5, 0, 100),
            &sample(0.3, 0, 200),
        );
        let row = guard.row();
        assert_eq!(
            row.provider.map(|s| (s.min, s.max, s.n)),
            Some((0.1, 2.5, 4))
        );
        assert!(
            row.note.contains(
                "BUSY in 1 of 2 repetitions: N=1 repetition 2/2 (load 2.50 at the start);"
            ),
            "{}",
            row.note
        );
    }
}
