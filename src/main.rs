//! `strand`: the one command-line entry point. Thin: parses flags, calls the crates.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strand_broker::config::BrokerConfig;

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
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML config file (Kafka's `log.*` names for log settings).
    #[arg(long, env = "STRAND_CONFIG")]
    config: Option<PathBuf>,
    /// Address to accept Kafka clients on [default: 127.0.0.1:9092].
    #[arg(long, env = "STRAND_LISTEN")]
    listen: Option<String>,
    /// Directory for partition data [default: ./strand-data].
    #[arg(long, env = "STRAND_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Shards (pinned executors), one per core [default: all cores].
    #[arg(long, env = "STRAND_CORES")]
    cores: Option<usize>,
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
    if let Some(dir) = args.data_dir {
        config.data_dir = dir;
    }
    if args.cores.is_some() {
        config.cores = args.cores;
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
