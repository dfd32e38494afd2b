//! Liveness evidence: a TCP "tripwire" per peer (sans-IO).
//!
//! Heartbeats prove life; their absence proves nothing quickly (a stalled process looks the
//! same as a dead one until `broker.session.timeout.ms` passes). A dead process is different:
//! its kernel closes its sockets at once and refuses new connections on its ports. So every
//! node holds an idle TCP connection to every peer's cluster port; the peer's acceptor
//! writes a hello (`node.id`, incarnation) and both sides stay silent. For each peer:
//!
//! - the established connection ends (EOF or reset): **Suspect**, and dial again at once;
//! - that dial is refused by the peer's kernel (nothing listens): **Gone** — the
//!   incarnation of the last hello is dead, evidence the controller fences on at once;
//! - a hello arrives: **Up** (a new incarnation also means the old one is Gone).
//!
//! A dial that times out (host down, dropped packets, a full backlog) is never evidence: it
//! stays Suspect, and the session timeout decides, as in Kafka. A peer whose tripwire was
//! never established yields no evidence at all. A stopped (SIGSTOP) or fsync-blocked
//! process keeps its sockets, so it is never Gone.

use crate::records::NodeId;

/// What a tripwire acceptor writes first.
pub const HELLO_MAGIC: &[u8; 8] = b"STRANDTW";
/// Magic, `node.id` (i32), incarnation (u128), big-endian.
pub const HELLO_BYTES: usize = 8 + 4 + 16;
/// The first redial after a failed one; doubles up to [`REDIAL_MAX_MS`].
pub const REDIAL_MIN_MS: u64 = 100;
pub const REDIAL_MAX_MS: u64 = 1_000;
/// A dial (connect and hello) that takes longer is abandoned (not evidence).
pub const DIAL_TIMEOUT_MS: u64 = 1_000;

pub fn encode_hello(node: NodeId, incarnation: u128) -> [u8; HELLO_BYTES] {
    let mut b = [0u8; HELLO_BYTES];
    b[..8].copy_from_slice(HELLO_MAGIC);
    b[8..12].copy_from_slice(&node.to_be_bytes());
    b[12..].copy_from_slice(&incarnation.to_be_bytes());
    b
}

pub fn decode_hello(b: &[u8]) -> Result<(NodeId, u128), String> {
    if b.len() != HELLO_BYTES || &b[..8] != HELLO_MAGIC {
        return Err("not a Strand tripwire hello".to_string());
    }
    let node = NodeId::from_be_bytes([b[8], b[9], b[10], b[11]]);
    let mut inc = [0u8; 16];
    inc.copy_from_slice(&b[12..]);
    Ok((node, u128::from_be_bytes(inc)))
}

/// A peer as this node's tripwire knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerState {
    /// No hello yet: nothing is known, nothing is evidence.
    Never,
    Up {
        incarnation: u128,
    },
    /// The connection to this incarnation ended; a redial decides.
    Suspect {
        incarnation: u128,
    },
    /// This incarnation's port refused a connection after its connection ended.
    Gone {
        incarnation: u128,
    },
}

/// What a transition tells the rest of the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evidence {
    Up { incarnation: u128 },
    Suspect { incarnation: u128 },
    Gone { incarnation: u128 },
}

/// One peer's tripwire: inputs are what the dialer saw; outputs are evidence and when to
/// dial next.
#[derive(Clone, Debug)]
pub struct Tripwire {
    state: PeerState,
    redial_ms: u64,
}

impl Default for Tripwire {
    fn default() -> Self {
        Tripwire {
            state: PeerState::Never,
            redial_ms: REDIAL_MIN_MS,
        }
    }
}

impl Tripwire {
    pub fn state(&self) -> PeerState {
        self.state
    }

    /// A dial succeeded and the peer's hello named `incarnation`.
    pub fn connected(&mut self, incarnation: u128) -> Vec<Evidence> {
        let mut out = Vec::new();
        match self.state {
            PeerState::Up { incarnation: old } | PeerState::Suspect { incarnation: old }
                if old != incarnation =>
            {
                // The peer restarted between two of our looks: the old process is gone.
                out.push(Evidence::Gone { incarnation: old });
            }
            _ => {}
        }
        self.state = PeerState::Up { incarnation };
        self.redial_ms = REDIAL_MIN_MS;
        out.push(Evidence::Up { incarnation });
        out
    }

    /// The established connection ended (EOF or reset). Dial again at once.
    pub fn closed(&mut self) -> Option<Evidence> {
        match self.state {
            PeerState::Up { incarnation } => {
                self.state = PeerState::Suspect { incarnation };
                self.redial_ms = REDIAL_MIN_MS;
                Some(Evidence::Suspect { incarnation })
            }
            _ => None,
        }
    }

    /// A dial was refused (ECONNREFUSED): nothing listens on the peer's port.
    pub fn refused(&mut self) -> Option<Evidence> {
        match self.state {
            PeerState::Suspect { incarnation } => {
                self.state = PeerState::Gone { incarnation };
                Some(Evidence::Gone { incarnation })
            }
            _ => None,
        }
    }

    /// How long to wait before the next dial, after a dial that failed (refused, timed out,
    /// or any other error; only `refused` is evidence). Doubles up to [`REDIAL_MAX_MS`].
    pub fn redial_after_failure_ms(&mut self) -> u64 {
        let wait = self.redial_ms;
        self.redial_ms = (self.redial_ms * 2).min(REDIAL_MAX_MS);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_connection_then_a_refused_dial_is_gone_for_the_last_incarnation() {
        let mut t = Tripwire::default();
        assert_eq!(t.connected(7), vec![Evidence::Up { incarnation: 7 }]);
        assert_eq!(t.closed(), Some(Evidence::Suspect { incarnation: 7 }));
        assert_eq!(t.refused(), Some(Evidence::Gone { incarnation: 7 }));
        assert_eq!(t.refused(), None, "evidence once");
        assert_eq!(t.state(), PeerState::Gone { incarnation: 7 });
        // The node restarts: a new incarnation is up, no second Gone.
        assert_eq!(t.connected(8), vec![Evidence::Up { incarnation: 8 }]);
    }

    #[test]
    fn a_timeout_or_a_never_established_tripwire_is_never_gone() {
        let mut t = Tripwire::default();
        assert_eq!(t.refused(), None, "never connected: no evidence");
        assert_eq!(t.closed(), None);
        t.connected(1);
        t.closed();
        // Timed-out dials: only waits, doubling.
        assert_eq!(t.redial_after_failure_ms(), 100);
        assert_eq!(t.redial_after_failure_ms(), 200);
        assert_eq!(t.redial_after_failure_ms(), 400);
        assert_eq!(t.redial_after_failure_ms(), 800);
        assert_eq!(t.redial_after_failure_ms(), 1_000);
        assert_eq!(t.redial_after_failure_ms(), 1_000);
        assert_eq!(t.state(), PeerState::Suspect { incarnation: 1 });
        // It answers again (it was only stalled): Up, same incarnation, no Gone.
        assert_eq!(t.connected(1), vec![Evidence::Up { incarnation: 1 }]);
        assert_eq!(t.redial_after_failure_ms(), 100, "reset");
    }

    #[test]
    fn a_new_incarnation_seen_without_a_refusal_is_gone_for_the_old_one() {
        let mut t = Tripwire::default();
        t.connected(1);
        t.closed();
        assert_eq!(
            t.connected(2),
            vec![
                Evidence::Gone { incarnation: 1 },
                Evidence::Up { incarnation: 2 }
            ]
        );
    }

    #[test]
    fn hellos_round_trip_and_foreign_bytes_are_refused() {
        let h = encode_hello(3, 0xdead_beef_u128 << 64);
        assert_eq!(decode_hello(&h), Ok((3, 0xdead_beef_u128 << 64)));
        assert!(decode_hello(b"HTTP/1.1 400 Bad Request\r\n\r\n").is_err());
        assert!(decode_hello(&h[..10]).is_err());
    }
}
