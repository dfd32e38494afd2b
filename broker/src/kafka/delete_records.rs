//! DeleteRecords (key 21): moves each partition's log start offset up (offset -1: to the high
//! watermark); records below it are no longer served and whole segments below it are deleted.
//! The new start is persisted (`log-start-offset`), so it holds across restarts.

use std::rc::Rc;

use strand_wire::kafka::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use strand_wire::kafka::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::node::Node;
use crate::storage::Offset;

pub async fn handle(node: &Rc<Node>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut r = DeleteRecordsResponse::default();
    for t in req.topics {
        let mut tr = DeleteRecordsTopicResult::default();
        let name = t.name.0.as_str().to_string();
        for p in t.partitions {
            let mut pr = DeleteRecordsPartitionResult::default();
            pr.partition_index = p.partition_index;
            match node
                .delete_records((name.clone(), p.partition_index), Offset(p.offset))
                .await
            {
                Ok(start) => pr.low_watermark = start.0,
                Err(code) => {
                    pr.error_code = code.code();
                    pr.low_watermark = -1;
                }
            }
            tr.partitions.push(pr);
        }
        tr.name = t.name;
        r.topics.push(tr);
    }
    r
}
