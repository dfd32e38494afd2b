//! Producer load generator on Strand's native client (`strand-client`), with the same flags
//! and the same output line as `strand-rdkafka-perf` (Kafka's ProducerPerformance format), so
//! the two can be compared in one run against the same broker (`scripts/bench-client`).

use std::time::{Duration, Instant};

use clap::Parser;
use futures_lite::StreamExt;
use strand_client::{Cluster, Delivery, Producer, ProducerConfig};

#[derive(Parser)]
#[command(about = "Producer load generator on the native client (ProducerPerformance's output)")]
struct Args {
    #[command(flatten)]
    common: strand_bench_harness::ProducerArgs,
}

fn main() {
    let args = Args::parse();
    let acks: i16 = match args.common.acks.as_str() {
        "all" | "-1" => -1,
        "0" => 0,
        _ => 1,
    };
    let result = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .spawn(move || async move { run(args, acks).await })
        .map_err(|e| e.to_string())
        .and_then(|h| h.join().map_err(|e| e.to_string()))
        .and_then(|r| r);
    if let Err(e) = result {
        eprintln!("strand-native-perf: {e}");
        std::process::exit(1);
    }
}

async fn run(args: Args, acks: i16) -> Result<(), String> {
    let cluster = Cluster::connect(&args.common.bootstrap, "strand-native-perf")
        .await
        .map_err(|e| e.to_string())?;
    let config = ProducerConfig {
        acks,
        linger_ms: args.common.linger_ms,
        batch_size: args.common.batch_size,
        buffer_memory: 256 << 20,
        ..ProducerConfig::default()
    };
    let producer = Producer::new(cluster, config)
        .await
        .map_err(|e| e.to_string())?;
    let payload = vec![b'x'; args.common.record_size];
    // Deliveries are awaited in order by a second task, as they resolve: send -> ack latency.
    let (tx, mut rx) = futures_channel::mpsc::unbounded::<(Instant, Delivery)>();
    let collector = glommio::spawn_local(async move {
        let mut hist = strand_bench_harness::latency_histogram();
        let mut errors = 0u64;
        while let Some((sent, d)) = rx.next().await {
            match d.wait().await {
                Ok(_) => {
                    let _ = hist.record(sent.elapsed().as_micros().max(1) as u64);
                }
                _ => errors += 1,
            }
        }
        (hist, errors)
    });
    let start = Instant::now();
    for _ in 0..args.common.records {
        let sent = Instant::now();
        let d = producer
            .send(&args.common.topic, None, &payload)
            .await
            .map_err(|e| e.to_string())?;
        let _ = tx.unbounded_send((sent, d));
    }
    producer.flush().await;
    drop(tx);
    let (h, errors) = collector.await;
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{}",
        strand_bench_harness::summary_line(
            args.common.records,
            args.common.record_size,
            elapsed,
            &h
        )
    );

    if errors > 0 {
        return Err(format!("{errors} records failed"));
    }
    glommio::timer::sleep(Duration::from_millis(1)).await;
    Ok(())
}
