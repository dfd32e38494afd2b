//! The cluster transport against plain TCP on loopback, in one run (issue #17's measurement).
//!
//! Two nodes, each a thread pinned to its own core (cpu 0 and 1 by default), run
//! `strand_cluster_core::transport::Transport` (QUIC + mutual TLS 1.3) over std UDP sockets;
//! then the same two patterns over a TCP connection (TCP_NODELAY, the same 4-byte framing):
//! - round trip: a 64-byte message and its echo, one at a time (`--rounds`, after a warm-up);
//! - bulk: `--bulk-mib` MiB in 1 MiB messages, one direction, until the receiver has it all.
//!
//! Prints p50/p99 round trip and MB/s for both and the ratios against #17's goals (QUIC bulk
//! at least half of TCP's, QUIC round trip within 2x of TCP's); `--check` exits 1 on a miss.
//! The QUIC driver here is a plain blocking loop (recv with the transport's next timeout);
//! the broker drives the same state machine from each shard's glommio reactor.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use clap::Parser;
use strand_cluster_core::transport::certs::DevCa;
use strand_cluster_core::transport::{SendError, Transport, TransportEvent};

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

fn udp_socket() -> std::io::Result<UdpSocket> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    let fd = s.as_raw_fd();
    for (level, opt, val) in [
        // Room for a flow-control window of datagrams (capped by net.core.*mem_max).
        (libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20),
        (libc::SOL_SOCKET, libc::SO_SNDBUF, 8 << 20),
        // Never fragment: QUIC's path-MTU discovery relies on it.
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        ),
    ] {
        // SAFETY: setsockopt with an int option on a socket we own.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                opt,
                &val as *const i32 as *const libc::c_void,
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
        }
    }
    Ok(s)
}

/// Drives one transport on a UDP socket until `app` returns false. `app` sees each event and
/// may send; it is also called with `None` after every turn (to keep a bulk sender going).
fn run_node(
    mut t: Transport,
    sock: UdpSocket,
    mut app: impl FnMut(&mut Transport, Instant, Option<TransportEvent>) -> bool,
) {
    let mut buf = vec![0u8; 65536];
    loop {
        let now = Instant::now();
        let mut go_on = app(&mut t, now, None);
        while let Some(ev) = t.poll_event() {
            go_on &= app(&mut t, now, Some(ev));
        }
        while let Some((to, data)) = t.poll_transmit() {
            let _ = sock.send_to(&data, to);
        }
        if !go_on {
            return;
        }
        let wait = t
            .poll_timeout()
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(50))
            .clamp(Duration::from_micros(50), Duration::from_millis(50));
        let _ = sock.set_read_timeout(Some(wait));
        let mut got_any = false;
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            got_any = true;
            t.handle_datagram(Instant::now(), from, BytesMut::from(&buf[..n]));
            let _ = sock.set_nonblocking(true);
        }
        let _ = sock.set_nonblocking(false);
        if !got_any || t.poll_timeout().is_some_and(|d| d <= Instant::now()) {
            t.handle_timeout(Instant::now());
        }
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
    let (sa, sb) = (
        udp_socket().map_err(|e| e.to_string())?,
        udp_socket().map_err(|e| e.to_string())?,
    );
    let (aa, ab): (SocketAddr, SocketAddr) = (
        sa.local_addr().map_err(|e| e.to_string())?,
        sb.local_addr().map_err(|e| e.to_string())?,
    );
    let mut ta = Transport::new(1, &ca.issue(1).map_err(|e| e.to_string())?, None)
        .map_err(|e| e.to_string())?;
    let mut tb = Transport::new(2, &ca.issue(2).map_err(|e| e.to_string())?, None)
        .map_err(|e| e.to_string())?;
    ta.add_peer(2, ab);
    tb.add_peer(1, aa);
    let (rounds, bulk_bytes) = (args.rounds, args.bulk_mib * BULK_MESSAGE_BYTES);

    // Node 2 echoes small messages and reports bulk completion with a 1-byte message.
    let echo = std::thread::spawn(move || {
        pin(cpus.1);
        let mut bulk_got = 0usize;
        run_node(tb, sb, move |t, now, ev| {
            if let Some(TransportEvent::Message { body, .. }) = &ev {
                let body = body.clone();
                if body.len() == SMALL_BYTES {
                    let _ = t.send(now, 1, body);
                } else if body.len() == 1 {
                    return false; // the end
                } else {
                    bulk_got += body.len();
                    if bulk_got >= bulk_bytes {
                        let _ = t.send(now, 1, Bytes::from_static(b"D"));
                    }
                }
            }
            if let Some(TransportEvent::Disconnected { .. }) = ev {
                return false;
            }
            true
        });
    });

    pin(cpus.0);
    let mut rtts = Vec::with_capacity(rounds);
    let mut sent_at = Instant::now();
    let mut done_rounds = 0usize;
    let mut bulk_started: Option<Instant> = None;
    let mut bulk_sent = 0usize;
    let mut bulk_secs = 0.0;
    let big = Bytes::from(vec![7u8; BULK_MESSAGE_BYTES]);
    let small = Bytes::from(vec![1u8; SMALL_BYTES]);
    let mut started = false;
    run_node(ta, sa, |t, now, ev| {
        if !started {
            started = true;
            sent_at = now;
            let _ = t.send(now, 2, small.clone());
        }
        match ev {
            Some(TransportEvent::Message { body, .. }) if body.len() == SMALL_BYTES => {
                if done_rounds >= WARMUP_ROUNDS {
                    rtts.push(sent_at.elapsed().as_secs_f64() * 1e6);
                }
                done_rounds += 1;
                if done_rounds < rounds + WARMUP_ROUNDS {
                    sent_at = Instant::now();
                    let _ = t.send(sent_at, 2, small.clone());
                } else {
                    bulk_started = Some(Instant::now());
                }
            }
            Some(TransportEvent::Message { body, .. }) if body.len() == 1 => {
                bulk_secs = bulk_started.map_or(0.0, |s| s.elapsed().as_secs_f64());
                let _ = t.send(now, 2, Bytes::from_static(b"E"));
                // Let the end message go out before stopping.
                return false;
            }
            Some(TransportEvent::Disconnected { reason, .. }) => {
                eprintln!("quic: disconnected: {reason}");
                return false;
            }
            _ => {}
        }
        if bulk_started.is_some() {
            while bulk_sent < bulk_bytes {
                match t.send(now, 2, big.clone()) {
                    Ok(()) => bulk_sent += BULK_MESSAGE_BYTES,
                    Err(SendError::Full(_)) => break,
                    Err(e) => {
                        eprintln!("quic: send: {e:?}");
                        return false;
                    }
                }
            }
        }
        true
    });
    // Flush the end message: a few more turns are not needed for the numbers; node 2 stops
    // on it or on its idle timeout.
    let _ = echo.join();
    if rtts.is_empty() || bulk_secs == 0.0 {
        return Err("the QUIC run did not finish".into());
    }
    rtts.sort_by(f64::total_cmp);
    Ok(Result2 {
        rtt_p50_us: percentile(&rtts, 0.5),
        rtt_p99_us: percentile(&rtts, 0.99),
        bulk_mb_s: bulk_bytes as f64 / bulk_secs / 1e6,
    })
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
    let cpus: Vec<usize> = args
        .cpus
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let cpus = match cpus[..] {
        [a, b] => (a, b),
        _ => {
            eprintln!("--cpus takes two cores, e.g. 0,1");
            std::process::exit(2);
        }
    };
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
