//! Transactions as one partition sees them (sans-IO): which producers have a transaction open
//! here and where it started, the aborted transactions (for read_committed fetches), and the
//! last stable offset (LSO).
//!
//! Driven by the batches appended, in offset order: a transactional data batch opens (or
//! continues) its producer's transaction; a control batch (marker) ends it, and an abort
//! marker records `(producer, first offset, marker offset)` in the aborted list. The LSO is the
//! first offset of the oldest open transaction, or the high watermark when none is open:
//! read_committed consumers read below it only.
//!
//! Persisted per closed segment as `{base}.txnindex` (see [`encode_index`]): the aborted
//! transactions whose marker is in that segment and the transactions still open at its end,
//! so opening a partition only scans the active segment.

use std::collections::BTreeMap;

use strand_wire::batch::BatchHeader;

use super::types::Offset;

/// An aborted transaction: its producer, first offset and the offset of its abort marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: Offset,
    pub last_offset: Offset,
}

/// Transaction state of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionTxns {
    /// Producer id -> first offset of its open transaction here.
    ongoing: BTreeMap<i64, Offset>,
    /// Aborted transactions in marker order (ascending `last_offset`).
    aborted: Vec<AbortedTxn>,
}

/// What a batch did to the partition's transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnEvent {
    None,
    /// A producer's transaction ended here: committed or aborted.
    Ended {
        producer_id: i64,
        commit: bool,
    },
}

impl PartitionTxns {
    /// Applies one appended batch (`header` with its assigned base offset); `marker` is
    /// `Some(commit)` for a control batch.
    pub fn apply(&mut self, header: &BatchHeader, base: Offset, marker: Option<bool>) -> TxnEvent {
        if !header.is_transactional() || header.producer_id < 0 {
            return TxnEvent::None;
        }
        let pid = header.producer_id;
        if !header.is_control() {
            self.ongoing.entry(pid).or_insert(base);
            return TxnEvent::None;
        }
        let Some(commit) = marker else {
            return TxnEvent::None;
        };
        if let Some(first) = self.ongoing.remove(&pid) {
            if !commit {
                let last = Offset(header.last_offset().max(base.0));
                debug_assert!(self.aborted.last().is_none_or(|a| a.last_offset < last));
                self.aborted.push(AbortedTxn {
                    producer_id: pid,
                    first_offset: first,
                    last_offset: last,
                });
            }
        }
        TxnEvent::Ended {
            producer_id: pid,
            commit,
        }
    }

    /// First offset of the oldest open transaction, if any.
    pub fn first_unstable(&self) -> Option<Offset> {
        self.ongoing.values().min().copied()
    }

    /// The last stable offset given the high watermark: read_committed reads stop here.
    pub fn last_stable(&self, high_watermark: Offset) -> Offset {
        let lso = self
            .first_unstable()
            .map_or(high_watermark, |f| f.min(high_watermark));
        assert!(lso <= high_watermark, "LSO {lso} past the high watermark");
        lso
    }

    /// `(producer id, first offset)` of aborted transactions that may have records in
    /// `[from, upto)`, as a Fetch response lists them.
    pub fn aborted_between(&self, from: Offset, upto: Offset) -> Vec<(i64, i64)> {
        // Sorted by marker offset: skip those that ended before `from`.
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted[start..]
            .iter()
            .filter(|a| a.first_offset < upto)
            .map(|a| (a.producer_id, a.first_offset.0))
            .collect()
    }

    /// Open transactions: producer id -> first offset.
    pub fn ongoing(&self) -> &BTreeMap<i64, Offset> {
        &self.ongoing
    }

    pub fn aborted(&self) -> &[AbortedTxn] {
        &self.aborted
    }

    /// Forgets aborted transactions that ended before `log_start` (their segments are gone).
    pub fn forget_before(&mut self, log_start: Offset) {
        let n = self.aborted.partition_point(|a| a.last_offset < log_start);
        self.aborted.drain(..n);
    }

    /// Drops everything at or after `end` (recovery truncated the log there) — open
    /// transactions that started there are gone with their records.
    pub fn truncate(&mut self, end: Offset) {
        self.ongoing.retain(|_, first| *first < end);
        self.aborted.retain(|a| a.last_offset < end);
    }

    /// The `.txnindex` of the segment `[base, next)`: aborted transactions whose marker is in
    /// it and the transactions open at its end.
    pub fn index_for_segment(&self, base: Offset, next: Offset) -> Vec<u8> {
        let aborted: Vec<AbortedTxn> = self
            .aborted
            .iter()
            .filter(|a| a.last_offset >= base && a.last_offset < next)
            .copied()
            .collect();
        encode_index(&aborted, &self.ongoing)
    }

    /// Adopts a segment's `.txnindex` (segments in offset order): its aborted transactions are
    /// added, its open transactions replace the current ones.
    pub fn load_segment_index(&mut self, index: SegmentTxnIndex) {
        for a in index.aborted {
            if self
                .aborted
                .last()
                .is_none_or(|l| l.last_offset < a.last_offset)
            {
                self.aborted.push(a);
            }
        }
        self.ongoing = index.ongoing;
    }
}

/// What compaction may do with a batch, given the transactions as they stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchFate {
    /// Not transactional, or from a committed transaction: its records are compacted by key.
    Plain,
    /// A marker, or data of a transaction still open: kept whole, keys not indexed.
    Whole,
    /// Data of an aborted transaction: no reader will ever see it; removed.
    Aborted,
}

impl PartitionTxns {
    /// The fate of the batch `header` (as stored, base offset assigned).
    pub fn fate(&self, header: &BatchHeader) -> BatchFate {
        if header.is_control() {
            return BatchFate::Whole;
        }
        if !header.is_transactional() || header.producer_id < 0 {
            return BatchFate::Plain;
        }
        let (pid, base) = (header.producer_id, Offset(header.base_offset));
        if self.ongoing.get(&pid).is_some_and(|&first| first <= base) {
            return BatchFate::Whole;
        }
        // Aborted entries are sorted by marker offset; the first one ending at or after this
        // batch, for this producer, decides.
        let from = self.aborted.partition_point(|a| a.last_offset < base);
        let aborted = self.aborted[from..]
            .iter()
            .find(|a| a.producer_id == pid)
            .is_some_and(|a| a.first_offset <= base);
        if aborted {
            BatchFate::Aborted
        } else {
            BatchFate::Plain
        }
    }
}

/// A decoded `.txnindex`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentTxnIndex {
    pub aborted: Vec<AbortedTxn>,
    pub ongoing: BTreeMap<i64, Offset>,
}

const INDEX_MAGIC: &[u8; 8] = b"STXNIDX1";

/// `magic[8] | aborted count u32 | (pid i64, first i64, last i64)* | open count u32 |
/// (pid i64, first i64)* | crc32c u32` (big-endian; the CRC covers everything before it).
pub fn encode_index(aborted: &[AbortedTxn], ongoing: &BTreeMap<i64, Offset>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + aborted.len() * 24 + ongoing.len() * 16);
    out.extend_from_slice(INDEX_MAGIC);
    out.extend_from_slice(&(aborted.len() as u32).to_be_bytes());
    for a in aborted {
        out.extend_from_slice(&a.producer_id.to_be_bytes());
        out.extend_from_slice(&a.first_offset.0.to_be_bytes());
        out.extend_from_slice(&a.last_offset.0.to_be_bytes());
    }
    out.extend_from_slice(&(ongoing.len() as u32).to_be_bytes());
    for (pid, first) in ongoing {
        out.extend_from_slice(&pid.to_be_bytes());
        out.extend_from_slice(&first.0.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// Decodes a `.txnindex`; `None` if it is damaged (the segment is then scanned instead).
pub fn decode_index(buf: &[u8]) -> Option<SegmentTxnIndex> {
    let body_len = buf.len().checked_sub(4)?;
    let (body, crc) = buf.split_at(body_len);
    if crc32c::crc32c(body).to_be_bytes() != crc || !body.starts_with(INDEX_MAGIC) {
        return None;
    }
    let mut r = Reader(&body[INDEX_MAGIC.len()..]);
    let mut index = SegmentTxnIndex::default();
    for _ in 0..r.u32()? {
        index.aborted.push(AbortedTxn {
            producer_id: r.i64()?,
            first_offset: Offset(r.i64()?),
            last_offset: Offset(r.i64()?),
        });
    }
    for _ in 0..r.u32()? {
        let pid = r.i64()?;
        index.ongoing.insert(pid, Offset(r.i64()?));
    }
    r.0.is_empty().then_some(index)
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }
    fn u32(&mut self) -> Option<u32> {
        self.take::<4>().map(u32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take::<8>().map(i64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::builder::{control_batch, BatchBuilder};

    fn header(b: &[u8]) -> BatchHeader {
        BatchHeader::parse(b).expect("header")
    }

    fn txn_batch(pid: i64, records: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(0).producer(pid, 0, 0).transactional();
        for _ in 0..records {
            b.push(None, b"v", 0);
        }
        b.finish()
    }

    #[test]
    fn lso_stops_at_the_oldest_open_transaction_and_aborts_are_listed() {
        let mut t = PartitionTxns::default();
        let plain = BatchBuilder::new(0).finish();
        assert_eq!(t.apply(&header(&plain), Offset(0), None), TxnEvent::None);
        t.apply(&header(&txn_batch(7, 2)), Offset(1), None);
        t.apply(&header(&txn_batch(8, 1)), Offset(3), None);
        t.apply(&header(&txn_batch(7, 1)), Offset(4), None);
        assert_eq!(t.last_stable(Offset(5)), Offset(1));
        let abort = control_batch(7, 0, false, 0, 0);
        assert_eq!(
            t.apply(&header(&abort), Offset(5), Some(false)),
            TxnEvent::Ended {
                producer_id: 7,
                commit: false
            }
        );
        assert_eq!(t.last_stable(Offset(6)), Offset(3), "producer 8 still open");
        let commit = control_batch(8, 0, true, 0, 0);
        t.apply(&header(&commit), Offset(6), Some(true));
        assert_eq!(t.last_stable(Offset(7)), Offset(7));
        assert_eq!(t.aborted_between(Offset(0), Offset(7)), vec![(7, 1)]);
        assert_eq!(
            t.aborted_between(Offset(6), Offset(7)),
            vec![],
            "ended before 6"
        );
        assert_eq!(
            t.aborted_between(Offset(0), Offset(1)),
            vec![],
            "starts at 1"
        );
        // A marker for a producer with nothing open here records nothing.
        t.apply(
            &header(&control_batch(9, 0, false, 0, 0)),
            Offset(7),
            Some(false),
        );
        assert_eq!(t.aborted().len(), 1);
        t.forget_before(Offset(6));
        assert!(t.aborted().is_empty());
    }

    #[test]
    fn segment_index_round_trips_and_rejects_damage() {
        let mut t = PartitionTxns::default();
        t.apply(&header(&txn_batch(1, 1)), Offset(10), None);
        t.apply(
            &header(&control_batch(1, 0, false, 0, 0)),
            Offset(11),
            Some(false),
        );
        t.apply(&header(&txn_batch(2, 1)), Offset(12), None);
        let bytes = t.index_for_segment(Offset(0), Offset(13));
        let decoded = decode_index(&bytes).expect("valid");
        assert_eq!(decoded.aborted, t.aborted().to_vec());
        assert_eq!(&decoded.ongoing, t.ongoing());
        let mut reloaded = PartitionTxns::default();
        reloaded.load_segment_index(decoded);
        assert_eq!(reloaded, t);
        let mut bad = bytes.clone();
        bad[10] ^= 1;
        assert_eq!(decode_index(&bad), None);
        assert_eq!(decode_index(&bytes[..bytes.len() - 1]), None);
        assert!(t.index_for_segment(Offset(12), Offset(13)).len() < bytes.len());
    }

    #[test]
    fn fate_tells_committed_aborted_and_open_data_apart() {
        let mut t = PartitionTxns::default();
        let stored = |b: Vec<u8>, base: i64| {
            let mut b = b;
            strand_wire::batch::set_base_offset(&mut b, base);
            b
        };
        let b0 = stored(txn_batch(1, 1), 0); // producer 1: committed
        let b1 = stored(txn_batch(2, 1), 1); // producer 2: aborted
        let b2 = stored(txn_batch(1, 1), 4); // producer 1 again: still open
        t.apply(&header(&b0), Offset(0), None);
        t.apply(&header(&b1), Offset(1), None);
        t.apply(
            &header(&control_batch(1, 0, true, 0, 0)),
            Offset(2),
            Some(true),
        );
        t.apply(
            &header(&control_batch(2, 0, false, 0, 0)),
            Offset(3),
            Some(false),
        );
        t.apply(&header(&b2), Offset(4), None);
        assert_eq!(t.fate(&header(&b0)), BatchFate::Plain);
        assert_eq!(t.fate(&header(&b1)), BatchFate::Aborted);
        assert_eq!(t.fate(&header(&b2)), BatchFate::Whole);
        let marker = stored(control_batch(1, 0, true, 0, 0), 2);
        assert_eq!(t.fate(&header(&marker)), BatchFate::Whole);
        assert_eq!(
            t.fate(&header(&BatchBuilder::new(0).finish())),
            BatchFate::Plain
        );
    }

    #[test]
    fn truncation_drops_what_was_cut() {
        let mut t = PartitionTxns::default();
        t.apply(&header(&txn_batch(1, 1)), Offset(0), None);
        t.apply(&header(&txn_batch(2, 1)), Offset(5), None);
        t.truncate(Offset(5));
        assert_eq!(t.ongoing().len(), 1);
        assert_eq!(t.last_stable(Offset(5)), Offset(0));
    }
}
