//! The host as the checks see it: a root directory holding `proc/` and `sys/` (the real `/`,
//! or a fake tree in tests), the data directory, and the two facts that cannot come from a
//! tree (the data directory's device number and this process's open-files limit).
//!
//! Every read goes through [`Host::read`] with a path relative to the root, so a check never
//! touches the real `/proc` when a test hands it a tempdir.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// A block device number (`st_dev`), as `/sys/dev/block/MAJOR:MINOR` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevId {
    pub major: u32,
    pub minor: u32,
}

impl DevId {
    pub fn from_st_dev(dev: u64) -> DevId {
        DevId {
            major: libc::major(dev),
            minor: libc::minor(dev),
        }
    }
}

impl std::fmt::Display for DevId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// Soft and hard `RLIMIT_NOFILE` of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLimit {
    pub soft: u64,
    pub hard: u64,
}

#[derive(Clone, Debug)]
pub struct Host {
    /// Where `proc/` and `sys/` live: `/` on a real host.
    pub root: PathBuf,
    /// The broker's data directory, absolute, as it would be seen inside `root`.
    pub data_dir: PathBuf,
    /// The device the data directory lives on; `None` when it cannot be found.
    pub data_dev: Option<DevId>,
    /// This process's open-files limit (`getrlimit`, not from the tree).
    pub nofile: Option<FileLimit>,
}

impl Host {
    /// The real host (or `root`, for `--root`): resolves the data directory (or its nearest
    /// existing ancestor, before it is created) and its device, and asks for `RLIMIT_NOFILE`.
    pub fn probe(root: &Path, data_dir: &Path) -> Host {
        let abs = absolute(data_dir);
        let existing = abs.ancestors().find(|p| p.exists()).map(Path::to_path_buf);
        let data_dev = existing
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map(|m| DevId::from_st_dev(m.dev()));
        // Symlinks resolved on the part that exists; the part still to be created re-attached.
        let data_dir = existing
            .and_then(|p| {
                let rest = abs.strip_prefix(&p).ok()?;
                let real = std::fs::canonicalize(&p).ok()?;
                Some(if rest.as_os_str().is_empty() {
                    real
                } else {
                    real.join(rest)
                })
            })
            .unwrap_or(abs);
        Host {
            root: root.to_path_buf(),
            data_dir,
            data_dev,
            nofile: nofile_limit(),
        }
    }

    /// The path of `rel` (like `proc/sys/vm/swappiness`) under the root.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        let rel = rel.as_ref();
        self.root.join(rel.strip_prefix("/").unwrap_or(rel))
    }

    /// A file's contents, trimmed; `None` if it is missing or unreadable (a check then says
    /// "not applicable" or "unknown" rather than failing).
    pub fn read(&self, rel: impl AsRef<Path>) -> Option<String> {
        std::fs::read_to_string(self.path(rel))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// A file parsed as an unsigned number.
    pub fn read_u64(&self, rel: impl AsRef<Path>) -> Option<u64> {
        self.read(rel)?.parse().ok()
    }

    /// Writes `value` to a sysctl or sysfs file under the root (what `--apply` does).
    pub fn write(&self, rel: impl AsRef<Path>, value: &str) -> io::Result<()> {
        let path = self.path(rel);
        std::fs::write(&path, value)
            .map_err(|e| io::Error::new(e.kind(), format!("write {}: {e}", path.display())))
    }

    /// Names in a directory under the root, sorted; empty if it does not exist.
    pub fn list(&self, rel: impl AsRef<Path>) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(rel))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Where a symlink under the root leads, with `..` resolved textually so the result stays
    /// inside a fake tree (sysfs links are relative: `../../devices/...`).
    pub fn resolve_link(&self, rel: impl AsRef<Path>) -> Option<PathBuf> {
        let link = self.path(rel);
        let target = std::fs::read_link(&link).ok()?;
        let mut out = link.parent()?.to_path_buf();
        for c in target.components() {
            match c {
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(n) => out.push(n),
                Component::RootDir => out = self.root.clone(),
                _ => {}
            }
        }
        Some(out)
    }
}

/// The value the kernel marks as selected in a sysfs choice list: `always [madvise] never`
/// gives `madvise`. A file holding one bare word (as a fake tree may) gives that word.
pub fn selected(list: &str) -> Option<&str> {
    if let (Some(a), Some(b)) = (list.find('['), list.find(']')) {
        return (a < b).then(|| &list[a + 1..b]);
    }
    let mut words = list.split_whitespace();
    match (words.next(), words.next()) {
        (Some(w), None) => Some(w),
        _ => None,
    }
}

/// The choices of a sysfs list without the brackets: `[none] mq-deadline` gives both names.
pub fn choices(list: &str) -> Vec<&str> {
    list.split_whitespace()
        .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
        .collect()
}

/// Number of CPUs in a kernel CPU list such as `0-3,8,10-11`.
pub fn cpu_list_len(list: &str) -> usize {
    list.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|part| match part.trim().split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => usize::from(part.trim().parse::<usize>().is_ok()),
        })
        .sum()
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// This process's open-files limit.
pub fn nofile_limit() -> Option<FileLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass; no other memory is touched.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (rc == 0).then_some(FileLimit {
        soft: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}
