//! The address a client is told to use for this node is the one of the listener it came in
//! on (Kafka's per-listener `advertised.listeners`): a SASL_SSL client that bootstrapped on
//! :9093 must not be sent to the PLAINTEXT :9092. Handlers name this node by
//! `kafka::advertised` (the first listener); on a single node, responses that carry broker
//! addresses — Metadata, DescribeCluster, FindCoordinator, Produce's KIP-951 endpoints — get
//! this node's entries rewritten here. A cluster node registers one endpoint (the controller
//! knows no other), so there the registered address stands.

use strand_wire::kafka::messages::ResponseKind;
use strand_wire::kafka::protocol::StrBytes;

use crate::node::Node;
use crate::security::config::Listener;

/// Rewrites this node's address in `response` to `listener`'s advertised one.
pub fn rewrite(node: &Node, listener: &Listener, response: &mut ResponseKind) {
    if node.config().cluster.is_some() {
        return;
    }
    let me = node.node_id();
    let host = || StrBytes::from_string(listener.advertised.0.clone());
    let port = i32::from(listener.advertised.1);
    match response {
        ResponseKind::Metadata(r) => {
            for b in r.brokers.iter_mut().filter(|b| b.node_id.0 == me) {
                b.host = host();
                b.port = port;
            }
        }
        ResponseKind::DescribeCluster(r) => {
            for b in r.brokers.iter_mut().filter(|b| b.broker_id.0 == me) {
                b.host = host();
                b.port = port;
            }
        }
        ResponseKind::FindCoordinator(r) => {
            // v0-v3 answer one coordinator at the top; v4 only in `coordinators` (the
            // top-level fields must then stay at their defaults to encode).
            if r.coordinators.is_empty() && r.node_id.0 == me {
                r.host = host();
                r.port = port;
            }
            for c in r.coordinators.iter_mut().filter(|c| c.node_id.0 == me) {
                c.host = host();
                c.port = port;
            }
        }
        ResponseKind::Produce(r) => {
            for e in r.node_endpoints.iter_mut().filter(|e| e.node_id.0 == me) {
                e.host = host();
                e.port = port;
            }
        }
        _ => {}
    }
}
