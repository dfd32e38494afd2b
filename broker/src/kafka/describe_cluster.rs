//! DescribeCluster (key 60): this node, as broker and controller.

use strand_wire::kafka::messages::describe_cluster_response::DescribeClusterBroker;
use strand_wire::kafka::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use strand_wire::kafka::protocol::StrBytes;

use super::{advertised, NODE_ID};
use crate::node::Node;

pub fn handle(node: &Node, req: &DescribeClusterRequest) -> DescribeClusterResponse {
    let (host, port) = advertised(node);
    let mut b = DescribeClusterBroker::default();
    b.broker_id = BrokerId(NODE_ID);
    b.host = StrBytes::from_string(host);
    b.port = port;
    let mut r = DescribeClusterResponse::default();
    r.cluster_id = StrBytes::from_string(node.shared.cluster_id.clone());
    r.controller_id = BrokerId(NODE_ID);
    r.brokers = vec![b];
    if req.include_cluster_authorized_operations {
        r.cluster_authorized_operations = super::authorized::CLUSTER;
    }
    r
}
