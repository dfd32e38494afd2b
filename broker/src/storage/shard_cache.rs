//! The shard's budget for every partition's hot-tail cache together.
//!
//! Each partition caches up to `limits::PARTITION_CACHE_BYTES` of its newest batches
//! (`cache`); with 1,000 partitions on a shard that is 32 GB, so the shard also holds all of
//! them under `limits::SHARD_CACHE_BYTES`. Over that, partitions give up their oldest batch
//! in turn (round robin), each only once its bytes are on disk: the cache is the only copy of
//! bytes not yet written, so it can run over its budget by the write-behind window, never lose
//! them. Without the budget, a 1,000-partition produce at 200 MB/s grew the broker by 100 MB a
//! second, and page-faulting that fresh memory in was half of the shard's CPU.
//!
//! One budget per shard thread (a thread-local: partitions never leave their shard).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use crate::limits;

/// A partition whose cache the budget can shrink.
pub trait CacheOwner {
    /// Drops the oldest cached batch if its bytes are on disk; whether one was dropped.
    fn evict_oldest(&self) -> bool;
}

impl std::fmt::Debug for ShardCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardCache")
            .field("max_bytes", &self.max_bytes)
            .field("used_bytes", &self.used_bytes.get())
            .finish()
    }
}

pub struct ShardCache {
    max_bytes: usize,
    used_bytes: Cell<usize>,
    owners: RefCell<Vec<Weak<dyn CacheOwner>>>,
    /// The next owner asked to give up a batch.
    next: Cell<usize>,
}

thread_local! {
    static SHARD_CACHE: Rc<ShardCache> = Rc::new(ShardCache::new(limits::SHARD_CACHE_BYTES));
}

/// This shard's budget.
pub fn shard_cache() -> Rc<ShardCache> {
    SHARD_CACHE.with(Rc::clone)
}

impl ShardCache {
    pub fn new(max_bytes: usize) -> ShardCache {
        ShardCache {
            max_bytes,
            used_bytes: Cell::new(0),
            owners: RefCell::new(Vec::new()),
            next: Cell::new(0),
        }
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes.get()
    }

    pub(super) fn add(&self, bytes: usize) {
        self.used_bytes.set(self.used_bytes.get() + bytes);
    }

    pub(super) fn sub(&self, bytes: usize) {
        debug_assert!(bytes <= self.used_bytes.get(), "cache accounting underflow");
        self.used_bytes
            .set(self.used_bytes.get().saturating_sub(bytes));
    }

    /// Adds a partition to the rotation; partitions dropped since are pruned now and then
    /// (`shrink` only meets them while over budget).
    pub fn register(&self, owner: Weak<dyn CacheOwner>) {
        let mut owners = self.owners.borrow_mut();
        if owners.len() >= 64 && owners.len().is_power_of_two() {
            owners.retain(|w| w.strong_count() > 0);
        }
        owners.push(owner);
    }

    /// While over budget, asks partitions in turn to drop their oldest batch; gives up after
    /// one round without progress (the rest is not on disk yet) or
    /// `limits::SHARD_CACHE_EVICT_SCAN_MAX` asks, and goes on at the next append.
    /// Must not be called with a partition's state borrowed.
    pub fn shrink(&self) {
        let mut asks = limits::SHARD_CACHE_EVICT_SCAN_MAX;
        let mut idle = 0usize;
        while self.used_bytes.get() > self.max_bytes && asks > 0 {
            asks -= 1;
            let owner = {
                let mut owners = self.owners.borrow_mut();
                if owners.is_empty() || idle >= owners.len() {
                    return;
                }
                let i = self.next.get() % owners.len();
                match owners[i].upgrade() {
                    Some(owner) => {
                        self.next.set(i + 1);
                        owner
                    }
                    None => {
                        owners.swap_remove(i); // a deleted partition; its cache is gone
                        continue;
                    }
                }
            };
            if owner.evict_oldest() {
                idle = 0;
            } else {
                idle += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        shard: Rc<ShardCache>,
        batches: RefCell<Vec<(usize, bool)>>,
    }

    impl CacheOwner for Fake {
        fn evict_oldest(&self) -> bool {
            let mut b = self.batches.borrow_mut();
            match b.first() {
                Some(&(bytes, true)) => {
                    b.remove(0);
                    self.shard.sub(bytes);
                    true
                }
                _ => false,
            }
        }
    }

    fn fake(shard: &Rc<ShardCache>, batches: &[(usize, bool)]) -> Rc<Fake> {
        let f = Rc::new(Fake {
            shard: Rc::clone(shard),
            batches: RefCell::new(batches.to_vec()),
        });
        for (bytes, _) in batches {
            shard.add(*bytes);
        }
        let weak: Weak<dyn CacheOwner> = Rc::downgrade(&(Rc::clone(&f) as Rc<dyn CacheOwner>));
        shard.register(weak);
        f
    }

    #[test]
    fn partitions_give_up_their_oldest_in_turn_until_under_budget() {
        let shard = Rc::new(ShardCache::new(250));
        let a = fake(&shard, &[(100, true), (100, true)]);
        let b = fake(&shard, &[(100, true), (100, true)]);
        shard.shrink();
        assert_eq!(shard.used_bytes(), 200);
        assert_eq!((a.batches.borrow().len(), b.batches.borrow().len()), (1, 1));
    }

    #[test]
    fn bytes_not_on_disk_stay_over_budget() {
        let shard = Rc::new(ShardCache::new(50));
        let a = fake(&shard, &[(100, true), (100, false)]);
        let b = fake(&shard, &[(100, false)]);
        shard.shrink();
        assert_eq!(shard.used_bytes(), 200, "only the written batch goes");
        assert_eq!((a.batches.borrow().len(), b.batches.borrow().len()), (1, 1));
    }

    #[test]
    fn dropped_partitions_are_pruned_while_under_budget() {
        let shard = Rc::new(ShardCache::new(usize::MAX));
        let kept = fake(&shard, &[]);
        for _ in 0..200 {
            drop(fake(&shard, &[]));
        }
        assert!(
            shard.owners.borrow().len() < 100,
            "{}",
            shard.owners.borrow().len()
        );
        drop(kept);
    }

    #[test]
    fn a_dropped_partition_leaves_the_rotation() {
        let shard = Rc::new(ShardCache::new(0));
        let a = fake(&shard, &[(100, false)]);
        drop(fake(&shard, &[]));
        shard.shrink();
        assert_eq!(shard.owners.borrow().len(), 1);
        drop(a);
    }
}
