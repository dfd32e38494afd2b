//! Producer ids in a cluster: every node hands out ids only from blocks the active controller
//! reserved for it in the metadata log (`AllocateProducerIds`, KIP-730's model), so no two
//! nodes ever give the same id to two producers. The controller executor keeps a spare block
//! ready (`wants_block` / `add_block`); shards take ids synchronously (`take`), and get
//! `None` — answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry — only before the first
//! block arrived or if a burst used both blocks up before the refill.
//!
//! A mutex, not the hot path: InitProducerId is once per producer (re)start.

use std::sync::Mutex;

#[derive(Default)]
struct Blocks {
    /// The next id of the current block, and its end (exclusive).
    next: i64,
    end: i64,
    spare: Option<(i64, i64)>,
}

#[derive(Default)]
pub struct ProducerIdBlocks {
    blocks: Mutex<Blocks>,
}

impl ProducerIdBlocks {
    /// The next id, if a block has one.
    pub fn take(&self) -> Option<i64> {
        let mut b = self.blocks.lock().ok()?;
        if b.next >= b.end {
            let (first, end) = b.spare.take()?;
            b.next = first;
            b.end = end;
        }
        let id = b.next;
        b.next += 1;
        Some(id)
    }

    /// Whether the controller should be asked for another block (no spare).
    pub fn wants_block(&self) -> bool {
        self.blocks.lock().is_ok_and(|b| b.spare.is_none())
    }

    /// A block `[first, first + size)` from the controller: becomes the spare.
    pub fn add_block(&self, first: i64, size: i32) {
        assert!(first >= 0 && size > 0, "a producer-id block is non-empty");
        if let Ok(mut b) = self.blocks.lock() {
            debug_assert!(b.spare.is_none(), "one spare block at a time");
            b.spare = Some((first, first + i64::from(size)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_only_from_blocks_in_order() {
        let p = ProducerIdBlocks::default();
        assert_eq!(p.take(), None, "no block yet");
        assert!(p.wants_block());
        p.add_block(1000, 2);
        assert!(!p.wants_block());
        assert_eq!(p.take(), Some(1000));
        assert!(p.wants_block(), "the spare became current");
        p.add_block(5000, 2);
        assert_eq!(p.take(), Some(1001));
        assert_eq!(p.take(), Some(5000));
        assert_eq!(p.take(), Some(5001));
        assert_eq!(p.take(), None, "both blocks used up");
    }
}
