//! The transactional side of [`PartitionLog`]: rebuilding [`PartitionTxns`] when the
//! partition opens, the `.txnindex` files, read_committed reads and what DescribeProducers
//! shows.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use bytes::Bytes;
use strand_wire::batch::BatchHeader;

use super::partition::{AppendError, PartitionLog, ReadError, ReadOut};
use super::producer_state::StaleMarker;
use super::segment::txn_index_file_name;
use super::txn::{decode_index, PartitionTxns, SegmentTxnIndex};
use super::types::Offset;
use crate::limits;

impl From<StaleMarker> for AppendError {
    fn from(stale: StaleMarker) -> Self {
        match stale {
            StaleMarker::ProducerEpoch => AppendError::Fenced,
            StaleMarker::CoordinatorEpoch => AppendError::CoordinatorFenced,
        }
    }
}

/// One producer as DescribeProducers reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp_ms: i64,
    /// First offset of its open transaction here, if one is open.
    pub txn_start: Option<Offset>,
}

/// Writes a closed segment's `.txnindex` (tmp, fdatasync, rename; the directory is synced by
/// the roll after it).
pub fn write_txn_index(dir: &Path, base: Offset, bytes: &[u8]) -> io::Result<()> {
    let name = txn_index_file_name(base);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_data()?;
    fs::rename(&tmp, dir.join(name))
}

impl PartitionLog {
    /// Rebuilds the transaction state: closed segments from their `.txnindex` files, then a
    /// scan of the rest (the active segment, and every segment from the first closed one
    /// without a valid index).
    pub(super) async fn rebuild_txns(&self) -> io::Result<()> {
        let (dir, closed, active_base, log_start, end) = {
            let st = self.inner.state.borrow();
            let active = st.log.active().base;
            let closed: Vec<Offset> = st
                .log
                .segments()
                .map(|s| s.base)
                .filter(|&b| b != active)
                .collect();
            (
                self.inner.dir.clone(),
                closed,
                active,
                st.log.log_start(),
                st.log.log_end(),
            )
        };
        let d = dir.clone();
        let bases = closed.clone();
        let indexes: Vec<Option<SegmentTxnIndex>> = glommio::executor()
            .spawn_blocking(move || {
                bases
                    .iter()
                    .map(|&b| {
                        fs::read(d.join(txn_index_file_name(b)))
                            .ok()
                            .and_then(|buf| decode_index(&buf))
                    })
                    .collect()
            })
            .await;
        let mut txns = PartitionTxns::default();
        let mut scan_from = active_base;
        for (base, index) in closed.iter().zip(indexes) {
            match index {
                Some(index) => txns.load_segment_index(index),
                None => {
                    scan_from = *base;
                    break;
                }
            }
        }
        let mut next = scan_from.max(log_start);
        while next < end {
            let out = match self.read(next, limits::READ_BYTES_MAX as usize).await {
                Ok(out) if !out.batches.is_empty() => out,
                Ok(_) | Err(ReadError::OutOfRange { .. }) => break,
                Err(ReadError::Io(e)) => return Err(e),
            };
            for b in &out.batches {
                let h = BatchHeader::parse(b).map_err(io::Error::other)?;
                let marker = h
                    .is_control()
                    .then(|| strand_wire::builder::marker_kind(b))
                    .flatten();
                txns.apply(&h, Offset(h.base_offset), marker);
                if h.is_control() && h.producer_id >= 0 {
                    self.inner.state.borrow_mut().producers.fence(
                        h.producer_id,
                        h.producer_epoch,
                        strand_wire::builder::marker_coordinator_epoch(b).unwrap_or(0),
                    );
                }
                next = Offset(h.last_offset() + 1);
            }
        }
        txns.truncate(end);
        txns.forget_before(log_start);
        self.inner.state.borrow_mut().txns = txns;
        Ok(())
    }

    /// The last stable offset: read_committed consumers read below it.
    pub fn last_stable(&self) -> Offset {
        let st = self.inner.state.borrow();
        st.txns.last_stable(st.log.log_end())
    }

    /// [`Self::read`] for a read_committed consumer: only batches below the LSO, with the
    /// aborted transactions that overlap them (`out.aborted`).
    pub async fn read_committed(
        &self,
        offset: Offset,
        bytes_max: usize,
    ) -> Result<ReadOut, ReadError> {
        let (lso, log_start, log_end) = (self.last_stable(), self.log_start(), self.log_end());
        if offset < log_start || offset > log_end {
            return Err(ReadError::OutOfRange { log_start, log_end });
        }
        if offset >= lso {
            // Nothing stable to return yet.
            return Ok(ReadOut {
                batches: Vec::new(),
                log_start,
                log_end,
                last_stable: lso,
                aborted: Vec::new(),
            });
        }
        let mut out = self.read(offset, bytes_max).await?;
        out.batches.retain(|b| base_offset(b) < lso.0);
        let upto = out
            .batches
            .last()
            .and_then(|b| BatchHeader::parse(b).ok())
            .map_or(offset, |h| Offset(h.last_offset() + 1));
        out.aborted = self.inner.state.borrow().txns.aborted_between(offset, upto);
        out.last_stable = lso;
        Ok(out)
    }

    /// The sequence number the broker itself uses for its next batch as `producer_id`
    /// (transactional offset commits in `__consumer_offsets`).
    pub fn next_sequence(&self, producer_id: i64, epoch: i16) -> i32 {
        self.inner
            .state
            .borrow()
            .producers
            .next_sequence(producer_id, epoch)
    }

    /// Producers with state here (DescribeProducers).
    pub fn producers(&self) -> Vec<ProducerInfo> {
        let st = self.inner.state.borrow();
        let mut out: Vec<ProducerInfo> = st
            .producers
            .describe()
            .into_iter()
            .map(|(id, epoch, seq, ts)| ProducerInfo {
                producer_id: id,
                epoch,
                last_sequence: seq,
                last_timestamp_ms: ts,
                txn_start: st.txns.ongoing().get(&id).copied(),
            })
            .collect();
        for (&id, &first) in st.txns.ongoing() {
            if !out.iter().any(|p| p.producer_id == id) {
                out.push(ProducerInfo {
                    producer_id: id,
                    epoch: -1,
                    last_sequence: -1,
                    last_timestamp_ms: -1,
                    txn_start: Some(first),
                });
            }
        }
        out
    }
}

fn base_offset(b: &Bytes) -> i64 {
    BatchHeader::parse(b).map_or(i64::MAX, |h| h.base_offset)
}
