//! Fetch responses encoded straight to socket segments, so record bytes are never copied.
//!
//! The generic codec takes one `Bytes` per partition and copies it into the response buffer.
//! This encoder writes the response's own fields into small buffers and hands record sets
//! through as the `Bytes` slices the log returned (cache entries or one DMA read), to be
//! written to the socket one after another. Record sets under [`COALESCE_BYTES`] are copied
//! into the surrounding buffer instead: a syscall costs more than copying a few KiB.
//!
//! Layout (Kafka's FetchResponse, versions 4 to 12; v12 is "flexible": compact strings,
//! arrays and bytes, and tagged-field sections):
//! ```text
//! size i32 | correlation_id i32 | [v12: header tags]
//! throttle_time_ms i32 | [v7+: error_code i16, session_id i32]
//! responses: [ topic string | partitions: [ partition_index i32 | error_code i16
//!   | high_watermark i64 | last_stable_offset i64 | [v5+: log_start_offset i64]
//!   | aborted_transactions nullable [ producer_id i64 | first_offset i64 | (v12 tags) ]
//!   | [v11+: preferred_read_replica i32] | records nullable bytes
//!   | (v12 tags: tag 1 = current_leader { leader_id i32, leader_epoch i32, tags }) ]
//!   | (v12 tags) ]
//! | (v12 tags)
//! ```

use bytes::{BufMut, Bytes, BytesMut};

/// Record sets smaller than this are copied into the response buffer rather than sent as a
/// segment of their own.
pub const COALESCE_BYTES: usize = 16 << 10;

/// Lowest and highest Fetch versions this encoder writes.
pub const VERSIONS: (i16, i16) = (4, 12);

#[derive(Debug, Clone, Default)]
pub struct FetchPartition {
    pub index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// `(producer_id, first_offset)` of aborted transactions; `None` is encoded as null.
    pub aborted: Option<Vec<(i64, i64)>>,
    pub preferred_read_replica: i32,
    /// Whole batches, in order; empty is encoded as an empty (not null) record set.
    pub records: Vec<Bytes>,
    /// KIP-951 (v12+, tagged): `(leader_id, leader_epoch)` sent with NOT_LEADER_OR_FOLLOWER
    /// or FENCED_LEADER_EPOCH so the client can go there without a Metadata round trip.
    pub current_leader: Option<(i32, i32)>,
}

#[derive(Debug, Clone, Default)]
pub struct FetchTopic {
    pub name: String,
    pub partitions: Vec<FetchPartition>,
}

struct Out {
    segments: Vec<Bytes>,
    buf: BytesMut,
}

impl Out {
    fn push_bytes(&mut self, b: &Bytes) {
        if b.len() < COALESCE_BYTES {
            self.buf.extend_from_slice(b);
        } else {
            let head = std::mem::take(&mut self.buf).freeze();
            if !head.is_empty() {
                self.segments.push(head);
            }
            self.segments.push(b.clone());
        }
    }
}

fn put_uvarint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// Array or string length: int32/int16 (classic) or uvarint(len + 1) (flexible).
fn put_len(buf: &mut BytesMut, flexible: bool, len: usize, int16: bool) {
    if flexible {
        put_uvarint(buf, len as u64 + 1);
    } else if int16 {
        buf.put_i16(len as i16);
    } else {
        buf.put_i32(len as i32);
    }
}

/// Encodes a whole Fetch response (size prefix included) as segments to write in order.
pub fn encode_fetch_response(
    version: i16,
    correlation_id: i32,
    throttle_time_ms: i32,
    error_code: i16,
    session_id: i32,
    topics: &[FetchTopic],
) -> Vec<Bytes> {
    debug_assert!((VERSIONS.0..=VERSIONS.1).contains(&version));
    let flexible = version >= 12;
    let mut out = Out {
        segments: Vec::new(),
        buf: BytesMut::with_capacity(512),
    };
    let b = &mut out.buf;
    b.put_i32(0); // size, patched below
    b.put_i32(correlation_id);
    if flexible {
        put_uvarint(b, 0);
    }
    b.put_i32(throttle_time_ms);
    if version >= 7 {
        b.put_i16(error_code);
        b.put_i32(session_id);
    }
    put_len(b, flexible, topics.len(), false);
    for t in topics {
        put_len(&mut out.buf, flexible, t.name.len(), true);
        out.buf.extend_from_slice(t.name.as_bytes());
        put_len(&mut out.buf, flexible, t.partitions.len(), false);
        for p in &t.partitions {
            let b = &mut out.buf;
            b.put_i32(p.index);
            b.put_i16(p.error_code);
            b.put_i64(p.high_watermark);
            b.put_i64(p.last_stable_offset);
            if version >= 5 {
                b.put_i64(p.log_start_offset);
            }
            match &p.aborted {
                None if flexible => put_uvarint(b, 0),
                None => b.put_i32(-1),
                Some(list) => {
                    put_len(b, flexible, list.len(), false);
                    for &(pid, first) in list {
                        b.put_i64(pid);
                        b.put_i64(first);
                        if flexible {
                            put_uvarint(b, 0);
                        }
                    }
                }
            }
            if version >= 11 {
                b.put_i32(p.preferred_read_replica);
            }
            let len: usize = p.records.iter().map(Bytes::len).sum();
            put_len(b, flexible, len, false);
            for r in &p.records {
                out.push_bytes(r);
            }
            if flexible {
                let b = &mut out.buf;
                match p.current_leader {
                    // One tagged field: tag 1, 9 bytes (two int32s and an empty tag section).
                    Some((leader_id, leader_epoch)) => {
                        put_uvarint(b, 1);
                        put_uvarint(b, 1);
                        put_uvarint(b, 9);
                        b.put_i32(leader_id);
                        b.put_i32(leader_epoch);
                        put_uvarint(b, 0);
                    }
                    None => put_uvarint(b, 0),
                }
            }
        }
        if flexible {
            put_uvarint(&mut out.buf, 0);
        }
    }
    if flexible {
        put_uvarint(&mut out.buf, 0);
    }
    let tail = out.buf.freeze();
    if !tail.is_empty() {
        out.segments.push(tail);
    }
    let total: usize = out.segments.iter().map(Bytes::len).sum();
    let mut first = BytesMut::from(&out.segments[0][..]);
    first[0..4].copy_from_slice(&((total - 4) as i32).to_be_bytes());
    out.segments[0] = first.freeze();
    out.segments
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::encode_response;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{
        ApiKey, BrokerId, FetchResponse, ProducerId, ResponseKind, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;

    fn sample(big: bool, v: i16) -> (Vec<FetchTopic>, FetchResponse) {
        let small = Bytes::from(vec![7u8; 100]);
        let large = Bytes::from(vec![9u8; if big { 40_000 } else { 10 }]);
        let ours = vec![
            FetchTopic {
                name: "orders".into(),
                partitions: vec![
                    FetchPartition {
                        index: 0,
                        high_watermark: 10,
                        last_stable_offset: 10,
                        log_start_offset: 0,
                        aborted: Some(vec![(5, 3)]),
                        preferred_read_replica: -1,
                        records: vec![small.clone(), large.clone()],
                        ..Default::default()
                    },
                    FetchPartition {
                        index: 1,
                        error_code: 6,
                        high_watermark: -1,
                        last_stable_offset: -1,
                        log_start_offset: -1,
                        preferred_read_replica: -1,
                        current_leader: (v >= 12).then_some((3, 7)),
                        ..Default::default()
                    },
                ],
            },
            FetchTopic {
                name: "t2".into(),
                partitions: vec![],
            },
        ];
        let mut joined = small.to_vec();
        joined.extend_from_slice(&large);
        let mut theirs = FetchResponse::default();
        let mut t = FetchableTopicResponse::default();
        t.topic = TopicName(StrBytes::from_static_str("orders"));
        let mut p0 = PartitionData::default();
        p0.partition_index = 0;
        p0.high_watermark = 10;
        p0.last_stable_offset = 10;
        p0.log_start_offset = 0;
        let mut at = AbortedTransaction::default();
        at.producer_id = ProducerId(5);
        at.first_offset = 3;
        p0.aborted_transactions = Some(vec![at]);
        p0.preferred_read_replica = BrokerId(-1);
        p0.records = Some(Bytes::from(joined));
        let mut p1 = PartitionData::default();
        p1.partition_index = 1;
        p1.error_code = 6;
        if v >= 12 {
            p1.current_leader.leader_id = BrokerId(3);
            p1.current_leader.leader_epoch = 7;
        }
        p1.high_watermark = -1;
        p1.last_stable_offset = -1;
        p1.log_start_offset = -1;
        p1.preferred_read_replica = BrokerId(-1);
        p1.records = Some(Bytes::new());
        p1.aborted_transactions = None;
        t.partitions = vec![p0, p1];
        let mut t2 = FetchableTopicResponse::default();
        t2.topic = TopicName(StrBytes::from_static_str("t2"));
        theirs.responses = vec![t, t2];
        (ours, theirs)
    }

    #[test]
    fn byte_identical_to_the_generated_codec_at_every_version() {
        for big in [false, true] {
            for v in VERSIONS.0..=VERSIONS.1 {
                let (ours, theirs) = sample(big, v);
                let segs = encode_fetch_response(v, 42, 0, 0, 0, &ours);
                let got: Vec<u8> = segs.iter().flat_map(|s| s.iter().copied()).collect();
                let want =
                    encode_response(ApiKey::Fetch, v, 42, &ResponseKind::Fetch(theirs.clone()))
                        .expect("encode");
                assert_eq!(got, want.to_vec(), "version {v}, big {big}");
                if big {
                    assert!(
                        segs.iter().any(|s| s.len() == 40_000),
                        "large record set not zero-copy"
                    );
                }
            }
        }
    }
}
