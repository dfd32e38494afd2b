//! Requests that list topics, groups or config resources: the refused items come out of
//! the request (`split`) and go back into the response with the error (`merge`); listings
//! leave out what the principal may not describe.

use strand_wire::kafka::messages::*;
use strand_wire::kafka::protocol::StrBytes;

use super::{CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED, TXN_DENIED};
use crate::kafka::authorized;
use crate::security::acl::{Operation, ResourceType};
use crate::security::Checker;

/// What was taken out of a request, to answer with an error.
#[derive(Default)]
pub struct Denied {
    /// Topics with their partitions.
    topics: Vec<(TopicName, Vec<i32>)>,
    /// Named items: topics, groups, transactional ids, coordinator keys (with their error).
    names: Vec<(StrBytes, i16)>,
    /// Config resources: type, name, error.
    configs: Vec<(i8, StrBytes, i16)>,
}

fn topic_ok(c: &Checker, op: Operation, name: &str) -> bool {
    c.allows(op, ResourceType::Topic, name)
}

/// Keeps the topics `op` is allowed on; the others go to `denied.topics`.
macro_rules! keep_topics {
    ($c:expr, $denied:expr, $list:expr, $op:expr, |$t:ident| $name:expr, $parts:expr) => {
        $list.retain(|$t| {
            if topic_ok($c, $op, $name.0.as_str()) {
                return true;
            }
            $denied.topics.push(($name.clone(), $parts));
            false
        })
    };
}

/// DescribeGroups and ConsumerGroupDescribe: each described group's authorised operations,
/// and the refused groups back with their error.
macro_rules! described_groups {
    ($c:expr, $d:expr, $r:expr, $group:ty) => {{
        for g in $r.groups.iter_mut() {
            if g.authorized_operations != i32::MIN {
                g.authorized_operations = $c.operations(
                    ResourceType::Group,
                    g.group_id.0.as_str(),
                    authorized::GROUP,
                );
            }
        }
        for (name, code) in $d.names.drain(..) {
            let mut g = <$group>::default();
            g.group_id = GroupId(name);
            g.error_code = code;
            $r.groups.push(g);
        }
    }};
}

/// Config resource types (DescribeConfigs' `resource_type`): the ACL resource, and its error.
fn config_resource(rt: i8, name: &str) -> (ResourceType, String, i16) {
    match rt {
        2 => (ResourceType::Topic, name.to_string(), TOPIC_DENIED.code()),
        32 => (ResourceType::Group, name.to_string(), GROUP_DENIED.code()),
        _ => (
            ResourceType::Cluster,
            crate::security::acl::CLUSTER_NAME.to_string(),
            CLUSTER_DENIED.code(),
        ),
    }
}

macro_rules! keep_configs {
    ($c:expr, $denied:expr, $list:expr, $op:expr) => {
        $list.retain(|r| {
            let (rt, name, code) = config_resource(r.resource_type, r.resource_name.as_str());
            if $c.allows($op, rt, &name) {
                return true;
            }
            $denied
                .configs
                .push((r.resource_type, r.resource_name.clone(), code));
            false
        })
    };
}

pub fn split(c: &Checker, request: &mut RequestKind) -> Denied {
    let mut d = Denied::default();
    let topic = TOPIC_DENIED.code();
    match request {
        RequestKind::Produce(r) => keep_topics!(
            c,
            d,
            r.topic_data,
            Operation::Write,
            |t| t.name,
            t.partition_data.iter().map(|p| p.index).collect()
        ),
        RequestKind::ListOffsets(r) => keep_topics!(
            c,
            d,
            r.topics,
            Operation::Describe,
            |t| t.name,
            t.partitions.iter().map(|p| p.partition_index).collect()
        ),
        RequestKind::OffsetForLeaderEpoch(r) => keep_topics!(
            c,
            d,
            r.topics,
            Operation::Describe,
            |t| t.topic,
            t.partitions.iter().map(|p| p.partition).collect()
        ),
        RequestKind::DescribeProducers(r) => keep_topics!(
            c,
            d,
            r.topics,
            Operation::Read,
            |t| t.name,
            t.partition_indexes.clone()
        ),
        RequestKind::DeleteRecords(r) => keep_topics!(
            c,
            d,
            r.topics,
            Operation::Delete,
            |t| t.name,
            t.partitions.iter().map(|p| p.partition_index).collect()
        ),
        RequestKind::OffsetCommit(r) => keep_topics!(
            c,
            d,
            r.topics,
            Operation::Read,
            |t| t.name,
            t.partitions.iter().map(|p| p.partition_index).collect()
        ),
        RequestKind::TxnOffsetCommit(r) => keep_topics!(
            c,
            d,
            r.topics,
            Operation::Read,
            |t| t.name,
            t.partitions.iter().map(|p| p.partition_index).collect()
        ),
        RequestKind::OffsetDelete(r) => keep_topics!(
            c,
            d,
            r.topics,
            Operation::Read,
            |t| t.name,
            t.partitions.iter().map(|p| p.partition_index).collect()
        ),
        RequestKind::OffsetFetch(r) => {
            if let Some(topics) = r.topics.as_mut() {
                keep_topics!(
                    c,
                    d,
                    *topics,
                    Operation::Describe,
                    |t| t.name,
                    t.partition_indexes.clone()
                );
            }
            r.groups.retain(|g| {
                let ok = c.allows(
                    Operation::Describe,
                    ResourceType::Group,
                    g.group_id.0.as_str(),
                );
                if !ok {
                    d.names.push((g.group_id.0.clone(), GROUP_DENIED.code()));
                }
                ok
            });
        }
        RequestKind::Metadata(r) => {
            let create_all = c.cluster(Operation::Create);
            if let Some(topics) = r.topics.as_mut() {
                topics.retain(|t| match &t.name {
                    Some(n) if !topic_ok(c, Operation::Describe, n.0.as_str()) => {
                        d.names.push((n.0.clone(), topic));
                        false
                    }
                    _ => true,
                });
                let may_create = |t: &metadata_request::MetadataRequestTopic| {
                    t.name
                        .as_ref()
                        .is_none_or(|n| topic_ok(c, Operation::Create, n.0.as_str()))
                };
                if !create_all && !topics.iter().all(may_create) {
                    r.allow_auto_topic_creation = false;
                }
            }
        }
        RequestKind::CreateTopics(r) if !c.cluster(Operation::Create) => r.topics.retain(|t| {
            let ok = topic_ok(c, Operation::Create, t.name.0.as_str());
            if !ok {
                d.names.push((t.name.0.clone(), topic));
            }
            ok
        }),
        RequestKind::DeleteTopics(r) => r.topic_names.retain(|t| {
            let ok = topic_ok(c, Operation::Delete, t.0.as_str());
            if !ok {
                d.names.push((t.0.clone(), topic));
            }
            ok
        }),
        RequestKind::CreatePartitions(r) => r.topics.retain(|t| {
            let ok = topic_ok(c, Operation::Alter, t.name.0.as_str());
            if !ok {
                d.names.push((t.name.0.clone(), topic));
            }
            ok
        }),
        RequestKind::DescribeGroups(r) => r.groups.retain(|g| {
            let ok = c.allows(Operation::Describe, ResourceType::Group, g.0.as_str());
            if !ok {
                d.names.push((g.0.clone(), GROUP_DENIED.code()));
            }
            ok
        }),
        RequestKind::ConsumerGroupDescribe(r) => r.group_ids.retain(|g| {
            let ok = c.allows(Operation::Describe, ResourceType::Group, g.0.as_str());
            if !ok {
                d.names.push((g.0.clone(), GROUP_DENIED.code()));
            }
            ok
        }),
        RequestKind::ShareGroupDescribe(r) => r.group_ids.retain(|g| {
            let ok = c.allows(Operation::Describe, ResourceType::Group, g.0.as_str());
            if !ok {
                d.names.push((g.0.clone(), GROUP_DENIED.code()));
            }
            ok
        }),
        RequestKind::DeleteGroups(r) => r.groups_names.retain(|g| {
            let ok = c.allows(Operation::Delete, ResourceType::Group, g.0.as_str());
            if !ok {
                d.names.push((g.0.clone(), GROUP_DENIED.code()));
            }
            ok
        }),
        RequestKind::DescribeTransactions(r) => r.transactional_ids.retain(|t| {
            let ok = c.allows(
                Operation::Describe,
                ResourceType::TransactionalId,
                t.0.as_str(),
            );
            if !ok {
                d.names.push((t.0.clone(), TXN_DENIED.code()));
            }
            ok
        }),
        RequestKind::FindCoordinator(r) => {
            let (rt, code) = match r.key_type {
                1 => (ResourceType::TransactionalId, TXN_DENIED.code()),
                _ => (ResourceType::Group, GROUP_DENIED.code()),
            };
            r.coordinator_keys.retain(|k| {
                let ok = c.allows(Operation::Describe, rt, k.as_str());
                if !ok {
                    d.names.push((k.clone(), code));
                }
                ok
            });
        }
        RequestKind::DescribeConfigs(r) => {
            keep_configs!(c, d, r.resources, Operation::DescribeConfigs)
        }
        RequestKind::AlterConfigs(r) => keep_configs!(c, d, r.resources, Operation::AlterConfigs),
        RequestKind::IncrementalAlterConfigs(r) => {
            keep_configs!(c, d, r.resources, Operation::AlterConfigs)
        }
        _ => {}
    }
    d
}

/// Topic entries of a response for refused topics: `$topic` built from the name and the
/// partition entries, each made by `$part(index)`.
macro_rules! put_topics {
    ($d:expr, $list:expr, |$name:ident, $parts:ident| $topic:expr) => {
        for ($name, p) in $d.topics.drain(..) {
            let $parts = p;
            $list.push($topic);
        }
    };
}

pub fn merge(c: &Checker, response: &mut ResponseKind, mut d: Denied) {
    let topic = TOPIC_DENIED.code();
    let name_msg = |s: &str| Some(StrBytes::from_string(s.to_string()));
    match response {
        ResponseKind::Produce(r) => put_topics!(d, r.responses, |name, parts| {
            let mut t = produce_response::TopicProduceResponse::default();
            t.name = name;
            t.partition_responses = parts
                .into_iter()
                .map(|i| {
                    let mut p = produce_response::PartitionProduceResponse::default();
                    p.index = i;
                    p.error_code = topic;
                    p
                })
                .collect();
            t
        }),
        ResponseKind::ListOffsets(r) => put_topics!(d, r.topics, |name, parts| {
            let mut t = list_offsets_response::ListOffsetsTopicResponse::default();
            t.name = name;
            t.partitions = parts
                .into_iter()
                .map(|i| {
                    let mut p = list_offsets_response::ListOffsetsPartitionResponse::default();
                    p.partition_index = i;
                    p.error_code = topic;
                    p
                })
                .collect();
            t
        }),
        ResponseKind::OffsetForLeaderEpoch(r) => put_topics!(d, r.topics, |name, parts| {
            let mut t = offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default();
            t.topic = name;
            t.partitions = parts
                .into_iter()
                .map(|i| {
                    let mut p = offset_for_leader_epoch_response::EpochEndOffset::default();
                    p.partition = i;
                    p.error_code = topic;
                    p
                })
                .collect();
            t
        }),
        ResponseKind::DescribeProducers(r) => put_topics!(d, r.topics, |name, parts| {
            let mut t = describe_producers_response::TopicResponse::default();
            t.name = name;
            t.partitions = parts
                .into_iter()
                .map(|i| {
                    let mut p = describe_producers_response::PartitionResponse::default();
                    p.partition_index = i;
                    p.error_code = topic;
                    p
                })
                .collect();
            t
        }),
        ResponseKind::DeleteRecords(r) => put_topics!(d, r.topics, |name, parts| {
            let mut t = delete_records_response::DeleteRecordsTopicResult::default();
            t.name = name;
            t.partitions = parts
                .into_iter()
                .map(|i| {
                    let mut p = delete_records_response::DeleteRecordsPartitionResult::default();
                    p.partition_index = i;
                    p.error_code = topic;
                    p.low_watermark = -1;
                    p
                })
                .collect();
            t
        }),
        ResponseKind::OffsetCommit(r) => put_topics!(d, r.topics, |name, parts| {
            let mut t = offset_commit_response::OffsetCommitResponseTopic::default();
            t.name = name;
            t.partitions = parts
                .into_iter()
                .map(|i| {
                    let mut p = offset_commit_response::OffsetCommitResponsePartition::default();
                    p.partition_index = i;
                    p.error_code = topic;
                    p
                })
                .collect();
            t
        }),
        ResponseKind::TxnOffsetCommit(r) => put_topics!(d, r.topics, |name, parts| {
            let mut t = txn_offset_commit_response::TxnOffsetCommitResponseTopic::default();
            t.name = name;
            t.partitions = parts
                .into_iter()
                .map(|i| {
                    let mut p =
                        txn_offset_commit_response::TxnOffsetCommitResponsePartition::default();
                    p.partition_index = i;
                    p.error_code = topic;
                    p
                })
                .collect();
            t
        }),
        ResponseKind::OffsetDelete(r) => put_topics!(d, r.topics, |name, parts| {
            let mut t = offset_delete_response::OffsetDeleteResponseTopic::default();
            t.name = name;
            t.partitions = parts
                .into_iter()
                .map(|i| {
                    let mut p = offset_delete_response::OffsetDeleteResponsePartition::default();
                    p.partition_index = i;
                    p.error_code = topic;
                    p
                })
                .collect();
            t
        }),
        ResponseKind::OffsetFetch(r) => {
            // A listing of every committed topic leaves out what may not be described.
            r.topics
                .retain(|t| topic_ok(c, Operation::Describe, t.name.0.as_str()));
            for g in r.groups.iter_mut() {
                g.topics
                    .retain(|t| topic_ok(c, Operation::Describe, t.name.0.as_str()));
            }
            put_topics!(d, r.topics, |name, parts| {
                let mut t = offset_fetch_response::OffsetFetchResponseTopic::default();
                t.name = name;
                t.partitions = parts
                    .into_iter()
                    .map(|i| {
                        let mut p = offset_fetch_response::OffsetFetchResponsePartition::default();
                        p.partition_index = i;
                        p.committed_offset = -1;
                        p.error_code = topic;
                        p
                    })
                    .collect();
                t
            });
            for (group, code) in d.names.drain(..) {
                let mut g = offset_fetch_response::OffsetFetchResponseGroup::default();
                g.group_id = GroupId(group);
                g.error_code = code;
                r.groups.push(g);
            }
        }
        ResponseKind::Metadata(r) => {
            r.topics.retain(|t| {
                t.name
                    .as_ref()
                    .is_none_or(|n| topic_ok(c, Operation::Describe, n.0.as_str()))
            });
            for t in r.topics.iter_mut() {
                if t.topic_authorized_operations != i32::MIN {
                    let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                    t.topic_authorized_operations =
                        c.operations(ResourceType::Topic, &name, authorized::TOPIC);
                }
            }
            if r.cluster_authorized_operations != i32::MIN {
                r.cluster_authorized_operations = c.operations(
                    ResourceType::Cluster,
                    crate::security::acl::CLUSTER_NAME,
                    authorized::CLUSTER,
                );
            }
            for (name, code) in d.names.drain(..) {
                let mut t = metadata_response::MetadataResponseTopic::default();
                t.name = Some(TopicName(name));
                t.error_code = code;
                r.topics.push(t);
            }
        }
        ResponseKind::CreateTopics(r) => {
            for (name, code) in d.names.drain(..) {
                let mut t = create_topics_response::CreatableTopicResult::default();
                t.name = TopicName(name);
                t.error_code = code;
                t.error_message = name_msg("Authorization failed.");
                r.topics.push(t);
            }
        }
        ResponseKind::DeleteTopics(r) => {
            for (name, code) in d.names.drain(..) {
                let mut t = delete_topics_response::DeletableTopicResult::default();
                t.name = Some(TopicName(name));
                t.error_code = code;
                r.responses.push(t);
            }
        }
        ResponseKind::CreatePartitions(r) => {
            for (name, code) in d.names.drain(..) {
                let mut t = create_partitions_response::CreatePartitionsTopicResult::default();
                t.name = TopicName(name);
                t.error_code = code;
                t.error_message = name_msg("Authorization failed.");
                r.results.push(t);
            }
        }
        ResponseKind::DescribeGroups(r) => {
            described_groups!(c, d, r, describe_groups_response::DescribedGroup);
        }
        ResponseKind::ConsumerGroupDescribe(r) => {
            described_groups!(c, d, r, consumer_group_describe_response::DescribedGroup);
        }
        ResponseKind::ShareGroupDescribe(r) => {
            described_groups!(c, d, r, share_group_describe_response::DescribedGroup);
        }
        ResponseKind::DeleteGroups(r) => {
            for (name, code) in d.names.drain(..) {
                let mut g = delete_groups_response::DeletableGroupResult::default();
                g.group_id = GroupId(name);
                g.error_code = code;
                r.results.push(g);
            }
        }
        ResponseKind::DescribeTransactions(r) => {
            for (name, code) in d.names.drain(..) {
                let mut t = describe_transactions_response::TransactionState::default();
                t.transactional_id = TransactionalId(name);
                t.error_code = code;
                r.transaction_states.push(t);
            }
        }
        ResponseKind::FindCoordinator(r) => {
            for (key, code) in d.names.drain(..) {
                let mut x = find_coordinator_response::Coordinator::default();
                x.key = key;
                x.node_id = BrokerId(-1);
                x.port = -1;
                x.error_code = code;
                r.coordinators.push(x);
            }
        }
        ResponseKind::DescribeCluster(r) if r.cluster_authorized_operations != i32::MIN => {
            r.cluster_authorized_operations = c.operations(
                ResourceType::Cluster,
                crate::security::acl::CLUSTER_NAME,
                authorized::CLUSTER,
            );
        }
        ResponseKind::ListGroups(r) if !c.cluster(Operation::Describe) => {
            r.groups.retain(|g| {
                c.allows(
                    Operation::Describe,
                    ResourceType::Group,
                    g.group_id.0.as_str(),
                )
            });
        }
        ResponseKind::ListTransactions(r) => {
            r.transaction_states.retain(|t| {
                c.allows(
                    Operation::Describe,
                    ResourceType::TransactionalId,
                    t.transactional_id.0.as_str(),
                )
            });
        }
        ResponseKind::DescribeConfigs(r) => {
            for (rt, name, code) in d.configs.drain(..) {
                let mut x = describe_configs_response::DescribeConfigsResult::default();
                x.resource_type = rt;
                x.resource_name = name;
                x.error_code = code;
                x.error_message = name_msg("Authorization failed.");
                r.results.push(x);
            }
        }
        ResponseKind::AlterConfigs(r) => {
            for (rt, name, code) in d.configs.drain(..) {
                let mut x = alter_configs_response::AlterConfigsResourceResponse::default();
                x.resource_type = rt;
                x.resource_name = name;
                x.error_code = code;
                x.error_message = name_msg("Authorization failed.");
                r.responses.push(x);
            }
        }
        ResponseKind::IncrementalAlterConfigs(r) => {
            for (rt, name, code) in d.configs.drain(..) {
                let mut x =
                    incremental_alter_configs_response::AlterConfigsResourceResponse::default();
                x.resource_type = rt;
                x.resource_name = name;
                x.error_code = code;
                x.error_message = name_msg("Authorization failed.");
                r.responses.push(x);
            }
        }
        _ => {}
    }
}
