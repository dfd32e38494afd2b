//! DescribeCluster (key 60): the live brokers and the active controller (this node alone
//! outside a cluster).

use strand_wire::kafka::messages::describe_cluster_response::DescribeClusterBroker;
use strand_wire::kafka::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use strand_wire::kafka::protocol::StrBytes;

use super::brokers::{brokers, controller_id};
use crate::node::Node;

pub fn handle(node: &Node, req: &DescribeClusterRequest) -> DescribeClusterResponse {
    let catalog = node.catalog();
    let mut r = DescribeClusterResponse::default();
    r.cluster_id = StrBytes::from_string(node.shared.cluster_id.clone());
    r.controller_id = BrokerId(controller_id(node, &catalog));
    r.brokers = brokers(node, &catalog)
        .into_iter()
        .map(|info| {
            let mut b = DescribeClusterBroker::default();
            b.broker_id = BrokerId(info.id);
            b.host = StrBytes::from_string(info.host);
            b.port = info.port;
            b.rack = info.rack.map(StrBytes::from_string);
            b
        })
        .collect();
    if req.include_cluster_authorized_operations {
        r.cluster_authorized_operations = super::authorized::CLUSTER;
    }
    r
}
