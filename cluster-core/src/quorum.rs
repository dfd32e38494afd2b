//! The metadata quorum: raft-rs's `RawNode` (TiKV's Raft, sans-IO) behind a small surface
//! that returns what to do instead of doing it.
//!
//! Inputs: [`Quorum::tick`] (every `tick_ms`), [`Quorum::step`] (a message from another
//! voter), [`Quorum::propose`] (encoded metadata records, on the leader). Then
//! [`Quorum::poll`] runs raft-rs's Ready loop and returns an [`Output`]: messages to send,
//! entries committed (to apply, in order), leadership changes. The log and the hard state go
//! to the [`QuorumStore`] inside `poll`, *before* the messages that depend on them are
//! returned (raft-rs's `persisted_messages`): a store must be durable when its `append` /
//! `set_hard_state` return — the real one fdatasyncs, like a partition's acks=all append.
//!
//! Configuration follows the notes in docs/CLUSTER-RESEARCH.md: pre-vote and check-quorum
//! on (a partitioned node cannot depose a healthy leader; a leader that lost its quorum
//! steps down), at most 1 MiB per append message, every founder starts from the same voter
//! set (`controller.quorum.voters`).

use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Message, Snapshot};
use raft::storage::MemStorage;
use raft::{Config, RawNode, StateRole, Storage};

/// Where the quorum keeps its log and hard state. Writes are durable when they return.
pub trait QuorumStore: Storage {
    /// The snapshot the store holds from an earlier run (the log before it is compacted
    /// away), handed to the state machine first at start; `None` without one.
    fn stored_snapshot(&self) -> Option<Snapshot>;
    fn append(&self, entries: &[Entry]) -> raft::Result<()>;
    fn set_hard_state(&self, hs: &HardState) -> raft::Result<()>;
    fn set_commit(&self, commit: u64) -> raft::Result<()>;
    fn apply_snapshot(&self, snapshot: &Snapshot) -> raft::Result<()>;
}

/// In memory: for simulations and tests (not durable).
impl QuorumStore for MemStorage {
    /// MemStorage keeps a snapshot's metadata but not its data: the simulations restart
    /// voters only over uncompacted logs.
    fn stored_snapshot(&self) -> Option<Snapshot> {
        None
    }

    fn append(&self, entries: &[Entry]) -> raft::Result<()> {
        self.wl().append(entries)
    }

    fn set_hard_state(&self, hs: &HardState) -> raft::Result<()> {
        self.wl().set_hardstate(hs.clone());
        Ok(())
    }

    fn set_commit(&self, commit: u64) -> raft::Result<()> {
        self.wl().mut_hard_state().commit = commit;
        Ok(())
    }

    fn apply_snapshot(&self, snapshot: &Snapshot) -> raft::Result<()> {
        self.wl().apply_snapshot(snapshot.clone())
    }
}

/// Timing, in ticks of `tick_ms`.
#[derive(Clone, Copy, Debug)]
pub struct QuorumConfig {
    pub tick_ms: u64,
    /// A follower that hears nothing for a random time in [election, 2 x election) ticks
    /// starts an election.
    pub election_ticks: usize,
    pub heartbeat_ticks: usize,
}

impl QuorumConfig {
    /// From Kafka's `controller.quorum.election.timeout.ms` (default 1000): ticks of a tenth
    /// of it, heartbeats every two ticks.
    pub fn from_election_timeout_ms(election_timeout_ms: u64) -> QuorumConfig {
        QuorumConfig {
            tick_ms: (election_timeout_ms / 10).max(1),
            election_ticks: 10,
            heartbeat_ticks: 2,
        }
    }
}

/// Who leads, as this voter last heard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leadership {
    /// 0: unknown.
    pub leader_id: u64,
    pub is_leader: bool,
    pub term: u64,
}

/// One voter's replication progress, as the leader tracks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoterProgress {
    /// Raft id (node id + 1).
    pub id: u64,
    /// The last log index known to be on that voter.
    pub matched_index: u64,
}

/// A voter's view of the quorum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumStatus {
    /// 0: unknown.
    pub leader_id: u64,
    pub is_leader: bool,
    pub term: u64,
    pub commit_index: u64,
    pub last_index: u64,
    /// On the leader, every voter's progress (this one included); empty elsewhere.
    pub voters: Vec<VoterProgress>,
}

/// What one `poll` asks the driver to do, in this order: install `snapshot` (if any), apply
/// `committed`, send `messages`.
#[derive(Debug, Default)]
pub struct Output {
    pub messages: Vec<Message>,
    /// (log index, data) of committed normal entries with data (raft's own empty entries
    /// are left out).
    pub committed: Vec<(u64, Vec<u8>)>,
    /// (index, data) of a snapshot this voter must restore its state machine from.
    pub snapshot: Option<(u64, Vec<u8>)>,
    /// Set when the leader or this voter's role changed.
    pub leadership: Option<Leadership>,
}

/// A proposal on a voter that does not lead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotLeader {
    /// 0: no leader known.
    pub leader_id: u64,
}

pub struct Quorum<S: QuorumStore> {
    node: RawNode<S>,
    leadership: Leadership,
    /// The stored snapshot, until the first poll hands it out.
    pending_snapshot: Option<(u64, Vec<u8>)>,
    /// A store write failed: raft-rs has already handed out (and forgotten) what that poll
    /// carried, so this voter must stop; every later call says why.
    failed: Option<String>,
    /// Evidence that the leader's process died (`leader_gone`): this voter campaigns when
    /// the countdown ends, until another leader is known.
    gone_leader: Option<GoneLeader>,
    /// Vote requests ignored in the last ticks because this voter was in its leader's lease
    /// (with the tick they came at): a voter that campaigned on its own evidence can be a
    /// moment ahead of this one's; when this voter's evidence arrives, they are heard.
    ignored_votes: Vec<(Message, u64)>,
    ticks: u64,
}

/// Ignored vote requests kept at most (one per other voter is the useful case).
const IGNORED_VOTES_MAX: usize = 8;

/// A leader known dead, and the ticks until this voter campaigns to replace it.
#[derive(Clone, Copy, Debug)]
struct GoneLeader {
    id: u64,
    ticks_left: usize,
    /// Campaigns left on this evidence; then raft's randomised election timer alone decides
    /// (two survivors campaigning in step would otherwise split the vote each round).
    campaigns_left: usize,
}

/// Campaigns a voter makes on one piece of evidence before leaving it to raft's timers.
pub const GONE_LEADER_CAMPAIGNS_MAX: usize = 4;

/// Ticks between campaigns while the dead leader is not yet replaced (a vote can be refused
/// by a voter that has not yet seen the evidence and still honours the old leader's lease).
pub const GONE_LEADER_CAMPAIGN_EVERY_TICKS: usize = 2;

impl<S: QuorumStore> Quorum<S> {
    /// Voter `id` of `voters`, over `store` (which may hold an earlier run's log).
    pub fn new(
        id: u64,
        store: S,
        cfg: QuorumConfig,
        logger: &slog::Logger,
    ) -> Result<Self, String> {
        // A restart after compaction: the state machine starts from the stored snapshot
        // (handed out by the first poll), and raft-rs resumes applying after it; without
        // one, every committed entry is handed out again, in order.
        let pending_snapshot = store
            .stored_snapshot()
            .filter(|s| s.get_metadata().index > 0)
            .map(|s| (s.get_metadata().index, s.data.to_vec()));
        let config = Config {
            id,
            election_tick: cfg.election_ticks,
            heartbeat_tick: cfg.heartbeat_ticks,
            applied: pending_snapshot.as_ref().map_or(0, |(index, _)| *index),
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..Config::default()
        };
        config
            .validate()
            .map_err(|e| format!("quorum config: {e}"))?;
        let node = RawNode::new(&config, store, logger).map_err(|e| format!("quorum: {e}"))?;
        Ok(Quorum {
            node,
            leadership: Leadership {
                leader_id: 0,
                is_leader: false,
                term: 0,
            },
            pending_snapshot,
            failed: None,
            gone_leader: None,
            ignored_votes: Vec::new(),
            ticks: 0,
        })
    }

    pub fn id(&self) -> u64 {
        self.node.raft.id
    }

    pub fn leadership(&self) -> Leadership {
        self.leadership
    }

    pub fn store(&self) -> &S {
        self.node.store()
    }

    /// The quorum as this voter sees it (what DescribeQuorum and `strand cluster info` show).
    pub fn status(&self) -> QuorumStatus {
        let raft = &self.node.raft;
        let is_leader = raft.state == StateRole::Leader;
        let mut voters: Vec<VoterProgress> = if is_leader {
            raft.prs()
                .iter()
                .map(|(id, pr)| VoterProgress {
                    id: *id,
                    matched_index: pr.matched,
                })
                .collect()
        } else {
            Vec::new()
        };
        voters.sort_by_key(|v| v.id);
        QuorumStatus {
            leader_id: raft.leader_id,
            is_leader,
            term: raft.term,
            commit_index: raft.raft_log.committed,
            last_index: raft.raft_log.last_index(),
            voters,
        }
    }

    /// One tick of `tick_ms` passed.
    pub fn tick(&mut self) {
        self.node.tick();
        self.ticks += 1;
        let now = self.ticks;
        self.ignored_votes
            .retain(|(_, at)| now - at <= GONE_LEADER_CAMPAIGN_EVERY_TICKS as u64);
        if let Some(g) = self.gone_leader.as_mut() {
            let leader = self.node.raft.leader_id;
            let replaced = leader != raft::INVALID_ID && leader != g.id;
            if replaced || g.campaigns_left == 0 {
                self.gone_leader = None;
            } else if g.ticks_left <= 1 {
                self.campaign_now();
            } else {
                g.ticks_left -= 1;
            }
        }
    }

    /// Evidence (a liveness tripwire, `crate::liveness`) that voter `peer`'s process died.
    /// If it led, the survivors replace it without waiting out its lease: ranked by id among
    /// the other voters, rank r campaigns after 2r ticks (rank 0 at once), then every
    /// [`GONE_LEADER_CAMPAIGN_EVERY_TICKS`] until a leader is known (at most
    /// [`GONE_LEADER_CAMPAIGNS_MAX`] campaigns; a heartbeat or append from that leader
    /// cancels it all); and a vote request is heard despite the dead leader's lease. Pre-vote still applies: a voter whose log is
    /// behind cannot win, and a voter without evidence still refuses votes while in lease.
    pub fn leader_gone(&mut self, peer: u64) {
        let me = self.id();
        if self.failed.is_some() || peer == me || self.node.raft.leader_id != peer {
            return;
        }
        let mut others: Vec<u64> = self
            .node
            .raft
            .prs()
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| *id != peer)
            .collect();
        others.sort_unstable();
        let Some(rank) = others.iter().position(|id| *id == me) else {
            return;
        };
        self.gone_leader = Some(GoneLeader {
            id: peer,
            ticks_left: GONE_LEADER_CAMPAIGN_EVERY_TICKS * rank,
            campaigns_left: GONE_LEADER_CAMPAIGNS_MAX,
        });
        // Votes this voter ignored for the dead leader's lease a moment ago are heard now
        // (a message delivered late, as Raft allows).
        let ignored = std::mem::take(&mut self.ignored_votes);
        if !ignored.is_empty() {
            self.drop_lease();
            for (msg, _) in ignored {
                let _ = self.node.step(msg);
            }
        }
        if rank == 0 {
            self.campaign_now();
        }
    }

    /// Evidence that `peer`'s process lives (its tripwire answered): stop acting on
    /// [`Quorum::leader_gone`] for it.
    pub fn leader_alive(&mut self, peer: u64) {
        if self.gone_leader.is_some_and(|g| g.id == peer) {
            self.gone_leader = None;
        }
    }

    fn drop_lease(&mut self) {
        let r = &mut self.node.raft;
        r.election_elapsed = r.election_elapsed.max(r.election_timeout());
    }

    fn campaign_now(&mut self) {
        self.drop_lease();
        // Refused only on a leader (nothing to do then).
        let _ = self.node.campaign();
        if let Some(g) = self.gone_leader.as_mut() {
            g.ticks_left = GONE_LEADER_CAMPAIGN_EVERY_TICKS;
            g.campaigns_left = g.campaigns_left.saturating_sub(1);
        }
    }

    /// A message from another voter. A malformed or foreign one is an error for the driver to
    /// log (the transport closes that peer's connection).
    pub fn step(&mut self, msg: Message) -> Result<(), String> {
        if let Some(why) = &self.failed {
            return Err(why.clone());
        }
        if msg.to != self.id() {
            return Err(format!(
                "quorum message for voter {} reached voter {}",
                msg.to,
                self.id()
            ));
        }
        let vote = matches!(
            msg.get_msg_type(),
            raft::eraftpb::MessageType::MsgRequestPreVote
                | raft::eraftpb::MessageType::MsgRequestVote
        );
        use raft::eraftpb::MessageType::{MsgAppend, MsgHeartbeat};
        if matches!(msg.get_msg_type(), MsgHeartbeat | MsgAppend)
            && self.gone_leader.is_some_and(|g| g.id == msg.from)
        {
            // The "dead" leader speaks: the evidence was wrong (or about an older process).
            self.gone_leader = None;
        }
        if vote {
            let r = &self.node.raft;
            if self.gone_leader.is_some_and(|g| g.id == r.leader_id) {
                self.drop_lease();
            } else if r.leader_id != raft::INVALID_ID
                && r.leader_id != msg.from
                && r.election_elapsed < r.election_timeout()
                && self.ignored_votes.len() < IGNORED_VOTES_MAX
            {
                // raft-rs ignores it (in lease); kept in case evidence follows.
                self.ignored_votes.push((msg.clone(), self.ticks));
            }
        }
        self.node.step(msg).map_err(|e| format!("quorum step: {e}"))
    }

    /// Appends encoded records to the log, on the leader; the entry's log index (it commits
    /// there, or another leader's entry replaces it there).
    pub fn propose(&mut self, data: Vec<u8>) -> Result<u64, NotLeader> {
        if !self.leadership.is_leader || self.failed.is_some() {
            return Err(NotLeader {
                leader_id: self.leadership.leader_id,
            });
        }
        self.node.propose(Vec::new(), data).map_err(|_| NotLeader {
            leader_id: self.leadership.leader_id,
        })?;
        // raft-rs appends a leader's proposal to its log at once.
        Ok(self.node.raft.raft_log.last_index())
    }

    /// The leader's snapshot to `peer` was delivered (or not): raft-rs resumes replication
    /// to it (a lost snapshot would otherwise pause that follower until the next election).
    pub fn report_snapshot(&mut self, peer: u64, delivered: bool) {
        let status = if delivered {
            raft::SnapshotStatus::Finish
        } else {
            raft::SnapshotStatus::Failure
        };
        self.node.report_snapshot(peer, status);
    }

    /// The transport could not reach `peer`: raft-rs probes it instead of streaming to it.
    pub fn report_unreachable(&mut self, peer: u64) {
        self.node.report_unreachable(peer);
    }

    /// Runs the Ready loop until raft-rs has nothing more to say. A store error is final:
    /// this voter stops (see `failed`).
    pub fn poll(&mut self) -> Result<Output, String> {
        if let Some(why) = &self.failed {
            return Err(why.clone());
        }
        let result = self.poll_ready();
        if let Err(why) = &result {
            self.failed = Some(format!("quorum stopped after a store failure: {why}"));
        }
        result
    }

    fn poll_ready(&mut self) -> Result<Output, String> {
        let mut out = Output {
            snapshot: self.pending_snapshot.take(),
            ..Output::default()
        };
        while self.node.has_ready() {
            let mut rd = self.node.ready();
            if let Some(ss) = rd.ss() {
                self.leadership = Leadership {
                    leader_id: ss.leader_id,
                    is_leader: ss.raft_state == StateRole::Leader,
                    term: self.node.raft.term,
                };
                out.leadership = Some(self.leadership);
            }
            out.messages.extend(rd.take_messages());
            if !rd.snapshot().is_empty() {
                let snap = rd.snapshot().clone();
                self.node
                    .store()
                    .apply_snapshot(&snap)
                    .map_err(|e| format!("quorum snapshot: {e}"))?;
                out.snapshot = Some((snap.get_metadata().index, snap.data.to_vec()));
                out.committed.clear();
            }
            collect(&mut out.committed, rd.take_committed_entries());
            if !rd.entries().is_empty() {
                self.node
                    .store()
                    .append(rd.entries())
                    .map_err(|e| format!("quorum append: {e}"))?;
            }
            if let Some(hs) = rd.hs() {
                self.node
                    .store()
                    .set_hard_state(hs)
                    .map_err(|e| format!("quorum hard state: {e}"))?;
                if self.leadership.term != hs.term {
                    self.leadership.term = hs.term;
                    out.leadership = Some(self.leadership);
                }
            }
            out.messages.extend(rd.take_persisted_messages());
            let mut light = self.node.advance(rd);
            if let Some(commit) = light.commit_index() {
                self.node
                    .store()
                    .set_commit(commit)
                    .map_err(|e| format!("quorum commit: {e}"))?;
            }
            out.messages.extend(light.take_messages());
            collect(&mut out.committed, light.take_committed_entries());
            self.node.advance_apply();
        }
        Ok(out)
    }
}

fn collect(into: &mut Vec<(u64, Vec<u8>)>, entries: Vec<Entry>) {
    for e in entries {
        // Leader no-ops (empty) and configuration changes (the voter set is static for now)
        // carry no records.
        if e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty() {
            into.push((e.index, e.data.to_vec()));
        }
    }
}

/// A fresh in-memory store for voters `voters` (every founder starts from the same set).
pub fn mem_store(voters: &[u64]) -> MemStorage {
    MemStorage::new_with_conf_state(ConfState::from((voters.to_vec(), vec![])))
}

/// A logger that drops raft-rs's records (tests); the broker passes a drain to `tracing`.
pub fn discard_logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}
