//! The cluster transport, sans-IO: QUIC (quinn-proto) with mutual TLS between nodes, messages
//! framed on streams. The caller owns the UDP socket and the clock: it feeds datagrams
//! ([`Transport::handle_datagram`]) and timeouts ([`Transport::handle_timeout`]) in, and
//! sends what [`Transport::poll_transmit`] hands out; [`Transport::poll_event`] gives
//! connections coming and going and the messages that arrived. Tests drive several
//! transports over an in-memory network with loss and reordering (`tests.rs`).
//!
//! Shape: each direction between two nodes is its own connection. To send to node N a node
//! dials N (once; the address comes from [`Transport::add_peer`]) and writes on one
//! unidirectional stream: first a hello naming itself, then its messages, in order. It
//! receives on the connections others dialled to it. So there are never two connections
//! racing for one direction, and a node's messages to N arrive in the order sent. Delivery
//! is at most once: messages queued on a connection that is lost are dropped (the quorum and
//! replication retransmit on their own timers), and the caller learns of the loss through
//! [`TransportEvent::Disconnected`].
//!
//! Datagrams: path-MTU discovery is on (from 1,200 bytes up to `CLUSTER_MTU_UPPER_BOUND_BYTES`), so the
//! driver's UDP socket must not fragment (`IP_MTU_DISCOVER = IP_PMTUDISC_DO`).
//!
//! Authentication: the dialler checks the acceptor's certificate is for `node-N` (TLS server
//! name); the acceptor requires a client certificate from the cluster CA and checks it is for
//! the node the hello names. Anything else — a certificate from another CA, a hello for
//! another node, a frame above the size limit — closes that connection, and the event says
//! why.

pub mod certs;
pub mod frame;
pub mod tls;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, StreamEvent, StreamId,
    VarInt,
};

use crate::limits::{
    CLUSTER_CONNECTIONS_MAX, CLUSTER_HELLO_DEADLINE_MS, CLUSTER_IDLE_TIMEOUT_MS,
    CLUSTER_KEEP_ALIVE_MS, CLUSTER_MESSAGE_MAX_BYTES, CLUSTER_MTU_UPPER_BOUND_BYTES,
    CLUSTER_PEER_QUEUE_MAX_BYTES, CLUSTER_RECEIVE_WINDOW_BYTES, CLUSTER_STALE_OUTGOING_MS,
    CLUSTER_UNIDENTIFIED_CONNECTIONS_MAX,
};
use crate::records::NodeId;
use frame::FrameDecoder;
use tls::NodeCredentials;

/// Application close codes (QUIC's CONNECTION_CLOSE carries them to the peer).
const CLOSE_PROTOCOL: u32 = 1;
const CLOSE_IDENTITY: u32 = 2;
const CLOSE_SHUTDOWN: u32 = 3;

/// What the transport tells its caller.
#[derive(Debug, PartialEq, Eq)]
pub enum TransportEvent {
    /// A connection with `node` is up: `outgoing` ours (we may send), or theirs (authenticated
    /// by its hello; their messages follow).
    Connected { node: NodeId, outgoing: bool },
    /// A message from `from`, in the order `from` sent it.
    Message { from: NodeId, body: Bytes },
    /// A connection ended; `node` is `None` for an accepted connection that never said who it
    /// was. Messages still queued on an outgoing one are dropped.
    Disconnected {
        node: Option<NodeId>,
        outgoing: bool,
        reason: String,
    },
}

/// Why a message was not queued.
#[derive(Debug, PartialEq, Eq)]
pub enum SendError {
    /// No address for that node ([`Transport::add_peer`]).
    UnknownPeer(NodeId),
    /// Above `CLUSTER_MESSAGE_MAX_BYTES`.
    TooLarge(usize),
    /// `CLUSTER_PEER_QUEUE_MAX_BYTES` already wait for that peer: try again after it drains.
    Full(NodeId),
    /// QUIC refused to open the connection (e.g. an unusable address).
    Connect(String),
    /// The node's link is closed.
    Closed,
}

struct Conn {
    conn: quinn_proto::Connection,
    /// Accepted: when the peer's hello must have arrived (until then it holds one of the
    /// `CLUSTER_UNIDENTIFIED_CONNECTIONS_MAX` slots). `None` once it did, and when dialled.
    hello_due: Option<Instant>,
    /// `Some(node)` when we dialled `node`; `None` for an accepted connection.
    dialled: Option<NodeId>,
    /// Who is at the other end, once known (dialled: from the start; accepted: after a hello
    /// whose node the certificate is issued for).
    peer: Option<NodeId>,
    /// Dialled: the stream we write on, once the handshake is done.
    stream: Option<StreamId>,
    /// Dialled: frames (prefix and body as separate chunks) not yet taken by QUIC.
    queue: VecDeque<Bytes>,
    queued_bytes: usize,
    /// Accepted: the peer's stream being reassembled.
    decoder: FrameDecoder,
    /// The loss was reported (once).
    reported: bool,
    /// Dialled: the handshake completed (we may open our stream).
    connected: bool,
    /// Accepted: the hello was accepted in the current drive (see `replace_older`).
    just_identified: bool,
    /// When a datagram for it last arrived (or it was made).
    last_rx: Instant,
}

/// One node's end of the cluster transport.
pub struct Transport {
    me: NodeId,
    endpoint: Endpoint,
    client: quinn_proto::ClientConfig,
    peers: HashMap<NodeId, SocketAddr>,
    conns: HashMap<ConnectionHandle, Conn>,
    outgoing: HashMap<NodeId, ConnectionHandle>,
    events: VecDeque<TransportEvent>,
    transmits: VecDeque<(SocketAddr, Bytes)>,
    buf: Vec<u8>,
}

/// QUIC settings for cluster connections (`limits` says why each value).
pub fn transport_config() -> quinn_proto::TransportConfig {
    let mut t = quinn_proto::TransportConfig::default();
    let window = VarInt::from_u32(CLUSTER_RECEIVE_WINDOW_BYTES);
    t.stream_receive_window(window)
        .receive_window(window)
        .send_window(u64::from(CLUSTER_RECEIVE_WINDOW_BYTES))
        .max_concurrent_uni_streams(VarInt::from_u32(1))
        .max_concurrent_bidi_streams(VarInt::from_u32(0))
        // Unreliable QUIC datagrams are not used: refuse them rather than buffer them.
        .datagram_receive_buffer_size(None)
        .mtu_discovery_config(Some({
            let mut mtud = quinn_proto::MtuDiscoveryConfig::default();
            mtud.upper_bound(CLUSTER_MTU_UPPER_BOUND_BYTES);
            mtud
        }))
        .keep_alive_interval(Some(Duration::from_millis(CLUSTER_KEEP_ALIVE_MS)))
        .max_idle_timeout(Some(
            VarInt::from_u64(CLUSTER_IDLE_TIMEOUT_MS)
                .expect("a small constant")
                .into(),
        ));
    t
}

impl Transport {
    /// A transport for node `me` with its credentials. `rng_seed` makes QUIC's connection ids
    /// reproducible in tests (TLS keys stay random).
    pub fn new(
        me: NodeId,
        creds: &NodeCredentials,
        rng_seed: Option<[u8; 32]>,
    ) -> std::io::Result<Transport> {
        let tls = tls::configs(creds, Arc::new(transport_config()))?;
        // The stateless-reset key: stable across restarts (derived from the node's private
        // key), so a restarted node answers its peers' packets for the old incarnation's
        // connections with a reset they accept, and they redial at once instead of sending
        // into a dead connection until the idle timeout.
        let digest = ring::digest::digest(&ring::digest::SHA256, creds.key_pem.as_bytes());
        let reset_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, digest.as_ref());
        let mut endpoint_config = EndpointConfig::new(Arc::new(reset_key));
        // Connection ids are validated by a keyed hash (packets with made-up ids are dropped
        // without a reply); the key must be stable across restarts too, or the new
        // incarnation drops the old connections' packets as invalid instead of resetting
        // them (measured: 13.6 s, the idle timeout, before a peer reached a restarted node).
        let cid_digest = ring::digest::digest(
            &ring::digest::SHA256,
            [
                b"strand cluster connection ids\n".as_slice(),
                creds.key_pem.as_bytes(),
            ]
            .concat()
            .as_slice(),
        );
        let mut cid_key = [0u8; 8];
        cid_key.copy_from_slice(&cid_digest.as_ref()[..8]);
        let cid_key = u64::from_le_bytes(cid_key);
        endpoint_config.cid_generator(move || {
            Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
        });
        endpoint_config.rng_seed(rng_seed);
        endpoint_config
            .max_udp_payload_size(CLUSTER_MTU_UPPER_BOUND_BYTES)
            .map_err(|e| std::io::Error::other(format!("QUIC payload size: {e}")))?;
        Ok(Transport {
            me,
            endpoint: Endpoint::new(Arc::new(endpoint_config), Some(tls.server), true, None),
            client: tls.client,
            peers: HashMap::new(),
            conns: HashMap::new(),
            outgoing: HashMap::new(),
            events: VecDeque::new(),
            transmits: VecDeque::new(),
            buf: Vec::new(),
        })
    }

    /// Where `node` is reached (its advertised cluster address). A changed address applies to
    /// the next connection.
    pub fn add_peer(&mut self, node: NodeId, addr: SocketAddr) {
        self.peers.insert(node, addr);
    }

    /// Queues `body` for `node`, dialling it first if no connection is up or being made.
    pub fn send(&mut self, now: Instant, node: NodeId, body: Bytes) -> Result<(), SendError> {
        self.send_chunks(now, node, vec![body])
    }

    /// As [`Transport::send`], for a message whose body is `chunks` one after the other:
    /// each is queued as it is (a leader's log buffers go to QUIC with no copy).
    pub fn send_chunks(
        &mut self,
        now: Instant,
        node: NodeId,
        chunks: Vec<Bytes>,
    ) -> Result<(), SendError> {
        let len: usize = chunks.iter().map(Bytes::len).sum();
        if len > CLUSTER_MESSAGE_MAX_BYTES {
            return Err(SendError::TooLarge(len));
        }
        let ch = match self.outgoing.get(&node) {
            Some(ch) => *ch,
            None => self.dial(now, node)?,
        };
        let c = self
            .conns
            .get_mut(&ch)
            .expect("outgoing entries name live connections");
        if c.queued_bytes + len > CLUSTER_PEER_QUEUE_MAX_BYTES {
            return Err(SendError::Full(node));
        }
        c.queued_bytes += 4 + len;
        c.queue
            .push_back(Bytes::copy_from_slice(&frame::header(len)));
        c.queue
            .extend(chunks.into_iter().filter(|chunk| !chunk.is_empty()));
        self.drive(now);
        Ok(())
    }

    /// Bytes queued for `node` and not yet taken by QUIC (0 without a connection).
    pub fn queued_bytes(&self, node: NodeId) -> usize {
        self.outgoing
            .get(&node)
            .and_then(|ch| self.conns.get(ch))
            .map_or(0, |c| c.queued_bytes)
    }

    fn dial(&mut self, now: Instant, node: NodeId) -> Result<ConnectionHandle, SendError> {
        let addr = *self.peers.get(&node).ok_or(SendError::UnknownPeer(node))?;
        let (ch, conn) = self
            .endpoint
            .connect(now, self.client.clone(), addr, &tls::node_name(node))
            .map_err(|e| SendError::Connect(e.to_string()))?;
        let hello = frame::hello(self.me);
        let mut queue = VecDeque::new();
        let queued_bytes = hello.len();
        queue.push_back(hello);
        self.conns.insert(
            ch,
            Conn {
                conn,
                hello_due: None,
                dialled: Some(node),
                peer: Some(node),
                stream: None,
                queue,
                queued_bytes,
                decoder: FrameDecoder::default(),
                reported: false,
                connected: false,
                just_identified: false,
                last_rx: now,
            },
        );
        self.outgoing.insert(node, ch);
        Ok(ch)
    }

    /// A datagram that arrived on the node's UDP socket from `from`.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: BytesMut) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        match self.endpoint.handle(now, from, None, None, data, &mut buf) {
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                if let Some(c) = self.conns.get_mut(&ch) {
                    c.last_rx = now;
                    c.conn.handle_event(ev);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                let unidentified = self
                    .conns
                    .values()
                    .filter(|c| c.dialled.is_none() && c.peer.is_none())
                    .count();
                if !incoming.remote_address_validated() && incoming.may_retry() {
                    // A Retry first (one round trip): no state is kept for a source address
                    // until it proves it receives what we send (spoofed floods cost nothing).
                    match self.endpoint.retry(incoming, &mut buf) {
                        Ok(t) => self
                            .transmits
                            .push_back((t.destination, Bytes::copy_from_slice(&buf[..t.size]))),
                        Err(e) => self.endpoint.ignore(e.into_incoming()),
                    }
                } else if self.conns.len() >= CLUSTER_CONNECTIONS_MAX
                    || unidentified >= CLUSTER_UNIDENTIFIED_CONNECTIONS_MAX
                {
                    let t = self.endpoint.refuse(incoming, &mut buf);
                    self.transmits
                        .push_back((t.destination, Bytes::copy_from_slice(&buf[..t.size])));
                } else {
                    match self.endpoint.accept(incoming, now, &mut buf, None) {
                        Ok((ch, conn)) => {
                            self.conns.insert(
                                ch,
                                Conn {
                                    conn,
                                    hello_due: Some(
                                        now + Duration::from_millis(CLUSTER_HELLO_DEADLINE_MS),
                                    ),
                                    dialled: None,
                                    peer: None,
                                    stream: None,
                                    queue: VecDeque::new(),
                                    queued_bytes: 0,
                                    decoder: FrameDecoder::default(),
                                    reported: false,
                                    connected: false,
                                    just_identified: false,
                                    last_rx: now,
                                },
                            );
                        }
                        Err(e) => {
                            if let Some(t) = e.response {
                                self.transmits.push_back((
                                    t.destination,
                                    Bytes::copy_from_slice(&buf[..t.size]),
                                ));
                            }
                        }
                    }
                }
            }
            Some(DatagramEvent::Response(t)) => {
                self.transmits
                    .push_back((t.destination, Bytes::copy_from_slice(&buf[..t.size])));
            }
            None => {}
        }
        self.buf = buf;
        self.drive(now);
    }

    /// When [`Transport::handle_timeout`] must next be called, if ever.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.conns
            .values_mut()
            .flat_map(|c| [c.conn.poll_timeout(), c.hello_due])
            .flatten()
            .min()
    }

    /// The clock reached a time [`Transport::poll_timeout`] asked for (or later).
    pub fn handle_timeout(&mut self, now: Instant) {
        for c in self.conns.values_mut() {
            if c.conn.poll_timeout().is_some_and(|t| t <= now) {
                c.conn.handle_timeout(now);
            }
            if c.hello_due.is_some_and(|t| t <= now) {
                c.hello_due = None;
                let why = format!("no hello within {CLUSTER_HELLO_DEADLINE_MS} ms");
                close(c, now, CLOSE_PROTOCOL, why, &mut self.events);
            }
        }
        self.drive(now);
    }

    /// The next datagram to send: destination and bytes.
    pub fn poll_transmit(&mut self) -> Option<(SocketAddr, Bytes)> {
        self.transmits.pop_front()
    }

    /// The next event for the caller.
    pub fn poll_event(&mut self) -> Option<TransportEvent> {
        self.events.pop_front()
    }

    /// Closes every connection (the peers see a shutdown); keep driving until
    /// [`Transport::is_idle`] to let the closes go out.
    pub fn close_all(&mut self, now: Instant) {
        for c in self.conns.values_mut() {
            c.conn.close(
                now,
                VarInt::from_u32(CLOSE_SHUTDOWN),
                Bytes::from_static(b"node shutting down"),
            );
        }
        self.outgoing.clear();
        self.drive(now);
    }

    /// No connection is left (all drained).
    pub fn is_idle(&self) -> bool {
        self.conns.is_empty()
    }

    /// Runs every connection until it has nothing more to do right now: endpoint bookkeeping,
    /// application events, queued frames into streams, datagrams out.
    fn drive(&mut self, now: Instant) {
        let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        for ch in handles {
            self.drive_one(now, ch);
        }
    }

    fn drive_one(&mut self, now: Instant, ch: ConnectionHandle) {
        let mut drained = false;
        // Two passes: what the application events cause (closes, stream writes) produces new
        // endpoint events and datagrams.
        for _ in 0..2 {
            let Some(c) = self.conns.get_mut(&ch) else {
                return;
            };
            while let Some(ev) = c.conn.poll_endpoint_events() {
                drained |= ev.is_drained();
                if let Some(back) = self.endpoint.handle_event(ch, ev) {
                    c.conn.handle_event(back);
                }
            }
            while let Some(ev) = c.conn.poll() {
                on_event(now, c, ev, &mut self.events);
            }
            flush(c);
            let mut buf = std::mem::take(&mut self.buf);
            loop {
                buf.clear();
                let Some(t) = c.conn.poll_transmit(now, 1, &mut buf) else {
                    break;
                };
                // The datagram leaves in the buffer it was built in (no copy); the next one
                // gets a new buffer of the same size.
                let capacity = buf.capacity();
                let mut out = std::mem::replace(&mut buf, Vec::with_capacity(capacity));
                out.truncate(t.size);
                self.transmits.push_back((t.destination, Bytes::from(out)));
            }
            self.buf = buf;
        }
        let Some(c) = self.conns.get_mut(&ch) else {
            return;
        };
        if std::mem::take(&mut c.just_identified) {
            if let Some(node) = c.peer {
                self.replace_older(now, ch, node);
            }
        }
        let Some(c) = self.conns.get_mut(&ch) else {
            return;
        };
        if drained {
            lost(c, "connection closed".to_string(), &mut self.events);
        }
        if c.reported {
            // The next send to that node dials a new connection.
            if let Some(node) = c.dialled {
                if self.outgoing.get(&node) == Some(&ch) {
                    self.outgoing.remove(&node);
                }
            }
        }
        if drained {
            self.conns.remove(&ch);
        }
    }
}

impl Transport {
    /// `node` dialled us again (connection `newest`) while its previous connection to us
    /// still looked alive: it restarted (or lost that connection). The older connection from
    /// it goes, and so does ours to it if nothing came back on it for
    /// `CLUSTER_STALE_OUTGOING_MS` — after a restart that one leads to the old incarnation,
    /// whose packets the new one may not answer with a reset (a stale handshake flight is
    /// ignored), so it would only end at the idle timeout. Dialling again costs a round trip;
    /// what was queued on it is dropped (delivery is at most once).
    fn replace_older(&mut self, now: Instant, newest: ConnectionHandle, node: NodeId) {
        let older: Vec<ConnectionHandle> = self
            .conns
            .iter()
            .filter(|(h, c)| {
                **h != newest && c.dialled.is_none() && c.peer == Some(node) && !c.reported
            })
            .map(|(h, _)| *h)
            .collect();
        if older.is_empty() {
            return;
        }
        let why = format!("node {node} connected again: it restarted");
        for h in older {
            if let Some(c) = self.conns.get_mut(&h) {
                close(c, now, CLOSE_SHUTDOWN, why.clone(), &mut self.events);
            }
        }
        let stale = Duration::from_millis(CLUSTER_STALE_OUTGOING_MS);
        let out = self.outgoing.get(&node).copied();
        if let Some(c) = out.and_then(|out| self.conns.get_mut(&out)) {
            if now.saturating_duration_since(c.last_rx) >= stale {
                close(c, now, CLOSE_SHUTDOWN, why, &mut self.events);
                self.outgoing.remove(&node);
            }
        }
        // (Their close frames leave on the next drive or timer; this drive may have passed
        // them already.)
    }
}

fn lost(c: &mut Conn, reason: String, events: &mut VecDeque<TransportEvent>) {
    if c.reported {
        return;
    }
    c.reported = true;
    c.hello_due = None;
    c.queue.clear();
    c.queued_bytes = 0;
    events.push_back(TransportEvent::Disconnected {
        node: c.peer,
        outgoing: c.dialled.is_some(),
        reason,
    });
}

fn close(
    c: &mut Conn,
    now: Instant,
    code: u32,
    reason: String,
    events: &mut VecDeque<TransportEvent>,
) {
    c.conn
        .close(now, VarInt::from_u32(code), Bytes::from(reason.clone()));
    lost(c, reason, events);
}

fn on_event(now: Instant, c: &mut Conn, ev: Event, events: &mut VecDeque<TransportEvent>) {
    match ev {
        Event::Connected => {
            if let Some(node) = c.dialled {
                c.connected = true;
                events.push_back(TransportEvent::Connected {
                    node,
                    outgoing: true,
                });
            }
        }
        Event::ConnectionLost { reason } => lost(c, reason.to_string(), events),
        Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
            while let Some(id) = c.conn.streams().accept(Dir::Uni) {
                if c.dialled.is_some() || c.stream.is_some() {
                    close(c, now, CLOSE_PROTOCOL, "unexpected stream".into(), events);
                    return;
                }
                c.stream = Some(id);
                read(now, c, events);
            }
        }
        Event::Stream(StreamEvent::Readable { .. }) => read(now, c, events),
        Event::Stream(StreamEvent::Finished { .. })
        | Event::Stream(StreamEvent::Stopped { .. }) => {
            close(c, now, CLOSE_PROTOCOL, "stream ended".into(), events);
        }
        _ => {}
    }
}

/// Reads the accepted connection's stream: the hello first, then messages. Until the hello
/// has been accepted, no more than the hello's own bytes are read, so a peer that has not
/// named itself gets nothing buffered beyond them; a first frame that does not announce a
/// hello's length is refused at once.
fn read(now: Instant, c: &mut Conn, events: &mut VecDeque<TransportEvent>) {
    let Some(id) = c.stream else { return };
    if c.dialled.is_some() {
        return;
    }
    loop {
        let identified = c.peer.is_some();
        let mut ended = None;
        {
            let mut recv = c.conn.recv_stream(id);
            let Ok(mut chunks) = recv.read(true) else {
                return;
            };
            loop {
                let max = if identified {
                    usize::MAX
                } else {
                    frame::HELLO_FRAME_BYTES.saturating_sub(c.decoder.buffered())
                };
                if max == 0 {
                    break;
                }
                match chunks.next(max) {
                    Ok(Some(chunk)) => c.decoder.push(&chunk.bytes),
                    Ok(None) => {
                        ended = Some("stream ended".to_string());
                        break;
                    }
                    Err(quinn_proto::ReadError::Blocked) => break,
                    Err(quinn_proto::ReadError::Reset(code)) => {
                        ended = Some(format!("stream reset by the peer (code {code})"));
                        break;
                    }
                }
            }
            let _ = chunks.finalize();
        }
        if let Err((code, why)) = take_frames(c, events) {
            close(c, now, code, why, events);
            return;
        }
        if let Some(why) = ended {
            close(c, now, CLOSE_PROTOCOL, why, events);
            return;
        }
        if identified || c.peer.is_none() {
            return;
        }
        // The hello was just accepted: read what followed it.
    }
}

/// Hands out every complete frame buffered on an accepted connection; the first must be a
/// hello from a node the certificate is issued for. `Err` carries the close code and reason.
fn take_frames(c: &mut Conn, events: &mut VecDeque<TransportEvent>) -> Result<(), (u32, String)> {
    loop {
        let Some(from) = c.peer else {
            let node = match c.decoder.next_hello() {
                Ok(Some(node)) => node,
                Ok(None) => return Ok(()),
                Err(e) => return Err((CLOSE_PROTOCOL, e.to_string())),
            };
            if !peer_is(c, node) {
                let why = format!(
                    "the peer says it is node {node}, its certificate is not for {}",
                    tls::node_name(node)
                );
                return Err((CLOSE_IDENTITY, why));
            }
            c.peer = Some(node);
            c.hello_due = None;
            c.just_identified = true;
            events.push_back(TransportEvent::Connected {
                node,
                outgoing: false,
            });
            continue;
        };
        match c.decoder.next_frame() {
            Ok(Some(body)) => events.push_back(TransportEvent::Message { from, body }),
            Ok(None) => return Ok(()),
            Err(e) => {
                return Err((CLOSE_PROTOCOL, format!("malformed cluster message: {e}")));
            }
        }
    }
}

/// Whether the accepted connection's client certificate is issued for `node`.
fn peer_is(c: &Conn, node: NodeId) -> bool {
    let Some(identity) = c.conn.crypto_session().peer_identity() else {
        return false;
    };
    match identity.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>() {
        Ok(chain) => tls::verify_node_name(&chain, node),
        Err(_) => false,
    }
}

/// Moves queued frames into the dialled connection's stream, as far as flow control allows.
fn flush(c: &mut Conn) {
    if c.dialled.is_none() || !c.connected || c.queue.is_empty() {
        return;
    }
    if c.stream.is_none() {
        // The peer's stream credit can arrive after `Connected` (its transport parameters
        // or MAX_STREAMS in a later packet when the first was lost): open when it is there.
        c.stream = c.conn.streams().open(Dir::Uni);
    }
    let Some(id) = c.stream else { return };
    let chunks = c.queue.make_contiguous();
    // An error is Blocked (`Writable` comes later) or a closed stream (`ConnectionLost`
    // follows); either way nothing was taken.
    if let Ok(written) = c.conn.send_stream(id).write_chunks(chunks) {
        for _ in 0..written.chunks {
            c.queue.pop_front();
        }
        c.queued_bytes = c.queued_bytes.saturating_sub(written.bytes);
    }
}
