//! Peers whose tripwire closed (`cluster::tripwire`), as the shards' Metadata answers see
//! them: a partition led by such a peer is answered leader -1 with LEADER_NOT_AVAILABLE
//! until the controller's fence names its new leader (milliseconds later). A client that
//! lost its connection to a dead leader asks for metadata at once; told "no leader" rather
//! than the dead one, it keeps asking every `retry.backoff.ms` (librdkafka: 100 ms, then
//! doubling) instead of waiting for its next periodic refresh (1 s in librdkafka).
//!
//! Written by the controller executor, read by shards on Metadata requests only (not on the
//! produce or fetch path; FindCoordinator is left alone): a mutex is enough.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use strand_cluster_core::records::NodeId;

/// How long a closed tripwire alone (no refusal yet: the peer may only have dropped the
/// connection) hides a peer's leaderships.
pub const SUSPECT_HIDES_LEADER_MS: u64 = 1_000;
/// How long a refusal (the peer's process is gone) hides them at most: the fence takes
/// milliseconds; if none comes (no quorum), or the peer comes back without a tripwire
/// listener, Metadata names the leader the metadata names again after this.
pub const GONE_HIDES_LEADER_MS: u64 = 5_000;

#[derive(Clone, Copy, Debug)]
struct Down {
    since: Instant,
    gone: bool,
}

#[derive(Debug, Default)]
pub struct PeersDown {
    down: Mutex<BTreeMap<NodeId, Down>>,
}

impl PeersDown {
    /// The tripwire to `node` closed.
    pub fn suspect(&self, node: NodeId) {
        if let Ok(mut d) = self.down.lock() {
            d.entry(node).or_insert(Down {
                since: Instant::now(),
                gone: false,
            });
        }
    }

    /// `node`'s port refused a connection after its tripwire closed.
    pub fn gone(&self, node: NodeId) {
        if let Ok(mut d) = self.down.lock() {
            d.insert(
                node,
                Down {
                    since: Instant::now(),
                    gone: true,
                },
            );
        }
    }

    /// The tripwire reached `node` again.
    pub fn up(&self, node: NodeId) {
        if let Ok(mut d) = self.down.lock() {
            d.remove(&node);
        }
    }

    /// The peers whose leaderships Metadata hides now (usually none).
    pub fn hidden(&self) -> Vec<NodeId> {
        let Ok(d) = self.down.lock() else {
            return Vec::new();
        };
        d.iter()
            .filter(|(_, x)| x.hides())
            .map(|(n, _)| *n)
            .collect()
    }

    /// Whether Metadata should hide `node`'s leaderships now.
    pub fn hides(&self, node: NodeId) -> bool {
        let Ok(d) = self.down.lock() else {
            return false;
        };
        d.get(&node).is_some_and(Down::hides)
    }
}

impl Down {
    fn hides(&self) -> bool {
        let limit_ms = if self.gone {
            GONE_HIDES_LEADER_MS
        } else {
            SUSPECT_HIDES_LEADER_MS
        };
        self.since.elapsed() < Duration::from_millis(limit_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gone_peer_is_hidden_until_it_is_up_again_and_others_never() {
        let p = PeersDown::default();
        assert!(!p.hides(2));
        p.suspect(2);
        assert!(p.hides(2));
        p.gone(2);
        assert!(p.hides(2));
        assert!(!p.hides(3));
        p.up(2);
        assert!(!p.hides(2));
    }
}
