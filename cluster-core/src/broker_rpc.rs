//! Requests between brokers over the cluster link (`wire/schema/cluster.fbs`, namespace
//! `strand.broker`): so far the transaction marker the coordinator's node asks a partition's
//! leader to write (one entry of Kafka's WriteTxnMarkers). A request names a `request_id`
//! chosen by the asker; the answer repeats it with an error code (0: done).

use flatbuffers::FlatBufferBuilder;
use strand_wire::cluster::broker as fb;
use strand_wire::ErrorCode;

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
}

/// The answer to one request: `None` done, else the Kafka error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerAnswer {
    pub request_id: u64,
    pub error: Option<ErrorCode>,
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
        _ => return Err(unknown()),
    };
    Ok((r.request_id(), req))
}

pub fn encode_answer(a: &BrokerAnswer) -> Vec<u8> {
    let mut b = FlatBufferBuilder::with_capacity(32);
    let root = fb::Answer::create(
        &mut b,
        &fb::AnswerArgs {
            request_id: a.request_id,
            error_code: a.error.map_or(0, |c| c.code()),
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
    Ok(BrokerAnswer {
        request_id: a.request_id(),
        error,
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
        for a in [
            BrokerAnswer {
                request_id: 9,
                error: None,
            },
            BrokerAnswer {
                request_id: 10,
                error: Some(ErrorCode::NotLeaderOrFollower),
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
