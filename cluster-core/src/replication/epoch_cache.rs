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

    /// OffsetsForLeaderEpoch, as Kafka's `LeaderEpochFileCache.endOffsetFor`: the largest
    /// epoch `<= epoch` this log knows and the offset where it ended (the next epoch's start,
    /// or `log_end` for the latest); for an epoch older than every entry, that epoch and the
    /// first entry's start (nothing of it is here); [`UNDEFINED`] for an empty cache or a
    /// negative epoch.
    pub fn end_offset_for(&self, epoch: i32, log_end: i64) -> (i32, i64) {
        if epoch < 0 || self.entries.is_empty() {
            return UNDEFINED;
        }
        let i = self.entries.partition_point(|&(e, _)| e <= epoch);
        if i == 0 {
            return (epoch, self.entries[0].1);
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

/// Where a follower truncates, given the leader's answer `(epoch, end_offset)` to its
/// OffsetsForLeaderEpoch request for the follower's latest epoch (Kafka's
/// `AbstractFetcherThread.getOffsetTruncationState`, KIP-101 / KIP-279).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// Truncate the log to this offset (equal to the log end: nothing to cut).
    pub offset: i64,
    /// `false`: the follower lacks the epoch the leader named; after truncating it asks again
    /// with its new latest epoch.
    pub complete: bool,
}

/// - The leader knows no such epoch: truncate to the follower's high watermark (all that is
///   known to be committed).
/// - The follower has the leader's epoch: the logs agree up to the smaller of the two ends for
///   it.
/// - The follower's largest epoch below the leader's is another: truncate to where that one
///   ended here and ask again, until both name the same epoch.
pub fn truncation(
    follower: &EpochCache,
    follower_log_end: i64,
    follower_high_watermark: i64,
    leader_answer: (i32, i64),
) -> Truncation {
    let (epoch, leader_end) = leader_answer;
    if leader_end < 0 {
        return Truncation {
            offset: follower_high_watermark.min(follower_log_end),
            complete: true,
        };
    }
    match follower.end_offset_for(epoch, follower_log_end) {
        (mine, my_end) if mine == epoch => Truncation {
            offset: my_end.min(leader_end).min(follower_log_end),
            complete: true,
        },
        // No epoch here at or below the leader's: every batch here is from a newer epoch the
        // leader does not have.
        UNDEFINED => Truncation {
            offset: leader_end.min(follower_log_end),
            complete: true,
        },
        (_, my_end) => Truncation {
            offset: my_end.min(follower_log_end),
            complete: false,
        },
    }
}
