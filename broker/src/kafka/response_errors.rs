//! The error codes a response carries, for `strand_kafka_request_errors_total` (#20): the
//! top-level code and each item's (topic, partition, group, member, resource), whatever the
//! API. Produce and Fetch are counted where their partitions are answered (`produce`,
//! `fetch`), so they are not walked here.

use strand_wire::kafka::messages::ResponseKind;

/// Calls `each` with every non-zero error code in `r`.
pub fn each_error(r: &ResponseKind, mut each: impl FnMut(i16)) {
    let mut one = |code: i16| {
        if code != 0 {
            each(code)
        }
    };
    match r {
        ResponseKind::Metadata(r) => {
            for t in &r.topics {
                one(t.error_code);
                t.partitions.iter().for_each(|p| one(p.error_code));
            }
        }
        ResponseKind::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| one(p.error_code)),
        ResponseKind::CreateTopics(r) => r.topics.iter().for_each(|t| one(t.error_code)),
        ResponseKind::DeleteTopics(r) => r.responses.iter().for_each(|t| one(t.error_code)),
        ResponseKind::CreatePartitions(r) => r.results.iter().for_each(|t| one(t.error_code)),
        ResponseKind::DescribeConfigs(r) => r.results.iter().for_each(|t| one(t.error_code)),
        ResponseKind::IncrementalAlterConfigs(r) => {
            r.responses.iter().for_each(|t| one(t.error_code))
        }
        ResponseKind::AlterConfigs(r) => r.responses.iter().for_each(|t| one(t.error_code)),
        ResponseKind::InitProducerId(r) => one(r.error_code),
        ResponseKind::AddPartitionsToTxn(r) => {
            one(r.error_code);
            r.results_by_transaction
                .iter()
                .flat_map(|t| &t.topic_results)
                .flat_map(|t| &t.results_by_partition)
                .for_each(|p| one(p.partition_error_code));
            r.results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| &t.results_by_partition)
                .for_each(|p| one(p.partition_error_code));
        }
        ResponseKind::AddOffsetsToTxn(r) => one(r.error_code),
        ResponseKind::EndTxn(r) => one(r.error_code),
        ResponseKind::TxnOffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| one(p.error_code)),
        ResponseKind::FindCoordinator(r) => {
            one(r.error_code);
            r.coordinators.iter().for_each(|c| one(c.error_code));
        }
        ResponseKind::JoinGroup(r) => one(r.error_code),
        ResponseKind::SyncGroup(r) => one(r.error_code),
        ResponseKind::Heartbeat(r) => one(r.error_code),
        ResponseKind::LeaveGroup(r) => {
            one(r.error_code);
            r.members.iter().for_each(|m| one(m.error_code));
        }
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| one(p.error_code)),
        ResponseKind::OffsetFetch(r) => {
            one(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| one(p.error_code));
            for g in &r.groups {
                one(g.error_code);
                g.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .for_each(|p| one(p.error_code));
            }
        }
        ResponseKind::ListGroups(r) => one(r.error_code),
        ResponseKind::DescribeGroups(r) => r.groups.iter().for_each(|g| one(g.error_code)),
        ResponseKind::DeleteGroups(r) => r.results.iter().for_each(|g| one(g.error_code)),
        ResponseKind::OffsetDelete(r) => {
            one(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| one(p.error_code));
        }
        ResponseKind::DeleteRecords(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| one(p.error_code)),
        ResponseKind::OffsetForLeaderEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| one(p.error_code)),
        ResponseKind::DescribeProducers(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| one(p.error_code)),
        ResponseKind::DescribeTransactions(r) => {
            r.transaction_states.iter().for_each(|t| one(t.error_code))
        }
        ResponseKind::ListTransactions(r) => one(r.error_code),
        ResponseKind::ElectLeaders(r) => {
            one(r.error_code);
            r.replica_election_results
                .iter()
                .flat_map(|t| &t.partition_result)
                .for_each(|p| one(p.error_code));
        }
        ResponseKind::AlterPartitionReassignments(r) => {
            one(r.error_code);
            r.responses
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| one(p.error_code));
        }
        ResponseKind::ListPartitionReassignments(r) => one(r.error_code),
        ResponseKind::DescribeLogDirs(r) => {
            one(r.error_code);
            r.results.iter().for_each(|d| one(d.error_code));
        }
        ResponseKind::DescribeQuorum(r) => {
            one(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| one(p.error_code));
        }
        ResponseKind::DescribeCluster(r) => one(r.error_code),
        // ApiVersions answers UNSUPPORTED_VERSION before decoding (counted by the
        // connection); Produce and Fetch per partition where they are answered.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::kafka::messages::{HeartbeatResponse, MetadataResponse};

    #[test]
    fn top_level_and_item_codes() {
        let mut codes = Vec::new();
        let mut hb = HeartbeatResponse::default();
        hb.error_code = 27;
        each_error(&ResponseKind::Heartbeat(hb), |c| codes.push(c));
        assert_eq!(codes, vec![27]);
        codes.clear();
        let mut md = MetadataResponse::default();
        let mut t =
            strand_wire::kafka::messages::metadata_response::MetadataResponseTopic::default();
        t.error_code = 3;
        md.topics.push(t);
        md.topics.push(Default::default());
        each_error(&ResponseKind::Metadata(md), |c| codes.push(c));
        assert_eq!(codes, vec![3], "zeros are not errors");
    }
}
