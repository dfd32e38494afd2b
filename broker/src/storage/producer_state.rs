//! Idempotent-producer state of one partition (sans-IO): per producer id, its epoch and the
//! sequence ranges and offsets of its last five batches, as Kafka keeps them.

use std::collections::{HashMap, VecDeque};

use crate::storage::Offset;

/// Batches remembered per producer for duplicate detection (Kafka's
/// `max.in.flight.requests.per.connection` limit for idempotence is 5).
pub const BATCHES_PER_PRODUCER: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqCheck {
    /// Append it.
    Accept,
    /// Already appended: answer with the original offset, append nothing.
    Duplicate { base_offset: Offset },
    /// A gap or a rewind in sequence numbers (OUT_OF_ORDER_SEQUENCE_NUMBER).
    OutOfOrder { expected: i32 },
    /// An older epoch than the producer's current one (INVALID_PRODUCER_EPOCH).
    Fenced { current: i16 },
}

/// Why a transaction marker is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleMarker {
    /// Older than the producer's epoch here (INVALID_PRODUCER_EPOCH).
    ProducerEpoch,
    /// From an older transaction coordinator than the last marker's
    /// (TRANSACTION_COORDINATOR_FENCED).
    CoordinatorEpoch,
}

#[derive(Clone, Debug, Default)]
struct Producer {
    epoch: i16,
    /// The coordinator epoch of its last marker here (0 before one).
    coordinator_epoch: i32,
    /// Max timestamp of its last batch (DescribeProducers).
    last_timestamp_ms: i64,
    /// (first sequence, last sequence, base offset), oldest first.
    batches: VecDeque<(i32, i32, Offset)>,
}

#[derive(Clone, Debug, Default)]
pub struct ProducerStates {
    producers: HashMap<i64, Producer>,
}

fn last_seq(base_seq: i32, records: i32) -> i32 {
    base_seq.wrapping_add(records.max(1) - 1)
}

impl ProducerStates {
    /// Checks a batch from `producer_id` (>= 0) before it is appended.
    pub fn check(&self, producer_id: i64, epoch: i16, base_seq: i32, records: i32) -> SeqCheck {
        let Some(p) = self.producers.get(&producer_id) else {
            // Unknown producer (new, or state not rebuilt after a restart): accept.
            return SeqCheck::Accept;
        };
        if epoch < p.epoch {
            return SeqCheck::Fenced { current: p.epoch };
        }
        if epoch > p.epoch {
            return if base_seq == 0 {
                SeqCheck::Accept
            } else {
                SeqCheck::OutOfOrder { expected: 0 }
            };
        }
        let last = last_seq(base_seq, records);
        if let Some(&(_, _, off)) = p
            .batches
            .iter()
            .find(|(first, l, _)| *first == base_seq && *l == last)
        {
            return SeqCheck::Duplicate { base_offset: off };
        }
        let expected = p.batches.back().map_or(0, |(_, l, _)| l.wrapping_add(1));
        if p.batches.is_empty() || base_seq == expected {
            SeqCheck::Accept
        } else {
            SeqCheck::OutOfOrder { expected }
        }
    }

    /// Records an appended batch.
    pub fn record(
        &mut self,
        producer_id: i64,
        epoch: i16,
        base_seq: i32,
        records: i32,
        base: Offset,
        timestamp_ms: i64,
    ) {
        let p = self.producers.entry(producer_id).or_default();
        p.last_timestamp_ms = timestamp_ms;
        if epoch != p.epoch {
            p.epoch = epoch;
            p.batches.clear();
        }
        p.batches
            .push_back((base_seq, last_seq(base_seq, records), base));
        while p.batches.len() > BATCHES_PER_PRODUCER {
            p.batches.pop_front();
        }
    }

    /// Whether a transaction marker of `producer_id` at `epoch` from the coordinator at
    /// `coordinator_epoch` is stale, as Kafka checks it: the partition knows a newer producer
    /// epoch (the transaction it would end was ended here by a newer marker), or a newer
    /// coordinator wrote this producer's last marker (this one is from a coordinator since
    /// replaced, late). Either would end a newer transaction's records.
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> Option<StaleMarker> {
        let p = self.producers.get(&producer_id)?;
        if epoch < p.epoch {
            Some(StaleMarker::ProducerEpoch)
        } else if coordinator_epoch < p.coordinator_epoch {
            Some(StaleMarker::CoordinatorEpoch)
        } else {
            None
        }
    }

    /// A transaction marker written at `epoch` by the coordinator at `coordinator_epoch`: a
    /// newer epoch fences the older one (its sequence numbers start again at 0).
    pub fn fence(&mut self, producer_id: i64, epoch: i16, coordinator_epoch: i32) {
        let p = self.producers.entry(producer_id).or_default();
        p.coordinator_epoch = p.coordinator_epoch.max(coordinator_epoch);
        if epoch > p.epoch {
            p.epoch = epoch;
            p.batches.clear();
        }
    }

    /// The sequence number the next batch of `producer_id` at `epoch` must start with.
    pub fn next_sequence(&self, producer_id: i64, epoch: i16) -> i32 {
        match self.producers.get(&producer_id) {
            Some(p) if p.epoch == epoch => p.batches.back().map_or(0, |b| b.1.wrapping_add(1)),
            _ => 0,
        }
    }

    /// Every producer known here: (id, epoch, last sequence or -1, last timestamp or -1).
    pub fn describe(&self) -> Vec<(i64, i16, i32, i64)> {
        let mut out: Vec<_> = self
            .producers
            .iter()
            .map(|(&id, p)| {
                let last_seq = p.batches.back().map_or(-1, |b| b.1);
                let ts = if p.batches.is_empty() {
                    -1
                } else {
                    p.last_timestamp_ms
                };
                (id, p.epoch, last_seq, ts)
            })
            .collect();
        out.sort_unstable();
        out
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_duplicate_gap_and_fencing() {
        let mut s = ProducerStates::default();
        assert_eq!(s.check(7, 0, 0, 3), SeqCheck::Accept);
        s.record(7, 0, 0, 3, Offset(100), 0);
        assert_eq!(s.check(7, 0, 3, 2), SeqCheck::Accept);
        s.record(7, 0, 3, 2, Offset(103), 0);
        assert_eq!(
            s.check(7, 0, 0, 3),
            SeqCheck::Duplicate {
                base_offset: Offset(100)
            }
        );
        assert_eq!(
            s.check(7, 0, 3, 2),
            SeqCheck::Duplicate {
                base_offset: Offset(103)
            }
        );
        assert_eq!(s.check(7, 0, 9, 1), SeqCheck::OutOfOrder { expected: 5 });
        assert_eq!(
            s.check(7, 1, 0, 1),
            SeqCheck::Accept,
            "a new epoch starts at 0"
        );
        assert_eq!(s.check(7, 1, 4, 1), SeqCheck::OutOfOrder { expected: 0 });
        s.record(7, 1, 0, 1, Offset(200), 0);
        assert_eq!(s.check(7, 0, 5, 1), SeqCheck::Fenced { current: 1 });
    }

    #[test]
    fn stale_markers_by_producer_or_coordinator_epoch() {
        let mut s = ProducerStates::default();
        assert_eq!(s.check_marker(7, 0, 0), None, "unknown producer");
        s.record(7, 2, 0, 1, Offset(0), 0);
        assert_eq!(s.check_marker(7, 1, 9), Some(StaleMarker::ProducerEpoch));
        assert_eq!(s.check_marker(7, 2, 0), None);
        s.fence(7, 2, 4);
        assert_eq!(s.check_marker(7, 2, 4), None, "a retry of the same marker");
        assert_eq!(s.check_marker(7, 2, 3), Some(StaleMarker::CoordinatorEpoch));
        assert_eq!(s.check_marker(7, 3, 5), None);
        s.fence(7, 3, 3);
        assert_eq!(
            s.check_marker(7, 3, 3),
            Some(StaleMarker::CoordinatorEpoch),
            "the coordinator epoch never goes back"
        );
    }

    #[test]
    fn remembers_only_the_last_five_batches() {
        let mut s = ProducerStates::default();
        for i in 0..8 {
            s.record(1, 0, i, 1, Offset(i64::from(i)), 0);
        }
        assert_eq!(
            s.check(1, 0, 7, 1),
            SeqCheck::Duplicate {
                base_offset: Offset(7)
            }
        );
        assert_eq!(s.check(1, 0, 1, 1), SeqCheck::OutOfOrder { expected: 8 });
    }
}
