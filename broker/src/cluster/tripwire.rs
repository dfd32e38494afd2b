//! The liveness tripwire's sockets, on the controller executor; `cluster_core::liveness`
//! decides what they mean.
//!
//! A TCP listener on the node's cluster address (the same host:port as the UDP cluster
//! endpoint) writes a hello (`node.id`, incarnation) on every connection it accepts and then
//! holds the connection silently until the peer closes it. One dialer per peer holds a
//! connection to that peer's listener; when it ends, the dialer dials again at once, and a
//! refusal is evidence that the peer's process is gone. Evidence goes to the caller's
//! `report` (the metadata driver). Nothing but a hello is ever sent; what a peer sends is
//! read and dropped.
//!
//! A listener that cannot bind (the TCP port is taken) is logged and the node runs without
//! one: its peers then never get evidence about it, and `broker.session.timeout.ms` rules,
//! as in Kafka.
//!
//! The listener and the connections it holds are plain non-blocking sockets polled by a
//! timer, never io_uring operations: when a process dies, the kernel closes a socket with
//! an io_uring request in flight only when the ring is torn down (deferred work, after the
//! process's files are closed); a plain one closes with the process's files. So the peers'
//! tripwires close, and the port refuses, no later than the clients' connections break —
//! the controller fences before clients ask who leads now. (The dialers' side uses
//! io_uring: its process is the live one.)

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::AsyncReadExt;
use glommio::net::TcpStream;
use strand_cluster_core::liveness::{self, Evidence, PeerState, Tripwire};
use strand_cluster_core::records::NodeId;

use super::link::set_int_opt;
use crate::limits::{TRIPWIRE_ACCEPTED_MAX, TRIPWIRE_ACCEPT_POLL_MS};

/// Connections the listener takes per poll.
const TRIPWIRE_ACCEPTS_PER_POLL: usize = 16;

/// Redials right after a reset before the backoff applies (see `Dial::Reset`).
const TRIPWIRE_QUICK_REDIALS_MAX: u32 = 3;

/// How evidence leaves the tripwire.
pub type Report = Rc<dyn Fn(NodeId, Evidence)>;

/// Every peer's tripwire state, for `strand cluster info` and tests.
#[derive(Clone, Default)]
pub struct Tripwires {
    states: Rc<RefCell<BTreeMap<NodeId, PeerState>>>,
    listening: Rc<Cell<bool>>,
}

impl Tripwires {
    pub fn states(&self) -> BTreeMap<NodeId, PeerState> {
        self.states.borrow().clone()
    }

    /// Whether this node's own listener is up (peers can watch it).
    pub fn listening(&self) -> bool {
        self.listening.get()
    }
}

/// Starts the listener on `listen` and a dialer per peer, on the current executor.
pub fn start(
    me: NodeId,
    incarnation: u128,
    listen: SocketAddr,
    peers: &[(NodeId, SocketAddr)],
    report: Report,
) -> Tripwires {
    let tw = Tripwires::default();
    match std::net::TcpListener::bind(listen).and_then(|l| l.set_nonblocking(true).map(|_| l)) {
        Ok(listener) => {
            tw.listening.set(true);
            let hello = liveness::encode_hello(me, incarnation);
            glommio::spawn_local(accept(listener, hello)).detach();
        }
        Err(e) => tracing::warn!(
            node = me,
            %listen,
            error = %e,
            "liveness tripwire listener not started: peers will notice this node's death only \
             after broker.session.timeout.ms"
        ),
    }
    for (peer, addr) in peers.iter().filter(|(n, _)| *n != me) {
        tw.states.borrow_mut().insert(*peer, PeerState::Never);
        glommio::spawn_local(watch(
            *peer,
            *addr,
            Rc::clone(&tw.states),
            Rc::clone(&report),
        ))
        .detach();
    }
    tw
}

/// Accepts (polling: see the module's note), writes the hello and holds each connection
/// until its peer closes it (checked on the same poll; what a peer sends is dropped).
async fn accept(listener: std::net::TcpListener, hello: [u8; liveness::HELLO_BYTES]) {
    let mut held: Vec<std::net::TcpStream> = Vec::new();
    loop {
        // Bounded per poll, so a flood of connections cannot hold the controller executor.
        for _ in 0..TRIPWIRE_ACCEPTS_PER_POLL {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    if held.len() >= TRIPWIRE_ACCEPTED_MAX {
                        // Not a peer's pattern (one connection each): drop it.
                        continue;
                    }
                    keep_alive(stream.as_raw_fd());
                    // 28 bytes into a fresh socket's empty send buffer: written at once.
                    if stream.set_nonblocking(true).is_ok() && stream.write_all(&hello).is_ok() {
                        held.push(stream);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::debug!(error = %e, "tripwire accept failed");
                    break;
                }
            }
        }
        held.retain_mut(peer_still_there);
        glommio::timer::sleep(Duration::from_millis(TRIPWIRE_ACCEPT_POLL_MS)).await;
    }
}

/// False once the peer closed (or broke) the connection, or sent anything (a tripwire peer
/// sends nothing: whatever does is not one, and is closed).
fn peer_still_there(stream: &mut std::net::TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(stream.read(&mut buf), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// TCP keep-alive on a tripwire connection: a peer host that vanished without a FIN (a
/// crash, a dropped conntrack entry) ends the connection within ~8 s instead of leaving a
/// dead tripwire (a keep-alive timeout is a close: Suspect, never evidence by itself).
fn keep_alive(fd: std::os::fd::RawFd) {
    set_int_opt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 5);
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 1);
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
}

async fn drain(stream: &mut TcpStream) {
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

enum Dial {
    Up(TcpStream, u128),
    Refused,
    /// Connected, then reset before the hello: the peer's listener closed with this
    /// connection still in its backlog (what a dying process does between closing the
    /// held connections and the listener). Not evidence itself; the next dial tells.
    Reset,
    Failed(String),
}

async fn dial(peer: NodeId, addr: SocketAddr) -> Dial {
    let limit = Duration::from_millis(liveness::DIAL_TIMEOUT_MS);
    let mut stream = match TcpStream::connect_timeout(addr, limit).await {
        Ok(s) => {
            keep_alive(s.as_raw_fd());
            s
        }
        Err(e) => {
            let e = io::Error::from(e);
            return if e.kind() == io::ErrorKind::ConnectionRefused {
                Dial::Refused
            } else {
                Dial::Failed(e.to_string())
            };
        }
    };
    let mut hello = [0u8; liveness::HELLO_BYTES];
    let read = glommio::timer::timeout(limit, async {
        stream
            .read_exact(&mut hello)
            .await
            .map_err(glommio::GlommioError::from)
    })
    .await;
    if let Err(e) = read {
        let reset = matches!(&e, glommio::GlommioError::IoError(io)
            if io.kind() == io::ErrorKind::ConnectionReset);
        return if reset {
            Dial::Reset
        } else {
            Dial::Failed(format!("no hello: {e}"))
        };
    }
    match liveness::decode_hello(&hello) {
        Ok((node, incarnation)) if node == peer => Dial::Up(stream, incarnation),
        Ok((node, _)) => Dial::Failed(format!("node {node} answered at node {peer}'s address")),
        Err(why) => Dial::Failed(why),
    }
}

async fn watch(
    peer: NodeId,
    addr: SocketAddr,
    states: Rc<RefCell<BTreeMap<NodeId, PeerState>>>,
    report: Report,
) {
    let mut wire = Tripwire::default();
    let mut last_failure = String::new();
    // Resets redialed at once since the last connection or refusal (bounded: a peer that
    // keeps resetting is then redialed on the usual backoff).
    let mut quick_redials = 0;
    loop {
        let evidence: Vec<Evidence> = match dial(peer, addr).await {
            Dial::Up(mut stream, incarnation) => {
                let up = wire.connected(incarnation);
                states.borrow_mut().insert(peer, wire.state());
                for e in up {
                    report(peer, e);
                }
                last_failure.clear();
                quick_redials = 0;
                drain(&mut stream).await;
                // Dial again at once: a refusal now is the evidence.
                wire.closed().into_iter().collect()
            }
            Dial::Refused => {
                quick_redials = 0;
                let gone = wire.refused();
                states.borrow_mut().insert(peer, wire.state());
                if let Some(e) = gone {
                    report(peer, e);
                }
                glommio::timer::sleep(Duration::from_millis(wire.redial_after_failure_ms())).await;
                continue;
            }
            Dial::Reset if quick_redials < TRIPWIRE_QUICK_REDIALS_MAX => {
                quick_redials += 1;
                continue;
            }
            Dial::Reset => {
                glommio::timer::sleep(Duration::from_millis(wire.redial_after_failure_ms())).await;
                continue;
            }
            Dial::Failed(why) => {
                if why != last_failure {
                    tracing::debug!(peer, %addr, %why, "tripwire dial failed (not evidence)");
                    last_failure = why;
                }
                glommio::timer::sleep(Duration::from_millis(wire.redial_after_failure_ms())).await;
                continue;
            }
        };
        states.borrow_mut().insert(peer, wire.state());
        for e in evidence {
            report(peer, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_addr() -> SocketAddr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }

    type Seen = Rc<RefCell<Vec<(NodeId, Evidence)>>>;

    fn recorder() -> (Seen, Report) {
        let seen: Seen = Rc::default();
        let s = Rc::clone(&seen);
        (seen, Rc::new(move |n, e| s.borrow_mut().push((n, e))))
    }

    #[test]
    fn a_peer_whose_listener_goes_away_is_gone_within_50_ms() {
        let ex = glommio::LocalExecutorBuilder::default().make().unwrap();
        ex.run(async {
            let addr = free_addr();
            // The peer: a listener that writes node 2's hello and holds its connections.
            let listener = std::net::TcpListener::bind(addr).unwrap();
            listener.set_nonblocking(true).unwrap();
            let peer = glommio::spawn_local(accept(listener, liveness::encode_hello(2, 77)));
            let (seen, report) = recorder();
            let tw = start(1, 1, free_addr(), &[(2, addr)], report);
            for _ in 0..100 {
                if !seen.borrow().is_empty() {
                    break;
                }
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(seen.borrow()[..], [(2, Evidence::Up { incarnation: 77 })]);
            // The peer's process exits: its listener and held connections close.
            peer.cancel().await;
            let t0 = std::time::Instant::now();
            while !seen
                .borrow()
                .contains(&(2, Evidence::Gone { incarnation: 77 }))
            {
                assert!(
                    t0.elapsed() < Duration::from_millis(50),
                    "{:?}",
                    seen.borrow()
                );
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
            assert_eq!(seen.borrow()[1], (2, Evidence::Suspect { incarnation: 77 }));
            assert_eq!(tw.states()[&2], PeerState::Gone { incarnation: 77 });
        });
    }

    #[test]
    fn a_peer_that_only_stalls_is_never_gone() {
        let addr = free_addr();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        // The peer on its own executor thread, which then blocks for 1.5 s (a stall).
        let peer = std::thread::spawn(move || {
            let ex = glommio::LocalExecutorBuilder::default().make().unwrap();
            ex.run(async move {
                let listener = std::net::TcpListener::bind(addr).unwrap();
                listener.set_nonblocking(true).unwrap();
                glommio::spawn_local(accept(listener, liveness::encode_hello(2, 5))).detach();
                glommio::timer::sleep(Duration::from_millis(200)).await;
                ready_tx.send(()).unwrap();
                glommio::timer::sleep(Duration::from_millis(100)).await;
                std::thread::sleep(Duration::from_millis(1_500));
                glommio::timer::sleep(Duration::from_millis(100)).await;
            });
        });
        let ex = glommio::LocalExecutorBuilder::default().make().unwrap();
        ex.run(async {
            let (seen, report) = recorder();
            let _tw = start(1, 1, free_addr(), &[(2, addr)], report);
            ready_rx.recv().unwrap();
            glommio::timer::sleep(Duration::from_millis(1_500)).await;
            assert_eq!(seen.borrow()[..], [(2, Evidence::Up { incarnation: 5 })]);
        });
        peer.join().unwrap();
    }
}
