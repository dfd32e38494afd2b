//! `strand tune` on fake `/proc` and `/sys` trees: a bare-metal NVMe host that needs tuning,
//! a VM where most checks do not apply, and `--apply` changing the fake files.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::check::{Applied, Check, Status};
use crate::host::{selected, DevId, FileLimit, Host};
use crate::net::cpu_mask;
use crate::{checks, disk, tune, tune_and_apply};

/// Builds files and symlinks under a tempdir root.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, rel: &str, text: &str) -> &Tree {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, format!("{text}\n")).expect("write");
        self
    }

    fn link(&self, rel: &str, target: &str) -> &Tree {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        symlink(target, &p).expect("symlink");
        self
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel))
            .expect("read")
            .trim()
            .to_string()
    }

    fn host(&self, data_dev: DevId) -> Host {
        Host {
            root: self.root().to_path_buf(),
            data_dir: PathBuf::from("/data/strand"),
            data_dev: Some(data_dev),
            nofile: Some(FileLimit {
                soft: 1024,
                hard: 4096,
            }),
        }
    }
}

const NVME: DevId = DevId {
    major: 259,
    minor: 1,
};
const PCI_NVME: &str = "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1";
const PCI_NIC: &str = "sys/devices/pci0000:00/0000:00:03.0";
const VIRTIO_BLK: &str = "sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda";

/// A two-node bare-metal host with default (untuned) settings, data on an NVMe partition.
fn bare_metal() -> Tree {
    let t = Tree::new();
    t.file("sys/devices/system/cpu/online", "0-3")
        .file(
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "powersave",
        )
        .file(
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
            "powersave",
        )
        .file(
            "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
            "performance",
        )
        .file(
            "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
            "powersave",
        )
        .file(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "[always] madvise never",
        )
        .file("proc/sys/vm/swappiness", "60")
        .file("proc/sys/fs/aio-max-nr", "65536")
        .file("proc/sys/fs/file-max", "9223372036854775807")
        .file("proc/sys/vm/dirty_ratio", "40")
        .file("proc/sys/vm/dirty_bytes", "0")
        .file("proc/sys/vm/dirty_background_ratio", "10")
        .file("proc/sys/vm/dirty_background_bytes", "0")
        .file(
            "sys/devices/system/clocksource/clocksource0/current_clocksource",
            "hpet",
        )
        .file(
            "sys/devices/system/clocksource/clocksource0/available_clocksource",
            "tsc hpet acpi_pm",
        )
        .file("sys/devices/system/node/node0/cpulist", "0-1")
        .file("sys/devices/system/node/node1/cpulist", "2-3")
        .file(
            &format!("{PCI_NVME}/queue/scheduler"),
            "[mq-deadline] kyber none",
        )
        .file(&format!("{PCI_NVME}/queue/nomerges"), "0")
        .file(&format!("{PCI_NVME}/queue/rotational"), "0")
        .file(
            &format!("{PCI_NVME}/device/model"),
            "Samsung SSD 980 PRO 1TB",
        )
        .file(&format!("{PCI_NVME}/device/numa_node"), "0")
        .file(&format!("{PCI_NVME}/nvme0n1p1/partition"), "1")
        .link(
            "sys/dev/block/259:1",
            "../../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/nvme0n1p1",
        )
        .file(
            "proc/self/mounts",
            "/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n\
             /dev/nvme0n1p1 /data xfs rw,noatime,attr2 0 0\n\
             /dev/sdb1 /dat ext4 rw 0 0\n\
             /dev/sdc1 /data/strand\\040old btrfs rw 0 0",
        )
        .file(&format!("{PCI_NIC}/net/eth0/queues/rx-0/rps_cpus"), "0")
        .file(&format!("{PCI_NIC}/net/eth0/queues/tx-0/xps_cpus"), "0")
        .file(&format!("{PCI_NIC}/msi_irqs/40"), "msix")
        .file(&format!("{PCI_NIC}/msi_irqs/41"), "msix")
        .file(&format!("{PCI_NIC}/numa_node"), "1")
        .link(
            &format!("{PCI_NIC}/net/eth0/device"),
            "../../../0000:00:03.0",
        )
        .link(
            "sys/class/net/eth0",
            "../../devices/pci0000:00/0000:00:03.0/net/eth0",
        )
        .file("sys/devices/virtual/net/lo/queues/rx-0/rps_cpus", "0")
        .link("sys/class/net/lo", "../../devices/virtual/net/lo")
        .file("proc/irq/40/effective_affinity_list", "0")
        .file("proc/irq/41/effective_affinity_list", "0");
    t
}

/// A VM: no cpufreq, a device-mapper volume and a virtio disk, only virtual NICs, one node,
/// io_uring restricted.
fn vm() -> Tree {
    let t = Tree::new();
    t.file("sys/devices/system/cpu/online", "0-1")
        .file("sys/devices/system/cpu/cpu0/topology/core_id", "0")
        .file("sys/devices/system/cpu/cpu1/topology/core_id", "1")
        .file(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always madvise [never]",
        )
        .file("proc/sys/vm/swappiness", "1")
        .file("proc/sys/kernel/io_uring_disabled", "2")
        .file(
            "sys/devices/system/clocksource/clocksource0/current_clocksource",
            "kvm-clock",
        )
        .file(
            "sys/devices/system/clocksource/clocksource0/available_clocksource",
            "kvm-clock acpi_pm",
        )
        .file("sys/devices/system/node/node0/cpulist", "0-1")
        .file("sys/devices/virtual/block/dm-0/queue/scheduler", "[none]")
        .link("sys/dev/block/253:0", "../../devices/virtual/block/dm-0")
        .file(
            "proc/self/mounts",
            "/dev/mapper/vg-data / ext4 rw,noatime 0 0",
        )
        .file(
            &format!("{VIRTIO_BLK}/queue/scheduler"),
            "[mq-deadline] none",
        )
        .file(&format!("{VIRTIO_BLK}/queue/nomerges"), "0")
        .file(&format!("{VIRTIO_BLK}/queue/rotational"), "1")
        .link(
            "sys/dev/block/254:0",
            "../../devices/pci0000:00/0000:00:02.0/virtio1/block/vda",
        )
        .file("sys/devices/virtual/net/veth0/queues/rx-0/rps_cpus", "0")
        .link("sys/class/net/veth0", "../../devices/virtual/net/veth0");
    t
}

/// A check's current value and status, the pair most assertions are about.
fn state<'a>(checks: &'a [Check], name: &str) -> (&'a str, Status) {
    let c = find(checks, name);
    (c.current.as_str(), c.status)
}

fn find<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {checks:#?}"))
}

#[test]
fn sysfs_choice_lists_are_parsed() {
    assert_eq!(selected("always [madvise] never"), Some("madvise"));
    assert_eq!(selected("[none] mq-deadline"), Some("none"));
    assert_eq!(selected("madvise"), Some("madvise"));
    assert_eq!(selected("a b"), None);
    assert_eq!(crate::host::cpu_list_len("0-3,8,10-11"), 7);
    let cpus = (0..40).collect();
    assert_eq!(cpu_mask(&cpus), "ff,ffffffff");
    assert_eq!(cpu_mask(&[0, 1].into_iter().collect()), "3");
}

#[test]
fn bare_metal_checks_read_the_tree() {
    let t = bare_metal();
    let c = checks::run(&t.host(NVME));

    let gov = find(&c, "cpu governor");
    assert_eq!(
        (gov.current.as_str(), gov.status),
        ("performance,powersave", Status::Fix)
    );
    assert!(gov.applicable);
    assert_eq!(state(&c, "transparent hugepages"), ("always", Status::Fix));
    assert_eq!(find(&c, "vm.swappiness").status, Status::Fix);
    assert_eq!(find(&c, "fs.aio-max-nr").status, Status::Fix);
    assert_eq!(find(&c, "fs.file-max").status, Status::Ok);
    let nofile = find(&c, "ulimit -n");
    assert_eq!(
        (nofile.current.as_str(), nofile.applicable),
        ("1024 (hard 4096)", false)
    );
    assert_eq!(find(&c, "vm.dirty_ratio").status, Status::Fix);
    assert_eq!(find(&c, "vm.dirty_background_ratio").status, Status::Ok);

    // The partition hands over to its disk; the disk's queue is what is read.
    let d = disk::data_disk(&t.host(NVME)).expect("disk");
    assert_eq!(
        (d.name.as_str(), d.partition.as_deref()),
        ("nvme0n1", Some("nvme0n1p1"))
    );
    let kind = find(&c, "data disk");
    assert_eq!(
        kind.current,
        "nvme0n1p1 on nvme0n1 (ssd, Samsung SSD 980 PRO 1TB)"
    );
    assert_eq!(kind.status, Status::Ok);
    assert_eq!(
        state(&c, "io scheduler"),
        ("mq-deadline (nvme0n1)", Status::Fix)
    );
    assert_eq!(find(&c, "nomerges").status, Status::Fix);

    // Longest mount-point prefix, component-wise: /data (not /dat, not "/data/strand old").
    assert_eq!(state(&c, "filesystem"), ("xfs on /data", Status::Ok));
    assert_eq!(find(&c, "mount atime").status, Status::Ok);

    assert_eq!(find(&c, "nic rps").current, "eth0: 1 rx queue, rps off");
    assert_eq!(
        state(&c, "nic irq affinity"),
        ("eth0: 2 irqs on cpus 0", Status::Fix)
    );

    assert_eq!(state(&c, "clocksource"), ("hpet", Status::Fix));
    let uring = find(&c, "kernel.io_uring_disabled");
    assert_eq!(uring.status, Status::Ok, "a missing sysctl means available");
    assert!(uring.current.contains("available"));
    let numa = find(&c, "numa nodes");
    assert_eq!(numa.current, "2 (node0: 2 cpus, node1: 2 cpus)");
    assert_eq!(numa.status, Status::Fix, "disk on node 0, NIC on node 1");
}

#[test]
fn a_vm_gets_not_applicable_lines() {
    let t = vm();
    let c = checks::run(&t.host(DevId {
        major: 253,
        minor: 0,
    }));
    for name in [
        "cpu governor",
        "data disk",
        "io scheduler",
        "nomerges",
        "nic rps",
        "nic irq affinity",
        "clocksource",
    ] {
        assert_eq!(find(&c, name).status, Status::NotApplicable, "{name}");
    }
    assert!(find(&c, "io scheduler")
        .why
        .contains("virtual block device"));
    assert_eq!(find(&c, "transparent hugepages").status, Status::Ok);
    assert_eq!(find(&c, "vm.swappiness").status, Status::Ok);
    assert_eq!(find(&c, "fs.aio-max-nr").status, Status::Unknown);
    assert_eq!(find(&c, "kernel.io_uring_disabled").status, Status::Fix);
    assert_eq!(find(&c, "mount atime").status, Status::Ok);
    assert_eq!(state(&c, "numa nodes"), ("1 (node0: 2 cpus)", Status::Ok));

    // A virtio disk claims to be rotational; it is tuned as an SSD.
    let c = checks::run(&t.host(DevId {
        major: 254,
        minor: 0,
    }));
    assert_eq!(
        state(&c, "data disk"),
        ("vda (virtio)", Status::NotApplicable)
    );
    let sched = find(&c, "io scheduler");
    assert_eq!(
        (sched.recommended.as_str(), sched.status),
        ("none", Status::Fix)
    );
    assert_eq!(find(&c, "nomerges").status, Status::Fix);

    // tmpfs or overlay: no block device at all.
    let c = checks::run(&t.host(DevId {
        major: 0,
        minor: 45,
    }));
    assert!(find(&c, "io scheduler").why.contains("not a block device"));
}

#[test]
fn report_renders_a_table_and_versioned_json() {
    let t = bare_metal();
    let r = tune(&t.host(NVME));
    let table = r.to_table();
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("check"), "{table}");
    // Columns are aligned: "current" starts at the same place on every check line.
    let col = lines[0].find("current").expect("header");
    for line in &lines[1..=r.checks.len()] {
        assert_eq!(&line.as_bytes()[col - 2..col], b"  ", "{line}");
        assert_ne!(line.as_bytes()[col], b' ', "{line}");
    }
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).expect("json");
    assert_eq!(json["version"], 1);
    assert_eq!(
        json["checks"].as_array().map(Vec::len),
        Some(r.checks.len())
    );
    assert_eq!(json["checks"][0]["status"], "fix");
    assert_eq!(json["checks"][0]["applicable"], true);
}

#[test]
fn apply_changes_the_fake_tree_and_reports_it() {
    let t = bare_metal();
    // A file the kernel will not let even root write (a read-only sysctl) stands in for a
    // governor: that one check fails, the others still change.
    std::fs::remove_file(
        t.root()
            .join("sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"),
    )
    .expect("rm");
    t.link(
        "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
        "/proc/sys/kernel/ostype",
    );
    let r = tune_and_apply(&t.host(NVME));
    let applied = |name: &str| {
        r.applied
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a.clone())
            .unwrap_or_else(|| panic!("{name} not applied: {:#?}", r.applied))
    };
    assert_eq!(
        applied("vm.swappiness"),
        Applied::Changed {
            from: "60".into(),
            to: "1".into()
        }
    );
    assert_eq!(t.read("proc/sys/vm/swappiness"), "1");
    assert_eq!(
        applied("transparent hugepages").describe(),
        "changed: always -> madvise"
    );
    assert_eq!(
        applied("io scheduler").describe(),
        "changed: mq-deadline (nvme0n1) -> none (nvme0n1)"
    );
    assert_eq!(t.read(&format!("{PCI_NVME}/queue/nomerges")), "2");
    assert_eq!(
        t.read(&format!("{PCI_NIC}/net/eth0/queues/rx-0/rps_cpus")),
        "f"
    );
    assert_eq!(t.read("proc/sys/vm/dirty_ratio"), "20");
    assert_eq!(
        t.read("sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "tsc"
    );
    assert!(
        matches!(applied("cpu governor"), Applied::Failed { ref error } if error.contains("cpu3")),
        "{:?}",
        applied("cpu governor")
    );
    assert_eq!(
        t.read("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "performance"
    );
    // Not applicable by --apply: reported, untouched.
    assert!(r
        .applied
        .iter()
        .all(|(n, _)| n != "ulimit -n" && n != "nic irq affinity"));
    assert_eq!(find(&r.checks, "vm.swappiness").status, Status::Ok);
    assert!(r
        .to_table()
        .contains("apply vm.swappiness: changed: 60 -> 1"));
}
