//! Where a request's time goes, per shard (sans-IO): latency histograms for each stage of a
//! request, so a tail the bench sees has an address.
//!
//! Connection stages, for Produce, Fetch and every other API apart:
//! - `queue`: the frame is complete until the connection has an in-flight slot for it (the
//!   client sent more than `limits::IN_FLIGHT_REQUESTS_PER_CONNECTION` ahead);
//! - `decode`: the request is decoded;
//! - `handle`: decoded until the reply is ready (a produce's appends and, for acks=-1, its
//!   fsync; a fetch's long poll), including a wait for earlier replies of the connection;
//! - `write`: the reply is written to the socket;
//! - `total`: the frame is complete until its reply is written.
//!
//! Partition stages, on the shard that owns the partition:
//! - `hop`: a produce sent from another shard until the owner starts on it;
//! - `append`: `PartitionLog::append` (validation, copies, waiting for write-behind room);
//! - `fsync_wait`: an acks=-1 append until its bytes are fdatasynced (group commit).
//!
//! Shard stage:
//! - `lag`: how late the shard's probe timer fires (it asks to wake every
//!   `limits::SHARD_LAG_PROBE_MS`). A shard busy with one long task, starved of its core
//!   (CPU steal, another thread pinned there) or blocked in a syscall reads its sockets late
//!   by about as much, so a client-side tail the request stages do not show appears here.
//!
//! Each shard records into its own [`Stages`] (no locks); the admin API gathers them from
//! every shard, merges them and answers percentiles in microseconds (`GET /v1/stages`).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// The API a connection stage is recorded under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiClass {
    Produce,
    Fetch,
    Other,
}

/// A stage of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Queue,
    Decode,
    Handle,
    Write,
    Total,
    Hop,
    Append,
    FsyncWait,
    Lag,
}

const CONN_STAGES: [Stage; 5] = [
    Stage::Queue,
    Stage::Decode,
    Stage::Handle,
    Stage::Write,
    Stage::Total,
];
const PARTITION_STAGES: [Stage; 4] = [Stage::Hop, Stage::Append, Stage::FsyncWait, Stage::Lag];
const CLASSES: [ApiClass; 3] = [ApiClass::Produce, ApiClass::Fetch, ApiClass::Other];
const SLOTS: usize = CLASSES.len() * CONN_STAGES.len() + PARTITION_STAGES.len();

/// Longest time a histogram tracks (longer samples are clamped): a fetch long-polls for up to
/// its `max.wait.ms`, and nothing should take minutes.
const HIGHEST_US: u64 = 300_000_000;

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Queue => "queue",
            Stage::Decode => "decode",
            Stage::Handle => "handle",
            Stage::Write => "write",
            Stage::Total => "total",
            Stage::Hop => "hop",
            Stage::Append => "append",
            Stage::FsyncWait => "fsync_wait",
            Stage::Lag => "lag",
        }
    }
}

impl ApiClass {
    /// Produce and Fetch apart, every other API together.
    pub fn of(api_key: i16) -> ApiClass {
        match api_key {
            0 => ApiClass::Produce,
            1 => ApiClass::Fetch,
            _ => ApiClass::Other,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ApiClass::Produce => "produce",
            ApiClass::Fetch => "fetch",
            ApiClass::Other => "other",
        }
    }
}

fn slot(class: Option<ApiClass>, stage: Stage) -> usize {
    match (class, PARTITION_STAGES.iter().position(|&s| s == stage)) {
        (_, Some(p)) => CLASSES.len() * CONN_STAGES.len() + p,
        (Some(c), None) => {
            let ci = CLASSES.iter().position(|&x| x == c).unwrap_or(0);
            let si = CONN_STAGES.iter().position(|&s| s == stage).unwrap_or(0);
            ci * CONN_STAGES.len() + si
        }
        (None, None) => CLASSES.len() * CONN_STAGES.len() - 1, // Other/Total
    }
}

/// One shard's (or, merged, the node's) stage histograms, in microseconds.
#[derive(Clone)]
pub struct Stages {
    hists: Vec<Histogram<u64>>,
    /// The same samples in the fixed layout `GET /metrics` exposes, never reset (Prometheus
    /// counts from the process start): connection stages by API (`metrics::api_slot`, so
    /// bounded), partition and shard stages by slot.
    by_api: std::collections::BTreeMap<(usize, usize), crate::metrics::Hist>,
    exported: Vec<crate::metrics::Hist>,
}

impl Default for Stages {
    fn default() -> Self {
        Self::new()
    }
}

/// Percentiles of one stage, in microseconds.
#[derive(Debug, Serialize, PartialEq)]
pub struct StageSummary {
    pub api: &'static str,
    pub stage: &'static str,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Stages {
    pub fn new() -> Stages {
        let hists = (0..SLOTS)
            .map(|_| {
                // 2 significant figures: ~1% resolution, ~24 KiB per histogram.
                let mut h = Histogram::new_with_bounds(1, HIGHEST_US, 2)
                    .unwrap_or_else(|_| Histogram::new(2).expect("2 significant figures"));
                h.auto(true);
                h
            })
            .collect();
        Stages {
            hists,
            by_api: Default::default(),
            exported: vec![crate::metrics::Hist::default(); SLOTS],
        }
    }

    /// Records a connection stage of a request of API `api_key`.
    pub fn record(&mut self, api_key: i16, stage: Stage, took: Duration) {
        debug_assert!(CONN_STAGES.contains(&stage));
        self.record_slot(slot(Some(ApiClass::of(api_key)), stage), took);
        let at = CONN_STAGES.iter().position(|&s| s == stage).unwrap_or(0);
        self.by_api
            .entry((crate::metrics::api_slot(api_key), at))
            .or_default()
            .observe(took);
    }

    /// Records a partition stage (`Hop`, `Append`, `FsyncWait`) or the shard's `Lag`.
    pub fn record_partition(&mut self, stage: Stage, took: Duration) {
        debug_assert!(PARTITION_STAGES.contains(&stage));
        let at = slot(None, stage);
        self.record_slot(at, took);
        self.exported[at].observe(took);
    }

    fn record_slot(&mut self, at: usize, took: Duration) {
        let us = (took.as_micros() as u64).clamp(1, HIGHEST_US);
        // With auto-resize on, recording cannot fail; a clamp keeps it in range anyway.
        let _ = self.hists[at].record(us);
    }

    /// Adds `other`'s samples (another shard's) to these.
    pub fn merge(&mut self, other: &Stages) {
        for (h, o) in self.hists.iter_mut().zip(&other.hists) {
            let _ = h.add(o);
        }
        for (h, o) in self.exported.iter_mut().zip(&other.exported) {
            h.merge(o);
        }
        for (k, o) in &other.by_api {
            self.by_api.entry(*k).or_default().merge(o);
        }
    }

    pub fn reset(&mut self) {
        for h in &mut self.hists {
            h.reset();
        }
    }

    /// Every stage with samples since the process started, as (api, stage, histogram), for
    /// `GET /metrics` (`reset` does not touch these): connection stages by Kafka API name
    /// (`Produce`), then the partition stages (`partition`) and the shard's lag (`shard`).
    pub fn exported(&self) -> Vec<(String, &'static str, crate::metrics::Hist)> {
        let conn = self.by_api.iter().map(|(&(api, at), h)| {
            (
                crate::metrics::expose::api_name(api),
                CONN_STAGES[at].name(),
                h.clone(),
            )
        });
        let part = self
            .labelled()
            .filter(|(at, _, _)| *at >= CLASSES.len() * CONN_STAGES.len())
            .filter(|(at, _, _)| self.exported[*at].count > 0)
            .map(|(at, api, stage)| (api.to_string(), stage, self.exported[at].clone()));
        conn.chain(part).collect()
    }

    /// (slot, api, stage) of every stage, connection stages by API first.
    fn labelled(&self) -> impl Iterator<Item = (usize, &'static str, &'static str)> {
        let conn = CLASSES
            .iter()
            .flat_map(|&c| CONN_STAGES.iter().map(move |&s| (Some(c), s)));
        let part = PARTITION_STAGES.iter().map(|&s| (None, s));
        conn.chain(part).map(|(class, stage)| {
            let api = match (class, stage) {
                (Some(c), _) => c.name(),
                (None, Stage::Lag) => "shard",
                (None, _) => "partition",
            };
            (slot(class, stage), api, stage.name())
        })
    }

    /// Every stage with samples, connection stages by API first.
    pub fn summaries(&self) -> Vec<StageSummary> {
        self.labelled()
            .filter(|(at, _, _)| !self.hists[*at].is_empty())
            .map(|(at, api, stage)| {
                let h = &self.hists[at];
                StageSummary {
                    api,
                    stage,
                    count: h.len(),
                    p50_us: h.value_at_quantile(0.5),
                    p99_us: h.value_at_quantile(0.99),
                    p999_us: h.value_at_quantile(0.999),
                    max_us: h.max(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_record_merge_and_summarise() {
        let mut a = Stages::new();
        let mut b = Stages::new();
        for ms in 1..=100u64 {
            a.record(0, Stage::Total, Duration::from_millis(ms));
        }
        b.record(1, Stage::Write, Duration::from_micros(7));
        b.record_partition(Stage::FsyncWait, Duration::from_micros(900));
        b.record_partition(Stage::Lag, Duration::from_micros(40));
        a.merge(&b);
        let s = a.summaries();
        let names: Vec<(&str, &str)> = s.iter().map(|x| (x.api, x.stage)).collect();
        assert_eq!(
            names,
            vec![
                ("produce", "total"),
                ("fetch", "write"),
                ("partition", "fsync_wait"),
                ("shard", "lag")
            ]
        );
        assert_eq!(s[0].count, 100);
        assert!((49_000..=51_000).contains(&s[0].p50_us), "{:?}", s[0]);
        assert!(s[0].max_us >= 99_000);
        assert_eq!(s[1].p50_us, 7);
        a.reset();
        assert!(a.summaries().is_empty());
        let kept = a.exported();
        assert_eq!(kept.len(), 4, "the exported histograms outlive a reset");
        assert_eq!(
            (kept[0].0.as_str(), kept[0].1, kept[0].2.count),
            ("Produce", "total", 100)
        );
        assert_eq!((kept[1].0.as_str(), kept[1].1), ("Fetch", "write"));
        assert_eq!((kept[2].0.as_str(), kept[2].1), ("partition", "fsync_wait"));
    }

    #[test]
    fn every_stage_has_its_own_slot() {
        let mut seen = std::collections::HashSet::new();
        for c in CLASSES {
            for s in CONN_STAGES {
                assert!(seen.insert(slot(Some(c), s)));
            }
        }
        for s in PARTITION_STAGES {
            assert!(seen.insert(slot(None, s)));
        }
        assert_eq!(seen.len(), SLOTS);
        assert!(seen.iter().all(|&i| i < SLOTS));
    }
}
