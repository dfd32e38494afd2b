//! Transactions on the node: which shard coordinates a transactional id, cross-shard routing,
//! the `__transaction_state` log (written before every state change, replayed when its
//! partitions open), transaction markers written to every partition of a transaction, and a
//! ticker that aborts expired transactions and finishes in-doubt ones.
//!
//! A transactional id lives on the shard that owns its `__transaction_state` partition, like a
//! group lives with its `__consumer_offsets` partition. Requests for one id run one at a time
//! (a per-id lock), so a state change, its markers and the next state never interleave with
//! another request for the same id.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use futures_channel::oneshot;
use glommio::sync::Semaphore;
use strand_wire::builder::{control_batch, BatchBuilder};
use strand_wire::ErrorCode;
use tracing::{info, warn};

use super::{Node, ShardMsg, TopicPartition};
use crate::internal_topics::{txn_partition, TXN_TOPIC};
use crate::storage::partition_txn::ProducerInfo;
use crate::storage::{Offset, PartitionLog};
use crate::txn::{complete, Claim, Coordinator, Step, TxnMeta, TxnPartition};

/// How often expired and in-doubt transactions are looked for.
const TICK_MS: u64 = 1000;

/// A transaction marker to write (one entry of Kafka's WriteTxnMarkers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub producer_id: i64,
    /// The producer epoch the coordinator ended the transaction at.
    pub epoch: i16,
    pub commit: bool,
    /// The leader epoch of the id's `__transaction_state` partition where the coordinator
    /// decided: a partition refuses a marker of an older coordinator than the last one it
    /// heard from for this producer (TRANSACTION_COORDINATOR_FENCED).
    pub coordinator_epoch: i32,
}

/// A transaction-coordinator request, as sent to the coordinating shard.
#[derive(Debug)]
pub enum TxnRequest {
    Init {
        id: String,
        timeout_ms: i32,
        claim: (i64, i16),
    },
    AddPartitions {
        id: String,
        claim: Claim,
        partitions: Vec<TxnPartition>,
    },
    End {
        id: String,
        claim: Claim,
        commit: bool,
    },
    CheckOffsets {
        id: String,
        claim: Claim,
    },
    Describe {
        id: String,
    },
    List,
}

#[derive(Debug)]
pub enum TxnResponse {
    Init(Result<(i64, i16), ErrorCode>),
    Done(Result<(), ErrorCode>),
    Described(Option<TxnMeta>),
    Listed(Vec<TxnMeta>),
}

/// Per-shard transaction state.
#[derive(Default)]
pub struct Txns {
    pub coordinator: Coordinator,
    locks: HashMap<String, Rc<Semaphore>>,
}

fn now_ms() -> i64 {
    crate::runtime::clock::now_ms()
}

impl Node {
    pub fn txn_shard(&self, id: &str) -> usize {
        self.owner(&(TXN_TOPIC.to_string(), txn_partition(id)))
    }

    /// Runs a transaction request on the coordinating shard.
    pub async fn txn_request(self: &Rc<Self>, id: &str, req: TxnRequest) -> TxnResponse {
        // In a cluster, only the leader of the id's transaction-state partition coordinates.
        if !self.coordinates(&txn_tp(id)) {
            return match req {
                TxnRequest::Init { .. } => TxnResponse::Init(Err(ErrorCode::NotCoordinator)),
                _ => TxnResponse::Done(Err(ErrorCode::NotCoordinator)),
            };
        }
        let owner = self.txn_shard(id);
        if owner == self.shard {
            return self.txn_local(req).await;
        }
        let (reply, rx) = oneshot::channel();
        self.send_to(owner, ShardMsg::Txn { req, reply });
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or(TxnResponse::Done(Err(ErrorCode::NotCoordinator)))
    }

    /// ListTransactions across every shard.
    pub async fn list_txns(self: &Rc<Self>) -> Vec<TxnMeta> {
        let mut out = Vec::new();
        for shard in 0..self.shards() {
            let r = if shard == self.shard {
                self.txn_local(TxnRequest::List).await
            } else {
                let (reply, rx) = oneshot::channel();
                self.send_to(
                    shard,
                    ShardMsg::Txn {
                        req: TxnRequest::List,
                        reply,
                    },
                );
                crate::runtime::wake::cross(rx)
                    .await
                    .unwrap_or(TxnResponse::Listed(vec![]))
            };
            if let TxnResponse::Listed(v) = r {
                out.extend(v);
            }
        }
        out
    }

    fn txn_lock(&self, id: &str) -> Rc<Semaphore> {
        let mut t = self.txns.borrow_mut();
        Rc::clone(
            t.locks
                .entry(id.to_string())
                .or_insert_with(|| Rc::new(Semaphore::new(1))),
        )
    }

    pub async fn txn_local(self: &Rc<Self>, req: TxnRequest) -> TxnResponse {
        let id = match &req {
            TxnRequest::Init { id, .. }
            | TxnRequest::AddPartitions { id, .. }
            | TxnRequest::End { id, .. }
            | TxnRequest::CheckOffsets { id, .. } => id.clone(),
            TxnRequest::Describe { id } => {
                return TxnResponse::Described(self.txns.borrow().coordinator.get(id).cloned())
            }
            TxnRequest::List => {
                let t = self.txns.borrow();
                return TxnResponse::Listed(t.coordinator.txns.values().cloned().collect());
            }
        };
        if !self.coordinator_loaded(&txn_tp(&id)) {
            return match req {
                TxnRequest::Init { .. } => {
                    TxnResponse::Init(Err(ErrorCode::CoordinatorLoadInProgress))
                }
                _ => TxnResponse::Done(Err(ErrorCode::CoordinatorLoadInProgress)),
            };
        }
        let lock = self.txn_lock(&id);
        let Ok(_permit) = lock.acquire_permit(1).await else {
            return TxnResponse::Done(Err(ErrorCode::CoordinatorNotAvailable));
        };
        match req {
            TxnRequest::Init {
                id,
                timeout_ms,
                mut claim,
            } => loop {
                let step = {
                    let t = self.txns.borrow();
                    t.coordinator.init(
                        &id,
                        timeout_ms,
                        self.config().transaction_max_timeout_ms,
                        claim,
                        now_ms(),
                        &mut || self.next_producer_id(),
                    )
                };
                match step {
                    Err(code) => return TxnResponse::Init(Err(code)),
                    Ok(Step::Persist(meta)) => {
                        let r = self.persist_txn(meta, true).await;
                        return TxnResponse::Init(r.map(|m| (m.producer_id, m.epoch)));
                    }
                    Ok(Step::End(prepared)) => {
                        if let Err(code) = self.end_txn(prepared).await {
                            return TxnResponse::Init(Err(code));
                        }
                        // The old producer is fenced; initialise afresh.
                        claim = (-1, -1);
                    }
                    Ok(Step::Done) => {
                        let t = self.txns.borrow();
                        let m = t.coordinator.get(&id);
                        return TxnResponse::Init(
                            m.map(|m| (m.producer_id, m.epoch))
                                .ok_or(ErrorCode::UnknownServerError),
                        );
                    }
                }
            },
            TxnRequest::AddPartitions {
                id,
                claim,
                partitions,
            } => {
                let step = self.txns.borrow().coordinator.add_partitions(
                    &id,
                    claim,
                    &partitions,
                    now_ms(),
                );
                TxnResponse::Done(self.run_step(step).await)
            }
            TxnRequest::End { id, claim, commit } => {
                let step = self
                    .txns
                    .borrow()
                    .coordinator
                    .end(&id, claim, commit, now_ms());
                TxnResponse::Done(self.run_step(step).await)
            }
            TxnRequest::CheckOffsets { id, claim } => {
                TxnResponse::Done(self.txns.borrow().coordinator.check_offsets(&id, claim))
            }
            TxnRequest::Describe { .. } | TxnRequest::List => {
                TxnResponse::Done(Err(ErrorCode::UnknownServerError))
            }
        }
    }

    async fn run_step(self: &Rc<Self>, step: Result<Step, ErrorCode>) -> Result<(), ErrorCode> {
        match step? {
            Step::Done => Ok(()),
            Step::Persist(meta) => self.persist_txn(meta, true).await.map(|_| ()),
            Step::End(prepared) => self.end_txn(prepared).await.map(|_| ()),
        }
    }

    /// Ends a transaction: persists the `Prepare*` state, writes the markers, persists the
    /// `Complete*` state. A failure leaves it in `Prepare*`, which the ticker retries.
    async fn end_txn(self: &Rc<Self>, prepared: TxnMeta) -> Result<TxnMeta, ErrorCode> {
        let prepared = self.persist_txn(prepared, true).await?;
        let marker = Marker {
            producer_id: prepared.producer_id,
            epoch: prepared.epoch,
            commit: prepared.state == crate::txn::TxnState::PrepareCommit,
            // The epoch this shard loaded the id's partition at (0 on a single node): a
            // marker from a coordinator since replaced is told apart by it.
            coordinator_epoch: self
                .coordinated_epoch(&txn_tp(&prepared.transactional_id))
                .unwrap_or(0),
        };
        let mut writes = Vec::new();
        for tp in &prepared.partitions {
            let node = Rc::clone(self);
            let tp = tp.clone();
            writes.push(glommio::spawn_local(async move {
                node.write_marker(tp, marker).await
            }));
        }
        // A marker not written yet (its leader moving, too few replicas, no answer in time)
        // leaves the transaction in `Prepare*`, which the ticker finishes: the client is told
        // to retry (CONCURRENT_TRANSACTIONS, retriable for every client, as Kafka answers an
        // EndTxn while markers are pending), not a code it would treat as fatal.
        let mut failed = None;
        for w in writes {
            if let Err(code) = w.await {
                failed = Some(code);
            }
        }
        if let Some(code) = failed {
            warn!(id = %prepared.transactional_id, ?code, "a transaction marker is not written yet; the ticker retries");
            return Err(ErrorCode::ConcurrentTransactions);
        }
        // Not fdatasynced here: `Prepare*` (durable) is the decision and the markers are
        // durable; if this record is lost in a crash, recovery finds `Prepare*` and writes
        // the markers again (a second marker is a no-op). The next durable record of this
        // partition (any state change of the id) makes it durable too.
        self.persist_txn(complete(&prepared, now_ms()), false).await
    }

    /// Appends `meta` to the id's `__transaction_state` partition (fdatasynced if `durable`),
    /// then makes it the current state.
    async fn persist_txn(&self, meta: TxnMeta, durable: bool) -> Result<TxnMeta, ErrorCode> {
        let (key, value) = crate::txn::encode(&meta);
        let mut b = BatchBuilder::new(now_ms());
        b.push(Some(&key), &value, 0);
        let batch = BytesMut::from(&b.finish()[..]);
        // Not durable: in the log here only (acks=1); see `complete` above.
        self.coordinator_append(&txn_tp(&meta.transactional_id), batch, durable)
            .await
            .map_err(|e| {
                warn!(id = %meta.transactional_id, error = ?e, "could not persist transaction state");
                e.coordinator_code()
            })?;
        self.txns.borrow_mut().coordinator.adopt(meta.clone());
        Ok(meta)
    }

    /// Writes a commit or abort marker to `tp`, on whichever shard owns it.
    pub async fn write_marker(
        self: &Rc<Self>,
        tp: TopicPartition,
        marker: Marker,
    ) -> Result<(), ErrorCode> {
        let Marker {
            producer_id, epoch, ..
        } = marker;
        let owner = self.owner(&tp);
        let result = if let Some((handle, leader)) = self.remote_leader(&tp) {
            // Led by another node: its broker writes the marker (over the cluster link).
            if leader < 0 {
                Err(ErrorCode::NotLeaderOrFollower)
            } else {
                let req = strand_cluster_core::broker_rpc::BrokerRequest::TxnMarker {
                    topic: tp.0.clone(),
                    partition: tp.1,
                    producer_id,
                    producer_epoch: epoch,
                    commit: marker.commit,
                    coordinator_epoch: marker.coordinator_epoch,
                };
                handle.ask_broker(leader, req).await
            }
        } else if owner == self.shard {
            self.marker_local(&tp, marker).await
        } else {
            let (reply, rx) = oneshot::channel();
            self.send_to(
                owner,
                ShardMsg::Marker {
                    tp: tp.clone(),
                    marker,
                    reply,
                },
            );
            crate::runtime::wake::cross(rx)
                .await
                .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
        };
        match result {
            // A partition deleted since it joined the transaction: nothing to mark.
            Err(ErrorCode::UnknownTopicOrPartition)
                if self
                    .catalog()
                    .topics
                    .get(&tp.0)
                    .is_none_or(|t| tp.1 >= t.partitions) =>
            {
                Ok(())
            }
            // The partition knows a newer epoch of this producer: a newer marker (of a
            // coordinator decision after this one) ended the transaction there already.
            Err(ErrorCode::InvalidProducerEpoch) => {
                info!(topic = %tp.0, partition = tp.1, producer_id, epoch, "transaction marker not needed: the partition has a newer producer epoch");
                Ok(())
            }
            r => r,
        }
    }

    /// The marker on this shard's partition; for `__consumer_offsets`, the transaction's
    /// offsets become visible (commit) or are dropped (abort).
    pub async fn marker_local(&self, tp: &TopicPartition, marker: Marker) -> Result<(), ErrorCode> {
        let Marker {
            producer_id,
            epoch,
            commit,
            coordinator_epoch,
        } = marker;
        // Written as Kafka writes markers: acks=all on the partition's leader.
        let batch = control_batch(producer_id, epoch, commit, coordinator_epoch, now_ms());
        self.coordinator_append(tp, BytesMut::from(&batch[..]), true)
            .await
            .map_err(|e| {
                warn!(topic = %tp.0, partition = tp.1, error = ?e, "could not write a transaction marker");
                e.code()
            })?;
        if tp.0 == crate::internal_topics::OFFSETS_TOPIC {
            self.end_txn_offsets(producer_id, tp.1, commit);
        }
        Ok(())
    }

    /// DescribeProducers for one partition, on whichever shard owns it.
    pub async fn producers(&self, tp: TopicPartition) -> Result<Vec<ProducerInfo>, ErrorCode> {
        let owner = self.owner(&tp);
        if owner == self.shard {
            return self.producers_local(&tp);
        }
        let (reply, rx) = oneshot::channel();
        self.send_to(owner, ShardMsg::Producers { tp, reply });
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
    }

    pub fn producers_local(&self, tp: &TopicPartition) -> Result<Vec<ProducerInfo>, ErrorCode> {
        self.local_partition(tp)
            .map(|log| log.producers())
            .ok_or(ErrorCode::UnknownTopicOrPartition)
    }

    /// Replays a `__transaction_state` partition into the coordinator (last record wins).
    pub async fn replay_txns(&self, log: &PartitionLog) {
        let mut next = log.log_start();
        let mut replayed = 0usize;
        while next < log.log_end() {
            let out = match log.read(next, 8 << 20).await {
                Ok(out) if !out.batches.is_empty() => out,
                _ => break,
            };
            for b in &out.batches {
                let Ok(h) = strand_wire::BatchHeader::parse(b) else {
                    return;
                };
                next = Offset(h.last_offset() + 1);
                let Ok(records) = strand_wire::records::records(b) else {
                    continue;
                };
                for r in records {
                    let (Some(key), Some(value)) = (r.key, r.value) else {
                        continue;
                    };
                    if let Some(meta) = crate::txn::decode(key, value) {
                        self.txns.borrow_mut().coordinator.adopt(meta);
                        replayed += 1;
                    }
                }
            }
        }
        if replayed > 0 {
            info!(shard = self.shard, replayed, "transaction states reloaded");
        }
    }

    /// Aborts expired transactions and finishes in-doubt ones on this shard, every second.
    pub fn spawn_txn_ticker(self: &Rc<Self>) {
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(Duration::from_millis(TICK_MS)).await;
                let now = now_ms();
                let work: Vec<TxnMeta> = {
                    let t = me.txns.borrow();
                    let mut w = t.coordinator.expired(now);
                    w.extend(t.coordinator.in_doubt());
                    // Only ids of partitions loaded in full (not one being replayed).
                    w.retain(|m| me.coordinator_loaded(&txn_tp(&m.transactional_id)));
                    w
                };
                for meta in work {
                    let lock = me.txn_lock(&meta.transactional_id);
                    let Ok(_permit) = lock.try_acquire_permit(1) else {
                        continue; // a request for this id is running; next tick
                    };
                    // Re-check under the lock: a request may have changed it meanwhile.
                    let current = me
                        .txns
                        .borrow()
                        .coordinator
                        .get(&meta.transactional_id)
                        .cloned();
                    let loaded = me.coordinator_loaded(&txn_tp(&meta.transactional_id));
                    let still = loaded && current.is_some_and(|c| {
                        (c.state.is_prepare() && c == meta)
                            || (c.state == crate::txn::TxnState::Ongoing
                                && c.epoch.saturating_add(1) == meta.epoch)
                    });
                    if !still {
                        continue;
                    }
                    info!(id = %meta.transactional_id, state = meta.state.name(), "ending transaction (timeout or recovery)");
                    if let Err(code) = me.end_txn(meta).await {
                        warn!(?code, "could not end a transaction; will retry");
                    }
                }
            }
        })
        .detach();
    }
}

pub(crate) fn txn_tp(id: &str) -> TopicPartition {
    (TXN_TOPIC.to_string(), txn_partition(id))
}
