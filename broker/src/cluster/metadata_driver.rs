//! The metadata side of one cluster node, on its controller executor: a [`QuorumVoter`]
//! orders the metadata log, a sans-IO [`MetadataNode`] applies it to the image and (on the
//! quorum's leader) is the active controller. This file only moves things between them:
//!
//! - committed entries and snapshots -> `MetadataNode` (an entry that does not decode stops
//!   the node: skipping it would fork its image); every `snapshot_every_entries` entries
//!   (`limits::METADATA_SNAPSHOT_EVERY_ENTRIES`) the image is saved as the quorum's snapshot;
//! - leader changes -> `MetadataNode::on_leader`; a 100 ms tick -> `MetadataNode::tick`;
//! - controller requests from other nodes (channel `ControllerRequest`) -> the node, and its
//!   answers back (channel `ControllerAnswer`);
//! - [`MetadataDriver::call`]: this node's broker asking the controller, wherever it is —
//!   in process when this node leads, else over the link, again at a new leader when the
//!   leadership moves (only a request that can be repeated; a CreateTopic waits for the
//!   answer to its first ask, which may still commit), until an answer or the deadline.
//!
//! A remote answer counts only from the node the request went to (the transport has
//! authenticated it), and a remote request naming a node (registration, heartbeat, producer
//! ids) only for the sender's own node id (`MetadataNode` checks that).

use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use event_listener::Event;
use strand_cluster_core::controller::ControllerConfig;
use strand_cluster_core::controller_rpc::{self, Answer, Request};
use strand_cluster_core::image::Image;
use strand_cluster_core::limits::CONTROLLER_REQUEST_TIMEOUT_MS;
use strand_cluster_core::liveness::Evidence;
use strand_cluster_core::messages::{self, Channel};
use strand_cluster_core::metadata_node::{Asker, Effect, MetadataNode, ShardOf};
use strand_cluster_core::records::NodeId;
use strand_wire::ErrorCode;

use super::quorum_driver::{Committed, Leader, ProposeError, QuorumVoter, VoterSpec};

/// How often the active controller looks at the time (broker sessions, request deadlines).
const CONTROLLER_TICK_MS: u64 = 100;

/// How to start a node's metadata side.
pub struct MetadataSpec {
    pub voter: VoterSpec,
    pub controller: ControllerConfig,
    /// The shard a partition lives on at a node with `shards` shards (the broker's hash).
    pub shard_of: ShardOf,
    /// Entries between snapshots (`limits::METADATA_SNAPSHOT_EVERY_ENTRIES`; tests use fewer).
    pub snapshot_every_entries: u64,
}

/// A call of this node's broker in flight.
struct Call {
    /// The node the request went to (`None`: answered in process).
    asked: Option<NodeId>,
    answer: Option<Answer>,
}

struct Inner {
    me: NodeId,
    voter: QuorumVoter,
    node: RefCell<MetadataNode>,
    /// The image as last handed out; dropped when an entry applies, rebuilt on demand.
    published: RefCell<Option<Rc<Image>>>,
    /// Fired when an entry or snapshot applies, an answer arrives, or the leader changes.
    changed: Event,
    calls: RefCell<BTreeMap<u64, Call>>,
    next_call: Cell<u64>,
    started: Instant,
    entries_since_snapshot: Cell<u64>,
    snapshot_every_entries: u64,
    stopped: Cell<bool>,
    /// Broker-to-broker messages received (`BrokerRequest` / `BrokerAnswer`), for the caller.
    broker_messages: RefCell<std::collections::VecDeque<(NodeId, Channel, bytes::Bytes)>>,
}

/// A node's metadata side; clones share it.
#[derive(Clone)]
pub struct MetadataDriver {
    inner: Rc<Inner>,
}

impl Inner {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

impl MetadataDriver {
    /// Starts the voter and the driver's tasks on the current executor.
    pub fn start(spec: MetadataSpec) -> io::Result<MetadataDriver> {
        let me = spec.voter.me;
        let voter = QuorumVoter::start(spec.voter)?;
        let node = MetadataNode::new(
            me,
            spec.controller,
            CONTROLLER_REQUEST_TIMEOUT_MS,
            spec.shard_of,
        );
        let inner = Rc::new(Inner {
            me,
            voter,
            node: RefCell::new(node),
            published: RefCell::new(None),
            changed: Event::new(),
            calls: RefCell::new(BTreeMap::new()),
            next_call: Cell::new(1),
            started: Instant::now(),
            entries_since_snapshot: Cell::new(0),
            snapshot_every_entries: spec.snapshot_every_entries.max(1),
            stopped: Cell::new(false),
            broker_messages: RefCell::new(Default::default()),
        });
        glommio::spawn_local(applier(Rc::clone(&inner))).detach();
        glommio::spawn_local(leader_watch(Rc::clone(&inner))).detach();
        glommio::spawn_local(ticker(Rc::clone(&inner))).detach();
        glommio::spawn_local(receiver(Rc::clone(&inner))).detach();
        Ok(MetadataDriver { inner })
    }

    pub fn me(&self) -> NodeId {
        self.inner.me
    }

    /// The committed metadata as applied here.
    pub fn image(&self) -> Rc<Image> {
        let mut published = self.inner.published.borrow_mut();
        Rc::clone(
            published.get_or_insert_with(|| Rc::new(self.inner.node.borrow().image().clone())),
        )
    }

    /// A listener fired on the next change (an entry or snapshot applied, an answer, a leader
    /// change, a stop): take it before looking at the state, then await it.
    pub fn listen(&self) -> event_listener::EventListener {
        self.inner.changed.listen()
    }

    /// The metadata log offset applied here.
    pub fn applied_offset(&self) -> u64 {
        self.inner.node.borrow().image().applied_offset
    }

    pub fn leader(&self) -> Leader {
        self.inner.voter.leader()
    }

    /// The metadata quorum as this node's voter sees it.
    pub fn quorum_status(&self) -> strand_cluster_core::quorum::QuorumStatus {
        self.inner.voter.status()
    }

    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.get() || self.inner.voter.is_stopped()
    }

    /// Waits until the image here has applied `offset` (a write this node asked for, so it
    /// reads its own writes); false if `limit` passed first.
    pub async fn applied(&self, offset: u64, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        loop {
            let listener = self.inner.changed.listen();
            if self.applied_offset() >= offset {
                return true;
            }
            let Some(left) = end.checked_duration_since(Instant::now()) else {
                return false;
            };
            if self.is_stopped() {
                return false;
            }
            let _ = glommio::timer::timeout(left, async {
                listener.await;
                Ok(())
            })
            .await;
        }
    }

    /// Asks the active controller, wherever it is, until an answer or `limit`.
    /// NOT_CONTROLLER answers are retried at the new leader, and so are leadership moves
    /// for a [`Request::repeatable`] request (one that is not waits for its first ask's
    /// answer: that batch may still commit); the answer to a request whose deadline passed
    /// is REQUEST_TIMED_OUT.
    pub async fn call(&self, req: Request, limit: Duration) -> Answer {
        let inner = &self.inner;
        let end = Instant::now() + limit;
        loop {
            let id = inner.next_call.get();
            inner.next_call.set(id + 1);
            // Forgets the call when this ask ends, also when the caller drops the future.
            let _forget = ForgetCall { inner, id };
            let leader = inner.voter.leader();
            // Whether the request may have reached a controller (then a request that is not
            // `repeatable` waits for that ask's answer even when the leadership moves).
            let mut sent = true;
            match leader.node {
                Some(n) if n == inner.me => {
                    inner.calls.borrow_mut().insert(
                        id,
                        Call {
                            asked: None,
                            answer: None,
                        },
                    );
                    let effects = inner.node.borrow_mut().request_with_id(
                        Asker::Local(id),
                        req.clone(),
                        inner.now_ms(),
                        uuid::Uuid::new_v4().into_bytes(),
                    );
                    handle(inner, effects);
                }
                Some(n) => {
                    inner.calls.borrow_mut().insert(
                        id,
                        Call {
                            asked: Some(n),
                            answer: None,
                        },
                    );
                    let body = controller_rpc::encode_request(id, &req);
                    if let Err(why) = inner
                        .voter
                        .send(n, messages::with_channel(Channel::ControllerRequest, &body))
                    {
                        tracing::debug!(node = inner.me, %why, "controller request not sent");
                        sent = false;
                    }
                }
                // No leader yet: the wait below ends when one is known.
                None => sent = false,
            }
            // Wait for the answer, a leadership move (ask again there, unless the first ask
            // may have committed a change that a repeat would refuse), or the deadline.
            let answer = loop {
                let listener = inner.changed.listen();
                if let Some(a) = take_answer(inner, id) {
                    break Some(a);
                }
                if self.is_stopped()
                    || (inner.voter.leader() != leader && (!sent || req.repeatable()))
                {
                    break None;
                }
                let Some(left) = end.checked_duration_since(Instant::now()) else {
                    break None;
                };
                let _ = glommio::timer::timeout(left, async {
                    listener.await;
                    Ok(())
                })
                .await;
            };
            match answer {
                Some(a) if matches!(a.error, Some((ErrorCode::NotController, _))) => {}
                Some(a) => return a,
                None => {}
            }
            if self.is_stopped() || Instant::now() >= end {
                return Answer::refused(
                    0,
                    ErrorCode::RequestTimedOut,
                    format!(
                        "no answer from the active controller within {} ms (a {} request)",
                        limit.as_millis(),
                        req.kind()
                    ),
                );
            }
            // Leadership is moving: a short pause before asking again.
            glommio::timer::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The next broker-to-broker message (sender, channel, body after the channel byte);
    /// `None` once stopped.
    pub async fn next_broker_message(&self) -> Option<(NodeId, Channel, bytes::Bytes)> {
        loop {
            let listener = self.inner.changed.listen();
            if let Some(m) = self.inner.broker_messages.borrow_mut().pop_front() {
                return Some(m);
            }
            if self.is_stopped() {
                return None;
            }
            listener.await;
        }
    }

    /// Sends a broker-to-broker message (`body` after its channel byte) to `node`.
    pub fn send_to(&self, node: NodeId, channel: Channel, body: &[u8]) -> Result<(), String> {
        self.inner
            .voter
            .send(node, messages::with_channel(channel, body))
    }

    /// Sends a broker-to-broker message whose body (after the channel byte) is `chunks`,
    /// each buffer as it is: a replica fetch's answer carries the leader's log buffers.
    pub fn send_chunks_to(
        &self,
        node: NodeId,
        channel: Channel,
        mut chunks: Vec<Bytes>,
    ) -> Result<(), String> {
        chunks.insert(0, Bytes::copy_from_slice(&[channel as u8]));
        self.inner.voter.send_chunks(node, chunks)
    }

    /// Liveness evidence from this node's tripwire (`cluster::tripwire`): a dead process
    /// is fenced at once when this node is the controller (or becomes it while the evidence
    /// holds: each node keeps what its own tripwire saw) and replaced as the quorum's
    /// leader if it led.
    pub fn peer_evidence(&self, node: NodeId, evidence: Evidence) {
        let inner = &self.inner;
        if inner.stopped.get() {
            return;
        }
        match evidence {
            Evidence::Gone { incarnation } => {
                let registered = inner
                    .node
                    .borrow()
                    .image()
                    .brokers
                    .get(&node)
                    .map(|b| b.registration.incarnation);
                if registered.is_some_and(|r| r != incarnation) {
                    // An incarnation already replaced (the node restarted meanwhile).
                    tracing::info!(
                        node = inner.me,
                        peer = node,
                        "an earlier process of node {node} is gone"
                    );
                    return;
                }
                let controller = inner.node.borrow().is_controller();
                tracing::warn!(
                    node = inner.me,
                    peer = node,
                    controller,
                    "node {node}'s process is gone (its tripwire closed and its port refuses){}",
                    if controller { ": fencing it now" } else { "" }
                );
                inner.voter.peer_gone(node);
                let effects = inner
                    .node
                    .borrow_mut()
                    .peer_gone(node, incarnation, inner.now_ms());
                handle(inner, effects);
            }
            Evidence::Up { incarnation } => {
                inner.voter.peer_up(node);
                inner.node.borrow_mut().peer_up(node, incarnation);
            }
            Evidence::Suspect { .. } => {}
        }
    }

    /// Stops the tasks and the voter.
    pub async fn stop(&self) {
        self.inner.stopped.set(true);
        self.inner.changed.notify(usize::MAX);
        self.inner.voter.stop().await;
    }
}

/// Removes a call's entry when dropped.
struct ForgetCall<'a> {
    inner: &'a Inner,
    id: u64,
}

impl Drop for ForgetCall<'_> {
    fn drop(&mut self) {
        self.inner.calls.borrow_mut().remove(&self.id);
    }
}

fn take_answer(inner: &Inner, id: u64) -> Option<Answer> {
    inner
        .calls
        .borrow_mut()
        .get_mut(&id)
        .and_then(|c| c.answer.take())
}

/// Carries out what the metadata node asks, in order.
fn handle(inner: &Inner, effects: Vec<Effect>) {
    let mut queue: std::collections::VecDeque<Effect> = effects.into();
    while let Some(e) = queue.pop_front() {
        match e {
            Effect::Propose { data, request } => match inner.voter.propose(data) {
                Ok(index) => {
                    if let Some(r) = request {
                        inner.node.borrow_mut().proposed(r, index);
                    }
                }
                Err(err) => {
                    let leader = match err {
                        ProposeError::NotLeader(l) => l,
                        ProposeError::TooLarge(n) => {
                            tracing::error!(
                                node = inner.me,
                                bytes = n,
                                "metadata batch too large to propose"
                            );
                            None
                        }
                        ProposeError::Stopped => None,
                    };
                    if let Some(r) = request {
                        queue.extend(inner.node.borrow_mut().proposal_failed(r, leader));
                    }
                }
            },
            Effect::Answer {
                to: Asker::Local(id),
                answer,
            } => {
                if let Some(c) = inner.calls.borrow_mut().get_mut(&id) {
                    c.answer = Some(answer);
                }
                inner.changed.notify(usize::MAX);
            }
            Effect::Answer {
                to: Asker::Remote(node, _),
                answer,
            } => {
                let body = controller_rpc::encode_answer(&answer);
                if let Err(why) = inner.voter.send(
                    node,
                    messages::with_channel(Channel::ControllerAnswer, &body),
                ) {
                    tracing::debug!(node = inner.me, peer = node, %why, "controller answer not sent");
                }
            }
        }
    }
}

async fn applier(inner: Rc<Inner>) {
    while let Some(c) = inner.voter.next_committed().await {
        if inner.stopped.get() {
            return;
        }
        let now_ms = inner.now_ms();
        let applied = match c {
            Committed::Snapshot { index, data } => {
                inner.entries_since_snapshot.set(0);
                tracing::info!(
                    node = inner.me,
                    index,
                    bytes = data.len(),
                    "metadata image restored from a snapshot"
                );
                inner
                    .node
                    .borrow_mut()
                    .on_snapshot(index, &data, now_ms)
                    .map(|()| (index, Vec::new()))
            }
            Committed::Entry { index, data } => inner
                .node
                .borrow_mut()
                .on_committed(index, &data)
                .map(|effects| (index, effects)),
        };
        let (index, effects) = match applied {
            Ok(a) => a,
            Err(why) => {
                tracing::error!(node = inner.me, %why, "metadata log cannot be applied; this node stops serving metadata");
                inner.stopped.set(true);
                inner.changed.notify(usize::MAX);
                return;
            }
        };
        inner.published.borrow_mut().take();
        handle(&inner, effects);
        inner.changed.notify(usize::MAX);
        let since = inner.entries_since_snapshot.get() + 1;
        inner.entries_since_snapshot.set(since);
        if since >= inner.snapshot_every_entries {
            inner.entries_since_snapshot.set(0);
            let data = inner.node.borrow().snapshot_data();
            if let Err(why) = inner.voter.save_snapshot(index, data) {
                tracing::warn!(node = inner.me, %why, "metadata snapshot not saved");
            }
        }
    }
}

async fn leader_watch(inner: Rc<Inner>) {
    let mut last = inner.voter.leader();
    inner.node.borrow_mut().on_leader(last.node, inner.now_ms());
    while !inner.stopped.get() && !inner.voter.is_stopped() {
        let l = inner
            .voter
            .leader_change(last, Duration::from_millis(500))
            .await;
        if l != last {
            last = l;
            inner.node.borrow_mut().on_leader(l.node, inner.now_ms());
            inner.changed.notify(usize::MAX);
            if l.is_me {
                // A new controller acts at once on what it knows (liveness evidence for a
                // dead predecessor), not at the next tick.
                let effects = inner.node.borrow_mut().tick(inner.now_ms());
                handle(&inner, effects);
            }
        }
    }
}

async fn ticker(inner: Rc<Inner>) {
    while !inner.stopped.get() && !inner.voter.is_stopped() {
        glommio::timer::sleep(Duration::from_millis(CONTROLLER_TICK_MS)).await;
        let effects = inner.node.borrow_mut().tick(inner.now_ms());
        handle(&inner, effects);
    }
}

async fn receiver(inner: Rc<Inner>) {
    while let Some((from, channel, body)) = inner.voter.next_message().await {
        if inner.stopped.get() {
            return;
        }
        match channel {
            Channel::ControllerRequest => match controller_rpc::decode_request(&body) {
                Ok((rid, req)) => {
                    let effects = inner.node.borrow_mut().request_with_id(
                        Asker::Remote(from, rid),
                        req,
                        inner.now_ms(),
                        uuid::Uuid::new_v4().into_bytes(),
                    );
                    handle(&inner, effects);
                }
                Err(why) => {
                    tracing::warn!(node = inner.me, peer = from, %why, "controller request refused");
                }
            },
            Channel::ControllerAnswer => match controller_rpc::decode_answer(&body) {
                Ok(answer) => {
                    let mut calls = inner.calls.borrow_mut();
                    match calls.get_mut(&answer.request_id) {
                        Some(c) if c.asked == Some(from) => {
                            c.answer = Some(answer);
                            drop(calls);
                            inner.changed.notify(usize::MAX);
                        }
                        _ => {
                            tracing::debug!(
                                node = inner.me,
                                peer = from,
                                request = answer.request_id,
                                "controller answer for no call of ours"
                            );
                        }
                    }
                }
                Err(why) => {
                    tracing::warn!(node = inner.me, peer = from, %why, "controller answer refused");
                }
            },
            Channel::BrokerRequest | Channel::BrokerAnswer => {
                let mut queued = inner.broker_messages.borrow_mut();
                if queued.len() >= strand_cluster_core::limits::CONTROLLER_MESSAGES_QUEUED_MAX {
                    tracing::warn!(
                        node = inner.me,
                        peer = from,
                        "broker messages not taken; dropped"
                    );
                    continue;
                }
                queued.push_back((from, channel, body));
                drop(queued);
                inner.changed.notify(usize::MAX);
            }
            Channel::Quorum => {}
        }
    }
}

#[cfg(test)]
mod tests;
