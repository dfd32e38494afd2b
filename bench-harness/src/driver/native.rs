//! The native client driver: one glommio executor per core (pinned to it), each running a
//! share of the producers and consumers as tasks with its own [`Recorder`].

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use event_listener::Event;
use strand_client::{Cluster, Consumer, ConsumerConfig, Producer, ProducerConfig, StartAt};
use strand_wire::batch::Compression;

use super::{ConsumerSpec, Control, Plan, ProducerSpec, Workers, FETCH_WAIT_MS, POLL_INTERVAL};
use crate::keys::KeyGen;
use crate::measure::{epoch_us, epoch_us_of, write_timestamp_us, Recorder};
use crate::rate::Schedule;

/// The longest a sender sleeps before looking at the control flags again.
const SLEEP_SLICE: Duration = Duration::from_millis(10);
/// Sends between two voluntary yields at max rate (the connection tasks must run too).
const SENDS_PER_YIELD: u32 = 64;
/// How long a new topic may take to appear in the metadata.
const TOPIC_TIMEOUT: Duration = Duration::from_secs(15);

enum Job {
    Produce(ProducerSpec),
    Consume(ConsumerSpec),
}

pub fn start(plan: &Plan, ctl: &Arc<Control>) -> Result<Workers, String> {
    if plan.workload.transactions {
        return Err(
            "transactions: the native client has no transactional producer yet; use --driver rdkafka"
                .into(),
        );
    }
    let jobs: Vec<Job> = plan
        .consumers()
        .into_iter()
        .map(Job::Consume)
        .chain(plan.producers().into_iter().map(Job::Produce))
        .collect();
    let clients = jobs.len();
    let allowed = strand_tuning::cpus::allowed();
    let executors = clients.min(allowed.len()).max(1);
    let mut per_executor: Vec<Vec<Job>> = (0..executors).map(|_| Vec::new()).collect();
    for (i, job) in jobs.into_iter().enumerate() {
        per_executor[i % executors].push(job);
    }
    let mut workers = Workers {
        recorders: Vec::new(),
        joins: Vec::new(),
        clients,
    };
    for (cpu, jobs) in per_executor.into_iter().enumerate() {
        let rec = ctl.recorder();
        workers.recorders.push(rec.clone());
        let (plan, ctl2) = (plan.clone(), Arc::clone(ctl));
        let placement = if plan.workload.pin_client_threads {
            // The cores this process may use (`strand bench` confines it away from the
            // broker's by default).
            glommio::Placement::Fixed(allowed[cpu % allowed.len()])
        } else {
            glommio::Placement::Unbound
        };
        let handle = glommio::LocalExecutorBuilder::new(placement)
            .name(&format!("bench-{cpu}"))
            .spawn(move || async move { executor_main(plan, ctl2, rec, jobs).await })
            .map_err(|e| format!("cannot start a client executor on cpu {cpu}: {e}"))?;
        workers.joins.push(Box::new(move || {
            handle
                .join()
                .map_err(|e| format!("client executor: {e}"))
                .and_then(|r| r)
        }));
    }
    Ok(workers)
}

async fn executor_main(
    plan: Plan,
    ctl: Arc<Control>,
    rec: Recorder,
    jobs: Vec<Job>,
) -> Result<(), String> {
    let plan = Rc::new(plan);
    let tasks: Vec<_> = jobs
        .into_iter()
        .map(|job| {
            let (plan, ctl, rec) = (Rc::clone(&plan), Arc::clone(&ctl), rec.clone());
            glommio::spawn_local(async move {
                let r = match job {
                    Job::Produce(spec) => produce(&plan, &ctl, &rec, spec).await,
                    Job::Consume(spec) => consume(&plan, &ctl, &rec, spec).await,
                };
                if let Err(e) = &r {
                    ctl.fail(e.clone());
                }
                r
            })
        })
        .collect();
    let mut first = Ok(());
    for t in tasks {
        if let Err(e) = t.await {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

fn compression(name: &str) -> Compression {
    match name {
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => Compression::None,
    }
}

/// A topic just created may take a moment to reach every shard's (or broker's) metadata.
async fn wait_for_topic(cluster: &Cluster, topic: &str) -> Result<(), String> {
    let deadline = Instant::now() + TOPIC_TIMEOUT;
    loop {
        let why = match cluster.refresh(Some(&[topic])).await {
            Ok(md) => match md.topics.get(topic) {
                Some(t) if !t.leaders.is_empty() && t.leaders.iter().all(|l| *l >= 0) => {
                    return Ok(())
                }
                Some(_) => "partitions without a leader".to_string(),
                None => "not in the metadata".to_string(),
            },
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            return Err(format!("topic {topic}: {why}"));
        }
        glommio::timer::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for the run loop's go (false: the run was stopped before it started).
async fn wait_for_go(ctl: &Control) -> bool {
    while !Control::flag(&ctl.go) {
        if Control::flag(&ctl.stop) {
            return false;
        }
        glommio::timer::sleep(POLL_INTERVAL).await;
    }
    true
}

async fn produce(
    plan: &Plan,
    ctl: &Control,
    rec: &Recorder,
    spec: ProducerSpec,
) -> Result<(), String> {
    let w = &plan.workload;
    let cluster = Cluster::connect_secure(
        &plan.bootstrap,
        "strand-bench",
        super::security(&plan.client_props)?,
    )
    .await
    .map_err(|e| format!("producer: cannot connect to {}: {e}", plan.bootstrap))?;
    wait_for_topic(&cluster, &spec.topic).await?;
    let config = ProducerConfig {
        acks: w.acks_i16()?,
        linger_ms: w.linger_ms,
        batch_size: w.batch_size_bytes,
        idempotence: w.idempotence,
        buffer_memory: w.buffer_bytes,
        compression: compression(&w.compression),
        max_in_flight: w.max_in_flight_requests as usize,
        ..ProducerConfig::default()
    };
    let producer = Producer::new(cluster, config)
        .await
        .map_err(|e| format!("producer: {e}"))?;
    ctl.ready.fetch_add(1, Ordering::SeqCst);
    if !wait_for_go(ctl).await {
        return Ok(());
    }
    let window = w.max_in_flight_records as usize;
    let outstanding = Rc::new(Cell::new(0usize));
    let released = Rc::new(Event::new());
    let mut schedule = Schedule::new(Instant::now(), w.rate_per_producer());
    let mut keys = KeyGen::new(w.key_distribution, w.keys, w.zipf_exponent, spec.seed);
    let mut value = vec![b'x'; w.message_size_bytes];
    let mut key_buf = Vec::new();
    let mut since_yield = 0u32;
    while !Control::flag(&ctl.stop) {
        let wait = schedule.wait(Instant::now());
        if !wait.is_zero() {
            glommio::timer::sleep(wait.min(SLEEP_SLICE)).await;
            continue;
        }
        if window > 0 && outstanding.get() >= window {
            let l = released.listen();
            if outstanding.get() >= window {
                l.await;
            }
            continue;
        }
        let intended = schedule.take(Instant::now());
        write_timestamp_us(&mut value, epoch_us_of(intended));
        let key = keys.next_key(&mut key_buf);
        let actual = Instant::now();
        match producer.send(&spec.topic, key, &value).await {
            Ok(delivery) => {
                outstanding.set(outstanding.get() + 1);
                let (rec, outstanding, released) =
                    (rec.clone(), Rc::clone(&outstanding), Rc::clone(&released));
                glommio::spawn_local(async move {
                    let r = delivery.wait().await;
                    let acked = Instant::now();
                    match r {
                        Ok(_) => rec.ack(intended, actual, acked),
                        Err(e) => rec.error(e.to_string()),
                    }
                    outstanding.set(outstanding.get() - 1);
                    released.notify(usize::MAX);
                })
                .detach();
            }
            Err(e) => rec.error(e.to_string()),
        }
        rec.sent(value.len(), intended);
        since_yield += 1;
        if since_yield >= SENDS_PER_YIELD {
            since_yield = 0;
            futures_lite::future::yield_now().await;
        }
    }
    producer.flush().await;
    while outstanding.get() > 0 {
        let l = released.listen();
        if outstanding.get() > 0 {
            l.await;
        }
    }
    ctl.producers_done.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

async fn consume(
    plan: &Plan,
    ctl: &Control,
    rec: &Recorder,
    spec: ConsumerSpec,
) -> Result<(), String> {
    let cluster = Cluster::connect_secure(
        &plan.bootstrap,
        "strand-bench",
        super::security(&plan.client_props)?,
    )
    .await
    .map_err(|e| format!("consumer: cannot connect to {}: {e}", plan.bootstrap))?;
    let config = ConsumerConfig {
        group: Some(spec.group.clone()),
        max_wait_ms: FETCH_WAIT_MS,
        ..ConsumerConfig::default()
    };
    wait_for_topic(&cluster, &spec.topic).await?;
    let mut consumer = Consumer::new(cluster, config);
    if !spec.partitions.is_empty() {
        // A new topic's leaders may still be settling (Kafka elects them a moment later).
        let deadline = Instant::now() + TOPIC_TIMEOUT;
        while let Err(e) = consumer
            .assign(&spec.topic, Some(&spec.partitions), StartAt::Latest)
            .await
        {
            if Instant::now() > deadline {
                return Err(format!("consumer: assign {}: {e}", spec.topic));
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
    }
    ctl.ready.fetch_add(1, Ordering::SeqCst);
    while !Control::flag(&ctl.stop_consumers) {
        if spec.partitions.is_empty() {
            glommio::timer::sleep(SLEEP_SLICE).await;
            continue;
        }
        match consumer.poll().await {
            Ok(records) => {
                let values = records.iter().filter_map(|r| r.value.as_deref());
                rec.consumed(values, epoch_us());
            }
            Err(e) => {
                rec.error(format!("consumer: {e}"));
                glommio::timer::sleep(SLEEP_SLICE).await;
            }
        }
    }
    Ok(())
}
