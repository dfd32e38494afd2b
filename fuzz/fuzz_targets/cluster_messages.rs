//! Arbitrary bytes as the cluster's own messages: a metadata log entry (a FlatBuffers record
//! batch), a controller request and answer, a broker request and answer. Each decoder must return a value or
//! an error, never panic; what decodes must encode and decode back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_cluster_core::controller_rpc::{
    decode_answer, decode_request, encode_answer, encode_request,
};
use strand_cluster_core::broker_rpc;
use strand_cluster_core::records_codec::{decode_batch_with_proposer, encode_batch_for};

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = decode_batch_with_proposer(data) {
        let again = encode_batch_for(&batch.records, batch.proposer);
        assert_eq!(decode_batch_with_proposer(&again).as_ref(), Ok(&batch));
    }
    if let Ok((id, req)) = decode_request(data) {
        let again = encode_request(id, &req);
        assert_eq!(decode_request(&again), Ok((id, req)));
    }
    if let Ok(answer) = decode_answer(data) {
        let again = encode_answer(&answer);
        assert_eq!(decode_answer(&again).as_ref(), Ok(&answer));
    }
    if let Ok((id, req)) = broker_rpc::decode_request(data) {
        let again = broker_rpc::encode_request(id, &req);
        assert_eq!(broker_rpc::decode_request(&again), Ok((id, req)));
    }
    if let Ok(answer) = broker_rpc::decode_answer(bytes::Bytes::copy_from_slice(data)) {
        let again = broker_rpc::joined(&broker_rpc::encode_answer(&answer));
        assert_eq!(broker_rpc::decode_answer(again).as_ref(), Ok(&answer));
    }
});
