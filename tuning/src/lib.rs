//! Host tuning checks and disk profiling (placeholder).
//!
//! # Layout
//! Empty for now. Issue 9 brings `strand tune` (checks read from a configurable /proc and /sys
//! root, so tests use fake trees) and `strand iotune` (O_DIRECT disk measurements written to an
//! io-properties file the broker reads).
