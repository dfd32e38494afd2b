//! `strand-sim`: runs the deterministic simulation of replication (#19) over many seeds.
//!
//! ```text
//! strand-sim [--seeds N] [--from S] [--threads T] [--weaken W] [--power-cuts]
//! strand-sim --seed S [--trace]      one seed; --trace prints its last events on a violation
//!
//! W, a safeguard switched off: acks1, ack-unwritten, followers-dont-sync, unclean,
//! open-as-refused, truncate-to-hw. --power-cuts: half of the faults whole-cluster power
//! cuts (`FaultMix::PowerCuts`, as the test of followers-dont-sync runs).
//! ```
//! Exits 1 on the first seed that breaks an invariant (its number, what broke and the events
//! before it: rerun it with `--seed`), else prints the totals.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use strand_cluster_core::dsim::{run, run_traced, FaultMix, SimConfig, Stats, Weakness};

struct Args {
    seeds: u64,
    from: u64,
    threads: u64,
    weakness: Option<Weakness>,
    faults: FaultMix,
    one: Option<u64>,
    trace: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        seeds: 1000,
        from: 0,
        threads: 2,
        weakness: None,
        faults: FaultMix::Mixed,
        one: None,
        trace: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--seeds" => a.seeds = number(value()?)?,
            "--from" => a.from = number(value()?)?,
            "--threads" => a.threads = number(value()?)?.max(1),
            "--seed" => a.one = Some(number(value()?)?),
            "--trace" => a.trace = true,
            "--weaken" => a.weakness = Some(value()?.parse()?),
            "--power-cuts" => a.faults = FaultMix::PowerCuts,
            "-h" | "--help" => {
                return Err("usage: strand-sim [--seeds N] [--from S] [--threads T] \
                            [--weaken acks1|ack-unwritten|followers-dont-sync|unclean|\
                            open-as-refused|truncate-to-hw] [--power-cuts] | --seed S [--trace]"
                    .into())
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

fn config(seed: u64, a: &Args) -> SimConfig {
    SimConfig {
        weakness: a.weakness,
        faults: a.faults,
        ..SimConfig::for_seed(seed)
    }
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // A violation's panic (an assertion inside a state machine) is reported as the seed's
    // failure; the default hook's message would only repeat it.
    std::panic::set_hook(Box::new(|_| {}));
    if let (Some(seed), true) = (args.one, args.trace) {
        let (o, trace) = run_traced(seed, &config(seed, &args));
        for line in &trace {
            println!("{line}");
        }
        println!("{:?}", o.stats);
        match o.violation {
            Some(v) => {
                println!("seed {seed}: VIOLATION at {} ms: {}", v.at_ms, v.what);
                std::process::exit(1);
            }
            None => return,
        }
    }
    let (from, count) = match args.one {
        Some(s) => (s, 1),
        None => (args.from, args.seeds),
    };
    let started = Instant::now();
    let next = AtomicU64::new(from);
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let total = Mutex::new(Stats::default());
    let failed = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..args.threads.min(count.max(1)) {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= from + count || stop.load(Ordering::Relaxed) {
                    return;
                }
                let o = run(seed, &config(seed, &args));
                if let Some(v) = o.violation {
                    stop.store(true, Ordering::Relaxed);
                    let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                    if f.as_ref().is_none_or(|(s, _)| seed < *s) {
                        *f = Some((seed, v));
                    }
                    return;
                }
                total
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .add(&o.stats);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if count >= 10 && n.is_multiple_of((count / 10).max(1)) {
                    eprintln!(
                        "{n}/{count} seeds, {:.0} s",
                        started.elapsed().as_secs_f64()
                    );
                }
            });
        }
    });
    let secs = started.elapsed().as_secs_f64();
    if let Some((seed, v)) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        println!(
            "seed {seed}: VIOLATION at {} ms (event {}): {}",
            v.at_ms, v.event, v.what
        );
        println!("the events before it (rerun: strand-sim --seed {seed}):");
        for line in &v.trace {
            println!("  {line}");
        }
        std::process::exit(1);
    }
    let t = total.into_inner().unwrap_or_else(|e| e.into_inner());
    let n = done.into_inner();
    println!(
        "{n} seeds from {from}, 0 violations, {secs:.0} s: {} events, {} produce requests \
         ({} acknowledged, {} refused), {} leaderships, {} truncations, {} messages ({} lost \
         or cut, {} duplicated), {} written records lost unsynced to power cuts",
        t.events,
        t.produced,
        t.acked,
        t.refused,
        t.leaderships,
        t.truncations,
        t.messages,
        t.dropped,
        t.duplicated,
        t.unsynced_lost
    );
    let faults: Vec<String> = t.faults.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("faults: {}", faults.join(", "));
}
