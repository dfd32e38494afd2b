//! A replica's leader-epoch cache (Kafka's `leader-epoch-checkpoint`): for every leader epoch
//! the offset its leader wrote first. It answers OffsetsForLeaderEpoch (where did epoch `e`
//! end in this log?), which is how a follower finds where its log diverged from the leader's
//! after a leader change, and truncates there instead of at the high watermark (KIP-101,
//! KIP-279). Sans-IO: the driver persists [`EpochCache::entries`] with the log.

/// `(leader_epoch, start_offset)` entries, both strictly increasing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<(i32, i64)>,
}

/// No entry for the epoch asked about (Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET).
pub const UNDEFINED: (i32, i64) = (-1, -1);

impl EpochCache {
    /// From persisted entries; refused unless epochs and offsets both increase.
    pub fn from_entries(entries: Vec<(i32, i64)>) -> Result<EpochCache, String> {
        for w in entries.windows(2) {
            if w[0].0 >= w[1].0 || w[0].1 > w[1].1 {
                return Err(format!(
                    "epoch cache out of order: {:?} then {:?}",
                    w[0], w[1]
                ));
            }
        }
        Ok(EpochCache { entries })
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    /// The latest epoch, if any.
    pub fn latest(&self) -> Option<(i32, i64)> {
        self.entries.last().copied()
    }

    /// A batch of `epoch` starts at `offset`. Only a new, higher epoch adds an entry; an older
    /// epoch than the latest is a bug in the caller (a leader never writes an older epoch,
    /// a follower truncates first).
    pub fn assign(&mut self, epoch: i32, offset: i64) {
        match self.entries.last() {
            Some(&(last, _)) if epoch == last => {}
            Some(&(last, start)) => {
                assert!(epoch > last, "epoch {epoch} after {last}");
                assert!(offset >= start, "epoch {epoch} at {offset} before {start}");
                self.entries.push((epoch, offset));
            }
            None => self.entries.push((epoch, offset)),
        }
    }

    /// OffsetsForLeaderEpoch: the largest epoch `<= epoch` this log knows and the offset where
    /// it ended (the next epoch's start, or `log_end` for the latest). [`UNDEFINED`] when the
    /// log knows no epoch that old.
    pub fn end_offset_for(&self, epoch: i32, log_end: i64) -> (i32, i64) {
        let i = self.entries.partition_point(|&(e, _)| e <= epoch);
        if i == 0 {
            return UNDEFINED;
        }
        let found = self.entries[i - 1].0;
        let end = self.entries.get(i).map_or(log_end, |&(_, start)| start);
        (found, end)
    }

    /// The log was truncated to `log_end`: epochs starting at or after it are gone.
    pub fn truncate_from_end(&mut self, log_end: i64) {
        while self.entries.last().is_some_and(|&(_, s)| s >= log_end) {
            self.entries.pop();
        }
    }
}

/// Where a follower must truncate, given the leader's answer `(epoch, end_offset)` to its
/// OffsetsForLeaderEpoch request for the follower's latest epoch: at the leader's end offset
/// for that epoch, but never past where the follower's own log left that epoch (their logs
/// agree at most up to the smaller of the two). Where the follower lacks the leader's epoch
/// this is conservative (KIP-279 would ask again for an older epoch): truncating a little
/// more only means fetching it again. `None`: nothing to truncate.
pub fn divergence(
    follower: &EpochCache,
    follower_log_end: i64,
    leader_answer: (i32, i64),
) -> Option<i64> {
    if leader_answer == UNDEFINED {
        return None;
    }
    let (epoch, leader_end) = leader_answer;
    let my_end = match follower.end_offset_for(epoch, follower_log_end) {
        // Every epoch here is newer than the leader's: none of it is the leader's.
        UNDEFINED => follower
            .entries
            .first()
            .map_or(follower_log_end, |&(_, s)| s),
        (_, end) => end,
    };
    let at = leader_end.min(my_end);
    (at < follower_log_end).then_some(at)
}
