//! A replicated partition's high watermark counts how far each replica's log is *synced*
//! (fdatasynced), or only *written* for a topic with `write.caching=true` — never its log end
//! (`storage/partition/written.rs`; the core's `PartitionLeader::written` takes the leader's
//! part): after an append to a led, replicated partition, this shard's writer task syncs (or
//! writes out) the log (one round per partition at a time, later appends taken by the next;
//! sync rounds are shared with the producers' own) and tells the core how far it got.
//! Followers do their part in `replica_fetcher` (they fetch again only once what they appended
//! is synced, or written). So a record consumers can read, and an `acks=all` acknowledgement,
//! is on the disk of every ISR member: it survives a power cut of the whole cluster.

use std::rc::Rc;

use tracing::debug;

use super::{Node, TopicPartition};
use crate::storage::{Offset, PartitionLog};

/// Led partitions whose log should be written out, and those being written now.
#[derive(Default)]
pub(super) struct LeaderWrites {
    wanted: std::collections::HashMap<TopicPartition, PartitionLog>,
    running: std::collections::HashSet<TopicPartition>,
    started: bool,
}

impl Node {
    /// Whether a replica of `tp` counts a record once it is fdatasynced (the default), rather
    /// than once written (`write.caching=true`, Redpanda's write caching).
    pub(super) fn counts_synced(&self, tp: &TopicPartition) -> bool {
        self.catalog()
            .topics
            .get(&tp.0)
            .is_none_or(|t| !t.write_caching())
    }

    /// How far `log` counts toward `tp`'s high watermark: its synced end, or its written end
    /// under write caching.
    pub(super) fn replicated_end(&self, tp: &TopicPartition, log: &PartitionLog) -> i64 {
        if self.counts_synced(tp) {
            log.durable_offset().min(log.log_end()).0
        } else {
            log.written_offset().0
        }
    }

    /// Makes `log` count up to `target` ([`Self::replicated_end`]): synced, or written out.
    pub(super) async fn make_replicated(
        &self,
        tp: &TopicPartition,
        log: &PartitionLog,
        target: Offset,
    ) -> std::io::Result<()> {
        if self.counts_synced(tp) {
            log.sync_to(target).await
        } else {
            log.write_out_to(target).await
        }
    }

    /// After an append to `tp` (led, replicated): sync (or write) it out soon.
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
                        if let Err(e) = me.make_replicated(&tp, &log, log.log_end()).await {
                            debug!(topic = %tp.0, partition = tp.1, error = %e, "leader sync");
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
