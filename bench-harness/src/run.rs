//! One run of a workload against one broker: create the topics, start the driver, drain the
//! recorders once a second (interval lines, progress bar), stop, wait for the last acks and
//! the consumers, delete the topics.

use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use strand_client::Cluster;

use crate::driver::{self, Control, Plan};
use crate::measure::{Counts, Interval, Summary};
use crate::settle;
use crate::workload::Workload;

/// How long clients get to connect (and consumers to position themselves).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// After the producers stop, how long consumers get to read what was sent.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Reporting interval.
const TICK: Duration = Duration::from_secs(1);

/// Where a run goes.
#[derive(Clone, Debug)]
pub struct Target {
    /// The run's name in tables and plots: `acks=all`, `strand`, `kafka`.
    pub label: String,
    pub bootstrap: String,
    /// What the broker is, for reports.
    pub broker: String,
    /// Topic configs set at creation (Strand's `write.caching`).
    pub topic_configs: Vec<(String, String)>,
    /// Strand's admin API (`HOST:PORT`), for the broker's stage timings; `None`: not known
    /// (Kafka, or a broker given without `--broker-admin`).
    pub admin: Option<String>,
    /// Client settings by Kafka's names (`security.protocol`, `sasl.*`, `ssl.*`), for every
    /// connection the bench makes to this target.
    pub client_props: Vec<(String, String)>,
    /// The broker processes the bench started (every node), whose CPU time it reports;
    /// empty for a broker given with `--bootstrap`.
    pub broker_pids: Vec<u32>,
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub label: String,
    pub broker: String,
    pub bootstrap: String,
    pub workload: Workload,
    /// Seconds since the Unix epoch when the first interval started.
    pub start_epoch_s: f64,
    pub intervals: Vec<Interval>,
    pub summary: Summary,
    /// The broker's stage timings over the measured window (empty without an admin API).
    pub broker_stages: Vec<crate::stages::StageRow>,
    /// How long the warm-up lasted.
    pub warmup_taken_s: f64,
    /// With a warm-up that waits for the latency to settle (`warmup_max_s`): whether it did
    /// before the maximum. `None`: a fixed warm-up.
    pub warmup_settled: Option<bool>,
    /// The share of CPU time the hypervisor gave to others during the measured window (the
    /// `steal` column of /proc/stat, over all CPUs), in percent; `None` where not readable.
    /// A VM's tail latencies move with it.
    pub steal_pct: Option<f64>,
    /// The started brokers' CPU time over the measured window (every node, every thread),
    /// in seconds; `None` for a broker the bench did not start.
    pub broker_cpu_s: Option<f64>,
}

impl RunResult {
    /// Milliseconds of broker CPU per MiB acknowledged in the measured window.
    pub fn broker_cpu_ms_per_mb(&self) -> Option<f64> {
        let acked_bytes = self.summary.counts.acked * self.workload.message_size_bytes as u64;
        crate::broker_cpu::ms_per_mb(self.broker_cpu_s?, acked_bytes)
    }
}

/// (steal, total) jiffies of all CPUs from /proc/stat.
fn cpu_ticks() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest columns are inside user/nice).
    let total: u64 = v.iter().take(8).sum();
    Some((*v.get(7)?, total))
}

fn steal_pct(from: Option<(u64, u64)>, to: Option<(u64, u64)>) -> Option<f64> {
    let ((s0, t0), (s1, t1)) = (from?, to?);
    (t1 > t0).then(|| 100.0 * s1.saturating_sub(s0) as f64 / (t1 - t0) as f64)
}

/// Runs `f` on a one-off glommio executor on this thread's behalf.
pub fn block_on<T, F, Fut>(f: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, String>> + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("bench-admin")
        .spawn(f)
        .map_err(|e| format!("cannot start an executor: {e}"))?
        .join()
        .map_err(|e| format!("executor: {e}"))?
}

/// Kafka's TOPIC_ALREADY_EXISTS: a retried CreateTopics whose first try got through.
const TOPIC_ALREADY_EXISTS: i16 = 36;
/// Kafka's INVALID_REPLICATION_FACTOR and NOT_CONTROLLER: what a cluster whose nodes are
/// still registering answers (retried; other non-retriable errors are not).
const INVALID_REPLICATION_FACTOR: i16 = 38;
const NOT_CONTROLLER: i16 = 41;

fn create_topics(
    props: &[(String, String)],
    bootstrap: &str,
    topics: &[String],
    partitions: i32,
    replication_factor: i32,
    configs: &[(String, String)],
) -> Result<(), String> {
    let (bootstrap, topics, configs) = (bootstrap.to_string(), topics.to_vec(), configs.to_vec());
    let security = crate::driver::security(props)?;
    let replication_factor = i16::try_from(replication_factor)
        .map_err(|_| format!("replication factor {replication_factor} is out of range"))?;
    block_on(move || async move {
        let cluster = Cluster::connect_secure(&bootstrap, "strand-bench-admin", security)
            .await
            .map_err(|e| format!("cannot connect to {bootstrap}: {e}"))?;
        // A cluster just started may not have every node registered yet (Kafka and Strand
        // answer INVALID_REPLICATION_FACTOR, or NOT_CONTROLLER while the quorum elects):
        // retry, as admin clients do, until the deadline.
        let deadline = std::time::Instant::now() + LEADERS_TIMEOUT;
        for t in &topics {
            loop {
                match cluster
                    .create_topic_replicated(t, partitions, replication_factor, &configs)
                    .await
                {
                    Ok(()) => break,
                    Err(e) if e.code() == Some(TOPIC_ALREADY_EXISTS) => break,
                    Err(e)
                        if std::time::Instant::now() > deadline
                            || !(e.is_retriable()
                                || matches!(
                                    e.code(),
                                    Some(INVALID_REPLICATION_FACTOR | NOT_CONTROLLER)
                                )) =>
                    {
                        return Err(format!("cannot create topic {t}: {e}"))
                    }
                    Err(_) => glommio::timer::sleep(std::time::Duration::from_millis(200)).await,
                }
            }
        }
        // A broker answers CreateTopics before every new partition has a leader (Kafka's
        // controller elects them a moment later); clients that start now fail with
        // NOT_LEADER / LEADER_NOT_AVAILABLE. Wait for the leaders, as clients retry.
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let deadline = std::time::Instant::now() + LEADERS_TIMEOUT;
        loop {
            let last = match cluster.refresh(Some(&names)).await {
                Ok(md) => {
                    let led = names.iter().all(|n| {
                        md.topics.get(*n).is_some_and(|t| {
                            t.leaders.len() == partitions as usize
                                && t.leaders.iter().all(|&l| l >= 0)
                        })
                    });
                    if led {
                        return Ok(());
                    }
                    "partitions without a leader".to_string()
                }
                Err(e) => e.to_string(),
            };
            if std::time::Instant::now() > deadline {
                return Err(format!(
                    "the new topics have no leaders after {} s: {last}",
                    LEADERS_TIMEOUT.as_secs()
                ));
            }
            glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
}

/// How long the bench waits for a new topic's partitions to get leaders.
const LEADERS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn delete_topics(props: &[(String, String)], bootstrap: &str, topics: &[String]) {
    let (bootstrap, topics) = (bootstrap.to_string(), topics.to_vec());
    let Ok(security) = crate::driver::security(props) else {
        return;
    };
    let _ = block_on(move || async move {
        let cluster = Cluster::connect_secure(&bootstrap, "strand-bench-admin", security)
            .await
            .map_err(|e| e.to_string())?;
        for t in &topics {
            let _ = cluster.delete_topic(t).await;
        }
        Ok(())
    });
}

pub fn epoch_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Live output: interval lines on stdout, a progress bar on stderr when it is a terminal.
pub struct Progress {
    tty: bool,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            tty: std::io::stderr().is_terminal(),
        }
    }
}

impl Progress {
    fn line(&self, s: &str) {
        if self.tty {
            eprint!("\r\x1b[K");
        }
        println!("{s}");
        let _ = std::io::stdout().flush();
    }

    fn bar(&self, label: &str, elapsed_s: f64, total_s: f64, rate: f64, mb_s: f64) {
        if !self.tty {
            return;
        }
        const WIDTH: usize = 30;
        let done =
            ((elapsed_s / total_s.max(1e-9)) * WIDTH as f64).clamp(0.0, WIDTH as f64) as usize;
        eprint!(
            "\r\x1b[K{label} [{}{}] {:>5.1}/{:.0} s {:>10.0} msg/s {:>8.2} MB/s",
            "#".repeat(done),
            " ".repeat(WIDTH - done),
            elapsed_s,
            total_s,
            rate,
            mb_s
        );
        let _ = std::io::stderr().flush();
    }

    fn done(&self) {
        if self.tty {
            eprint!("\r\x1b[K");
        }
    }
}

fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}-{:x}", std::process::id(), nanos)
}

/// Runs `w` against `target`.
pub fn run(w: &Workload, target: &Target, progress: &Progress) -> Result<RunResult, String> {
    w.validate()?;
    let id = run_id();
    let topics: Vec<String> = (0..w.topics)
        .map(|i| format!("strand-bench-{id}-{i}"))
        .collect();
    let mut configs = w.topic_configs();
    configs.extend(target.topic_configs.iter().cloned());
    create_topics(
        &target.client_props,
        &target.bootstrap,
        &topics,
        w.partitions_per_topic as i32,
        w.replication_factor,
        &configs,
    )?;
    let plan = Plan {
        workload: w.clone(),
        bootstrap: target.bootstrap.clone(),
        topics: topics.clone(),
        run_id: id,
        client_props: target.client_props.clone(),
    };
    let result = drive(&plan, target, progress);
    delete_topics(&target.client_props, &target.bootstrap, &topics);
    result
}

fn drive(plan: &Plan, target: &Target, progress: &Progress) -> Result<RunResult, String> {
    let w = &plan.workload;
    let ctl = Arc::new(Control::default());
    let workers = driver::start(plan, &ctl)?;
    let producers = plan.producers().len();
    let clients = workers.clients;
    let groups = (w.consumer_groups * w.topics) as u64;
    // Every client connected, consumers positioned at the end of their partitions.
    let ready_deadline = Instant::now() + READY_TIMEOUT;
    while ctl.ready.load(Ordering::SeqCst) < clients {
        if let Some(e) = ctl.failure() {
            let _ = workers.join();
            return Err(e);
        }
        if Instant::now() > ready_deadline {
            ctl.fail(format!(
                "clients not ready after {} s",
                READY_TIMEOUT.as_secs()
            ));
            let _ = workers.join();
            return Err(format!(
                "{} of {} clients ready after {} s",
                ctl.ready.load(Ordering::SeqCst),
                clients,
                READY_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let start = Instant::now();
    let start_epoch_s = epoch_s();
    let mut warmup = Warmup::new(w);
    if let Some(s) = warmup.fixed_start_s() {
        ctl.measure_start.set(start + Duration::from_secs_f64(s));
    }
    ctl.go.store(true, Ordering::SeqCst);
    let mut intervals: Vec<Interval> = Vec::new();
    let mut last_s = 0.0;
    let (mut acked, mut consumed) = (0u64, 0u64);
    let mut stopped_at: Option<Instant> = None;
    let mut stages_reset = false;
    let mut broker_stages = Vec::new();
    let (mut ticks_at_start, mut ticks_at_end) = (None, None);
    let (mut cpu_at_start, mut cpu_at_end) = (None, None);
    // One emptied pair of histograms per recorder, swapped in at each drain.
    let mut spares: Vec<Option<crate::measure::Pair>> = workers
        .recorders
        .iter()
        .map(|_| Some(Default::default()))
        .collect();
    loop {
        let (warmup_end, end) = (warmup.end_s, warmup.end_s + w.duration_s);
        let now_s = start.elapsed().as_secs_f64();
        let mut next = last_s + TICK.as_secs_f64();
        for boundary in [warmup_end, end] {
            if last_s < boundary && boundary < next {
                next = boundary;
            }
        }
        if stopped_at.is_none() && next > now_s {
            std::thread::sleep(Duration::from_secs_f64(next - now_s));
        } else if stopped_at.is_some() {
            std::thread::sleep(Duration::from_millis(100));
        }
        let now_s = start.elapsed().as_secs_f64();
        let (mut counts, mut measured) = (Counts::default(), Counts::default());
        for (r, spare) in workers.recorders.iter().zip(spares.iter_mut()) {
            let mut p = r.drain_into(spare.take().unwrap_or_default());
            counts.add(&p.all);
            measured.add(&p.measured);
            p.clear();
            *spare = Some(p);
        }
        acked += counts.acked + counts.errors;
        consumed += counts.consumed;
        let interval = Interval {
            start_s: last_s,
            duration_s: now_s - last_s,
            warmup: last_s < warmup_end - 1e-9,
            counts,
            measured,
        };
        last_s = now_s;
        if !stages_reset && now_s >= warmup_end - 1e-6 {
            stages_reset = true;
            ticks_at_start = cpu_ticks();
            cpu_at_start = crate::broker_cpu::cpu_seconds(&target.broker_pids);
            if let Some(admin) = &target.admin {
                if let Err(e) = crate::stages::fetch(admin, true) {
                    eprintln!("broker stages off: {e}");
                }
            }
        }
        if stopped_at.is_none() {
            progress.line(&interval.line());
            progress.bar(
                &target.label,
                now_s,
                end,
                interval.send_rate(),
                interval.send_mb_s(),
            );
            if interval.warmup && warmup.observe(&interval, now_s) {
                ctl.measure_start
                    .set(start + Duration::from_secs_f64(warmup.end_s));
            }
            intervals.push(interval);
        } else if let Some(lastiv) = intervals.last_mut() {
            // After the stop: late acks and consumed records belong to the last interval.
            lastiv.counts.add(&interval.counts);
            lastiv.measured.add(&interval.measured);
        }
        if let Some(e) = ctl.failure() {
            progress.done();
            // Not joined: a worker may be stuck on a broker that stopped answering; the
            // caller reports the error and the process ends with its threads.
            return Err(e);
        }
        if stopped_at.is_none() && now_s >= end - 1e-6 {
            // The broker's stages over the measured window only (not the drain's long polls).
            broker_stages = match &target.admin {
                Some(admin) => crate::stages::fetch(admin, false).unwrap_or_else(|e| {
                    eprintln!("broker stages off: {e}");
                    Vec::new()
                }),
                None => Vec::new(),
            };
            ticks_at_end = cpu_ticks();
            cpu_at_end = crate::broker_cpu::cpu_seconds(&target.broker_pids);
            ctl.stop.store(true, Ordering::SeqCst);
            stopped_at = Some(Instant::now());
        }
        if let Some(t) = stopped_at {
            let producers_done = ctl.producers_done.load(Ordering::SeqCst) >= producers;
            let sent: u64 = intervals.iter().map(|i| i.counts.sent).sum();
            let all_acked = acked >= sent;
            let all_consumed = consumed >= sent * groups || groups == 0;
            if producers_done && all_acked && (all_consumed || t.elapsed() > DRAIN_TIMEOUT) {
                break;
            }
            if t.elapsed() > DRAIN_TIMEOUT * 6 {
                ctl.fail(format!(
                    "producers did not finish within {} s of the end",
                    (DRAIN_TIMEOUT * 6).as_secs()
                ));
            }
        }
    }
    progress.done();
    ctl.stop_consumers.store(true, Ordering::SeqCst);
    let recorders = workers.recorders.clone();
    workers.join()?;
    if let Some(lastiv) = intervals.last_mut() {
        for r in &recorders {
            let p = r.drain();
            lastiv.counts.add(&p.all);
            lastiv.measured.add(&p.measured);
        }
    }
    let summary = Summary::of(&intervals);
    Ok(RunResult {
        label: target.label.clone(),
        broker: target.broker.clone(),
        bootstrap: target.bootstrap.clone(),
        workload: w.clone(),
        start_epoch_s,
        intervals,
        summary,
        broker_stages,
        warmup_taken_s: warmup.end_s,
        warmup_settled: warmup.settled,
        steal_pct: steal_pct(ticks_at_start, ticks_at_end),
        broker_cpu_s: cpu_at_start
            .zip(cpu_at_end)
            .map(|(a, b): (f64, f64)| (b - a).max(0.0)),
    })
}

/// The warm-up's end, fixed or waiting for the latency to settle (`settle.rs`).
///
/// A fixed warm-up sets the measured period's start before the first message. A waiting one
/// leaves it unset (nothing is measured) and decides it once, one tick ahead of now, when the
/// p99 has settled or the maximum is near: a message is never classified against a start
/// that later moves (its send and its ack would land on different sides).
struct Warmup {
    /// Seconds after the start; while undecided, the next tick (intervals stay warm-up).
    end_s: f64,
    min_s: f64,
    max_s: f64,
    target_rate: Option<f64>,
    seconds: Vec<settle::Second>,
    /// `None` while undecided (and always for a fixed warm-up).
    settled: Option<bool>,
    waits: bool,
}

impl Warmup {
    fn new(w: &Workload) -> Warmup {
        Warmup {
            end_s: w.warmup_s,
            min_s: w.warmup_s,
            max_s: w.warmup_max_s,
            target_rate: w.rate.messages_per_s(w.message_size_bytes),
            seconds: Vec::new(),
            settled: None,
            waits: w.warmup_max_s > w.warmup_s,
        }
    }

    /// The measured period's start known before the run: a fixed warm-up's.
    fn fixed_start_s(&self) -> Option<f64> {
        (!self.waits).then_some(self.end_s)
    }

    /// Takes a warm-up interval ending at `now_s`; `true` when the start was decided now
    /// (then at `end_s`, a tick ahead).
    fn observe(&mut self, iv: &Interval, now_s: f64) -> bool {
        if !self.waits || self.settled.is_some() {
            return false;
        }
        let p = &iv.counts.publish;
        self.seconds.push(settle::Second {
            p50_us: (!p.is_empty()).then(|| p.value_at_quantile(0.5)),
            p99_us: (!p.is_empty()).then(|| p.value_at_quantile(0.99)),
            send_rate: iv.send_rate(),
        });
        let next_s = now_s + TICK.as_secs_f64();
        if next_s < self.min_s - 1e-6 {
            return false;
        }
        self.end_s = next_s.max(self.min_s);
        if settle::settled(&self.seconds, self.target_rate) {
            self.settled = Some(true);
        } else if next_s >= self.max_s - 1e-6 {
            self.settled = Some(false);
        }
        self.settled.is_some()
    }
}
