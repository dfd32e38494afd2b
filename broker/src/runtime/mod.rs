//! What the shards run on: pinned glommio executors and the partition -> shard hash
//! ([`shard`]), cross-shard wake-ups ([`wake`]), helper threads off the shard's core
//! ([`helper_thread`]) and the clock ([`clock`]). Imports nothing else of the broker but
//! `config` and `limits`.

pub mod clock;
pub mod helper_thread;
pub mod shard;
pub mod wake;
