//! What a shard does differently in cluster mode (the catalog carries a `ClusterView`): who
//! this node is, which partitions it hosts and leads, and topic changes that go through the
//! active controller instead of shard 0. On a single node every function here answers as the
//! single-node broker always has.

use std::collections::BTreeMap;
use std::sync::Arc;

use strand_cluster_core::controller::{Election, NewTopic as ControllerNewTopic};
use strand_cluster_core::controller_rpc::Request;
use strand_wire::ErrorCode;

use super::{op_len, AdminOutcome, Node, TopicPartition};
use crate::catalog::{Catalog, CatalogOp, OpResult};
use crate::cluster::handle::ClusterHandle;
use crate::cluster::view::ClusterView;
use crate::dynamic_configs::Resource;
use crate::storage::PartitionLog;

/// The broker id of a single node (Kafka's `node.id` default for one broker).
pub const SINGLE_NODE_ID: i32 = 0;

/// IncrementalAlterConfigs' DELETE operation.
const CONFIG_OP_DELETE: i8 = 1;

/// Kafka's file naming the topic id a partition directory belongs to.
const PARTITION_METADATA: &str = "partition.metadata";

/// Whether `topic` is in both catalogs under different ids: deleted and re-created between
/// two views (they can coalesce), so the old partitions must go.
pub(super) fn replaced(old: &Catalog, new: &Catalog, topic: &str) -> bool {
    match (old.topics.get(topic), new.topics.get(topic)) {
        (Some(a), Some(b)) => a.id != b.id,
        _ => false,
    }
}

/// Cluster mode, before a partition opens: its directory must belong to `topic_id` (Kafka's
/// `partition.metadata`). A directory left by an earlier topic of the same name (deleted and
/// re-created while this node was away) is removed first, so its records never show up in
/// the new topic.
pub(super) async fn claim_dir(dir: &std::path::Path, topic_id: &str) -> std::io::Result<()> {
    let (dir, want) = (
        dir.to_path_buf(),
        format!("version: 0\ntopic_id: {topic_id}\n"),
    );
    glommio::executor()
        .spawn_blocking(move || {
            let file = dir.join(PARTITION_METADATA);
            match std::fs::read_to_string(&file) {
                Ok(have) if have == want => return Ok(()),
                Ok(_) => {
                    tracing::warn!(dir = %dir.display(), "partition directory of an earlier topic with this name: removed");
                    std::fs::remove_dir_all(&dir)?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir.exists() => {
                    tracing::warn!(dir = %dir.display(), "partition directory without partition.metadata: removed");
                    std::fs::remove_dir_all(&dir)?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            std::fs::create_dir_all(&dir)?;
            std::fs::write(&file, want)?;
            std::fs::File::open(&file)?.sync_all()?;
            crate::storage::recovery::sync_dir(&dir)
        })
        .await
}

impl Node {
    /// A fresh producer id: from the controller's blocks in a cluster (`None` until one
    /// arrived), from the clock-seeded counter on a single node.
    pub fn next_producer_id(&self) -> Option<i64> {
        match &self.shared.cluster {
            Some(h) => h.producer_ids.take(),
            None => Some(
                self.shared
                    .next_producer_id
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            ),
        }
    }

    /// This broker's id: `node.id` in a cluster, 0 on a single node.
    pub fn node_id(&self) -> i32 {
        self.shared
            .cluster
            .as_ref()
            .map_or(SINGLE_NODE_ID, |h| h.node_id)
    }

    /// The cluster as this shard last saw it (`None` on a single node).
    pub fn view(&self) -> Option<Arc<ClusterView>> {
        self.catalog().cluster.clone()
    }

    /// Whether this shard should open `tp` under `catalog`: the hash says this shard, and in
    /// a cluster the partition has a replica on this node.
    pub(super) fn hosts(&self, catalog: &Catalog, tp: &TopicPartition) -> bool {
        self.owner(tp) == self.shard
            && catalog
                .cluster
                .as_ref()
                .is_none_or(|v| v.hosts(&tp.0, tp.1))
    }

    /// The local log of a partition this node leads: NOT_LEADER_OR_FOLLOWER when the
    /// partition exists in the cluster but is led elsewhere (or is offline), which sends
    /// clients back to Metadata; UNKNOWN_TOPIC_OR_PARTITION when it does not exist.
    pub(crate) fn led(&self, tp: &TopicPartition) -> Result<PartitionLog, ErrorCode> {
        let view = self.catalog().cluster.clone();
        match (self.local(tp), view) {
            // Not caught up with the metadata log since this process started: its view may
            // still name it leader of what moved on while it was down.
            (_, Some(v)) if !v.caught_up && v.partition(&tp.0, tp.1).is_some() => {
                Err(ErrorCode::NotLeaderOrFollower)
            }
            (Some(log), None) => Ok(log),
            (Some(log), Some(v)) if v.leads(&tp.0, tp.1) => Ok(log),
            (_, Some(v)) if v.partition(&tp.0, tp.1).is_some() => {
                Err(ErrorCode::NotLeaderOrFollower)
            }
            _ => Err(ErrorCode::UnknownTopicOrPartition),
        }
    }

    /// The partition's current leader epoch (0 on a single node or when unknown).
    pub(crate) fn leader_epoch(&self, topic: &str, partition: i32) -> i32 {
        self.catalog()
            .cluster
            .as_ref()
            .and_then(|v| v.partition(topic, partition))
            .map_or(0, |p| p.leader_epoch)
    }

    /// KIP-320: a request's `current_leader_epoch` against the partition's (the view's in a
    /// cluster, 0 on a single node). -1 (not given) passes; an older epoch is
    /// FENCED_LEADER_EPOCH (the client's leader is stale), a newer one UNKNOWN_LEADER_EPOCH
    /// (this broker has not seen that leader change yet); both send the client to Metadata.
    pub(crate) fn check_leader_epoch(
        &self,
        topic: &str,
        partition: i32,
        epoch: i32,
    ) -> Result<(), ErrorCode> {
        if epoch < 0 {
            return Ok(());
        }
        let current = match &self.catalog().cluster {
            Some(v) => match v.partition(topic, partition) {
                Some(p) => p.leader_epoch,
                None => return Ok(()), // unknown partitions are answered further on
            },
            None => 0,
        };
        match epoch.cmp(&current) {
            std::cmp::Ordering::Less => Err(ErrorCode::FencedLeaderEpoch),
            std::cmp::Ordering::Greater => Err(ErrorCode::UnknownLeaderEpoch),
            std::cmp::Ordering::Equal => Ok(()),
        }
    }

    /// KIP-951: in a cluster, `(leader_id, leader_epoch)` of a partition this node does not
    /// lead, for answers that send the client elsewhere (NOT_LEADER_OR_FOLLOWER,
    /// FENCED_LEADER_EPOCH); the leader id is -1 while it has none. `None` on a single node
    /// or for a partition the view does not know.
    pub(crate) fn current_leader(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        let view = self.catalog().cluster.clone()?;
        if !view.caught_up {
            return None; // its leaders may be from before a restart
        }
        let p = view.partition(topic, partition)?;
        Some((p.leader, p.leader_epoch))
    }

    /// In a cluster, before an append to a partition this node leads: the log leads the
    /// view's leader epoch (recorded in its epoch cache at the first append of the epoch, then
    /// stamped on every batch, so OffsetForLeaderEpoch and followers can find where epochs
    /// start). Lazily, so a leadership change costs nothing for partitions nobody writes.
    pub(crate) async fn lead_epoch(
        &self,
        tp: &TopicPartition,
        log: &PartitionLog,
    ) -> Result<(), ErrorCode> {
        let Some(view) = self.catalog().cluster.clone() else {
            return Ok(());
        };
        let Some(p) = view.partition(&tp.0, tp.1) else {
            return Ok(());
        };
        if p.leader != view.me || log.leading_epoch() == Some(p.leader_epoch) {
            return Ok(());
        }
        log.become_leader(p.leader_epoch).await.map_err(|e| {
            tracing::warn!(topic = %tp.0, partition = tp.1, error = %e, "cannot lead the epoch");
            ErrorCode::NotLeaderOrFollower
        })
    }

    /// Whether this node may coordinate what `tp` (a partition of an internal topic) holds:
    /// on a single node always; in a cluster when this node leads it in a view that has caught
    /// up with the metadata log (see `ClusterView::caught_up`).
    pub(crate) fn coordinates(&self, tp: &TopicPartition) -> bool {
        let caught_up = self
            .catalog()
            .cluster
            .as_ref()
            .is_none_or(|view| view.caught_up);
        caught_up && self.remote_leader(tp).is_none()
    }

    /// In a cluster, when `tp` is led by another node (or by none, -1): the way there and
    /// the leader's id. `None` when this node leads it or runs alone.
    pub(crate) fn remote_leader(&self, tp: &TopicPartition) -> Option<(ClusterHandle, i32)> {
        let handle = self.shared.cluster.as_ref()?;
        let view = self.catalog().cluster.clone()?;
        let leader = view.partition(&tp.0, tp.1)?.leader;
        (leader != view.me).then(|| (handle.clone(), leader))
    }

    /// A topic change in cluster mode: checked against this shard's catalog (names,
    /// partition counts, configs, existence), then asked of the active controller one topic
    /// at a time; each answer arrives once every shard here has applied it.
    pub(super) async fn change_through_controller(
        &self,
        handle: &ClusterHandle,
        op: CatalogOp,
        validate_only: bool,
    ) -> AdminOutcome {
        let grows = matches!(op, CatalogOp::Create(_) | CatalogOp::CreatePartitions(_));
        if grows && self.shared.disk.is_low() {
            let reason = self.shared.disk.reason();
            return vec![Err((ErrorCode::PolicyViolation, reason)); op_len(&op)];
        }
        // `topic.partitions.per.shard` x this node's shards (`partitions_max`), over the whole
        // cluster's partitions: it keeps the metadata image (and its snapshot, which must fit
        // a cluster message) bounded.
        let before = self.catalog();
        let mut scratch = (*before).clone();
        let mut checks = scratch.apply_within(&op, &self.partitions_max());
        // Asked concurrently, two changes to one topic in one request could interleave at the
        // controller: refused, as Kafka refuses a topic named twice.
        let named: Vec<Option<&str>> = match &op {
            CatalogOp::CreatePartitions(items) => {
                items.iter().map(|(n, _)| Some(n.as_str())).collect()
            }
            CatalogOp::AlterConfigs(items) => items.iter().map(|(r, _)| topic_of(r)).collect(),
            CatalogOp::SetConfigs(items) => items.iter().map(|(r, _)| topic_of(r)).collect(),
            CatalogOp::Create(_) | CatalogOp::Delete(_) => Vec::new(), // checked already
        };
        for (i, name) in named.iter().enumerate() {
            if name.is_some() && named.iter().filter(|n| *n == name).count() > 1 {
                checks[i] = Err((
                    ErrorCode::InvalidRequest,
                    "Duplicate topic in request.".to_string(),
                ));
            }
        }
        // This broker's throttle rates are its own (`cluster::throttle_rates`): set here.
        let rates = super::throttle::rates_changes(&op, &before);
        for (check, rate) in checks.iter_mut().zip(&rates) {
            if let (Ok(()), Some(Err(refused))) = (&check, rate) {
                *check = Err(refused.clone());
            }
        }
        if validate_only {
            return checks;
        }
        // A config change is sent as its effect on the topic's overrides (the operations were
        // applied and validated above): each key the request names (incremental), or every
        // key of the old and new sets (legacy: the whole set), with its value after the
        // change, or removed. Keys are sent even when unchanged here: another node's change
        // to them may be in flight, and the last one asked must stand. (Legacy AlterConfigs
        // still misses a key set through another node that this node has not applied yet.)
        let config_change = |resource: &Resource, keys: Option<Vec<&str>>| -> Option<Request> {
            let Resource::Topic(name) = resource else {
                return None;
            };
            let (old, new) = (
                &before.topics.get(name)?.configs,
                &scratch.topics.get(name)?.configs,
            );
            let keys: Vec<&str> = match keys {
                Some(named) => named,
                None => old.keys().chain(new.keys()).map(String::as_str).collect(),
            };
            let changes: BTreeMap<String, Option<String>> = keys
                .into_iter()
                .map(|k| (k.to_string(), new.get(k).cloned()))
                .collect();
            Some(Request::AlterTopicConfigs {
                name: name.clone(),
                changes,
            })
        };
        const NOT_TOPIC: &str = "broker configs other than the replication throttle rates, and \
            group configs, cannot be changed in a cluster yet; topic configs can";

        // Broker configs cannot change in a cluster yet, but deleting keys that are not set
        // changes nothing and succeeds: `kafka-reassign-partitions --verify` / `--cancel`
        // clear replication throttles that way on every broker.
        let no_op: Vec<bool> = match &op {
            CatalogOp::AlterConfigs(items) => items
                .iter()
                .map(|(r, ops)| {
                    *r == Resource::Broker
                        && ops.iter().all(|(key, code, _)| {
                            *code == CONFIG_OP_DELETE && !before.broker_configs.contains_key(key)
                        })
                })
                .collect(),
            _ => Vec::new(),
        };
        let requests: Vec<Option<Request>> = match op {
            CatalogOp::Create(topics) => topics
                .into_iter()
                .map(|t| {
                    Some(Request::CreateTopic(ControllerNewTopic {
                        name: t.name,
                        partitions: t.partitions,
                        replication_factor: t.replication_factor,
                        configs: t.configs.into_iter().collect::<BTreeMap<_, _>>(),
                    }))
                })
                .collect(),
            CatalogOp::Delete(names) => names
                .into_iter()
                .map(|name| Some(Request::DeleteTopic { name }))
                .collect(),
            CatalogOp::CreatePartitions(topics) => topics
                .into_iter()
                .map(|(name, count)| Some(Request::CreatePartitions { name, count }))
                .collect(),
            CatalogOp::AlterConfigs(items) => items
                .iter()
                .map(|(r, ops)| config_change(r, Some(ops.iter().map(|o| o.0.as_str()).collect())))
                .collect(),
            CatalogOp::SetConfigs(items) => {
                items.iter().map(|(r, _)| config_change(r, None)).collect()
            }
        };
        // Up to CONTROLLER_CALLS_IN_FLIGHT topics asked at once: the quorum commits them
        // together instead of one round (and one fdatasync) per topic.
        let calls = requests
            .into_iter()
            .zip(checks)
            .enumerate()
            .map(|(i, (req, check))| {
                let handle = handle.clone();
                let no_op = no_op.get(i).copied().unwrap_or(false);
                let rates = rates.get(i).cloned().flatten();
                let throttle_rates = std::sync::Arc::clone(&self.shared.throttle_rates);
                async move {
                    match (check, req, rates) {
                        (Err(refused), _, _) => Err(refused),
                        (Ok(()), None, Some(change)) => {
                            super::throttle::change_rates(throttle_rates, change?).await
                        }
                        (Ok(()), None, None) if no_op => Ok(()),
                        (Ok(()), None, None) => {
                            Err((ErrorCode::InvalidRequest, NOT_TOPIC.to_string()))
                        }
                        (Ok(()), Some(Request::AlterTopicConfigs { changes, .. }), _)
                            if changes.is_empty() =>
                        {
                            Ok(()) // nothing changes
                        }
                        (Ok(()), Some(req), _) => answered(handle.call(req).await.error),
                    }
                }
            });
        bounded_in_flight(calls).await
    }
}

impl Node {
    /// ElectLeaders (KIP-460) for each `(topic, partition)`, in order. In a cluster each is
    /// asked of the controller (up to CONTROLLER_CALLS_IN_FLIGHT at once; a change that lost
    /// a race with another one of the partition, INVALID_UPDATE_VERSION, is asked again
    /// from the new state); each answer arrives once this node applied it. On a single node
    /// every partition is led by its only (preferred) replica: ELECTION_NOT_NEEDED.
    pub async fn elect_leaders(
        &self,
        partitions: Vec<(String, i32)>,
        election: Election,
    ) -> Vec<OpResult> {
        let Some(handle) = self.shared.cluster.clone() else {
            let catalog = self.catalog();
            return partitions
                .into_iter()
                .map(|(topic, partition)| match catalog.topics.get(&topic) {
                    Some(t) if (0..t.partitions).contains(&partition) => Err((
                        ErrorCode::ElectionNotNeeded,
                        "a single node leads every partition".to_string(),
                    )),
                    _ => Err((
                        ErrorCode::UnknownTopicOrPartition,
                        "This server does not host this topic-partition.".to_string(),
                    )),
                })
                .collect();
        };
        let calls = partitions.into_iter().map(|(topic, partition)| {
            let handle = handle.clone();
            let req = Request::ElectLeader {
                topic: topic.clone(),
                partition,
                election,
            };
            ask_partition_change(handle, format!("{topic}-{partition}"), req)
        });
        bounded_in_flight(calls).await
    }
}

/// Asks the controller for a partition change; one that lost a race with another change of
/// the partition (INVALID_UPDATE_VERSION) is asked again, each ask deciding from a newer
/// image (Kafka never answers this code), a few times before REQUEST_TIMED_OUT.
pub(super) async fn ask_partition_change(
    handle: ClusterHandle,
    what: String,
    req: Request,
) -> OpResult {
    const ASKS_MAX: usize = 10;
    for _ in 0..ASKS_MAX {
        match handle.call(req.clone()).await.error {
            Some((ErrorCode::InvalidUpdateVersion, _)) => {}
            other => return answered(other),
        }
    }
    Err((
        ErrorCode::RequestTimedOut,
        format!("{what} kept changing meanwhile; ask again"),
    ))
}

impl Node {
    /// Cluster mode, once per process, on shard 0, at the first view caught up with the
    /// metadata log: deletes the partition directories this node no longer hosts — those of
    /// topics deleted while it was down that no view ever opens again (Kafka's stray logs; a
    /// topic re-created under the same name is `claim_dir`'s). Only directories that were there before this process
    /// started are candidates: one made since belongs to a view this shard may not have
    /// applied yet. Never earlier than `caught_up`: an older view could miss a partition
    /// placed here, and that copy may be the only one in sync.
    pub(super) fn sweep_strays_once(&self, catalog: &Arc<Catalog>) {
        if self.shard != 0 || self.strays_swept.get() {
            return;
        }
        let Some(view) = catalog.cluster.clone().filter(|v| v.caught_up) else {
            return;
        };
        self.strays_swept.set(true);
        let hosted: std::collections::HashSet<String> = catalog
            .topics
            .iter()
            .flat_map(|(name, t)| {
                let view = &view;
                (0..t.partitions)
                    .filter(move |p| view.hosts(name, *p))
                    .map(move |p| format!("{name}-{p}"))
            })
            .collect();
        let (data_dir, started) = (self.config().data_dir.clone(), self.started);
        glommio::spawn_local(async move {
            let swept = glommio::executor()
                .spawn_blocking(move || remove_strays(&data_dir, started, &hosted))
                .await;
            if let Err(e) = swept {
                tracing::warn!(error = %e, "could not sweep stray partition directories");
            }
        })
        .detach();
    }
}

/// Removes every partition directory of `data_dir` (one holding `partition.metadata`) older
/// than `started` whose name is not in `hosted` (`{topic}-{partition}`). (A clock
/// stepped back after the start could make a new directory look older: the sweep runs once,
/// right after the first caught-up view, which keeps that window short.)
fn remove_strays(
    data_dir: &std::path::Path,
    started: std::time::SystemTime,
    hosted: &std::collections::HashSet<String>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(data_dir)? {
        let Ok(entry) = entry else { continue };
        let dir = entry.path();
        let meta_file = dir.join(PARTITION_METADATA);
        // Only cluster partition directories (a single node's have no partition.metadata).
        let made_before = std::fs::metadata(&meta_file)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < started);
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        // A hosted name is never swept, even with another topic id: that is a topic re-created
        // under the same name, and `claim_dir` (on the owning shard, maybe right now) replaces
        // its directory.
        let kept = name.is_none_or(|n| hosted.contains(&n));
        if made_before && !kept {
            tracing::warn!(dir = %dir.display(), "partition directory of a topic this node no longer hosts: removed");
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "could not remove it");
            }
        }
    }
    Ok(())
}

/// Runs `calls` (controller asks) with up to CONTROLLER_CALLS_IN_FLIGHT at once, so the quorum
/// commits them together; their outcomes in order.
pub(super) async fn bounded_in_flight<F>(calls: impl IntoIterator<Item = F>) -> Vec<OpResult>
where
    F: std::future::Future<Output = OpResult> + 'static,
{
    let mut out = Vec::new();
    let mut in_flight: Vec<glommio::Task<OpResult>> = Vec::new();
    for call in calls {
        in_flight.push(glommio::spawn_local(call));
        if in_flight.len() == crate::limits::CONTROLLER_CALLS_IN_FLIGHT {
            for t in in_flight.drain(..) {
                out.push(t.await);
            }
        }
    }
    for t in in_flight {
        out.push(t.await);
    }
    out
}

fn topic_of(resource: &Resource) -> Option<&str> {
    match resource {
        Resource::Topic(name) => Some(name),
        _ => None,
    }
}

fn answered(error: Option<(ErrorCode, String)>) -> OpResult {
    match error {
        None => Ok(()),
        Some(e) => Err(e),
    }
}
