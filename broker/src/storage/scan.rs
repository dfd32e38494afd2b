//! Scanning a run of stored batches (sans-IO): what recovery and reads use to find batch
//! boundaries, and where a torn or corrupt tail begins.

use strand_wire::batch::{self, peek_total_len, BatchHeader};

use super::types::{BatchMeta, Offset};

/// Why a scan stopped before the end of the bytes it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Only zero bytes follow (a preallocated, never-written tail): a clean end.
    Zeros,
    /// A batch runs past the end of the bytes: a torn write (or simply the end of a read).
    Torn { position: u64 },
    /// A batch fails validation (CRC, magic, length) or breaks offset order: corruption.
    Corrupt { position: u64, reason: String },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Scan {
    /// Valid batches with their positions (relative to the scanned bytes).
    pub batches: Vec<(BatchMeta, u64)>,
    /// Bytes covered by the valid batches.
    pub valid_bytes: u64,
    /// `None` when the bytes ended exactly at a batch boundary.
    pub stop: Option<Stop>,
}

/// Walks batches from the front of `bytes`, checking each fully (magic, length, CRC-32C) and
/// that base offsets are `>= min_base` and strictly increasing.
pub fn scan_batches(bytes: &[u8], min_base: Offset) -> Scan {
    let mut batches = Vec::new();
    let mut pos = 0usize;
    let mut expected = min_base;
    let stop = loop {
        let rest = &bytes[pos..];
        if rest.is_empty() {
            break None;
        }
        let Some(len) = peek_total_len(rest) else {
            break Some(if rest.iter().all(|&b| b == 0) {
                Stop::Zeros
            } else if rest.len() < batch::LOG_OVERHEAD {
                Stop::Torn {
                    position: pos as u64,
                }
            } else {
                Stop::Corrupt {
                    position: pos as u64,
                    reason: "bad batch length".into(),
                }
            });
        };
        if len > rest.len() {
            break Some(Stop::Torn {
                position: pos as u64,
            });
        }
        let header = match batch::validate(&rest[..len]) {
            Ok(h) => h,
            Err(e) => {
                break Some(Stop::Corrupt {
                    position: pos as u64,
                    reason: e.to_string(),
                })
            }
        };
        if header.base_offset < expected.0 {
            break Some(Stop::Corrupt {
                position: pos as u64,
                reason: format!(
                    "base offset {} below expected {}",
                    header.base_offset, expected
                ),
            });
        }
        let meta = BatchMeta::from_header(&header);
        expected = meta.last_offset.next();
        batches.push((meta, pos as u64));
        pos += len;
    };
    Scan {
        batches,
        valid_bytes: pos as u64,
        stop,
    }
}

/// Splits a buffer that starts at a batch boundary into whole batches, without CRC checks
/// (the bytes were checked on append or at recovery). Returns `(header, start, end)` triples
/// and stops at the first incomplete batch.
pub fn split_batches(bytes: &[u8]) -> Vec<(BatchHeader, usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(len) = peek_total_len(&bytes[pos..]) {
        if pos + len > bytes.len() {
            break;
        }
        match BatchHeader::parse(&bytes[pos..pos + len]) {
            Ok(h) => out.push((h, pos, pos + len)),
            Err(_) => break,
        }
        pos += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::batch::set_base_offset;
    use strand_wire::builder::filler_batch;

    fn run(n: usize) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        let mut next = 0i64;
        for i in 0..n {
            let mut b = filler_batch(3, 100, 1000 + i as i64, i as u8);
            set_base_offset(&mut b, next);
            next += 3;
            starts.push(bytes.len());
            bytes.extend_from_slice(&b);
        }
        (bytes, starts)
    }

    #[test]
    fn whole_run_scans_clean() {
        let (bytes, _) = run(5);
        let s = scan_batches(&bytes, Offset(0));
        assert_eq!(s.batches.len(), 5);
        assert_eq!(s.valid_bytes, bytes.len() as u64);
        assert_eq!(s.stop, None);
        assert_eq!(split_batches(&bytes).len(), 5);
    }

    #[test]
    fn zero_tail_is_a_clean_end() {
        let (mut bytes, _) = run(2);
        let len = bytes.len();
        bytes.extend_from_slice(&[0u8; 4096]);
        let s = scan_batches(&bytes, Offset(0));
        assert_eq!(s.valid_bytes, len as u64);
        assert_eq!(s.stop, Some(Stop::Zeros));
    }

    #[test]
    fn truncated_tail_stops_at_last_whole_batch() {
        let (bytes, starts) = run(4);
        let cut = starts[3] + 20;
        let s = scan_batches(&bytes[..cut], Offset(0));
        assert_eq!(s.batches.len(), 3);
        assert_eq!(s.valid_bytes, starts[3] as u64);
        assert_eq!(
            s.stop,
            Some(Stop::Torn {
                position: starts[3] as u64
            })
        );
    }

    #[test]
    fn bit_flip_stops_at_the_damaged_batch() {
        let (mut bytes, starts) = run(4);
        bytes[starts[2] + 100] ^= 0x10;
        let s = scan_batches(&bytes, Offset(0));
        assert_eq!(s.batches.len(), 2);
        assert!(
            matches!(s.stop, Some(Stop::Corrupt { position, .. }) if position == starts[2] as u64)
        );
    }

    #[test]
    fn offsets_going_backwards_are_corruption() {
        let (mut bytes, starts) = run(3);
        set_base_offset(&mut bytes[starts[2]..], 1);
        let s = scan_batches(&bytes, Offset(0));
        assert_eq!(s.batches.len(), 2);
        assert!(matches!(s.stop, Some(Stop::Corrupt { .. })));
    }
}
