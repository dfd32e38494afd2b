//! Requests between brokers over the cluster link (`wire/schema/cluster.fbs`, namespace
//! `strand.broker`): the transaction marker the coordinator's node asks a partition's leader
//! to write (one entry of Kafka's WriteTxnMarkers), and a follower's fetch from a partition's
//! leader (#18). A request names a `request_id` chosen by the asker; the answer repeats it
//! with an error code (0: done) and, for a fetch, what the leader has.

use bytes::Bytes;
use flatbuffers::FlatBufferBuilder;
use strand_wire::cluster::broker as fb;
use strand_wire::ErrorCode;

use crate::records::NodeId;
use crate::records_codec::{string, verifier_options};

/// What a broker asks of another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BrokerRequest {
    TxnMarker {
        topic: String,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        /// The leader epoch of the coordinator's `__transaction_state` partition.
        coordinator_epoch: i32,
    },
    /// Node `replica`'s fetch of every partition it follows on this node's shard
    /// `leader_shard`, held up to `max_wait_ms` for something new.
    ReplicaFetchMany {
        replica: NodeId,
        leader_shard: u32,
        max_wait_ms: i32,
        response_max_bytes: i32,
        partitions: Vec<PartitionFetch>,
    },
}

/// One partition of a `ReplicaFetchMany`: node `replica` holds `topic`-`partition` below
/// `offset`, its last batch is of epoch `last_epoch` (-1: none), it follows the leader at
/// `leader_epoch`, and the high watermark it last heard is `known_high_watermark` (-1: none);
/// `topic_id` tells a re-created topic of the same name apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFetch {
    pub topic: String,
    /// The topic's id as the follower's view has it.
    pub topic_id: [u8; 16],
    pub partition: i32,
    pub leader_epoch: i32,
    pub offset: i64,
    pub last_epoch: i32,
    pub known_high_watermark: i64,
    pub max_bytes: i32,
}

/// One partition's part of a `ReplicaFetchMany`'s answer.
pub type PartitionAnswer = Result<ReplicaData, ErrorCode>;

/// The answer to one request: `None` done, else the Kafka error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerAnswer {
    pub request_id: u64,
    pub error: Option<ErrorCode>,
    /// A ReplicaFetchMany's answer: one per partition asked, in the request's order.
    pub partitions: Vec<PartitionAnswer>,
}

/// What a leader sends a follower.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaData {
    pub high_watermark: i64,
    pub log_start: i64,
    /// The follower's log diverged: `(epoch, end offset)` of the leader's log for the
    /// follower's last epoch; the follower truncates (`replication::epoch_cache::truncation`)
    /// and asks again.
    pub diverging: Option<(i32, i64)>,
    /// Whole batches, as the leader's log holds them.
    pub records: Records,
}

/// Record batches as a list of buffers: on the leader its log's own (sent with no copy: they
/// become the message's tail chunks), on the follower one slice of the received message.
#[derive(Clone, Debug, Default)]
pub struct Records(pub Vec<Bytes>);

impl Records {
    /// Bytes in all the buffers.
    pub fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Bytes::is_empty)
    }

    /// The batches as one buffer: no copy when they are one already (as received).
    pub fn contiguous(&self) -> Bytes {
        match self.0.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => Bytes::from(many.concat()),
        }
    }
}

impl PartialEq for Records {
    /// The same bytes, however they are split into buffers.
    fn eq(&self, other: &Records) -> bool {
        self.len() == other.len() && self.contiguous() == other.contiguous()
    }
}

impl Eq for Records {}

impl From<Vec<u8>> for Records {
    fn from(bytes: Vec<u8>) -> Records {
        Records(if bytes.is_empty() {
            Vec::new()
        } else {
            vec![Bytes::from(bytes)]
        })
    }
}

pub fn encode_request(request_id: u64, req: &BrokerRequest) -> Vec<u8> {
    let mut b = FlatBufferBuilder::with_capacity(128);
    let (body_type, body) = match req {
        BrokerRequest::TxnMarker {
            topic,
            partition,
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
        } => {
            let topic = b.create_string(topic);
            (
                fb::Body::TxnMarker,
                fb::TxnMarker::create(
                    &mut b,
                    &fb::TxnMarkerArgs {
                        topic: Some(topic),
                        partition: *partition,
                        producer_id: *producer_id,
                        producer_epoch: *producer_epoch,
                        commit: *commit,
                        coordinator_epoch: *coordinator_epoch,
                    },
                )
                .as_union_value(),
            )
        }
        BrokerRequest::ReplicaFetchMany {
            replica,
            leader_shard,
            max_wait_ms,
            response_max_bytes,
            partitions,
        } => {
            let items: Vec<_> = partitions
                .iter()
                .map(|p| {
                    let topic = b.create_string(&p.topic);
                    let topic_id = b.create_vector(&p.topic_id);
                    fb::ReplicaFetchPartition::create(
                        &mut b,
                        &fb::ReplicaFetchPartitionArgs {
                            topic: Some(topic),
                            partition: p.partition,
                            leader_epoch: p.leader_epoch,
                            offset: p.offset,
                            last_epoch: p.last_epoch,
                            known_high_watermark: p.known_high_watermark,
                            max_bytes: p.max_bytes,
                            topic_id: Some(topic_id),
                        },
                    )
                })
                .collect();
            let items = b.create_vector(&items);
            (
                fb::Body::ReplicaFetchMany,
                fb::ReplicaFetchMany::create(
                    &mut b,
                    &fb::ReplicaFetchManyArgs {
                        replica: *replica,
                        leader_shard: *leader_shard,
                        max_wait_ms: *max_wait_ms,
                        response_max_bytes: *response_max_bytes,
                        partitions: Some(items),
                    },
                )
                .as_union_value(),
            )
        }
    };
    let root = fb::Request::create(
        &mut b,
        &fb::RequestArgs {
            request_id,
            body_type,
            body: Some(body),
        },
    );
    b.finish(root, None);
    b.finished_data().to_vec()
}

/// A request and its id; malformed input is an error naming what was wrong.
pub fn decode_request(bytes: &[u8]) -> Result<(u64, BrokerRequest), String> {
    let r = flatbuffers::root_with_opts::<fb::Request>(&verifier_options(bytes), bytes)
        .map_err(|e| format!("broker request: {e}"))?;
    let unknown = || format!("broker request: unknown kind {}", r.body_type().0);
    let req = match r.body_type() {
        fb::Body::TxnMarker => {
            let m = r.body_as_txn_marker().ok_or_else(unknown)?;
            BrokerRequest::TxnMarker {
                topic: string(m.topic(), "txn marker: topic")?,
                partition: m.partition(),
                producer_id: m.producer_id(),
                producer_epoch: m.producer_epoch(),
                commit: m.commit(),
                coordinator_epoch: m.coordinator_epoch(),
            }
        }
        fb::Body::ReplicaFetchMany => {
            let f = r.body_as_replica_fetch_many().ok_or_else(unknown)?;
            let mut partitions = Vec::new();
            for p in f.partitions().iter().flatten() {
                let topic_id = p
                    .topic_id()
                    .and_then(|id| <[u8; 16]>::try_from(id.bytes()).ok())
                    .ok_or("replica fetch: a topic id is 16 bytes")?;
                partitions.push(PartitionFetch {
                    topic: string(p.topic(), "replica fetch: topic")?,
                    topic_id,
                    partition: p.partition(),
                    leader_epoch: p.leader_epoch(),
                    offset: p.offset(),
                    last_epoch: p.last_epoch(),
                    known_high_watermark: p.known_high_watermark(),
                    max_bytes: p.max_bytes(),
                });
            }
            BrokerRequest::ReplicaFetchMany {
                replica: f.replica(),
                leader_shard: f.leader_shard(),
                max_wait_ms: f.max_wait_ms(),
                response_max_bytes: f.response_max_bytes(),
                partitions,
            }
        }
        _ => return Err(unknown()),
    };
    Ok((r.request_id(), req))
}

/// An answer as the chunks of one message (in order): the FlatBuffer, with its length in
/// front, then each partition's records — the leader's log buffers themselves, not copied.
pub fn encode_answer(a: &BrokerAnswer) -> Vec<Bytes> {
    let mut b = FlatBufferBuilder::with_capacity(64 + 64 * a.partitions.len());
    let partitions = (!a.partitions.is_empty()).then(|| {
        let items: Vec<_> = a
            .partitions
            .iter()
            .map(|p| {
                let d = p.as_ref().ok();
                let diverging = d.and_then(|d| d.diverging);
                let records_len = d.map_or(0, |d| d.records.len());
                fb::ReplicaPartitionAnswer::create(
                    &mut b,
                    &fb::ReplicaPartitionAnswerArgs {
                        error_code: p.as_ref().err().map_or(0, |c| c.code()),
                        high_watermark: d.map_or(-1, |d| d.high_watermark),
                        log_start: d.map_or(-1, |d| d.log_start),
                        diverging_epoch: diverging.map_or(-1, |d| d.0),
                        diverging_end_offset: diverging.map_or(-1, |d| d.1),
                        records: None,
                        // (Capped by the leader far below 4 GiB; saturating, never a
                        // panic: a message that large is refused by the transport.)
                        records_len: u32::try_from(records_len).unwrap_or(u32::MAX),
                    },
                )
            })
            .collect();
        b.create_vector(&items)
    });
    let root = fb::Answer::create(
        &mut b,
        &fb::AnswerArgs {
            request_id: a.request_id,
            error_code: a.error.map_or(0, |c| c.code()),
            partitions,
            ..Default::default()
        },
    );
    b.finish(root, None);
    let header = b.finished_data();
    let mut head = Vec::with_capacity(4 + header.len());
    head.extend_from_slice(&(header.len() as u32).to_le_bytes());
    head.extend_from_slice(header);
    let mut chunks = vec![Bytes::from(head)];
    for d in a.partitions.iter().flatten() {
        chunks.extend(d.records.0.iter().filter(|c| !c.is_empty()).cloned());
    }
    chunks
}

/// An answer from one message's body (its records are slices of `bytes`, not copies);
/// malformed input is an error naming what was wrong.
pub fn decode_answer(bytes: Bytes) -> Result<BrokerAnswer, String> {
    let header_len = bytes
        .get(..4)
        .map(|l| u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize)
        .ok_or("broker answer: shorter than its header length")?;
    let header = bytes
        .get(4..4usize.saturating_add(header_len))
        .ok_or("broker answer: header longer than the message")?;
    let a = flatbuffers::root_with_opts::<fb::Answer>(&verifier_options(header), header)
        .map_err(|e| format!("broker answer: {e}"))?;
    let error = error_code(a.error_code())?;
    let mut tail = bytes.slice(4 + header_len..);
    let mut partitions = Vec::new();
    for p in a.partitions().iter().flatten() {
        let records_len = p.records_len() as usize;
        if records_len > tail.len() {
            return Err("broker answer: records past the end of the message".to_string());
        }
        let mut records = Records(Vec::new());
        if records_len > 0 {
            records.0.push(tail.split_to(records_len));
        }
        if let Some(inline) = p.records().filter(|r| !r.is_empty()) {
            records.0.push(Bytes::copy_from_slice(inline.bytes()));
        }
        partitions.push(match error_code(p.error_code())? {
            Some(_) if !records.is_empty() => {
                return Err("broker answer: records with an error".to_string())
            }
            Some(code) => Err(code),
            None => Ok(ReplicaData {
                high_watermark: p.high_watermark(),
                log_start: p.log_start(),
                diverging: (p.diverging_epoch() >= 0 || p.diverging_end_offset() >= 0)
                    .then(|| (p.diverging_epoch(), p.diverging_end_offset())),
                records,
            }),
        });
    }
    if !tail.is_empty() {
        return Err("broker answer: bytes past the last partition's records".to_string());
    }
    Ok(BrokerAnswer {
        request_id: a.request_id(),
        error,
        partitions,
    })
}

/// The chunks of a message as one buffer (tests, and the fuzzer's round trip).
pub fn joined(chunks: &[Bytes]) -> Bytes {
    Bytes::from(chunks.concat())
}

fn error_code(code: i16) -> Result<Option<ErrorCode>, String> {
    match code {
        0 => Ok(None),
        code => ErrorCode::from_code(code)
            .map(Some)
            .ok_or_else(|| format!("broker answer: unknown error code {code}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_round_trip_and_damage_is_an_error() {
        let req = BrokerRequest::TxnMarker {
            topic: "orders".into(),
            partition: 7,
            producer_id: 1 << 40,
            producer_epoch: 3,
            commit: true,
            coordinator_epoch: 5,
        };
        let bytes = encode_request(42, &req);
        assert_eq!(decode_request(&bytes), Ok((42, req)));
        let many = BrokerRequest::ReplicaFetchMany {
            replica: 2,
            leader_shard: 3,
            max_wait_ms: 500,
            response_max_bytes: 8 << 20,
            partitions: (0..3)
                .map(|p| PartitionFetch {
                    topic: format!("t{p}"),
                    topic_id: [p as u8; 16],
                    partition: p,
                    leader_epoch: 7,
                    offset: 100 + i64::from(p),
                    last_epoch: 6,
                    known_high_watermark: 90,
                    max_bytes: 1 << 20,
                })
                .collect(),
        };
        let many_bytes = encode_request(44, &many);
        assert_eq!(decode_request(&many_bytes), Ok((44, many)));
        for i in 0..many_bytes.len() {
            let mut damaged = many_bytes.clone();
            damaged[i] ^= 0x5A;
            let _ = decode_request(&damaged);
        }
        for a in [
            BrokerAnswer {
                request_id: 9,
                error: None,
                partitions: Vec::new(),
            },
            BrokerAnswer {
                request_id: 10,
                error: Some(ErrorCode::NotLeaderOrFollower),
                partitions: Vec::new(),
            },
            BrokerAnswer {
                request_id: 12,
                error: None,
                partitions: vec![
                    Err(ErrorCode::NotLeaderOrFollower),
                    Ok(ReplicaData {
                        high_watermark: 5,
                        log_start: 0,
                        diverging: None,
                        records: Records(vec![
                            Bytes::from(vec![9; 60]),
                            Bytes::new(),
                            Bytes::from(vec![8; 40]),
                        ]),
                    }),
                    Ok(ReplicaData {
                        high_watermark: 5,
                        log_start: 0,
                        diverging: Some((2, 4)),
                        records: Records::default(),
                    }),
                ],
            },
        ] {
            let chunks = encode_answer(&a);
            let message = joined(&chunks);
            assert_eq!(decode_answer(message.clone()), Ok(a));
            // Every truncation and damaged byte is an error or a value, never a panic.
            for cut in 0..message.len() {
                let _ = decode_answer(message.slice(..cut));
            }
            for i in 0..message.len() {
                let mut damaged = message.to_vec();
                damaged[i] ^= 0x5A;
                let _ = decode_answer(Bytes::from(damaged));
            }
        }
        // The leader's buffers go out as they are: the chunks after the header are them.
        let shared = Bytes::from(vec![7u8; 4096]);
        let a = BrokerAnswer {
            request_id: 13,
            error: None,
            partitions: vec![Ok(ReplicaData {
                records: Records(vec![shared.slice(..1000), shared.slice(1000..)]),
                ..Default::default()
            })],
        };
        let chunks = encode_answer(&a);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[1].as_ptr(), shared.as_ptr(), "not copied");
        assert!(
            decode_answer(joined(&chunks[..2])).is_err(),
            "records cut short"
        );
        // Every truncation and every single-byte change decodes to an error or a value,
        // never a panic.
        for cut in 0..bytes.len() {
            let _ = decode_request(&bytes[..cut]);
        }
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0xA5;
            let _ = decode_request(&damaged);
        }
        assert!(decode_request(b"nonsense").is_err());
    }
}
