//! The simulation's invariants, checked after every event and at the end of a run.
//!
//! - **No acknowledged record lost**: a record the client was told is written (offset,
//!   value, epoch) is held at that offset by every leader of that epoch or a later one — when
//!   it takes the lead, and when the acknowledgement arrives.
//! - **A leader's high watermark never goes back** during its leadership (its core only
//!   raises it; this guards the driver).
//! - **The committed ISR holds what is committed**: every member (up or down) has synced
//!   everything below the current leader's high watermark. (Written, under a weakness that
//!   changes what a replica counts: so [`Weakness::AckUnwritten`] shows as records not even
//!   written, and [`Weakness::FollowersDontSync`] as acknowledged records a power cut lost.)
//! - **The disk's levels nest**: `synced <= written <= log end` on every node.
//! - **At most one leader per epoch**: no two processes (a node's incarnations count apart)
//!   ever lead the same leader epoch.
//! - **Replicas agree below the high watermark**: one history of committed offsets; whatever
//!   any replica holds below its high watermark matches it (what consumers read never
//!   changes).
//! - **At the end**, with every fault healed and time to settle: the partition has a leader,
//!   its high watermark covers every acknowledged record, and it holds them all.

use std::collections::{BTreeMap, BTreeSet};

use super::broker::Broker;
use super::{Weakness, TOPIC};
use crate::image::Image;
use crate::records::NodeId;

pub(crate) struct Checker {
    /// Leader epoch -> the process (node, incarnation) that led it.
    leaders: BTreeMap<i32, (NodeId, u64)>,
    /// Leaderships seen: (node, incarnation, epoch) -> the highest high watermark it had.
    leaderships: BTreeMap<(NodeId, u64, i32), i64>,
    /// Offset -> (epoch, value): the committed history, as first seen below a high watermark.
    committed: Vec<(i32, u64)>,
    /// Per node (index = id - 1): how far its log was checked against `committed`.
    agreed_to: Vec<i64>,
    /// Offset -> (value, epoch that acknowledged it).
    acked: BTreeMap<i64, (u64, i32)>,
    /// Whether a committed record must be synced on the ISR (else written).
    counts_synced: bool,
}

impl Checker {
    pub(crate) fn new(nodes: usize, weakness: Option<Weakness>) -> Checker {
        Checker {
            counts_synced: !matches!(
                weakness,
                Some(Weakness::AckUnwritten | Weakness::FollowersDontSync)
            ),
            leaders: BTreeMap::new(),
            leaderships: BTreeMap::new(),
            committed: Vec::new(),
            agreed_to: vec![0; nodes],
            acked: BTreeMap::new(),
        }
    }

    pub(crate) fn leaderships(&self) -> u64 {
        self.leaderships.len() as u64
    }

    pub(crate) fn after_event(&mut self, brokers: &[Broker], image: &Image) -> Result<(), String> {
        for (i, b) in brokers.iter().enumerate() {
            let d = &b.disk;
            if !(0 <= d.synced && d.synced <= d.written && d.written <= d.len()) {
                return Err(format!(
                    "node {}'s disk: synced {} / written {} / log end {} do not nest",
                    b.id,
                    d.synced,
                    d.written,
                    d.len()
                ));
            }
            if !b.up {
                continue;
            }
            if let Some(l) = b.leading() {
                let key = (b.id, b.incarnation, l.epoch);
                let hw = l.core.high_watermark();
                match self.leaderships.get(&key) {
                    None => {
                        let me = (b.id, b.incarnation);
                        if let Some(other) = self.leaders.insert(l.epoch, me) {
                            if other != me {
                                return Err(format!(
                                    "two leaders of epoch {}: (node, incarnation) {other:?} \
                                     and {me:?}",
                                    l.epoch
                                ));
                            }
                        }
                        self.holds_acked(b, l.epoch, "taking the lead")?;
                    }
                    Some(&before) if hw < before => {
                        return Err(format!(
                            "node {}'s high watermark went back from {before} to {hw} in epoch {}",
                            b.id, l.epoch
                        ));
                    }
                    Some(_) => {}
                }
                self.leaderships.insert(key, hw);
                if b.hw != hw {
                    return Err(format!(
                        "node {} serves hw {} but its core has {hw}",
                        b.id, b.hw
                    ));
                }
            }
            self.agree(i, b)?;
        }
        self.isr_holds_committed(brokers, image)
    }

    /// Every member of the committed ISR (up or down) holds, synced (or written, where that
    /// is what counts), everything below the current leader's high watermark — what a new
    /// leader would have to serve.
    fn isr_holds_committed(&self, brokers: &[Broker], image: &Image) -> Result<(), String> {
        let Some(p) = image.partition(TOPIC, 0) else {
            return Ok(());
        };
        let leader = brokers.iter().find(|b| {
            b.up && b.id == p.leader && b.leading().is_some_and(|l| l.epoch == p.leader_epoch)
        });
        let Some(hw) = leader.map(|b| b.hw) else {
            return Ok(());
        };
        if hw == 0 {
            return Ok(());
        }
        let last = self.committed.get(hw as usize - 1).copied();
        for &m in &p.isr {
            let Some(b) = brokers.get(m as usize - 1) else {
                continue;
            };
            let d = &b.disk;
            let (held, how) = if self.counts_synced {
                (d.synced, "synced")
            } else {
                (d.written, "written")
            };
            if held < hw || d.records.get(hw as usize - 1).copied() != last {
                return Err(format!(
                    "ISR member {m} (ISR {:?}, epoch {}) lacks committed offsets: the leader's \
                     high watermark is {hw}, node {m} has {how} {held} of {} records (offset {} \
                     holds {:?}, committed {last:?})",
                    p.isr,
                    p.leader_epoch,
                    d.len(),
                    hw - 1,
                    d.records.get(hw as usize - 1)
                ));
            }
        }
        Ok(())
    }

    /// Checks node `i`'s log below its high watermark against the committed history.
    fn agree(&mut self, i: usize, b: &Broker) -> Result<(), String> {
        let len = b.disk.len();
        if b.hw > len {
            return Err(format!(
                "node {}'s high watermark {} is past its log end {len}",
                b.id, b.hw
            ));
        }
        let from = self.agreed_to[i].min(len);
        for o in from..b.hw {
            let record = b.disk.records[o as usize];
            match self.committed.get(o as usize) {
                Some(&c) if c != record => {
                    return Err(format!(
                        "offset {o} below node {}'s high watermark {} holds (epoch, value) {record:?}; \
                         the committed history has {c:?}",
                        b.id, b.hw
                    ));
                }
                Some(_) => {}
                None => {
                    debug_assert_eq!(o as usize, self.committed.len());
                    self.committed.push(record);
                }
            }
        }
        self.agreed_to[i] = from.max(b.hw);
        Ok(())
    }

    /// The log of `b`, leading `epoch`, holds every record acknowledged in that epoch or
    /// before.
    fn holds_acked(&self, b: &Broker, epoch: i32, when: &str) -> Result<(), String> {
        for (&offset, &(value, acked_epoch)) in &self.acked {
            if acked_epoch > epoch {
                continue;
            }
            let held = b.disk.records.get(offset as usize).map(|r| r.1);
            if held != Some(value) {
                return Err(format!(
                    "acknowledged value {value} at offset {offset} (epoch {acked_epoch}) is lost: \
                     node {} {when} of epoch {epoch} holds {held:?} there (log end {})",
                    b.id,
                    b.disk.len()
                ));
            }
        }
        Ok(())
    }

    /// The client heard that `value` is written at `offset` by the leader of `epoch`.
    pub(crate) fn acked(
        &mut self,
        offset: i64,
        value: u64,
        epoch: i32,
        brokers: &[Broker],
    ) -> Result<(), String> {
        // (With acks=all the record is committed before it is acknowledged; a weakened
        // setting may acknowledge earlier, and the loss shows when a leader lacks it.)
        if let Some(&c) = self.committed.get(offset as usize) {
            if c != (epoch, value) {
                return Err(format!(
                    "value {value} acknowledged at offset {offset} (epoch {epoch}), but the \
                     committed history has (epoch, value) {c:?} there"
                ));
            }
        }
        if let Some((v, _)) = self.acked.insert(offset, (value, epoch)) {
            if v != value {
                return Err(format!(
                    "offset {offset} acknowledged for values {v} and {value}"
                ));
            }
        }
        for b in brokers.iter().filter(|b| b.up) {
            if let Some(l) = b.leading().filter(|l| l.epoch >= epoch) {
                let held = b.disk.records.get(offset as usize).map(|r| r.1);
                if held != Some(value) {
                    return Err(format!(
                        "acknowledged value {value} at offset {offset} (epoch {epoch}) is lost: \
                         node {}, leader of epoch {}, holds {held:?} there",
                        b.id, l.epoch
                    ));
                }
            }
        }
        Ok(())
    }

    /// After the faults healed and the cluster settled.
    pub(crate) fn at_end(&self, brokers: &[Broker], image: &Image) -> Result<(), String> {
        let Some(p) = image.partition(TOPIC, 0) else {
            return Err("the topic is gone".into());
        };
        let leader = brokers
            .iter()
            .find(|b| b.up && b.leading().is_some_and(|l| l.epoch == p.leader_epoch));
        let Some(b) = leader else {
            return Err(format!(
                "no leader serves after the faults healed (the controller names node {} for \
                 epoch {}, ISR {:?})",
                p.leader, p.leader_epoch, p.isr
            ));
        };
        self.holds_acked(b, p.leader_epoch, "at the end, leader")?;
        let needed = self.acked.keys().next_back().map_or(0, |o| o + 1);
        if b.hw < needed {
            return Err(format!(
                "after the faults healed, leader {}'s high watermark is {}, below acknowledged \
                 offset {} (ISR {:?})",
                b.id,
                b.hw,
                needed - 1,
                p.isr
            ));
        }
        let isr: BTreeSet<NodeId> = p.isr.iter().copied().collect();
        if isr.len() < brokers.len() {
            // Not a violation by itself, but every node is up and reachable now: a replica
            // left out for the whole settle time is a liveness bug.
            return Err(format!(
                "after the faults healed, the ISR is still {:?}",
                p.isr
            ));
        }
        Ok(())
    }
}
