//! Requests refused outright: those on one group, one transactional id, or the cluster,
//! answered with the API's own response carrying Kafka's error.

use strand_wire::kafka::messages::*;
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::{Verdict, CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED, TXN_DENIED};
use crate::security::acl::{Operation, ResourceType};
use crate::security::Checker;

/// Every partition of an offset commit's request, answered with `code`.
macro_rules! every_partition {
    ($req:expr, $code:expr, $topic:ty, $partition:ty) => {
        $req.topics
            .iter()
            .map(|tp| {
                let mut x = <$topic>::default();
                x.name = tp.name.clone();
                x.partitions = tp
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut y = <$partition>::default();
                        y.partition_index = p.partition_index;
                        y.error_code = $code;
                        y
                    })
                    .collect();
                x
            })
            .collect()
    };
}

fn refuse(r: ResponseKind) -> Option<Verdict> {
    Some(Verdict::Refused(Box::new(r)))
}

fn group(checker: &Checker, op: Operation, id: &GroupId) -> bool {
    checker.allows(op, ResourceType::Group, id.0.as_str())
}

fn txn(checker: &Checker, id: &TransactionalId) -> bool {
    checker.allows(
        Operation::Write,
        ResourceType::TransactionalId,
        id.0.as_str(),
    )
}

/// The operation a cluster-level API needs.
fn cluster_op(request: &RequestKind) -> Option<Operation> {
    Some(match request {
        RequestKind::DescribeCluster(_)
        | RequestKind::DescribeQuorum(_)
        | RequestKind::DescribeLogDirs(_)
        | RequestKind::ListPartitionReassignments(_)
        | RequestKind::DescribeAcls(_)
        | RequestKind::DescribeUserScramCredentials(_) => Operation::Describe,
        RequestKind::ElectLeaders(_)
        | RequestKind::AlterPartitionReassignments(_)
        | RequestKind::CreateAcls(_)
        | RequestKind::DeleteAcls(_)
        | RequestKind::AlterUserScramCredentials(_) => Operation::Alter,
        RequestKind::DescribeClientQuotas(_) => Operation::DescribeConfigs,
        _ => return None,
    })
}

fn message() -> Option<StrBytes> {
    Some(StrBytes::from_static_str("Cluster authorization failed."))
}

fn cluster_refusal(request: &RequestKind) -> ResponseKind {
    let code = CLUSTER_DENIED.code();
    // The API's response with its top-level error (and message, where it has one).
    macro_rules! refused {
        ($ty:ident, $variant:ident) => {{
            let mut r = $ty::default();
            r.error_code = code;
            ResponseKind::$variant(r)
        }};
        ($ty:ident, $variant:ident, message) => {{
            let mut r = $ty::default();
            r.error_code = code;
            r.error_message = message();
            ResponseKind::$variant(r)
        }};
    }
    match request {
        RequestKind::DescribeCluster(_) => {
            refused!(DescribeClusterResponse, DescribeCluster, message)
        }
        RequestKind::DescribeQuorum(_) => refused!(DescribeQuorumResponse, DescribeQuorum, message),
        RequestKind::DescribeLogDirs(_) => refused!(DescribeLogDirsResponse, DescribeLogDirs),
        RequestKind::ListPartitionReassignments(_) => {
            refused!(
                ListPartitionReassignmentsResponse,
                ListPartitionReassignments,
                message
            )
        }
        RequestKind::DescribeAcls(_) => refused!(DescribeAclsResponse, DescribeAcls, message),
        RequestKind::DescribeUserScramCredentials(_) => {
            refused!(
                DescribeUserScramCredentialsResponse,
                DescribeUserScramCredentials,
                message
            )
        }
        RequestKind::DescribeClientQuotas(_) => {
            refused!(DescribeClientQuotasResponse, DescribeClientQuotas, message)
        }
        RequestKind::ElectLeaders(_) => refused!(ElectLeadersResponse, ElectLeaders),
        RequestKind::AlterPartitionReassignments(_) => {
            refused!(
                AlterPartitionReassignmentsResponse,
                AlterPartitionReassignments,
                message
            )
        }
        RequestKind::CreateAcls(req) => {
            let mut r = CreateAclsResponse::default();
            r.results = req
                .creations
                .iter()
                .map(|_| {
                    let mut x = create_acls_response::AclCreationResult::default();
                    x.error_code = code;
                    x.error_message = message();
                    x
                })
                .collect();
            ResponseKind::CreateAcls(r)
        }
        RequestKind::DeleteAcls(req) => {
            let mut r = DeleteAclsResponse::default();
            r.filter_results = req
                .filters
                .iter()
                .map(|_| {
                    let mut x = delete_acls_response::DeleteAclsFilterResult::default();
                    x.error_code = code;
                    x.error_message = message();
                    x
                })
                .collect();
            ResponseKind::DeleteAcls(r)
        }
        RequestKind::AlterUserScramCredentials(req) => {
            let mut users: Vec<&StrBytes> = req
                .deletions
                .iter()
                .map(|d| &d.name)
                .chain(req.upsertions.iter().map(|u| &u.name))
                .collect();
            users.dedup();
            let mut r = AlterUserScramCredentialsResponse::default();
            r.results = users
                .into_iter()
                .map(|u| {
                    let mut x =
                        alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default();
                    x.user = u.clone();
                    x.error_code = code;
                    x.error_message = message();
                    x
                })
                .collect();
            ResponseKind::AlterUserScramCredentials(r)
        }
        _ => ResponseKind::DescribeCluster(DescribeClusterResponse::default()),
    }
}

/// `Some` when the request is refused whole.
pub fn check(checker: &Checker, version: i16, request: &RequestKind) -> Option<Verdict> {
    if let Some(op) = cluster_op(request) {
        if !checker.cluster(op) {
            return refuse(cluster_refusal(request));
        }
        return None;
    }
    let g = GROUP_DENIED.code();
    let t = TXN_DENIED.code();
    match request {
        RequestKind::Produce(req) => {
            let id = req.transactional_id.as_ref()?;
            if txn(checker, id) {
                return None;
            }
            if req.acks == 0 {
                return Some(Verdict::Dropped);
            }
            let mut r = ProduceResponse::default();
            r.responses = req
                .topic_data
                .iter()
                .map(|td| {
                    let mut tr = produce_response::TopicProduceResponse::default();
                    tr.name = td.name.clone();
                    tr.partition_responses = td
                        .partition_data
                        .iter()
                        .map(|p| {
                            let mut pr = produce_response::PartitionProduceResponse::default();
                            pr.index = p.index;
                            pr.error_code = t;
                            pr
                        })
                        .collect();
                    tr
                })
                .collect();
            refuse(ResponseKind::Produce(r))
        }
        RequestKind::FindCoordinator(req) if version < 4 => {
            let (rt, code) = match req.key_type {
                1 => (ResourceType::TransactionalId, t),
                _ => (ResourceType::Group, g),
            };
            if checker.allows(Operation::Describe, rt, req.key.as_str()) {
                return None;
            }
            let mut r = FindCoordinatorResponse::default();
            r.error_code = code;
            r.node_id = BrokerId(-1);
            r.port = -1;
            refuse(ResponseKind::FindCoordinator(r))
        }
        RequestKind::OffsetFetch(req)
            if version < 8 && !group(checker, Operation::Describe, &req.group_id) =>
        {
            let mut r = OffsetFetchResponse::default();
            r.error_code = g;
            for tp in req.topics.iter().flatten() {
                let mut x = offset_fetch_response::OffsetFetchResponseTopic::default();
                x.name = tp.name.clone();
                x.partitions = tp
                    .partition_indexes
                    .iter()
                    .map(|&p| {
                        let mut y = offset_fetch_response::OffsetFetchResponsePartition::default();
                        y.partition_index = p;
                        y.committed_offset = -1;
                        y.error_code = g;
                        y
                    })
                    .collect();
                r.topics.push(x);
            }
            refuse(ResponseKind::OffsetFetch(r))
        }
        RequestKind::JoinGroup(req) if !group(checker, Operation::Read, &req.group_id) => {
            let mut r = JoinGroupResponse::default();
            r.error_code = g;
            r.member_id = req.member_id.clone();
            refuse(ResponseKind::JoinGroup(r))
        }
        RequestKind::SyncGroup(req) if !group(checker, Operation::Read, &req.group_id) => {
            let mut r = SyncGroupResponse::default();
            r.error_code = g;
            refuse(ResponseKind::SyncGroup(r))
        }
        RequestKind::Heartbeat(req) if !group(checker, Operation::Read, &req.group_id) => {
            let mut r = HeartbeatResponse::default();
            r.error_code = g;
            refuse(ResponseKind::Heartbeat(r))
        }
        RequestKind::ConsumerGroupHeartbeat(req)
            if !group(checker, Operation::Read, &req.group_id) =>
        {
            let mut r = ConsumerGroupHeartbeatResponse::default();
            r.error_code = g;
            r.member_epoch = -1;
            refuse(ResponseKind::ConsumerGroupHeartbeat(r))
        }
        RequestKind::ShareGroupHeartbeat(req)
            if !group(checker, Operation::Read, &req.group_id) =>
        {
            let mut r = ShareGroupHeartbeatResponse::default();
            r.error_code = g;
            r.member_epoch = -1;
            refuse(ResponseKind::ShareGroupHeartbeat(r))
        }
        RequestKind::ShareFetch(req)
            if req
                .group_id
                .as_ref()
                .is_some_and(|id| !group(checker, Operation::Read, id)) =>
        {
            let mut r = ShareFetchResponse::default();
            r.error_code = g;
            refuse(ResponseKind::ShareFetch(r))
        }
        RequestKind::ShareAcknowledge(req)
            if req
                .group_id
                .as_ref()
                .is_some_and(|id| !group(checker, Operation::Read, id)) =>
        {
            let mut r = ShareAcknowledgeResponse::default();
            r.error_code = g;
            refuse(ResponseKind::ShareAcknowledge(r))
        }
        RequestKind::DescribeShareGroupOffsets(req)
            if req
                .groups
                .iter()
                .any(|g| !group(checker, Operation::Describe, &g.group_id)) =>
        {
            let mut r = DescribeShareGroupOffsetsResponse::default();
            r.groups = req
                .groups
                .iter()
                .map(|x| {
                    let mut y = describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup::default();
                    y.group_id = x.group_id.clone();
                    y.error_code = g;
                    y
                })
                .collect();
            refuse(ResponseKind::DescribeShareGroupOffsets(r))
        }
        RequestKind::AlterShareGroupOffsets(req)
            if !group(checker, Operation::Read, &req.group_id) =>
        {
            let mut r = AlterShareGroupOffsetsResponse::default();
            r.error_code = g;
            refuse(ResponseKind::AlterShareGroupOffsets(r))
        }
        RequestKind::DeleteShareGroupOffsets(req)
            if !group(checker, Operation::Delete, &req.group_id) =>
        {
            let mut r = DeleteShareGroupOffsetsResponse::default();
            r.error_code = g;
            refuse(ResponseKind::DeleteShareGroupOffsets(r))
        }
        RequestKind::LeaveGroup(req) if !group(checker, Operation::Read, &req.group_id) => {
            let mut r = LeaveGroupResponse::default();
            r.error_code = g;
            refuse(ResponseKind::LeaveGroup(r))
        }
        RequestKind::OffsetDelete(req) if !group(checker, Operation::Delete, &req.group_id) => {
            let mut r = OffsetDeleteResponse::default();
            r.error_code = g;
            refuse(ResponseKind::OffsetDelete(r))
        }
        RequestKind::OffsetCommit(req) if !group(checker, Operation::Read, &req.group_id) => {
            let mut r = OffsetCommitResponse::default();
            r.topics = every_partition!(
                req,
                g,
                offset_commit_response::OffsetCommitResponseTopic,
                offset_commit_response::OffsetCommitResponsePartition
            );
            refuse(ResponseKind::OffsetCommit(r))
        }
        RequestKind::TxnOffsetCommit(req) => {
            let code = if !txn(checker, &req.transactional_id) {
                t
            } else if !group(checker, Operation::Read, &req.group_id) {
                g
            } else {
                return None;
            };
            let mut r = TxnOffsetCommitResponse::default();
            r.topics = every_partition!(
                req,
                code,
                txn_offset_commit_response::TxnOffsetCommitResponseTopic,
                txn_offset_commit_response::TxnOffsetCommitResponsePartition
            );
            refuse(ResponseKind::TxnOffsetCommit(r))
        }
        RequestKind::InitProducerId(req) => {
            let code = match &req.transactional_id {
                Some(id) if !txn(checker, id) => t,
                Some(_) => return None,
                None => {
                    let idempotent = checker.cluster(Operation::IdempotentWrite)
                        || checker.allows_any(Operation::Write, ResourceType::Topic);
                    if idempotent {
                        return None;
                    }
                    CLUSTER_DENIED.code()
                }
            };
            let mut r = InitProducerIdResponse::default();
            r.error_code = code;
            r.producer_id = ProducerId(-1);
            r.producer_epoch = -1;
            refuse(ResponseKind::InitProducerId(r))
        }
        RequestKind::AddOffsetsToTxn(req) => {
            let code = if !txn(checker, &req.transactional_id) {
                t
            } else if !group(checker, Operation::Read, &req.group_id) {
                g
            } else {
                return None;
            };
            let mut r = AddOffsetsToTxnResponse::default();
            r.error_code = code;
            refuse(ResponseKind::AddOffsetsToTxn(r))
        }
        RequestKind::EndTxn(req) if !txn(checker, &req.transactional_id) => {
            let mut r = EndTxnResponse::default();
            r.error_code = t;
            refuse(ResponseKind::EndTxn(r))
        }
        RequestKind::AddPartitionsToTxn(_) if version >= 4 => {
            if checker.cluster(Operation::ClusterAction) {
                return None;
            }
            let mut r = AddPartitionsToTxnResponse::default();
            r.error_code = CLUSTER_DENIED.code();
            refuse(ResponseKind::AddPartitionsToTxn(r))
        }
        RequestKind::AddPartitionsToTxn(req) => {
            // v0-v3: one transaction. Kafka adds none of the partitions if any is refused:
            // the refused get the error, the rest OPERATION_NOT_ATTEMPTED.
            let id_ok = txn(checker, &req.v3_and_below_transactional_id);
            let topic_ok = |name: &str| checker.allows(Operation::Write, ResourceType::Topic, name);
            if id_ok
                && req
                    .v3_and_below_topics
                    .iter()
                    .all(|tp| topic_ok(tp.name.0.as_str()))
            {
                return None;
            }
            let mut r = AddPartitionsToTxnResponse::default();
            r.results_by_topic_v3_and_below = req
                .v3_and_below_topics
                .iter()
                .map(|tp| {
                    let code = if !id_ok {
                        t
                    } else if !topic_ok(tp.name.0.as_str()) {
                        TOPIC_DENIED.code()
                    } else {
                        ErrorCode::OperationNotAttempted.code()
                    };
                    let mut x = add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default();
                    x.name = tp.name.clone();
                    x.results_by_partition = tp
                        .partitions
                        .iter()
                        .map(|&p| {
                            let mut y = add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default();
                            y.partition_index = p;
                            y.partition_error_code = code;
                            y
                        })
                        .collect();
                    x
                })
                .collect();
            refuse(ResponseKind::AddPartitionsToTxn(r))
        }
        _ => None,
    }
}
