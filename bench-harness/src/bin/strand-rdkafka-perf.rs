//! A light producer load generator on librdkafka: the same workload and the same final line
//! as Kafka's `ProducerPerformance`, without a JVM, so a small machine measures the broker
//! rather than the load generator.
//!
//! ```text
//! strand-rdkafka-perf --bootstrap 127.0.0.1:9092 --topic t --records 1000000 --record-size 1024 --acks 1
//! 1000000 records sent, 123456.7 records/sec (120.56 MB/sec), 12.34 ms avg latency, 56.00 ms max latency, 11 ms 50th, 30 ms 95th, 45 ms 99th, 55 ms 99.9th.
//! ```
//! Latency is send -> delivery report, per record, in an HdrHistogram (µs resolution).

use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

#[derive(Parser)]
#[command(about = "Producer load generator on librdkafka (ProducerPerformance's output format)")]
struct Args {
    #[command(flatten)]
    common: strand_bench_harness::ProducerArgs,
    /// Records per second (0 = as fast as possible). At a fixed rate, latency counts from the
    /// intended send time, so a stalled broker is not hidden (coordinated omission).
    #[arg(long, default_value_t = 0)]
    throughput: u64,
    /// Key the records `key-{i % N}` (0 = no key).
    #[arg(long, default_value_t = 0)]
    keys: u64,
}

struct Ctx {
    hist: std::sync::Mutex<Histogram<u64>>,
    errors: std::sync::atomic::AtomicU64,
}

impl ClientContext for Ctx {}

impl ProducerContext for Ctx {
    type DeliveryOpaque = Box<Instant>;
    fn delivery(&self, result: &DeliveryResult<'_>, sent: Box<Instant>) {
        if result.is_err() {
            self.errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let us = sent.elapsed().as_micros().max(1) as u64;
        if let Ok(mut h) = self.hist.lock() {
            let _ = h.record(us);
        }
    }
}

fn main() {
    let args = Args::parse();
    let ctx = Ctx {
        hist: std::sync::Mutex::new(strand_bench_harness::latency_histogram()),
        errors: std::sync::atomic::AtomicU64::new(0),
    };
    let producer: ThreadedProducer<Ctx> = match ClientConfig::new()
        .set("bootstrap.servers", &args.common.bootstrap)
        .set("acks", &args.common.acks)
        .set("linger.ms", args.common.linger_ms.to_string())
        .set("batch.size", args.common.batch_size.to_string())
        .set("queue.buffering.max.kbytes", "1048576")
        .create_with_context(ctx)
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("strand-rdkafka-perf: cannot create producer: {e}");
            std::process::exit(2);
        }
    };
    let payload = vec![b'x'; args.common.record_size];
    let start = Instant::now();
    for i in 0..args.common.records {
        let sent = if args.throughput > 0 {
            let intended = start + Duration::from_secs_f64(i as f64 / args.throughput as f64);
            if let Some(wait) = intended.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            intended
        } else {
            Instant::now()
        };
        let key = (args.keys > 0).then(|| format!("key-{}", i % args.keys));
        let mut record =
            BaseRecord::with_opaque_to(&args.common.topic, Box::new(sent)).payload(&payload[..]);
        if let Some(k) = &key {
            record = record.key(k.as_bytes());
        }
        loop {
            match producer.send::<[u8], [u8]>(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err((e, _)) => {
                    eprintln!("strand-rdkafka-perf: send failed: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    if let Err(e) = producer.flush(Duration::from_secs(120)) {
        eprintln!("strand-rdkafka-perf: flush failed: {e}");
        std::process::exit(1);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let ctx = producer.context();
    let errors = ctx.errors.load(std::sync::atomic::Ordering::Relaxed);
    let h = ctx
        .hist
        .lock()
        .map(|h| h.clone())
        .unwrap_or_else(|e| e.into_inner().clone());
    println!(
        "{}",
        strand_bench_harness::summary_line(
            args.common.records,
            args.common.record_size,
            elapsed,
            &h
        )
    );

    let us = |q: f64| h.value_at_quantile(q);
    println!(
        "latency us: p50 {} p95 {} p99 {} p99.9 {} max {}",
        us(0.50),
        us(0.95),
        us(0.99),
        us(0.999),
        h.max()
    );
    if errors > 0 {
        eprintln!("strand-rdkafka-perf: {errors} records failed");
        std::process::exit(1);
    }
}
