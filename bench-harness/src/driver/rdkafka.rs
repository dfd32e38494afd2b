//! The librdkafka driver: one sender thread per producer (librdkafka adds its own I/O
//! threads) and one thread per consumer, each with its own [`Recorder`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::{ConsumerSpec, Control, Plan, ProducerSpec, Workers, FETCH_WAIT_MS, POLL_INTERVAL};
use crate::keys::KeyGen;
use crate::measure::{epoch_us, epoch_us_of, write_timestamp_us, Recorder};
use crate::rate::Schedule;

const SLEEP_SLICE: Duration = Duration::from_millis(10);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

pub fn start(plan: &Plan, ctl: &Arc<Control>) -> Result<Workers, String> {
    let mut workers = Workers {
        recorders: Vec::new(),
        joins: Vec::new(),
        clients: 0,
    };
    for spec in plan.consumers() {
        let (plan, ctl, rec) = (plan.clone(), Arc::clone(ctl), ctl.recorder());
        workers.recorders.push(rec.clone());
        spawn(&mut workers, "bench-consumer", move || {
            consume(&plan, &ctl, &rec, &spec).inspect_err(|e| ctl.fail(e.clone()))
        })?;
    }
    for spec in plan.producers() {
        let (plan, ctl, rec) = (plan.clone(), Arc::clone(ctl), ctl.recorder());
        workers.recorders.push(rec.clone());
        spawn(&mut workers, "bench-producer", move || {
            produce(&plan, &ctl, &rec, &spec).inspect_err(|e| ctl.fail(e.clone()))
        })?;
    }
    Ok(workers)
}

fn spawn(
    workers: &mut Workers,
    name: &str,
    f: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Result<(), String> {
    let h = std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| format!("cannot start a {name} thread: {e}"))?;
    workers.clients += 1;
    workers.joins.push(Box::new(move || {
        h.join()
            .map_err(|_| "a client thread panicked".to_string())
            .and_then(|r| r)
    }));
    Ok(())
}

struct Ctx {
    rec: Recorder,
    outstanding: Arc<AtomicUsize>,
}

impl ClientContext for Ctx {}

impl ProducerContext for Ctx {
    /// (intended send time, actual send time)
    type DeliveryOpaque = Box<(Instant, Instant)>;
    fn delivery(&self, result: &DeliveryResult<'_>, sent: Self::DeliveryOpaque) {
        let acked = Instant::now();
        match result {
            Ok(_) => self.rec.ack(sent.0, sent.1, acked),
            Err((e, _)) => self.rec.error(e.to_string()),
        }
        self.outstanding.fetch_sub(1, Ordering::SeqCst);
    }
}

fn wait_for_go(ctl: &Control) -> bool {
    while !Control::flag(&ctl.go) {
        if Control::flag(&ctl.stop) {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    true
}

fn produce(plan: &Plan, ctl: &Control, rec: &Recorder, spec: &ProducerSpec) -> Result<(), String> {
    let w = &plan.workload;
    let outstanding = Arc::new(AtomicUsize::new(0));
    let mut config = ClientConfig::new();
    for (k, v) in super::librdkafka_props(&plan.client_props) {
        config.set(k, v);
    }
    config
        .set("bootstrap.servers", &plan.bootstrap)
        .set("client.id", "strand-bench")
        .set("acks", &w.acks)
        .set("linger.ms", w.linger_ms.to_string())
        .set("batch.size", w.batch_size_bytes.to_string())
        .set("compression.type", &w.compression)
        .set("enable.idempotence", w.idempotence.to_string())
        .set("partitioner", "murmur2_random")
        .set("max.in.flight", w.max_in_flight_requests.to_string())
        .set(
            "queue.buffering.max.kbytes",
            (w.buffer_bytes / 1024).max(1).to_string(),
        );
    if w.transactions {
        config.set(
            "transactional.id",
            format!("strand-bench-{}-{}-{}", plan.run_id, spec.topic, spec.index),
        );
    }
    let producer: ThreadedProducer<Ctx> = config
        .create_with_context(Ctx {
            rec: rec.clone(),
            outstanding: Arc::clone(&outstanding),
        })
        .map_err(|e| format!("rdkafka producer: {e}"))?;
    producer
        .client()
        .fetch_metadata(Some(&spec.topic), CLIENT_TIMEOUT)
        .map_err(|e| format!("rdkafka producer: metadata of {}: {e}", spec.topic))?;
    if w.transactions {
        producer
            .init_transactions(CLIENT_TIMEOUT)
            .and_then(|()| producer.begin_transaction())
            .map_err(|e| format!("rdkafka producer: transactions: {e}"))?;
    }
    ctl.ready.fetch_add(1, Ordering::SeqCst);
    if !wait_for_go(ctl) {
        return Ok(());
    }
    let window = w.max_in_flight_records as usize;
    let txn_interval = Duration::from_millis(w.transaction_interval_ms.max(1));
    let mut txn_start = Instant::now();
    let mut schedule = Schedule::new(Instant::now(), w.rate_per_producer());
    let mut keys = KeyGen::new(w.key_distribution, w.keys, w.zipf_exponent, spec.seed);
    let mut value = vec![b'x'; w.message_size_bytes];
    let mut key_buf = Vec::new();
    while !Control::flag(&ctl.stop) {
        if w.transactions && txn_start.elapsed() >= txn_interval {
            producer
                .commit_transaction(CLIENT_TIMEOUT)
                .and_then(|()| producer.begin_transaction())
                .map_err(|e| format!("rdkafka producer: commit: {e}"))?;
            txn_start = Instant::now();
        }
        let wait = schedule.wait(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait.min(SLEEP_SLICE));
            continue;
        }
        if window > 0 && outstanding.load(Ordering::SeqCst) >= window {
            std::thread::sleep(Duration::from_micros(20));
            continue;
        }
        let intended = schedule.take(Instant::now());
        write_timestamp_us(&mut value, epoch_us_of(intended));
        let key = keys.next_key(&mut key_buf);
        let actual = Instant::now();
        let mut record = BaseRecord::with_opaque_to(&spec.topic, Box::new((intended, actual)))
            .payload(&value[..]);
        if let Some(k) = key {
            record = record.key(k);
        }
        outstanding.fetch_add(1, Ordering::SeqCst);
        loop {
            match producer.send::<[u8], [u8]>(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err((e, _)) => {
                    outstanding.fetch_sub(1, Ordering::SeqCst);
                    rec.error(e.to_string());
                    break;
                }
            }
        }
        rec.sent(value.len(), intended);
    }
    if w.transactions {
        producer
            .commit_transaction(CLIENT_TIMEOUT)
            .map_err(|e| format!("rdkafka producer: commit: {e}"))?;
    }
    producer
        .flush(Duration::from_secs(120))
        .map_err(|e| format!("rdkafka producer: flush: {e}"))?;
    ctl.producers_done.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

fn consume(plan: &Plan, ctl: &Control, rec: &Recorder, spec: &ConsumerSpec) -> Result<(), String> {
    let mut config = ClientConfig::new();
    for (k, v) in super::librdkafka_props(&plan.client_props) {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config
        .set("bootstrap.servers", &plan.bootstrap)
        .set("client.id", "strand-bench")
        .set("group.id", &spec.group)
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", FETCH_WAIT_MS.to_string())
        .create()
        .map_err(|e| format!("rdkafka consumer: {e}"))?;
    // Explicit end offsets (not Offset::End, which librdkafka resolves lazily): the consumer
    // is positioned before the producers start, so it misses nothing.
    let mut tpl = TopicPartitionList::new();
    for p in &spec.partitions {
        let high = end_offset(&consumer, &spec.topic, *p)?;
        tpl.add_partition_offset(&spec.topic, *p, Offset::Offset(high))
            .map_err(|e| format!("rdkafka consumer: {e}"))?;
    }
    consumer
        .assign(&tpl)
        .map_err(|e| format!("rdkafka consumer: assign: {e}"))?;
    ctl.ready.fetch_add(1, Ordering::SeqCst);
    while !Control::flag(&ctl.stop_consumers) {
        match consumer.poll(Duration::from_millis(FETCH_WAIT_MS as u64)) {
            None => {}
            Some(Ok(m)) => {
                if let Some(v) = m.payload() {
                    rec.consumed(std::iter::once(v), epoch_us());
                }
            }
            Some(Err(e)) => rec.error(format!("rdkafka consumer: {e}")),
        }
    }
    Ok(())
}

/// The end offset of `topic`-`partition`, retried as clients do while a new topic's leaders
/// settle: Kafka lists a leader in Metadata a moment before that broker serves ListOffsets
/// for it (NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE / UNKNOWN_TOPIC_OR_PARTITION).
fn end_offset(consumer: &BaseConsumer, topic: &str, partition: i32) -> Result<i64, String> {
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    loop {
        match consumer.fetch_watermarks(topic, partition, CLIENT_TIMEOUT) {
            Ok((_, high)) => return Ok(high),
            Err(e) if retriable(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(format!("rdkafka consumer: end of {topic}-{partition}: {e}")),
        }
    }
}

fn retriable(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::UnknownTopicOrPartition
                | RDKafkaErrorCode::UnknownPartition
                | RDKafkaErrorCode::UnknownTopic
                | RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::BrokerTransportFailure
        )
    )
}
