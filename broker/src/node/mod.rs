//! One shard's view of the node: its partitions, its catalog snapshot, and the channels to the
//! other shards.
//!
//! Partition work always runs on the owning shard (`shard::shard_for`). A request that touches
//! another shard's partition sends a [`ShardMsg`] over an unbounded channel and awaits a
//! oneshot reply; glommio wakes the waiting task when the reply arrives from the other thread.
//! Shard 0 is the controller: topic creation and deletion go through it, it persists the
//! catalog and pushes the new snapshot to every shard before answering.
//! Submodules are parts of the shard: [`group_service`] and [`txn_service`] (groups and
//! transactions: routing, persistence, timeouts, markers; their decisions are the sans-IO
//! `crate::group` / `crate::txn`), and `cluster` (the shard's side of the metadata).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use bytes::BytesMut;
use futures_channel::{mpsc, oneshot};
use futures_lite::StreamExt;
use glommio::sync::Semaphore;
use strand_wire::ErrorCode;
use tracing::{info, warn};

use crate::catalog::{Catalog, CatalogOp};
use crate::config::BrokerConfig;
use crate::runtime::shard::shard_for;
use crate::storage::{AppendError, Offset, PartitionLog, ReadOut, StorageOptions};

pub use crate::storage::TopicPartition;

mod admin_views;
mod cluster;
mod consumer_groups;
mod coordinators;
mod fetch_probe;
mod group_replay;
pub(crate) use fetch_probe::Probe;
pub mod group_service;
mod leader_written;
mod metrics_probe;
mod partition_ops;
mod reassign;
mod replica_fetcher;
mod replica_leader;
mod replica_serve;
mod throttle;
pub use replica_serve::ReplicaFetchMany;
pub mod share_service;
pub mod txn_service;
pub use cluster::SINGLE_NODE_ID;

/// Result of a produce on one partition: base offset and log start, or an error code.
pub type ProduceOutcome = Result<(Offset, Offset), ErrorCode>;
/// Result of a read on one partition.
pub type ReadOutcome = Result<ReadOut, ErrorCode>;

/// (offset, timestamp) for a ListOffsets lookup; offset -1 when none, timestamp -1 unless
/// looked up by time.
pub type OffsetsOutcome = Result<(Offset, i64), ErrorCode>;
/// Per item: Ok or (error code, message).
pub type AdminOutcome = Vec<crate::catalog::OpResult>;

fn op_len(op: &CatalogOp) -> usize {
    match op {
        CatalogOp::Create(v) => v.len(),
        CatalogOp::Delete(v) => v.len(),
        CatalogOp::AlterConfigs(v) => v.len(),
        CatalogOp::SetConfigs(v) => v.len(),
        CatalogOp::CreatePartitions(v) => v.len(),
    }
}

/// Work sent to the shard that owns it.
pub enum ShardMsg {
    /// Append, signal `appended` (the ordering point), then answer `done` once the batch is
    /// as durable as asked.
    Produce {
        tp: TopicPartition,
        batch: BytesMut,
        durable: bool,
        /// acks=-1: in a replicated partition, answered once the ISR holds the batch.
        acks_all: bool,
        /// When it was sent (the owner records the hop).
        sent_at: std::time::Instant,
        appended: oneshot::Sender<()>,
        done: oneshot::Sender<ProduceOutcome>,
    },
    Read {
        tp: TopicPartition,
        offset: Offset,
        bytes_max: usize,
        /// read_committed: stop at the last stable offset, list aborted transactions.
        committed: bool,
        reply: oneshot::Sender<ReadOutcome>,
    },
    Offsets {
        tp: TopicPartition,
        timestamp_ms: i64,
        committed: bool,
        reply: oneshot::Sender<OffsetsOutcome>,
    },
    /// A transaction-coordinator request, to the id's coordinating shard.
    Txn {
        req: crate::node::txn_service::TxnRequest,
        reply: oneshot::Sender<crate::node::txn_service::TxnResponse>,
    },
    /// A transaction marker, to the partition's shard.
    Marker {
        tp: TopicPartition,
        marker: crate::node::txn_service::Marker,
        reply: oneshot::Sender<Result<(), ErrorCode>>,
    },
    /// DeleteRecords, to the partition's shard: the new log start offset.
    DeleteRecords {
        tp: TopicPartition,
        before: Offset,
        reply: oneshot::Sender<Result<Offset, ErrorCode>>,
    },
    /// A follower shard's fetch session (#18), to the leader's shard it names.
    ReplicaFetchMany {
        fetch: ReplicaFetchMany,
        reply: oneshot::Sender<Vec<strand_cluster_core::broker_rpc::PartitionAnswer>>,
    },
    /// OffsetForLeaderEpoch, to the partition's shard: `(epoch, end offset)`.
    EpochEnd {
        tp: TopicPartition,
        epoch: i32,
        reply: oneshot::Sender<Result<(i32, i64), ErrorCode>>,
    },
    /// A share-group operation on a share-partition, to the partition's shard.
    Share {
        op: crate::node::share_service::ShareOp,
        reply: oneshot::Sender<crate::node::share_service::ShareAnswer>,
    },
    /// DescribeProducers, to the partition's shard.
    Producers {
        tp: TopicPartition,
        reply: oneshot::Sender<Result<Vec<crate::storage::partition_txn::ProducerInfo>, ErrorCode>>,
    },
    /// A new catalog snapshot: open newly owned partitions, drop deleted ones.
    ApplyCatalog {
        catalog: Arc<Catalog>,
        reply: oneshot::Sender<()>,
    },
    /// A consumer-group request, to the group's coordinating shard.
    Group {
        req: crate::node::group_service::GroupRequest,
        reply: oneshot::Sender<crate::node::group_service::GroupResponse>,
    },
    /// This shard's stage histograms (reset after the copy when `reset`), for the admin API.
    Stages {
        reset: bool,
        reply: oneshot::Sender<crate::stages::Stages>,
    },
    /// This shard's counters and partition gauges, for `GET /metrics` (`metrics_probe`).
    Metrics {
        reply: oneshot::Sender<metrics_probe::ShardScrape>,
    },
    /// A catalog change, to the controller (shard 0).
    Catalog {
        op: CatalogOp,
        validate_only: bool,
        reply: oneshot::Sender<AdminOutcome>,
    },
}

/// Channels between shards, made before the executors start.
pub struct Mesh {
    pub senders: Vec<mpsc::UnboundedSender<ShardMsg>>,
    pub receivers: Vec<Option<mpsc::UnboundedReceiver<ShardMsg>>>,
}

impl Mesh {
    pub fn new(shards: usize) -> Mesh {
        let (senders, receivers) = (0..shards)
            .map(|_| {
                let (tx, rx) = mpsc::unbounded();
                (tx, Some(rx))
            })
            .unzip();
        Mesh { senders, receivers }
    }
}

/// State shared by every shard of the process (immutable or atomic).
pub struct NodeShared {
    pub config: Arc<BrokerConfig>,
    pub senders: Vec<mpsc::UnboundedSender<ShardMsg>>,
    /// Next producer id for InitProducerId (seeded from the clock so ids do not repeat across
    /// restarts).
    pub next_producer_id: AtomicI64,
    pub cluster_id: String,
    /// I/O sizes of every partition (from io-properties, or the defaults).
    pub storage: StorageOptions,
    /// One per shard, notified after each append there (wakes long-polling fetches anywhere).
    pub appended: Vec<Arc<event_listener::Event>>,
    /// Connection limits, shared by every shard's listener.
    pub admission: Arc<crate::admission::Admission>,
    /// Free space on the data directory (refreshed by shard 0).
    pub disk: Arc<crate::disk_space::DiskSpace>,
    /// Topic auto-creation's per-request cap and rate.
    pub auto_create: crate::auto_create::AutoCreate,
    /// Cluster mode: the way to the controller executor (`None`: a single node).
    pub cluster: Option<crate::cluster::handle::ClusterHandle>,
    /// Cluster mode: this node's replication throttle rates (`cluster::throttle_rates`).
    pub throttle_rates: Arc<crate::cluster::throttle_rates::ThrottleRates>,
    /// Shards whose Kafka listener is bound (the admin API's readiness waits for all).
    pub listeners_bound: std::sync::atomic::AtomicUsize,
    /// Listeners' TLS, SASL credentials and ACLs (`security`).
    pub security: Arc<crate::security::Security>,
}

pub struct Node {
    pub shard: usize,
    pub shared: Arc<NodeShared>,
    catalog: RefCell<Arc<Catalog>>,
    partitions: RefCell<HashMap<TopicPartition, PartitionLog>>,
    /// Moves on whenever `partitions` gains or loses one (fetch sessions' memos check it).
    partitions_generation: Cell<u64>,
    /// Serialises catalog changes on the controller.
    controller: Semaphore,
    /// Consumer groups coordinated by this shard.
    pub(crate) groups: RefCell<crate::node::group_service::Groups>,
    /// Transactional ids coordinated by this shard.
    pub(crate) txns: RefCell<crate::node::txn_service::Txns>,
    /// Share-partitions of partitions this shard leads, and share sessions of its connections.
    pub(crate) share: RefCell<crate::node::share_service::Shares>,
    /// Internal partitions whose groups / transactional ids this shard has loaded and serves,
    /// with the leader epoch they were loaded at (`coordinators`).
    coordinated: RefCell<HashMap<TopicPartition, i32>>,
    /// One coordinator load pass at a time (`coordinators`).
    coordinator_sync: Semaphore,
    /// A retry of a coordinator load that failed is scheduled (`coordinators`).
    coordinator_retry: std::cell::Cell<bool>,
    /// Produce memory budget of this shard, in KiB units (`limits::SHARD_PRODUCE_MEMORY_BYTES`).
    pub produce_memory: Rc<Semaphore>,
    /// Connection memory budget of this shard, in KiB units: large request frames and queued
    /// replies (`limits::SHARD_CONNECTION_MEMORY_BYTES`).
    pub connection_memory: Rc<Semaphore>,
    /// KIP-227 fetch sessions made on this shard's connections.
    pub fetch_sessions: RefCell<crate::fetch_session::FetchSessions>,
    /// Where this shard's requests spend their time (`stages`).
    pub stages: Rc<RefCell<crate::stages::Stages>>,
    /// Partitions this shard follows (cluster mode), in one fetch session per leader shard.
    followers: RefCell<replica_fetcher::Followers>,
    /// Partitions this shard leads with replicas on other nodes.
    leaders: RefCell<HashMap<TopicPartition, replica_leader::Led>>,
    /// Whether the replication ticker runs (`replica_leader`).
    replication_ticking: std::cell::Cell<bool>,
    /// Led, replicated partitions to write out, and the event that wakes the task that does
    /// (`leader_written`).
    leader_writes: RefCell<leader_written::LeaderWrites>,
    leader_writes_wanted: event_listener::Event,
    /// When this shard started, and whether its stray-directory sweep ran (`cluster.rs`).
    started: std::time::SystemTime,
    strays_swept: Cell<bool>,
}

/// What a produce resolves to once the batch is as durable as asked.
pub type Completion = Pin<Box<dyn Future<Output = ProduceOutcome>>>;

fn ready(outcome: ProduceOutcome) -> Completion {
    Box::pin(std::future::ready(outcome))
}

impl Node {
    pub fn new(shard: usize, shared: Arc<NodeShared>) -> Rc<Node> {
        let shards = shared.senders.len().max(1);
        let slots = shared
            .config
            .max_incremental_fetch_session_cache_slots
            .max(0) as usize;
        let fetch_sessions = crate::fetch_session::FetchSessions::new(
            slots.div_ceil(shards),
            crate::limits::FETCH_SESSION_PARTITIONS_PER_SHARD,
            crate::limits::FETCH_SESSION_EVICTION_MS,
            crate::runtime::clock::now_ms() as u64 ^ ((shard as u64) << 32),
        );
        Rc::new(Node {
            shard,
            shared,
            catalog: RefCell::new(Arc::new(Catalog::default())),
            partitions: RefCell::new(HashMap::new()),
            partitions_generation: Cell::new(0),
            controller: Semaphore::new(1),
            groups: RefCell::new(Default::default()),
            txns: RefCell::new(Default::default()),
            share: RefCell::new(Default::default()),
            coordinated: RefCell::new(HashMap::new()),
            coordinator_sync: Semaphore::new(1),
            coordinator_retry: std::cell::Cell::new(false),
            produce_memory: Rc::new(Semaphore::new(
                (crate::limits::SHARD_PRODUCE_MEMORY_BYTES >> 10) as u64,
            )),
            connection_memory: Rc::new(Semaphore::new(
                (crate::limits::SHARD_CONNECTION_MEMORY_BYTES >> 10) as u64,
            )),
            fetch_sessions: RefCell::new(fetch_sessions),
            stages: Rc::new(RefCell::new(crate::stages::Stages::new())),
            followers: RefCell::default(),
            leaders: RefCell::new(HashMap::new()),
            replication_ticking: std::cell::Cell::new(false),
            leader_writes: RefCell::default(),
            leader_writes_wanted: event_listener::Event::new(),
            started: std::time::SystemTime::now(),
            strays_swept: Cell::new(false),
        })
    }

    pub fn shards(&self) -> usize {
        self.shared.senders.len()
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.shared.config
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog.borrow())
    }

    pub fn owner(&self, tp: &TopicPartition) -> usize {
        if self.shards() == 1 {
            return 0;
        }
        shard_for(&tp.0, tp.1, self.shards())
    }

    pub fn local_partitions(&self) -> Vec<PartitionLog> {
        self.partitions.borrow().values().cloned().collect()
    }

    pub(crate) fn local_partition(&self, tp: &TopicPartition) -> Option<PartitionLog> {
        self.local(tp)
    }

    pub(crate) fn send_to(&self, shard: usize, msg: ShardMsg) {
        self.send(shard, msg)
    }

    fn local(&self, tp: &TopicPartition) -> Option<PartitionLog> {
        self.partitions.borrow().get(tp).cloned()
    }

    fn send(&self, shard: usize, msg: ShardMsg) {
        // A closed channel means that shard is gone (shutdown); the reply sender is dropped
        // and the waiting side sees `Canceled`.
        crate::metrics::with(|m| m.cross_shard_messages += 1);
        let _ = self.shared.senders[shard].unbounded_send(msg);
    }

    /// Receives and serves messages from other shards until the process ends.
    pub async fn run_inbox(self: Rc<Self>, mut rx: mpsc::UnboundedReceiver<ShardMsg>) {
        while let Some(msg) = crate::runtime::wake::cross(rx.next()).await {
            let me = Rc::clone(&self);
            glommio::spawn_local(async move { me.serve(msg).await }).detach();
        }
    }

    async fn serve(self: Rc<Self>, msg: ShardMsg) {
        match msg {
            ShardMsg::Produce {
                tp,
                batch,
                durable,
                acks_all,
                sent_at,
                appended,
                done,
            } => {
                self.stages
                    .borrow_mut()
                    .record_partition(crate::stages::Stage::Hop, sent_at.elapsed());
                let completion = self.produce_local(&tp, batch, durable, acks_all).await;
                let _ = appended.send(());
                let _ = done.send(completion.await);
            }
            ShardMsg::Read {
                tp,
                offset,
                bytes_max,
                committed,
                reply,
            } => {
                let _ = reply.send(self.read_local(&tp, offset, bytes_max, committed).await);
            }
            ShardMsg::Offsets {
                tp,
                timestamp_ms,
                committed,
                reply,
            } => {
                let _ = reply.send(self.offsets_local(&tp, timestamp_ms, committed).await);
            }
            ShardMsg::Txn { req, reply } => {
                let _ = reply.send(self.txn_local(req).await);
            }
            ShardMsg::Marker { tp, marker, reply } => {
                let _ = reply.send(self.marker_local(&tp, marker).await);
            }
            ShardMsg::DeleteRecords { tp, before, reply } => {
                let _ = reply.send(self.delete_records_local(&tp, before).await);
            }
            ShardMsg::ReplicaFetchMany { fetch, reply } => {
                let _ = reply.send(self.replica_fetch_many_local(fetch).await);
            }
            ShardMsg::EpochEnd { tp, epoch, reply } => {
                let _ = reply.send(self.epoch_end_local(&tp, epoch).await);
            }
            ShardMsg::Producers { tp, reply } => {
                let _ = reply.send(self.producers_local(&tp));
            }
            ShardMsg::Share { op, reply } => {
                let _ = reply.send(self.share_local(op).await);
            }
            ShardMsg::ApplyCatalog { catalog, reply } => {
                self.apply_catalog(catalog).await;
                self.follow_leaders();
                self.sync_leaders();
                self.spawn_coordinator_sync();
                let _ = reply.send(());
            }
            ShardMsg::Catalog {
                op,
                validate_only,
                reply,
            } => {
                let _ = reply.send(self.controller(op, validate_only).await);
            }
            ShardMsg::Group { req, reply } => {
                let _ = reply.send(self.group_local(req).await);
            }
            ShardMsg::Stages { reset, reply } => {
                let _ = reply.send(self.local_stages(reset));
            }
            ShardMsg::Metrics { reply } => {
                let _ = reply.send(self.local_metrics());
            }
        }
    }

    /// Appends a batch to `tp` on whichever shard owns it. Returns once the batch is in the
    /// log (so a later append from the same connection lands after it), with a future that
    /// resolves when the batch is as durable as asked (`durable`: fdatasynced).
    pub async fn produce(
        &self,
        tp: TopicPartition,
        batch: BytesMut,
        durable: bool,
        acks_all: bool,
    ) -> Completion {
        let owner = self.owner(&tp);
        if owner == self.shard {
            return self.produce_local(&tp, batch, durable, acks_all).await;
        }
        let (appended, appended_rx) = oneshot::channel();
        let (done, done_rx) = oneshot::channel();
        self.send(
            owner,
            ShardMsg::Produce {
                tp,
                batch,
                durable,
                acks_all,
                sent_at: std::time::Instant::now(),
                appended,
                done,
            },
        );
        if crate::runtime::wake::cross(appended_rx).await.is_err() {
            return ready(Err(ErrorCode::NotLeaderOrFollower));
        }
        Box::pin(async move {
            crate::runtime::wake::cross(done_rx)
                .await
                .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
        })
    }

    async fn produce_local(
        &self,
        tp: &TopicPartition,
        batch: BytesMut,
        durable: bool,
        acks_all: bool,
    ) -> Completion {
        let log = match self.led(tp) {
            Ok(log) => log,
            Err(code) => return ready(Err(code)),
        };
        if let Err(code) = self.lead_epoch(tp, &log).await {
            return ready(Err(code));
        }
        let replicated = match acks_all {
            true => match self.admit_acks_all(tp, &log) {
                Ok(replicated) => replicated,
                Err(code) => return ready(Err(code)),
            },
            false => false,
        };
        let started = std::time::Instant::now();
        let result = log.append(batch, crate::runtime::clock::now_ms()).await;
        self.stages
            .borrow_mut()
            .record_partition(crate::stages::Stage::Append, started.elapsed());
        self.shared.appended[self.shard].notify(usize::MAX);
        let (base, next) = match result {
            Ok(meta) => {
                crate::metrics::with(|m| {
                    m.bytes_in += u64::from(meta.bytes);
                    m.records_in += (meta.last_offset.0 - meta.base_offset.0 + 1) as u64;
                });
                (meta.base_offset, meta.last_offset.next())
            }
            // Kafka answers a duplicate with the original offset and no error.
            Err(AppendError::Duplicate(offset)) => (offset, offset.next()),
            Err(e) => {
                if matches!(e, AppendError::Io(_)) {
                    warn!(topic = %tp.0, partition = tp.1, error = %e, "append failed");
                }
                return ready(Err(e.error_code()));
            }
        };
        let start = log.log_start();
        let tracked = self.track_append(tp, &log, acks_all);
        if replicated && tracked.is_none() {
            // Leadership moved during the append: the ISR may never get this batch.
            return ready(Err(ErrorCode::NotLeaderOrFollower));
        }
        let replicated = tracked;
        if !durable && replicated.is_none() {
            return ready(Ok((base, start)));
        }
        let stages = Rc::clone(&self.stages);
        Box::pin(async move {
            if durable {
                let waited = std::time::Instant::now();
                let synced = log.sync_to(next).await;
                stages
                    .borrow_mut()
                    .record_partition(crate::stages::Stage::FsyncWait, waited.elapsed());
                if synced.is_err() {
                    return Err(ErrorCode::KafkaStorageError);
                }
            }
            if let Some(isr_has_it) = replicated {
                isr_has_it
                    .await
                    .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))?;
            }
            Ok((base, start))
        })
    }

    /// Samples how late this shard wakes for a timer (`stages`: `shard lag`), for as long as
    /// the shard runs.
    pub fn spawn_lag_probe(self: &Rc<Self>) {
        let stages = Rc::clone(&self.stages);
        let period = std::time::Duration::from_millis(crate::limits::SHARD_LAG_PROBE_MS);
        glommio::spawn_local(async move {
            loop {
                let asked = std::time::Instant::now();
                glommio::timer::sleep(period).await;
                let late = asked.elapsed().saturating_sub(period);
                stages
                    .borrow_mut()
                    .record_partition(crate::stages::Stage::Lag, late);
            }
        })
        .detach();
    }

    /// A copy of this shard's stage histograms; `reset` empties them after the copy.
    pub fn local_stages(&self, reset: bool) -> crate::stages::Stages {
        let mut stages = self.stages.borrow_mut();
        let copy = stages.clone();
        if reset {
            stages.reset();
        }
        copy
    }

    /// Every shard's stage histograms, merged (`reset`: each shard's emptied after its copy).
    pub async fn all_stages(&self, reset: bool) -> crate::stages::Stages {
        let mut all = crate::stages::Stages::new();
        for shard in 0..self.shards() {
            if shard == self.shard {
                all.merge(&self.local_stages(reset));
                continue;
            }
            let (reply, rx) = oneshot::channel();
            self.send(shard, ShardMsg::Stages { reset, reply });
            if let Ok(s) = crate::runtime::wake::cross(rx).await {
                all.merge(&s);
            }
        }
        all
    }

    /// Changes the catalog through the controller (shard 0); one result per item.
    pub async fn change_catalog(&self, op: CatalogOp, validate_only: bool) -> AdminOutcome {
        if let Some(handle) = self.shared.cluster.clone() {
            return self
                .change_through_controller(&handle, op, validate_only)
                .await;
        }
        if self.shard == 0 {
            return self.controller(op, validate_only).await;
        }
        let n = op_len(&op);
        let (reply, rx) = oneshot::channel();
        self.send(
            0,
            ShardMsg::Catalog {
                op,
                validate_only,
                reply,
            },
        );
        crate::runtime::wake::cross(rx).await.unwrap_or_else(|_| {
            vec![Err((ErrorCode::UnknownServerError, "controller gone".into())); n]
        })
    }

    async fn controller(&self, op: CatalogOp, validate_only: bool) -> AdminOutcome {
        let _permit = self.controller.acquire_permit(1).await;
        let grows = matches!(op, CatalogOp::Create(_) | CatalogOp::CreatePartitions(_));
        if grows && self.shared.disk.is_low() {
            let reason = self.shared.disk.reason();
            return vec![Err((ErrorCode::PolicyViolation, reason)); op_len(&op)];
        }
        let mut next = (*self.catalog()).clone();
        let results = next.apply_within(&op, &self.partitions_max());
        if validate_only || !results.iter().any(Result::is_ok) {
            return results;
        }
        info!(?op, "catalog change");
        match self.publish(next).await {
            Ok(()) => results,
            Err(e) => {
                warn!(error = %e, "could not persist the catalog");
                results
                    .into_iter()
                    .map(|_| Err((ErrorCode::KafkaStorageError, e.to_string())))
                    .collect()
            }
        }
    }

    /// Persists `next` and applies it on every shard before returning.
    async fn publish(&self, next: Catalog) -> io::Result<()> {
        let dir = self.config().data_dir.clone();
        let to_save = next.clone();
        glommio::executor()
            .spawn_blocking(move || crate::disk_space::with_reserve(&dir, || to_save.save(&dir)))
            .await?;
        let next = Arc::new(next);
        let mut waits = Vec::new();
        for shard in 0..self.shards() {
            if shard == self.shard {
                continue;
            }
            let (reply, rx) = oneshot::channel();
            self.send(
                shard,
                ShardMsg::ApplyCatalog {
                    catalog: Arc::clone(&next),
                    reply,
                },
            );
            waits.push(rx);
        }
        self.apply_catalog(next).await;
        for w in waits {
            let _ = crate::runtime::wake::cross(w).await;
        }
        Ok(())
    }

    /// Adopts a catalog snapshot: opens the partitions this shard owns that are not open yet,
    /// closes and deletes those whose topic is gone.
    /// Makes everything this shard's partitions have acknowledged durable (a clean stop).
    pub async fn flush_all(&self) {
        let logs: Vec<PartitionLog> = self.partitions.borrow().values().cloned().collect();
        for log in logs {
            if let Err(e) = log.flush().await {
                warn!(error = %e, "flush on stop failed");
            }
        }
    }

    pub async fn apply_catalog(&self, catalog: Arc<Catalog>) {
        let old = self.catalog.replace(Arc::clone(&catalog));
        let config = Arc::clone(&self.shared.config);
        let gone: Vec<(TopicPartition, PartitionLog)> = self
            .partitions
            .borrow()
            .iter()
            .filter(|(tp, _)| {
                catalog
                    .topics
                    .get(&tp.0)
                    .is_none_or(|t| tp.1 >= t.partitions)
                    || !self.hosts(&catalog, tp)
                    || cluster::replaced(&old, &catalog, &tp.0)
            })
            .map(|(tp, log)| (tp.clone(), log.clone()))
            .collect();
        for (tp, log) in gone {
            self.unload_coordinator(&tp);
            self.partitions.borrow_mut().remove(&tp);
            self.partitions_generation
                .set(self.partitions_generation.get() + 1);
            let _ = log.close().await;
            let dir = log.dir().to_path_buf();
            drop(log);
            if let Err(e) = glommio::executor()
                .spawn_blocking(move || std::fs::remove_dir_all(dir))
                .await
            {
                warn!(topic = %tp.0, partition = tp.1, error = %e, "could not delete partition files");
            }
        }
        for (tp, log) in self.partitions.borrow().iter() {
            if let Some(meta) = catalog.topics.get(&tp.0) {
                log.set_config(meta.log_config(&config.log));
            }
        }
        for (name, meta) in &catalog.topics {
            for p in 0..meta.partitions {
                let tp = (name.clone(), p);
                if !self.hosts(&catalog, &tp) || self.partitions.borrow().contains_key(&tp) {
                    continue;
                }
                let dir = config.data_dir.join(format!("{name}-{p}"));
                if catalog.cluster.is_some() {
                    if let Err(e) = cluster::claim_dir(&dir, &meta.id).await {
                        warn!(topic = %name, partition = p, error = %e, "cannot prepare the partition directory");
                        continue;
                    }
                }
                match PartitionLog::open(
                    dir,
                    meta.log_config(&config.log),
                    self.shared.storage.clone(),
                )
                .await
                {
                    Ok((log, report)) => {
                        if report.scanned > 0 || report.segments > 0 {
                            info!(shard = self.shard, topic = %name, partition = p, end = %log.log_end(), ?report, "partition opened");
                        }
                        let internal = tp.0 == crate::internal_topics::OFFSETS_TOPIC
                            || tp.0 == crate::internal_topics::TXN_TOPIC;
                        self.partitions.borrow_mut().insert(tp.clone(), log.clone());
                        self.partitions_generation
                            .set(self.partitions_generation.get() + 1);
                        // Until loaded, its groups and transactional ids are answered
                        // COORDINATOR_LOAD_IN_PROGRESS. In a cluster they load when this
                        // node leads the partition (`coordinators`).
                        if internal && catalog.cluster.is_none() {
                            self.load_at_open(&tp, &log).await;
                        }
                    }
                    Err(e) => {
                        warn!(topic = %name, partition = p, error = %e, "cannot open partition")
                    }
                }
            }
        }
        self.sweep_strays_once(&catalog);
    }
}
