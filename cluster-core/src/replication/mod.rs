//! Partition replication's decisions, without I/O (#18; the broker drives them from
//! `node/replica_leader.rs`). One [`PartitionLeader`] per partition this node leads: it learns the followers' log
//! end offsets from their fetches, keeps the high watermark, completes or fails `acks=all`
//! produce requests, and proposes ISR changes, which the driver commits through the metadata
//! quorum before telling it ([`PartitionLeader::isr_committed`]).
//!
//! Kafka's rules, as its `Partition`/`ReplicaManager` apply them (and KIP-497's "maximal ISR"):
//! - The high watermark is the lowest log end offset over the *maximal* ISR: the committed ISR
//!   plus a member whose addition is proposed but not committed, and still counting a member
//!   whose removal is proposed (so the watermark never counts an ack the controller might not
//!   accept). It never moves back.
//! - `acks=all` is done when the high watermark reaches the end of the request's batch; then
//!   NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR is smaller than the effective
//!   `min.insync.replicas` (capped at the replica count, as Kafka's `effectiveMinIsr`).
//!   Before the append, a committed ISR that small is NOT_ENOUGH_REPLICAS.
//! - A follower is caught up at time `t` when it fetched from the leader's log end offset as of
//!   `t` (or of its previous fetch); an ISR member not caught up for
//!   `replica.lag.time.max.ms` is removed. A follower outside the ISR whose log end offset
//!   reached the high watermark, and the start of the current leader epoch, is added back.
//! - One ISR change in flight at a time (Kafka's pending AlterPartition).
//!
//! [`epoch_cache`] holds each replica's epoch -> start offset map and the divergence rule a
//! follower applies after a leader change; [`throttle`] the replication throttles (KIP-73).

pub mod epoch_cache;
pub mod throttle;

use std::collections::{BTreeMap, VecDeque};

use strand_wire::ErrorCode;

use crate::records::NodeId;

/// A follower as the leader sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Follower {
    /// Its log end offset: the offset of its last fetch.
    pub log_end: i64,
    /// When it was last known to be caught up with the leader.
    pub caught_up_ms: u64,
    /// The leader's log end offset at its previous fetch, and when that was.
    previous_fetch: (i64, u64),
}

/// What the driver must do after an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// The high watermark moved up: reads may now return up to here.
    HighWatermark(i64),
    /// An `acks=all` request is done: `Ok` or Kafka's error.
    Acked {
        token: u64,
        result: Result<(), ErrorCode>,
    },
    /// Commit this ISR through the metadata quorum (then call `isr_committed`).
    ProposeIsr(Vec<NodeId>),
}

#[derive(Clone, Debug)]
pub struct PartitionLeader {
    me: NodeId,
    /// The first offset written under the current leader epoch.
    epoch_start: i64,
    isr: Vec<NodeId>,
    /// An ISR proposed and not committed yet.
    pending_isr: Option<Vec<NodeId>>,
    followers: BTreeMap<NodeId, Follower>,
    log_end: i64,
    /// How far the leader's own log is written (its bytes outlive the process), once the
    /// driver tells it (`written`): then the leader counts this, not its log end, toward
    /// the high watermark, so nothing becomes visible before every ISR member wrote it.
    /// `None`: the log end counts (a driver that does not track writes).
    written: Option<i64>,
    high_watermark: i64,
    /// `min.insync.replicas` as configured, and as applied (capped at the replica count).
    min_insync_configured: usize,
    min_insync_replicas: usize,
    lag_max_ms: u64,
    /// `acks=all` requests waiting for the high watermark: (token, end offset), in offset order.
    waiting: VecDeque<(u64, i64)>,
}

impl PartitionLeader {
    /// This node became leader of a partition with these `replicas` and committed `isr`, its
    /// log ending at `log_end` (the start of its epoch) and its high watermark at
    /// `high_watermark` (as recovered; the leader's may lag behind the old leader's until the
    /// followers fetch).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        me: NodeId,
        replicas: &[NodeId],
        isr: Vec<NodeId>,
        log_end: i64,
        high_watermark: i64,
        min_insync_replicas: usize,
        lag_max_ms: u64,
        now_ms: u64,
    ) -> PartitionLeader {
        assert!(isr.contains(&me), "leader {me} outside its ISR {isr:?}");
        assert!(high_watermark <= log_end, "high watermark past the log end");
        let followers = replicas
            .iter()
            .filter(|&&r| r != me)
            .map(|&r| {
                let f = Follower {
                    log_end: 0,
                    caught_up_ms: now_ms,
                    previous_fetch: (log_end, now_ms),
                };
                (r, f)
            })
            .collect();
        PartitionLeader {
            me,
            epoch_start: log_end,
            isr,
            pending_isr: None,
            followers,
            log_end,
            written: None,
            high_watermark,
            min_insync_configured: min_insync_replicas,
            min_insync_replicas: min_insync_replicas.clamp(1, replicas.len().max(1)),
            lag_max_ms,
            waiting: VecDeque::new(),
        }
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The leader's node id.
    pub fn me(&self) -> NodeId {
        self.me
    }

    /// How far the leader's log is written, as last told (`None`: never told).
    pub fn written_end(&self) -> Option<i64> {
        self.written
    }

    /// The leader's log end offset as last told.
    pub fn log_end(&self) -> i64 {
        self.log_end
    }

    pub fn isr(&self) -> &[NodeId] {
        &self.isr
    }

    pub fn follower(&self, node: NodeId) -> Option<&Follower> {
        self.followers.get(&node)
    }

    /// Before an `acks=all` append: NOT_ENOUGH_REPLICAS when the ISR is below
    /// `min.insync.replicas`.
    pub fn admit_acks_all(&self) -> Result<(), ErrorCode> {
        if self.isr.len() < self.min_insync_replicas {
            Err(ErrorCode::NotEnoughReplicas)
        } else {
            Ok(())
        }
    }

    /// The leader appended up to `log_end` (exclusive). With `acks_all`, the request `token`
    /// waits until the high watermark reaches `log_end`.
    pub fn appended(&mut self, log_end: i64, acks_all: Option<u64>) -> Vec<Effect> {
        assert!(log_end >= self.log_end, "log end moved back");
        self.log_end = log_end;
        if let Some(token) = acks_all {
            self.waiting.push_back((token, log_end));
        }
        self.advance()
    }

    /// The leader's log is written up to `written` (exclusive; never past the log end, never
    /// back): from now on that, not the log end, is the leader's part of the high watermark.
    pub fn written(&mut self, written: i64) -> Vec<Effect> {
        let written = written
            .min(self.log_end)
            .max(self.written.unwrap_or(i64::MIN));
        self.written = Some(written);
        self.advance()
    }

    /// A follower fetched from `offset`: it holds everything before it. `isr_eligible`:
    /// whether its broker may join the ISR now (KIP-841: not while it is fenced or shutting
    /// down; a fetch it sent just before it stopped must not propose it back, or the
    /// maximal ISR would hold acks=all waiting on a node that is gone).
    pub fn fetched(
        &mut self,
        node: NodeId,
        offset: i64,
        now_ms: u64,
        isr_eligible: bool,
    ) -> Vec<Effect> {
        let (log_end, epoch_start, hw) = (self.log_end, self.epoch_start, self.high_watermark);
        let Some(f) = self.followers.get_mut(&node) else {
            return Vec::new(); // not a replica (the driver refuses it)
        };
        let offset = offset.min(log_end); // a fetch past the end says no more than the end
        f.log_end = offset;
        if offset >= log_end {
            f.caught_up_ms = now_ms;
        } else if offset >= f.previous_fetch.0 {
            f.caught_up_ms = f.caught_up_ms.max(f.previous_fetch.1);
        }
        f.previous_fetch = (log_end, now_ms);
        let mut effects = Vec::new();
        let joins =
            isr_eligible && !self.isr.contains(&node) && offset >= hw && offset >= epoch_start;
        if joins && self.pending_isr.is_none() {
            let mut isr = self.isr.clone();
            isr.push(node);
            isr.sort_unstable();
            effects.push(self.propose(isr));
        }
        effects.extend(self.advance());
        effects
    }

    /// Time passed: ISR members that have not caught up for `replica.lag.time.max.ms` are
    /// proposed out (never the leader).
    pub fn tick(&mut self, now_ms: u64) -> Vec<Effect> {
        if self.pending_isr.is_some() {
            return Vec::new();
        }
        let lagging: Vec<NodeId> = self
            .isr
            .iter()
            .filter(|&&r| r != self.me)
            .filter(|r| {
                self.followers.get(r).is_some_and(|f| {
                    f.log_end < self.log_end
                        && now_ms.saturating_sub(f.caught_up_ms) > self.lag_max_ms
                })
            })
            .copied()
            .collect();
        if lagging.is_empty() {
            return Vec::new();
        }
        let isr = self
            .isr
            .iter()
            .filter(|r| !lagging.contains(r))
            .copied()
            .collect();
        vec![self.propose(isr)]
    }

    /// The quorum committed an ISR for this partition (ours or the controller's).
    pub fn isr_committed(&mut self, isr: Vec<NodeId>) -> Vec<Effect> {
        assert!(isr.contains(&self.me), "the leader removed from its ISR");
        self.isr = isr;
        self.pending_isr = None;
        self.advance()
    }

    /// `min.insync.replicas` changed (a topic config): it applies to the next requests (those
    /// waiting are judged by it when the high watermark reaches them).
    pub fn set_min_insync_replicas(&mut self, min_insync_replicas: usize) {
        let replicas = self.followers.len() + 1;
        self.min_insync_configured = min_insync_replicas;
        self.min_insync_replicas = min_insync_replicas.clamp(1, replicas);
    }

    /// The quorum committed a partition state with these `replicas` and `isr` (a
    /// reassignment widened or narrowed the replica set, or only the ISR changed): a new
    /// replica starts with nothing (outside the ISR; it is proposed in once it has caught
    /// up, as any follower), a removed one is forgotten, and the effective
    /// `min.insync.replicas` follows the replica count.
    pub fn replicas_committed(
        &mut self,
        replicas: &[NodeId],
        isr: Vec<NodeId>,
        now_ms: u64,
    ) -> Vec<Effect> {
        assert!(replicas.contains(&self.me), "the leader is not a replica");
        self.followers.retain(|n, _| replicas.contains(n));
        for &r in replicas.iter().filter(|&&r| r != self.me) {
            let log_end = self.log_end;
            self.followers.entry(r).or_insert_with(|| Follower {
                log_end: 0,
                caught_up_ms: now_ms,
                previous_fetch: (log_end, now_ms),
            });
        }
        self.set_min_insync_replicas(self.min_insync_configured);
        self.isr_committed(isr)
    }

    /// The proposal was refused (nothing was written): the next input may propose again, and
    /// the high watermark is judged over the committed ISR again (a refused expansion no
    /// longer holds back requests waiting on the member it added). Never for an answer that
    /// leaves the outcome open (a timeout, a stale-epoch refusal of a repeat that may have
    /// committed): releasing acks over the smaller ISR then could acknowledge records a
    /// member the controller counts as in sync does not have.
    pub fn isr_proposal_failed(&mut self) -> Vec<Effect> {
        self.pending_isr = None;
        self.advance()
    }

    fn propose(&mut self, isr: Vec<NodeId>) -> Effect {
        self.pending_isr = Some(isr.clone());
        Effect::ProposeIsr(isr)
    }

    /// The ISR change proposed and not settled yet, if any.
    pub fn pending_isr(&self) -> Option<&[NodeId]> {
        self.pending_isr.as_deref()
    }

    /// The committed ISR plus any member a pending change adds.
    fn maximal_isr(&self) -> Vec<NodeId> {
        let mut members: Vec<NodeId> = self.isr.clone();
        if let Some(p) = &self.pending_isr {
            members.extend(p.iter().filter(|r| !self.isr.contains(r)));
        }
        members
    }

    /// Recomputes the high watermark over the maximal ISR and settles the waiting requests.
    fn advance(&mut self) -> Vec<Effect> {
        let members = self.maximal_isr();
        let lowest = members
            .iter()
            .map(|r| {
                if *r == self.me {
                    self.written.unwrap_or(self.log_end)
                } else {
                    self.followers.get(r).map_or(0, |f| f.log_end)
                }
            })
            .min()
            .unwrap_or(self.log_end);
        let mut effects = Vec::new();
        if lowest > self.high_watermark {
            self.high_watermark = lowest;
            effects.push(Effect::HighWatermark(lowest));
        }
        while let Some(&(token, end)) = self.waiting.front() {
            if end > self.high_watermark {
                break;
            }
            self.waiting.pop_front();
            let result = if members.len() < self.min_insync_replicas {
                Err(ErrorCode::NotEnoughReplicasAfterAppend)
            } else {
                Ok(())
            };
            effects.push(Effect::Acked { token, result });
        }
        effects
    }
}

#[cfg(test)]
mod tests;
