//! From measurements to io-properties (sans-IO, unit-tested).
//!
//! The broker wants the *smallest* sizes that still reach the disk's bandwidth: a smaller
//! write chunk means a partial-buffer flush and a read of not-yet-written data cost less, and
//! a shallower write-behind queue means less memory and less queueing in front of a
//! fdatasync. "Reaching" is 90% of the best measured, which stays clear of run-to-run noise:
//! - `write_chunk_bytes`: the smallest block size that reaches 90% of the peak (over all
//!   combinations) with at most [`CHUNK_DEPTH_MAX`] writes in flight;
//! - `write_behind_depth`: the smallest queue depth that reaches 90% of the best at that
//!   block size (any depth).
//!
//! Why bound the depth when choosing the chunk: a durable append waits for every chunk of
//! its batch, and a mid-sized batch is only a few chunks. A block size that needs a deep
//! queue to reach the bandwidth makes those appends slower. On the development VM 64 KiB
//! writes reached 90% of the peak only at QD32; with 64 KiB x 32 the storage bench's durable
//! 258 KiB appends had a ~20% higher p50 and a 1.5-1.9x p99 compared with the defaults, while
//! 256 KiB x 4 (90% at QD4) stayed within the run-to-run noise of them.
//!
//! Both then go through the same clamps the broker applies ([`IoProperties::sizes`]).

use crate::props::{IoProperties, SeqPoint};

/// Share of the best bandwidth that counts as "reaching" it.
pub const GOOD_ENOUGH: f64 = 0.90;
/// Most writes in flight a block size may use to qualify as the chunk (the broker's default
/// write-behind depth).
pub const CHUNK_DEPTH_MAX: u32 = 4;

/// The sizes chosen, and the points that decided them (for the explanation line).
#[derive(Clone, Debug, PartialEq)]
pub struct Derived {
    pub write_chunk_bytes: u64,
    pub write_behind_depth: u32,
    pub peak: SeqPoint,
    /// Best bandwidth at the chosen block size.
    pub best_at_chunk_mb_per_s: f64,
}

/// Derives the sizes; `None` without measurements.
pub fn derive(points: &[SeqPoint]) -> Option<Derived> {
    let peak = points
        .iter()
        .max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s))?
        .clone();
    let best_at = |block: u64, depth_max: u32| {
        points
            .iter()
            .filter(|p| p.block_bytes == block && p.queue_depth <= depth_max)
            .map(|p| p.mb_per_s)
            .fold(0.0, f64::max)
    };
    let mut blocks: Vec<u64> = points.iter().map(|p| p.block_bytes).collect();
    blocks.sort_unstable();
    blocks.dedup();
    // The smallest block within reach at a shallow queue; failing that (a disk that needs
    // depth everywhere), the block that does best at a shallow queue.
    let shallow = |b: &u64| best_at(*b, CHUNK_DEPTH_MAX);
    let chunk = blocks
        .iter()
        .copied()
        .find(|b| shallow(b) >= GOOD_ENOUGH * peak.mb_per_s)
        .or_else(|| {
            blocks
                .iter()
                .copied()
                .max_by(|a, b| shallow(a).total_cmp(&shallow(b)))
        })
        .unwrap_or(peak.block_bytes);
    let best_at_chunk = best_at(chunk, u32::MAX);
    let mut at_chunk: Vec<&SeqPoint> = points.iter().filter(|p| p.block_bytes == chunk).collect();
    at_chunk.sort_by_key(|p| p.queue_depth);
    let depth = at_chunk
        .iter()
        .find(|p| p.mb_per_s >= GOOD_ENOUGH * best_at_chunk)
        .map_or(peak.queue_depth, |p| p.queue_depth);
    let sizes = IoProperties::new(chunk, depth).sizes();
    Some(Derived {
        write_chunk_bytes: sizes.write_chunk_bytes,
        write_behind_depth: sizes.write_behind_depth,
        peak,
        best_at_chunk_mb_per_s: best_at_chunk,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(rows: &[(u64, [f64; 4])]) -> Vec<SeqPoint> {
        rows.iter()
            .flat_map(|(block, rates)| {
                [1u32, 4, 8, 32]
                    .iter()
                    .zip(rates)
                    .map(move |(&qd, &r)| SeqPoint {
                        block_bytes: *block,
                        queue_depth: qd,
                        mb_per_s: r,
                    })
            })
            .collect()
    }

    #[test]
    fn smallest_block_and_depth_within_ninety_percent() {
        // An NVMe-like disk: small blocks need depth, 1 MiB x QD4 is already near the peak.
        let points = grid(&[
            (64 << 10, [300.0, 900.0, 1300.0, 1500.0]),
            (256 << 10, [700.0, 1500.0, 1700.0, 1750.0]),
            (1 << 20, [1100.0, 1800.0, 1850.0, 1860.0]),
            (4 << 20, [1500.0, 1900.0, 1880.0, 1870.0]),
        ]);
        let d = derive(&points).expect("derived");
        assert_eq!(d.peak.block_bytes, 4 << 20);
        // 0.9 * 1900 = 1710: 256 KiB gets there only at QD32; 1 MiB at QD4 (1800).
        assert_eq!(d.write_chunk_bytes, 1 << 20);
        // At 1 MiB: 0.9 * 1860 = 1674; QD1 1100 falls short, QD4 1800 reaches it.
        assert_eq!(d.write_behind_depth, 4);
    }

    #[test]
    fn a_small_block_that_needs_a_deep_queue_is_not_the_chunk() {
        // The development VM's table: 64 KiB reaches 90% of the peak only at QD32.
        let points = grid(&[
            (64 << 10, [643.0, 1217.0, 1554.0, 2398.0]),
            (256 << 10, [1425.0, 2277.0, 2392.0, 2061.0]),
            (1 << 20, [1910.0, 2073.0, 1870.0, 1797.0]),
            (4 << 20, [2140.0, 1947.0, 1818.0, 1794.0]),
        ]);
        let d = derive(&points).expect("derived");
        assert_eq!((d.write_chunk_bytes, d.write_behind_depth), (256 << 10, 4));
    }

    #[test]
    fn a_disk_that_needs_big_writes_gets_big_chunks() {
        let points = grid(&[
            (64 << 10, [50.0, 60.0, 60.0, 60.0]),
            (256 << 10, [100.0, 120.0, 120.0, 120.0]),
            (1 << 20, [150.0, 160.0, 160.0, 160.0]),
            (4 << 20, [190.0, 200.0, 200.0, 200.0]),
        ]);
        let d = derive(&points).expect("derived");
        assert_eq!(d.write_chunk_bytes, 4 << 20);
        assert_eq!(d.write_behind_depth, 1, "190 >= 0.9 * 200");
    }

    #[test]
    fn results_go_through_the_broker_clamps() {
        // Nothing is within reach at a shallow queue: the best shallow block (4 MiB) is taken,
        // its depth is QD32, and the window clamp (32 MiB) lowers that to 8.
        let points = grid(&[
            (64 << 10, [10.0, 10.0, 10.0, 10.0]),
            (256 << 10, [10.0, 10.0, 10.0, 10.0]),
            (1 << 20, [10.0, 10.0, 10.0, 10.0]),
            (4 << 20, [10.0, 20.0, 40.0, 100.0]),
        ]);
        let d = derive(&points).expect("derived");
        assert_eq!((d.write_chunk_bytes, d.write_behind_depth), (4 << 20, 8));
        assert!(derive(&[]).is_none());
    }
}
