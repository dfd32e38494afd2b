//! What a simulation run reports: counts of what happened, and the invariant it broke, if any.

use std::collections::BTreeMap;

/// What one seed did.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub events: u64,
    pub produced: u64,
    pub acked: u64,
    pub refused: u64,
    pub leaderships: u64,
    pub truncations: u64,
    pub messages: u64,
    pub dropped: u64,
    pub duplicated: u64,
    /// Records written but not synced that power cuts took.
    pub unsynced_lost: u64,
    pub faults: BTreeMap<&'static str, u64>,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        self.events += o.events;
        self.produced += o.produced;
        self.acked += o.acked;
        self.refused += o.refused;
        self.leaderships += o.leaderships;
        self.truncations += o.truncations;
        self.messages += o.messages;
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.unsynced_lost += o.unsynced_lost;
        for (k, v) in &o.faults {
            *self.faults.entry(k).or_default() += v;
        }
    }
}

/// An invariant broken: what, when, and (traced runs) the events before it.
#[derive(Clone, Debug)]
pub struct Violation {
    pub at_ms: u64,
    pub event: u64,
    pub what: String,
    pub trace: Vec<String>,
}

pub struct Outcome {
    pub seed: u64,
    pub stats: Stats,
    pub violation: Option<Violation>,
}
