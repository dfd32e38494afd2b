//! DescribeProducers (key 61): per partition, the producers with state there — epoch, last
//! sequence and timestamp, and where their open transaction started
//! (`kafka-transactions --describe-producers`, `--find-hanging`).

use std::rc::Rc;

use strand_wire::kafka::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use strand_wire::kafka::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};

use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: DescribeProducersRequest) -> DescribeProducersResponse {
    let mut r = DescribeProducersResponse::default();
    for t in req.topics {
        let mut tr = TopicResponse::default();
        let name = t.name.0.as_str().to_string();
        for p in t.partition_indexes {
            let mut pr = PartitionResponse::default();
            pr.partition_index = p;
            match node.producers((name.clone(), p)).await {
                Ok(list) => {
                    pr.active_producers = list
                        .into_iter()
                        .map(|info| {
                            let mut s = ProducerState::default();
                            s.producer_id = ProducerId(info.producer_id);
                            s.producer_epoch = i32::from(info.epoch);
                            s.last_sequence = info.last_sequence;
                            s.last_timestamp = info.last_timestamp_ms;
                            s.coordinator_epoch = 0;
                            s.current_txn_start_offset = info.txn_start.map_or(-1, |o| o.0);
                            s
                        })
                        .collect();
                }
                Err(code) => pr.error_code = code.code(),
            }
            tr.partitions.push(pr);
        }
        tr.name = t.name;
        r.topics.push(tr);
    }
    r
}
