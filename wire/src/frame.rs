//! Kafka's framing: every request and response is a big-endian `i32` size followed by that
//! many bytes. [`FrameReader`] splits a byte stream into frames without copying them.

use bytes::{Buf, Bytes, BytesMut};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A negative size, or one over the limit: the peer is not speaking Kafka (or is hostile).
    BadSize { size: i64, max: usize },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::BadSize { size, max } => {
                write!(
                    f,
                    "frame size {size} outside 0..={max} (socket.request.max.bytes)"
                )
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Accumulates bytes read from a socket and yields whole frames (without the size prefix).
#[derive(Debug)]
pub struct FrameReader {
    buf: BytesMut,
    max_bytes: usize,
}

impl FrameReader {
    /// Allocates nothing: the caller sizes the buffer for each read (see [`FrameReader::buffer`]).
    pub fn new(max_bytes: usize) -> FrameReader {
        FrameReader {
            buf: BytesMut::new(),
            max_bytes,
        }
    }

    /// Space to read into; call [`FrameReader::filled`] with how much was read.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// The declared size of a frame whose size prefix has arrived but whose body has not (all
    /// of it), so the caller can budget for it before reading the rest.
    pub fn pending_frame_bytes(&self) -> Option<usize> {
        if self.buf.len() < 4 {
            return None;
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let size = usize::try_from(size).ok()?;
        (self.buf.len() < 4 + size).then_some(size)
    }

    /// Bytes of the pending frame (size prefix included) not buffered yet; 0 when none.
    pub fn pending_frame_missing(&self) -> usize {
        self.pending_frame_bytes()
            .map_or(0, |size| 4 + size - self.buf.len())
    }

    /// The next whole frame, if one is buffered. Frames are split off the buffer (no copy).
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if size < 0 || size as usize > self.max_bytes {
            return Err(FrameError::BadSize {
                size: i64::from(size),
                max: self.max_bytes,
            });
        }
        let size = size as usize;
        if self.buf.len() < 4 + size {
            self.buf.reserve(4 + size - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(size).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_frames_and_waits_for_more() {
        let mut r = FrameReader::new(100);
        r.buffer().extend_from_slice(&[0, 0, 0, 3, b'a', b'b']);
        assert_eq!(r.next_frame(), Ok(None));
        assert_eq!(r.pending_frame_bytes(), Some(3));
        assert_eq!(r.pending_frame_missing(), 1);
        r.buffer().extend_from_slice(&[b'c', 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.next_frame(), Ok(Some(Bytes::from_static(b"abc"))));
        assert_eq!(r.next_frame(), Ok(Some(Bytes::new())));
        assert_eq!(r.next_frame(), Ok(None));
    }

    #[test]
    fn refuses_oversized_and_negative_frames() {
        let mut r = FrameReader::new(100);
        r.buffer().extend_from_slice(&1000i32.to_be_bytes());
        assert!(r.next_frame().is_err());
        let mut r = FrameReader::new(100);
        r.buffer().extend_from_slice(&(-5i32).to_be_bytes());
        assert!(r.next_frame().is_err());
    }
}
