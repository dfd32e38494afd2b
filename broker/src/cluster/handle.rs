//! How a shard reaches its node's controller executor (cluster mode): a call carries a
//! controller request and a reply slot; the executor asks the active controller (wherever it
//! is) and replies only once every shard has applied a view at or above the answer's metadata
//! offset, so the client that asked reads its own write on any shard.

use futures_channel::{mpsc, oneshot};
use strand_cluster_core::broker_rpc::{BrokerAnswer, BrokerRequest};
use strand_cluster_core::controller_rpc::{Answer, Request};
use strand_cluster_core::quorum::QuorumStatus;
use strand_cluster_core::records::NodeId;
use strand_wire::ErrorCode;

/// What a shard asks of the controller executor.
pub enum ControllerCall {
    /// A controller request, answered once every shard applied its outcome.
    Ask {
        req: Request,
        reply: oneshot::Sender<Answer>,
    },
    /// This node's view of the quorum and its image (DescribeQuorum, `/v1/cluster`).
    Status {
        reply: oneshot::Sender<ClusterStatus>,
    },
    /// A request for another broker (node `to`), e.g. a transaction marker for a partition
    /// it leads; answered with its error, or REQUEST_TIMED_OUT.
    Broker {
        to: NodeId,
        req: BrokerRequest,
        reply: oneshot::Sender<Result<BrokerAnswer, ErrorCode>>,
    },
}

/// A node's metadata side right now.
#[derive(Clone, Debug)]
pub struct ClusterStatus {
    pub quorum: QuorumStatus,
    /// Every voter and its cluster (UDP) address.
    pub voters: Vec<(NodeId, std::net::SocketAddr)>,
    /// The metadata offset applied here, and the image's digest (equal on nodes that applied
    /// the same records).
    pub applied_offset: u64,
    pub image_digest: u64,
    pub topics: usize,
}

/// A shard's end of the controller executor (cloned into every shard).
#[derive(Clone)]
pub struct ClusterHandle {
    pub node_id: NodeId,
    pub calls: mpsc::UnboundedSender<ControllerCall>,
    /// Producer ids from the controller's blocks (refilled by the controller executor).
    pub producer_ids: std::sync::Arc<super::producer_ids::ProducerIdBlocks>,
    /// Peers whose liveness tripwire closed (written by the controller executor).
    pub peers_down: std::sync::Arc<super::peers_down::PeersDown>,
}

impl ClusterHandle {
    /// Asks the controller; an executor that went away answers UNKNOWN_SERVER_ERROR.
    pub async fn call(&self, req: Request) -> Answer {
        let kind = req.kind();
        let (reply, rx) = oneshot::channel();
        if self
            .calls
            .unbounded_send(ControllerCall::Ask { req, reply })
            .is_err()
        {
            return gone(kind);
        }
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or_else(|_| gone(kind))
    }

    /// Asks broker `to` (over the cluster link); its answer's error, REQUEST_TIMED_OUT when
    /// none came in time, NOT_LEADER_OR_FOLLOWER when the way there is gone.
    pub async fn ask_broker(&self, to: NodeId, req: BrokerRequest) -> Result<(), ErrorCode> {
        self.ask_broker_answer(to, req).await.map(|_| ())
    }

    /// [`Self::ask_broker`], with the whole answer (a replica fetch's data).
    pub async fn ask_broker_answer(
        &self,
        to: NodeId,
        req: BrokerRequest,
    ) -> Result<BrokerAnswer, ErrorCode> {
        let (reply, rx) = oneshot::channel();
        self.calls
            .unbounded_send(ControllerCall::Broker { to, req, reply })
            .map_err(|_| ErrorCode::NotLeaderOrFollower)?;
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
    }

    /// The metadata side's status (`None` if the executor is gone).
    pub async fn status(&self) -> Option<ClusterStatus> {
        let (reply, rx) = oneshot::channel();
        self.calls
            .unbounded_send(ControllerCall::Status { reply })
            .ok()?;
        crate::runtime::wake::cross(rx).await.ok()
    }
}

fn gone(kind: &str) -> Answer {
    Answer::refused(
        0,
        ErrorCode::UnknownServerError,
        format!("the controller executor stopped before answering a {kind} request"),
    )
}
