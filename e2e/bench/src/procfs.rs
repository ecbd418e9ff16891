//! The manager's footprint, read from `/proc/<pid>`: resident memory, CPU time and open file
//! descriptors.

use anyhow::{Context, Result, anyhow};

/// Clock ticks per second of `/proc/<pid>/stat` times (`getconf CLK_TCK`; 100 on Linux).
fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// A `kB` field of `/proc/<pid>/status` (`VmHWM`, `VmRSS`), in MiB.
pub fn status_mib(pid: u32, field: &str) -> Result<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    parse_status_kib(&text, field)
        .map(|kib| kib / 1024.0)
        .ok_or_else(|| anyhow!("no {field} in /proc/{pid}/status"))
}

fn parse_status_kib(text: &str, field: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// User + system CPU seconds the process used so far.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("read /proc/{pid}/stat"))?;
    let ticks = parse_stat_ticks(&text).ok_or_else(|| anyhow!("unreadable /proc/{pid}/stat"))?;
    Ok(ticks / ticks_per_second())
}

/// Open file descriptors of the process (entries of `/proc/<pid>/fd`).
pub fn open_fds(pid: u32) -> Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("read /proc/{pid}/fd"))?
        .count())
}

/// utime + stime (fields 14 and 15); the command name in parentheses may hold spaces.
fn parse_stat_ticks(text: &str) -> Option<f64> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_times_and_status_sizes_are_parsed() {
        let stat =
            "1234 (my manager) S 1 1234 1234 0 -1 4194560 2000 0 0 0 150 25 0 0 20 0 8 0 100 0";
        assert_eq!(parse_stat_ticks(stat), Some(175.0));
        let status = "Name:\tmanager\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(parse_status_kib(status, "VmHWM"), Some(20480.0));
        assert_eq!(parse_status_kib(status, "VmRSS"), Some(10240.0));
        assert_eq!(parse_status_kib(status, "VmSwap"), None);
    }

    #[test]
    fn this_process_has_a_footprint() {
        let pid = std::process::id();
        assert!(status_mib(pid, "VmHWM").unwrap() > 0.0);
        assert!(cpu_seconds(pid).unwrap() >= 0.0);
        let before = open_fds(pid).unwrap();
        let file = std::fs::File::open("/proc/self/status").unwrap();
        assert!(open_fds(pid).unwrap() > before);
        drop(file);
    }
}
