//! Transports over an in-memory network with a virtual clock, loss and reordering.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::certs::DevCa;
use super::tls::NodeCredentials;
use super::{SendError, Transport, TransportEvent};
use crate::limits::{CLUSTER_MESSAGE_MAX_BYTES, CLUSTER_PEER_QUEUE_MAX_BYTES};
use crate::records::NodeId;

fn addr(node: NodeId) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 20_000 + node as u16))
}

struct Net {
    now: Instant,
    nodes: HashMap<NodeId, Transport>,
    /// (deliver at, to, from, bytes)
    flying: Vec<(Instant, SocketAddr, SocketAddr, Bytes)>,
    events: Vec<(NodeId, TransportEvent)>,
    /// Per mille of datagrams dropped.
    loss_permille: u64,
    /// Extra random delay (reorders datagrams).
    jitter_us: u64,
    /// Nodes whose datagrams (both ways) vanish.
    cut: Vec<NodeId>,
    /// The clock moves at most this far per step (`None`: to the next event).
    max_step: Option<Duration>,
    rng: u64,
}

impl Net {
    fn new(seed: u64) -> Net {
        Net {
            now: Instant::now(),
            nodes: HashMap::new(),
            flying: Vec::new(),
            events: Vec::new(),
            loss_permille: 0,
            jitter_us: 0,
            cut: Vec::new(),
            max_step: None,
            rng: seed | 1,
        }
    }

    fn rand(&mut self) -> u64 {
        // xorshift64*: deterministic per seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Adds node `id` with `creds`, known to every other node (and they to it).
    fn add(&mut self, id: NodeId, creds: &NodeCredentials) {
        let mut t = Transport::new(id, creds, Some([id as u8; 32])).expect("credentials load");
        for (&other, o) in self.nodes.iter_mut() {
            o.add_peer(id, addr(id));
            t.add_peer(other, addr(other));
        }
        self.nodes.insert(id, t);
    }

    fn node_at(&self, a: SocketAddr) -> Option<NodeId> {
        self.nodes.keys().copied().find(|&n| addr(n) == a)
    }

    fn send(&mut self, from: NodeId, to: NodeId, body: &[u8]) -> Result<(), SendError> {
        let now = self.now;
        let t = self.nodes.get_mut(&from).expect("node exists");
        t.send(now, to, Bytes::copy_from_slice(body))
    }

    /// Moves every pending datagram into the air, delivers what has landed, fires timers, and
    /// advances the clock to the next thing that happens (at most `max_step`).
    fn step(&mut self) {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in &ids {
            while let Some((to, data)) = self.nodes.get_mut(id).and_then(|t| t.poll_transmit()) {
                let dropped = self.rand() % 1000 < self.loss_permille;
                let to_node = self.node_at(to);
                if dropped
                    || self.cut.contains(id)
                    || to_node.is_some_and(|n| self.cut.contains(&n))
                {
                    continue;
                }
                let delay = 200
                    + if self.jitter_us > 0 {
                        self.rand() % self.jitter_us
                    } else {
                        0
                    };
                self.flying
                    .push((self.now + Duration::from_micros(delay), to, addr(*id), data));
            }
        }
        let next_flight = self.flying.iter().map(|f| f.0).min();
        let next_timer = ids
            .iter()
            .filter_map(|id| self.nodes.get_mut(id).and_then(|t| t.poll_timeout()))
            .min();
        let next = [next_flight, next_timer].into_iter().flatten().min();
        let Some(mut next) = next else { return };
        if let Some(max) = self.max_step {
            next = next.min(self.now + max);
        }
        self.now = self.now.max(next);
        let now = self.now;
        let (landed, flying): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flying)
            .into_iter()
            .partition(|f| f.0 <= now);
        self.flying = flying;
        for (_, to, from, data) in landed {
            if let Some(n) = self.node_at(to) {
                let t = self.nodes.get_mut(&n).expect("node exists");
                t.handle_datagram(now, from, BytesMut::from(&data[..]));
            }
        }
        for id in &ids {
            let t = self.nodes.get_mut(id).expect("node exists");
            if t.poll_timeout().is_some_and(|d| d <= now) {
                t.handle_timeout(now);
            }
            while let Some(ev) = t.poll_event() {
                self.events.push((*id, ev));
            }
        }
    }

    /// Steps until `done` holds or `limit` of virtual time passes; returns whether it held.
    fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Net) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if done(self) {
                return true;
            }
            let before = (self.now, self.flying.len(), self.events.len());
            self.step();
            if (self.now, self.flying.len(), self.events.len()) == before {
                self.now += Duration::from_millis(1);
            }
        }
        done(self)
    }

    fn messages(&self, at: NodeId, from: NodeId) -> Vec<Bytes> {
        self.events
            .iter()
            .filter_map(|(n, e)| match e {
                TransportEvent::Message { from: f, body } if *n == at && *f == from => {
                    Some(body.clone())
                }
                _ => None,
            })
            .collect()
    }

    fn disconnects(&self, at: NodeId) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|(n, e)| match e {
                TransportEvent::Disconnected { reason, .. } if *n == at => Some(reason.clone()),
                _ => None,
            })
            .collect()
    }
}

fn cluster(ca: &DevCa, ids: &[NodeId], seed: u64) -> Net {
    let mut net = Net::new(seed);
    for &id in ids {
        net.add(id, &ca.issue(id).expect("issue"));
    }
    net
}

#[test]
fn messages_arrive_whole_and_in_order_despite_loss_and_reordering() {
    for seed in [7, 11, 23] {
        lossy_run(seed);
    }
}

fn lossy_run(seed: u64) {
    let ca = DevCa::new("test cluster").unwrap();
    let mut net = cluster(&ca, &[1, 2, 3], seed);
    net.loss_permille = 100;
    net.jitter_us = 3_000;
    let start = net.now;
    let sizes = [0usize, 1, 100, 1500, 70_000];
    let mut sent = Vec::new();
    for i in 0..200u32 {
        let mut body = i.to_be_bytes().to_vec();
        body.resize(4 + sizes[i as usize % sizes.len()], i as u8);
        for to in [2, 3] {
            net.send(1, to, &body).unwrap();
        }
        sent.push(body);
        net.step();
    }
    let delivered = net.run_until(Duration::from_secs(30), |n| {
        n.messages(2, 1).len() == sent.len() && n.messages(3, 1).len() == sent.len()
    });
    assert!(
        delivered,
        "seed {seed}: 2 got {}, 3 got {}; at 1: {:?}; at 3: {:?}; virtual time {:?}",
        net.messages(2, 1).len(),
        net.messages(3, 1).len(),
        net.disconnects(1),
        net.disconnects(3),
        net.now.duration_since(start)
    );
    for to in [2, 3] {
        let got: Vec<Vec<u8>> = net.messages(to, 1).iter().map(|b| b.to_vec()).collect();
        assert_eq!(got, sent, "node {to} got node 1's messages in order");
    }
    assert!(net.events.contains(&(
        2,
        TransportEvent::Connected {
            node: 1,
            outgoing: false
        }
    )));
    assert!(net.events.contains(&(
        1,
        TransportEvent::Connected {
            node: 3,
            outgoing: true
        }
    )));
    // The other direction uses its own connection.
    net.send(3, 1, b"back").unwrap();
    assert!(net.run_until(Duration::from_secs(10), |n| n.messages(1, 3).len() == 1));
}

#[test]
fn a_node_with_a_certificate_from_another_ca_is_refused() {
    let ca = DevCa::new("test cluster").unwrap();
    let other = DevCa::new("someone else").unwrap();
    let mut net = cluster(&ca, &[1], 1);
    net.add(9, &other.issue(9).unwrap());
    net.send(9, 1, b"let me in").unwrap();
    net.run_until(Duration::from_secs(5), |n| {
        !n.disconnects(9).is_empty() && !n.disconnects(1).is_empty()
    });
    assert!(
        net.messages(1, 9).is_empty(),
        "nothing from an unknown CA is delivered"
    );
    assert!(
        !net.events
            .iter()
            .any(|(n, e)| *n == 1 && matches!(e, TransportEvent::Connected { .. })),
        "node 1 never accepts it: {:?}",
        net.events
    );
    assert!(
        net.disconnects(9).iter().any(|r| r.contains("certificate")),
        "the dialler learns it was refused: {:?}",
        net.disconnects(9)
    );
    assert!(
        net.disconnects(1)
            .iter()
            .any(|r| r.contains("UnknownIssuer")),
        "the acceptor says why it refused (for its log): {:?}",
        net.disconnects(1)
    );
}

#[test]
fn a_node_claiming_another_nodes_id_is_refused() {
    let ca = DevCa::new("test cluster").unwrap();
    let mut net = cluster(&ca, &[1], 2);
    // Node 3 holds node 2's certificate: the CA is right, the name is not.
    net.add(3, &ca.issue(2).unwrap());
    net.send(3, 1, b"i am 3").unwrap();
    net.run_until(Duration::from_secs(5), |n| !n.disconnects(1).is_empty());
    assert!(net.messages(1, 3).is_empty());
    let why = net.disconnects(1);
    assert!(
        why.iter().any(|r| r.contains("not for node-3")),
        "the acceptor says why: {why:?}"
    );
}

#[test]
fn dialling_an_address_where_another_node_answers_fails() {
    let ca = DevCa::new("test cluster").unwrap();
    let mut net = cluster(&ca, &[1, 2], 3);
    // Node 1 believes node 5 lives at node 2's address: node 2's certificate is not node-5's.
    net.nodes.get_mut(&1).unwrap().add_peer(5, addr(2));
    net.send(1, 5, b"hello 5").unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| !n.disconnects(1).is_empty()));
    assert!(
        net.messages(2, 1).is_empty(),
        "node 2 gets nothing meant for 5"
    );
}

#[test]
fn a_malformed_frame_closes_that_connection_only() {
    let ca = DevCa::new("test cluster").unwrap();
    let mut net = cluster(&ca, &[1, 2, 3], 4);
    net.send(1, 2, b"fine").unwrap();
    net.send(3, 2, b"also fine").unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| {
        n.messages(2, 1).len() == 1 && n.messages(2, 3).len() == 1
    }));
    // Node 1 writes a length far above the limit on its stream.
    {
        let t = net.nodes.get_mut(&1).unwrap();
        let ch = t.outgoing[&2];
        let c = t.conns.get_mut(&ch).unwrap();
        c.queue
            .push_back(Bytes::from_static(&[0xff, 0xff, 0xff, 0xf0, 1, 2, 3]));
        c.queued_bytes += 7;
    }
    net.send(1, 2, b"after the garbage").unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| !n.disconnects(2).is_empty()));
    assert!(
        net.disconnects(2)[0].contains("malformed cluster message"),
        "{:?}",
        net.disconnects(2)
    );
    assert_eq!(
        net.messages(2, 1).len(),
        1,
        "nothing after the garbage is delivered"
    );
    net.send(3, 2, b"node 3 is unaffected").unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| n.messages(2, 3).len() == 2));
    // Node 1 learns its connection was closed and dials again on the next send.
    assert!(net.run_until(Duration::from_secs(5), |n| !n.disconnects(1).is_empty()));
    net.send(1, 2, b"a new connection").unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| n.messages(2, 1).len() == 2));
}

#[test]
fn sends_are_bounded() {
    let ca = DevCa::new("test cluster").unwrap();
    let mut net = cluster(&ca, &[1, 2], 5);
    let big = vec![0u8; CLUSTER_MESSAGE_MAX_BYTES + 1];
    assert_eq!(net.send(1, 2, &big), Err(SendError::TooLarge(big.len())));
    assert_eq!(net.send(1, 7, b"x"), Err(SendError::UnknownPeer(7)));
    // Node 2 is unreachable: its queue fills up to the limit, then sends are refused.
    net.cut.push(2);
    let chunk = vec![0u8; CLUSTER_MESSAGE_MAX_BYTES];
    let mut accepted = 0usize;
    let refused = loop {
        match net.send(1, 2, &chunk) {
            Ok(()) => accepted += chunk.len(),
            Err(e) => break e,
        }
        assert!(
            accepted <= CLUSTER_PEER_QUEUE_MAX_BYTES,
            "the queue is bounded"
        );
    };
    assert_eq!(refused, SendError::Full(2));
    assert!(net.nodes[&1].queued_bytes(2) <= CLUSTER_PEER_QUEUE_MAX_BYTES + 64);
}

#[test]
fn a_dead_peer_is_noticed_and_redialled_when_it_returns() {
    let ca = DevCa::new("test cluster").unwrap();
    let mut net = cluster(&ca, &[1, 2], 6);
    net.send(1, 2, b"one").unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| n.messages(2, 1).len() == 1));
    net.cut.push(2);
    let started = net.now;
    let limit = Duration::from_millis(crate::limits::CLUSTER_IDLE_TIMEOUT_MS + 5_000);
    assert!(net.run_until(limit, |n| !n.disconnects(1).is_empty()));
    let noticed = net.now - started;
    assert!(
        noticed <= Duration::from_millis(crate::limits::CLUSTER_IDLE_TIMEOUT_MS + 500),
        "noticed after {noticed:?}"
    );
    net.cut.clear();
    net.send(1, 2, b"two").unwrap();
    assert!(net.run_until(Duration::from_secs(5), |n| n.messages(2, 1).len() == 2));
}

#[test]
fn a_connection_that_never_names_its_node_is_closed() {
    let ca = DevCa::new("test cluster").unwrap();
    let mut net = cluster(&ca, &[1, 2], 8);
    net.send(1, 2, b"x").unwrap();
    // Node 1's hello and message never reach the stream: the handshake completes, then silence.
    {
        let t = net.nodes.get_mut(&1).unwrap();
        let ch = t.outgoing[&2];
        let c = t.conns.get_mut(&ch).unwrap();
        c.queue.clear();
        c.queued_bytes = 0;
    }
    let limit = Duration::from_millis(crate::limits::CLUSTER_HELLO_DEADLINE_MS + 2_000);
    assert!(net.run_until(limit, |n| !n.disconnects(2).is_empty()));
    assert!(
        net.disconnects(2)[0].contains("no hello"),
        "{:?}",
        net.disconnects(2)
    );
}

#[test]
fn a_restarted_peer_is_reached_again_within_a_second() {
    let ca = DevCa::new("test cluster").unwrap();
    let creds2 = ca.issue(2).expect("issue");
    // (Without the new incarnation's first message, node 1's connection to the old one
    // lasted until the idle timeout: 13.6 s here, the stale handshake flight it probed with
    // drew no stateless reset.)
    let mut net = cluster(&ca, &[1, 2], 5);
    net.max_step = Some(Duration::from_millis(5));
    net.send(1, 2, b"before").unwrap();
    net.send(2, 1, b"before").unwrap();
    assert!(
        net.run_until(Duration::from_secs(5), |n| n.messages(2, 1).len() == 1
            && n.messages(1, 2).len() == 1)
    );
    // Node 2 dies (its datagrams vanish) while node 1 keeps sending, as the quorum's
    // heartbeats do; two seconds later a new incarnation listens on the same address.
    net.cut.push(2);
    let died = net.now;
    while net.now < died + Duration::from_secs(2) {
        let _ = net.send(1, 2, b"heartbeat");
        let until = net.now + Duration::from_millis(100);
        net.run_until(Duration::from_millis(100), |n| n.now >= until);
    }
    net.nodes.remove(&2);
    let mut t = Transport::new(2, &creds2, Some([99; 32])).expect("credentials load");
    t.add_peer(1, addr(1));
    net.nodes.insert(2, t);
    net.cut.clear();
    let restarted = net.now;
    // The new incarnation speaks first (a restarted voter campaigns): node 1 learns from the
    // new connection that its own to node 2 leads nowhere.
    net.send(2, 1, b"vote for me").unwrap();
    let before = net.messages(2, 1).len();
    while net.messages(2, 1).len() == before && net.now < restarted + Duration::from_secs(20) {
        let _ = net.send(1, 2, b"heartbeat");
        let until = net.now + Duration::from_millis(100);
        net.run_until(Duration::from_millis(100), |n| n.now >= until);
    }
    let took = net.now.duration_since(restarted);
    assert!(
        took < Duration::from_secs(1),
        "node 1 reached the restarted node 2 after {took:?}; at 1: {:?}",
        net.disconnects(1)
    );
}
