//! Where clients are sent: the brokers, the controller and each partition's leader — from
//! the cluster view in cluster mode, this node alone otherwise. Metadata, DescribeCluster and
//! FindCoordinator answer from here.

use crate::catalog::Catalog;
use crate::node::Node;

/// A broker as clients see it.
pub struct BrokerInfo {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// The brokers clients may use: the live (unfenced) registered ones, or this node.
pub fn brokers(node: &Node, catalog: &Catalog) -> Vec<BrokerInfo> {
    match &catalog.cluster {
        Some(view) => view
            .live_brokers()
            .map(|(id, b)| BrokerInfo {
                id,
                host: b.host.clone(),
                port: i32::from(b.port),
                rack: b.rack.clone(),
            })
            .collect(),
        None => {
            let (host, port) = super::advertised(node);
            vec![BrokerInfo {
                id: node.node_id(),
                host,
                port,
                rack: None,
            }]
        }
    }
}

/// The active controller's id (-1 while none is known, as Kafka answers).
pub fn controller_id(node: &Node, catalog: &Catalog) -> i32 {
    match &catalog.cluster {
        Some(view) => view.controller.unwrap_or(-1),
        None => node.node_id(),
    }
}

/// A partition's leader, leader epoch, replicas and ISR as Metadata reports them.
pub struct PartitionPlacement {
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

pub fn placement(
    node: &Node,
    catalog: &Catalog,
    topic: &str,
    partition: i32,
) -> PartitionPlacement {
    match catalog
        .cluster
        .as_ref()
        .and_then(|v| v.partition(topic, partition))
    {
        Some(p) => PartitionPlacement {
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            replicas: p.replicas.iter().map(|r| r.node).collect(),
            isr: p.isr.clone(),
        },
        None => {
            let me = node.node_id();
            PartitionPlacement {
                leader: if catalog.cluster.is_some() { -1 } else { me },
                leader_epoch: 0,
                replicas: vec![me],
                isr: vec![me],
            }
        }
    }
}

/// The broker (id, host, port) leading `topic`/`partition`, if it is live.
pub fn leader_endpoint(
    node: &Node,
    catalog: &Catalog,
    topic: &str,
    partition: i32,
) -> Option<BrokerInfo> {
    let leader = placement(node, catalog, topic, partition).leader;
    brokers(node, catalog).into_iter().find(|b| b.id == leader)
}
