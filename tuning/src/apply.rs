//! `strand tune` as a whole: run the checks, and with `--apply` write the fixes and read the
//! values back.
//!
//! Applying is best effort, line by line: a write that fails (not root, a read-only `/proc`
//! in a container, a value the kernel refuses) is reported for that check and the others go
//! on. After writing, every check runs again and the report shows `changed: X -> Y` from the
//! values read back, never from what was meant to be written.

use std::path::Path;

use crate::check::{Applied, Report, Status, REPORT_VERSION};
use crate::checks;
use crate::host::Host;

/// Runs every check (dry run).
pub fn tune(host: &Host) -> Report {
    Report {
        version: REPORT_VERSION,
        root: host.root.display().to_string(),
        data_dir: host.data_dir.display().to_string(),
        checks: checks::run(host),
        applied: Vec::new(),
    }
}

/// Runs every check, applies the fixes of those that need one and can have one, and returns
/// the report after the changes, with what happened to each.
pub fn tune_and_apply(host: &Host) -> Report {
    let before = tune(host);
    let mut attempted = Vec::new();
    for check in before.checks.iter().filter(|c| c.status == Status::Fix) {
        let Some(fix) = &check.fix else { continue };
        if fix.writes.is_empty() {
            continue;
        }
        let errors: Vec<String> = fix
            .writes
            .iter()
            .filter_map(|(rel, value)| host.write(Path::new(rel), value).err())
            .map(|e| e.to_string())
            .collect();
        attempted.push((check.name.clone(), check.current.clone(), errors));
    }
    let mut after = tune(host);
    for (name, from, errors) in attempted {
        let now = after
            .checks
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.current.clone())
            .unwrap_or_else(|| "?".to_string());
        let result = if !errors.is_empty() {
            Applied::Failed {
                error: errors.join("; "),
            }
        } else if now == from {
            Applied::Unchanged { value: now }
        } else {
            Applied::Changed { from, to: now }
        };
        after.applied.push((name, result));
    }
    after
}
