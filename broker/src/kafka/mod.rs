//! The Kafka front end: one module per API, and the table of what we support.
//!
//! # Layout
//! - [`conn`] — a client connection: frames in, one request at a time (as Kafka does per
//!   connection), responses out in order.
//! - one module per API: [`api_versions`], [`metadata`], [`produce`], [`fetch`],
//!   [`list_offsets`], [`offset_for_leader_epoch`], [`create_topics`], [`delete_topics`], [`create_partitions`],
//!   [`describe_configs`], [`incremental_alter_configs`], [`alter_configs`], [`init_producer_id`],
//!   [`describe_cluster`]; groups: [`find_coordinator`], [`join_group`], [`sync_group`],
//!   [`heartbeat`], [`leave_group`], [`offset_commit`], [`offset_fetch`], [`offset_delete`],
//!   [`list_groups`], [`describe_groups`], [`delete_groups`], KIP-848's
//!   [`consumer_group_heartbeat`] and [`consumer_group_describe`]; share groups (KIP-932):
//!   [`share_group_heartbeat`], [`share_group_describe`], [`share_fetch`],
//!   [`share_acknowledge`], [`describe_share_group_offsets`], [`alter_share_group_offsets`],
//!   [`delete_share_group_offsets`]; transactions:
//!   [`add_partitions_to_txn`], [`add_offsets_to_txn`], [`txn_offset_commit`], [`end_txn`],
//!   [`describe_transactions`], [`list_transactions`], [`describe_producers`]; records:
//!   [`delete_records`].

pub mod acls_common;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod advertise;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_share_group_offsets;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod authorize;
pub mod authorized;
pub mod brokers;
pub mod conn;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_share_group_offsets;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_share_group_offsets;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod response_errors;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod sync_group;
pub mod txn_offset_commit;

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use strand_wire::kafka::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};

use crate::node::Node;
use crate::security::session::Session;

/// Every API Strand serves, with the versions it accepts. Floors follow Kafka 4.x (KIP-896);
/// ceilings stop before versions that need features Strand lacks yet (topic ids in Fetch v13+;
/// transaction version 2 of KIP-890 — Produce v12+, AddPartitionsToTxn v5, AddOffsetsToTxn v4,
/// EndTxn v5, TxnOffsetCommit v5, InitProducerId v5+ — is not advertised, so clients use
/// transaction version 1).
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::AddPartitionsToTxn, 0, 4),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 1),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 1),
    (ApiKey::ShareAcknowledge, 1, 1),
    (ApiKey::DescribeShareGroupOffsets, 0, 0),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
];

/// The version range we serve for `api`, if any.
pub fn supported(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == api)
        .map(|&(_, lo, hi)| (lo, hi))
}

/// What to send back for a request.
pub enum Reply {
    /// A response for the generated codec to encode (boxed: responses are large structs).
    Kind(Box<ResponseKind>),
    /// An already encoded response (size prefix included), as segments to write in order:
    /// Fetch, whose record sets go to the socket without being copied.
    Segments(Vec<bytes::Bytes>),
    /// Nothing goes back (Produce with acks=0).
    Nothing,
    /// A request the table admits but no handler serves: a bug; the connection is closed.
    Unhandled,
}

/// The second half of a request: resolves to its reply. Produce returns one that waits for
/// durability; everything else is ready at once.
pub type PendingReply = Pin<Box<dyn Future<Output = Reply>>>;

/// What `handle` gives back: a reply ready now (the connection encodes it at once and
/// accounts its size), or one to await in order on the writer (never polled before that:
/// a future polled from one task and finished from another would wake the wrong task).
pub enum Handled {
    Now(Reply),
    Later(PendingReply),
}

fn done(reply: Reply) -> Handled {
    Handled::Now(reply)
}

/// Runs one request up to its ordering point (for Produce: the appends) and returns the rest.
/// The connection starts the next request as soon as this returns, and writes replies in
/// request order. With ACLs on, `authorize` checks the request first: refused whole, it is
/// answered without reaching its handler; refused in part, the handler serves the rest.
pub async fn handle(
    node: &Rc<Node>,
    session: &Rc<Session>,
    header: &RequestHeader,
    request: RequestKind,
) -> Handled {
    let version = header.request_api_version;
    let checker = node.shared.security.checker(session);
    let (request, denied) = match authorize::before(&checker, version, request) {
        authorize::Verdict::Serve(request, denied) => (*request, denied),
        authorize::Verdict::Refused(response) => return done(Reply::Kind(response)),
        authorize::Verdict::Dropped => return done(Reply::Nothing),
    };
    let kind = match request {
        RequestKind::Fetch(r) => {
            let may_read = |topic: &str| authorize::may_read(&checker, topic);
            return done(Reply::Segments(
                fetch::handle(node, r, version, header.correlation_id, &may_read).await,
            ));
        }
        RequestKind::Produce(r) => {
            return match produce::handle(node, r, version).await {
                Some(pending) => {
                    let (node, session) = (Rc::clone(node), Rc::clone(session));
                    Handled::Later(Box::pin(async move {
                        let mut kind = ResponseKind::Produce(pending.await);
                        authorize::after(&checker, &mut kind, denied);
                        advertise::rewrite(&node, &session.listener, &mut kind);
                        Reply::Kind(Box::new(kind))
                    }))
                }
                None => done(Reply::Nothing),
            }
        }
        RequestKind::SaslHandshake(r) => {
            ResponseKind::SaslHandshake(sasl_handshake::handle(node, session, r))
        }
        RequestKind::SaslAuthenticate(r) => {
            ResponseKind::SaslAuthenticate(sasl_authenticate::handle(node, session, r))
        }
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(describe_client_quotas::handle(r))
        }
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(create_acls::handle(node, r).await),
        RequestKind::DescribeAcls(r) => ResponseKind::DescribeAcls(describe_acls::handle(node, r)),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(delete_acls::handle(node, r).await),
        RequestKind::AlterUserScramCredentials(r) => ResponseKind::AlterUserScramCredentials(
            alter_user_scram_credentials::handle(node, r).await,
        ),
        RequestKind::DescribeUserScramCredentials(r) => ResponseKind::DescribeUserScramCredentials(
            describe_user_scram_credentials::handle(node, r),
        ),
        RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions::handle(0)),
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(metadata::handle(node, r, version).await)
        }
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(node, r, version).await)
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics::handle(node, r).await)
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics::handle(node, r).await)
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(create_partitions::handle(node, r).await)
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(node, r).await)
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(incremental_alter_configs::handle(node, r).await)
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(alter_configs::handle(node, r).await)
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(node, r).await)
        }
        RequestKind::AddPartitionsToTxn(r) => {
            ResponseKind::AddPartitionsToTxn(add_partitions_to_txn::handle(node, r, version).await)
        }
        RequestKind::AddOffsetsToTxn(r) => {
            ResponseKind::AddOffsetsToTxn(add_offsets_to_txn::handle(node, r, version).await)
        }
        RequestKind::EndTxn(r) => ResponseKind::EndTxn(end_txn::handle(node, r, version).await),
        RequestKind::TxnOffsetCommit(r) => {
            ResponseKind::TxnOffsetCommit(txn_offset_commit::handle(node, r, version).await)
        }
        RequestKind::DescribeTransactions(r) => {
            ResponseKind::DescribeTransactions(describe_transactions::handle(node, r).await)
        }
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(list_transactions::handle(node, r).await)
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(node, r).await)
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(node, r).await)
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(describe_producers::handle(node, r).await)
        }
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(elect_leaders::handle(node, r, version).await)
        }
        RequestKind::AlterPartitionReassignments(r) => ResponseKind::AlterPartitionReassignments(
            alter_partition_reassignments::handle(node, r, version).await,
        ),
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(describe_log_dirs::handle(node, r).await)
        }
        RequestKind::ListPartitionReassignments(r) => {
            ResponseKind::ListPartitionReassignments(list_partition_reassignments::handle(node, r))
        }
        RequestKind::DescribeQuorum(r) => {
            ResponseKind::DescribeQuorum(describe_quorum::handle(node, r, version).await)
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(node, &r))
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(find_coordinator::handle(node, r, version))
        }
        RequestKind::JoinGroup(r) => {
            // The join phase can take a while: answer later, keep reading this connection.
            let (node, header) = (Rc::clone(node), header.clone());
            return Handled::Later(Box::pin(async move {
                let r = join_group::handle(&node, &header, r, version).await;
                Reply::Kind(Box::new(ResponseKind::JoinGroup(r)))
            }));
        }
        RequestKind::SyncGroup(r) => {
            let node = Rc::clone(node);
            return Handled::Later(Box::pin(async move {
                let r = sync_group::handle(&node, r, version).await;
                Reply::Kind(Box::new(ResponseKind::SyncGroup(r)))
            }));
        }
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(heartbeat::handle(node, r).await),
        RequestKind::ConsumerGroupHeartbeat(r) => ResponseKind::ConsumerGroupHeartbeat(
            consumer_group_heartbeat::handle(node, header, &session.host, r, version).await,
        ),
        RequestKind::ConsumerGroupDescribe(r) => {
            ResponseKind::ConsumerGroupDescribe(consumer_group_describe::handle(node, r).await)
        }
        RequestKind::ShareGroupHeartbeat(r) => ResponseKind::ShareGroupHeartbeat(
            share_group_heartbeat::handle(node, header, &session.host, r).await,
        ),
        RequestKind::ShareGroupDescribe(r) => {
            ResponseKind::ShareGroupDescribe(share_group_describe::handle(node, r).await)
        }
        RequestKind::ShareFetch(r) => {
            // It may wait for records: answer later, keep reading this connection.
            let node = Rc::clone(node);
            return Handled::Later(Box::pin(async move {
                let r = share_fetch::handle(&node, r).await;
                Reply::Kind(Box::new(ResponseKind::ShareFetch(r)))
            }));
        }
        RequestKind::ShareAcknowledge(r) => {
            ResponseKind::ShareAcknowledge(share_acknowledge::handle(node, r).await)
        }
        RequestKind::DescribeShareGroupOffsets(r) => ResponseKind::DescribeShareGroupOffsets(
            describe_share_group_offsets::handle(node, r).await,
        ),
        RequestKind::AlterShareGroupOffsets(r) => {
            ResponseKind::AlterShareGroupOffsets(alter_share_group_offsets::handle(node, r).await)
        }
        RequestKind::DeleteShareGroupOffsets(r) => {
            ResponseKind::DeleteShareGroupOffsets(delete_share_group_offsets::handle(node, r).await)
        }
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(leave_group::handle(node, r, version).await)
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(offset_commit::handle(node, r).await)
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(offset_fetch::handle(node, r, version).await)
        }
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(list_groups::handle(node, r).await),
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(describe_groups::handle(node, r, version).await)
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(delete_groups::handle(node, r).await)
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(offset_delete::handle(node, r).await)
        }
        _ => return done(Reply::Unhandled),
    };
    let mut kind = kind;
    authorize::after(&checker, &mut kind, denied);
    advertise::rewrite(node, &session.listener, &mut kind);
    done(Reply::Kind(Box::new(kind)))
}

/// Host and port clients should connect to (the listen address).
pub fn advertised(node: &Node) -> (String, i32) {
    let listen = &node.config().listen;
    match listen.parse::<std::net::SocketAddr>() {
        Ok(a) => (a.ip().to_string(), i32::from(a.port())),
        Err(_) => (listen.clone(), 9092),
    }
}

/// Broker id of this (single) node.
pub const NODE_ID: i32 = 0;

/// Writes the per-item errors of a controller change into the response entries the items
/// came from (`slots[i]` is item i's entry); `set` stores an error code and a message.
pub fn fill_errors<R>(
    entries: &mut [R],
    slots: Vec<usize>,
    outcomes: Vec<crate::catalog::OpResult>,
    set: impl Fn(&mut R, i16, strand_wire::kafka::protocol::StrBytes),
) {
    for (slot, outcome) in slots.into_iter().zip(outcomes) {
        if let (Err((code, message)), Some(entry)) = (outcome, entries.get_mut(slot)) {
            set(
                entry,
                code.code(),
                strand_wire::kafka::protocol::StrBytes::from_string(message),
            );
        }
    }
}

/// Kafka's internal topics (Metadata `is_internal`; pattern subscriptions skip them).
pub fn is_internal_topic(name: &str) -> bool {
    name == crate::internal_topics::OFFSETS_TOPIC || name == crate::internal_topics::TXN_TOPIC
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_version_is_one_the_codec_knows() {
        for &(api, lo, hi) in SUPPORTED {
            let range = api.valid_versions();
            assert!(
                range.min <= lo && hi <= range.max,
                "{api:?} {lo}..={hi} vs {range:?}"
            );
        }
    }
}
