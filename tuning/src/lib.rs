//! Host tuning checks (`strand tune`) and disk profiling (`strand iotune`).
//!
//! A broker's tail latency depends on the host as much as on its code: a powersave CPU
//! governor, a scheduler in front of an NVMe queue or swap in the request path each add
//! milliseconds that no amount of care in the log can win back. `strand tune` reads the
//! settings that matter, says what it would change and why, and with `--apply` changes what
//! can be changed. `strand iotune` measures the data disk and writes an io-properties file
//! the broker sizes its writes by.
//!
//! This crate does not depend on the broker (the broker depends on it): iotune drives the
//! disk through the `io-uring` crate directly, not glommio, so what it measures is the disk,
//! not the broker's runtime.
//!
//! # Layout
//! - [`host`] — [`Host`]: the root that `proc/` and `sys/` are read from (the real `/`, or a
//!   fake tree in tests), the data directory and its device, sysfs parsing helpers.
//! - [`check`] — [`Check`] (one verdict: current -> recommended, why, status), [`Report`]
//!   (table and versioned JSON).
//! - [`checks`] — CPU governor, THP, swappiness, `fs.*` limits, `ulimit -n`, clocksource,
//!   `vm.dirty_*`, io_uring, NUMA; [`checks::run`] runs every check in order.
//! - [`disk`] — the data directory's disk (`st_dev` -> `/sys/dev/block`), its scheduler and
//!   `nomerges`, the filesystem and mount options from `/proc/self/mounts`.
//! - [`net`] — NIC receive steering (RPS) and interrupt placement.
//! - [`apply`] — [`tune`] (dry run) and [`tune_and_apply`] (write, read back, report).
//! - [`cpus`] — allowed cores, CPU lists (`0-3,6`), affinity.
//! - [`props`] — the io-properties file: format, validation, clamps, atomic write.
//! - [`iotune`] — the measurements (`ring`: io_uring O_DIRECT writes and reads; `fsync`:
//!   fdatasync latency) and the derivation of io-properties from them (`derive`, sans-IO).

pub mod apply;
pub mod check;
pub mod checks;
pub mod cpus;
pub mod disk;
pub mod host;
pub mod iotune;
pub mod net;
pub mod props;

pub use apply::{tune, tune_and_apply};
pub use check::{Check, Report, Status};
pub use host::Host;
pub use props::IoProperties;

#[cfg(test)]
mod tests;
