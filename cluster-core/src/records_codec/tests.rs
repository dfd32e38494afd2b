use std::collections::BTreeMap;

use super::*;
use crate::records::NodeId;

fn reg(node: NodeId, rack: Option<&str>) -> BrokerRegistration {
    BrokerRegistration {
        node_id: node,
        incarnation: u128::MAX - node as u128,
        cluster_id: "c-1".into(),
        client: Endpoint {
            host: "127.0.0.1".into(),
            port: 9092,
        },
        cluster: Endpoint {
            host: "node-1.example".into(),
            port: 9192,
        },
        shards: 4,
        rack: rack.map(str::to_string),
    }
}

fn every_kind() -> Vec<MetadataRecord> {
    let mut id = [0u8; 16];
    id[0] = 0xab;
    id[15] = 7;
    let mut configs = BTreeMap::new();
    configs.insert("cleanup.policy".to_string(), "compact".to_string());
    configs.insert("retention.ms".to_string(), String::new());
    vec![
        MetadataRecord::RegisterBroker(reg(1, Some("rack-a"))),
        MetadataRecord::RegisterBroker(reg(2, None)),
        MetadataRecord::FenceBroker {
            node_id: 2,
            broker_epoch: u64::MAX,
        },
        MetadataRecord::UnfenceBroker {
            node_id: 3,
            broker_epoch: 12,
        },
        MetadataRecord::Topic {
            name: "orders".into(),
            id,
            configs,
        },
        MetadataRecord::Topic {
            name: "t".into(),
            id: [0; 16],
            configs: BTreeMap::new(),
        },
        MetadataRecord::Partition(PartitionRecord {
            topic_id: id,
            partition: 11,
            replicas: vec![Replica { node: 1, shard: 3 }, Replica { node: 2, shard: 0 }],
            isr: vec![1, 2],
            leader: 1,
            leader_epoch: 5,
            partition_epoch: 9,
            adding: vec![2],
            removing: vec![],
        }),
        MetadataRecord::Partition(PartitionRecord {
            topic_id: id,
            partition: 0,
            replicas: vec![],
            isr: vec![],
            leader: -1,
            leader_epoch: 0,
            partition_epoch: 0,
            adding: vec![],
            removing: vec![],
        }),
        MetadataRecord::PartitionChange(PartitionChange {
            leader: Some(-1),
            ..PartitionChange::new(id, 11, 9)
        }),
        MetadataRecord::PartitionChange(PartitionChange {
            isr: Some(vec![]),
            ..PartitionChange::new(id, 11, 10)
        }),
        MetadataRecord::PartitionChange(PartitionChange {
            leader: Some(0),
            isr: Some(vec![0, 2]),
            ..PartitionChange::new(id, 1, 0)
        }),
        // A reassignment (KIP-455): replicas widened with adding / removing, then completed
        // (both lists cleared: `Some(vec![])` is not `None`).
        MetadataRecord::PartitionChange(PartitionChange {
            replicas: Some(vec![
                Replica { node: 2, shard: 1 },
                Replica { node: 3, shard: 0 },
                Replica { node: 1, shard: 3 },
            ]),
            adding: Some(vec![3]),
            removing: Some(vec![1]),
            ..PartitionChange::new(id, 11, 11)
        }),
        MetadataRecord::PartitionChange(PartitionChange {
            leader: Some(2),
            isr: Some(vec![2, 3]),
            replicas: Some(vec![
                Replica { node: 2, shard: 1 },
                Replica { node: 3, shard: 0 },
            ]),
            adding: Some(vec![]),
            removing: Some(vec![]),
            ..PartitionChange::new(id, 11, 12)
        }),
        MetadataRecord::RemoveTopic { id },
        MetadataRecord::TopicConfig {
            id,
            key: "retention.ms".into(),
            value: Some("1000".into()),
        },
        MetadataRecord::TopicConfig {
            id,
            key: "retention.ms".into(),
            value: Some(String::new()),
        },
        MetadataRecord::TopicConfig {
            id,
            key: "retention.ms".into(),
            value: None,
        },
        MetadataRecord::ProducerIds {
            node_id: 0,
            next_producer_id: i64::MAX,
        },
        MetadataRecord::BrokerSnapshot(BrokerSnapshot {
            registration: reg(0, None),
            epoch: 77,
            fenced: true,
        }),
    ]
}

#[test]
fn every_record_kind_comes_back_as_it_went_in() {
    let records = every_kind();
    let bytes = encode_batch(&records);
    assert_eq!(decode_batch(&bytes).unwrap(), records);
    // One at a time too (each its own entry).
    for r in &records {
        assert_eq!(
            decode_batch(&encode_batch(std::slice::from_ref(r))).unwrap(),
            vec![r.clone()]
        );
    }
    assert_eq!(decode_batch(&encode_batch(&[])).unwrap(), vec![]);
}

/// A small deterministic generator (xorshift), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn damaged_batches_are_errors_never_panics() {
    let good = encode_batch(&every_kind());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut refused = 0;
    for round in 0..20_000 {
        let mut bytes = good.clone();
        match round % 4 {
            // Flip a few bytes.
            0 | 1 => {
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(bytes.len());
                    bytes[i] ^= 1 << rng.below(8);
                }
            }
            // Cut it short.
            2 => bytes.truncate(rng.below(bytes.len())),
            // Random garbage of a random length.
            _ => {
                bytes = (0..rng.below(512)).map(|_| rng.next() as u8).collect();
            }
        }
        // Either an error or some records; the point is that it returns.
        if decode_batch(&bytes).is_err() {
            refused += 1;
        }
    }
    assert!(
        refused > 1_000,
        "only {refused} of 20,000 damaged batches refused"
    );
}

#[test]
fn an_unknown_record_kind_is_refused() {
    let good = encode_batch(&[MetadataRecord::RemoveTopic { id: [1; 16] }]);
    // The union tag is one byte with the value 7 (RemoveTopic); find it through the API by
    // encoding a record with each tag and patching the first that decodes to a new kind.
    let batch = flatbuffers::root::<fb::RecordBatch>(&good).unwrap();
    let tag = batch.records().unwrap().get(0).body_type().0;
    let positions: Vec<usize> = good
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == tag)
        .map(|(i, _)| i)
        .collect();
    let mut refused_unknown = false;
    for i in positions {
        let mut bytes = good.clone();
        bytes[i] = 200;
        if let Err(e) = decode_batch(&bytes) {
            refused_unknown |= e.contains("unknown kind 200");
        }
    }
    assert!(
        refused_unknown,
        "a record of kind 200 was not refused by name"
    );
}

#[test]
fn a_batch_names_its_proposer() {
    let records = vec![MetadataRecord::RemoveTopic { id: [3; 16] }];
    let who = Proposer {
        node: 2,
        request_id: u64::MAX,
    };
    let b = decode_batch_with_proposer(&encode_batch_for(&records, Some(who))).unwrap();
    assert_eq!(b.proposer, Some(who));
    assert_eq!(b.records, records);
    let b = decode_batch_with_proposer(&encode_batch(&records)).unwrap();
    assert_eq!(b.proposer, None);
}
