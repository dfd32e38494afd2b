//! One tuning check's verdict ([`Check`]) and the report of a run: an aligned table for
//! people, a versioned JSON object for scripts.

use serde::Serialize;

/// Version of the `strand tune --json` object; bump when a field changes meaning.
pub const REPORT_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Already as recommended.
    Ok,
    /// Differs from the recommendation.
    Fix,
    /// Does not apply here (no cpufreq in a VM, a virtual disk, a single NUMA node...).
    NotApplicable,
    /// Could not be read.
    Unknown,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Fix => "fix",
            Status::NotApplicable => "n/a",
            Status::Unknown => "unknown",
        }
    }
}

/// What `--apply` writes to bring a check to its recommendation: files under the root
/// (relative paths) and their new contents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Fix {
    pub writes: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Short, stable name (`swappiness`, `io scheduler`, ...).
    pub name: String,
    pub current: String,
    pub recommended: String,
    /// Why the recommendation matters for a broker's tail latency (or why it does not apply).
    pub why: String,
    pub status: Status,
    /// Whether `--apply` can change it (root needed).
    pub applicable: bool,
    #[serde(skip)]
    pub fix: Option<Fix>,
}

impl Check {
    /// A check with its verdict, not changeable by `--apply` until [`Check::with_fix`].
    pub fn new(
        name: &str,
        current: impl Into<String>,
        recommended: impl Into<String>,
        status: Status,
        why: impl Into<String>,
    ) -> Check {
        Check {
            name: name.to_string(),
            current: current.into(),
            recommended: recommended.into(),
            why: why.into(),
            status,
            applicable: false,
            fix: None,
        }
    }

    /// A check that does not apply on this host, with the reason.
    pub fn not_applicable(name: &str, current: impl Into<String>, why: impl Into<String>) -> Check {
        Check::new(name, current, "-", Status::NotApplicable, why)
    }

    /// A check whose inputs could not be read.
    pub fn unknown(name: &str, recommended: impl Into<String>, why: impl Into<String>) -> Check {
        Check::new(name, "?", recommended, Status::Unknown, why)
    }

    /// Marks the check as changeable by `--apply` with these writes.
    pub fn with_fix(mut self, writes: Vec<(String, String)>) -> Check {
        self.applicable = !writes.is_empty();
        self.fix = Some(Fix { writes });
        self
    }

    /// `Ok` when `good`, else `Fix`.
    pub fn verdict(good: bool) -> Status {
        if good {
            Status::Ok
        } else {
            Status::Fix
        }
    }
}

/// What `--apply` did to one check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Applied {
    /// Written and read back: `from -> to`.
    Changed { from: String, to: String },
    /// Written, but reading back shows the old value (the kernel refused it silently).
    Unchanged { value: String },
    /// A write failed (not root, read-only /proc in a container, ...).
    Failed { error: String },
}

impl Applied {
    pub fn describe(&self) -> String {
        match self {
            Applied::Changed { from, to } => format!("changed: {from} -> {to}"),
            Applied::Unchanged { value } => format!("unchanged: still {value}"),
            Applied::Failed { error } => format!("failed: {error}"),
        }
    }
}

/// A whole run of `strand tune`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub version: u32,
    pub root: String,
    pub data_dir: String,
    pub checks: Vec<Check>,
    /// With `--apply`: what happened to each check that needed a fix, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<(String, Applied)>,
}

impl Report {
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.status == Status::Fix)
    }

    pub fn to_json(&self) -> String {
        // Plain structs of strings: serialisation cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// One line per check, columns aligned; `why` last so long reasons do not push the others.
    pub fn to_table(&self) -> String {
        let header = ["check", "current", "recommended", "status", "why"];
        let rows: Vec<[String; 5]> = self
            .checks
            .iter()
            .map(|c| {
                let mut why = c.why.clone();
                if c.applicable && c.status == Status::Fix {
                    why.push_str(" [--apply]");
                }
                [
                    c.name.clone(),
                    c.current.clone(),
                    c.recommended.clone(),
                    c.status.label().to_string(),
                    why,
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for r in &rows {
            for (w, cell) in widths.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 5]| {
            let mut s = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i == 4 {
                    s.push_str(cell);
                } else {
                    s.push_str(&format!("{cell:<w$}  ", w = widths[i]));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = line(header);
        for r in &rows {
            out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
        }
        let n_fix = self.failed().count();
        out.push_str(&format!(
            "\n{} checks: {} ok, {} to fix, {} not applicable, {} unknown (data dir {})\n",
            self.checks.len(),
            self.count(Status::Ok),
            n_fix,
            self.count(Status::NotApplicable),
            self.count(Status::Unknown),
            self.data_dir
        ));
        for (name, a) in &self.applied {
            out.push_str(&format!("apply {name}: {}\n", a.describe()));
        }
        out
    }

    fn count(&self, s: Status) -> usize {
        self.checks.iter().filter(|c| c.status == s).count()
    }
}
