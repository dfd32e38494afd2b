//! TxnOffsetCommit (key 28): offsets consumed inside a transaction, written to the group's
//! `__consumer_offsets` partition as part of it; OffsetFetch sees them only after the commit
//! marker (and never after an abort).

use std::rc::Rc;

use strand_wire::kafka::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use strand_wire::kafka::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use strand_wire::ErrorCode;

use super::add_partitions_to_txn::claim;
use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::txn_service::{TxnRequest, TxnResponse};
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let code = commit(node, &req, version).await;
    let mut r = TxnOffsetCommitResponse::default();
    r.topics = req
        .topics
        .into_iter()
        .map(|t| {
            let mut tr = TxnOffsetCommitResponseTopic::default();
            tr.name = t.name;
            tr.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut pr = TxnOffsetCommitResponsePartition::default();
                    pr.partition_index = p.partition_index;
                    pr.error_code = code.code();
                    pr
                })
                .collect();
            tr
        })
        .collect();
    r
}

async fn commit(node: &Rc<Node>, req: &TxnOffsetCommitRequest, version: i16) -> ErrorCode {
    let id = req.transactional_id.0.as_str().to_string();
    let group = req.group_id.0.as_str().to_string();
    let claim = claim(req.producer_id.0, req.producer_epoch, version, 3);
    // The offsets partition must already be in the transaction (AddOffsetsToTxn). Checked
    // when this node also coordinates the transaction; in a cluster where another node does,
    // the group coordinator accepts as Kafka's does (transaction version 1 has no such check).
    let txn_here = node
        .remote_leader(&crate::node::txn_service::txn_tp(&id))
        .is_none();
    if txn_here {
        match node
            .txn_request(
                &id,
                TxnRequest::CheckOffsets {
                    id: id.clone(),
                    claim,
                },
            )
            .await
        {
            TxnResponse::Done(Ok(())) => {}
            TxnResponse::Done(Err(code)) => return code,
            _ => return ErrorCode::UnknownServerError,
        }
    }
    let offsets = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    (t.name.0.as_str().to_string(), p.partition_index),
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata
                        .as_ref()
                        .map(|m| m.as_str().to_string()),
                )
            })
        })
        .collect();
    let request = GroupRequest::TxnCommit {
        group: group.clone(),
        member: req.member_id.as_str().to_string(),
        instance: req
            .group_instance_id
            .as_ref()
            .map(|s| s.as_str().to_string()),
        generation: if version >= 3 { req.generation_id } else { -1 },
        producer_id: req.producer_id.0,
        epoch: req.producer_epoch,
        offsets,
    };
    match node.group_request(&group, request).await {
        GroupResponse::Error(e) => e,
        _ => ErrorCode::UnknownServerError,
    }
}
