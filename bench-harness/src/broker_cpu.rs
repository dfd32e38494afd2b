//! What the brokers' processes cost: their CPU time (user + system, every thread, from
//! `/proc/<pid>/stat`) over the measured window, per MB acknowledged — the `broker CPU per MB
//! (ms)` row. On a host where several nodes share cores, latency alone hides how much of a
//! core each acknowledged megabyte took.

/// CPU seconds used so far by `pids` together; `None` when there are none or one cannot be
/// read (a broker given with `--bootstrap`, or one that exited).
pub fn cpu_seconds(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    // SAFETY: sysconf only reads a system constant.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks_per_s <= 0 {
        return None;
    }
    let mut ticks = 0u64;
    for pid in pids {
        ticks += process_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    }
    Some(ticks as f64 / ticks_per_s as f64)
}

/// utime + stime of one `/proc/<pid>/stat` line (fields 14 and 15; the command name in field
/// 2 may hold spaces and parentheses, so fields are counted after its closing one).
fn process_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Milliseconds of broker CPU per MiB acknowledged.
pub fn ms_per_mb(cpu_s: f64, acked_bytes: u64) -> Option<f64> {
    (acked_bytes > 0).then(|| cpu_s * 1000.0 / (acked_bytes as f64 / (1024.0 * 1024.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_read_past_a_command_name_with_spaces() {
        let line = "4242 (strand shard) (x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 100 0 0";
        assert_eq!(process_ticks(line), Some(325));
        assert_eq!(process_ticks("garbage"), None);
    }

    #[test]
    fn this_process_has_a_cpu_time() {
        let me = std::process::id();
        assert!(cpu_seconds(&[me]).is_some());
        assert_eq!(cpu_seconds(&[]), None);
        assert_eq!(ms_per_mb(1.0, 0), None);
        assert_eq!(ms_per_mb(0.5, 10 << 20), Some(50.0));
    }
}
