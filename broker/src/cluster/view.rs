//! What a shard needs of the cluster's metadata image, as an immutable, thread-safe value
//! (`Arc<ClusterView>` inside the shard's catalog snapshot): this node, the controller, the
//! brokers clients may be sent to, and each partition's leader, leader epoch, replicas and
//! ISR. Built from `cluster_core`'s `Image` by a pure function; nothing here does I/O.

use std::collections::BTreeMap;

use strand_cluster_core::image::Image;
use strand_cluster_core::records::{NodeId, Replica, NO_LEADER};

/// A registered broker as clients see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerView {
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
    /// Fenced brokers lead nothing and are not listed to clients.
    pub fenced: bool,
    /// Shards serving partitions there, as its latest registration says: a partition lives
    /// on `runtime::shard::shard_for(topic, partition, shards)` of it.
    pub shards: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionView {
    /// `NO_LEADER` (-1) when the partition is offline.
    pub leader: NodeId,
    pub leader_epoch: i32,
    pub replicas: Vec<Replica>,
    pub isr: Vec<NodeId>,
    /// Bumped by every change of leader or ISR (an AlterPartition names the one it changes).
    pub partition_epoch: i32,
    /// A reassignment in flight (KIP-455): replicas being added and being removed.
    pub adding: Vec<NodeId>,
    pub removing: Vec<NodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicView {
    /// Kafka's topic id.
    pub id: [u8; 16],
    pub configs: BTreeMap<String, String>,
    /// Index = partition number (the image's partitions are 0..n).
    pub partitions: Vec<PartitionView>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    pub me: NodeId,
    pub cluster_id: String,
    /// The active controller (the quorum's leader), if known.
    pub controller: Option<NodeId>,
    /// The metadata log offset this view reflects.
    pub applied_offset: u64,
    /// Whether the image holds this process's own registration (its incarnation): the view is
    /// then at least as new as the moment this node (re)joined. Before that it may be the
    /// image of before a restart (leaders and ISRs that have moved since), so the node leads
    /// nothing and names no leaders to clients, as Kafka's brokers wait for the metadata log.
    pub caught_up: bool,
    pub brokers: BTreeMap<NodeId, BrokerView>,
    pub topics: BTreeMap<String, TopicView>,
}

impl ClusterView {
    /// An empty view for `me` (before the first image arrives).
    pub fn empty(me: NodeId, cluster_id: &str) -> ClusterView {
        ClusterView {
            me,
            cluster_id: cluster_id.to_string(),
            controller: None,
            applied_offset: 0,
            caught_up: false,
            brokers: BTreeMap::new(),
            topics: BTreeMap::new(),
        }
    }

    /// The view of `image` from node `me`, the process whose registration carries
    /// `incarnation`.
    pub fn from_image(
        image: &Image,
        me: NodeId,
        incarnation: u128,
        cluster_id: &str,
        controller: Option<NodeId>,
    ) -> ClusterView {
        let caught_up = image
            .brokers
            .get(&me)
            .is_some_and(|b| b.registration.incarnation == incarnation);
        let brokers = image
            .brokers
            .iter()
            .map(|(id, b)| {
                (
                    *id,
                    BrokerView {
                        host: b.registration.client.host.clone(),
                        port: b.registration.client.port,
                        rack: b.registration.rack.clone(),
                        fenced: b.fenced,
                        shards: b.registration.shards.max(1),
                    },
                )
            })
            .collect();
        let topics = image
            .topics
            .values()
            .map(|t| {
                let partitions = t
                    .partitions
                    .values()
                    .map(|p| PartitionView {
                        leader: p.leader,
                        leader_epoch: p.leader_epoch,
                        replicas: p.replicas.clone(),
                        isr: p.isr.clone(),
                        partition_epoch: p.partition_epoch,
                        adding: p.adding.clone(),
                        removing: p.removing.clone(),
                    })
                    .collect::<Vec<_>>();
                debug_assert!(
                    t.partitions.keys().copied().eq(0..partitions.len() as i32),
                    "a topic's partitions are numbered 0..n"
                );
                (
                    t.name.clone(),
                    TopicView {
                        id: t.id,
                        configs: t.configs.clone(),
                        partitions,
                    },
                )
            })
            .collect();
        ClusterView {
            me,
            cluster_id: cluster_id.to_string(),
            controller,
            applied_offset: image.applied_offset,
            caught_up,
            brokers,
            topics,
        }
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionView> {
        let p = usize::try_from(partition).ok()?;
        self.topics.get(topic)?.partitions.get(p)
    }

    /// Whether this node leads `topic`/`partition` in this view.
    pub fn leads(&self, topic: &str, partition: i32) -> bool {
        self.partition(topic, partition)
            .is_some_and(|p| p.leader == self.me && p.leader != NO_LEADER)
    }

    /// Whether this node holds a replica of `topic`/`partition` (it opens the log).
    pub fn hosts(&self, topic: &str, partition: i32) -> bool {
        self.partition(topic, partition)
            .is_some_and(|p| p.replicas.iter().any(|r| r.node == self.me))
    }

    /// Brokers clients may be sent to (registered, not fenced), by id.
    pub fn live_brokers(&self) -> impl Iterator<Item = (NodeId, &BrokerView)> {
        self.brokers
            .iter()
            .filter(|(_, b)| !b.fenced)
            .map(|(id, b)| (*id, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_cluster_core::image::{BrokerState, PartitionState, TopicImage};
    use strand_cluster_core::records::{BrokerRegistration, Endpoint};

    fn broker(id: NodeId, fenced: bool) -> BrokerState {
        BrokerState {
            registration: BrokerRegistration {
                node_id: id,
                incarnation: 1,
                cluster_id: "c".into(),
                client: Endpoint {
                    host: format!("h{id}"),
                    port: 9000 + id as u16,
                },
                cluster: Endpoint {
                    host: format!("h{id}"),
                    port: 9100 + id as u16,
                },
                shards: 2,
                rack: None,
            },
            epoch: 7,
            fenced,
        }
    }

    #[test]
    fn a_view_names_leaders_replicas_and_live_brokers() {
        let mut image = Image::default();
        image.brokers.insert(1, broker(1, false));
        image.brokers.insert(2, broker(2, true));
        let mut partitions = BTreeMap::new();
        for (p, leader) in [(0, 1), (1, 2), (2, NO_LEADER)] {
            partitions.insert(
                p,
                PartitionState {
                    replicas: vec![Replica {
                        node: if leader == NO_LEADER { 2 } else { leader },
                        shard: 0,
                    }],
                    isr: vec![leader],
                    leader,
                    leader_epoch: 3,
                    partition_epoch: 1,
                    adding: Vec::new(),
                    removing: Vec::new(),
                },
            );
        }
        image.topics.insert(
            [9; 16],
            TopicImage {
                name: "t".into(),
                id: [9; 16],
                configs: BTreeMap::new(),
                partitions,
            },
        );
        image.names.insert("t".into(), [9; 16]);
        image.applied_offset = 42;
        let v = ClusterView::from_image(&image, 1, 1, "c", Some(2));
        assert!(
            v.caught_up,
            "the image holds this incarnation's registration"
        );
        assert!(!ClusterView::from_image(&image, 1, 2, "c", Some(2)).caught_up);
        assert!(!ClusterView::from_image(&image, 3, 1, "c", Some(2)).caught_up);
        assert_eq!(v.applied_offset, 42);
        assert!(v.leads("t", 0) && !v.leads("t", 1) && !v.leads("t", 2));
        assert!(v.hosts("t", 0) && !v.hosts("t", 1));
        assert!(!v.leads("t", 3) && !v.leads("t", -1) && !v.leads("u", 0));
        let live: Vec<NodeId> = v.live_brokers().map(|(id, _)| id).collect();
        assert_eq!(live, vec![1]);
        assert_eq!(v.partition("t", 1).map(|p| p.leader_epoch), Some(3));
    }
}
