//! OffsetForLeaderEpoch (key 23): where a leader epoch ended in the leader's log. A consumer
//! asks after a leader change with the epoch of the last batch it read (KIP-320): an end
//! offset below its position means the new leader's log was cut there and the consumer
//! truncates (or resets); followers ask the same to find where their logs diverge (KIP-101,
//! KIP-279). Answered from the partition's leader-epoch cache (`storage::partition::replica`);
//! KIP-320's `current_leader_epoch` is checked first (FENCED_LEADER_EPOCH /
//! UNKNOWN_LEADER_EPOCH), and only the leader answers (NOT_LEADER_OR_FOLLOWER).

use std::rc::Rc;

use strand_wire::kafka::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use strand_wire::kafka::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut response = OffsetForLeaderEpochResponse::default();
    for t in req.topics {
        let name = t.topic.0.as_str().to_string();
        let mut tr = OffsetForLeaderTopicResult::default();
        for p in t.partitions {
            let mut pr = EpochEndOffset::default();
            pr.partition = p.partition;
            let answer = match node.check_leader_epoch(&name, p.partition, p.current_leader_epoch) {
                Ok(()) => {
                    node.epoch_end((name.clone(), p.partition), p.leader_epoch)
                        .await
                }
                Err(code) => Err(code),
            };
            match answer {
                Ok((epoch, end)) => {
                    pr.leader_epoch = epoch;
                    pr.end_offset = end;
                }
                Err(code) => {
                    pr.error_code = code.code();
                    pr.leader_epoch = -1;
                    pr.end_offset = -1;
                }
            }
            tr.partitions.push(pr);
        }
        tr.topic = t.topic;
        response.topics.push(tr);
    }
    response
}
