//! Feeds arbitrary bytes through what a connection does with them: frame splitting, header
//! peek and request decoding at every version.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strand_wire::api::{decode_request, peek_header};
use strand_wire::frame::FrameReader;

fuzz_target!(|data: &[u8]| {
    let mut reader = FrameReader::new(1 << 20);
    reader.buffer().extend_from_slice(data);
    while let Ok(Some(frame)) = reader.next_frame() {
        let _ = peek_header(&frame);
        let _ = decode_request(frame);
    }
    // The body alone, as a frame.
    let _ = decode_request(Bytes::copy_from_slice(data));
});
