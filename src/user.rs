//! `strand user`: SCRAM users written straight into a stopped broker's data directory, so the
//! first user exists before the first start (as `kafka-storage format --add-scram` does).
//! A running broker takes users through Kafka's own tools instead (`kafka-configs --alter
//! --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users`), which it saves in the
//! same file; editing the file under a running broker would be overwritten by its next change.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use strand_broker::security::store;
use strand_wire::sasl::scram::{
    random_bytes, ScramCredential, ScramMechanism, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN,
};

#[derive(Args)]
pub struct UserArgs {
    #[command(subcommand)]
    cmd: UserCmd,
    /// The broker's data directory (`<data-dir>/security.json`).
    #[arg(long, env = "STRAND_DATA_DIR", default_value = strand_broker::config::DEFAULT_DATA_DIR, global = true)]
    data_dir: PathBuf,
}

#[derive(Subcommand)]
enum UserCmd {
    /// Add a user (or replace its credential for the mechanism).
    Add {
        name: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: Vec<String>,
        /// A file whose first line is the password (never on the command line).
        #[arg(long)]
        password_file: PathBuf,
        /// PBKDF2 iterations (Kafka's 4096..=16384).
        #[arg(long, default_value_t = 8192)]
        iterations: u32,
    },
    /// Remove a user's credentials (every mechanism).
    Delete { name: String },
    /// List users and their mechanisms.
    List,
}

pub fn run(args: UserArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strand user: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: UserArgs) -> Result<(), String> {
    std::fs::create_dir_all(&args.data_dir)
        .map_err(|e| format!("{}: {e}", args.data_dir.display()))?;
    let mut state = store::load(&args.data_dir, Vec::new(), false).map_err(|e| e.to_string())?;
    match args.cmd {
        UserCmd::Add {
            name,
            mechanism,
            password_file,
            iterations,
        } => {
            if name.is_empty() {
                return Err("the user name must not be empty".into());
            }
            if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations) {
                return Err(format!(
                    "--iterations must be within {SCRAM_ITERATIONS_MIN}..={SCRAM_ITERATIONS_MAX}"
                ));
            }
            let text = std::fs::read_to_string(&password_file)
                .map_err(|e| format!("--password-file {}: {e}", password_file.display()))?;
            let password = text.lines().next().unwrap_or("");
            if password.is_empty() {
                return Err(format!("{} holds no password", password_file.display()));
            }
            for m in &mechanism {
                let sm = [ScramMechanism::Sha256, ScramMechanism::Sha512]
                    .into_iter()
                    .find(|s| s.name() == m)
                    .ok_or_else(|| format!("--mechanism {m:?}: SCRAM-SHA-256 or SCRAM-SHA-512"))?;
                let salt = random_bytes(32);
                let c = ScramCredential::from_password(sm, password, &salt, iterations);
                state.credentials.insert((name.clone(), sm), c);
                println!("user {name}: {} credential saved", sm.name());
            }
        }
        UserCmd::Delete { name } => {
            let before = state.credentials.len();
            state.credentials.retain(|(u, _), _| *u != name);
            if state.credentials.len() == before {
                return Err(format!("no user {name}"));
            }
            println!("user {name} deleted");
        }
        UserCmd::List => {
            for ((user, m), c) in &state.credentials {
                println!("{user}\t{}\titerations={}", m.name(), c.iterations);
            }
            return Ok(());
        }
    }
    store::save(&args.data_dir, &state).map_err(|e| e.to_string())
}
