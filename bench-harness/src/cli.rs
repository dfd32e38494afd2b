//! `strand bench`: flags, the embedded brokers, and the three commands (run, compare-acks,
//! compare-brokers). The `strand` binary only parses [`BenchArgs`] and calls [`main`].

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use crate::brokers::{self, Spawned};
use crate::placement::Placement;
use crate::run::{self, Progress, RunResult, Target};
use crate::workload::{parse_duration_s, DriverKind, Rate, Workload};
use crate::{compare, html, report};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    cmd: Option<BenchCmd>,
    #[command(flatten)]
    common: Common,
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// Run one workload (what `strand bench` alone does).
    Run(Common),
    /// The same workload at acks=0, 1 and all, one table and one report with the curves
    /// overlaid.
    CompareAcks {
        #[command(flatten)]
        common: Common,
        /// Also acks=all without fsync before the ack (Strand's `write.caching=true`).
        #[arg(long)]
        fsync_both: bool,
    },
    /// The same workload against Strand and Apache Kafka (KRaft, started here from Maven
    /// Central's jars; `--nodes` for clusters), with the ratios.
    CompareBrokers {
        #[command(flatten)]
        common: Common,
        /// Kafka's jars (fetched there with Maven when missing).
        #[arg(long, default_value = "target/kafka-libs")]
        kafka_libs: PathBuf,
        /// Use this Kafka instead of starting one.
        #[arg(long)]
        kafka_bootstrap: Option<String>,
        /// The started Kafka's JVM heap.
        #[arg(long, default_value = "1g")]
        kafka_heap: String,
    },
}

#[derive(Args, Debug, Clone)]
struct Common {
    /// Workload file (TOML; see bench/workloads/) [default: the built-in 1 topic x 16
    /// partitions, 1 KiB, 10,000 msg/s, acks=1].
    #[arg(long)]
    workload: Option<PathBuf>,
    /// A running Kafka-compatible broker (default: start Strand in a temp directory).
    #[arg(long, env = "STRAND_BENCH_BOOTSTRAP")]
    bootstrap: Option<String>,
    /// The admin API (`HOST:PORT`) of the Strand broker given with --bootstrap: its request
    /// stage timings are printed next to the bench's [default: the started broker's].
    #[arg(long)]
    broker_admin: Option<String>,
    /// Measured duration (`30s`, `500ms`, `2m`).
    #[arg(long, env = "STRAND_BENCH_DURATION")]
    duration: Option<String>,
    /// Warm-up before the measurement.
    #[arg(long, env = "STRAND_BENCH_WARMUP")]
    warmup: Option<String>,
    /// Target rate: `max`, messages/s (`50000`) or `50MB/s`.
    #[arg(long)]
    rate: Option<String>,
    /// 0, 1 or all.
    #[arg(long)]
    acks: Option<String>,
    /// native or rdkafka.
    #[arg(long)]
    driver: Option<String>,
    /// Override any workload key: `--set partitions_per_topic=100 --set linger_ms=5`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Where the reports go.
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// Where started brokers keep their data (a temp directory is made in it).
    #[arg(long, env = "STRAND_BENCH_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Shards of the started Strand broker [default: one per core of --broker-cpus].
    #[arg(long)]
    broker_cores: Option<usize>,
    /// Cores of the broker(s) the bench starts, e.g. `0-3` [default: the first half of the
    /// cores this process may use].
    #[arg(long)]
    broker_cpus: Option<String>,
    /// Cores of the load generator (this process) [default: the cores the broker does not
    /// get; not pinned against a broker given with --bootstrap].
    #[arg(long)]
    client_cpus: Option<String>,
    /// Nodes of each broker the bench starts: Strand through `strand cluster start`, Kafka
    /// as KRaft nodes (broker+controller each); node k of both on the same slice of
    /// --broker-cpus. Topics get replication factor N and min.insync.replicas N-1 unless the
    /// workload sets them (`--set replication_factor=...`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
    nodes: u32,
    /// Decided in `main` from the two flags above.
    #[arg(skip)]
    placement: Placement,
    /// A client setting by Kafka's name, repeatable, for every connection the bench makes
    /// (`--config security.protocol=SASL_SSL --config sasl.mechanism=SCRAM-SHA-256 ...`);
    /// needs --bootstrap (a started broker has only its PLAINTEXT listener).
    #[arg(long = "config", short = 'X', value_name = "KEY=VALUE")]
    client_config: Vec<String>,
    /// A Kafka client properties file (as Kafka's tools take with `--command-config`); the
    /// `--config` settings apply after it.
    #[arg(long, env = "STRAND_COMMAND_CONFIG")]
    command_config: Option<PathBuf>,
}

/// What the bench needs from the `strand` binary.
pub struct Env {
    /// The `strand` executable (to start `strand serve`).
    pub strand_bin: PathBuf,
    /// The command line, for the reports.
    pub command: String,
}

impl Common {
    /// The client settings: the properties file, then each `--config`.
    fn client_props(&self) -> Result<Vec<(String, String)>, String> {
        let mut props = match &self.command_config {
            Some(p) => strand_client::ClientSecurity::read_properties_file(p)?,
            None => Vec::new(),
        };
        for kv in &self.client_config {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("--config {kv:?}: KEY=VALUE"))?;
            props.push((k.trim().to_string(), v.to_string()));
        }
        // Checked now, so a bad setting fails before any broker starts.
        strand_client::ClientSecurity::from_properties(&props)?;
        Ok(props)
    }

    fn workload(&self) -> Result<Workload, String> {
        let mut w = match &self.workload {
            Some(p) => Workload::load(p)?,
            None => Workload::default(),
        };
        if let Some(d) = &self.duration {
            w.duration_s = parse_duration_s(d)?;
        }
        if let Some(d) = &self.warmup {
            w.warmup_s = parse_duration_s(d)?;
        }
        if let Some(r) = &self.rate {
            w.rate = Rate::parse(r)?;
        }
        if let Some(a) = &self.acks {
            w.acks = a.clone();
        }
        if let Some(d) = &self.driver {
            w.driver = match d.as_str() {
                "native" => DriverKind::Native,
                "rdkafka" => DriverKind::Rdkafka,
                other => return Err(format!("--driver {other:?}: native or rdkafka")),
            };
        }
        for s in &self.sets {
            w.set(s)?;
        }
        w.replicate_over(self.nodes);
        w.validate()?;
        Ok(w)
    }

    fn work_dir(&self) -> Result<tempfile::TempDir, String> {
        let parent = self.work_dir.clone().unwrap_or_else(std::env::temp_dir);
        std::fs::create_dir_all(&parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        tempfile::Builder::new()
            .prefix("strand-bench-")
            .tempdir_in(&parent)
            .map_err(|e| {
                format!(
                    "cannot create a work directory in {}: {e}",
                    parent.display()
                )
            })
    }
}

/// Decides where the broker and the load generator run, confines this process, says so.
fn place(c: &mut Common, starts_broker: bool) -> Result<(), String> {
    let allowed = strand_tuning::cpus::allowed();
    c.placement = Placement::choose(
        &allowed,
        starts_broker,
        c.broker_cpus.as_deref(),
        c.client_cpus.as_deref(),
    )?;
    c.placement.confine_client()?;
    eprintln!("{}", c.placement.describe());
    Ok(())
}

/// `strand bench ...`: prints the report paths; an error says what went wrong.
pub fn main(mut args: BenchArgs, env: &Env) -> Result<(), String> {
    let starts_broker = match &args.cmd {
        None => args.common.bootstrap.is_none(),
        Some(BenchCmd::Run(c)) | Some(BenchCmd::CompareAcks { common: c, .. }) => {
            c.bootstrap.is_none()
        }
        Some(BenchCmd::CompareBrokers {
            common,
            kafka_bootstrap,
            ..
        }) => common.bootstrap.is_none() || kafka_bootstrap.is_none(),
    };
    match &mut args.cmd {
        None => place(&mut args.common, starts_broker)?,
        Some(BenchCmd::Run(c))
        | Some(BenchCmd::CompareAcks { common: c, .. })
        | Some(BenchCmd::CompareBrokers { common: c, .. }) => place(c, starts_broker)?,
    }
    match args.cmd {
        None => bench_run(&args.common, env),
        Some(BenchCmd::Run(c)) => bench_run(&c, env),
        Some(BenchCmd::CompareAcks { common, fsync_both }) => {
            compare_acks(&common, fsync_both, env)
        }
        Some(BenchCmd::CompareBrokers {
            common,
            kafka_libs,
            kafka_bootstrap,
            kafka_heap,
        }) => compare_brokers(&common, &kafka_libs, kafka_bootstrap, &kafka_heap, env),
    }
}

/// compare-brokers' warm-up unless `--warmup` says otherwise: at least this long...
const COMPARE_WARMUP_MIN_S: f64 = 20.0;
/// ...then until the per-second publish p99 has settled (`settle.rs`), at most this long.
const COMPARE_WARMUP_MAX_S: f64 = 120.0;

/// The Strand broker of a bench: the given one, or one started in `dir`.
fn strand_target(
    c: &Common,
    env: &Env,
    dir: &Path,
    label: &str,
) -> Result<(Target, Option<Spawned>), String> {
    let mut pids = Vec::new();
    let (bootstrap, broker, admin, spawned) = match &c.bootstrap {
        Some(b) => (
            b.clone(),
            format!("broker at {b}"),
            c.broker_admin.clone(),
            None,
        ),
        None if c.nodes > 1 => {
            eprintln!(
                "starting strand cluster start --nodes {} in {}",
                c.nodes,
                dir.display()
            );
            let (s, admin) = brokers::start_strand_cluster(
                &env.strand_bin,
                dir,
                c.nodes,
                c.broker_cores,
                c.placement.broker.as_deref(),
            )?;
            pids = brokers::strand_cluster_pids(dir, c.nodes);
            (s.bootstrap.clone(), s.description.clone(), admin, Some(s))
        }
        None => {
            eprintln!("starting strand serve in {}", dir.display());
            let admin = format!("127.0.0.1:{}", brokers::free_port()?);
            let s = brokers::start_strand(
                &env.strand_bin,
                dir,
                c.broker_cores,
                &[("admin.listen", format!("{admin:?}"))],
                c.placement.broker.as_deref(),
            )?;
            pids = vec![s.pid()];
            (
                s.bootstrap.clone(),
                s.description.clone(),
                Some(admin),
                Some(s),
            )
        }
    };
    let client_props = c.client_props()?;
    if !client_props.is_empty() && c.bootstrap.is_none() {
        return Err("--config / --command-config client settings need --bootstrap: the bench starts brokers with a PLAINTEXT listener only".into());
    }
    let t = Target {
        label: label.into(),
        bootstrap,
        broker,
        topic_configs: Vec::new(),
        admin,
        client_props,
        broker_pids: pids,
    };
    Ok((t, spawned))
}

fn with_write_caching(mut t: Target, w: &Workload) -> Target {
    if let Some(v) = w.write_caching {
        t.topic_configs
            .push(("write.caching".into(), v.to_string()));
    }
    t
}

fn announce(w: &Workload, t: &Target) {
    eprintln!(
        "== {}: workload {} ({} topic(s) x {} partitions, {} B, rate {}, acks={}, {} driver) against {} ({}), {:.0} s warm-up{} + {:.0} s",
        t.label,
        w.name,
        w.topics,
        w.partitions_per_topic,
        w.message_size_bytes,
        w.rate,
        w.acks,
        match w.driver {
            DriverKind::Native => "native",
            DriverKind::Rdkafka => "rdkafka",
        },
        t.bootstrap,
        t.broker,
        w.warmup_s,
        if w.warmup_max_s > w.warmup_s {
            format!(" (then until the p99 settles, at most {:.0} s)", w.warmup_max_s)
        } else {
            String::new()
        },
        w.duration_s
    );
}

/// The topics' replication, for reports.
fn replication_note(w: &Workload) -> String {
    let rf = match w.replication_factor {
        -1 => "the broker's default".to_string(),
        n => n.to_string(),
    };
    let isr = match w.min_insync_replicas {
        0 => "the broker's default".to_string(),
        n => n.to_string(),
    };
    format!("Topics: replication factor {rf}, min.insync.replicas {isr}.")
}

/// "34 s (p99 settled)", "120 s (p99 had not settled)" or "5 s".
fn warmup_taken(r: &RunResult) -> String {
    let how = match r.warmup_settled {
        Some(true) => " (p99 settled)",
        Some(false) => " (p99 had not settled: the maximum)",
        None => "",
    };
    format!("{:.0} s{how}", r.warmup_taken_s)
}

fn steal_text(r: &RunResult) -> String {
    r.steal_pct
        .map_or_else(|| "unknown".into(), |s| format!("{s:.1}%"))
}

fn run_one(w: &Workload, t: &Target) -> Result<RunResult, String> {
    announce(w, t);
    let r = run::run(w, t, &Progress::default())?;
    if r.warmup_settled.is_some() {
        println!("warm-up: {}", warmup_taken(&r));
    }
    if let (Some(cpu_s), Some(per_mb)) = (r.broker_cpu_s, r.broker_cpu_ms_per_mb()) {
        println!(
            "broker CPU during the measured window: {cpu_s:.2} s ({:.0}% of a core), {per_mb:.1} ms per MB acknowledged",
            100.0 * cpu_s / r.summary.duration_s.max(1e-9)
        );
    }
    if let Some(steal) = r.steal_pct {
        println!("cpu steal during the measured window: {steal:.1}% (time the hypervisor gave to other guests)");
    }
    print!("{}", r.summary.table());
    print!("{}", crate::stages::table(&r.broker_stages));
    if let Some(note) = compare::backlog_note(&r) {
        println!("{note}");
    }
    if let Some(e) = &r.summary.counts.first_error {
        eprintln!("first error: {e}");
    }
    Ok(r)
}

/// A report to write: `kind` names the files, `table` and `notes` head the HTML page.
struct Report<'a> {
    kind: &'a str,
    title: String,
    table: String,
    notes: Vec<String>,
}

fn write_reports(
    c: &Common,
    env: &Env,
    host: serde_json::Value,
    runs: &[RunResult],
    rep: Report<'_>,
) -> Result<(), String> {
    let Report {
        kind,
        title,
        table,
        notes,
    } = rep;
    let (title, table, notes) = (title.as_str(), table.as_str(), notes.as_slice());
    std::fs::create_dir_all(&c.out)
        .map_err(|e| format!("cannot create {}: {e}", c.out.display()))?;
    let stem = report::report_stem(&c.out, kind);
    let json = stem.with_extension("json");
    let html_path = stem.with_extension("html");
    let doc = report::report_json(kind, &env.command, host.clone(), runs, notes)?;
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&json, text).map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    let page = html::report_html(title, &env.command, &host, runs, table, notes);
    std::fs::write(&html_path, page)
        .map_err(|e| format!("cannot write {}: {e}", html_path.display()))?;
    println!("report: {}", json.display());
    println!("report: {}", html_path.display());
    Ok(())
}

fn failed_records(runs: &[RunResult]) -> Result<(), String> {
    for r in runs {
        if r.summary.counts.errors > 0 {
            return Err(format!(
                "{}: {} records failed (first: {})",
                r.label,
                r.summary.counts.errors,
                r.summary.counts.first_error.as_deref().unwrap_or("?")
            ));
        }
    }
    Ok(())
}

fn bench_run(c: &Common, env: &Env) -> Result<(), String> {
    let w = c.workload()?;
    let work = c.work_dir()?;
    let (target, mut spawned) = strand_target(c, env, &work.path().join("strand"), "strand")?;
    let target = with_write_caching(target, &w);
    let result = run_one(&w, &target);
    if let Some(s) = spawned.as_mut() {
        s.stop();
    }
    let r = result?;
    let host = report::host_facts(work.path());
    let runs = [r];
    let title = format!("strand bench: {}", w.name);
    let rep = Report {
        kind: "run",
        title,
        table: String::new(),
        notes: vec![c.placement.describe(), replication_note(&w)],
    };
    write_reports(c, env, host, &runs, rep)?;
    failed_records(&runs)
}

fn compare_acks(c: &Common, fsync_both: bool, env: &Env) -> Result<(), String> {
    let base = c.workload()?;
    let work = c.work_dir()?;
    let (target, mut spawned) = strand_target(c, env, &work.path().join("strand"), "")?;
    let mut variants: Vec<(String, &str, Option<bool>)> = vec![
        ("acks=0".into(), "0", base.write_caching),
        ("acks=1".into(), "1", base.write_caching),
    ];
    if fsync_both {
        variants.push(("acks=all, fsync".into(), "all", Some(false)));
        variants.push(("acks=all, no fsync".into(), "all", Some(true)));
    } else {
        variants.push(("acks=all".into(), "all", base.write_caching));
    }
    let mut runs = Vec::new();
    for (label, acks, caching) in variants {
        let mut w = base.clone();
        w.acks = acks.into();
        w.write_caching = caching;
        if acks != "all" {
            w.idempotence = false;
            w.transactions = false;
        }
        let t = with_write_caching(
            Target {
                label,
                ..target.clone()
            },
            &w,
        );
        match run_one(&w, &t) {
            Ok(r) => runs.push(r),
            Err(e) => {
                if let Some(s) = spawned.as_mut() {
                    s.stop();
                }
                return Err(format!("{}: {e}", t.label));
            }
        }
    }
    if let Some(s) = spawned.as_mut() {
        s.stop();
    }
    let table = compare::runs_table(&runs);
    println!("\n{table}");
    let notes = vec![
        format!(
            "Strand acknowledges acks=all after fdatasync unless the topic sets write.caching=true; \
             acks=0 and acks=1 never wait for the disk. Broker: {}.",
            target.broker
        ),
        c.placement.describe(),
        replication_note(&base),
    ];
    let host = report::host_facts(work.path());
    let title = format!("strand bench compare-acks: {}", base.name);
    let rep = Report {
        kind: "compare-acks",
        title,
        table,
        notes,
    };
    write_reports(c, env, host, &runs, rep)?;
    failed_records(&runs)
}

fn compare_brokers(
    c: &Common,
    kafka_libs: &Path,
    kafka_bootstrap: Option<String>,
    kafka_heap: &str,
    env: &Env,
) -> Result<(), String> {
    let mut w = c.workload()?;
    // The JVM needs its warm-up: on one core Kafka's first ~10-20 s ran at 1-5 s latency
    // (a backlog it then drains) and its tail settled only after 30-40 s. Both brokers get
    // the same rule: a minimum, then until the per-second p99 stops falling.
    if c.warmup.is_none() {
        w.warmup_s = w.warmup_s.max(COMPARE_WARMUP_MIN_S);
        if w.warmup_max_s == 0.0 {
            w.warmup_max_s = COMPARE_WARMUP_MAX_S;
        }
    }
    let warmup_rule = if w.warmup_max_s > w.warmup_s {
        format!(
            "Warm-up: at least {:.0} s for each broker, then until its per-second publish p99 \
             has settled (no stall, the send rate steady, the p99 no longer falling), at most \
             {:.0} s; the same rule for both (the JVM's tail settles only after 15-40 s). \
             --warmup fixes it.",
            w.warmup_s, w.warmup_max_s
        )
    } else {
        format!("Warm-up {:.0} s for each broker.", w.warmup_s)
    };
    let work = c.work_dir()?;
    // Fetch (or refuse) before spending time on the Strand run.
    if kafka_bootstrap.is_none() {
        brokers::ensure_kafka_libs(kafka_libs, work.path())?;
    }
    let (target, mut spawned) = strand_target(c, env, &work.path().join("strand"), "strand")?;
    let strand = run_one(&w, &with_write_caching(target.clone(), &w));
    if let Some(s) = spawned.as_mut() {
        s.stop();
    }
    drop(spawned);
    let strand = strand?;
    let (kafka_target, mut kafka) = match kafka_bootstrap {
        Some(b) => (
            Target {
                label: "kafka".into(),
                bootstrap: b.clone(),
                broker: format!("kafka at {b}"),
                topic_configs: Vec::new(),
                admin: None,
                client_props: c.client_props()?,
                broker_pids: Vec::new(),
            },
            Vec::new(),
        ),
        None => {
            eprintln!(
                "starting Apache Kafka (KRaft) in {}",
                work.path().join("kafka").display()
            );
            let k = brokers::start_kafka(
                kafka_libs,
                &work.path().join("kafka"),
                c.nodes,
                kafka_heap,
                c.placement.broker.as_deref(),
            )?;
            (
                Target {
                    label: "kafka".into(),
                    bootstrap: brokers::bootstrap_of(&k),
                    broker: k.first().map(|s| s.description.clone()).unwrap_or_default(),
                    topic_configs: Vec::new(),
                    admin: None,
                    client_props: Vec::new(),
                    broker_pids: k.iter().map(|s| s.pid()).collect(),
                },
                k,
            )
        }
    };
    let kafka_run = run_one(&w, &kafka_target);
    brokers::stop_all(&mut kafka);
    let kafka_run = kafka_run?;
    let runs = vec![strand, kafka_run];
    let table = format!(
        "{}\n{}",
        compare::runs_table(&runs),
        compare::ratio_table(&runs[0], &runs[1])
    );
    println!("\n{table}");
    let mut notes = vec![
        format!(
            "Strand: {}; Kafka: {}. Both brokers keep their data under {} (same disk) and run one at a time.",
            target.broker,
            kafka_target.broker,
            work.path().display()
        ),
        format!("{} (the same for both brokers)", c.placement.describe()),
        replication_note(&w),
        warmup_rule,
        format!(
            "Warm-up taken: Strand {}; Kafka {}.",
            warmup_taken(&runs[0]),
            warmup_taken(&runs[1])
        ),
        format!(
            "CPU steal (time a VM's hypervisor gave to other guests) during the measured windows: Strand {}, Kafka {}.",
            steal_text(&runs[0]),
            steal_text(&runs[1])
        ),
    ];
    notes.extend(runs.iter().filter_map(compare::backlog_note));
    if w.acks_i16()? == -1 && w.write_caching != Some(true) {
        notes.push(
            "At acks=all Strand fsyncs before acknowledging; Kafka does not (it relies on \
             replication; log.flush.interval.messages is unset). Add --set write_caching=true \
             to compare without fsync on both sides."
                .into(),
        );
    }
    let host = report::host_facts(work.path());
    let title = format!("strand bench compare-brokers: {}", w.name);
    let rep = Report {
        kind: "compare-brokers",
        title,
        table,
        notes,
    };
    write_reports(c, env, host, &runs, rep)?;
    failed_records(&runs)
}
