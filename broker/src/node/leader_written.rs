//! A replicated partition's high watermark counts the leader's *written* end, not its log end
//! (`storage/partition/written.rs`; the core's `PartitionLeader::written`): after an append to
//! a led, replicated partition, this shard's writer task writes the log out (one write round
//! per partition at a time, later appends taken by the next) and tells the core how far it is
//! written. Followers do their part in `replica_fetcher` (they fetch again only once what they
//! appended is written). So a record consumers can read is written on every ISR member.

use std::rc::Rc;

use tracing::debug;

use super::{Node, TopicPartition};
use crate::storage::PartitionLog;

/// Led partitions whose log should be written out, and those being written now.
#[derive(Default)]
pub(super) struct LeaderWrites {
    wanted: std::collections::HashMap<TopicPartition, PartitionLog>,
    running: std::collections::HashSet<TopicPartition>,
    started: bool,
}

impl Node {
    /// After an append to `tp` (led, replicated): write it out soon.
    pub(super) fn want_written(&self, tp: &TopicPartition, log: &PartitionLog) {
        self.leader_writes
            .borrow_mut()
            .wanted
            .insert(tp.clone(), log.clone());
        self.leader_writes_wanted.notify(1);
    }

    /// Starts this shard's writer task (once).
    pub(super) fn start_leader_writer(self: &Rc<Self>) {
        if std::mem::replace(&mut self.leader_writes.borrow_mut().started, true) {
            return;
        }
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            loop {
                let listener = me.leader_writes_wanted.listen();
                let ready: Vec<(TopicPartition, PartitionLog)> = {
                    let mut w = me.leader_writes.borrow_mut();
                    let tps: Vec<TopicPartition> = w
                        .wanted
                        .keys()
                        .filter(|tp| !w.running.contains(*tp))
                        .cloned()
                        .collect();
                    tps.into_iter()
                        .filter_map(|tp| {
                            let log = w.wanted.remove(&tp)?;
                            w.running.insert(tp.clone());
                            Some((tp, log))
                        })
                        .collect()
                };
                if ready.is_empty() {
                    listener.await;
                    continue;
                }
                for (tp, log) in ready {
                    let me = Rc::clone(&me);
                    glommio::spawn_local(async move {
                        if let Err(e) = log.write_out_to(log.log_end()).await {
                            debug!(topic = %tp.0, partition = tp.1, error = %e, "leader write-out");
                        }
                        me.leader_written(&tp, &log);
                        me.leader_writes.borrow_mut().running.remove(&tp);
                        me.leader_writes_wanted.notify(1);
                    })
                    .detach();
                }
            }
        })
        .detach();
    }
}
