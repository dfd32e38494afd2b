//! Push or pull replication, prototyped side by side (#18: "choose for latency and measure
//! it"). Not the broker: the two protocols alone, over the broker's cluster transport
//! (`cluster::link::ClusterLink`: QUIC + mutual TLS on a glommio reactor) and real O_DIRECT
//! writes with fdatasync on both nodes, so the difference between them is what is measured.
//!
//! A leader (node 1, on its own core) appends fixed-size batches at a fixed rate (a tick every
//! millisecond appends what is due: one write per tick, as a shard's appends group) to a
//! 64 MiB ring file (written once first, so fdatasync flushes data only) and fdatasyncs in a
//! loop (group commit). A batch is acknowledged (`acks=all`, one follower) once the leader's
//! fdatasync and the follower's acknowledgement both cover it; its latency runs from when the
//! schedule made it due.
//! - **pull** (Kafka; Strand's `replica_fetcher`): the follower sends a fetch with its durable
//!   end (that is its ack); the leader answers at once with what it has past that (up to 1 MiB;
//!   its own buffers, no copy) or holds the fetch until its next append; the follower's next
//!   fetch is its acknowledgement. One fetch in flight.
//! - **push** (Redpanda): the leader sends each append as soon as it is written, up to 4 MiB
//!   not yet acknowledged; the follower acknowledges each.
//!
//! The follower writes in order on a task of its own; it acknowledges (`--follower-ack`) once
//! a batch is written (Strand's follower, like Kafka's page-cache ack), once it is only
//! queued for its disk (Strand's before session 28), or once fsynced.
//!
//! Both send a batch only once the leader wrote it (what the log can serve), so neither gains
//! from sending before the local write.

mod bench_common;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use glommio::io::{DmaFile, OpenOptions};
use hdrhistogram::Histogram;
use strand_broker::cluster::link::ClusterLink;
use strand_cluster_core::transport::certs::DevCa;

use bench_common::{next_message, on_core, two_cpus};

#[derive(Parser)]
#[command(about = "Push vs pull replication over the cluster transport: acks=all latency")]
struct Args {
    /// Produce rate, MB/s.
    #[arg(long, default_value_t = 50.0)]
    rate_mb: f64,
    /// Batch size, KiB (a multiple of 4).
    #[arg(long, default_value_t = 16)]
    batch_kib: usize,
    /// Seconds measured per mode, after the warm-up.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long, default_value_t = 2)]
    warmup_seconds: u64,
    /// Cores of the leader and the follower.
    #[arg(long, default_value = "0,1")]
    cpus: String,
    /// Directory for the two ring files.
    #[arg(long, default_value = "target/replication-bench")]
    dir: PathBuf,
    /// When the follower acknowledges: `written` (Strand's broker since session 28; Kafka's
    /// page cache), `queued` for its disk (Strand's before), or `synced` (fdatasync first).
    #[arg(long, value_enum, default_value = "written")]
    follower_ack: FollowerAck,
    /// Modes, in order (each run once; repeat a name to run it again).
    #[arg(long, default_value = "pull,push,pull,push")]
    modes: String,
}

const RING_BYTES: u64 = 64 << 20;
const FETCH_MAX_BYTES: u64 = 1 << 20;
const PUSH_WINDOW_BYTES: u64 = 4 << 20;
const TICK: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pull,
    Push,
}

// Messages: one tag byte, then big-endian fields.
const FETCH: u8 = b'F'; // follower -> leader: [u64 durable end]  (pull)
const DATA: u8 = b'D'; // leader -> follower: [u64 offset][batches]
const ACK: u8 = b'A'; // follower -> leader: [u64 durable end]  (push)
const STOP: u8 = b'S';

fn header(tag: u8, offset: u64) -> Bytes {
    let mut h = vec![tag];
    h.extend_from_slice(&offset.to_be_bytes());
    Bytes::from(h)
}

fn parse(body: &Bytes) -> Option<(u8, u64, Bytes)> {
    let tag = *body.first()?;
    let offset = body.get(1..9).map_or(0, |o| {
        u64::from_be_bytes(o.try_into().expect("eight bytes"))
    });
    Some((tag, offset, body.slice(9.min(body.len())..)))
}

fn gio(e: glommio::GlommioError<()>) -> String {
    e.to_string()
}

/// A ring file written once through, so later writes and fdatasyncs touch data only.
async fn ring_file(path: &Path) -> Result<Rc<DmaFile>, String> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .dma_open(path)
        .await
        .map_err(gio)?;
    let chunk = 1 << 20;
    for i in 0..RING_BYTES / chunk {
        let buf = f.alloc_dma_buffer(chunk as usize);
        f.write_at(buf, i * chunk).await.map_err(gio)?;
    }
    f.fdatasync().await.map_err(gio)?;
    Ok(Rc::new(f))
}

/// Writes `data` (4 KiB multiples) at log position `pos` of the ring.
async fn write_ring(file: &DmaFile, pos: u64, data: &[u8]) -> Result<(), String> {
    let mut done = 0usize;
    while done < data.len() {
        let at = (pos + done as u64) % RING_BYTES;
        let n = ((RING_BYTES - at) as usize).min(data.len() - done);
        let mut buf = file.alloc_dma_buffer(n);
        buf.as_bytes_mut().copy_from_slice(&data[done..done + n]);
        file.write_at(buf, at).await.map_err(gio)?;
        done += n;
    }
    Ok(())
}

/// The leader's state, on its one executor.
struct Leader {
    link: ClusterLink,
    file: Rc<DmaFile>,
    mode: Mode,
    batch: u64,
    /// When each batch became due, by index.
    due: RefCell<VecDeque<Instant>>,
    /// Index of the first batch in `due`.
    due_base: Cell<u64>,
    /// Batches produced but not yet written.
    pending: Cell<u64>,
    /// Written batches kept for sending, as (position, bytes).
    written: RefCell<VecDeque<(u64, Bytes)>>,
    written_end: Cell<u64>,
    synced_end: Cell<u64>,
    follower_end: Cell<u64>,
    /// Pull: a fetch waiting for the next append, at this offset.
    parked: Cell<Option<u64>>,
    /// Push: sent up to here.
    sent_end: Cell<u64>,
    moved: event_listener::Event,
    measure_from: Instant,
    latencies: RefCell<Histogram<u64>>,
    stopping: Cell<bool>,
    /// The writer finished (every produced batch is written).
    writes_done: Cell<bool>,
    /// Measured batches whose acknowledgement waited for the follower (not the fsync).
    follower_last: Cell<u64>,
}

impl Leader {
    /// The written batches from `offset`, up to `max` bytes (the first whole), no copy.
    fn chunks_from(&self, offset: u64, max: u64) -> Vec<Bytes> {
        let mut out = vec![header(DATA, offset)];
        let mut taken = 0;
        for (pos, b) in self.written.borrow().iter() {
            if *pos < offset {
                continue;
            }
            if taken > 0 && taken + b.len() as u64 > max {
                break;
            }
            taken += b.len() as u64;
            out.push(b.clone());
        }
        out
    }

    fn send_from(&self, offset: u64, max: u64) -> u64 {
        let chunks = self.chunks_from(offset, max);
        let len: u64 = chunks[1..].iter().map(|c| c.len() as u64).sum();
        if len > 0 {
            let _ = self.link.send_chunks(2, chunks);
        }
        len
    }

    /// Acknowledges every batch both ends now hold durably; drops what both have.
    fn settle(&self, follower_last: bool) {
        let durable = self.synced_end.get().min(self.follower_end.get());
        let now = Instant::now();
        let mut due = self.due.borrow_mut();
        while let Some(t) = due.front().copied() {
            let end = (self.due_base.get() + 1) * self.batch;
            if end > durable || end > self.written_end.get() {
                break;
            }
            due.pop_front();
            self.due_base.set(self.due_base.get() + 1);
            if t >= self.measure_from {
                let us = now.duration_since(t).as_micros().max(1) as u64;
                let _ = self.latencies.borrow_mut().record(us);
                if follower_last {
                    self.follower_last.set(self.follower_last.get() + 1);
                }
            }
        }
        let mut written = self.written.borrow_mut();
        while written
            .front()
            .is_some_and(|(pos, b)| pos + b.len() as u64 <= durable)
        {
            written.pop_front();
        }
    }

    async fn produce(self: Rc<Self>, rate_bytes_s: f64, until: Instant) {
        let start = Instant::now();
        let mut made = 0u64;
        while Instant::now() < until {
            glommio::timer::sleep(TICK).await;
            let elapsed = start.elapsed();
            let want = (elapsed.as_secs_f64() * rate_bytes_s / self.batch as f64) as u64;
            while made < want {
                // Each batch is due when the schedule completed it (its last byte), not when
                // the tick noticed.
                let at = start
                    + Duration::from_secs_f64((made + 1) as f64 * self.batch as f64 / rate_bytes_s);
                self.due.borrow_mut().push_back(at);
                made += 1;
                self.pending.set(self.pending.get() + 1);
            }
            self.moved.notify(usize::MAX);
        }
        self.stopping.set(true);
        self.moved.notify(usize::MAX);
    }

    async fn write(self: Rc<Self>) -> Result<(), String> {
        let mut fill = 0u8;
        loop {
            let listener = self.moved.listen();
            let n = self.pending.replace(0);
            if n == 0 {
                if self.stopping.get() {
                    return Ok(());
                }
                listener.await;
                continue;
            }
            let pos = self.written_end.get();
            fill = fill.wrapping_add(1);
            let data = vec![fill; (n * self.batch) as usize];
            write_ring(&self.file, pos, &data).await?;
            let data = Bytes::from(data);
            let mut written = self.written.borrow_mut();
            for i in 0..n {
                let b = data.slice((i * self.batch) as usize..((i + 1) * self.batch) as usize);
                written.push_back((pos + i * self.batch, b));
            }
            drop(written);
            self.written_end.set(pos + n * self.batch);
            match self.mode {
                Mode::Pull => {
                    if let Some(offset) = self.parked.take() {
                        self.send_from(offset, FETCH_MAX_BYTES);
                    }
                }
                Mode::Push => self.push(),
            }
            self.moved.notify(usize::MAX);
        }
    }

    /// Push: sends what is written and not sent, within the window.
    fn push(&self) {
        loop {
            let (sent, end) = (self.sent_end.get(), self.written_end.get());
            let room = (self.follower_end.get() + PUSH_WINDOW_BYTES).saturating_sub(sent);
            if sent >= end || room == 0 {
                return;
            }
            let len = self.send_from(sent, room.min(FETCH_MAX_BYTES));
            if len == 0 {
                return;
            }
            self.sent_end.set(sent + len);
        }
    }

    async fn sync(self: Rc<Self>) -> Result<(), String> {
        loop {
            let listener = self.moved.listen();
            let target = self.written_end.get();
            if target > self.synced_end.get() {
                self.file.fdatasync().await.map_err(gio)?;
                self.synced_end.set(target);
                self.settle(false);
                continue;
            }
            if self.writes_done.get() {
                return Ok(());
            }
            listener.await;
        }
    }

    async fn listen(self: Rc<Self>) -> Result<(), String> {
        loop {
            let body = next_message(&self.link).await?;
            let Some((tag, offset, _)) = parse(&body) else {
                continue;
            };
            self.follower_end.set(self.follower_end.get().max(offset));
            self.settle(true);
            match (tag, self.mode) {
                (FETCH, Mode::Pull) => {
                    if self.written_end.get() > offset {
                        self.send_from(offset, FETCH_MAX_BYTES);
                    } else {
                        self.parked.set(Some(offset));
                    }
                }
                (ACK, Mode::Push) => self.push(),
                _ => {}
            }
        }
    }
}

async fn lead(
    mode: Mode,
    args: (f64, u64, u64, u64),
    link: ClusterLink,
    file: Rc<DmaFile>,
) -> Result<Histogram<u64>, String> {
    let (rate_bytes_s, batch, warmup_s, seconds) = args;
    let start = Instant::now();
    let leader = Rc::new(Leader {
        link,
        file,
        mode,
        batch,
        due: RefCell::default(),
        due_base: Cell::new(0),
        pending: Cell::new(0),
        written: RefCell::default(),
        written_end: Cell::new(0),
        synced_end: Cell::new(0),
        follower_end: Cell::new(0),
        parked: Cell::new(None),
        sent_end: Cell::new(0),
        moved: event_listener::Event::new(),
        measure_from: start + Duration::from_secs(warmup_s),
        latencies: RefCell::new(
            Histogram::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?,
        ),
        stopping: Cell::new(false),
        writes_done: Cell::new(false),
        follower_last: Cell::new(0),
    });
    let until = start + Duration::from_secs(warmup_s + seconds);
    let produce = glommio::spawn_local(Rc::clone(&leader).produce(rate_bytes_s, until));
    let write = glommio::spawn_local(Rc::clone(&leader).write());
    let sync = glommio::spawn_local(Rc::clone(&leader).sync());
    let listen = glommio::spawn_local(Rc::clone(&leader).listen());
    produce.await;
    write.await?;
    leader.writes_done.set(true);
    leader.moved.notify(usize::MAX);
    sync.await?;
    // Every batch acknowledged (the follower's last acknowledgement may still be coming).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !leader.due.borrow().is_empty() {
        if Instant::now() > deadline {
            return Err("the follower did not acknowledge everything within 10 s".into());
        }
        glommio::timer::sleep(TICK).await;
    }
    // STOP, and its echo before the link closes (a close drops what QUIC has not sent).
    drop(listen);
    let _ = leader.link.send(2, Bytes::from_static(&[STOP]));
    let echoed = async {
        while !next_message(&leader.link).await?.starts_with(&[STOP]) {}
        Ok::<(), String>(())
    };
    futures_lite::future::or(echoed, async {
        glommio::timer::sleep(Duration::from_secs(5)).await;
        Err("the follower did not answer STOP".to_string())
    })
    .await?;
    let h = leader.latencies.borrow().clone();
    eprintln!(
        "  (acknowledged on the follower's word, after the leader's fsync: {})",
        leader.follower_last.get()
    );
    Ok(h)
}

/// When the follower acknowledges a batch (pull: its next fetch; push: an ack message).
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum FollowerAck {
    /// Once it is queued for the disk (Strand's follower before session 28: the batch in
    /// the log's write-behind buffer).
    Queued,
    /// Once its O_DIRECT write completed (Strand's follower now; Kafka's: the page cache).
    Written,
    /// Once an fdatasync covered it.
    Synced,
}

/// The follower's disk side: writes in order, then (when acks wait for it) fdatasyncs, and
/// tells `acked` how far its acknowledgements may go.
struct FollowerDisk {
    file: Rc<DmaFile>,
    queue: RefCell<VecDeque<(u64, Bytes)>>,
    written: Cell<u64>,
    synced: Cell<u64>,
    moved: event_listener::Event,
    done: Cell<bool>,
    writes: RefCell<Histogram<u64>>,
}

impl FollowerDisk {
    async fn write(self: Rc<Self>, on_written: impl Fn(u64)) -> Result<(), String> {
        loop {
            let listener = self.moved.listen();
            let next = self.queue.borrow_mut().pop_front();
            match next {
                Some((offset, data)) => {
                    let t = Instant::now();
                    write_ring(&self.file, offset, &data).await?;
                    let us = t.elapsed().as_micros().max(1) as u64;
                    let _ = self.writes.borrow_mut().record(us);
                    self.written.set(offset + data.len() as u64);
                    on_written(self.written.get());
                    self.moved.notify(usize::MAX);
                }
                None if self.done.get() => return Ok(()),
                None => listener.await,
            }
        }
    }

    async fn sync(self: Rc<Self>, on_synced: impl Fn(u64)) -> Result<(), String> {
        loop {
            let listener = self.moved.listen();
            let target = self.written.get();
            if target > self.synced.get() {
                self.file.fdatasync().await.map_err(gio)?;
                self.synced.set(target);
                on_synced(target);
                continue;
            }
            if self.done.get() && self.queue.borrow().is_empty() {
                return Ok(());
            }
            listener.await;
        }
    }
}

async fn follow(
    mode: Mode,
    ack: FollowerAck,
    link: ClusterLink,
    file: Rc<DmaFile>,
) -> Result<(), String> {
    let disk = Rc::new(FollowerDisk {
        file,
        queue: RefCell::default(),
        written: Cell::new(0),
        synced: Cell::new(0),
        moved: event_listener::Event::new(),
        done: Cell::new(false),
        writes: RefCell::new(Histogram::new(3).map_err(|e| e.to_string())?),
    });
    // Pull acknowledges with its next fetch, push with an ack message.
    let tag = match mode {
        Mode::Pull => FETCH,
        Mode::Push => ACK,
    };
    let tell = {
        let link = link.clone();
        move |end: u64| {
            let _ = link.send(1, header(tag, end));
        }
    };
    let writer = {
        let tell = tell.clone();
        glommio::spawn_local(Rc::clone(&disk).write(move |end| {
            if ack == FollowerAck::Written {
                tell(end)
            }
        }))
    };
    let syncer = (ack == FollowerAck::Synced)
        .then(|| glommio::spawn_local(Rc::clone(&disk).sync(tell.clone())));
    if mode == Mode::Pull {
        tell(0);
    }
    let mut end = 0u64;
    loop {
        let body = next_message(&link).await?;
        let Some((kind, offset, data)) = parse(&body) else {
            continue;
        };
        match kind {
            DATA if offset == end => {
                end += data.len() as u64;
                disk.queue.borrow_mut().push_back((offset, data));
                disk.moved.notify(usize::MAX);
                if ack == FollowerAck::Queued {
                    tell(end);
                }
            }
            DATA => return Err(format!("data at {offset}, expected {end}")),
            STOP => {
                let _ = link.send(1, Bytes::from_static(&[STOP]));
                break;
            }
            _ => {}
        }
    }
    disk.done.set(true);
    disk.moved.notify(usize::MAX);
    writer.await?;
    if let Some(s) = syncer {
        s.await?;
    }
    let w = disk.writes.borrow();
    eprintln!(
        "  (follower writes: {}, p50 {} us, p99 {} us, max {} us)",
        w.len(),
        w.value_at_quantile(0.5),
        w.value_at_quantile(0.99),
        w.max()
    );
    Ok(())
}

fn run(args: &Args, mode: Mode, cpus: (usize, usize)) -> Result<Histogram<u64>, String> {
    let ca = DevCa::new("replication bench").map_err(|e| e.to_string())?;
    let (c1, c2) = (
        ca.issue(1).map_err(|e| e.to_string())?,
        ca.issue(2).map_err(|e| e.to_string())?,
    );
    let (addr2_tx, addr2_rx) = mpsc::channel::<SocketAddr>();
    let (addr1_tx, addr1_rx) = mpsc::channel::<SocketAddr>();
    let any: SocketAddr = "127.0.0.1:0".parse().map_err(|_| "address")?;
    let (dir1, dir2) = (args.dir.join("leader"), args.dir.join("follower"));
    let ack = args.follower_ack;
    for d in [&dir1, &dir2] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let follower = on_core(cpus.1, move || {
        Box::pin(async move {
            let file = ring_file(&dir2.join("ring")).await?;
            let link = ClusterLink::bind(2, &c2, any).map_err(|e| e.to_string())?;
            addr2_tx
                .send(link.local_addr().map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            let addr1 = addr1_rx
                .recv_timeout(Duration::from_secs(30))
                .map_err(|e| e.to_string())?;
            link.add_peer(1, addr1);
            let r = follow(mode, ack, link.clone(), file).await;
            // The leader closes first, once it has the STOP echo (or 2 s pass).
            let _ = futures_lite::future::or(
                async { while next_message(&link).await.is_ok() {} },
                glommio::timer::sleep(Duration::from_secs(2)),
            )
            .await;
            link.close(Duration::from_millis(200)).await;
            r
        })
    });
    let addr2 = addr2_rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    let batch = (args.batch_kib as u64 * 1024).max(4096) / 4096 * 4096;
    let params = (args.rate_mb * 1e6, batch, args.warmup_seconds, args.seconds);
    let leader = on_core(cpus.0, move || {
        Box::pin(async move {
            let file = ring_file(&dir1.join("ring")).await?;
            let link = ClusterLink::bind(1, &c1, any).map_err(|e| e.to_string())?;
            link.add_peer(2, addr2);
            addr1_tx
                .send(link.local_addr().map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            // (Dials the follower now, before the schedule starts.)
            let _ = link.send(2, Bytes::from_static(b"hello"));
            let r = lead(mode, params, link.clone(), file).await;
            link.close(Duration::from_millis(200)).await;
            r
        })
    });
    let h = leader.join().map_err(|_| "the leader panicked")??;
    follower.join().map_err(|_| "the follower panicked")??;
    Ok(h)
}

fn main() {
    let args = Args::parse();
    let cpus = two_cpus(&args.cpus);
    println!(
        "{} MB/s in {} KiB batches, {} s after {} s warm-up; leader cpu {}, follower cpu {}; \
         the follower acknowledges a batch {:?}",
        args.rate_mb,
        args.batch_kib,
        args.seconds,
        args.warmup_seconds,
        cpus.0,
        cpus.1,
        args.follower_ack
    );
    println!(
        "{:<6}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "mode", "acked", "p50 ms", "p99 ms", "p99.9 ms", "max ms"
    );
    for name in args.modes.split(',').map(str::trim) {
        let mode = match name {
            "pull" => Mode::Pull,
            "push" => Mode::Push,
            other => {
                eprintln!("unknown mode {other:?} (pull or push)");
                std::process::exit(2);
            }
        };
        match run(&args, mode, cpus) {
            Ok(h) => println!(
                "{:<6}{:>10}{:>10.2}{:>10.2}{:>10.2}{:>10.2}",
                name,
                h.len(),
                h.value_at_quantile(0.5) as f64 / 1e3,
                h.value_at_quantile(0.99) as f64 / 1e3,
                h.value_at_quantile(0.999) as f64 / 1e3,
                h.max() as f64 / 1e3
            ),
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::exit(1);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&args.dir);
}
