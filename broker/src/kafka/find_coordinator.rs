//! FindCoordinator (key 10): a group's coordinator is the leader of its `__consumer_offsets`
//! partition, a transactional id's the leader of its `__transaction_state` partition (this
//! node on a single node); COORDINATOR_NOT_AVAILABLE while that partition has no live leader
//! (clients retry). The batched form (v4+) answers each key.

use strand_wire::kafka::messages::find_coordinator_response::Coordinator;
use strand_wire::kafka::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::brokers::{leader_endpoint, BrokerInfo};
use crate::internal_topics::{offsets_partition, txn_partition, OFFSETS_TOPIC, TXN_TOPIC};
use crate::node::Node;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The coordinator of `key`, or the error to answer.
fn coordinator(node: &Node, key_type: i8, key: &str) -> Result<BrokerInfo, ErrorCode> {
    let (topic, partition) = match key_type {
        KEY_TYPE_GROUP => (OFFSETS_TOPIC, offsets_partition(key)),
        KEY_TYPE_TRANSACTION => (TXN_TOPIC, txn_partition(key)),
        _ => return Err(ErrorCode::CoordinatorNotAvailable),
    };
    let catalog = node.catalog();
    if catalog.cluster.is_some() && !catalog.topics.contains_key(topic) {
        return Err(ErrorCode::CoordinatorNotAvailable);
    }
    // A node not caught up with the metadata log since it started may name a coordinator
    // from before its restart (see `ClusterView::caught_up`): clients ask again.
    if catalog.cluster.as_ref().is_some_and(|v| !v.caught_up) {
        return Err(ErrorCode::CoordinatorNotAvailable);
    }
    leader_endpoint(node, &catalog, topic, partition).ok_or(ErrorCode::CoordinatorNotAvailable)
}

fn none() -> BrokerInfo {
    BrokerInfo {
        id: -1,
        host: String::new(),
        port: -1,
        rack: None,
    }
}

pub fn handle(node: &Node, req: FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    let mut r = FindCoordinatorResponse::default();
    if version >= 4 {
        r.coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let (b, error) = match coordinator(node, req.key_type, key.as_str()) {
                    Ok(b) => (b, ErrorCode::None),
                    Err(e) => (none(), e),
                };
                let mut c = Coordinator::default();
                c.key = key;
                c.node_id = BrokerId(b.id);
                c.host = StrBytes::from_string(b.host);
                c.port = b.port;
                c.error_code = error.code();
                c
            })
            .collect();
    } else {
        let (b, error) = match coordinator(node, req.key_type, req.key.as_str()) {
            Ok(b) => (b, ErrorCode::None),
            Err(e) => (none(), e),
        };
        r.error_code = error.code();
        r.node_id = BrokerId(b.id);
        r.host = StrBytes::from_string(b.host);
        r.port = b.port;
    }
    r
}
