//! The group and transaction coordinators follow the leadership of their internal partitions
//! (#18 step 7). A shard coordinates the groups of a `__consumer_offsets` partition, and the
//! transactional ids of a `__transaction_state` partition, that it holds a replica of and that
//! this node leads; it loads their state from the log when it becomes leader (at each new
//! leader epoch) and drops it when it stops. Until a partition is loaded, its groups and ids
//! are answered COORDINATOR_LOAD_IN_PROGRESS; once another node leads it, NOT_COORDINATOR
//! (the client asks FindCoordinator again, which names the partition's leader).
//!
//! On a single node every internal partition is loaded once, when it opens. A coordinator's
//! own writes (offset commits, transaction states, markers) go through the leader's path:
//! refused unless this node leads the partition, and acknowledged once the ISR has them.

use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use strand_wire::ErrorCode;
use tracing::info;

use super::{Node, TopicPartition};
use crate::internal_topics::{txn_partition, OFFSETS_TOPIC, TXN_TOPIC};
use crate::storage::{AppendError, BatchMeta, PartitionLog};

/// Why a coordinator's write failed.
#[derive(Debug)]
pub(crate) enum CoordinatorWriteError {
    /// Refused before or after the append: this node does not lead the partition (any more),
    /// too few in-sync replicas, or the ISR did not confirm in time.
    Refused(ErrorCode),
    /// The log refused the batch.
    Append(AppendError),
}

impl CoordinatorWriteError {
    /// The error code as the partition's own API would answer it.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            CoordinatorWriteError::Refused(code) => *code,
            CoordinatorWriteError::Append(e) => e.error_code(),
        }
    }

    /// The error code for a group or transaction request, as Kafka's coordinators map the
    /// errors of their own appends: the partition moved -> NOT_COORDINATOR (find the new
    /// one); too few replicas or no answer in time -> COORDINATOR_NOT_AVAILABLE (retry).
    pub(crate) fn coordinator_code(&self) -> ErrorCode {
        use ErrorCode::*;
        match self.code() {
            NotLeaderOrFollower | KafkaStorageError | UnknownTopicOrPartition => NotCoordinator,
            NotEnoughReplicas | NotEnoughReplicasAfterAppend | RequestTimedOut => {
                CoordinatorNotAvailable
            }
            other => other,
        }
    }
}

impl Node {
    /// Whether this shard has loaded the state of internal partition `tp` and serves it.
    pub(crate) fn coordinator_loaded(&self, tp: &TopicPartition) -> bool {
        self.coordinated.borrow().contains_key(tp)
    }

    /// The leader epoch this shard loaded internal partition `tp` at, if it has.
    pub(crate) fn coordinated_epoch(&self, tp: &TopicPartition) -> Option<i32> {
        self.coordinated.borrow().get(tp).copied()
    }

    /// On a single node: `log` (an internal partition, just opened) is loaded for good.
    pub(super) async fn load_at_open(&self, tp: &TopicPartition, log: &PartitionLog) {
        self.load_coordinator(tp, log).await;
        self.coordinated.borrow_mut().insert(tp.clone(), 0);
    }

    /// In a cluster, after a catalog change: load the internal partitions this shard now
    /// coordinates (or coordinates at a new leader epoch), drop those it no longer does. One
    /// pass at a time; a pass repeats while leadership moved during its loads.
    pub(super) fn spawn_coordinator_sync(self: &Rc<Self>) {
        if self.catalog().cluster.is_none() {
            return;
        }
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            let pending = {
                let Ok(_pass) = me.coordinator_sync.acquire_permit(1).await else {
                    return;
                };
                while me.sync_coordinators_once().await {}
                me.coordinator_load_pending()
            };
            // A partition this shard leads but could not load: again in a while (one retry
            // scheduled at a time; a metadata change meanwhile starts its own pass).
            if pending && !me.coordinator_retry.replace(true) {
                glommio::timer::sleep(Duration::from_millis(
                    crate::limits::COORDINATOR_LOAD_RETRY_MS,
                ))
                .await;
                me.coordinator_retry.set(false);
                me.spawn_coordinator_sync();
            }
        })
        .detach();
    }

    /// Whether an internal partition here is led by this node but not loaded.
    fn coordinator_load_pending(&self) -> bool {
        let coordinated = self.coordinated.borrow();
        self.partitions
            .borrow()
            .keys()
            .filter(|tp| tp.0 == OFFSETS_TOPIC || tp.0 == TXN_TOPIC)
            .any(|tp| self.coordinates(tp) && !coordinated.contains_key(tp))
    }

    /// One pass of [`Self::spawn_coordinator_sync`]; true when something was loaded (the
    /// view may have moved on during the load, so look again).
    async fn sync_coordinators_once(&self) -> bool {
        let wanted: Vec<(TopicPartition, PartitionLog, Option<i32>)> = self
            .partitions
            .borrow()
            .iter()
            .filter(|(tp, _)| tp.0 == OFFSETS_TOPIC || tp.0 == TXN_TOPIC)
            .map(|(tp, log)| {
                let epoch = self.coordinates(tp).then(|| self.leader_epoch(&tp.0, tp.1));
                (tp.clone(), log.clone(), epoch)
            })
            .collect();
        let mut loaded_any = false;
        for (tp, log, epoch) in wanted {
            let now = self.coordinated.borrow().get(&tp).copied();
            match (now, epoch) {
                (Some(had), Some(want)) if had == want => {}
                (None, None) => {}
                (Some(_), None) => {
                    info!(shard = self.shard, topic = %tp.0, partition = tp.1, "no longer coordinating");
                    self.unload_coordinator(&tp);
                }
                (_, Some(want)) => {
                    self.unload_coordinator(&tp);
                    // Lead the epoch first: it waits for an append in flight (a follower
                    // fetch of the previous epoch) and stamps where this epoch starts.
                    if self.lead_epoch(&tp, &log).await.is_err() {
                        continue; // retried (`coordinator_load_pending`) while it still leads
                    }
                    self.load_coordinator(&tp, &log).await;
                    // Only if it still leads at that epoch; otherwise the next pass decides.
                    if self.coordinates(&tp) && self.leader_epoch(&tp.0, tp.1) == want {
                        info!(shard = self.shard, topic = %tp.0, partition = tp.1, epoch = want, "coordinating");
                        self.coordinated.borrow_mut().insert(tp.clone(), want);
                    } else {
                        self.unload_coordinator(&tp);
                    }
                    loaded_any = true;
                }
            }
        }
        // Partitions that left this shard (topic deleted, replica moved) are unloaded where
        // they are closed (`apply_catalog`).
        loaded_any
    }

    async fn load_coordinator(&self, tp: &TopicPartition, log: &PartitionLog) {
        if tp.0 == TXN_TOPIC {
            self.replay_txns(log).await;
        } else if tp.0 == OFFSETS_TOPIC {
            self.replay_offsets(log).await;
        }
    }

    /// Forgets what this shard coordinates for internal partition `tp`: its groups (parked
    /// joins and syncs are answered NOT_COORDINATOR), their offsets committed in open
    /// transactions, and its transactional ids.
    pub(super) fn unload_coordinator(&self, tp: &TopicPartition) {
        self.coordinated.borrow_mut().remove(tp);
        if tp.0 == OFFSETS_TOPIC {
            self.groups.borrow_mut().forget_partition(tp.1);
        } else if tp.0 == TXN_TOPIC {
            self.txns
                .borrow_mut()
                .coordinator
                .txns
                .retain(|id, _| txn_partition(id) != tp.1);
        }
    }

    /// A coordinator's write to internal partition `tp` (or a transaction marker to any
    /// partition): only while this node leads it; with `durable`, acknowledged once it is on
    /// disk here and every in-sync replica has it (`acks=all`, bounded by
    /// `limits::COORDINATOR_WRITE_TIMEOUT_MS`, Kafka's `offsets.commit.timeout.ms`), else once
    /// it is in the log here.
    pub(crate) async fn coordinator_append(
        &self,
        tp: &TopicPartition,
        batch: BytesMut,
        durable: bool,
    ) -> Result<BatchMeta, CoordinatorWriteError> {
        use CoordinatorWriteError::{Append, Refused};
        // An internal partition's state changes only while it stays loaded at one epoch:
        // the caller applies the write to memory right after this returns.
        let internal = tp.0 == OFFSETS_TOPIC || tp.0 == TXN_TOPIC;
        let loaded_at = self.coordinated.borrow().get(tp).copied();
        if internal && loaded_at.is_none() {
            return Err(Refused(ErrorCode::NotLeaderOrFollower));
        }
        let log = self.led(tp).map_err(Refused)?;
        self.lead_epoch(tp, &log).await.map_err(Refused)?;
        let replicated = match durable {
            true => self.admit_acks_all(tp, &log).map_err(Refused)?,
            false => false,
        };
        let meta = log
            .append(batch, crate::runtime::clock::now_ms())
            .await
            .map_err(Append)?;
        self.shared.appended[self.shard].notify(usize::MAX);
        let tracked = self.track_append(tp, &log, durable);
        if replicated && tracked.is_none() {
            // Leadership moved during the append: the ISR may never get this batch.
            return Err(Refused(ErrorCode::NotLeaderOrFollower));
        }
        if durable {
            log.sync_to(meta.last_offset.next())
                .await
                .map_err(|e| Append(AppendError::Io(e)))?;
        }
        if let Some(isr_has_it) = tracked {
            let timeout = Duration::from_millis(crate::limits::COORDINATOR_WRITE_TIMEOUT_MS);
            let answer = futures_lite::future::or(
                async {
                    isr_has_it
                        .await
                        .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
                },
                async {
                    glommio::timer::sleep(timeout).await;
                    Err(ErrorCode::RequestTimedOut)
                },
            )
            .await;
            answer.map_err(Refused)?;
        }
        if internal && self.coordinated.borrow().get(tp).copied() != loaded_at {
            // Unloaded (or reloaded) meanwhile: the log has it, memory must not.
            return Err(Refused(ErrorCode::NotLeaderOrFollower));
        }
        Ok(meta)
    }
}
