//! The data disk: which block device holds the data directory, its queue settings, and the
//! filesystem it is mounted with.
//!
//! The device comes from the data directory's `st_dev` (`MAJOR:MINOR`):
//! `/sys/dev/block/MAJ:MIN` links to the device's sysfs directory; a partition (it has a
//! `partition` file) hands over to its parent, the whole disk, which owns `queue/`. Devices
//! under `/sys/devices/virtual/` (device-mapper, loop, zram, md) have no queue worth tuning:
//! the disks below them do. The filesystem comes from `/proc/self/mounts`: the mount point
//! that is the longest prefix of the data directory.

use std::path::{Path, PathBuf};

use crate::check::{Check, Status};
use crate::host::{selected, Host};

/// The whole disk under the data directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataDisk {
    /// Kernel name (`nvme0n1`, `vda`, `sda`).
    pub name: String,
    /// Its sysfs directory, relative to the host's root.
    pub sys_rel: PathBuf,
    /// The partition the data directory is on, if not the whole disk.
    pub partition: Option<String>,
    /// Under `/sys/devices/virtual/` (dm, loop, zram, md).
    pub is_virtual: bool,
    /// The paravirtual bus (`virtio`, `xen`, `vmbus`) of a VM's disk.
    pub paravirtual: Option<&'static str>,
}

impl DataDisk {
    fn queue(&self, file: &str) -> PathBuf {
        self.sys_rel.join("queue").join(file)
    }

    pub fn rotational(&self, host: &Host) -> Option<bool> {
        host.read_u64(self.queue("rotational")).map(|v| v == 1)
    }

    /// Model string as sysfs has it (NVMe/SCSI `device/model`), if any.
    pub fn model(&self, host: &Host) -> Option<String> {
        host.read(self.sys_rel.join("device/model"))
            .filter(|m| !m.is_empty())
    }

    /// One-line description: `vda1 on vda (ssd, model X)`.
    pub fn describe(&self, host: &Host) -> String {
        let kind = match (self.paravirtual, self.rotational(host)) {
            (Some(bus), _) => bus,
            (None, Some(true)) => "rotational",
            (None, Some(false)) => "ssd",
            (None, None) => "unknown kind",
        };
        let mut s = match &self.partition {
            Some(p) => format!("{p} on {}", self.name),
            None => self.name.clone(),
        };
        s.push_str(&format!(" ({kind}"));
        if let Some(m) = self.model(host) {
            s.push_str(&format!(", {m}"));
        }
        if self.is_virtual {
            s.push_str(", virtual");
        }
        s.push(')');
        s
    }
}

/// Finds the disk holding the data directory, or says why it cannot.
pub fn data_disk(host: &Host) -> Result<DataDisk, String> {
    let dev = host
        .data_dev
        .ok_or_else(|| format!("cannot stat {}", host.data_dir.display()))?;
    if dev.major == 0 {
        return Err(format!(
            "device {dev} is not a block device (tmpfs, overlay or a network filesystem)"
        ));
    }
    let mut dir = host
        .resolve_link(format!("sys/dev/block/{dev}"))
        .ok_or_else(|| format!("no /sys/dev/block/{dev}"))?;
    let mut partition = None;
    if dir.join("partition").exists() {
        partition = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        dir.pop();
    }
    let sys_rel = dir
        .strip_prefix(&host.root)
        .map(Path::to_path_buf)
        .map_err(|_| format!("/sys/dev/block/{dev} leads outside the root"))?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("/sys/dev/block/{dev} has no device name"))?;
    let rel = sys_rel.to_string_lossy();
    let is_virtual = rel.contains("devices/virtual/");
    let paravirtual = ["virtio", "xen", "vmbus"]
        .into_iter()
        .find(|bus| rel.contains(&format!("/{bus}")));
    Ok(DataDisk {
        name,
        sys_rel,
        partition,
        is_virtual,
        paravirtual,
    })
}

/// NUMA node the data disk's controller is attached to, if the kernel says.
pub fn numa_node(host: &Host) -> Option<i64> {
    let disk = data_disk(host).ok()?;
    host.read(disk.sys_rel.join("device/numa_node"))?
        .parse()
        .ok()
        .filter(|n: &i64| *n >= 0)
}

/// The mount holding the data directory: (mount point, fs type, options).
pub fn mount_of(host: &Host) -> Option<(PathBuf, String, Vec<String>)> {
    let mounts = host.read("proc/self/mounts")?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (_src, point, fstype, opts) = (f.next()?, f.next()?, f.next()?, f.next()?);
            let point = PathBuf::from(unescape_mount(point));
            host.data_dir.starts_with(&point).then(|| {
                (
                    point,
                    fstype.to_string(),
                    opts.split(',').map(str::to_string).collect(),
                )
            })
        })
        // The longest prefix wins; among equal ones the last mounted (it hides the others).
        .fold(
            None,
            |best: Option<(PathBuf, String, Vec<String>)>, m| match &best {
                Some(b) if b.0.components().count() > m.0.components().count() => best,
                _ => Some(m),
            },
        )
}

/// `/proc/self/mounts` writes space, tab, newline and backslash as octal escapes.
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// The data-disk and filesystem checks.
pub fn checks(host: &Host) -> Vec<Check> {
    let mut out = queue_checks(host);
    out.extend(filesystem_checks(host));
    out
}

fn queue_checks(host: &Host) -> Vec<Check> {
    let names = ["data disk", "io scheduler", "nomerges"];
    let disk = match data_disk(host) {
        Ok(d) => d,
        Err(why) => {
            return names
                .iter()
                .map(|n| Check::not_applicable(n, "-", why.clone()))
                .collect()
        }
    };
    let desc = disk.describe(host);
    if disk.is_virtual {
        let why = format!(
            "{} is a virtual block device (device-mapper, loop, zram, md): tune the disks \
             under it",
            disk.name
        );
        return names
            .iter()
            .map(|n| Check::not_applicable(n, desc.clone(), why.clone()))
            .collect();
    }
    // A paravirtual disk's rotational flag says nothing about the medium.
    let rotational = match disk.paravirtual {
        Some(_) => Some(false),
        None => disk.rotational(host),
    };
    let kind = match disk.paravirtual {
        Some(bus) => Check::not_applicable(
            "data disk",
            desc,
            format!(
                "a {bus} disk hides the medium from the guest; `strand iotune` measures what \
                 it delivers"
            ),
        ),
        None => Check::new(
            "data disk",
            desc,
            "non-rotational (NVMe)",
            match rotational {
                Some(r) => Check::verdict(!r),
                None => Status::Unknown,
            },
            "a spinning disk's seeks put milliseconds under every fdatasync",
        ),
    };
    let (want_sched, why_sched) = if rotational == Some(true) {
        (
            "mq-deadline",
            "rotational disk: the deadline scheduler bounds seek starvation",
        )
    } else {
        (
            "none",
            "a scheduler only adds CPU and queueing in front of an SSD's (or a hypervisor's) own queues",
        )
    };
    let sched_file = disk.queue("scheduler");
    let sched = match host.read(&sched_file) {
        Some(list) => match selected(&list) {
            Some(cur) => Check::new(
                "io scheduler",
                format!("{cur} ({})", disk.name),
                want_sched,
                Check::verdict(cur == want_sched),
                why_sched,
            )
            .with_fix(vec![(
                sched_file.to_string_lossy().into_owned(),
                want_sched.to_string(),
            )]),
            None => Check::unknown("io scheduler", want_sched, format!("cannot parse {list:?}")),
        },
        None => Check::not_applicable("io scheduler", "no queue/scheduler", "no I/O queue"),
    };
    let merges_file = disk.queue("nomerges");
    let merges = if rotational == Some(true) {
        Check::not_applicable(
            "nomerges",
            host.read(&merges_file).unwrap_or_default(),
            "rotational disk: merging adjacent requests saves seeks",
        )
    } else {
        match host.read_u64(&merges_file) {
            Some(v) => Check::new(
                "nomerges",
                format!("{v} ({})", disk.name),
                "2",
                Check::verdict(v == 2),
                "strand already writes large aligned chunks; merge lookups only cost CPU per I/O",
            )
            .with_fix(vec![(
                merges_file.to_string_lossy().into_owned(),
                "2".to_string(),
            )]),
            None => Check::unknown("nomerges", "2", "cannot read queue/nomerges"),
        }
    };
    vec![kind, sched, merges]
}

fn filesystem_checks(host: &Host) -> Vec<Check> {
    let Some((point, fstype, opts)) = mount_of(host) else {
        return vec![
            Check::unknown(
                "filesystem",
                "xfs or ext4",
                "no mount found in /proc/self/mounts",
            ),
            Check::unknown(
                "mount atime",
                "noatime",
                "no mount found in /proc/self/mounts",
            ),
        ];
    };
    let fs = Check::new(
        "filesystem",
        format!("{fstype} on {}", point.display()),
        "xfs or ext4",
        Check::verdict(fstype == "xfs" || fstype == "ext4"),
        "strand relies on O_DIRECT, fallocate and fdatasync behaving well: xfs and ext4 do; \
         tmpfs is not durable, overlay and copy-on-write filesystems add latency",
    );
    // Without an explicit atime option the kernel's default is relatime.
    let atime = opts
        .iter()
        .find(|o| matches!(o.as_str(), "noatime" | "relatime" | "strictatime"))
        .cloned()
        .unwrap_or_else(|| "relatime (default)".to_string());
    let atime_check = Check::new(
        "mount atime",
        atime.clone(),
        "noatime",
        Check::verdict(atime == "noatime"),
        format!(
            "atime updates turn reads into inode writes in the journal; add noatime to {}'s \
             options in /etc/fstab (remount), not something --apply does",
            point.display()
        ),
    );
    vec![fs, atime_check]
}
