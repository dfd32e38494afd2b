//! The network checks: how a NIC's receive work reaches the cores.
//!
//! A NIC with fewer receive queues than cores raises its interrupts on few cores; the kernel's
//! Receive Packet Steering (RPS, `queues/rx-N/rps_cpus`, a CPU bitmask) hands packet
//! processing on to the others. Interrupt placement (`/proc/irq/N/effective_affinity_list`) is
//! reported but not changed: irqbalance or the NIC vendor's scripts own it.
//!
//! Only physical NICs count: devices under `/sys/devices/virtual/` (lo, veth, bridges, ifb)
//! have no interrupts of their own, which is also why a container sees "not applicable".

use std::collections::BTreeSet;

use crate::check::Check;
use crate::host::Host;

/// A physical network interface (`/sys/class/net/<name>` leads outside devices/virtual).
struct Nic {
    name: String,
}

fn physical_nics(host: &Host) -> Vec<Nic> {
    host.list("sys/class/net")
        .into_iter()
        .filter(|name| {
            host.resolve_link(format!("sys/class/net/{name}"))
                .and_then(|p| p.strip_prefix(&host.root).ok().map(|r| r.to_path_buf()))
                .is_some_and(|rel| !rel.to_string_lossy().contains("devices/virtual/"))
        })
        .map(|name| Nic { name })
        .collect()
}

/// Online CPUs, from `/sys/devices/system/cpu/online` (`0-3,6`).
pub fn online_cpus(host: &Host) -> BTreeSet<usize> {
    let list = host
        .read("sys/devices/system/cpu/online")
        .unwrap_or_default();
    let mut set = BTreeSet::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            set.extend(a..=b);
        }
    }
    set
}

/// A CPU set as the kernel's bitmask format: hex, 32-bit groups separated by commas.
pub fn cpu_mask(cpus: &BTreeSet<usize>) -> String {
    let top = cpus.iter().next_back().copied().unwrap_or(0);
    let mut words = vec![0u32; top / 32 + 1];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    let mut groups: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
    // The most significant group without leading zeros, like the kernel prints it.
    if let Some(first) = groups.first_mut() {
        let trimmed = first.trim_start_matches('0');
        *first = if trimmed.is_empty() {
            "0".to_string()
        } else {
            trimmed.to_string()
        };
    }
    groups.join(",")
}

fn mask_is_zero(mask: &str) -> bool {
    mask.chars().all(|c| c == '0' || c == ',')
}

/// NUMA nodes the physical NICs are attached to (where the kernel says).
pub fn numa_nodes(host: &Host) -> Vec<i64> {
    physical_nics(host)
        .iter()
        .filter_map(|n| host.read(format!("sys/class/net/{}/device/numa_node", n.name)))
        .filter_map(|v| v.parse::<i64>().ok())
        .filter(|n| *n >= 0)
        .collect()
}

pub fn checks(host: &Host) -> Vec<Check> {
    let nics = physical_nics(host);
    let cpus = online_cpus(host);
    if nics.is_empty() {
        let why = "no physical NIC visible (container or loopback only)";
        return vec![
            Check::not_applicable("nic rps", "-", why),
            Check::not_applicable("nic irq affinity", "-", why),
        ];
    }
    if cpus.len() < 2 {
        let why = "one CPU: nothing to spread";
        return vec![
            Check::not_applicable("nic rps", "-", why),
            Check::not_applicable("nic irq affinity", "-", why),
        ];
    }
    vec![rps(host, &nics, &cpus), irq_affinity(host, &nics)]
}

fn rps(host: &Host, nics: &[Nic], cpus: &BTreeSet<usize>) -> Check {
    let mask = cpu_mask(cpus);
    let mut current = Vec::new();
    let mut writes = Vec::new();
    let mut ok = true;
    for nic in nics {
        let dir = format!("sys/class/net/{}/queues", nic.name);
        let rx: Vec<String> = host
            .list(&dir)
            .into_iter()
            .filter(|q| q.starts_with("rx-"))
            .collect();
        if rx.len() >= cpus.len() {
            current.push(format!("{}: {} rx queues", nic.name, rx.len()));
            continue;
        }
        let masks: Vec<String> = rx
            .iter()
            .map(|q| host.read(format!("{dir}/{q}/rps_cpus")).unwrap_or_default())
            .collect();
        let off = masks.iter().filter(|m| mask_is_zero(m)).count();
        ok &= off == 0;
        let state = if off == 0 {
            format!("rps_cpus={}", masks.join("/"))
        } else {
            "rps off".to_string()
        };
        current.push(format!(
            "{}: {} rx queue{}, {state}",
            nic.name,
            rx.len(),
            if rx.len() == 1 { "" } else { "s" }
        ));
        writes.extend(
            rx.iter()
                .map(|q| (format!("{dir}/{q}/rps_cpus"), mask.clone())),
        );
    }
    Check::new(
        "nic rps",
        current.join("; "),
        format!("rps_cpus={mask} where rx queues < cpus"),
        Check::verdict(ok),
        "with fewer rx queues than cores, the cores taking the interrupts also do every \
         shard's packet processing",
    )
    .with_fix(writes)
}

fn irq_affinity(host: &Host, nics: &[Nic]) -> Check {
    let mut current = Vec::new();
    let mut crowded = false;
    for nic in nics {
        // PCI NICs list their MSI interrupts on the device; virtio NICs on its parent.
        let base = format!("sys/class/net/{}/device", nic.name);
        let mut irqs = host.list(format!("{base}/msi_irqs"));
        if irqs.is_empty() {
            irqs = host.list(format!("{base}/../msi_irqs"));
        }
        if irqs.is_empty() {
            current.push(format!("{}: no MSI irqs listed", nic.name));
            continue;
        }
        let mut used = BTreeSet::new();
        for irq in &irqs {
            let list = host
                .read(format!("proc/irq/{irq}/effective_affinity_list"))
                .or_else(|| host.read(format!("proc/irq/{irq}/smp_affinity_list")));
            if let Some(l) = list {
                used.insert(l);
            }
        }
        crowded |= irqs.len() >= 2 && used.len() == 1;
        let on: Vec<String> = used.into_iter().collect();
        current.push(format!(
            "{}: {} irqs on cpus {}",
            nic.name,
            irqs.len(),
            on.join(",")
        ));
    }
    Check::new(
        "nic irq affinity",
        current.join("; "),
        "spread over cores",
        Check::verdict(!crowded),
        "all of a NIC's interrupts on one core starve the shard pinned there; irqbalance or \
         the vendor's set_irq_affinity script spreads them (reported only)",
    )
}
