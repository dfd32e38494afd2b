//! The leader's side of replication (#18): a `PartitionLeader` (the sans-IO rules in
//! `strand_cluster_core::replication`) per partition this node leads with replicas on other
//! nodes, fed by the log's end after appends and how far it is written (`leader_written`),
//! by followers' fetch offsets and by time; its
//! effects are carried out here: the high watermark wakes waiting consumer fetches, `acks=all`
//! produce requests complete (NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
//! `min.insync.replicas` meanwhile), and ISR changes go to the controller as AlterPartition —
//! the leader acts on a new ISR only once the view it applies holds it.
//!
//! A partition with one replica has no state here: every path checks for it first, so a
//! single node and a cluster without replication run exactly as before.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use futures_channel::oneshot;
use strand_cluster_core::controller::AlterPartition;
use strand_cluster_core::controller_rpc::Request;
use strand_cluster_core::replication::{Effect, PartitionLeader};
use strand_wire::ErrorCode;
use tracing::{debug, info};

use super::{Node, TopicPartition};
use crate::limits;
use crate::storage::{Offset, PartitionLog};

/// One led, replicated partition.
pub(super) struct Led {
    /// The leader and partition epochs of the view this state follows.
    leader_epoch: i32,
    partition_epoch: i32,
    core: PartitionLeader,
    /// `acks=all` requests waiting for the high watermark, by token.
    waiting: HashMap<u64, oneshot::Sender<Result<(), ErrorCode>>>,
    next_token: u64,
    /// An ISR change the core proposed, for the ticker to send.
    to_propose: Option<Vec<i32>>,
}

impl Node {
    /// Whether `tp` is led here with replicas elsewhere; its state is made (or remade, at a
    /// new leader epoch) from the view: replicas, ISR, the log's end, and the high watermark
    /// last heard as a follower.
    fn ensure_led(&self, tp: &TopicPartition, log: &PartitionLog) -> bool {
        let Some(view) = self.catalog().cluster.clone() else {
            return false;
        };
        let Some(p) = view.partition(&tp.0, tp.1) else {
            return false;
        };
        if p.leader != view.me || p.replicas.len() < 2 || !p.isr.contains(&view.me) {
            return false;
        }
        if let Some(led) = self.leaders.borrow().get(tp) {
            // (A log shorter than the core knows was truncated by a fetcher that had not
            // stopped yet when this node became leader: start again from the log.)
            // (Nor one that counts more of its log as written than the log does now: the
            // log was truncated and appended to again since.)
            let written_ok = led
                .core
                .written_end()
                .is_none_or(|w| w <= self.replicated_end(tp, log));
            if led.leader_epoch == p.leader_epoch
                && led.core.log_end() <= log.log_end().0
                && written_ok
            {
                return true;
            }
        }
        let replicas: Vec<i32> = p.replicas.iter().map(|r| r.node).collect();
        let min_isr = self
            .catalog()
            .topics
            .get(&tp.0)
            .map_or(1, |t| t.min_insync_replicas());
        let log_end = log.log_end().0;
        let hw = log.replica_high_watermark().clamp(0, log_end);
        let core = PartitionLeader::new(
            view.me,
            &replicas,
            p.isr.clone(),
            log_end,
            hw,
            min_isr,
            self.config()
                .cluster
                .as_ref()
                .map_or(limits::REPLICA_LAG_TIME_MAX_MS, |c| {
                    c.replica_lag_time_max_ms
                }),
            crate::runtime::clock::now_ms().max(0) as u64,
        );
        info!(topic = %tp.0, partition = tp.1, epoch = p.leader_epoch, isr = ?p.isr, hw, "leading a replicated partition");
        let old = self.leaders.borrow_mut().insert(
            tp.clone(),
            Led {
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                core,
                waiting: HashMap::new(),
                next_token: 0,
                to_propose: None,
            },
        );
        if let Some(old) = old {
            for (_, w) in old.waiting {
                let _ = w.send(Err(ErrorCode::NotLeaderOrFollower));
            }
        }
        // The high watermark over the committed ISR as of now: with the leader alone in it
        // (a partition just widened from one replica by a reassignment) that is the log end,
        // which consumers could already read; it must not wait for the first fetch.
        let effects = self
            .leaders
            .borrow_mut()
            .get_mut(tp)
            .map(|led| {
                // `written` first: told the log end alone, a core counts its leader at the
                // log end, unwritten tail and all, and the watermark never goes back.
                let mut effects = led.core.written(self.replicated_end(tp, log));
                effects.extend(led.core.appended(log_end, None));
                effects
            })
            .unwrap_or_default();
        self.carry_out(tp, effects);
        // (What this log holds from before, as a follower, may still be queued only.)
        self.want_written(tp, log);
        true
    }

    /// Before an `acks=all` append: NOT_ENOUGH_REPLICAS when the committed ISR is below
    /// `min.insync.replicas`. `Ok(true)`: the partition is replicated (the append must then
    /// be tracked, or the request fails: see `track_append`).
    pub(super) fn admit_acks_all(
        &self,
        tp: &TopicPartition,
        log: &PartitionLog,
    ) -> Result<bool, ErrorCode> {
        if !self.ensure_led(tp, log) {
            return Ok(false);
        }
        self.leaders
            .borrow()
            .get(tp)
            .map_or(Ok(false), |led| led.core.admit_acks_all().map(|()| true))
    }

    /// After an append to `tp`: the core learns the log's end; with `acks_all`, the receiver
    /// resolves once the ISR holds the batch. `None` when the partition is not replicated.
    pub(super) fn track_append(
        &self,
        tp: &TopicPartition,
        log: &PartitionLog,
        acks_all: bool,
    ) -> Option<oneshot::Receiver<Result<(), ErrorCode>>> {
        if !self.ensure_led(tp, log) {
            return None;
        }
        let (effects, rx) = {
            let mut leaders = self.leaders.borrow_mut();
            let led = leaders.get_mut(tp)?;
            let (token, rx) = if acks_all {
                let (tx, rx) = oneshot::channel();
                led.next_token += 1;
                led.waiting.insert(led.next_token, tx);
                (Some(led.next_token), Some(rx))
            } else {
                (None, None)
            };
            (led.core.appended(log.log_end().0, token), rx)
        };
        self.carry_out(tp, effects);
        // The high watermark passes the batch once it is written here too.
        self.want_written(tp, log);
        rx
    }

    /// A follower's fetch from `offset` (it holds everything below): the core's view of it,
    /// and the high watermark to send back (the log end when the partition has no state).
    pub(super) fn follower_fetched(
        &self,
        tp: &TopicPartition,
        log: &PartitionLog,
        replica: i32,
        offset: i64,
    ) -> i64 {
        if !self.ensure_led(tp, log) {
            return log.log_end().0;
        }
        let now_ms = crate::runtime::clock::now_ms().max(0) as u64;
        // KIP-841: a fenced (stopped, or shutting down) broker does not join the ISR.
        let eligible = self
            .catalog()
            .cluster
            .as_ref()
            .and_then(|v| v.brokers.get(&replica).map(|b| !b.fenced))
            .unwrap_or(false);
        let (effects, hw) = {
            let mut leaders = self.leaders.borrow_mut();
            let Some(led) = leaders.get_mut(tp) else {
                return log.log_end().0;
            };
            let mut effects = led.core.appended(log.log_end().0, None);
            effects.extend(led.core.written(self.replicated_end(tp, log)));
            effects.extend(led.core.fetched(replica, offset, now_ms, eligible));
            (effects, led.core.high_watermark())
        };
        self.carry_out(tp, effects);
        hw
    }

    /// The high watermark of `tp` if this node leads it now, read as is (no side effects:
    /// for `GET /metrics`).
    pub(super) fn led_high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.leaders
            .borrow()
            .get(tp)
            .map(|led| led.core.high_watermark())
    }

    /// Each of `followers` (replica node ids) of led `tp` and its records behind the
    /// leader's log end, as this leader last heard (empty: not led here with replicas
    /// elsewhere).
    pub(super) fn led_follower_lags(
        &self,
        tp: &TopicPartition,
        followers: impl Iterator<Item = i32>,
    ) -> Vec<(i32, i64)> {
        let leaders = self.leaders.borrow();
        let Some(led) = leaders.get(tp) else {
            return Vec::new();
        };
        let core = &led.core;
        followers
            .filter_map(|node| {
                let f = core.follower(node)?;
                Some((node, (core.log_end() - f.log_end).max(0)))
            })
            .collect()
    }

    /// What consumers may read of `tp`: its high watermark when it is led and replicated.
    pub(super) fn visible_end(&self, tp: &TopicPartition, log: &PartitionLog) -> Option<Offset> {
        if !self.ensure_led(tp, log) {
            return None;
        }
        self.leaders
            .borrow()
            .get(tp)
            .map(|led| Offset(led.core.high_watermark()))
    }

    /// The core of `tp` learns how far its log is written (`leader_written`).
    pub(super) fn leader_written(&self, tp: &TopicPartition, log: &PartitionLog) {
        // (A round on a log since deleted says nothing about a topic re-created in its name.)
        if !self.local(tp).is_some_and(|l| l.is_same(log)) {
            return;
        }
        let effects = match self.leaders.borrow_mut().get_mut(tp) {
            Some(led) => led.core.written(self.replicated_end(tp, log)),
            None => return,
        };
        self.carry_out(tp, effects);
    }

    fn carry_out(&self, tp: &TopicPartition, effects: Vec<Effect>) {
        let mut moved = false;
        {
            let mut leaders = self.leaders.borrow_mut();
            let Some(led) = leaders.get_mut(tp) else {
                return;
            };
            for e in effects {
                match e {
                    Effect::HighWatermark(hw) => {
                        moved = true;
                        // Kept with the log: a state rebuilt later (a new leader epoch here)
                        // starts from it, so the high watermark never goes back.
                        if let Some(log) = self.local(tp) {
                            log.set_replica_high_watermark(hw);
                        }
                    }
                    Effect::Acked { token, result } => {
                        if let Some(w) = led.waiting.remove(&token) {
                            let _ = w.send(result);
                        }
                    }
                    Effect::ProposeIsr(isr) => led.to_propose = Some(isr),
                }
            }
        }
        if moved {
            // Consumers long-polling at the old high watermark read on.
            self.shared.appended[self.shard].notify(usize::MAX);
            if let Some(log) = self.local(tp) {
                log.notify_readers();
            }
        }
    }

    /// After a catalog change: state for partitions no longer led here at its epoch goes
    /// (waiting `acks=all` requests get NOT_LEADER_OR_FOLLOWER); a newer partition epoch
    /// brings the committed ISR to the core; a changed `min.insync.replicas` applies at once.
    pub(super) fn sync_leaders(&self) {
        let Some(view) = self.catalog().cluster.clone() else {
            return;
        };
        if self.leaders.borrow().is_empty() {
            return;
        }
        {
            let catalog = self.catalog();
            for (tp, led) in self.leaders.borrow_mut().iter_mut() {
                if let Some(t) = catalog.topics.get(&tp.0) {
                    led.core.set_min_insync_replicas(t.min_insync_replicas());
                }
            }
        }
        let mut changed = Vec::new();
        let mut gone = Vec::new();
        for (tp, led) in self.leaders.borrow().iter() {
            match view.partition(&tp.0, tp.1) {
                Some(p)
                    if p.leader == view.me
                        && p.leader_epoch == led.leader_epoch
                        && p.isr.contains(&view.me) =>
                {
                    if p.partition_epoch != led.partition_epoch {
                        let replicas: Vec<i32> = p.replicas.iter().map(|r| r.node).collect();
                        changed.push((tp.clone(), replicas, p.isr.clone(), p.partition_epoch));
                    }
                }
                _ => gone.push(tp.clone()),
            }
        }
        for tp in gone {
            if let Some(old) = self.leaders.borrow_mut().remove(&tp) {
                for (_, w) in old.waiting {
                    let _ = w.send(Err(ErrorCode::NotLeaderOrFollower));
                }
            }
        }
        let now_ms = crate::runtime::clock::now_ms().max(0) as u64;
        for (tp, replicas, isr, partition_epoch) in changed {
            let effects = {
                let mut leaders = self.leaders.borrow_mut();
                let Some(led) = leaders.get_mut(&tp) else {
                    continue;
                };
                led.partition_epoch = partition_epoch;
                led.to_propose = None;
                info!(topic = %tp.0, partition = tp.1, ?replicas, ?isr, "partition state committed");
                // A reassignment's added replica gets a follower entry here (it is then
                // proposed into the ISR once caught up); a removed one is dropped. A removal
                // also bumps the leader epoch, so this state is rebuilt instead.
                led.core.replicas_committed(&replicas, isr, now_ms)
            };
            self.carry_out(&tp, effects);
        }
    }

    /// Every `REPLICA_TICK_MS`: ISR members that lag too long are proposed out, and proposed
    /// ISR changes go to the controller (one at a time per partition; a refusal lets the core
    /// propose again). Runs for the life of the shard once replication is in use.
    pub(super) fn start_replication_ticker(self: &Rc<Self>) {
        self.start_leader_writer();
        if self.replication_ticking.replace(true) {
            return;
        }
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            let period = Duration::from_millis(limits::REPLICA_TICK_MS);
            loop {
                glommio::timer::sleep(period).await;
                me.tick_leaders();
            }
        })
        .detach();
    }

    fn tick_leaders(self: &Rc<Self>) {
        let now_ms = crate::runtime::clock::now_ms().max(0) as u64;
        let tps: Vec<TopicPartition> = self.leaders.borrow().keys().cloned().collect();
        for tp in tps {
            let effects = match self.leaders.borrow_mut().get_mut(&tp) {
                Some(led) => led.core.tick(now_ms),
                None => continue,
            };
            self.carry_out(&tp, effects);
            let proposal = self.leaders.borrow_mut().get_mut(&tp).and_then(|led| {
                led.to_propose.take().map(|isr| AlterPartition {
                    node_id: led.core_me(),
                    topic: tp.0.clone(),
                    partition: tp.1,
                    leader_epoch: led.leader_epoch,
                    partition_epoch: led.partition_epoch,
                    isr,
                })
            });
            if let Some(req) = proposal {
                self.propose_isr(tp, req);
            }
        }
    }

    fn propose_isr(self: &Rc<Self>, tp: TopicPartition, req: AlterPartition) {
        let Some(handle) = self.shared.cluster.clone() else {
            return;
        };
        let me = Rc::clone(self);
        info!(topic = %tp.0, partition = tp.1, isr = ?req.isr, "asking the controller for an ISR change");
        let (asked_leader_epoch, asked_partition_epoch) = (req.leader_epoch, req.partition_epoch);
        glommio::spawn_local(async move {
            let answer = handle.call(Request::AlterPartition(req)).await;
            if let Some((code, message)) = &answer.error {
                debug!(topic = %tp.0, partition = tp.1, ?code, %message, "ISR change refused");
            }
            // Accepted: the view that holds it reached this shard before the answer did
            // (`sync_leaders` gave it to the core). Refused, or nothing to change: the core
            // may propose again.
            let epoch_now = me
                .catalog()
                .cluster
                .as_ref()
                .and_then(|v| v.partition(&tp.0, tp.1))
                .map(|p| p.partition_epoch);
            let effects = me.leaders.borrow_mut().get_mut(&tp).and_then(|led| {
                // Only for the state that asked and while the view is still the one it asked
                // from: an answer arriving after a newer proposal must not clear that one.
                let same = led.leader_epoch == asked_leader_epoch
                    && led.partition_epoch == asked_partition_epoch;
                if !same {
                    return None;
                }
                match &answer.error {
                    // A definite refusal (nothing was written): the maximal ISR is the
                    // committed one again, and the next input may propose afresh.
                    Some((ErrorCode::IneligibleReplica | ErrorCode::InvalidRequest, _)) => {
                        Some(led.core.isr_proposal_failed())
                    }
                    // Committed: the view holding it reached this shard first (`sync_leaders`
                    // settled it, and `same` is false by now).
                    None if epoch_now != Some(asked_partition_epoch) => None,
                    // Anything else leaves the outcome open: a success answered before this
                    // node applied it (`serve_call` gave up waiting), a timeout, a stale-epoch
                    // refusal of a repeat that may have committed, a new controller whose
                    // image is behind. The same change is asked again by the ticker, the
                    // pending member still counting meanwhile (Kafka retries AlterPartition
                    // the same way), until a view with a new partition epoch settles it.
                    _ => {
                        led.to_propose = led.core.pending_isr().map(<[i32]>::to_vec);
                        None
                    }
                }
            });
            if let Some(effects) = effects {
                me.carry_out(&tp, effects);
            }
        })
        .detach();
    }
}

impl Led {
    fn core_me(&self) -> i32 {
        self.core.me()
    }
}
