//! The producer: records are batched per partition (`batch.size`, `linger.ms`), keyed records
//! go to Kafka's murmur2 partition and keyless ones stick to a partition per batch, batches go
//! to each partition's leader pipelined on its connection (one request carries the oldest
//! waiting batch of each of up to 64 partitions of that leader), and every record gets a delivery
//! future resolving to its (partition, offset). Idempotent by default with `acks=all`
//! (producer id + per-partition sequence numbers, as the Java client does). Memory is bounded
//! (`buffer.memory`): `send` waits while that many bytes are unacknowledged.
//!
//! Batches are compressed with `compression.type` (gzip, snappy, lz4, zstd). Not yet: retries that reorder safely with several batches in flight (a failed
//! batch is retried up to `retries` times, which can reorder it behind later ones unless
//! idempotence makes the broker refuse the gap), transactions.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use event_listener::Event;
use strand_wire::batch::Compression;
use strand_wire::builder::BatchBuilder;
use strand_wire::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strand_wire::kafka::messages::{
    InitProducerIdRequest, ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;

use crate::cluster::{Cluster, REQUEST_TIMEOUT};
use crate::error::ClientError;
use crate::partitioner::{partition_for_key, Sticky};

/// Producer settings, by the Java client's names.
#[derive(Clone, Debug)]
pub struct ProducerConfig {
    /// `acks`: 0, 1 or -1 (all).
    pub acks: i16,
    /// `linger.ms`: how long a batch waits for more records.
    pub linger_ms: u64,
    /// `batch.size`: a batch is sent once it reaches this many bytes.
    pub batch_size: usize,
    /// `enable.idempotence`: on by default when `acks=-1`.
    pub idempotence: bool,
    /// `buffer.memory`: unacknowledged bytes before `send` waits.
    pub buffer_memory: usize,
    /// `retries` of a batch that failed with a retriable error.
    pub retries: u32,
    /// `compression.type`: none, gzip, snappy, lz4 or zstd (the records of each batch).
    pub compression: Compression,
    /// `max.in.flight.requests.per.connection` (5 with idempotence, as Kafka requires; more
    /// without, as librdkafka allows).
    pub max_in_flight: usize,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: -1,
            linger_ms: 5,
            batch_size: 16 * 1024,
            idempotence: true,
            buffer_memory: 32 << 20,
            retries: 5,
            compression: Compression::None,
            max_in_flight: 100,
        }
    }
}

/// One record's delivery: [`Delivery::wait`] resolves to its (partition, offset) (offset -1
/// with `acks=0`). The records of a batch share one outcome (one allocation per batch, not per
/// record).
pub struct Delivery {
    batch: Rc<Outcome>,
    index: u32,
}

/// A batch's fate, shared by its records' [`Delivery`] handles.
#[derive(Default)]
struct Outcome {
    /// (partition, base offset) or the error's text, once known.
    result: RefCell<Option<Result<(i32, i64), String>>>,
    done: Event,
}

impl Delivery {
    pub async fn wait(self) -> Result<(i32, i64), ClientError> {
        loop {
            let listener = self.batch.done.listen();
            if let Some(r) = self.batch.result.borrow().as_ref() {
                return match r {
                    Ok((p, base)) if *base >= 0 => Ok((*p, base + i64::from(self.index))),
                    Ok((p, _)) => Ok((*p, -1)),
                    Err(e) => Err(ClientError::Invalid(e.clone())),
                };
            }
            listener.await;
        }
    }
}

struct OpenBatch {
    builder: BatchBuilder,
    base_ms: i64,
    outcome: Rc<Outcome>,
    bytes: usize,
    /// Distinguishes this batch from a later one of the same partition (linger timers).
    generation: u64,
}

struct Inner {
    cluster: Cluster,
    config: ProducerConfig,
    /// Topic -> partition -> the batch being filled.
    open: RefCell<HashMap<String, HashMap<i32, OpenBatch>>>,
    sticky: RefCell<HashMap<String, Sticky>>,
    sequences: RefCell<HashMap<(String, i32), i32>>,
    producer: Cell<(i64, i16)>,
    generation: Cell<u64>,
    /// Bytes in open or unacknowledged batches.
    buffered: Cell<usize>,
    released: Event,
    in_flight: Cell<usize>,
    idle: Event,
    /// Per broker: batches queued and in flight (bounded by `max_in_flight`).
    queues: RefCell<HashMap<i32, BrokerQueue>>,
    /// Idempotent producers: partitions with a batch in flight (sent, or being retried). A
    /// partition has one at a time, so a retried batch lands before the next of its
    /// partition: with several, the broker answers the ones behind a failed batch
    /// OUT_OF_ORDER_SEQUENCE_NUMBER and the partition's sequence never recovers.
    busy: RefCell<std::collections::HashSet<(String, i32)>>,
}

/// A producer on the current glommio executor; clones share it.
#[derive(Clone)]
pub struct Producer {
    inner: Rc<Inner>,
}

impl Producer {
    pub async fn new(
        cluster: Cluster,
        mut config: ProducerConfig,
    ) -> Result<Producer, ClientError> {
        if config.acks != -1 {
            // Kafka's rule: idempotence needs acks=all.
            config.idempotence = false;
        }
        if config.idempotence {
            config.max_in_flight = config.max_in_flight.min(5);
        }
        let p = Producer {
            inner: Rc::new(Inner {
                cluster,
                config,
                open: RefCell::new(HashMap::new()),
                sticky: RefCell::new(HashMap::new()),
                sequences: RefCell::new(HashMap::new()),
                producer: Cell::new((-1, -1)),
                generation: Cell::new(0),
                buffered: Cell::new(0),
                released: Event::new(),
                in_flight: Cell::new(0),
                idle: Event::new(),
                queues: RefCell::new(HashMap::new()),
                busy: RefCell::new(std::collections::HashSet::new()),
            }),
        };
        if p.inner.config.idempotence {
            let (id, epoch) = crate::cluster::retrying(|| p.init_producer_id()).await?;
            p.inner.producer.set((id, epoch));
        }
        Ok(p)
    }

    async fn init_producer_id(&self) -> Result<(i64, i16), ClientError> {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = None;
        req.transaction_timeout_ms = 60_000;
        req.producer_id = strand_wire::kafka::messages::ProducerId(-1);
        req.producer_epoch = -1;
        let ResponseKind::InitProducerId(r) = self
            .inner
            .cluster
            .request(RequestKind::InitProducerId(req))
            .await?
        else {
            return Err(ClientError::Protocol(
                "unexpected InitProducerId answer".into(),
            ));
        };
        ClientError::check(r.error_code, Some("InitProducerId"))?;
        Ok((r.producer_id.0, r.producer_epoch))
    }

    /// Queues one record; the returned future resolves once the broker has it (per `acks`).
    pub async fn send(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: &[u8],
    ) -> Result<Delivery, ClientError> {
        let inner = &self.inner;
        let size = value.len() + key.map_or(0, <[u8]>::len) + 32;
        while inner.buffered.get() + size > inner.config.buffer_memory && inner.buffered.get() > 0 {
            let l = inner.released.listen();
            if inner.buffered.get() + size <= inner.config.buffer_memory {
                break;
            }
            l.await;
        }
        let partitions = match inner.cluster.partition_count(topic) {
            Some(n) => n,
            None => inner.cluster.topic(topic).await?.leaders.len() as i32,
        };
        if partitions == 0 {
            return Err(ClientError::Invalid(format!(
                "topic {topic:?} has no partitions"
            )));
        }
        let partition = match key {
            Some(k) => partition_for_key(k, partitions),
            None => inner
                .sticky
                .borrow_mut()
                .entry(topic.to_string())
                .or_insert_with(|| Sticky::new(seed()))
                .partition(partitions),
        };
        let now_ms = now_ms();
        // A new batch's linger timer is armed once `open` is released: the timer task may run
        // before `send` returns (with linger.ms=0) and must find the map unborrowed.
        let mut new_generation = None;
        let full = {
            let mut open = inner.open.borrow_mut();
            if !open.contains_key(topic) {
                open.insert(topic.to_string(), HashMap::new());
            }
            let parts = open.get_mut(topic).expect("inserted above");
            let batch = parts.entry(partition).or_insert_with(|| {
                let generation = inner.generation.get() + 1;
                inner.generation.set(generation);
                new_generation = Some(generation);
                OpenBatch {
                    builder: BatchBuilder::with_capacity(now_ms, inner.config.batch_size + 1024),
                    base_ms: now_ms,
                    outcome: Rc::new(Outcome::default()),
                    bytes: 0,
                    generation,
                }
            });
            batch
                .builder
                .push(key, value, (now_ms - batch.base_ms).max(0));
            let delivery = Delivery {
                batch: Rc::clone(&batch.outcome),
                index: (batch.builder.len() - 1) as u32,
            };
            batch.bytes += size;
            inner.buffered.set(inner.buffered.get() + size);
            (
                batch.builder.encoded_len() >= inner.config.batch_size,
                delivery,
            )
        };
        let (full, delivery) = full;
        if let Some(generation) = new_generation {
            self.arm_linger((topic.to_string(), partition), generation);
        }
        if full {
            self.dispatch(&(topic.to_string(), partition));
        }
        Ok(delivery)
    }

    /// Sends every open batch and waits until every record is acknowledged (or failed).
    pub async fn flush(&self) {
        let keys: Vec<(String, i32)> = self
            .inner
            .open
            .borrow()
            .iter()
            .flat_map(|(t, parts)| parts.keys().map(move |p| (t.clone(), *p)))
            .collect();
        for tp in keys {
            self.dispatch(&tp);
        }
        while self.inner.in_flight.get() > 0 {
            let l = self.inner.idle.listen();
            if self.inner.in_flight.get() == 0 {
                break;
            }
            l.await;
        }
    }

    fn arm_linger(&self, tp: (String, i32), generation: u64) {
        let weak = Rc::downgrade(&self.inner);
        let linger = Duration::from_millis(self.inner.config.linger_ms);
        glommio::spawn_local(async move {
            glommio::timer::sleep(linger).await;
            let Some(inner) = weak.upgrade() else { return };
            let same = inner
                .open
                .borrow()
                .get(&tp.0)
                .and_then(|parts| parts.get(&tp.1))
                .is_some_and(|b| b.generation == generation);
            if same {
                Producer { inner }.dispatch(&tp);
            }
        })
        .detach();
    }

    /// Closes the partition's open batch and queues it for the partition's leader.
    fn dispatch(&self, tp: &(String, i32)) {
        let Some(batch) = self
            .inner
            .open
            .borrow_mut()
            .get_mut(&tp.0)
            .and_then(|parts| parts.remove(&tp.1))
        else {
            return;
        };
        let partitions = self.inner.cluster.partition_count(&tp.0).unwrap_or(1);
        if let Some(s) = self.inner.sticky.borrow_mut().get_mut(&tp.0) {
            s.batch_sent(tp.1, partitions);
        }
        let count = batch.builder.len() as i32;
        let builder = if self.inner.config.idempotence {
            let (pid, epoch) = self.inner.producer.get();
            let mut seqs = self.inner.sequences.borrow_mut();
            let seq = seqs.entry(tp.clone()).or_insert(0);
            let base = *seq;
            *seq = seq.wrapping_add(count) & i32::MAX;
            batch.builder.producer(pid, epoch, base)
        } else {
            batch.builder
        };
        let plain = builder.finish();
        let codec = self.inner.config.compression;
        let records = if codec == Compression::None {
            plain
        } else {
            // A codec failure sends the batch uncompressed: nothing is lost.
            strand_wire::compression::compress_batch(&plain, codec).unwrap_or(plain)
        };
        let ready = Ready {
            tp: tp.clone(),
            records: Bytes::from(records),
            outcome: batch.outcome,
            bytes: batch.bytes,
        };
        self.inner.in_flight.set(self.inner.in_flight.get() + 1);
        match self.inner.cluster.leader(&tp.0, tp.1) {
            Some(leader) => self.enqueue(leader, ready),
            None => {
                let me = self.clone();
                glommio::spawn_local(async move {
                    let leader = me
                        .inner
                        .cluster
                        .topic(&ready.tp.0)
                        .await
                        .ok()
                        .and_then(|t| t.leaders.get(ready.tp.1 as usize).copied());
                    me.enqueue(leader.unwrap_or(-1), ready);
                })
                .detach();
            }
        }
    }

    /// Queues a batch for `leader` and sends what the in-flight limit allows.
    fn enqueue(&self, leader: i32, ready: Ready) {
        self.inner
            .queues
            .borrow_mut()
            .entry(leader)
            .or_default()
            .waiting
            .push_back(ready);
        self.pump(leader);
    }

    /// Starts queued batches for `leader` while fewer than `max.in.flight` requests are
    /// outstanding. Each request carries the waiting batches of up to
    /// `MAX_PARTITIONS_PER_REQUEST` partitions (one per partition, the oldest first, as the
    /// Java client's sender drains a node), so the in-flight window covers every partition of
    /// a busy leader, not five batches. Each runs in a task of its own: send (pipelined on the
    /// connection), await the answer, retry retriable failures batch by batch, resolve the
    /// delivery futures, then pump again.
    fn pump(&self, leader: i32) {
        loop {
            let group = {
                let mut queues = self.inner.queues.borrow_mut();
                let q = queues.entry(leader).or_default();
                if q.sending >= self.inner.config.max_in_flight || q.waiting.is_empty() {
                    return;
                }
                let mut busy = self.inner.busy.borrow_mut();
                let group = take_group(&mut q.waiting, &busy);
                if group.is_empty() {
                    return;
                }
                q.sending += 1;
                if self.inner.config.idempotence {
                    busy.extend(group.iter().map(|r| r.tp.clone()));
                }
                group
            };
            let me = self.clone();
            glommio::spawn_local(async move {
                me.produce_group(leader, group).await;
                if let Some(q) = me.inner.queues.borrow_mut().get_mut(&leader) {
                    q.sending -= 1;
                }
                me.pump(leader);
                if me.inner.config.idempotence {
                    // A partition freed here may have its next batch in another leader's
                    // queue (the leader moved while this one was retried).
                    let leaders: Vec<i32> = me.inner.queues.borrow().keys().copied().collect();
                    for l in leaders.into_iter().filter(|l| *l != leader) {
                        me.pump(l);
                    }
                }
            })
            .detach();
        }
    }

    /// Sends `group` (batches of distinct partitions led by `leader`) in one request and
    /// resolves each batch; a batch whose partition failed retriably is retried on its own.
    async fn produce_group(&self, leader: i32, group: Vec<Ready>) {
        if group.len() == 1 || leader < 0 {
            for ready in group {
                let result = self.produce(&ready.tp, ready.records.clone()).await;
                self.complete(ready, result);
            }
            return;
        }
        let parts: Vec<(&(String, i32), &Bytes)> =
            group.iter().map(|r| (&r.tp, &r.records)).collect();
        let mut outcomes = match self.produce_many(leader, &parts).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                let retry = e.is_retriable();
                let text = e.to_string();
                group
                    .iter()
                    .map(|_| {
                        if retry {
                            Err(ClientError::Io(std::io::Error::other(text.clone())))
                        } else {
                            Err(ClientError::Invalid(text.clone()))
                        }
                    })
                    .collect()
            }
        };
        // Settle what is settled first, so a retry does not hold the other partitions.
        let mut retry = Vec::new();
        for (ready, outcome) in group.into_iter().zip(outcomes.drain(..)) {
            match outcome {
                Err(e) if e.is_retriable() && self.inner.config.retries > 0 => retry.push(ready),
                other => self.complete(ready, other),
            }
        }
        for ready in retry {
            let result = self.produce_from(&ready.tp, ready.records.clone(), 1).await;
            self.complete(ready, result);
        }
    }

    /// One ProduceRequest with every (partition, batch) of `group` (distinct partitions) to
    /// `leader`; the outcome of each, in order (base offset, -1 with acks=0), or the error of
    /// the whole request. A lone batch (`produce_once`) goes the same way.
    async fn produce_many(
        &self,
        leader: i32,
        group: &[(&(String, i32), &Bytes)],
    ) -> Result<Vec<Result<i64, ClientError>>, ClientError> {
        let inner = &self.inner;
        let conn = inner.cluster.broker(leader).await?;
        let mut topics: Vec<TopicProduceData> = Vec::new();
        for (tp, records) in group {
            let mut pd = PartitionProduceData::default();
            pd.index = tp.1;
            pd.records = Some((*records).clone());
            match topics.iter_mut().find(|t| t.name.0.as_str() == tp.0) {
                Some(t) => t.partition_data.push(pd),
                None => {
                    let mut td = TopicProduceData::default();
                    td.name = TopicName(StrBytes::from_string(tp.0.clone()));
                    td.partition_data = vec![pd];
                    topics.push(td);
                }
            }
        }
        let mut req = ProduceRequest::default();
        req.transactional_id = None;
        req.acks = inner.config.acks;
        req.timeout_ms = REQUEST_TIMEOUT.as_millis() as i32;
        req.topic_data = topics;
        if inner.config.acks == 0 {
            conn.send_only(RequestKind::Produce(req))?;
            return Ok(group.iter().map(|_| Ok(-1)).collect());
        }
        let ResponseKind::Produce(r) = self.await_answer(&conn, req).await? else {
            return Err(ClientError::Protocol("unexpected Produce answer".into()));
        };
        let mut answers: HashMap<(String, i32), Result<i64, ClientError>> = HashMap::new();
        for t in r.responses {
            let name = t.name.0.as_str().to_string();
            for p in t.partition_responses {
                let result = ClientError::check(p.error_code, p.error_message.as_deref())
                    .map(|()| p.base_offset);
                answers.insert((name.clone(), p.index), result);
            }
        }
        Ok(group
            .iter()
            .map(|(tp, _)| {
                answers.remove(*tp).unwrap_or_else(|| {
                    Err(ClientError::Protocol(
                        "Produce answer without the partition".into(),
                    ))
                })
            })
            .collect())
    }

    /// Sends `req` pipelined on `conn` and waits for its answer (at most `REQUEST_TIMEOUT`).
    async fn await_answer(
        &self,
        conn: &crate::conn::BrokerConn,
        req: ProduceRequest,
    ) -> Result<ResponseKind, ClientError> {
        let rx = conn
            .start(RequestKind::Produce(req), true)?
            .ok_or_else(|| ClientError::Protocol("no response expected".into()))?;
        futures_lite::future::or(
            async {
                rx.await
                    .map_err(|_| ClientError::Io(std::io::Error::other("connection closed")))?
            },
            async {
                glommio::timer::sleep(REQUEST_TIMEOUT).await;
                Err(ClientError::Timeout("produce".into()))
            },
        )
        .await
    }

    fn complete(&self, ready: Ready, result: Result<i64, ClientError>) {
        self.inner.busy.borrow_mut().remove(&ready.tp);
        let partition = ready.tp.1;
        *ready.outcome.result.borrow_mut() = Some(match result {
            Ok(base) => Ok((partition, base)),
            Err(e) => Err(format!("{}-{}: {e}", ready.tp.0, ready.tp.1)),
        });
        ready.outcome.done.notify(usize::MAX);
        let inner = &self.inner;
        inner
            .buffered
            .set(inner.buffered.get().saturating_sub(ready.bytes));
        inner.released.notify(usize::MAX);
        inner.in_flight.set(inner.in_flight.get() - 1);
        if inner.in_flight.get() == 0 {
            inner.idle.notify(usize::MAX);
        }
    }

    /// Sends one batch to the partition's leader, retrying retriable failures. Returns the base
    /// offset (-1 with acks=0).
    async fn produce(&self, tp: &(String, i32), records: Bytes) -> Result<i64, ClientError> {
        self.produce_from(tp, records, 0).await
    }

    /// [`Producer::produce`] after `attempt` failed tries (a retry first waits and refreshes
    /// the partition's metadata).
    async fn produce_from(
        &self,
        tp: &(String, i32),
        records: Bytes,
        mut attempt: u32,
    ) -> Result<i64, ClientError> {
        let inner = &self.inner;
        loop {
            if attempt > 0 {
                glommio::timer::sleep(Duration::from_millis(100)).await;
                let _ = inner.cluster.refresh(Some(&[tp.0.as_str()])).await;
            }
            let result = self.produce_once(tp, records.clone()).await;
            match result {
                Err(e) if e.is_retriable() && attempt < inner.config.retries => attempt += 1,
                other => return other,
            }
        }
    }

    async fn produce_once(&self, tp: &(String, i32), records: Bytes) -> Result<i64, ClientError> {
        let leader = self.inner.cluster.leader_of(&tp.0, tp.1).await?;
        let mut outcomes = self.produce_many(leader, &[(tp, &records)]).await?;
        outcomes.pop().unwrap_or_else(|| {
            Err(ClientError::Protocol(
                "Produce answer without the partition".into(),
            ))
        })
    }
}

/// A closed batch on its way to a broker.
struct Ready {
    tp: (String, i32),
    records: Bytes,
    outcome: Rc<Outcome>,
    bytes: usize,
}

/// The most partitions one ProduceRequest carries.
const MAX_PARTITIONS_PER_REQUEST: usize = 64;
/// How many queued batches one request's draining looks at (a long queue of one
/// partition's batches is not scanned to its end for every request).
const MAX_SCANNED: usize = 1024;
/// A request stops taking batches at this many bytes of records (Kafka's `max.request.size`
/// default); a larger single batch still goes, alone.
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Takes the next request's batches from `waiting`: the oldest batch of each partition, in
/// queue order, up to the limits above. Later batches of a partition stay queued behind it,
/// so each partition's batches are sent in order.
fn take_group(
    waiting: &mut std::collections::VecDeque<Ready>,
    busy: &std::collections::HashSet<(String, i32)>,
) -> Vec<Ready> {
    let mut group: Vec<Ready> = Vec::new();
    let mut bytes = 0usize;
    let mut left = std::collections::VecDeque::new();
    let mut seen: std::collections::HashSet<(String, i32)> = std::collections::HashSet::new();
    let mut scanned = 0usize;
    while let Some(ready) = waiting.pop_front() {
        scanned += 1;
        if group.len() >= MAX_PARTITIONS_PER_REQUEST || scanned > MAX_SCANNED {
            left.push_back(ready);
            break;
        }
        let too_big = !group.is_empty() && bytes + ready.records.len() > MAX_REQUEST_BYTES;
        // A partition seen once stays seen: its later batches wait their turn. A busy one
        // (a batch in flight, idempotent producers) waits for that batch.
        let first = !busy.contains(&ready.tp) && seen.insert(ready.tp.clone());
        if !first || too_big {
            left.push_back(ready);
            continue;
        }
        bytes += ready.records.len();
        group.push(ready);
    }
    left.append(waiting);
    *waiting = left;
    group
}

/// Per broker: batches waiting for an in-flight slot, and how many are being sent.
#[derive(Default)]
struct BrokerQueue {
    waiting: std::collections::VecDeque<Ready>,
    sending: usize,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn seed() -> u64 {
    let t = Instant::now().elapsed().as_nanos() as u64;
    now_ms() as u64 ^ t.rotate_left(17) ^ u64::from(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(topic: &str, partition: i32, len: usize) -> Ready {
        Ready {
            tp: (topic.to_string(), partition),
            records: Bytes::from(vec![0u8; len]),
            outcome: Rc::new(Outcome::default()),
            bytes: len,
        }
    }

    fn none() -> std::collections::HashSet<(String, i32)> {
        std::collections::HashSet::new()
    }

    #[test]
    fn a_busy_partition_waits_for_its_batch_in_flight() {
        let mut q: std::collections::VecDeque<Ready> =
            [ready("a", 0, 10), ready("a", 1, 11), ready("a", 0, 12)]
                .into_iter()
                .collect();
        let busy: std::collections::HashSet<(String, i32)> =
            [("a".to_string(), 0)].into_iter().collect();
        let g = take_group(&mut q, &busy);
        assert_eq!(tps(&g), vec![("a".into(), 1, 11)]);
        assert_eq!(
            tps(&q.drain(..).collect::<Vec<_>>()),
            vec![("a".into(), 0, 10), ("a".into(), 0, 12)]
        );
        let mut only_busy: std::collections::VecDeque<Ready> =
            [ready("a", 0, 10)].into_iter().collect();
        assert!(take_group(&mut only_busy, &busy).is_empty());
        assert_eq!(only_busy.len(), 1);
    }

    fn tps(v: &[Ready]) -> Vec<(String, i32, usize)> {
        v.iter()
            .map(|r| (r.tp.0.clone(), r.tp.1, r.records.len()))
            .collect()
    }

    #[test]
    fn a_request_takes_the_oldest_batch_of_each_partition() {
        let mut q: std::collections::VecDeque<Ready> = [
            ready("a", 0, 10),
            ready("a", 1, 11),
            ready("a", 0, 12),
            ready("b", 0, 13),
            ready("a", 1, 14),
        ]
        .into_iter()
        .collect();
        let g = take_group(&mut q, &none());
        assert_eq!(
            tps(&g),
            vec![
                ("a".into(), 0, 10),
                ("a".into(), 1, 11),
                ("b".into(), 0, 13)
            ]
        );
        let left: Vec<Ready> = q.drain(..).collect();
        assert_eq!(tps(&left), vec![("a".into(), 0, 12), ("a".into(), 1, 14)]);
    }

    #[test]
    fn a_request_stays_under_its_byte_and_partition_limits() {
        let big = MAX_REQUEST_BYTES / 2 + 1;
        let mut q: std::collections::VecDeque<Ready> = [
            ready("a", 0, big),
            ready("a", 1, big),
            ready("a", 2, 5),
            ready("a", 1, 6),
        ]
        .into_iter()
        .collect();
        let g = take_group(&mut q, &none());
        // Partition 1's first batch does not fit; its second must not overtake it.
        assert_eq!(tps(&g), vec![("a".into(), 0, big), ("a".into(), 2, 5)]);
        assert_eq!(
            tps(&q.drain(..).collect::<Vec<_>>()),
            vec![("a".into(), 1, big), ("a".into(), 1, 6)]
        );
        let mut many: std::collections::VecDeque<Ready> =
            (0..100).map(|p| ready("a", p, 1)).collect();
        assert_eq!(
            take_group(&mut many, &none()).len(),
            MAX_PARTITIONS_PER_REQUEST
        );
        assert_eq!(many.len(), 100 - MAX_PARTITIONS_PER_REQUEST);
        assert_eq!(many.front().map(|r| r.tp.1), Some(64));
        // A lone batch above the byte limit still goes.
        let mut huge: std::collections::VecDeque<Ready> =
            [ready("a", 0, MAX_REQUEST_BYTES * 2)].into_iter().collect();
        assert_eq!(take_group(&mut huge, &none()).len(), 1);
    }
}
