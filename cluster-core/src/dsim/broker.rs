//! One simulated broker: its log on a simulated disk, the metadata image it applied, and its
//! part in the partition — leader (driving the real [`PartitionLeader`]) or follower (the
//! fetch loop of `broker/src/node/replica_fetcher.rs`).
//!
//! A replica counts a record toward the high watermark once it is synced (fdatasynced) on
//! its disk (`broker/src/node/leader_written.rs`): the leader tells its core its synced end,
//! and a follower fetches again (its fetch offset acknowledges everything below it) only once
//! what it appended is synced, syncing an unsynced tail first.

use std::collections::{BTreeMap, BTreeSet};

use strand_wire::ErrorCode;

use super::controller_host::definite;
use super::disk::Disk;
use super::{
    Addr, FetchData, Msg, Out, Weakness, CONTROLLER, FETCH_TIMEOUT_MS, FETCH_WAIT_MS, HEARTBEAT_MS,
    LAG_MAX_MS, MAX_FETCH_RECORDS, REQUEST_TIMEOUT_MS, TOPIC,
};
use crate::controller::AlterPartition;
use crate::image::{Image, PartitionState};
use crate::records::{NodeId, TopicId, NO_LEADER};
use crate::replication::epoch_cache::truncation;
use crate::replication::{Effect, PartitionLeader};

pub(crate) struct Lead {
    pub(crate) epoch: i32,
    partition_epoch: i32,
    pub(crate) core: PartitionLeader,
    /// Core token -> (client token, offset of the record).
    waiting: BTreeMap<u64, (u64, i64)>,
    next_token: u64,
    /// An ISR change to ask the controller for at the next tick, and when one was asked.
    to_propose: Option<Vec<NodeId>>,
    asked_ms: Option<u64>,
    /// Fetches with nothing to return yet, held until records or a new high watermark come
    /// or `FETCH_WAIT_MS` passes (Kafka's `replica.fetch.wait.max.ms`).
    parked: Vec<Parked>,
}

struct Parked {
    from: NodeId,
    id: u64,
    leader_epoch: i32,
    offset: i64,
    /// The high watermark when it was parked.
    hw: i64,
    since_ms: u64,
}

impl Parked {
    fn answer(&self, answer: Result<FetchData, ErrorCode>) -> Out {
        let msg = Msg::FetchAnswer {
            id: self.id,
            leader_epoch: self.leader_epoch,
            offset: self.offset,
            answer,
        };
        Out::Send { to: self.from, msg }
    }
}

pub(crate) struct Follow {
    leader: NodeId,
    epoch: i32,
    /// A fetch in flight: (its offset, when it was sent, its id).
    in_flight: Option<(i64, u64, u64)>,
}

pub(crate) enum Role {
    None,
    Leader(Box<Lead>),
    Follower(Follow),
}

pub(crate) struct Broker {
    pub(crate) id: NodeId,
    pub(crate) incarnation: u64,
    pub(crate) up: bool,
    pub(crate) paused_until: Option<u64>,
    pub(crate) disk: Disk,
    /// The replica high watermark (a leader's is its core's).
    pub(crate) hw: i64,
    pub(crate) role: Role,
    image: Image,
    rejected: BTreeSet<(TopicId, i32)>,
    entry: u64,
    /// This incarnation's broker epoch, once its registration is applied here.
    broker_epoch: Option<u64>,
    last_register_ms: Option<u64>,
    last_heartbeat_ms: Option<u64>,
    min_insync_replicas: usize,
    weakness: Option<Weakness>,
    /// Truncations this node's log went through (all incarnations).
    pub(crate) truncations: u64,
    /// Replica fetches sent (their ids; all incarnations, so ids never repeat).
    fetches: u64,
}

impl Broker {
    pub(crate) fn new(id: NodeId, min_insync_replicas: usize, weakness: Option<Weakness>) -> Self {
        Broker {
            id,
            incarnation: 1,
            up: true,
            paused_until: None,
            disk: Disk::default(),
            hw: 0,
            role: Role::None,
            image: Image::default(),
            rejected: BTreeSet::new(),
            entry: 0,
            broker_epoch: None,
            last_register_ms: None,
            last_heartbeat_ms: None,
            min_insync_replicas,
            weakness,
            truncations: 0,
            fetches: 0,
        }
    }

    pub(crate) fn leading(&self) -> Option<&Lead> {
        match &self.role {
            Role::Leader(l) => Some(l),
            _ => None,
        }
    }

    /// kill -9: memory is gone; of the unwritten tail, the fraction `keep` made it out.
    /// What was written survives, synced or not (the kernel or the device holds it).
    pub(crate) fn crash(&mut self, keep: f64) {
        let unwritten = self.disk.len() - self.disk.written;
        let kept = self.disk.written + (unwritten as f64 * keep).floor() as i64;
        self.disk.cut_to(kept);
        self.down();
    }

    /// A power cut (of this node alone, or of the whole cluster): memory and every volatile
    /// cache are gone. The log keeps what was synced and, of what was written but not
    /// synced, the prefix `keep` the device happened to flush (a log's recovery stops at the
    /// first torn batch: a prefix). After the reboot all of it is synced. Returns how many
    /// written records were lost.
    pub(crate) fn power_loss(&mut self, keep: f64) -> i64 {
        let unsynced = self.disk.written - self.disk.synced;
        let kept = self.disk.synced + (unsynced as f64 * keep).floor() as i64;
        let lost = self.disk.written - kept;
        self.disk.cut_to(kept);
        self.disk.synced = self.disk.len();
        self.down();
        lost
    }

    fn down(&mut self) {
        self.up = false;
        self.paused_until = None;
        self.role = Role::None;
    }

    /// How far this replica's log counts toward the high watermark: its synced end, or
    /// weakened, its written end (the rule before syncing, or `write.caching=true`'s) or its
    /// log end.
    fn counted_end(&self) -> i64 {
        match self.weakness {
            Some(Weakness::AckUnwritten) => self.disk.len(),
            Some(Weakness::FollowersDontSync) => self.disk.written,
            _ => self.disk.synced,
        }
    }

    /// Starts an fdatasync of everything written, unless one is in flight (its end starts
    /// the next) or nothing written is unsynced.
    fn want_sync(&mut self, out: &mut Vec<Out>) {
        if self.disk.syncing.is_none() && self.disk.synced < self.disk.written {
            let upto = self.disk.written;
            self.disk.syncing = Some(upto);
            out.push(Out::Sync { upto });
        }
    }

    /// A leader tells its core how far its own log counts (unless weakened to count its log
    /// end, which the core does until told).
    fn leader_counts(&mut self, now_ms: u64, out: &mut Vec<Out>) {
        if self.weakness == Some(Weakness::AckUnwritten) {
            return;
        }
        let end = self.counted_end();
        if let Role::Leader(l) = &mut self.role {
            let effects = l.core.written(end);
            self.carry_out(effects, now_ms, out);
        }
    }

    /// A new process over the same disk: a new incarnation, registering afresh.
    pub(crate) fn restart(&mut self) {
        let mut b = Broker::new(self.id, self.min_insync_replicas, self.weakness);
        b.incarnation = self.incarnation + 1;
        // (The real broker keeps no follower high watermark across a restart: 0.)
        b.disk = std::mem::take(&mut self.disk);
        b.truncations = self.truncations;
        b.fetches = self.fetches;
        *self = b;
    }

    pub(crate) fn tick(&mut self, now_ms: u64) -> Vec<Out> {
        let mut out = Vec::new();
        let send = |out: &mut Vec<Out>, msg| {
            out.push(Out::Send {
                to: CONTROLLER,
                msg,
            })
        };
        match self.broker_epoch {
            None => {
                if self
                    .last_register_ms
                    .is_none_or(|t| now_ms >= t + REQUEST_TIMEOUT_MS)
                {
                    self.last_register_ms = Some(now_ms);
                    let incarnation = self.incarnation;
                    send(&mut out, Msg::Register { incarnation });
                }
            }
            Some(broker_epoch) => {
                if self
                    .last_heartbeat_ms
                    .is_none_or(|t| now_ms >= t + HEARTBEAT_MS)
                {
                    self.last_heartbeat_ms = Some(now_ms);
                    let metadata_offset = self.image.applied_offset;
                    send(
                        &mut out,
                        Msg::Heartbeat {
                            broker_epoch,
                            metadata_offset,
                        },
                    );
                }
            }
        }
        let from = self.image.applied_offset;
        send(&mut out, Msg::MetadataFetch { from });
        self.sync_role(now_ms, &mut out);
        match &mut self.role {
            Role::Leader(l) => {
                let effects = l.core.tick(now_ms);
                self.carry_out(effects, now_ms, &mut out);
                self.propose(now_ms, &mut out);
            }
            Role::Follower(_) => self.fetch(now_ms, false, &mut out),
            Role::None => {}
        }
        self.release_parked(now_ms, &mut out);
        out
    }

    pub(crate) fn receive(&mut self, from: Addr, msg: Msg, now_ms: u64) -> Vec<Out> {
        let mut out = Vec::new();
        match msg {
            Msg::Metadata {
                from: offset,
                records,
            } => self.metadata(offset, records, now_ms, &mut out),
            // (`broker_session.rs`: an answer to this incarnation's registration gives its
            // epoch; a stale epoch registers again.)
            Msg::Registered {
                incarnation,
                answer: Ok(epoch),
            } if incarnation == self.incarnation && self.broker_epoch.is_none() => {
                self.broker_epoch = Some(epoch);
                self.last_heartbeat_ms = None;
                self.sync_role(now_ms, &mut out);
            }
            Msg::HeartbeatAnswer {
                broker_epoch,
                error: Some(ErrorCode::StaleBrokerEpoch | ErrorCode::BrokerIdNotRegistered),
            } if Some(broker_epoch) == self.broker_epoch => {
                self.broker_epoch = None;
                self.last_register_ms = None;
            }
            Msg::AlterAnswer {
                leader_epoch,
                partition_epoch,
                error,
            } => self.alter_answered(leader_epoch, partition_epoch, error, now_ms, &mut out),
            Msg::Fetch {
                id,
                leader_epoch,
                offset,
                last_epoch,
            } => {
                let answer =
                    self.serve_fetch(from, leader_epoch, offset, last_epoch, now_ms, &mut out);
                let empty =
                    matches!(&answer, Ok(FetchData::Records { records, .. }) if records.is_empty());
                match &mut self.role {
                    Role::Leader(l) if empty => {
                        l.parked.push(Parked {
                            from,
                            id,
                            leader_epoch,
                            offset,
                            hw: self.hw,
                            since_ms: now_ms,
                        });
                    }
                    _ => {
                        let msg = Msg::FetchAnswer {
                            id,
                            leader_epoch,
                            offset,
                            answer,
                        };
                        out.push(Out::Send { to: from, msg });
                    }
                }
            }
            Msg::FetchAnswer { id, answer, .. } => self.fetched(id, answer, now_ms, &mut out),
            Msg::Produce { token, value } => self.produce(from, token, value, now_ms, &mut out),
            _ => {}
        }
        self.release_parked(now_ms, &mut out);
        out
    }

    /// Answers the parked fetches that now have records or a new high watermark to hear,
    /// or waited long enough.
    fn release_parked(&mut self, now_ms: u64, out: &mut Vec<Out>) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let (len, hw) = (self.disk.len(), self.hw);
        let ready =
            |p: &Parked| p.offset < len || p.hw != hw || now_ms >= p.since_ms + FETCH_WAIT_MS;
        let (go, stay): (Vec<_>, Vec<_>) = l.parked.drain(..).partition(ready);
        l.parked = stay;
        for p in go {
            let end = (p.offset as usize + MAX_FETCH_RECORDS).min(len as usize);
            let records = self
                .disk
                .records
                .get(p.offset as usize..end)
                .unwrap_or(&[])
                .to_vec();
            out.push(p.answer(Ok(FetchData::Records {
                records,
                high_watermark: hw,
            })));
        }
    }

    /// The disk wrote up to `upto` (or less, if the log was cut since): sync it.
    pub(crate) fn written(&mut self, upto: i64, now_ms: u64) -> Vec<Out> {
        let mut out = Vec::new();
        self.disk.written = self.disk.written.max(upto.min(self.disk.len()));
        self.want_sync(&mut out);
        self.counted(now_ms, &mut out);
        out
    }

    /// The fdatasync in flight ended: what was written when it started is synced (less, if
    /// the log was cut since). What was written meanwhile goes in the next one.
    pub(crate) fn synced(&mut self, now_ms: u64) -> Vec<Out> {
        let mut out = Vec::new();
        if let Some(upto) = self.disk.syncing.take() {
            self.disk.synced = self.disk.synced.max(upto.min(self.disk.written));
        }
        self.want_sync(&mut out);
        self.counted(now_ms, &mut out);
        out
    }

    /// More of the log is written or synced: a leader counts it, a follower may fetch on.
    fn counted(&mut self, now_ms: u64, out: &mut Vec<Out>) {
        match &self.role {
            Role::Leader(_) => self.leader_counts(now_ms, out),
            Role::Follower(_) => self.fetch(now_ms, false, out),
            Role::None => {}
        }
        self.release_parked(now_ms, out);
    }

    /// Applies fetched metadata in order, then takes up the role it names.
    fn metadata(
        &mut self,
        from: u64,
        records: Vec<(u64, crate::records::MetadataRecord)>,
        now_ms: u64,
        out: &mut Vec<Out>,
    ) {
        if from != self.image.applied_offset {
            return; // an answer to an older fetch, or a duplicate
        }
        for (i, (entry, r)) in records.into_iter().enumerate() {
            if entry != self.entry {
                self.entry = entry;
                self.rejected.clear();
            }
            self.image
                .apply_in_entry(from + 1 + i as u64, &r, &mut self.rejected);
        }
        self.sync_role(now_ms, out);
    }

    /// Takes up the role the image names, once this incarnation is registered.
    fn sync_role(&mut self, now_ms: u64, out: &mut Vec<Out>) {
        // Nothing is led or followed before this incarnation's registration is applied (and
        // while it is the one the image holds): the states before it are the old
        // incarnation's.
        let mine = self
            .image
            .brokers
            .get(&self.id)
            .is_some_and(|b| b.registration.incarnation == self.incarnation as u128);
        if self.broker_epoch.is_some() && mine {
            if let Some(p) = self.image.partition(TOPIC, 0).cloned() {
                self.take_role(&p, now_ms, out);
            }
        } else if self.broker_epoch.is_some() {
            self.step_down(out); // another incarnation's registration replaced ours
        }
    }

    fn take_role(&mut self, p: &PartitionState, now_ms: u64, out: &mut Vec<Out>) {
        let replicas: Vec<NodeId> = p.replicas.iter().map(|r| r.node).collect();
        if p.leader == self.id && p.isr.contains(&self.id) {
            if let Role::Leader(l) = &mut self.role {
                if l.epoch == p.leader_epoch {
                    if l.partition_epoch != p.partition_epoch {
                        l.partition_epoch = p.partition_epoch;
                        l.to_propose = None;
                        l.asked_ms = None;
                        let effects = l.core.replicas_committed(&replicas, p.isr.clone(), now_ms);
                        self.carry_out(effects, now_ms, out);
                    }
                    return;
                }
            }
            self.step_down(out);
            self.disk.cache.assign(p.leader_epoch, self.disk.len());
            let hw = self.hw.min(self.disk.len());
            let core = PartitionLeader::new(
                self.id,
                &replicas,
                p.isr.clone(),
                self.disk.len(),
                hw,
                self.min_insync_replicas,
                LAG_MAX_MS,
                now_ms,
            );
            self.hw = hw;
            self.role = Role::Leader(Box::new(Lead {
                epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                core,
                waiting: BTreeMap::new(),
                next_token: 0,
                to_propose: None,
                asked_ms: None,
                parked: Vec::new(),
            }));
            // Its own log counts as far as it is synced; an unsynced tail (written by the
            // last incarnation, or appended as a follower) is synced now.
            self.leader_counts(now_ms, out);
            self.want_sync(out);
        } else if p.leader != NO_LEADER && replicas.contains(&self.id) {
            if let Role::Follower(f) = &self.role {
                if f.leader == p.leader && f.epoch == p.leader_epoch {
                    return;
                }
            }
            self.step_down(out);
            if self.weakness == Some(Weakness::TruncateToHighWatermark) {
                // Kafka before KIP-101: a new follower cuts its log to its high watermark.
                let hw = self.hw.min(self.disk.len());
                self.disk.truncate(hw);
            }
            self.role = Role::Follower(Follow {
                leader: p.leader,
                epoch: p.leader_epoch,
                in_flight: None,
            });
        } else {
            self.step_down(out);
        }
    }

    /// Leadership ends: requests waiting on it are answered NOT_LEADER_OR_FOLLOWER (their
    /// records may still be committed by the next leader: the client cannot know).
    fn step_down(&mut self, out: &mut Vec<Out>) {
        if let Role::Leader(l) = std::mem::replace(&mut self.role, Role::None) {
            for (token, _) in l.waiting.into_values() {
                let msg = Msg::Produced {
                    token,
                    answer: Err(ErrorCode::NotLeaderOrFollower),
                };
                out.push(Out::Send {
                    to: super::CLIENT,
                    msg,
                });
            }
            for p in l.parked {
                out.push(p.answer(Err(ErrorCode::NotLeaderOrFollower)));
            }
        }
    }

    fn carry_out(&mut self, effects: Vec<Effect>, now_ms: u64, out: &mut Vec<Out>) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        for e in effects {
            match e {
                Effect::HighWatermark(h) => self.hw = h,
                Effect::Acked { token, result } => {
                    if let Some((client_token, offset)) = l.waiting.remove(&token) {
                        let answer = result.map(|()| (offset, l.epoch));
                        let msg = Msg::Produced {
                            token: client_token,
                            answer,
                        };
                        out.push(Out::Send {
                            to: super::CLIENT,
                            msg,
                        });
                    }
                }
                Effect::ProposeIsr(isr) => {
                    l.to_propose = Some(isr);
                    l.asked_ms = None;
                }
            }
        }
        let _ = now_ms;
    }

    /// Asks the controller for the proposed ISR change (again, once an open answer or no
    /// answer left it undecided).
    fn propose(&mut self, now_ms: u64, out: &mut Vec<Out>) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        if l.asked_ms.is_some_and(|t| now_ms < t + REQUEST_TIMEOUT_MS) {
            return;
        }
        let isr = match l.to_propose.take() {
            Some(isr) => isr,
            None if l.asked_ms.is_some() => match l.core.pending_isr() {
                Some(p) => p.to_vec(),
                None => return,
            },
            None => return,
        };
        l.asked_ms = Some(now_ms);
        let req = AlterPartition {
            node_id: self.id,
            topic: TOPIC.into(),
            partition: 0,
            leader_epoch: l.epoch,
            partition_epoch: l.partition_epoch,
            isr,
        };
        out.push(Out::Send {
            to: CONTROLLER,
            msg: Msg::Alter(req),
        });
    }

    fn alter_answered(
        &mut self,
        leader_epoch: i32,
        partition_epoch: i32,
        error: Option<ErrorCode>,
        now_ms: u64,
        out: &mut Vec<Out>,
    ) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        if l.epoch != leader_epoch || l.partition_epoch != partition_epoch {
            return; // settled by the metadata already, or an answer to an older state
        }
        l.asked_ms = None;
        match error {
            Some(code) if definite(code) || self.weakness == Some(Weakness::OpenAsRefused) => {
                let effects = l.core.isr_proposal_failed();
                self.carry_out(effects, now_ms, out);
            }
            // Committed (the metadata will bring it), or open: asked again at the next tick.
            _ => l.to_propose = l.core.pending_isr().map(<[i32]>::to_vec),
        }
    }

    /// The leader's side of a replica fetch (`replica_serve.rs`'s checks).
    fn serve_fetch(
        &mut self,
        from: NodeId,
        leader_epoch: i32,
        offset: i64,
        last_epoch: i32,
        now_ms: u64,
        out: &mut Vec<Out>,
    ) -> Result<FetchData, ErrorCode> {
        let Role::Leader(l) = &mut self.role else {
            return Err(ErrorCode::NotLeaderOrFollower);
        };
        match leader_epoch.cmp(&l.epoch) {
            std::cmp::Ordering::Less => return Err(ErrorCode::FencedLeaderEpoch),
            std::cmp::Ordering::Greater => return Err(ErrorCode::UnknownLeaderEpoch),
            std::cmp::Ordering::Equal => {}
        }
        let len = self.disk.len();
        if last_epoch >= 0 {
            let (epoch, end_offset) = self.disk.cache.end_offset_for(last_epoch, len);
            if epoch != last_epoch || end_offset < offset {
                return Ok(FetchData::Diverging { epoch, end_offset });
            }
        }
        if offset > len || offset < 0 {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        let eligible = self.image.brokers.get(&from).is_some_and(|b| !b.fenced);
        let effects = l.core.fetched(from, offset, now_ms, eligible);
        self.carry_out(effects, now_ms, out);
        let end = (offset as usize + MAX_FETCH_RECORDS).min(len as usize);
        Ok(FetchData::Records {
            records: self.disk.records[offset as usize..end].to_vec(),
            high_watermark: self.hw,
        })
    }

    /// Sends the next fetch if none is in flight (or the last one is lost) and everything
    /// appended is synced (the next fetch's offset acknowledges everything below it), unless
    /// weakened. An unsynced tail — written by the last incarnation, or by this node's own
    /// leadership — is synced first.
    fn fetch(&mut self, now_ms: u64, answered: bool, out: &mut Vec<Out>) {
        let Role::Follower(f) = &self.role else {
            return;
        };
        let lost = f
            .in_flight
            .is_some_and(|(_, sent, _)| now_ms >= sent + FETCH_TIMEOUT_MS);
        if f.in_flight.is_some() && !lost && !answered {
            return;
        }
        if self.counted_end() < self.disk.len() {
            // (Appends not yet written are synced once their write ends.)
            return self.want_sync(out);
        }
        let Role::Follower(f) = &mut self.role else {
            return;
        };
        let offset = self.disk.len();
        self.fetches += 1;
        let id = self.fetches;
        f.in_flight = Some((offset, now_ms, id));
        let msg = Msg::Fetch {
            id,
            leader_epoch: f.epoch,
            offset,
            last_epoch: self.disk.last_epoch(),
        };
        out.push(Out::Send { to: f.leader, msg });
    }

    fn fetched(
        &mut self,
        id: u64,
        answer: Result<FetchData, ErrorCode>,
        now_ms: u64,
        out: &mut Vec<Out>,
    ) {
        let Role::Follower(f) = &mut self.role else {
            return;
        };
        let Some((offset, _, asked)) = f.in_flight else {
            return;
        };
        if asked != id || self.disk.len() != offset {
            return;
        }
        f.in_flight = None;
        match answer {
            // Refused: the next tick asks again.
            Err(_) => {}
            Ok(FetchData::Diverging { epoch, end_offset }) => {
                let len = self.disk.len();
                let cut = truncation(&self.disk.cache, len, self.hw, (epoch, end_offset));
                if cut.offset < len {
                    self.disk.truncate(cut.offset);
                    self.hw = self.hw.min(self.disk.len());
                    self.truncations += 1;
                } else {
                    // Epochs led here without a record go (`drop_empty_epochs`): without
                    // this, seed 82 asks with one the leader never had, forever.
                    self.disk.cache.truncate_from_end(len);
                }
                self.fetch(now_ms, true, out);
            }
            Ok(FetchData::Records {
                records,
                high_watermark,
            }) => {
                let any = !records.is_empty();
                for (epoch, value) in records {
                    self.disk.append(epoch, value);
                }
                self.hw = high_watermark.min(self.disk.len());
                if any {
                    out.push(Out::Write {
                        upto: self.disk.len(),
                    });
                }
                // Fetch on at once (the leader holds a fetch with nothing to return), unless
                // an append still has to be written out and synced first.
                self.fetch(now_ms, true, out);
            }
        }
    }

    fn produce(&mut self, client: Addr, token: u64, value: u64, now_ms: u64, out: &mut Vec<Out>) {
        let refuse = |out: &mut Vec<Out>, code| {
            let msg = Msg::Produced {
                token,
                answer: Err(code),
            };
            out.push(Out::Send { to: client, msg });
        };
        let Role::Leader(l) = &mut self.role else {
            return refuse(out, ErrorCode::NotLeaderOrFollower);
        };
        if let Err(code) = l.core.admit_acks_all() {
            return refuse(out, code);
        }
        let offset = self.disk.len();
        self.disk.append(l.epoch, value);
        out.push(Out::Write {
            upto: self.disk.len(),
        });
        if self.weakness == Some(Weakness::AcksOne) {
            let effects = l.core.appended(self.disk.len(), None);
            let msg = Msg::Produced {
                token,
                answer: Ok((offset, l.epoch)),
            };
            out.push(Out::Send { to: client, msg });
            return self.carry_out(effects, now_ms, out);
        }
        l.next_token += 1;
        let core_token = l.next_token;
        l.waiting.insert(core_token, (token, offset));
        let effects = l.core.appended(self.disk.len(), Some(core_token));
        self.carry_out(effects, now_ms, out);
    }
}
