//! Messages on a transport stream: a 4-byte big-endian length, then that many bytes. The
//! first frame of every connection is the dialler's hello (its node id); the rest are the
//! caller's messages, opaque here.

use bytes::{BufMut, Bytes, BytesMut};

use crate::limits::CLUSTER_MESSAGE_MAX_BYTES;
use crate::records::NodeId;

/// Magic of a hello frame: "STRC" then a format version.
const HELLO_MAGIC: [u8; 4] = *b"STRC";
const HELLO_VERSION: u8 = 1;
const HELLO_BYTES: usize = 4 + 1 + 4;
/// A hello frame with its length prefix.
pub const HELLO_FRAME_BYTES: usize = 4 + HELLO_BYTES;

/// Why a stream's bytes are refused (the connection is then closed).
#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    /// A length below zero or above `CLUSTER_MESSAGE_MAX_BYTES`.
    BadLength(i64),
    /// A first frame that is not a hello of a known version.
    BadHello,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::BadLength(n) => write!(
                f,
                "frame length {n} outside 0..={CLUSTER_MESSAGE_MAX_BYTES}"
            ),
            FrameError::BadHello => write!(f, "the first frame is not a Strand cluster hello"),
        }
    }
}

/// The length prefix of a message of `len` bytes.
pub fn header(len: usize) -> [u8; 4] {
    debug_assert!(len <= CLUSTER_MESSAGE_MAX_BYTES);
    (len as u32).to_be_bytes()
}

/// The hello frame (prefix included) a dialler sends first.
pub fn hello(node: NodeId) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + HELLO_BYTES);
    b.put_slice(&header(HELLO_BYTES));
    b.put_slice(&HELLO_MAGIC);
    b.put_u8(HELLO_VERSION);
    b.put_i32(node);
    b.freeze()
}

/// Reads a hello's body.
pub fn parse_hello(body: &[u8]) -> Result<NodeId, FrameError> {
    if body.len() != HELLO_BYTES || body[..4] != HELLO_MAGIC || body[4] != HELLO_VERSION {
        return Err(FrameError::BadHello);
    }
    Ok(i32::from_be_bytes([body[5], body[6], body[7], body[8]]))
}

/// Reassembles frames from a stream's chunks: Kafka's own framing (`strand_wire::frame`), with
/// the cluster's size limit. Holds at most one partial frame.
pub struct FrameDecoder {
    reader: strand_wire::frame::FrameReader,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder {
            reader: strand_wire::frame::FrameReader::new(CLUSTER_MESSAGE_MAX_BYTES),
        }
    }
}

impl FrameDecoder {
    /// Bytes buffered and not yet handed out.
    pub fn buffered(&mut self) -> usize {
        self.reader.buffer().len()
    }

    /// Adds bytes read from the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.reader.buffer().extend_from_slice(chunk);
    }

    /// The hello, once it is buffered whole. A first frame announcing any other length is
    /// refused at once (before a garbage length makes us wait for, or reserve, megabytes).
    pub fn next_hello(&mut self) -> Result<Option<NodeId>, FrameError> {
        let buf = self.reader.buffer();
        if buf.len() >= 4 && buf[..4] != header(HELLO_BYTES) {
            return Err(FrameError::BadHello);
        }
        match self.next_frame()? {
            Some(body) => parse_hello(&body).map(Some),
            None => Ok(None),
        }
    }

    /// The next complete frame's body, if one is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        self.reader.next_frame().map_err(|e| match e {
            strand_wire::frame::FrameError::BadSize { size, .. } => FrameError::BadLength(size),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere_come_back_whole() {
        let mut wire = Vec::new();
        wire.extend_from_slice(&hello(7));
        for m in [&b"abc"[..], b"", b"a longer message"] {
            wire.extend_from_slice(&header(m.len()));
            wire.extend_from_slice(m);
        }
        for cut in 1..wire.len() {
            let mut d = FrameDecoder::default();
            let mut got = Vec::new();
            for part in [&wire[..cut], &wire[cut..]] {
                d.push(part);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got.len(), 4, "cut at {cut}");
            assert_eq!(parse_hello(&got[0]), Ok(7));
            assert_eq!(&got[3][..], b"a longer message");
        }
    }

    #[test]
    fn a_garbage_length_is_refused_before_anything_is_buffered() {
        let mut d = FrameDecoder::default();
        d.push(&[0xff, 0xff, 0xff, 0xff, 1, 2]);
        assert!(matches!(d.next_frame(), Err(FrameError::BadLength(_))));
        let mut d = FrameDecoder::default();
        d.push(&header(16 << 20));
        assert_eq!(
            d.next_hello(),
            Err(FrameError::BadHello),
            "no 16 MiB wait for a hello"
        );
        let mut d = FrameDecoder::default();
        d.push(&hello(5)[..6]);
        assert_eq!(d.next_hello(), Ok(None));
        d.push(&hello(5)[6..]);
        assert_eq!(d.next_hello(), Ok(Some(5)));
        assert_eq!(parse_hello(b"HTTP/1.1 200"), Err(FrameError::BadHello));
    }
}
