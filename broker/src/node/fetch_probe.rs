//! Reads for fetches: whole batches from the shard that owns a partition, a partition's
//! offsets alone, and the long poll's cheap look at a partition ("nothing new here" answered
//! in place, through a log remembered per fetch session where possible, see [`Node::probe`]).

use futures_channel::oneshot;
use strand_wire::ErrorCode;
use tracing::warn;

use crate::storage::{Offset, PartitionLog, ReadError, ReadOut, TopicPartition};

use super::{Node, ReadOutcome, ShardMsg};

/// A fetched partition as a long poll checks it for news (see [`Node::probe`]).
pub(crate) enum Probe {
    /// This shard's log, on a node without a cluster, while the shard's partition map is at
    /// this generation.
    Held(PartitionLog, u64),
    /// Checked by name each time (another shard's partition, or a cluster).
    ByName,
}

impl Node {
    /// Resolves a wanted partition for a fetch's long poll, which re-checks every wanted
    /// partition at each append on the shard: a consumer of 1,000 partitions made that three
    /// hash lookups per partition per wake-up, and then one per partition per fetch, about a
    /// fifth of the broker's CPU at 50 MB/s. So the log is looked up once per session (the
    /// want's memo, valid until this shard opens or removes a partition) and then asked
    /// directly. Only a node without a cluster does this (leadership and high watermarks can
    /// move under a replicated partition, so there every check goes by name).
    pub(crate) fn probe(&self, want: &crate::fetch_session::Want) -> Probe {
        if self.config().cluster.is_some() {
            return Probe::ByName;
        }
        let generation = self.partitions_generation.get();
        if let Some(log) = want.memo.get(generation) {
            return Probe::Held(log, generation);
        }
        match self.local(&want.tp) {
            Some(log) => {
                want.memo.set(generation, log.downgrade());
                Probe::Held(log, generation)
            }
            None => Probe::ByName,
        }
    }

    /// [`Node::read_nothing_new`] through a [`Probe`].
    pub(crate) fn probe_nothing_new(
        &self,
        probe: &Probe,
        tp: &TopicPartition,
        offset: Offset,
        committed: bool,
    ) -> Option<ReadOut> {
        match probe {
            // A partition opened or removed on this shard during the long poll (a topic
            // deleted, or deleted and created again): ask by name, as a new fetch would.
            Probe::Held(log, generation) if *generation == self.partitions_generation.get() => {
                log.read_nothing_new(offset, committed, None)
            }
            Probe::Held(..) | Probe::ByName => self.read_nothing_new(tp, offset, committed),
        }
    }

    /// [`Self::read`] when it has nothing to return and the partition is on this shard:
    /// answered at once, with no task or cross-shard hop (see `PartitionLog::read_nothing_new`).
    pub fn read_nothing_new(
        &self,
        tp: &TopicPartition,
        offset: Offset,
        committed: bool,
    ) -> Option<ReadOut> {
        // Only this shard's partitions qualify; in a cluster only those this node leads (the
        // others take the full path, which answers NOT_LEADER_OR_FOLLOWER).
        let log = self.led(tp).ok()?;
        // A replicated partition reports its high watermark, not its log end, and has
        // nothing new for a reader at it.
        let hw = self.visible_end(tp, &log);
        let out = log.read_nothing_new(offset, committed, hw)?;
        Some(match hw {
            Some(hw) => out.bounded(hw),
            None => out,
        })
    }
}

impl Node {
    /// A fetch's answer for a partition it has no room left to read: its offsets, no records
    /// (see `PartitionLog::read_offsets`). `None` when another shard owns the partition: ask
    /// there with [`Node::read`] and `bytes_max` 0.
    pub(crate) fn read_offsets_here(
        &self,
        tp: &TopicPartition,
        offset: Offset,
    ) -> Option<ReadOutcome> {
        if self.owner(tp) != self.shard {
            return None;
        }
        Some(self.read_offsets_local(tp, offset))
    }

    pub(super) fn read_offsets_local(&self, tp: &TopicPartition, offset: Offset) -> ReadOutcome {
        let log = self.led(tp)?;
        match log.read_offsets(offset) {
            Ok(out) => Ok(match self.visible_end(tp, &log) {
                Some(hw) => out.bounded(hw),
                None => out,
            }),
            Err(_) => Err(ErrorCode::OffsetOutOfRange),
        }
    }

    /// Whole batches of `tp` from `offset`, about `bytes_max` bytes (at least one batch), on
    /// whichever shard owns it. `bytes_max` 0 reads no records, only the partition's offsets
    /// (a fetch whose byte budget is spent still answers every partition).
    pub async fn read(
        &self,
        tp: TopicPartition,
        offset: Offset,
        bytes_max: usize,
        committed: bool,
    ) -> ReadOutcome {
        let owner = self.owner(&tp);
        if owner == self.shard {
            return self.read_local(&tp, offset, bytes_max, committed).await;
        }
        let (reply, rx) = oneshot::channel();
        self.send(
            owner,
            ShardMsg::Read {
                tp,
                offset,
                bytes_max,
                committed,
                reply,
            },
        );
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
    }

    pub(super) async fn read_local(
        &self,
        tp: &TopicPartition,
        offset: Offset,
        bytes_max: usize,
        committed: bool,
    ) -> ReadOutcome {
        if bytes_max == 0 {
            return self.read_offsets_local(tp, offset);
        }
        let log = self.led(tp)?;
        let read = if committed {
            log.read_committed(offset, bytes_max).await
        } else {
            log.read(offset, bytes_max).await
        };
        match read {
            // Consumers never see past the high watermark of a replicated partition.
            Ok(out) => Ok(match self.visible_end(tp, &log) {
                Some(hw) => out.bounded(hw),
                None => out,
            }),
            Err(ReadError::OutOfRange { .. }) => Err(ErrorCode::OffsetOutOfRange),
            Err(ReadError::Io(e)) => {
                warn!(topic = %tp.0, partition = tp.1, error = %e, "read failed");
                Err(ErrorCode::KafkaStorageError)
            }
        }
    }
}
