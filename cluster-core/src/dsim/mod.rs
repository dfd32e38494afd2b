//! A deterministic simulation of the replication core (#19), in the spirit of FoundationDB's
//! and TigerBeetle's simulators: 3–5 brokers, the active controller and a producing client in
//! one process, over a simulated network (loss, delay, duplication, reordering, one-way and
//! two-way partitions), a simulated clock, and a simulated disk that a process crash (kill -9)
//! or a power cut cuts short. Everything is drawn from one seed, so a failing seed reproduces
//! exactly (`strand-sim --seed N --trace`).
//!
//! What is real and what is modelled:
//! - real: [`PartitionLeader`](crate::replication::PartitionLeader) (ISR, high watermark,
//!   `acks=all`), the epoch cache and the follower's truncation rule, the
//!   [`Controller`](crate::controller::Controller) (registration, heartbeats, fencing,
//!   elections, AlterPartition) and the [`Image`](crate::image::Image) every broker applies;
//! - modelled after the broker's drivers (`broker/src/node/replica_fetcher.rs`,
//!   `replica_serve.rs`, `replica_leader.rs`, `leader_written.rs`): the follower's loop (fetch
//!   from its log end with its last epoch; truncate on a diverging answer; append, write out,
//!   sync, fetch again — a fetch offset acknowledges everything below it, so it waits until
//!   what it appended is synced, and an unsynced tail is synced before any fetch), the
//!   leader's fetch checks and the synced end it tells its core, the AlterPartition retry
//!   rules, and the log itself (records with their epochs);
//! - the disk, at three levels, `synced <= written <= appended`: an append is in the
//!   process's memory; a write-out (a drawn delay, mostly 0–2 ms, now and then a stall of
//!   tens to hundreds) hands it to the device — the page cache or the device's own cache;
//!   an fdatasync (0–3 ms, now and then a stall) makes it durable. A node runs one sync at a
//!   time, covering everything written when it started (group commit: what is written
//!   meanwhile waits for the next). A replica counts a record toward the high watermark only
//!   once it is synced there (the default; `write.caching=true` topics count it once written,
//!   which [`Weakness::FollowersDontSync`] models);
//! - what the disk keeps through a fault: kill -9 (`crash`) keeps everything written, synced
//!   or not, and a random part of the unwritten tail, as an O_DIRECT write-out cut short
//!   would; a power cut (`power-loss`: one node; `whole-cluster-power-loss`: every broker at
//!   once, then all restart) keeps what was synced and a random prefix, often none, of what
//!   was written but not synced (what the device happened to flush). No liveness tripwire
//!   sees a power cut (no connection closes, no port refuses): the controller learns of it
//!   when the session expires;
//! - not here: the metadata quorum (raft-rs; `quorum_sim.rs` runs it over a lossy network).
//!   The controller is one process; brokers reach it over the simulated network, and it stays
//!   up through a whole-cluster power cut (its log is the quorum's, durable on its own).
//!
//! Invariants, checked after every event ([`check`]): no acknowledged record is missing from
//! a leader of a later epoch; a leader's high watermark never goes back; at most one node
//! leads an epoch; every replica agrees with every other below its high watermark (one
//! history of committed offsets); after the faults heal, a leader serves every acknowledged
//! record. [`Weakness`] switches off one safeguard to show the checks catch what follows.

mod broker;
mod check;
mod config;
mod controller_host;
mod disk;
mod nemesis;
mod net;
mod outcome;

use std::collections::{BTreeMap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strand_wire::ErrorCode;

use crate::controller::AlterPartition;
use crate::records::{MetadataRecord, NodeId};

use broker::Broker;
use check::Checker;
pub use config::{FaultMix, SimConfig, Weakness};
use controller_host::ControllerHost;
use nemesis::Fault;
use net::Net;
pub use outcome::{Outcome, Stats, Violation};

/// Timers and timeouts, in simulated milliseconds (the real defaults scaled down, so a run
/// of a few simulated seconds sees several sessions expire).
pub(crate) const TICK_MS: u64 = 50;
pub(crate) const HEARTBEAT_MS: u64 = 150;
pub(crate) const SESSION_MS: u64 = 1_200;
pub(crate) const LAG_MAX_MS: u64 = 1_000;
pub(crate) const CONTROLLER_TICK_MS: u64 = 100;
pub(crate) const REQUEST_TIMEOUT_MS: u64 = 600;
/// A leader holds a fetch with nothing to return this long; a follower without an answer
/// this long fetches again.
pub(crate) const FETCH_WAIT_MS: u64 = 150;
pub(crate) const FETCH_TIMEOUT_MS: u64 = 400;
pub(crate) const PRODUCE_TIMEOUT_MS: u64 = 2_000;
pub(crate) const PRODUCE_EVERY_MS: u64 = 20;
pub(crate) const PRODUCE_IN_FLIGHT: usize = 4;
pub(crate) const CLIENT_METADATA_MS: u64 = 1_000;
pub(crate) const MAX_FETCH_RECORDS: usize = 16;
/// How often an fdatasync stalls.
const SYNC_STALL: f64 = 0.02;
pub(crate) const TOPIC: &str = "t";
/// Lines of trace kept for a failing seed's report.
const TRACE_LINES: usize = 120;

/// The address of a process in the simulation: the controller, a broker (its node id), or
/// the producing client.
pub(crate) type Addr = NodeId;
pub(crate) const CONTROLLER: Addr = 0;
pub(crate) const CLIENT: Addr = 1_000;

/// Runs one seed; a violation's run is repeated with tracing on (the same events, exactly)
/// to report what led to it.
pub fn run(seed: u64, cfg: &SimConfig) -> Outcome {
    let first = World::new(seed, cfg.clone(), false).run();
    let Some(v) = &first.violation else {
        return first;
    };
    let traced = World::new(seed, cfg.clone(), true).run();
    match &traced.violation {
        Some(t) if t.what == v.what && t.event == v.event => traced,
        // A rerun that differs is a determinism bug of its own: keep the first finding.
        _ => Outcome {
            violation: Some(Violation {
                what: format!("{} (NOT reproduced by the traced rerun)", v.what),
                ..v.clone()
            }),
            ..first
        },
    }
}

/// Runs one seed with its trace kept, and returns it whole with the outcome.
pub fn run_traced(seed: u64, cfg: &SimConfig) -> (Outcome, Vec<String>) {
    let mut w = World::new(seed, cfg.clone(), true);
    w.trace_lines = usize::MAX;
    w.run_keeping_trace()
}

/// What travels between the simulated processes.
#[derive(Clone, Debug)]
pub(crate) enum Msg {
    Register {
        incarnation: u64,
    },
    Registered {
        incarnation: u64,
        answer: Result<u64, ErrorCode>,
    },
    HeartbeatAnswer {
        broker_epoch: u64,
        error: Option<ErrorCode>,
    },
    Heartbeat {
        broker_epoch: u64,
        metadata_offset: u64,
    },
    MetadataFetch {
        from: u64,
    },
    Metadata {
        from: u64,
        records: Vec<(u64, MetadataRecord)>,
    },
    Alter(AlterPartition),
    AlterAnswer {
        leader_epoch: i32,
        partition_epoch: i32,
        error: Option<ErrorCode>,
    },
    /// A replica fetch; `id` pairs it with its answer, as the RPC layer does (a late answer
    /// to an earlier, identical-looking fetch is not this one's).
    Fetch {
        id: u64,
        leader_epoch: i32,
        offset: i64,
        last_epoch: i32,
    },
    FetchAnswer {
        id: u64,
        leader_epoch: i32,
        offset: i64,
        answer: Result<FetchData, ErrorCode>,
    },
    Produce {
        token: u64,
        value: u64,
    },
    Produced {
        token: u64,
        answer: Result<(i64, i32), ErrorCode>,
    },
}

#[derive(Clone, Debug)]
pub(crate) enum FetchData {
    Records {
        records: Vec<(i32, u64)>,
        high_watermark: i64,
    },
    /// The follower's last epoch ends at this offset here (KIP-320's diverging epoch).
    Diverging { epoch: i32, end_offset: i64 },
}

/// What a broker asks the world to do after an input.
pub(crate) enum Out {
    Send {
        to: Addr,
        msg: Msg,
    },
    /// Write the log out up to here (the world picks how long the disk takes).
    Write {
        upto: i64,
    },
    /// fdatasync what is written, up to here (the world picks how long it takes).
    Sync {
        upto: i64,
    },
}

#[derive(Clone, Debug)]
enum Event {
    Deliver {
        from: Addr,
        to: Addr,
        msg: Msg,
    },
    BrokerTick {
        node: NodeId,
        incarnation: u64,
    },
    ControllerTick,
    /// Proposed metadata entries due to commit.
    ControllerCommit,
    ClientTick,
    Written {
        node: NodeId,
        incarnation: u64,
        upto: i64,
    },
    /// The node's fdatasync in flight ended (it reached `upto`, or less if the log was cut
    /// since).
    Synced {
        node: NodeId,
        incarnation: u64,
        upto: i64,
    },
    Fault(Fault),
}

/// The producing client: unique values, `acks=all`, a few in flight, to the leader its
/// metadata names (looked up from the controller's image, then cached: stale until the next
/// look-up).
#[derive(Default)]
struct Client {
    next_value: u64,
    next_token: u64,
    in_flight: BTreeMap<u64, (u64, u64)>,
    /// Every request's value, by token.
    values: BTreeMap<u64, u64>,
    /// The leader as last looked up (a client's metadata): refreshed after an error or a
    /// timeout, and every `CLIENT_METADATA_MS`, from the controller's image as of then.
    leader: Option<NodeId>,
    looked_up_ms: u64,
}

struct World {
    seed: u64,
    cfg: SimConfig,
    now_ms: u64,
    rng: ChaCha8Rng,
    queue: BTreeMap<(u64, u64), Event>,
    seq: u64,
    net: Net,
    controller: ControllerHost,
    brokers: Vec<Broker>,
    client: Client,
    check: Checker,
    stats: Stats,
    tracing: bool,
    trace: VecDeque<String>,
    trace_lines: usize,
    /// An invariant an event broke (found while handling it).
    broken: Option<String>,
    /// Whether the controller hears of a crash at once (the liveness tripwire, on by
    /// default in Strand) or only when the session expires: drawn per seed.
    tripwire: bool,
}

impl World {
    fn new(seed: u64, cfg: SimConfig, tracing: bool) -> World {
        assert!((3..=5).contains(&cfg.nodes), "3 to 5 nodes");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let net = Net::drawn(&mut rng);
        let tripwire = rng.gen_bool(0.5);
        let controller = ControllerHost::bootstrap(cfg.nodes, SESSION_MS, rng.gen());
        let brokers = (1..=cfg.nodes as NodeId)
            .map(|id| Broker::new(id, cfg.min_insync_replicas, cfg.weakness))
            .collect();
        let check = Checker::new(cfg.nodes, cfg.weakness);
        let mut w = World {
            seed,
            cfg,
            now_ms: 0,
            rng,
            queue: BTreeMap::new(),
            seq: 0,
            net,
            controller,
            brokers,
            client: Client::default(),
            check,
            stats: Stats::default(),
            tracing,
            trace: VecDeque::new(),
            trace_lines: TRACE_LINES,
            broken: None,
            tripwire,
        };
        for id in 1..=w.cfg.nodes as NodeId {
            let at = w.rng.gen_range(0..TICK_MS);
            w.at(
                at,
                Event::BrokerTick {
                    node: id,
                    incarnation: 1,
                },
            );
        }
        w.at(CONTROLLER_TICK_MS, Event::ControllerTick);
        w.at(500, Event::ClientTick);
        let (nodes, run_ms, mix) = (w.cfg.nodes, w.cfg.run_ms, w.cfg.faults);
        for (at, f) in nemesis::schedule(&mut w.rng, nodes, run_ms, mix) {
            w.at(at, Event::Fault(f));
        }
        w
    }

    fn at(&mut self, at_ms: u64, e: Event) {
        self.seq += 1;
        self.queue.insert((at_ms, self.seq), e);
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if self.tracing {
            if self.trace.len() >= self.trace_lines {
                self.trace.pop_front();
            }
            let line = format!("{:>6} ms  {}", self.now_ms, line());
            self.trace.push_back(line);
        }
    }

    /// A proposal will commit at `at`: look then.
    fn commit_at(&mut self, at: Option<u64>) {
        if let Some(at) = at {
            self.at(at, Event::ControllerCommit);
        }
    }

    /// Traces the metadata records committed since the log held `before`.
    fn note_committed(&mut self, before: usize) {
        if self.tracing && self.controller.log_len() > before {
            let lines: Vec<String> = self
                .controller
                .records_after(before)
                .map(|r| format!("controller committed {r:?}"))
                .collect();
            for line in lines {
                self.note(|| line);
            }
        }
    }

    fn run(self) -> Outcome {
        self.run_keeping_trace().0
    }

    fn run_keeping_trace(mut self) -> (Outcome, Vec<String>) {
        let end_ms = self.cfg.run_ms + self.cfg.settle_ms;
        let mut violation = None;
        while let Some(((at, _), e)) = self.queue.pop_first() {
            if at > end_ms {
                break;
            }
            self.now_ms = at;
            self.stats.events += 1;
            let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.step(e);
                match self.broken.take() {
                    Some(what) => Err(what),
                    None => self
                        .check
                        .after_event(&self.brokers, &self.controller.image),
                }
            }));
            let broken = match step {
                Ok(r) => r.err(),
                Err(panic) => Some(format!("panicked: {}", panic_text(&panic))),
            };
            if let Some(what) = broken {
                violation = Some(self.violation(what));
                break;
            }
        }
        if violation.is_none() {
            if let Err(what) = self.check.at_end(&self.brokers, &self.controller.image) {
                violation = Some(self.violation(what));
            }
        }
        self.stats.leaderships = self.check.leaderships();
        self.stats.truncations = self.brokers.iter().map(|b| b.truncations).sum();
        let trace = self.trace.drain(..).collect();
        let o = Outcome {
            seed: self.seed,
            stats: self.stats,
            violation,
        };
        (o, trace)
    }

    fn violation(&mut self, what: String) -> Violation {
        Violation {
            at_ms: self.now_ms,
            event: self.stats.events,
            what,
            trace: self.trace.iter().cloned().collect(),
        }
    }

    fn broker(&mut self, id: NodeId) -> &mut Broker {
        &mut self.brokers[id as usize - 1]
    }

    fn step(&mut self, e: Event) {
        match e {
            Event::Deliver { from, to, msg } => self.deliver(from, to, msg),
            Event::BrokerTick { node, incarnation } => {
                if let Some(resume) = self.held(node, incarnation) {
                    return self.at(resume, Event::BrokerTick { node, incarnation });
                }
                if self.broker(node).incarnation != incarnation || !self.broker(node).up {
                    return;
                }
                let now = self.now_ms;
                let out = self.broker(node).tick(now);
                self.carry_out(node, out);
                self.at(now + TICK_MS, Event::BrokerTick { node, incarnation });
            }
            Event::ControllerTick => {
                let unclean = self.cfg.weakness == Some(Weakness::UncleanElection);
                let now = self.now_ms;
                let at = self.controller.tick(now, unclean);
                self.commit_at(at);
                self.at(now + CONTROLLER_TICK_MS, Event::ControllerTick);
            }
            Event::ClientTick => self.client_tick(),
            Event::ControllerCommit => {
                let before = self.controller.log_len();
                let answers = self.controller.commit_due(self.now_ms);
                self.note_committed(before);
                for (to, msg) in answers {
                    self.send(CONTROLLER, to, msg);
                }
            }
            Event::Written {
                node,
                incarnation,
                upto,
            } => self.disk_done(node, incarnation, upto, false),
            Event::Synced {
                node,
                incarnation,
                upto,
            } => self.disk_done(node, incarnation, upto, true),
            Event::Fault(f) => self.fault(f),
        }
    }

    /// A paused node's events wait for its resumption (`Some(when)`).
    /// A write-out (`synced`: an fdatasync) of `node`'s log completed up to `upto`: carried
    /// out now, when the node resumes if it is paused, or never if that incarnation is gone.
    fn disk_done(&mut self, node: NodeId, incarnation: u64, upto: i64, synced: bool) {
        if let Some(resume) = self.held(node, incarnation) {
            let again = if synced {
                Event::Synced {
                    node,
                    incarnation,
                    upto,
                }
            } else {
                Event::Written {
                    node,
                    incarnation,
                    upto,
                }
            };
            return self.at(resume, again);
        }
        let b = self.broker(node);
        if b.incarnation != incarnation || !b.up {
            return;
        }
        let now = self.now_ms;
        let out = if synced {
            self.note(|| format!("n{node} synced to {upto}"));
            self.broker(node).synced(now)
        } else {
            self.note(|| format!("n{node} wrote out to {upto}"));
            self.broker(node).written(upto, now)
        };
        self.carry_out(node, out);
    }

    fn held(&self, node: NodeId, incarnation: u64) -> Option<u64> {
        let b = &self.brokers[node as usize - 1];
        (b.incarnation == incarnation && b.up)
            .then_some(b.paused_until)
            .flatten()
    }

    fn deliver(&mut self, from: Addr, to: Addr, msg: Msg) {
        if !self.net.delivers(from, to) {
            self.stats.dropped += 1;
            return;
        }
        if to == CONTROLLER {
            let now = self.now_ms;
            if !matches!(msg, Msg::MetadataFetch { .. } | Msg::Heartbeat { .. }) {
                self.note(|| format!("controller <- {from}: {msg:?}"));
            }
            let (answer, at) = self.controller.receive(from, msg, now);
            self.commit_at(at);
            if let Some(a) = answer {
                self.send(CONTROLLER, from, a);
            }
        } else if to == CLIENT {
            self.client_receive(msg);
        } else {
            let b = &self.brokers[to as usize - 1];
            if !b.up {
                return;
            }
            if let Some(resume) = b.paused_until {
                return self.at(resume, Event::Deliver { from, to, msg });
            }
            self.note(|| format!("n{to} <- {from}: {}", short(&msg)));
            let now = self.now_ms;
            let out = self.broker(to).receive(from, msg, now);
            self.carry_out(to, out);
        }
    }

    fn carry_out(&mut self, node: NodeId, out: Vec<Out>) {
        for o in out {
            match o {
                Out::Send { to, msg } => {
                    if let Msg::Produced {
                        token,
                        answer: Ok((offset, epoch)),
                    } = &msg
                    {
                        // Checked when the leader says it, not when (if) the client hears.
                        self.acknowledged(*token, *offset, *epoch);
                    }
                    self.send(node, to, msg)
                }
                Out::Write { upto } => {
                    // Mostly quick; now and then a stall (a busy device, a starved worker).
                    let ms = if self.rng.gen_bool(0.02) {
                        self.rng.gen_range(20..200)
                    } else {
                        self.rng.gen_range(0..3)
                    };
                    let incarnation = self.broker(node).incarnation;
                    let at = self.now_ms + ms;
                    self.at(
                        at,
                        Event::Written {
                            node,
                            incarnation,
                            upto,
                        },
                    );
                }
                Out::Sync { upto } => {
                    // Mostly a few milliseconds; now and then a stall (a journal commit, a
                    // device flushing a full cache).
                    let ms = if self.rng.gen_bool(SYNC_STALL) {
                        self.rng.gen_range(10..150)
                    } else {
                        self.rng.gen_range(0..=3)
                    };
                    let incarnation = self.broker(node).incarnation;
                    let at = self.now_ms + ms;
                    self.at(
                        at,
                        Event::Synced {
                            node,
                            incarnation,
                            upto,
                        },
                    );
                }
            }
        }
    }

    fn send(&mut self, from: Addr, to: Addr, msg: Msg) {
        self.stats.messages += 1;
        match self.net.route(&mut self.rng, from, to) {
            None => self.stats.dropped += 1,
            Some((delay_ms, copy_ms)) => {
                let now = self.now_ms;
                if let Some(copy) = copy_ms {
                    self.stats.duplicated += 1;
                    let msg = msg.clone();
                    self.at(now + copy, Event::Deliver { from, to, msg });
                }
                self.at(now + delay_ms, Event::Deliver { from, to, msg });
            }
        }
    }

    fn client_tick(&mut self) {
        let now = self.now_ms;
        if now >= self.cfg.run_ms {
            return;
        }
        let before = self.client.in_flight.len();
        self.client
            .in_flight
            .retain(|_, (_, sent)| now.saturating_sub(*sent) < PRODUCE_TIMEOUT_MS);
        if self.client.in_flight.len() < before {
            self.client.leader = None;
        }
        if self.client.leader.is_none() || now >= self.client.looked_up_ms + CLIENT_METADATA_MS {
            self.client.leader = self.controller.leader();
            self.client.looked_up_ms = now;
        }
        if self.client.in_flight.len() < PRODUCE_IN_FLIGHT {
            if let Some(leader) = self.client.leader {
                self.client.next_value += 1;
                self.client.next_token += 1;
                let (value, token) = (self.client.next_value, self.client.next_token);
                self.client.in_flight.insert(token, (value, now));
                self.client.values.insert(token, value);
                self.stats.produced += 1;
                self.send(CLIENT, leader, Msg::Produce { token, value });
            }
        }
        self.at(now + PRODUCE_EVERY_MS, Event::ClientTick);
    }

    fn client_receive(&mut self, msg: Msg) {
        let Msg::Produced { token, answer } = msg else {
            return;
        };
        if self.client.in_flight.remove(&token).is_none() {
            return; // timed out already, or a duplicate answer
        }
        if answer.is_err() {
            self.stats.refused += 1;
            self.client.leader = None; // ask for the leader again
        }
    }

    /// A leader answered produce request `token` as written at `offset` in `epoch`.
    fn acknowledged(&mut self, token: u64, offset: i64, epoch: i32) {
        let Some(&value) = self.client.values.get(&token) else {
            return;
        };
        self.stats.acked += 1;
        self.note(|| format!("value {value} acknowledged at {offset} (epoch {epoch})"));
        if let Err(what) = self.check.acked(offset, value, epoch, &self.brokers) {
            self.broken.get_or_insert(what);
        }
    }

    fn fault(&mut self, f: Fault) {
        self.note(|| format!("fault: {f:?}"));
        match f {
            Fault::Crash(n) => {
                *self.stats.faults.entry("crash").or_default() += 1;
                let keep = self.rng.gen_range(0.0..=1.0);
                let incarnation = self.broker(n).incarnation;
                self.broker(n).crash(keep);
                if self.tripwire {
                    self.controller.saw_die(n, incarnation);
                }
            }
            Fault::PowerLoss(n) => {
                // The host is gone: no tripwire fires; the session expires.
                *self.stats.faults.entry("power-loss").or_default() += 1;
                let keep = if self.rng.gen_bool(0.5) {
                    0.0
                } else {
                    self.rng.gen_range(0.0..=1.0)
                };
                let lost = self.broker(n).power_loss(keep);
                self.stats.unsynced_lost += lost as u64;
            }
            Fault::Restart(n) => {
                let b = self.broker(n);
                if !b.up {
                    b.restart();
                    let incarnation = b.incarnation;
                    let at = self.now_ms + 1;
                    self.at(
                        at,
                        Event::BrokerTick {
                            node: n,
                            incarnation,
                        },
                    );
                }
            }
            Fault::Pause(n, until) => {
                *self.stats.faults.entry("pause").or_default() += 1;
                self.broker(n).paused_until = Some(until);
            }
            Fault::Resume(n) => self.broker(n).paused_until = None,
            Fault::Cut(kind, links) => {
                *self.stats.faults.entry(kind).or_default() += 1;
                self.net.cut(&links);
            }
            Fault::Heal(links) => self.net.heal(&links),
            Fault::ControllerFailover => {
                *self.stats.faults.entry("controller-failover").or_default() += 1;
                let now = self.now_ms;
                let before = self.controller.log_len();
                let answers = self.controller.failover(now);
                self.note_committed(before);
                for (to, msg) in answers {
                    self.send(CONTROLLER, to, msg);
                }
            }
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

/// A message in a trace line, without its bulk.
fn short(m: &Msg) -> String {
    match m {
        Msg::Metadata { from, records } => {
            format!("metadata from {from} ({} records)", records.len())
        }
        Msg::FetchAnswer {
            id,
            leader_epoch,
            offset,
            answer:
                Ok(FetchData::Records {
                    records,
                    high_watermark,
                }),
        } => {
            format!(
                "fetch answer #{id} e{leader_epoch} @{offset}: {} records, hw {high_watermark}",
                records.len()
            )
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests;
