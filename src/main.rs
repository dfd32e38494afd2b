//! `strand`: the one command-line entry point. Thin: parses flags, calls the crates.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod certs;
mod cli;
mod cluster_info;
mod group_cmd;
mod local_cluster;
mod share_consume;
mod top;
mod user;
use strand_broker::config::{BrokerConfig, DEFAULT_DATA_DIR};

#[derive(Parser)]
#[command(
    name = "strand",
    version,
    about = "Strand: a Kafka-compatible, thread-per-core streaming broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker (single node): Kafka clients connect to --listen, data lives in --data-dir.
    Serve(ServeArgs),
    /// Check the host's settings for low tail latency (dry run; --apply changes them, as root).
    Tune(TuneArgs),
    /// Measure the data disk (O_DIRECT, io_uring) and write the io-properties file serve reads.
    Iotune(IotuneArgs),
    /// Create, list, describe, delete topics and alter their configs.
    Topic {
        #[command(flatten)]
        conn: cli::Conn,
        #[command(subcommand)]
        cmd: cli::TopicCmd,
    },
    /// A live view of a broker from its admin API's /metrics: request rates and latencies by
    /// API, bytes and records per second, the busiest partitions.
    Top(top::TopArgs),
    /// Produce lines from stdin, one record each.
    Produce {
        #[command(flatten)]
        conn: cli::Conn,
        #[command(flatten)]
        args: cli::ProduceArgs,
    },
    /// Print records of a topic.
    Consume {
        #[command(flatten)]
        conn: cli::Conn,
        #[command(flatten)]
        args: cli::ConsumeArgs,
    },
    /// List and describe consumer groups (with lag), reset their offsets.
    Group {
        #[command(flatten)]
        conn: cli::Conn,
        #[command(subcommand)]
        cmd: group_cmd::GroupCmd,
    },
    /// The cluster's id, controller and brokers.
    Cluster {
        #[command(flatten)]
        conn: cli::Conn,
        #[command(subcommand)]
        cmd: cli::ClusterCmd,
    },
    /// Load generator: latency histograms, acks comparison, Strand vs Apache Kafka. Alone, it
    /// starts a broker in a temp dir and runs a 30-second workload.
    Bench(Box<strand_bench_harness::cli::BenchArgs>),
    /// SCRAM users in a stopped broker's data directory (the first user, before the first
    /// start); a running broker takes users through `kafka-configs`.
    User(user::UserArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML config file (Kafka's `log.*` names for log settings).
    #[arg(long, env = "STRAND_CONFIG")]
    config: Option<PathBuf>,
    /// Address to accept Kafka clients on [default: 127.0.0.1:9092].
    #[arg(long, env = "STRAND_LISTEN")]
    listen: Option<String>,
    /// Address of the admin HTTP API (health, request-stage histograms); empty: off
    /// [default: 127.0.0.1:9644].
    #[arg(long, env = "STRAND_ADMIN_LISTEN")]
    admin_listen: Option<String>,
    /// Directory for partition data [default: ./strand-data].
    #[arg(long, env = "STRAND_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Shards (pinned executors), one per core [default: all cores].
    #[arg(long, env = "STRAND_CORES")]
    cores: Option<usize>,
    /// io-properties file from `strand iotune` [default: <data-dir>/io-properties.toml if present].
    #[arg(long, env = "STRAND_IO_PROPERTIES")]
    io_properties: Option<PathBuf>,
    /// The cores are shared with other busy processes (several nodes on one host): shards
    /// neither pin nor poll (Redpanda's `--overprovisioned`; the `overprovisioned` setting).
    #[arg(long)]
    overprovisioned: bool,
}

#[derive(clap::Args)]
struct TuneArgs {
    /// The broker's data directory (its disk and filesystem are checked).
    #[arg(long, env = "STRAND_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// Change what can be changed (sysctl and sysfs files; needs root) and report it.
    #[arg(long)]
    apply: bool,
    /// One JSON object (versioned) instead of the table.
    #[arg(long)]
    json: bool,
    /// Read /proc and /sys under this directory instead of / (tests use fake trees).
    #[arg(long, hide = true, default_value = "/")]
    root: PathBuf,
}

#[derive(clap::Args)]
struct IotuneArgs {
    /// Directory on the disk to measure (scratch files go in it and are removed).
    #[arg(long, env = "STRAND_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// Where to write the io-properties [default: <data-dir>/io-properties.toml].
    #[arg(long)]
    out: Option<PathBuf>,
    /// A few seconds instead of about a minute: for smoke tests, not for sizing a broker.
    #[arg(long)]
    quick: bool,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STRAND_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Tune(args) => tune(args),
        Command::Iotune(args) => iotune(args),
        Command::Topic { conn, cmd } => cli::topic(conn, cmd),
        Command::Produce { conn, args } => cli::produce(conn, args),
        Command::Consume { conn, args } => cli::consume(conn, args),
        Command::Group { conn, cmd } => group_cmd::group(conn, cmd),
        Command::Cluster { conn, cmd } => cli::cluster(conn, cmd),
        Command::Bench(args) => bench(*args),
        Command::Top(args) => top::run(args),
        Command::User(args) => user::run(args),
    }
}

fn tune(args: TuneArgs) -> ExitCode {
    let host = strand_tuning::Host::probe(&args.root, &args.data_dir);
    let report = if args.apply {
        strand_tuning::tune_and_apply(&host)
    } else {
        strand_tuning::tune(&host)
    };
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    let failed = report
        .applied
        .iter()
        .any(|(_, a)| matches!(a, strand_tuning::check::Applied::Failed { .. }));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn bench(args: strand_bench_harness::cli::BenchArgs) -> ExitCode {
    let env = strand_bench_harness::cli::Env {
        strand_bin: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("strand")),
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    match strand_bench_harness::cli::main(args, &env) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strand bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn iotune(args: IotuneArgs) -> ExitCode {
    use strand_tuning::iotune::{run, Plan};
    let out = args
        .out
        .unwrap_or_else(|| args.data_dir.join(strand_tuning::props::DEFAULT_FILE_NAME));
    let plan = if args.quick {
        Plan::quick()
    } else {
        Plan::full()
    };
    match run(&args.data_dir, &out, &plan, &mut |line| eprintln!("{line}")) {
        Ok(outcome) => {
            print!("{}", outcome.table);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("strand iotune: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    let mut config = match BrokerConfig::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strand: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(admin) = args.admin_listen {
        config.admin_listen = admin;
    }
    if let Some(dir) = args.data_dir {
        config.data_dir = dir;
    }
    if args.cores.is_some() {
        config.cores = args.cores;
    }
    if args.io_properties.is_some() {
        config.io_properties_file = args.io_properties;
    }
    if args.overprovisioned {
        config.overprovisioned = true;
    }
    if let Err(e) = config.validate() {
        eprintln!("strand: {e}");
        return ExitCode::from(2);
    }
    match strand_broker::server::serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strand: {e}");
            ExitCode::FAILURE
        }
    }
}
