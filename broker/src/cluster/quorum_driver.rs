//! One voter of the metadata quorum on a glommio executor: raft-rs (`cluster_core::quorum`)
//! over the cluster transport (`link`), its log in a `FileStore`.
//!
//! Two tasks drive the sans-IO `Quorum`: a ticker (every `tick_ms`) and a receiver (quorum
//! messages from the other voters). After each input, `drive` polls the quorum: the store has
//! written (and fdatasynced) what must be durable before the messages that depend on it are
//! handed out; committed entries and a snapshot to restore go to the caller's queue in order;
//! messages go to their voters. The store's writes are blocking `std::fs` calls, so a voter
//! runs on a controller executor of its own, never on a shard that serves partitions.
//!
//! Messages are at most once (the transport drops what a lost connection held): raft-rs
//! retransmits on its own timers; an unreachable voter is reported so the leader probes it
//! rather than streaming to it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use event_listener::Event;
use strand_cluster_core::file_store::FileStore;
use strand_cluster_core::limits::CONTROLLER_MESSAGES_QUEUED_MAX;
use strand_cluster_core::messages::{self, Channel};
use strand_cluster_core::quorum::{self, NotLeader, Quorum, QuorumConfig, QuorumStatus};
use strand_cluster_core::records::NodeId;
use strand_cluster_core::transport::tls::NodeCredentials;
use strand_cluster_core::transport::TransportEvent;

use super::link::ClusterLink;

/// What the quorum hands the state machine, in log order.
#[derive(Debug, PartialEq, Eq)]
pub enum Committed {
    /// Restore the state machine from this snapshot (taken at log `index`).
    Snapshot { index: u64, data: Vec<u8> },
    /// Apply this committed entry.
    Entry { index: u64, data: Vec<u8> },
}

/// Who leads, as this voter last heard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leader {
    /// `None` while no leader is known.
    pub node: Option<NodeId>,
    pub is_me: bool,
    pub term: u64,
}

/// Largest proposal: an entry travels in one cluster message (raft's append), with room for
/// the message's own fields. A larger one could never be replicated and would stall the log.
pub const PROPOSAL_MAX_BYTES: usize =
    strand_cluster_core::limits::CLUSTER_MESSAGE_MAX_BYTES - (64 << 10);

/// Why a proposal was not appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposeError {
    /// This voter does not lead; the leader it knows of, if any.
    NotLeader(Option<NodeId>),
    /// Above `PROPOSAL_MAX_BYTES`.
    TooLarge(usize),
    /// The voter has stopped.
    Stopped,
}

/// How to start a voter.
pub struct VoterSpec {
    pub me: NodeId,
    /// Every voter (this one included) and its controller (UDP) address.
    pub voters: Vec<(NodeId, SocketAddr)>,
    /// This voter's address to bind.
    pub listen: SocketAddr,
    /// Where the quorum's log, hard state and snapshot live.
    pub dir: PathBuf,
    pub creds: NodeCredentials,
    /// Kafka's `controller.quorum.election.timeout.ms`.
    pub election_timeout_ms: u64,
}

struct Inner {
    me: NodeId,
    quorum: RefCell<Quorum<FileStore>>,
    link: ClusterLink,
    committed: RefCell<VecDeque<Committed>>,
    /// Messages of the other channels (controller requests and answers), for the caller.
    others: RefCell<VecDeque<(NodeId, Channel, Bytes)>>,
    /// Fired when a committed entry or another channel's message is queued, the leader
    /// changes, or the voter stops.
    changed: Event,
    leader: Cell<Leader>,
    stopped: Cell<bool>,
    tick: Duration,
}

/// A running voter; clones share it.
#[derive(Clone)]
pub struct QuorumVoter {
    inner: Rc<Inner>,
}

impl QuorumVoter {
    /// Opens the store (truncating a torn tail), binds the link and starts the tasks on the
    /// current executor.
    pub fn start(spec: VoterSpec) -> io::Result<QuorumVoter> {
        let raft_ids: Vec<u64> = spec
            .voters
            .iter()
            .map(|(n, _)| messages::raft_id(*n))
            .collect();
        let (store, cut) = FileStore::open(&spec.dir, &raft_ids)?;
        if cut > 0 {
            tracing::warn!(bytes = cut, dir = %spec.dir.display(), "quorum log: truncated a torn tail");
        }
        let cfg = QuorumConfig::from_election_timeout_ms(spec.election_timeout_ms);
        let quorum = Quorum::new(
            messages::raft_id(spec.me),
            store,
            cfg,
            &quorum::discard_logger(),
        )
        .map_err(io::Error::other)?;
        let link = ClusterLink::bind(spec.me, &spec.creds, spec.listen)?;
        for (node, addr) in &spec.voters {
            if *node != spec.me {
                link.add_peer(*node, *addr);
            }
        }
        let inner = Rc::new(Inner {
            me: spec.me,
            quorum: RefCell::new(quorum),
            link,
            committed: RefCell::new(VecDeque::new()),
            others: RefCell::new(VecDeque::new()),
            changed: Event::new(),
            leader: Cell::new(Leader {
                node: None,
                is_me: false,
                term: 0,
            }),
            stopped: Cell::new(false),
            tick: Duration::from_millis(cfg.tick_ms),
        });
        // A restart hands out its stored snapshot and replays its log from here.
        drive(&inner);
        glommio::spawn_local(ticker(Rc::clone(&inner))).detach();
        glommio::spawn_local(receiver(Rc::clone(&inner))).detach();
        Ok(QuorumVoter { inner })
    }

    pub fn leader(&self) -> Leader {
        self.inner.leader.get()
    }

    /// The quorum as this voter sees it (leader, term, commit, and on the leader each
    /// voter's progress).
    pub fn status(&self) -> QuorumStatus {
        self.inner.quorum.borrow().status()
    }

    /// Stopped by [`QuorumVoter::stop`] or by a store failure.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.get()
    }

    /// The bound controller address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.link.local_addr()
    }

    /// Appends `data` to the quorum's log, on the leader; it comes back through
    /// [`QuorumVoter::next_committed`] on every voter once committed.
    /// Proposes an entry; its log index (see `Quorum::propose`).
    pub fn propose(&self, data: Vec<u8>) -> Result<u64, ProposeError> {
        if self.inner.stopped.get() {
            return Err(ProposeError::Stopped);
        }
        if data.len() > PROPOSAL_MAX_BYTES {
            return Err(ProposeError::TooLarge(data.len()));
        }
        let index =
            self.inner
                .quorum
                .borrow_mut()
                .propose(data)
                .map_err(|NotLeader { leader_id }| {
                    ProposeError::NotLeader(messages::node_of(leader_id))
                })?;
        drive(&self.inner);
        Ok(index)
    }

    /// Sends a message (channel byte included) to another node over the voter's link.
    pub fn send(&self, to: NodeId, message: Vec<u8>) -> Result<(), String> {
        if self.inner.stopped.get() {
            return Err("the metadata quorum voter has stopped".to_string());
        }
        self.inner
            .link
            .send(to, Bytes::from(message))
            .map_err(|e| format!("to node {to}: {e:?}"))
    }

    /// Sends a message made of `chunks` to `to`, each buffer as it is.
    pub fn send_chunks(&self, to: NodeId, chunks: Vec<Bytes>) -> Result<(), String> {
        if self.inner.stopped.get() {
            return Err("the metadata quorum voter has stopped".to_string());
        }
        self.inner
            .link
            .send_chunks(to, chunks)
            .map_err(|e| format!("to node {to}: {e:?}"))
    }

    /// The next message of another channel than the quorum's (sender, channel, body after
    /// the channel byte); `None` once the voter has stopped.
    pub async fn next_message(&self) -> Option<(NodeId, Channel, Bytes)> {
        loop {
            let listener = self.inner.changed.listen();
            if let Some(m) = self.inner.others.borrow_mut().pop_front() {
                return Some(m);
            }
            if self.inner.stopped.get() {
                return None;
            }
            listener.await;
        }
    }

    /// Saves a snapshot of the state machine as of committed entry `index` (already applied)
    /// and drops the log entries it covers. A blocking write, like the rest of the store.
    pub fn save_snapshot(&self, index: u64, data: Vec<u8>) -> Result<(), String> {
        self.inner
            .quorum
            .borrow()
            .store()
            .save_snapshot(index, data)
            .map_err(|e| format!("metadata snapshot at {index}: {e}"))
    }

    /// The next committed entry or snapshot; `None` once the voter has stopped.
    pub async fn next_committed(&self) -> Option<Committed> {
        loop {
            let listener = self.inner.changed.listen();
            if let Some(c) = self.inner.committed.borrow_mut().pop_front() {
                return Some(c);
            }
            if self.inner.stopped.get() {
                return None;
            }
            listener.await;
        }
    }

    /// Waits until the leader is known to differ from `than` (or `limit` passes, or the voter
    /// stops: then it returns at once).
    pub async fn leader_change(&self, than: Leader, limit: Duration) -> Leader {
        let _ = glommio::timer::timeout(limit, async {
            loop {
                let listener = self.inner.changed.listen();
                if self.inner.leader.get() != than || self.inner.stopped.get() {
                    return Ok(());
                }
                listener.await;
            }
        })
        .await;
        self.inner.leader.get()
    }

    /// Evidence that `node`'s process died: if it led the quorum, replace it now
    /// (`Quorum::leader_gone`) rather than after its lease and an election timeout.
    pub fn peer_gone(&self, node: NodeId) {
        if self.inner.stopped.get() {
            return;
        }
        self.inner
            .quorum
            .borrow_mut()
            .leader_gone(messages::raft_id(node));
        drive(&self.inner);
    }

    /// `node`'s process answers again: evidence about it is void.
    pub fn peer_up(&self, node: NodeId) {
        self.inner
            .quorum
            .borrow_mut()
            .leader_alive(messages::raft_id(node));
    }

    /// Stops the tasks and closes the link (what a process exit does, minus the closes).
    pub async fn stop(&self) {
        self.inner.stopped.set(true);
        self.inner.changed.notify(usize::MAX);
        self.inner.link.close(Duration::from_millis(100)).await;
    }
}

async fn ticker(inner: Rc<Inner>) {
    while !inner.stopped.get() {
        glommio::timer::sleep(inner.tick).await;
        if inner.stopped.get() {
            return;
        }
        inner.quorum.borrow_mut().tick();
        drive(&inner);
    }
}

async fn receiver(inner: Rc<Inner>) {
    while let Some(ev) = inner.link.next_event().await {
        if inner.stopped.get() {
            return;
        }
        match ev {
            TransportEvent::Message { from, body } => {
                let stepped =
                    messages::channel_of(&body).and_then(|(channel, rest)| match channel {
                        Channel::ControllerRequest
                        | Channel::ControllerAnswer
                        | Channel::BrokerRequest
                        | Channel::BrokerAnswer => {
                            let mut others = inner.others.borrow_mut();
                            if others.len() >= CONTROLLER_MESSAGES_QUEUED_MAX {
                                // Nobody keeps up: the asker times out and asks again.
                                return Err(format!(
                                    "{} controller messages already queued",
                                    others.len()
                                ));
                            }
                            others.push_back((
                                from,
                                channel,
                                body.slice(body.len() - rest.len()..),
                            ));
                            inner.changed.notify(usize::MAX);
                            Ok(())
                        }
                        Channel::Quorum => messages::decode_quorum(rest).and_then(|msg| {
                            // raft-rs trusts `msg.from`; the transport has authenticated `from`.
                            // A voter speaking for another (a forged vote or append ack) is refused.
                            if msg.from != messages::raft_id(from) {
                                return Err(format!(
                                    "node {from} sent a quorum message as raft id {}",
                                    msg.from
                                ));
                            }
                            inner.quorum.borrow_mut().step(msg)
                        }),
                    });
                if let Err(why) = stepped {
                    tracing::warn!(node = inner.me, peer = from, %why, "quorum message refused");
                }
                drive(&inner);
            }
            TransportEvent::Disconnected {
                node: Some(node),
                outgoing: true,
                ..
            } => {
                inner
                    .quorum
                    .borrow_mut()
                    .report_unreachable(messages::raft_id(node));
            }
            _ => {}
        }
    }
}

/// Polls the quorum and carries out what it asks, in its order.
fn drive(inner: &Inner) {
    if inner.stopped.get() {
        return;
    }
    let polled = inner.quorum.borrow_mut().poll();
    let out = match polled {
        Ok(out) => out,
        Err(why) => {
            tracing::error!(node = inner.me, %why, "metadata quorum voter stopped");
            inner.stopped.set(true);
            inner.changed.notify(usize::MAX);
            // Nobody reads the link any more: close it so peers' messages are not queued.
            let link = inner.link.clone();
            glommio::spawn_local(async move { link.close(Duration::from_millis(100)).await })
                .detach();
            return;
        }
    };
    let mut changed = false;
    if let Some(l) = out.leadership {
        let leader = Leader {
            node: messages::node_of(l.leader_id),
            is_me: l.is_leader,
            term: l.term,
        };
        if leader != inner.leader.get() {
            tracing::info!(node = inner.me, leader = ?leader.node, term = leader.term, "metadata quorum leader");
            inner.leader.set(leader);
            changed = true;
        }
    }
    {
        let mut queue = inner.committed.borrow_mut();
        if let Some((index, data)) = out.snapshot {
            queue.push_back(Committed::Snapshot { index, data });
            changed = true;
        }
        for (index, data) in out.committed {
            queue.push_back(Committed::Entry { index, data });
            changed = true;
        }
    }
    if changed {
        inner.changed.notify(usize::MAX);
    }
    for msg in out.messages {
        let Some(to) = messages::node_of(msg.to) else {
            continue;
        };
        let is_snapshot = messages::is_snapshot(&msg);
        let sent = messages::encode_quorum(&msg).and_then(|b| {
            inner
                .link
                .send(to, Bytes::from(b))
                .map_err(|e| format!("{e:?}"))
        });
        let mut q = inner.quorum.borrow_mut();
        if is_snapshot {
            // Delivery is not confirmed by the transport; a lost snapshot is retried after
            // raft-rs hears from the follower again.
            q.report_snapshot(msg.to, sent.is_ok());
        }
        if let Err(why) = sent {
            tracing::debug!(node = inner.me, peer = to, %why, "quorum message not sent");
            q.report_unreachable(msg.to);
        }
    }
}

#[cfg(test)]
mod tests;
