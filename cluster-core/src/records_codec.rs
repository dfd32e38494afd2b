//! Metadata records in and out of the metadata log: one raft entry (and one snapshot) is a
//! FlatBuffers `RecordBatch` (schema: `wire/schema/metadata.fbs`, generated code in
//! `strand_wire::cluster::metadata`).
//!
//! Decoding verifies the whole buffer first (offsets in bounds, tables well formed, bounded
//! depth and table count), so a corrupt or hostile entry is an error, never a panic. Reading
//! is in place; the image keeps owned copies of what it stores (names, endpoints), so a
//! record is turned into its owned form once, as it is applied.

use std::collections::BTreeMap;

use flatbuffers::{FlatBufferBuilder, ForwardsUOffset, Vector, VerifierOptions, WIPOffset};
use strand_wire::cluster::metadata as fb;

use crate::limits::METADATA_BATCH_RECORDS_MAX;
use crate::records::{
    BrokerRegistration, BrokerSnapshot, Endpoint, MetadataRecord, NodeId, PartitionChange,
    PartitionRecord, Replica, TopicId,
};

/// How far a FlatBuffers verifier may go over `bytes` (our messages and records). Every table
/// takes at least 4 bytes, so the table bound never refuses a well-formed buffer; time stays
/// linear in its size.
pub(crate) fn verifier_options(bytes: &[u8]) -> VerifierOptions {
    VerifierOptions {
        max_depth: 16,
        max_tables: bytes.len() / 4 + 16,
        max_apparent_size: bytes.len().saturating_mul(2).max(1 << 16),
        ..VerifierOptions::default()
    }
}

/// Who a batch answers: the requesting node and its request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proposer {
    pub node: NodeId,
    pub request_id: u64,
}

/// A decoded batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub records: Vec<MetadataRecord>,
    /// `None`: the controller's own decision (nobody waits for it).
    pub proposer: Option<Proposer>,
}

/// Encodes `records` as one batch (one raft entry or one snapshot).
pub fn encode_batch(records: &[MetadataRecord]) -> Vec<u8> {
    encode_batch_for(records, None)
}

/// Encodes `records` as one batch that answers `proposer`'s request.
pub fn encode_batch_for(records: &[MetadataRecord], proposer: Option<Proposer>) -> Vec<u8> {
    let mut b = FlatBufferBuilder::with_capacity(256 + 128 * records.len());
    let offsets: Vec<_> = records.iter().map(|r| record(&mut b, r)).collect();
    let records = b.create_vector(&offsets);
    let batch = fb::RecordBatch::create(
        &mut b,
        &fb::RecordBatchArgs {
            records: Some(records),
            proposer: proposer.map_or(-1, |p| p.node),
            request_id: proposer.map_or(0, |p| p.request_id),
        },
    );
    b.finish(batch, None);
    b.finished_data().to_vec()
}

/// Decodes one batch's records; any malformed input is an error naming what was wrong.
pub fn decode_batch(bytes: &[u8]) -> Result<Vec<MetadataRecord>, String> {
    decode_batch_with_proposer(bytes).map(|b| b.records)
}

/// Decodes one batch with its proposer.
pub fn decode_batch_with_proposer(bytes: &[u8]) -> Result<Batch, String> {
    let opts = verifier_options(bytes);
    let batch = flatbuffers::root_with_opts::<fb::RecordBatch>(&opts, bytes)
        .map_err(|e| format!("metadata batch: {e}"))?;
    let proposer = (batch.proposer() >= 0).then(|| Proposer {
        node: batch.proposer(),
        request_id: batch.request_id(),
    });
    let Some(records) = batch.records() else {
        return Ok(Batch {
            records: Vec::new(),
            proposer,
        });
    };
    if records.len() > METADATA_BATCH_RECORDS_MAX {
        return Err(format!(
            "metadata batch: {} records (at most {METADATA_BATCH_RECORDS_MAX})",
            records.len()
        ));
    }
    Ok(Batch {
        records: records
            .iter()
            .map(decode_record)
            .collect::<Result<_, _>>()?,
        proposer,
    })
}

pub(crate) fn u128_of(v: u128) -> fb::U128 {
    fb::U128::new((v >> 64) as u64, v as u64)
}

pub(crate) fn u128_from(v: &fb::U128) -> u128 {
    (u128::from(v.hi()) << 64) | u128::from(v.lo())
}

pub(crate) fn id_of(id: &TopicId) -> fb::U128 {
    u128_of(u128::from_be_bytes(*id))
}

pub(crate) fn id_from(v: Option<&fb::U128>, what: &str) -> Result<TopicId, String> {
    v.map(|v| u128_from(v).to_be_bytes())
        .ok_or_else(|| format!("{what}: no topic id"))
}

fn endpoint<'a>(b: &mut FlatBufferBuilder<'a>, e: &Endpoint) -> WIPOffset<fb::Endpoint<'a>> {
    let host = b.create_string(&e.host);
    fb::Endpoint::create(
        b,
        &fb::EndpointArgs {
            host: Some(host),
            port: e.port,
        },
    )
}

pub(crate) fn config_entries<'a>(
    b: &mut FlatBufferBuilder<'a>,
    configs: &BTreeMap<String, String>,
) -> WIPOffset<Vector<'a, ForwardsUOffset<fb::ConfigEntry<'a>>>> {
    let entries: Vec<_> = configs
        .iter()
        .map(|(k, v)| {
            let key = b.create_string(k);
            let value = b.create_string(v);
            fb::ConfigEntry::create(
                b,
                &fb::ConfigEntryArgs {
                    key: Some(key),
                    value: Some(value),
                },
            )
        })
        .collect();
    b.create_vector(&entries)
}

pub(crate) fn registration<'a>(
    b: &mut FlatBufferBuilder<'a>,
    r: &BrokerRegistration,
) -> WIPOffset<fb::BrokerRegistration<'a>> {
    let cluster_id = b.create_string(&r.cluster_id);
    let client = endpoint(b, &r.client);
    let cluster = endpoint(b, &r.cluster);
    let rack = r.rack.as_deref().map(|s| b.create_string(s));
    let incarnation = u128_of(r.incarnation);
    fb::BrokerRegistration::create(
        b,
        &fb::BrokerRegistrationArgs {
            node_id: r.node_id,
            incarnation: Some(&incarnation),
            cluster_id: Some(cluster_id),
            client: Some(client),
            cluster: Some(cluster),
            shards: r.shards,
            rack,
        },
    )
}

fn record<'a>(b: &mut FlatBufferBuilder<'a>, r: &MetadataRecord) -> WIPOffset<fb::Record<'a>> {
    let (body_type, body) = match r {
        MetadataRecord::RegisterBroker(reg) => (
            fb::Body::BrokerRegistration,
            registration(b, reg).as_union_value(),
        ),
        MetadataRecord::FenceBroker {
            node_id,
            broker_epoch,
        } => (
            fb::Body::FenceBroker,
            fb::FenceBroker::create(
                b,
                &fb::FenceBrokerArgs {
                    node_id: *node_id,
                    broker_epoch: *broker_epoch,
                },
            )
            .as_union_value(),
        ),
        MetadataRecord::UnfenceBroker {
            node_id,
            broker_epoch,
        } => (
            fb::Body::UnfenceBroker,
            fb::UnfenceBroker::create(
                b,
                &fb::UnfenceBrokerArgs {
                    node_id: *node_id,
                    broker_epoch: *broker_epoch,
                },
            )
            .as_union_value(),
        ),
        MetadataRecord::Topic { name, id, configs } => {
            let name = b.create_string(name);
            let configs = config_entries(b, configs);
            let id = id_of(id);
            (
                fb::Body::Topic,
                fb::Topic::create(
                    b,
                    &fb::TopicArgs {
                        name: Some(name),
                        id: Some(&id),
                        configs: Some(configs),
                    },
                )
                .as_union_value(),
            )
        }
        MetadataRecord::Partition(p) => {
            (fb::Body::PartitionRecord, partition(b, p).as_union_value())
        }
        MetadataRecord::PartitionChange(c) => {
            let isr = c.isr.as_ref().map(|isr| b.create_vector(isr));
            let replicas = c.replicas.as_ref().map(|r| replica_vector(b, r));
            let adding = c.adding.as_ref().map(|v| b.create_vector(v));
            let removing = c.removing.as_ref().map(|v| b.create_vector(v));
            let id = id_of(&c.topic_id);
            (
                fb::Body::PartitionChange,
                fb::PartitionChange::create(
                    b,
                    &fb::PartitionChangeArgs {
                        topic_id: Some(&id),
                        partition: c.partition,
                        expected_partition_epoch: c.expected_partition_epoch,
                        leader: c.leader,
                        isr,
                        replicas,
                        adding,
                        removing,
                    },
                )
                .as_union_value(),
            )
        }
        MetadataRecord::RemoveTopic { id } => {
            let id = id_of(id);
            (
                fb::Body::RemoveTopic,
                fb::RemoveTopic::create(b, &fb::RemoveTopicArgs { id: Some(&id) }).as_union_value(),
            )
        }
        MetadataRecord::TopicConfig { id, key, value } => {
            let key = b.create_string(key);
            let value = value.as_deref().map(|v| b.create_string(v));
            let id = id_of(id);
            (
                fb::Body::TopicConfig,
                fb::TopicConfig::create(
                    b,
                    &fb::TopicConfigArgs {
                        id: Some(&id),
                        key: Some(key),
                        value,
                    },
                )
                .as_union_value(),
            )
        }
        MetadataRecord::ProducerIds {
            node_id,
            next_producer_id,
        } => (
            fb::Body::ProducerIds,
            fb::ProducerIds::create(
                b,
                &fb::ProducerIdsArgs {
                    node_id: *node_id,
                    next_producer_id: *next_producer_id,
                },
            )
            .as_union_value(),
        ),
        MetadataRecord::BrokerSnapshot(s) => {
            let registration = registration(b, &s.registration);
            (
                fb::Body::BrokerSnapshot,
                fb::BrokerSnapshot::create(
                    b,
                    &fb::BrokerSnapshotArgs {
                        registration: Some(registration),
                        epoch: s.epoch,
                        fenced: s.fenced,
                    },
                )
                .as_union_value(),
            )
        }
    };
    fb::Record::create(
        b,
        &fb::RecordArgs {
            body_type,
            body: Some(body),
        },
    )
}

fn partition<'a>(
    b: &mut FlatBufferBuilder<'a>,
    p: &PartitionRecord,
) -> WIPOffset<fb::PartitionRecord<'a>> {
    let replicas = replica_vector(b, &p.replicas);
    let isr = b.create_vector(&p.isr);
    // Absent when empty (no reassignment: the common case, in every snapshot).
    let adding = (!p.adding.is_empty()).then(|| b.create_vector(&p.adding));
    let removing = (!p.removing.is_empty()).then(|| b.create_vector(&p.removing));
    let id = id_of(&p.topic_id);
    fb::PartitionRecord::create(
        b,
        &fb::PartitionRecordArgs {
            topic_id: Some(&id),
            partition: p.partition,
            replicas: Some(replicas),
            isr: Some(isr),
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            adding,
            removing,
        },
    )
}

fn replica_vector<'a>(
    b: &mut FlatBufferBuilder<'a>,
    replicas: &[Replica],
) -> WIPOffset<Vector<'a, fb::Replica>> {
    let replicas: Vec<fb::Replica> = replicas
        .iter()
        .map(|r| fb::Replica::new(r.node, r.shard))
        .collect();
    b.create_vector(&replicas)
}

fn replicas_from(v: Option<Vector<'_, fb::Replica>>) -> Option<Vec<Replica>> {
    v.map(|v| {
        v.iter()
            .map(|r| Replica {
                node: r.node(),
                shard: r.shard(),
            })
            .collect()
    })
}

pub(crate) fn string(s: Option<&str>, what: &str) -> Result<String, String> {
    s.map(str::to_string)
        .ok_or_else(|| format!("{what}: missing"))
}

fn endpoint_from(e: Option<fb::Endpoint>, what: &str) -> Result<Endpoint, String> {
    let e = e.ok_or_else(|| format!("{what}: missing"))?;
    Ok(Endpoint {
        host: string(e.host(), what)?,
        port: e.port(),
    })
}

pub(crate) fn registration_from(r: fb::BrokerRegistration) -> Result<BrokerRegistration, String> {
    Ok(BrokerRegistration {
        node_id: r.node_id(),
        incarnation: r
            .incarnation()
            .map(u128_from)
            .ok_or("broker registration: no incarnation")?,
        cluster_id: string(r.cluster_id(), "broker registration: cluster id")?,
        client: endpoint_from(r.client(), "broker registration: client endpoint")?,
        cluster: endpoint_from(r.cluster(), "broker registration: cluster endpoint")?,
        shards: r.shards(),
        rack: r.rack().map(str::to_string),
    })
}

fn ints(v: Option<Vector<'_, i32>>) -> Vec<i32> {
    v.map(|v| v.iter().collect()).unwrap_or_default()
}

pub(crate) fn configs_from(
    v: Option<Vector<'_, ForwardsUOffset<fb::ConfigEntry<'_>>>>,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for e in v.iter().flat_map(|v| v.iter()) {
        out.insert(
            string(e.key(), "topic config key")?,
            string(e.value(), "topic config value")?,
        );
    }
    Ok(out)
}

fn decode_record(r: fb::Record) -> Result<MetadataRecord, String> {
    let unknown = || format!("metadata record: unknown kind {}", r.body_type().0);
    Ok(match r.body_type() {
        fb::Body::BrokerRegistration => MetadataRecord::RegisterBroker(registration_from(
            r.body_as_broker_registration().ok_or_else(unknown)?,
        )?),
        fb::Body::FenceBroker => {
            let f = r.body_as_fence_broker().ok_or_else(unknown)?;
            MetadataRecord::FenceBroker {
                node_id: f.node_id(),
                broker_epoch: f.broker_epoch(),
            }
        }
        fb::Body::UnfenceBroker => {
            let f = r.body_as_unfence_broker().ok_or_else(unknown)?;
            MetadataRecord::UnfenceBroker {
                node_id: f.node_id(),
                broker_epoch: f.broker_epoch(),
            }
        }
        fb::Body::Topic => {
            let t = r.body_as_topic().ok_or_else(unknown)?;
            MetadataRecord::Topic {
                name: string(t.name(), "topic name")?,
                id: id_from(t.id(), "topic")?,
                configs: configs_from(t.configs())?,
            }
        }
        fb::Body::PartitionRecord => {
            let p = r.body_as_partition_record().ok_or_else(unknown)?;
            MetadataRecord::Partition(PartitionRecord {
                topic_id: id_from(p.topic_id(), "partition")?,
                partition: p.partition(),
                replicas: replicas_from(p.replicas()).unwrap_or_default(),
                isr: ints(p.isr()),
                leader: p.leader(),
                leader_epoch: p.leader_epoch(),
                partition_epoch: p.partition_epoch(),
                adding: ints(p.adding()),
                removing: ints(p.removing()),
            })
        }
        fb::Body::PartitionChange => {
            let c = r.body_as_partition_change().ok_or_else(unknown)?;
            MetadataRecord::PartitionChange(PartitionChange {
                topic_id: id_from(c.topic_id(), "partition change")?,
                partition: c.partition(),
                expected_partition_epoch: c.expected_partition_epoch(),
                leader: c.leader(),
                isr: c.isr().map(|v| v.iter().collect()),
                replicas: replicas_from(c.replicas()),
                adding: c.adding().map(|v| v.iter().collect()),
                removing: c.removing().map(|v| v.iter().collect()),
            })
        }
        fb::Body::RemoveTopic => {
            let t = r.body_as_remove_topic().ok_or_else(unknown)?;
            MetadataRecord::RemoveTopic {
                id: id_from(t.id(), "remove topic")?,
            }
        }
        fb::Body::TopicConfig => {
            let t = r.body_as_topic_config().ok_or_else(unknown)?;
            MetadataRecord::TopicConfig {
                id: id_from(t.id(), "topic config")?,
                key: string(t.key(), "topic config key")?,
                value: t.value().map(str::to_string),
            }
        }
        fb::Body::ProducerIds => {
            let p = r.body_as_producer_ids().ok_or_else(unknown)?;
            MetadataRecord::ProducerIds {
                node_id: p.node_id(),
                next_producer_id: p.next_producer_id(),
            }
        }
        fb::Body::BrokerSnapshot => {
            let s = r.body_as_broker_snapshot().ok_or_else(unknown)?;
            MetadataRecord::BrokerSnapshot(BrokerSnapshot {
                registration: registration_from(
                    s.registration().ok_or("broker snapshot: no registration")?,
                )?,
                epoch: s.epoch(),
                fenced: s.fenced(),
            })
        }
        _ => return Err(unknown()),
    })
}

#[cfg(test)]
mod tests;
