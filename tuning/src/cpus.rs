//! CPU sets: the cores this process may run on, Linux's list syntax (`0-3,6`), and setting a
//! process's or thread's affinity. The broker pins shard `i` to the `i`-th allowed core (so
//! `taskset -c 4-7 strand serve` puts its shards on 4-7), and `strand bench` gives the
//! broker it starts and its own load generator disjoint sets.

use std::io;

/// The cores the calling thread may run on, ascending (all online cores if unknown).
pub fn allowed() -> Vec<usize> {
    // SAFETY: sched_getaffinity writes into the zeroed set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect();
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

/// Restricts thread or process `pid` (0: the calling thread) to `cpus`.
pub fn set_affinity(pid: libc::pid_t, cpus: &[usize]) -> io::Result<()> {
    // SAFETY: the set is zeroed and filled within CPU_SETSIZE before the call.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Parses Linux's CPU list syntax: `0-3,6,8-9`.
pub fn parse_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("{text:?}: not a CPU list like 0-3,6");
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?),
            None => {
                let c: usize = part.parse().map_err(|_| bad())?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return Err(format!("{text:?}: no CPUs"));
    }
    Ok(cpus)
}

/// `cpus` in list syntax, ranges collapsed: `[0, 1, 2, 5]` -> `0-2,5`.
pub fn format_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_format() {
        assert_eq!(parse_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(format_list(&[0, 1, 2, 5]), "0-2,5");
        assert!(parse_list("3-1").is_err());
        assert!(parse_list("x").is_err());
        assert!(!allowed().is_empty());
    }
}
