//! Admin operations: topics (create, delete, describe configs, alter configs), groups (list,
//! describe, committed offsets, reset), partition end offsets, and the cluster's identity.
//! Each is one request built from plain arguments and one answer turned into plain values.

use std::collections::BTreeMap;

use strand_wire::kafka::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use strand_wire::kafka::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use strand_wire::kafka::messages::describe_configs_request::DescribeConfigsResource;
use strand_wire::kafka::messages::elect_leaders_request::TopicPartitions;
use strand_wire::kafka::messages::find_coordinator_request::FindCoordinatorRequest;
use strand_wire::kafka::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use strand_wire::kafka::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use strand_wire::kafka::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use strand_wire::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strand_wire::kafka::messages::offset_fetch_request::OffsetFetchRequestTopic;
use strand_wire::kafka::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ConsumerGroupDescribeRequest,
    CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    ElectLeadersRequest, GroupId, IncrementalAlterConfigsRequest, ListGroupsRequest,
    ListOffsetsRequest, ListPartitionReassignmentsRequest, OffsetCommitRequest, OffsetFetchRequest,
    RequestKind, ResponseKind, ShareGroupDescribeRequest, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::conn::BrokerConn;
use crate::error::ClientError;

const RESOURCE_TOPIC: i8 = 2;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn unexpected(what: &str) -> ClientError {
    ClientError::Protocol(format!("unexpected answer to {what}"))
}

/// ConsumerGroupDescribe and ShareGroupDescribe (the same shape, different types): one group.
macro_rules! describe_new_group {
    ($conn:expr, $group:expr, $api:ident, $request:ident, $kind:expr) => {{
        let mut req = $request::default();
        req.group_ids = vec![GroupId(StrBytes::from_string($group.to_string()))];
        let ResponseKind::$api(r) = $conn
            .request_within(RequestKind::$api(req), crate::cluster::REQUEST_TIMEOUT)
            .await?
        else {
            return Err(unexpected(stringify!($api)));
        };
        let g = r
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| unexpected(concat!(stringify!($api), " (no group)")))?;
        ClientError::check(g.error_code, g.error_message.as_deref())?;
        Ok(GroupInfo {
            group_id: g.group_id.0.to_string(),
            state: g.group_state.to_string(),
            protocol_type: $kind.into(),
            protocol: g.assignor_name.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| member_row(&m.member_id, &m.client_id, &m.client_host))
                .collect(),
        })
    }};
}

/// (member id, client id, client host) as `GroupInfo` lists members.
fn member_row(id: &StrBytes, client: &StrBytes, host: &StrBytes) -> (String, String, String) {
    (id.to_string(), client.to_string(), host.to_string())
}

/// A group as ListGroups/DescribeGroups tell it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupInfo {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    /// (member id, client id, client host)
    pub members: Vec<(String, String, String)>,
}

/// Where to read a partition's offset (ListOffsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    Latest,
}

impl Cluster {
    /// Creates a topic; `partitions` -1 = the broker's default.
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<(), ClientError> {
        self.create_topic_replicated(topic, partitions, -1, configs)
            .await
    }

    /// [`Cluster::create_topic`] with a replication factor (-1: the broker's default).
    pub async fn create_topic_replicated(
        &self,
        topic: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(String, String)],
    ) -> Result<(), ClientError> {
        let mut t = CreatableTopic::default();
        t.name = name(topic);
        t.num_partitions = partitions;
        t.replication_factor = replication_factor;
        t.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut c = CreatableTopicConfig::default();
                c.name = StrBytes::from_string(k.clone());
                c.value = Some(StrBytes::from_string(v.clone()));
                c
            })
            .collect();
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let ResponseKind::CreateTopics(r) = self.request(RequestKind::CreateTopics(req)).await?
        else {
            return Err(unexpected("CreateTopics"));
        };
        for t in r.topics {
            ClientError::check(t.error_code, t.error_message.as_deref())?;
        }
        self.refresh(Some(&[topic])).await?;
        Ok(())
    }

    pub async fn delete_topic(&self, topic: &str) -> Result<(), ClientError> {
        let mut req = DeleteTopicsRequest::default();
        req.topic_names = vec![name(topic)];
        req.timeout_ms = 30_000;
        let ResponseKind::DeleteTopics(r) = self.request(RequestKind::DeleteTopics(req)).await?
        else {
            return Err(unexpected("DeleteTopics"));
        };
        for t in r.responses {
            ClientError::check(t.error_code, t.error_message.as_deref())?;
        }
        Ok(())
    }

    /// ElectLeaders (KIP-460): `partitions` (`None`: every partition that needs it), the
    /// preferred replica, or with `unclean` any live replica of a leaderless partition. One
    /// outcome per partition the broker answered for (`Err` holds its error; ELECTION_NOT_NEEDED
    /// means it was already led as asked).
    pub async fn elect_leaders(
        &self,
        partitions: Option<Vec<(String, i32)>>,
        unclean: bool,
    ) -> Result<Vec<(String, i32, Result<(), ClientError>)>, ClientError> {
        let mut req = ElectLeadersRequest::default();
        req.election_type = i8::from(unclean);
        req.timeout_ms = 30_000;
        req.topic_partitions = partitions.map(|ps| {
            let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (t, p) in ps {
                by_topic.entry(t).or_default().push(p);
            }
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    let mut tp = TopicPartitions::default();
                    tp.topic = name(&t);
                    tp.partitions = ps;
                    tp
                })
                .collect()
        });
        let ResponseKind::ElectLeaders(r) = self.request(RequestKind::ElectLeaders(req)).await?
        else {
            return Err(unexpected("ElectLeaders"));
        };
        ClientError::check(r.error_code, None)?;
        let mut out = Vec::new();
        for t in r.replica_election_results {
            for p in t.partition_result {
                out.push((
                    t.topic.to_string(),
                    p.partition_id,
                    ClientError::check(p.error_code, p.error_message.as_deref()),
                ));
            }
        }
        Ok(out)
    }

    /// AlterPartitionReassignments (KIP-455): move each `(topic, partition)` to its replica
    /// list, or cancel its move in flight (`None`). One outcome per partition.
    pub async fn alter_partition_reassignments(
        &self,
        moves: Vec<(String, i32, Option<Vec<i32>>)>,
    ) -> Result<Vec<(String, i32, Result<(), ClientError>)>, ClientError> {
        let mut by_topic: BTreeMap<String, Vec<ReassignablePartition>> = BTreeMap::new();
        for (t, p, target) in moves {
            let mut rp = ReassignablePartition::default();
            rp.partition_index = p;
            rp.replicas = target.map(|r| r.into_iter().map(BrokerId).collect());
            by_topic.entry(t).or_default().push(rp);
        }
        let mut req = AlterPartitionReassignmentsRequest::default();
        req.timeout_ms = 30_000;
        req.allow_replication_factor_change = true;
        req.topics = by_topic
            .into_iter()
            .map(|(t, partitions)| {
                let mut rt = ReassignableTopic::default();
                rt.name = name(&t);
                rt.partitions = partitions;
                rt
            })
            .collect();
        let kind = RequestKind::AlterPartitionReassignments(req);
        let ResponseKind::AlterPartitionReassignments(r) = self.request(kind).await? else {
            return Err(unexpected("AlterPartitionReassignments"));
        };
        ClientError::check(r.error_code, r.error_message.as_deref())?;
        let mut out = Vec::new();
        for t in r.responses {
            for p in t.partitions {
                out.push((
                    t.name.to_string(),
                    p.partition_index,
                    ClientError::check(p.error_code, p.error_message.as_deref()),
                ));
            }
        }
        Ok(out)
    }

    /// ListPartitionReassignments: the moves in flight of `topic` (`None`: every topic), as
    /// `(topic, partition, replicas, adding, removing)`.
    #[allow(clippy::type_complexity)]
    pub async fn list_partition_reassignments(
        &self,
        topic: Option<(&str, i32)>,
    ) -> Result<Vec<(String, i32, Vec<i32>, Vec<i32>, Vec<i32>)>, ClientError> {
        let mut req = ListPartitionReassignmentsRequest::default();
        req.timeout_ms = 30_000;
        req.topics = topic.map(|(t, partitions)| {
            let mut lt = ListPartitionReassignmentsTopics::default();
            lt.name = name(t);
            lt.partition_indexes = (0..partitions).collect();
            vec![lt]
        });
        let kind = RequestKind::ListPartitionReassignments(req);
        let ResponseKind::ListPartitionReassignments(r) = self.request(kind).await? else {
            return Err(unexpected("ListPartitionReassignments"));
        };
        ClientError::check(r.error_code, r.error_message.as_deref())?;
        let ids = |v: Vec<BrokerId>| v.into_iter().map(|b| b.0).collect::<Vec<i32>>();
        let mut out = Vec::new();
        for t in r.topics {
            for p in t.partitions {
                out.push((
                    t.name.to_string(),
                    p.partition_index,
                    ids(p.replicas),
                    ids(p.adding_replicas),
                    ids(p.removing_replicas),
                ));
            }
        }
        Ok(out)
    }

    /// A topic's configs: name -> (value, set on the topic rather than a default).
    pub async fn topic_configs(
        &self,
        topic: &str,
    ) -> Result<BTreeMap<String, (Option<String>, bool)>, ClientError> {
        let mut res = DescribeConfigsResource::default();
        res.resource_type = RESOURCE_TOPIC;
        res.resource_name = StrBytes::from_string(topic.to_string());
        res.configuration_keys = None; // all of them
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![res];
        let ResponseKind::DescribeConfigs(r) =
            self.request(RequestKind::DescribeConfigs(req)).await?
        else {
            return Err(unexpected("DescribeConfigs"));
        };
        let mut out = BTreeMap::new();
        for res in r.results {
            ClientError::check(res.error_code, res.error_message.as_deref())?;
            for c in res.configs {
                // Config source 1 = DYNAMIC_TOPIC_CONFIG.
                out.insert(
                    c.name.to_string(),
                    (c.value.map(|v| v.to_string()), c.config_source == 1),
                );
            }
        }
        Ok(out)
    }

    /// Sets (`Some`) or removes (`None`) topic configs.
    pub async fn alter_topic_configs(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), ClientError> {
        let mut res = AlterConfigsResource::default();
        res.resource_type = RESOURCE_TOPIC;
        res.resource_name = StrBytes::from_string(topic.to_string());
        res.configs = changes
            .iter()
            .map(|(k, v)| {
                let mut c = AlterableConfig::default();
                c.name = StrBytes::from_string(k.clone());
                c.config_operation = if v.is_some() { OP_SET } else { OP_DELETE };
                c.value = v.as_ref().map(|v| StrBytes::from_string(v.clone()));
                c
            })
            .collect();
        let mut req = IncrementalAlterConfigsRequest::default();
        req.resources = vec![res];
        let ResponseKind::IncrementalAlterConfigs(r) = self
            .request(RequestKind::IncrementalAlterConfigs(req))
            .await?
        else {
            return Err(unexpected("IncrementalAlterConfigs"));
        };
        for res in r.responses {
            ClientError::check(res.error_code, res.error_message.as_deref())?;
        }
        Ok(())
    }

    /// Each partition's earliest or latest offset (asked of each partition's leader).
    pub async fn list_offsets(
        &self,
        topic: &str,
        spec: OffsetSpec,
    ) -> Result<Vec<i64>, ClientError> {
        let info = self.topic(topic).await?;
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for (p, &leader) in info.leaders.iter().enumerate() {
            by_leader.entry(leader).or_default().push(p as i32);
        }
        let mut out = vec![-1i64; info.leaders.len()];
        for (leader, parts) in by_leader {
            let mut t = ListOffsetsTopic::default();
            t.name = name(topic);
            t.partitions = parts
                .iter()
                .map(|&p| {
                    let mut lp = ListOffsetsPartition::default();
                    lp.partition_index = p;
                    lp.current_leader_epoch = -1;
                    lp.timestamp = match spec {
                        OffsetSpec::Earliest => -2,
                        OffsetSpec::Latest => -1,
                    };
                    lp
                })
                .collect();
            let mut req = ListOffsetsRequest::default();
            req.replica_id = strand_wire::kafka::messages::BrokerId(-1);
            req.topics = vec![t];
            let conn = self.broker(leader).await?;
            let ResponseKind::ListOffsets(r) = conn
                .request_within(
                    RequestKind::ListOffsets(req),
                    crate::cluster::REQUEST_TIMEOUT,
                )
                .await?
            else {
                return Err(unexpected("ListOffsets"));
            };
            for t in r.topics {
                for p in t.partitions {
                    ClientError::check(
                        p.error_code,
                        Some(&format!("{topic}-{}", p.partition_index)),
                    )?;
                    if let Some(slot) = out.get_mut(p.partition_index as usize) {
                        *slot = p.offset;
                    }
                }
            }
        }
        Ok(out)
    }

    /// The connection to `group`'s coordinator (waiting while it is still loading).
    pub async fn coordinator(&self, group: &str) -> Result<BrokerConn, ClientError> {
        crate::cluster::retrying(|| self.find_coordinator(group)).await
    }

    async fn find_coordinator(&self, group: &str) -> Result<BrokerConn, ClientError> {
        let mut req = FindCoordinatorRequest::default();
        req.key = StrBytes::from_string(group.to_string());
        let ResponseKind::FindCoordinator(r) =
            self.request(RequestKind::FindCoordinator(req)).await?
        else {
            return Err(unexpected("FindCoordinator"));
        };
        ClientError::check(r.error_code, r.error_message.as_deref())?;
        self.conn_to(&format!("{}:{}", r.host.as_str(), r.port))
            .await
    }

    pub async fn list_groups(&self) -> Result<Vec<(String, String)>, ClientError> {
        let ResponseKind::ListGroups(r) = self
            .request(RequestKind::ListGroups(ListGroupsRequest::default()))
            .await?
        else {
            return Err(unexpected("ListGroups"));
        };
        ClientError::check(r.error_code, None)?;
        let mut out: Vec<(String, String)> = r
            .groups
            .into_iter()
            .map(|g| (g.group_id.0.to_string(), g.group_state.to_string()))
            .collect();
        out.sort();
        Ok(out)
    }

    /// A group of any kind: as Kafka's admin client, ConsumerGroupDescribe first (KIP-848
    /// groups), then ShareGroupDescribe, then DescribeGroups (classic groups; also what a
    /// broker without the newer APIs answers).
    pub async fn describe_group(&self, group: &str) -> Result<GroupInfo, ClientError> {
        let conn = self.coordinator(group).await?;
        if let Ok(info) = self.describe_consumer_group(&conn, group).await {
            return Ok(info);
        }
        if let Ok(info) = self.describe_share_group(&conn, group).await {
            return Ok(info);
        }
        let mut req = DescribeGroupsRequest::default();
        req.groups = vec![GroupId(StrBytes::from_string(group.to_string()))];
        let ResponseKind::DescribeGroups(r) = conn
            .request_within(
                RequestKind::DescribeGroups(req),
                crate::cluster::REQUEST_TIMEOUT,
            )
            .await?
        else {
            return Err(unexpected("DescribeGroups"));
        };
        let g = r
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| unexpected("DescribeGroups (no group)"))?;
        ClientError::check(g.error_code, g.error_message.as_deref())?;

        Ok(GroupInfo {
            group_id: g.group_id.0.to_string(),
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            protocol: g.protocol_data.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| member_row(&m.member_id, &m.client_id, &m.client_host))
                .collect(),
        })
    }

    async fn describe_consumer_group(
        &self,
        conn: &BrokerConn,
        group: &str,
    ) -> Result<GroupInfo, ClientError> {
        describe_new_group!(
            conn,
            group,
            ConsumerGroupDescribe,
            ConsumerGroupDescribeRequest,
            "consumer"
        )
    }

    async fn describe_share_group(
        &self,
        conn: &BrokerConn,
        group: &str,
    ) -> Result<GroupInfo, ClientError> {
        describe_new_group!(
            conn,
            group,
            ShareGroupDescribe,
            ShareGroupDescribeRequest,
            "share"
        )
    }

    /// Committed offsets of `group`: (topic, partition) -> offset. `topic`: only that topic.
    pub async fn committed(
        &self,
        group: &str,
        topic: Option<&str>,
    ) -> Result<BTreeMap<(String, i32), i64>, ClientError> {
        crate::cluster::retrying(|| self.committed_once(group, topic)).await
    }

    async fn committed_once(
        &self,
        group: &str,
        topic: Option<&str>,
    ) -> Result<BTreeMap<(String, i32), i64>, ClientError> {
        let conn = self.coordinator(group).await?;
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(StrBytes::from_string(group.to_string()));
        req.topics = None; // all topics, unless one is named
        if let Some(t) = topic {
            let info = self.topic(t).await?;
            let mut ft = OffsetFetchRequestTopic::default();
            ft.name = name(t);
            ft.partition_indexes = (0..info.leaders.len() as i32).collect();
            req.topics = Some(vec![ft]);
        }
        let ResponseKind::OffsetFetch(r) = conn
            .request_within(
                RequestKind::OffsetFetch(req),
                crate::cluster::REQUEST_TIMEOUT,
            )
            .await?
        else {
            return Err(unexpected("OffsetFetch"));
        };
        ClientError::check(r.error_code, None)?;
        let mut out = BTreeMap::new();
        for t in r.topics {
            for p in t.partitions {
                ClientError::check(p.error_code, None)?;
                if p.committed_offset >= 0 {
                    out.insert(
                        (t.name.0.to_string(), p.partition_index),
                        p.committed_offset,
                    );
                }
            }
        }
        Ok(out)
    }

    /// Commits offsets for `group` outside any generation (a simple consumer or a reset; the
    /// group must have no active members, as Kafka requires).
    pub async fn commit(
        &self,
        group: &str,
        offsets: &BTreeMap<(String, i32), i64>,
    ) -> Result<(), ClientError> {
        self.commit_as(group, -1, "", offsets).await
    }

    /// Commits offsets as member `member_id` of `generation` (-1 and "": outside any).
    pub async fn commit_as(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        offsets: &BTreeMap<(String, i32), i64>,
    ) -> Result<(), ClientError> {
        crate::cluster::retrying(|| self.commit_once(group, generation, member_id, offsets)).await
    }

    async fn commit_once(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        offsets: &BTreeMap<(String, i32), i64>,
    ) -> Result<(), ClientError> {
        let conn = self.coordinator(group).await?;
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for ((t, p), &o) in offsets {
            let mut cp = OffsetCommitRequestPartition::default();
            cp.partition_index = *p;
            cp.committed_offset = o;
            cp.committed_leader_epoch = -1;
            cp.committed_metadata = Some(StrBytes::from_static_str(""));
            topics.entry(t.as_str()).or_default().push(cp);
        }
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(StrBytes::from_string(group.to_string()));
        req.generation_id_or_member_epoch = generation;
        req.member_id = StrBytes::from_string(member_id.to_string());
        req.retention_time_ms = -1;
        req.topics = topics
            .into_iter()
            .map(|(t, parts)| {
                let mut ct = OffsetCommitRequestTopic::default();
                ct.name = name(t);
                ct.partitions = parts;
                ct
            })
            .collect();
        let ResponseKind::OffsetCommit(r) = conn
            .request_within(
                RequestKind::OffsetCommit(req),
                crate::cluster::REQUEST_TIMEOUT,
            )
            .await?
        else {
            return Err(unexpected("OffsetCommit"));
        };
        for t in r.topics {
            for p in t.partitions {
                ClientError::check(p.error_code, None)?;
            }
        }
        Ok(())
    }
}
