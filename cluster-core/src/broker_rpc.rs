//! Requests between brokers over the cluster link (`wire/schema/cluster.fbs`, namespace
//! `strand.broker`): the transaction marker the coordinator's node asks a partition's leader
//! to write (one entry of Kafka's WriteTxnMarkers), and a follower's fetch from a partition's
//! leader (#18). A request names a `request_id` chosen by the asker; the answer repeats it
//! with an error code (0: done) and, for a fetch, what the leader has.

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
    },
    /// Node `replica` holds `topic`-`partition` below `offset`, its last batch is of epoch
    /// `last_epoch` (-1: none), and it follows the leader at `leader_epoch`.
    ReplicaFetch {
        topic: String,
        partition: i32,
        replica: NodeId,
        leader_epoch: i32,
        offset: i64,
        last_epoch: i32,
        max_bytes: i32,
    },
}

/// The answer to one request: `None` done, else the Kafka error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerAnswer {
    pub request_id: u64,
    pub error: Option<ErrorCode>,
    /// A ReplicaFetch's answer.
    pub replica: Option<ReplicaData>,
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
    pub records: Vec<u8>,
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
                    },
                )
                .as_union_value(),
            )
        }
        BrokerRequest::ReplicaFetch {
            topic,
            partition,
            replica,
            leader_epoch,
            offset,
            last_epoch,
            max_bytes,
        } => {
            let topic = b.create_string(topic);
            (
                fb::Body::ReplicaFetch,
                fb::ReplicaFetch::create(
                    &mut b,
                    &fb::ReplicaFetchArgs {
                        topic: Some(topic),
                        partition: *partition,
                        replica: *replica,
                        leader_epoch: *leader_epoch,
                        offset: *offset,
                        last_epoch: *last_epoch,
                        max_bytes: *max_bytes,
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
            }
        }
        fb::Body::ReplicaFetch => {
            let f = r.body_as_replica_fetch().ok_or_else(unknown)?;
            BrokerRequest::ReplicaFetch {
                topic: string(f.topic(), "replica fetch: topic")?,
                partition: f.partition(),
                replica: f.replica(),
                leader_epoch: f.leader_epoch(),
                offset: f.offset(),
                last_epoch: f.last_epoch(),
                max_bytes: f.max_bytes(),
            }
        }
        _ => return Err(unknown()),
    };
    Ok((r.request_id(), req))
}

pub fn encode_answer(a: &BrokerAnswer) -> Vec<u8> {
    let data = a.replica.as_ref();
    let records_len = data.map_or(0, |d| d.records.len());
    let mut b = FlatBufferBuilder::with_capacity(64 + records_len);
    let records = data.map(|d| b.create_vector(&d.records));
    let diverging = data.and_then(|d| d.diverging);
    let root = fb::Answer::create(
        &mut b,
        &fb::AnswerArgs {
            request_id: a.request_id,
            error_code: a.error.map_or(0, |c| c.code()),
            high_watermark: data.map_or(-1, |d| d.high_watermark),
            log_start: data.map_or(-1, |d| d.log_start),
            diverging_epoch: diverging.map_or(-1, |d| d.0),
            diverging_end_offset: diverging.map_or(-1, |d| d.1),
            records,
            replica: data.is_some(),
        },
    );
    b.finish(root, None);
    b.finished_data().to_vec()
}

pub fn decode_answer(bytes: &[u8]) -> Result<BrokerAnswer, String> {
    let a = flatbuffers::root_with_opts::<fb::Answer>(&verifier_options(bytes), bytes)
        .map_err(|e| format!("broker answer: {e}"))?;
    let error = match a.error_code() {
        0 => None,
        code => Some(
            ErrorCode::from_code(code)
                .ok_or_else(|| format!("broker answer: unknown error code {code}"))?,
        ),
    };
    let replica = a.replica().then(|| ReplicaData {
        high_watermark: a.high_watermark(),
        log_start: a.log_start(),
        diverging: (a.diverging_epoch() >= 0 || a.diverging_end_offset() >= 0)
            .then(|| (a.diverging_epoch(), a.diverging_end_offset())),
        records: a.records().map(|r| r.bytes().to_vec()).unwrap_or_default(),
    });
    Ok(BrokerAnswer {
        request_id: a.request_id(),
        error,
        replica,
    })
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
        };
        let bytes = encode_request(42, &req);
        assert_eq!(decode_request(&bytes), Ok((42, req)));
        let fetch = BrokerRequest::ReplicaFetch {
            topic: "orders".into(),
            partition: 1,
            replica: 3,
            leader_epoch: 5,
            offset: 1 << 33,
            last_epoch: 4,
            max_bytes: 1 << 20,
        };
        assert_eq!(decode_request(&encode_request(43, &fetch)), Ok((43, fetch)));
        for a in [
            BrokerAnswer {
                request_id: 9,
                error: None,
                replica: None,
            },
            BrokerAnswer {
                request_id: 10,
                error: Some(ErrorCode::NotLeaderOrFollower),
                replica: None,
            },
            BrokerAnswer {
                request_id: 11,
                error: None,
                replica: Some(ReplicaData {
                    high_watermark: 40,
                    log_start: 2,
                    diverging: Some((3, 17)),
                    records: vec![1, 2, 3, 4],
                }),
            },
        ] {
            assert_eq!(decode_answer(&encode_answer(&a)), Ok(a));
        }
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
