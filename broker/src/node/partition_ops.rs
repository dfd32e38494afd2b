//! Requests on one partition, run on the shard that owns it (sent there when asked
//! elsewhere): ListOffsets, DeleteRecords, OffsetForLeaderEpoch.

use futures_channel::oneshot;
use strand_wire::ErrorCode;
use tracing::{info, warn};

use super::{Node, OffsetsOutcome, ShardMsg, TopicPartition};
use crate::storage::Offset;

impl Node {
    pub async fn offsets(
        &self,
        tp: TopicPartition,
        timestamp_ms: i64,
        committed: bool,
    ) -> OffsetsOutcome {
        let owner = self.owner(&tp);
        if owner == self.shard {
            return self.offsets_local(&tp, timestamp_ms, committed).await;
        }
        let (reply, rx) = oneshot::channel();
        self.send(
            owner,
            ShardMsg::Offsets {
                tp,
                timestamp_ms,
                committed,
                reply,
            },
        );
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
    }

    /// ListOffsets semantics: -2 earliest, -1 latest (the last stable offset for
    /// read_committed), -3 the first record with the largest timestamp (KIP-734), otherwise
    /// the first record with a timestamp at or after `timestamp_ms`.
    pub(super) async fn offsets_local(
        &self,
        tp: &TopicPartition,
        timestamp_ms: i64,
        committed: bool,
    ) -> OffsetsOutcome {
        let log = self.led(tp)?;
        match timestamp_ms {
            -2 => Ok((log.log_start(), -1)),
            -1 if committed => Ok((self.capped(tp, &log, log.last_stable()), -1)),
            -1 => Ok((self.capped(tp, &log, log.log_end()), -1)),
            // Lookups by time find nothing past what consumers may see (the high watermark
            // of a replicated partition).
            -3 => match log.max_timestamp_offset().await {
                Ok(Some(found)) if found.0 < self.capped(tp, &log, log.log_end()) => Ok(found),
                Ok(_) => Ok((Offset(-1), -1)),
                Err(_) => Err(ErrorCode::KafkaStorageError),
            },
            ts => match log.offset_for_time(ts).await {
                Ok(Some(found)) if found.0 < self.capped(tp, &log, log.log_end()) => Ok(found),
                Ok(_) => Ok((Offset(-1), -1)),
                Err(_) => Err(ErrorCode::KafkaStorageError),
            },
        }
    }

    /// DeleteRecords on whichever shard owns `tp`: the new log start offset.
    pub async fn delete_records(
        &self,
        tp: TopicPartition,
        before: Offset,
    ) -> Result<Offset, ErrorCode> {
        let owner = self.owner(&tp);
        if owner == self.shard {
            return self.delete_records_local(&tp, before).await;
        }
        let (reply, rx) = oneshot::channel();
        self.send(owner, ShardMsg::DeleteRecords { tp, before, reply });
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
    }

    pub(super) async fn delete_records_local(
        &self,
        tp: &TopicPartition,
        before: Offset,
    ) -> Result<Offset, ErrorCode> {
        let log = self.led(tp)?;
        // A replicated partition deletes only below its high watermark (-1 means it), as
        // Kafka: a log start past what the ISR holds would leave followers behind it.
        let before = match self.visible_end(tp, &log) {
            Some(hw) if before.0 == -1 => hw,
            Some(hw) if before > hw => return Err(ErrorCode::OffsetOutOfRange),
            _ => before,
        };
        match log.delete_records(before).await {
            Ok(Some(start)) => {
                info!(topic = %tp.0, partition = tp.1, log_start = %start, "records deleted");
                Ok(start)
            }
            Ok(None) => Err(ErrorCode::OffsetOutOfRange),
            Err(e) => {
                warn!(topic = %tp.0, partition = tp.1, error = %e, "delete records failed");
                Err(ErrorCode::KafkaStorageError)
            }
        }
    }

    /// `offset`, or the high watermark of a replicated partition if that is lower (what
    /// consumers may see).
    fn capped(
        &self,
        tp: &TopicPartition,
        log: &crate::storage::PartitionLog,
        offset: Offset,
    ) -> Offset {
        self.visible_end(tp, log)
            .map_or(offset, |hw| hw.min(offset))
    }

    /// OffsetForLeaderEpoch on whichever shard owns `tp`: the largest epoch `<= epoch` the
    /// leader's log knows and where it ended (the log end for the latest).
    pub async fn epoch_end(&self, tp: TopicPartition, epoch: i32) -> Result<(i32, i64), ErrorCode> {
        let owner = self.owner(&tp);
        if owner == self.shard {
            return self.epoch_end_local(&tp, epoch).await;
        }
        let (reply, rx) = oneshot::channel();
        self.send(owner, ShardMsg::EpochEnd { tp, epoch, reply });
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
    }

    /// A log that has never led an epoch (a single node's, or one not written since it was
    /// replicated) holds nothing a newer leader could have cut: every epoch asked about ends
    /// at its log end. Kafka would answer UNDEFINED_EPOCH_OFFSET, which makes a Java consumer
    /// reset its position as if the log had been truncated.
    pub(super) async fn epoch_end_local(
        &self,
        tp: &TopicPartition,
        epoch: i32,
    ) -> Result<(i32, i64), ErrorCode> {
        let log = self.led(tp)?;
        if epoch < 0 {
            return Ok((-1, -1));
        }
        if log.epoch_cache().entries().is_empty() {
            return Ok((epoch, log.log_end().0));
        }
        Ok(log.end_offset_for(epoch))
    }
}

impl Node {
    /// The most partitions this node may hold, and why: `topic.partitions.per.shard` x
    /// shards, or fewer where the open-files limit leaves room for fewer: what connections
    /// may not take (`Admission::max_total`) less `limits::OPEN_FILES_RESERVED`, at
    /// `topic.fds.per.partition` each. Single node only for now: a cluster node would have to
    /// count the replicas placed on it, and the controller knows only its own limit.
    pub(super) fn partitions_max(&self) -> (i64, String) {
        let config = self.config();
        let configured =
            i64::from(config.topic_partitions_per_shard).saturating_mul(self.shards() as i64);
        // A cluster's catalog counts every node's partitions, and the replicas on this node
        // depend on placement: the open-files bound is a single node's (see the note above).
        let soft = match strand_tuning::host::nofile_limit() {
            Some(l) if self.shared.cluster.is_none() => l.soft,
            _ => return (configured, "topic.partitions.per.shard x shards".into()),
        };
        let connections = self.shared.admission.max_total() as u64;
        let per = u64::try_from(config.topic_fds_per_partition.max(1)).unwrap_or(1);
        let free = soft.saturating_sub(connections + crate::limits::OPEN_FILES_RESERVED);
        let by_files = i64::try_from(free / per).unwrap_or(i64::MAX);
        if by_files >= configured {
            return (configured, "topic.partitions.per.shard x shards".into());
        }
        (
            by_files,
            format!(
                "the open-files limit: ulimit -n {soft}, less {connections} for connections \
                 (max.connections) and {} reserved, at topic.fds.per.partition {per} each; \
                 `strand tune` recommends ulimit -n 1048576",
                crate::limits::OPEN_FILES_RESERVED
            ),
        )
    }
}
