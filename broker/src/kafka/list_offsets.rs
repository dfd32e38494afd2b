//! ListOffsets (key 2): earliest (-2), latest (-1; the last stable offset for
//! `isolation_level=1`, read_committed), or the first offset at or after a timestamp, per
//! partition.

use std::rc::Rc;

use strand_wire::kafka::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use strand_wire::kafka::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    mut req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    let topics = std::mem::take(&mut req.topics);
    for t in topics {
        let mut tr = ListOffsetsTopicResponse::default();
        let name = t.name.0.as_str().to_string();
        for p in t.partitions {
            let mut pr = ListOffsetsPartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.timestamp = -1;
            let checked = node.check_leader_epoch(&name, p.partition_index, p.current_leader_epoch);
            let answer = match checked {
                Ok(()) => {
                    node.offsets(
                        (name.clone(), p.partition_index),
                        p.timestamp,
                        req.isolation_level == 1,
                    )
                    .await
                }
                Err(code) => Err(code),
            };
            match answer {
                Ok((offset, timestamp)) => {
                    pr.offset = offset.0;
                    pr.timestamp = timestamp;
                    if version >= 4 {
                        // The field exists from v4 on (an older answer cannot carry it).
                        pr.leader_epoch = node.leader_epoch(&name, p.partition_index);
                    }
                }
                Err(code) => {
                    pr.error_code = code.code();
                    pr.offset = -1;
                }
            }
            tr.partitions.push(pr);
        }
        tr.name = t.name;
        response.topics.push(tr);
    }
    response
}
