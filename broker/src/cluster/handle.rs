//! How a shard reaches its node's controller executor (cluster mode): a call carries a
//! controller request and a reply slot; the executor asks the active controller (wherever it
//! is) and replies only once every shard has applied a view at or above the answer's metadata
//! offset, so the client that asked reads its own write on any shard.

use futures_channel::{mpsc, oneshot};
use strand_cluster_core::controller_rpc::{Answer, Request};
use strand_cluster_core::records::NodeId;
use strand_wire::ErrorCode;

/// One request of a shard for the controller.
pub struct ControllerCall {
    pub req: Request,
    pub reply: oneshot::Sender<Answer>,
}

/// A shard's end of the controller executor (cloned into every shard).
#[derive(Clone)]
pub struct ClusterHandle {
    pub node_id: NodeId,
    pub calls: mpsc::UnboundedSender<ControllerCall>,
    /// Producer ids from the controller's blocks (refilled by the controller executor).
    pub producer_ids: std::sync::Arc<super::producer_ids::ProducerIdBlocks>,
}

impl ClusterHandle {
    /// Asks the controller; an executor that went away answers UNKNOWN_SERVER_ERROR.
    pub async fn call(&self, req: Request) -> Answer {
        let kind = req.kind();
        let (reply, rx) = oneshot::channel();
        if self
            .calls
            .unbounded_send(ControllerCall { req, reply })
            .is_err()
        {
            return gone(kind);
        }
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or_else(|_| gone(kind))
    }
}

fn gone(kind: &str) -> Answer {
    Answer::refused(
        0,
        ErrorCode::UnknownServerError,
        format!("the controller executor stopped before answering a {kind} request"),
    )
}
