//! The host-wide checks (CPU, memory, kernel limits, clock, NUMA) and [`run`], which runs them
//! with the data-disk ([`crate::disk`]) and network ([`crate::net`]) checks, in a fixed order.
//!
//! Each check reads its inputs through [`Host`] (so tests feed fake trees), decides, and says
//! why in one sentence. Recommendations follow what Redpanda's `rpk redpanda tune` does for
//! the same thread-per-core, O_DIRECT design, adjusted where Strand differs (it uses io_uring,
//! never Linux AIO).

use crate::check::{Check, Status};
use crate::host::{cpu_list_len, selected, Host};

/// Open files a broker wants: sockets (up to 10,000 connections per shard) plus two or three
/// files per segment of every partition.
pub const NOFILE_RECOMMENDED: u64 = 1 << 20;
/// `fs.aio-max-nr`, as Redpanda sets it.
pub const AIO_MAX_NR_RECOMMENDED: u64 = 1 << 20;
/// `fs.file-max`: system-wide, at least what one broker may open.
pub const FILE_MAX_RECOMMENDED: u64 = 1 << 20;
/// `vm.swappiness`: swap only to avoid the OOM killer.
pub const SWAPPINESS_RECOMMENDED: u64 = 1;
/// `vm.dirty_ratio` / `vm.dirty_background_ratio` at most these (the kernel's defaults).
pub const DIRTY_RATIO_MAX: u64 = 20;
pub const DIRTY_BACKGROUND_RATIO_MAX: u64 = 10;

/// Every check, in the order `strand tune` prints them.
pub fn run(host: &Host) -> Vec<Check> {
    let mut out = vec![
        cpu_governor(host),
        transparent_hugepages(host),
        swappiness(host),
        sysctl_at_least(
            host,
            "fs.aio-max-nr",
            AIO_MAX_NR_RECOMMENDED,
            "Linux AIO contexts: strand uses io_uring, but libaio tools (fio) and Seastar \
             neighbours run out at the default 65536",
        ),
        sysctl_at_least(
            host,
            "fs.file-max",
            FILE_MAX_RECOMMENDED,
            "system-wide open files; a broker holds sockets and segment files",
        ),
        open_files(host),
    ];
    out.extend(crate::disk::checks(host));
    out.extend(crate::net::checks(host));
    out.push(clocksource(host));
    out.extend(dirty(host));
    out.push(io_uring(host));
    out.push(numa(host));
    out
}

fn sysctl_path(name: &str) -> String {
    format!("proc/sys/{}", name.replace('.', "/"))
}

fn cpu_governor(host: &Host) -> Check {
    const NAME: &str = "cpu governor";
    let cpus: Vec<String> = host
        .list("sys/devices/system/cpu")
        .into_iter()
        .filter(|n| {
            n.strip_prefix("cpu")
                .is_some_and(|d| d.parse::<u32>().is_ok())
        })
        .collect();
    let files: Vec<String> = cpus
        .iter()
        .map(|c| format!("sys/devices/system/cpu/{c}/cpufreq/scaling_governor"))
        .filter(|p| host.path(p).exists())
        .collect();
    if files.is_empty() {
        return Check::not_applicable(
            NAME,
            "no cpufreq",
            "the CPU frequency is not under the kernel's control here (a VM, or firmware-managed)",
        );
    }
    let mut governors: Vec<String> = files.iter().filter_map(|p| host.read(p)).collect();
    governors.sort();
    governors.dedup();
    let current = governors.join(",");
    let ok = governors == ["performance"];
    Check::new(
        NAME,
        current,
        "performance",
        Check::verdict(ok),
        "frequency ramps (powersave/schedutil) add latency to the first I/O after a pause",
    )
    .with_fix(
        files
            .into_iter()
            .map(|f| (f, "performance".to_string()))
            .collect(),
    )
}

fn transparent_hugepages(host: &Host) -> Check {
    const NAME: &str = "transparent hugepages";
    const FILE: &str = "sys/kernel/mm/transparent_hugepage/enabled";
    let Some(list) = host.read(FILE) else {
        return Check::not_applicable(NAME, "absent", "kernel built without THP");
    };
    let Some(mode) = selected(&list) else {
        return Check::unknown(NAME, "madvise", format!("cannot parse {FILE}: {list:?}"));
    };
    Check::new(
        NAME,
        mode,
        "madvise",
        Check::verdict(mode == "madvise" || mode == "never"),
        "`always` lets page faults stall on compaction (latency spikes); strand does not ask \
         for huge pages",
    )
    .with_fix(vec![(FILE.to_string(), "madvise".to_string())])
}

fn swappiness(host: &Host) -> Check {
    const NAME: &str = "vm.swappiness";
    let path = sysctl_path(NAME);
    let Some(v) = host.read_u64(&path) else {
        return Check::unknown(NAME, SWAPPINESS_RECOMMENDED.to_string(), "cannot read");
    };
    Check::new(
        NAME,
        v.to_string(),
        SWAPPINESS_RECOMMENDED.to_string(),
        Check::verdict(v <= SWAPPINESS_RECOMMENDED),
        "a swapped-out page of the broker costs a disk read in the request path",
    )
    .with_fix(vec![(path, SWAPPINESS_RECOMMENDED.to_string())])
}

fn sysctl_at_least(host: &Host, name: &str, min: u64, why: &str) -> Check {
    let path = sysctl_path(name);
    let Some(v) = host.read_u64(&path) else {
        return Check::unknown(name, format!(">= {min}"), "cannot read");
    };
    Check::new(
        name,
        v.to_string(),
        format!(">= {min}"),
        Check::verdict(v >= min),
        why,
    )
    .with_fix(vec![(path, min.to_string())])
}

fn open_files(host: &Host) -> Check {
    const NAME: &str = "ulimit -n";
    let want = format!(">= {NOFILE_RECOMMENDED}");
    let Some(lim) = host.nofile else {
        return Check::unknown(NAME, want, "getrlimit failed");
    };
    Check::new(
        NAME,
        format!("{} (hard {})", lim.soft, lim.hard),
        want,
        Check::verdict(lim.soft >= NOFILE_RECOMMENDED),
        "per-process open files; raise it where strand starts (LimitNOFILE= in its systemd \
         unit, or `ulimit -n`), not here",
    )
}

fn clocksource(host: &Host) -> Check {
    const NAME: &str = "clocksource";
    const DIR: &str = "sys/devices/system/clocksource/clocksource0";
    let Some(current) = host.read(format!("{DIR}/current_clocksource")) else {
        return Check::unknown(NAME, "tsc", "cannot read the current clocksource");
    };
    let available = host
        .read(format!("{DIR}/available_clocksource"))
        .unwrap_or_default();
    if !available.split_whitespace().any(|c| c == "tsc") {
        return Check::not_applicable(
            NAME,
            current,
            "no TSC clocksource on this machine (not x86, or an unstable TSC)",
        );
    }
    Check::new(
        NAME,
        current.clone(),
        "tsc",
        Check::verdict(current == "tsc"),
        "every timer and latency measurement reads the clock; tsc is read without a syscall",
    )
    .with_fix(vec![(
        format!("{DIR}/current_clocksource"),
        "tsc".to_string(),
    )])
}

/// `vm.dirty_ratio` and `vm.dirty_background_ratio`. Segment data bypasses the page cache
/// (O_DIRECT), but a large dirty pool from other writers flushes in bursts that queue ahead
/// of the broker's writes and fdatasyncs on the same disk.
fn dirty(host: &Host) -> Vec<Check> {
    [
        ("vm.dirty_ratio", "vm.dirty_bytes", DIRTY_RATIO_MAX),
        (
            "vm.dirty_background_ratio",
            "vm.dirty_background_bytes",
            DIRTY_BACKGROUND_RATIO_MAX,
        ),
    ]
    .into_iter()
    .map(|(name, bytes_name, max)| {
        let why = "dirty page-cache data flushes in bursts that queue ahead of the broker's \
                   O_DIRECT writes and fdatasyncs";
        // A non-zero *_bytes setting replaces the ratio.
        if let Some(b) = host.read_u64(sysctl_path(bytes_name)).filter(|b| *b > 0) {
            return Check::new(name, format!("{bytes_name}={b}"), "-", Status::Ok, why);
        }
        let path = sysctl_path(name);
        match host.read_u64(&path) {
            Some(v) => Check::new(
                name,
                v.to_string(),
                format!("<= {max}"),
                Check::verdict(v <= max),
                why,
            )
            .with_fix(vec![(path, max.to_string())]),
            None => Check::unknown(name, format!("<= {max}"), "cannot read"),
        }
    })
    .collect()
}

fn io_uring(host: &Host) -> Check {
    const NAME: &str = "kernel.io_uring_disabled";
    let path = sysctl_path(NAME);
    let why = "strand does all its disk and network I/O through io_uring";
    match host.read_u64(&path) {
        // The sysctl arrived in 6.6; older kernels always allow io_uring.
        None if !host.path(&path).exists() => Check::new(
            NAME,
            "absent (io_uring available)",
            "0",
            Status::Ok,
            format!("{why}; kernels before 6.6 have no switch"),
        ),
        None => Check::unknown(NAME, "0", "cannot read"),
        Some(v) => {
            let current = match v {
                0 => "0 (available)",
                1 => "1 (privileged processes and io_uring_group only)",
                _ => "2 (disabled)",
            };
            Check::new(NAME, current, "0", Check::verdict(v == 0), why)
                .with_fix(vec![(path, "0".to_string())])
        }
    }
}

/// NUMA layout. One node: nothing to do. Several: strand runs one shard per core across
/// every node, so what matters is that the data disk and the NIC hang off the same node.
fn numa(host: &Host) -> Check {
    const NAME: &str = "numa nodes";
    const DIR: &str = "sys/devices/system/node";
    let nodes: Vec<String> = host
        .list(DIR)
        .into_iter()
        .filter(|n| {
            n.strip_prefix("node")
                .is_some_and(|d| d.parse::<u32>().is_ok())
        })
        .collect();
    if nodes.is_empty() {
        return Check::not_applicable(NAME, "no node info", "no /sys NUMA topology (container?)");
    }
    let layout: Vec<String> = nodes
        .iter()
        .map(|n| {
            let cpus = host.read(format!("{DIR}/{n}/cpulist")).unwrap_or_default();
            format!("{n}: {} cpus", cpu_list_len(&cpus))
        })
        .collect();
    let current = format!("{} ({})", nodes.len(), layout.join(", "));
    if nodes.len() == 1 {
        return Check::new(
            NAME,
            current,
            "-",
            Status::Ok,
            "one memory node: every core is equally close to the disk and the NIC",
        );
    }
    let disk_node = crate::disk::numa_node(host);
    let nic_nodes = crate::net::numa_nodes(host);
    let apart = match disk_node {
        Some(d) => nic_nodes.iter().any(|n| *n != d),
        None => false,
    };
    Check::new(
        NAME,
        current,
        "data disk and NIC on one node",
        Check::verdict(!apart),
        format!(
            "cross-node DMA costs latency (data disk on node {}, NICs on {:?}); shards run on \
             every node's cores",
            disk_node.map_or("?".to_string(), |d| d.to_string()),
            nic_nodes
        ),
    )
}
