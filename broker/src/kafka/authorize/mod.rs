//! Authorisation of every request: the operation Kafka checks for each API (KafkaApis), on
//! the resource it checks it on, with Kafka's error. Runs in `kafka::handle` before the
//! API's handler, only when ACLs are on (`authorizer.class.name`).
//!
//! Three shapes:
//! - **whole request** — the API acts on one resource (a group, a transactional id, the
//!   cluster): refused outright with the API's own error response (`whole`);
//! - **per item** — the API lists topics, groups or config resources: items the principal
//!   may not touch are taken out of the request, the handler serves the rest, and the
//!   refused ones are put back into the response with the error (`items`);
//! - **filtered** — listings (Metadata of all topics, ListGroups, ListTransactions, an
//!   OffsetFetch of all topics) leave out what the principal may not describe (`after`).
//!
//! | API | checks |
//! |---|---|
//! | Produce | WRITE transactional id (if any); WRITE topic |
//! | Fetch (consumer) | READ topic |
//! | Metadata | DESCRIBE topic (hidden from listings); auto-create needs CREATE cluster or topic |
//! | ListOffsets, OffsetForLeaderEpoch | DESCRIBE topic |
//! | CreateTopics | CREATE cluster or topic |
//! | DeleteTopics / DeleteRecords | DELETE topic |
//! | CreatePartitions | ALTER topic |
//! | DescribeConfigs / AlterConfigs, IncrementalAlterConfigs | DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic or cluster |
//! | JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat, ShareGroupHeartbeat, ShareFetch, ShareAcknowledge | READ group (ShareFetch's topics: not checked yet) |
//! | OffsetCommit | READ group; READ topic |
//! | OffsetFetch | DESCRIBE group; DESCRIBE topic |
//! | OffsetDelete | DELETE group; READ topic |
//! | DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe, DescribeShareGroupOffsets / DeleteGroups, DeleteShareGroupOffsets | DESCRIBE / DELETE group |
//! | AlterShareGroupOffsets | READ group |
//! | ListGroups | DESCRIBE cluster, or each group's DESCRIBE |
//! | FindCoordinator | DESCRIBE group or transactional id |
//! | InitProducerId | WRITE transactional id; without one IDEMPOTENT_WRITE cluster or WRITE on some topic |
//! | AddPartitionsToTxn | WRITE transactional id; WRITE topic (v4, broker to broker: CLUSTER_ACTION) |
//! | AddOffsetsToTxn | WRITE transactional id; READ group |
//! | TxnOffsetCommit | WRITE transactional id; READ group; READ topic |
//! | EndTxn | WRITE transactional id |
//! | DescribeTransactions / ListTransactions | DESCRIBE transactional id |
//! | DescribeProducers | READ topic |
//! | DescribeCluster, DescribeQuorum, DescribeLogDirs, ListPartitionReassignments, DescribeAcls, DescribeUserScramCredentials | DESCRIBE cluster |
//! | DescribeClientQuotas | DESCRIBE_CONFIGS cluster |
//! | ElectLeaders, AlterPartitionReassignments, CreateAcls, DeleteAcls, AlterUserScramCredentials | ALTER cluster |
//! | ApiVersions, SaslHandshake, SaslAuthenticate | none |

mod items;
mod whole;

use strand_wire::kafka::messages::{RequestKind, ResponseKind};
use strand_wire::ErrorCode;

use crate::security::acl::{Operation, ResourceType};
use crate::security::Checker;

pub use items::Denied;

/// What the authoriser made of a request: refused whole (the response to send), or the
/// request to serve with what was taken out of it.
pub enum Verdict {
    Refused(Box<ResponseKind>),
    /// acks=0 Produce refused: nothing goes back (Kafka closes such connections; we drop).
    Dropped,
    Serve(Box<RequestKind>, Denied),
}

pub const TOPIC_DENIED: ErrorCode = ErrorCode::TopicAuthorizationFailed;
pub const GROUP_DENIED: ErrorCode = ErrorCode::GroupAuthorizationFailed;
pub const CLUSTER_DENIED: ErrorCode = ErrorCode::ClusterAuthorizationFailed;
pub const TXN_DENIED: ErrorCode = ErrorCode::TransactionalIdAuthorizationFailed;

/// Checks `request` for the connection behind `checker`.
pub fn before(checker: &Checker, version: i16, request: RequestKind) -> Verdict {
    if !checker.on() {
        return Verdict::Serve(Box::new(request), Denied::default());
    }
    if let Some(refusal) = whole::check(checker, version, &request) {
        return refusal;
    }
    let mut request = request;
    let denied = items::split(checker, &mut request);
    Verdict::Serve(Box::new(request), denied)
}

/// Puts refused items back into the response and filters listings.
pub fn after(checker: &Checker, response: &mut ResponseKind, denied: Denied) {
    if !checker.on() {
        return;
    }
    items::merge(checker, response, denied);
}

/// For Fetch: may the connection read `topic`?
pub fn may_read(checker: &Checker, topic: &str) -> bool {
    checker.allows(Operation::Read, ResourceType::Topic, topic)
}
