//! ListOffsets by time on a partition: the first record at or after a timestamp, and the
//! first record with the largest timestamp (MAX_TIMESTAMP, KIP-734).

use std::io;

use super::{batch, Offset, PartitionLog, ReadError};
use crate::limits;

impl PartitionLog {
    /// ListOffsets MAX_TIMESTAMP (KIP-734): the offset and timestamp of the first record
    /// with the largest timestamp in the log, or `None` for an empty log.
    pub async fn max_timestamp_offset(&self) -> Result<Option<(Offset, i64)>, ReadError> {
        let max = self.inner.state.borrow().log.max_timestamp();
        match max {
            Some(ts) => self.offset_for_time(ts).await,
            None => Ok(None),
        }
    }

    /// The offset and timestamp of the first record with a timestamp `>= timestamp_ms`
    /// (ListOffsets by time, as Kafka's `findOffsetByTimestamp`), or `None` if there is none.
    /// Batches are skipped by their `maxTimestamp`; inside the first that qualifies the
    /// records are read (decompressed if need be). LogAppendTime batches give every record
    /// the batch's timestamp.
    pub async fn offset_for_time(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(Offset, i64)>, ReadError> {
        let Some(mut cursor) = self.inner.state.borrow().log.locate_time(timestamp_ms) else {
            return Ok(None);
        };
        loop {
            let out = self.read(cursor, limits::READ_BYTES_MAX as usize).await?;
            if out.batches.is_empty() {
                return Ok(None);
            }
            for b in &out.batches {
                let h =
                    batch::BatchHeader::parse(b).map_err(|e| ReadError::Io(io::Error::other(e)))?;
                if h.max_timestamp_ms >= timestamp_ms {
                    if let Some(found) = first_record_at_or_after(b, &h, timestamp_ms, cursor) {
                        return Ok(Some(found));
                    }
                }
                cursor = Offset(h.last_offset() + 1);
            }
        }
    }
}

/// In a batch whose `maxTimestamp` reaches `timestamp_ms`: the first record at or after
/// `from` with a timestamp `>= timestamp_ms`. A batch whose records cannot be read (a codec
/// Strand lacks) answers with its first offset and `maxTimestamp`, as before.
fn first_record_at_or_after(
    b: &[u8],
    h: &batch::BatchHeader,
    timestamp_ms: i64,
    from: Offset,
) -> Option<(Offset, i64)> {
    const LOG_APPEND_TIME: u16 = 0x08;
    let batch_level = (Offset(h.base_offset.max(from.0)), h.max_timestamp_ms);
    if h.attributes & LOG_APPEND_TIME != 0 || h.is_control() {
        return Some(batch_level);
    }
    let plain;
    let bytes: &[u8] = if h.attributes & 0x7 != 0 {
        match strand_wire::compression::decompress_batch(b) {
            Ok(p) => {
                plain = p;
                &plain
            }
            Err(_) => return Some(batch_level),
        }
    } else {
        b
    };
    let Ok(records) = strand_wire::records::records(bytes) else {
        return Some(batch_level);
    };
    records
        .iter()
        .map(|r| {
            (
                h.base_offset + r.offset_delta,
                h.base_timestamp_ms + r.timestamp_delta,
            )
        })
        .find(|&(offset, ts)| offset >= from.0 && ts >= timestamp_ms)
        .map(|(offset, ts)| (Offset(offset), ts))
}
