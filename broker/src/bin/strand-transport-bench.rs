//! The cluster transport against plain TCP on loopback, in one run (issue #17's measurement).
//!
//! Two nodes, each a glommio executor pinned to its own core (cpu 0 and 1 by default), run
//! the broker's `cluster::link::ClusterLink` (QUIC + mutual TLS 1.3 over a UDP socket on the
//! reactor, the way shards will); then the same two patterns over a TCP connection (TCP_NODELAY, the same 4-byte framing):
//! - round trip: a 64-byte message and its echo, one at a time (`--rounds`, after a warm-up);
//! - bulk: `--bulk-mib` MiB in 1 MiB messages, one direction, until the receiver has it all.
//!
//! Prints p50/p99 round trip and MB/s for both and the ratios against #17's goals (QUIC bulk
//! at least half of TCP's, QUIC round trip within 2x of TCP's); `--check` exits 1 on a miss.

mod bench_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use strand_broker::cluster::link::ClusterLink;
use strand_cluster_core::transport::certs::DevCa;
use strand_cluster_core::transport::{SendError, TransportEvent};

use bench_common::{next_message, on_core, two_cpus};

#[derive(Parser)]
#[command(about = "QUIC cluster transport vs TCP on loopback: round trip and bulk throughput")]
struct Args {
    /// Round trips measured (after 200 warm-up ones).
    #[arg(long, default_value_t = 5000)]
    rounds: usize,
    /// MiB sent one way in the bulk test.
    #[arg(long, default_value_t = 1024)]
    bulk_mib: usize,
    /// Cores of the two nodes.
    #[arg(long, default_value = "0,1")]
    cpus: String,
    /// Exit 1 unless both goals hold.
    #[arg(long)]
    check: bool,
}

const SMALL_BYTES: usize = 64;
const BULK_MESSAGE_BYTES: usize = 1 << 20;
const WARMUP_ROUNDS: usize = 200;

fn pin(cpu: usize) {
    // SAFETY: a cpu_set_t on the stack, filled by the libc macros, for this thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

struct Result2 {
    rtt_p50_us: f64,
    rtt_p99_us: f64,
    bulk_mb_s: f64,
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((q * sorted.len() as f64) as usize).min(sorted.len() - 1)]
}

fn quic(args: &Args, cpus: (usize, usize)) -> Result<Result2, String> {
    let ca = DevCa::new("transport bench").map_err(|e| e.to_string())?;
    let (c1, c2) = (
        ca.issue(1).map_err(|e| e.to_string())?,
        ca.issue(2).map_err(|e| e.to_string())?,
    );
    let (rounds, bulk_bytes) = (args.rounds, args.bulk_mib * BULK_MESSAGE_BYTES);
    let (addr2_tx, addr2_rx) = mpsc::channel::<SocketAddr>();
    let (addr1_tx, addr1_rx) = mpsc::channel::<SocketAddr>();
    let any: SocketAddr = "127.0.0.1:0".parse().map_err(|_| "address")?;

    // Node 2 echoes small messages and answers a 1-byte message once the bulk has arrived.
    let echo = on_core(cpus.1, move || {
        Box::pin(async move {
            let link = ClusterLink::bind(2, &c2, any).map_err(|e| e.to_string())?;
            addr2_tx
                .send(link.local_addr().map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            let addr1 = addr1_rx
                .recv_timeout(Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
            link.add_peer(1, addr1);
            let mut bulk_got = 0usize;
            while let Some(ev) = link.next_event().await {
                match ev {
                    TransportEvent::Message { body, .. } if body.len() == SMALL_BYTES => {
                        let _ = link.send(1, body);
                    }
                    TransportEvent::Message { body, .. } if body.len() > 1 => {
                        bulk_got += body.len();
                        if bulk_got >= bulk_bytes {
                            let _ = link.send(1, Bytes::from_static(b"D"));
                        }
                    }
                    TransportEvent::Message { .. } | TransportEvent::Disconnected { .. } => break,
                    TransportEvent::Connected { .. } => {}
                }
            }
            link.close(Duration::from_millis(200)).await;
            Ok::<(), String>(())
        })
    });
    let addr2 = addr2_rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let driver = on_core(cpus.0, move || {
        Box::pin(async move {
            let link = ClusterLink::bind(1, &c1, any).map_err(|e| e.to_string())?;
            link.add_peer(2, addr2);
            addr1_tx
                .send(link.local_addr().map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            let small = Bytes::from(vec![1u8; SMALL_BYTES]);
            let mut rtts = Vec::with_capacity(rounds);
            for i in 0..rounds + WARMUP_ROUNDS {
                let sent = Instant::now();
                link.send(2, small.clone()).map_err(|e| format!("{e:?}"))?;
                next_message(&link).await?;
                if i >= WARMUP_ROUNDS {
                    rtts.push(sent.elapsed().as_secs_f64() * 1e6);
                }
            }
            let big = Bytes::from(vec![7u8; BULK_MESSAGE_BYTES]);
            let started = Instant::now();
            let mut sent = 0usize;
            while sent < bulk_bytes {
                match link.send(2, big.clone()) {
                    Ok(()) => sent += BULK_MESSAGE_BYTES,
                    // Wait for QUIC to take some (the queue drains as acks come back).
                    Err(SendError::Full(_)) => {
                        glommio::timer::sleep(Duration::from_micros(200)).await
                    }
                    Err(e) => return Err(format!("{e:?}")),
                }
            }
            next_message(&link).await?;
            let secs = started.elapsed().as_secs_f64();
            let _ = link.send(2, Bytes::from_static(b"E"));
            link.close(Duration::from_millis(200)).await;
            rtts.sort_by(f64::total_cmp);
            Ok(Result2 {
                rtt_p50_us: percentile(&rtts, 0.5),
                rtt_p99_us: percentile(&rtts, 0.99),
                bulk_mb_s: bulk_bytes as f64 / secs / 1e6,
            })
        })
    });
    let result = driver.join().map_err(|_| "node 1 panicked")??;
    let _ = echo.join();
    Ok(result)
}

fn read_frame(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let n = u32::from_be_bytes(len) as usize;
    buf.resize(n, 0);
    s.read_exact(&mut buf[..n])?;
    Ok(n)
}

fn write_frame(s: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    s.write_all(&(body.len() as u32).to_be_bytes())?;
    s.write_all(body)
}

fn tcp(args: &Args, cpus: (usize, usize)) -> std::io::Result<Result2> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let (rounds, bulk_bytes) = (args.rounds, args.bulk_mib * BULK_MESSAGE_BYTES);
    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        pin(cpus.1);
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = Vec::new();
        for _ in 0..rounds + WARMUP_ROUNDS {
            read_frame(&mut s, &mut buf)?;
            write_frame(&mut s, &buf)?;
        }
        let mut got = 0;
        while got < bulk_bytes {
            got += read_frame(&mut s, &mut buf)?;
        }
        write_frame(&mut s, b"D")?;
        let _ = tx.send(());
        Ok(())
    });
    pin(cpus.0);
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let small = vec![1u8; SMALL_BYTES];
    let mut buf = Vec::new();
    let mut rtts = Vec::with_capacity(rounds);
    for i in 0..rounds + WARMUP_ROUNDS {
        let t = Instant::now();
        write_frame(&mut s, &small)?;
        read_frame(&mut s, &mut buf)?;
        if i >= WARMUP_ROUNDS {
            rtts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    let big = vec![7u8; BULK_MESSAGE_BYTES];
    let started = Instant::now();
    for _ in 0..args.bulk_mib {
        write_frame(&mut s, &big)?;
    }
    read_frame(&mut s, &mut buf)?;
    let secs = started.elapsed().as_secs_f64();
    let _ = rx.recv();
    server
        .join()
        .map_err(|_| std::io::Error::other("tcp server panicked"))??;
    rtts.sort_by(f64::total_cmp);
    Ok(Result2 {
        rtt_p50_us: percentile(&rtts, 0.5),
        rtt_p99_us: percentile(&rtts, 0.99),
        bulk_mb_s: bulk_bytes as f64 / secs / 1e6,
    })
}

fn main() {
    let args = Args::parse();
    let cpus = two_cpus(&args.cpus);
    let q = match quic(&args, cpus) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quic: {e}");
            std::process::exit(1);
        }
    };
    let t = match tcp(&args, cpus) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tcp: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "{:<28}{:>14}{:>14}{:>14}",
        format!("loopback, cpus {},{}", cpus.0, cpus.1),
        "rtt p50 (us)",
        "rtt p99 (us)",
        "bulk (MB/s)"
    );
    for (name, r) in [("QUIC + mTLS (strand)", &q), ("TCP (no TLS)", &t)] {
        println!(
            "{:<28}{:>14.1}{:>14.1}{:>14.0}",
            name, r.rtt_p50_us, r.rtt_p99_us, r.bulk_mb_s
        );
    }
    let bulk_ratio = q.bulk_mb_s / t.bulk_mb_s;
    let rtt_ratio = q.rtt_p50_us / t.rtt_p50_us;
    let bulk_ok = bulk_ratio >= 0.5;
    let rtt_ok = rtt_ratio <= 2.0;
    println!(
        "QUIC/TCP bulk {bulk_ratio:.2} (goal >= 0.50: {}), round trip p50 {rtt_ratio:.2}x (goal <= 2x: {})",
        if bulk_ok { "met" } else { "MISSED" },
        if rtt_ok { "met" } else { "MISSED" }
    );
    if args.check && !(bulk_ok && rtt_ok) {
        std::process::exit(1);
    }
}
