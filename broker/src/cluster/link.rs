//! One node's cluster transport on a glommio reactor.
//!
//! Two tasks share the sans-IO [`Transport`]: the receiver waits on the UDP socket and feeds
//! every datagram in; the pump sends what the transport hands out, moves its events to the
//! caller's queue, and fires its timers. Callers [`ClusterLink::send`] (which kicks the pump)
//! and await [`ClusterLink::next_event`]. No I/O future is ever cancelled: the receiver owns
//! the socket's reads, the pump races only a timer and an event listener.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use event_listener::Event;
use glommio::net::UdpSocket;
use strand_cluster_core::records::NodeId;
use strand_cluster_core::transport::tls::NodeCredentials;
use strand_cluster_core::transport::{SendError, Transport, TransportEvent};

/// Largest datagram read (UDP's maximum payload).
const DATAGRAM_MAX_BYTES: usize = 65_536;

struct Inner {
    me: NodeId,
    transport: RefCell<Transport>,
    /// The bound address (the socket itself belongs to the two tasks, so it closes, and the
    /// port is free again, as soon as they end).
    local: SocketAddr,
    /// The socket's fd, for `close` to shut its reading side while the tasks still hold it.
    fd: i32,
    /// The receiver and the pump, awaited by `close`.
    tasks: RefCell<Vec<glommio::Task<()>>>,
    /// Something for the pump: a datagram arrived, a message was queued, the link closes.
    kick: Event,
    events: RefCell<VecDeque<TransportEvent>>,
    event_ready: Event,
    closed: Cell<bool>,
}

/// A node's end of the cluster transport, driven on the current glommio executor.
#[derive(Clone)]
pub struct ClusterLink {
    inner: Rc<Inner>,
}

fn bound_addr(socket: &UdpSocket) -> io::Result<SocketAddr> {
    socket
        .local_addr()
        .map_err(|e| io::Error::other(format!("cluster listener address: {e}")))
}

pub(super) fn set_int_opt(fd: i32, level: i32, opt: i32, val: i32) {
    // SAFETY: setsockopt with an int option on a socket the caller owns. A refused option
    // (e.g. a buffer above net.core.rmem_max) leaves the default: not fatal.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &val as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
    }
}

impl ClusterLink {
    /// Binds `listen` (UDP) for node `me` and starts the link's tasks.
    pub fn bind(
        me: NodeId,
        creds: &NodeCredentials,
        listen: SocketAddr,
    ) -> io::Result<ClusterLink> {
        let transport = Transport::new(me, creds, None)?;
        // std's bind, not glommio's: glommio sets SO_REUSEPORT, so a second process (or a
        // stale socket) on the same port would silently take half the peers' datagrams.
        // Here a port in use is an error.
        let std_socket = std::net::UdpSocket::bind(listen)
            .map_err(|e| io::Error::new(e.kind(), format!("cluster listener {listen}: {e}")))?;
        std_socket.set_nonblocking(true)?;
        // SAFETY: the fd comes from a socket we own and give up here (into_raw_fd).
        let socket = unsafe { UdpSocket::from_raw_fd(std_socket.into_raw_fd()) };
        let local = bound_addr(&socket)?;
        let fd = socket.as_raw_fd();
        // Room for a flow-control window of datagrams; never fragment (QUIC's MTU discovery).
        set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20);
        set_int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 8 << 20);
        let (level, opt) = if listen.is_ipv4() {
            (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER)
        } else {
            (libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER)
        };
        set_int_opt(fd, level, opt, libc::IP_PMTUDISC_DO);
        let inner = Rc::new(Inner {
            me,
            transport: RefCell::new(transport),
            local,
            fd,
            tasks: RefCell::new(Vec::new()),
            kick: Event::new(),
            events: RefCell::new(VecDeque::new()),
            event_ready: Event::new(),
            closed: Cell::new(false),
        });
        let socket = Rc::new(socket);
        let receiver = glommio::spawn_local(receive(Rc::clone(&inner), Rc::clone(&socket)));
        let pumper = glommio::spawn_local(pump(Rc::clone(&inner), socket));
        inner.tasks.borrow_mut().extend([receiver, pumper]);
        Ok(ClusterLink { inner })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.inner.local)
    }

    /// Where `node` is reached.
    pub fn add_peer(&self, node: NodeId, addr: SocketAddr) {
        self.inner.transport.borrow_mut().add_peer(node, addr);
    }

    /// Queues `body` for `node` (at most once, in order; see `Transport`).
    pub fn send(&self, node: NodeId, body: Bytes) -> Result<(), SendError> {
        self.send_chunks(node, vec![body])
    }

    /// Queues a message made of `chunks` for `node`, each buffer as it is (no copy).
    pub fn send_chunks(&self, node: NodeId, chunks: Vec<Bytes>) -> Result<(), SendError> {
        if self.inner.closed.get() {
            return Err(SendError::Closed);
        }
        let r = self
            .inner
            .transport
            .borrow_mut()
            .send_chunks(Instant::now(), node, chunks);
        self.inner.kick.notify(1);
        r
    }

    /// Bytes queued for `node` that QUIC has not taken yet (for backpressure).
    pub fn queued_bytes(&self, node: NodeId) -> usize {
        self.inner.transport.borrow().queued_bytes(node)
    }

    /// The next event; `None` once the link is closed and drained.
    pub async fn next_event(&self) -> Option<TransportEvent> {
        loop {
            let listener = self.inner.event_ready.listen();
            if let Some(ev) = self.inner.events.borrow_mut().pop_front() {
                return Some(ev);
            }
            if self.inner.closed.get() {
                return None;
            }
            listener.await;
        }
    }

    /// Closes every connection, gives the closes up to `linger` to go out, stops the tasks.
    pub async fn close(&self, linger: Duration) {
        self.inner.transport.borrow_mut().close_all(Instant::now());
        self.inner.kick.notify(1);
        let deadline = Instant::now() + linger;
        while !self.inner.transport.borrow().is_idle() && Instant::now() < deadline {
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
        if self.inner.closed.replace(true) {
            return; // closed already (or being closed by another caller)
        }
        // Wake the receiver out of its wait: on Linux, shutting a UDP socket's reading side
        // ends a pending receive with 0 bytes; it then sees `closed` and drops its share of
        // the socket. Done before any await, while both tasks (and so the fd) are alive.
        // SAFETY: shutdown(2) on the fd that the tasks' socket owns.
        unsafe {
            libc::shutdown(self.inner.fd, libc::SHUT_RD);
        }
        self.inner.kick.notify(usize::MAX);
        self.inner.event_ready.notify(usize::MAX);
        let tasks: Vec<_> = self.inner.tasks.borrow_mut().drain(..).collect();
        for t in tasks {
            let ended = glommio::timer::timeout(Duration::from_secs(1), async {
                t.await;
                Ok(())
            })
            .await;
            if ended.is_err() {
                tracing::warn!(
                    node = self.inner.me,
                    "cluster link task did not end within 1 s"
                );
            }
        }
    }
}

/// Reads datagrams into the transport until the link closes.
async fn receive(inner: Rc<Inner>, socket: Rc<UdpSocket>) {
    let mut buf = vec![0u8; DATAGRAM_MAX_BYTES];
    while !inner.closed.get() {
        match socket.recv_from(&mut buf).await {
            Ok((0, _)) => {} // `close` shut the socket (QUIC never sends empty datagrams)
            Ok((n, from)) => {
                inner.transport.borrow_mut().handle_datagram(
                    Instant::now(),
                    from,
                    BytesMut::from(&buf[..n]),
                );
                inner.kick.notify(1);
            }
            Err(e) => {
                // ICMP errors surface here on Linux (a peer's port closed): not fatal.
                tracing::debug!(error = %e, "cluster socket receive");
                // A pause, so a persistent error cannot spin the executor.
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
        }
    }
}

/// Sends, delivers events and fires timers until the link closes.
async fn pump(inner: Rc<Inner>, socket: Rc<UdpSocket>) {
    loop {
        let listener = inner.kick.listen();
        loop {
            let next = inner.transport.borrow_mut().poll_transmit();
            let Some((to, data)) = next else { break };
            if let Err(e) = socket.send_to(&data, to).await {
                tracing::debug!(error = %e, peer = %to, "cluster socket send");
            }
        }
        let mut delivered = false;
        while let Some(ev) = inner.transport.borrow_mut().poll_event() {
            if let TransportEvent::Connected { node, outgoing } = &ev {
                tracing::debug!(
                    node = inner.me,
                    peer = node,
                    outgoing,
                    "cluster connection up"
                );
            }
            if let TransportEvent::Disconnected { node, reason, .. } = &ev {
                tracing::info!(node = inner.me, peer = ?node, %reason, "cluster connection ended");
            }
            inner.events.borrow_mut().push_back(ev);
            delivered = true;
        }
        if delivered {
            inner.event_ready.notify(usize::MAX);
        }
        if inner.closed.get() {
            return;
        }
        let timeout = inner.transport.borrow_mut().poll_timeout();
        let fired = match timeout {
            Some(at) => {
                let wait = at.saturating_duration_since(Instant::now());
                futures_lite::future::or(
                    async {
                        listener.await;
                        false
                    },
                    async {
                        glommio::timer::sleep(wait).await;
                        true
                    },
                )
                .await
            }
            None => {
                listener.await;
                false
            }
        };
        if fired {
            inner.transport.borrow_mut().handle_timeout(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_cluster_core::transport::certs::DevCa;

    /// Runs `f` on an executor of its own thread.
    fn spawn_node<T: Send + 'static>(
        f: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = T>>> + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        std::thread::spawn(move || {
            glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
                .make()
                .expect("executor")
                .run(f())
        })
    }

    #[test]
    fn two_nodes_exchange_ordered_messages_over_real_udp() {
        let ca = DevCa::new("link test").unwrap();
        let (c1, c2) = (ca.issue(1).unwrap(), ca.issue(2).unwrap());
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (addr1_tx, addr1_rx) = std::sync::mpsc::channel();
        let count = 2_000u32;
        let node2 = spawn_node(move || {
            Box::pin(async move {
                let link = ClusterLink::bind(2, &c2, "127.0.0.1:0".parse().unwrap()).unwrap();
                addr_tx.send(link.local_addr().unwrap()).unwrap();
                // Node 1 binds at once and says where (a blocking wait of a moment, in a test).
                let addr1 = addr1_rx.recv_timeout(Duration::from_secs(10)).unwrap();
                link.add_peer(1, addr1);
                let mut got = Vec::new();
                while got.len() < count as usize {
                    match link.next_event().await {
                        Some(TransportEvent::Message { from: 1, body }) => got.push(body),
                        Some(_) => {}
                        None => break,
                    }
                }
                // Answer so node 1 knows the other direction works too.
                link.send(1, Bytes::from_static(b"all here")).unwrap();
                let deadline = Instant::now() + Duration::from_secs(10);
                while link.queued_bytes(1) > 0 && Instant::now() < deadline {
                    glommio::timer::sleep(Duration::from_millis(5)).await;
                }
                glommio::timer::sleep(Duration::from_millis(200)).await;
                link.close(Duration::from_secs(1)).await;
                got
            })
        });
        let addr2 = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let node1 = spawn_node(move || {
            Box::pin(async move {
                let link = ClusterLink::bind(1, &c1, "127.0.0.1:0".parse().unwrap()).unwrap();
                link.add_peer(2, addr2);
                addr1_tx.send(link.local_addr().unwrap()).unwrap();
                for i in 0..count {
                    let mut body = i.to_be_bytes().to_vec();
                    body.resize(4 + (i as usize % 5) * 3000, 0);
                    while let Err(SendError::Full(_)) = link.send(2, Bytes::from(body.clone())) {
                        glommio::timer::sleep(Duration::from_millis(1)).await;
                    }
                }
                let answer = glommio::timer::timeout(Duration::from_secs(20), async {
                    loop {
                        match link.next_event().await {
                            Some(TransportEvent::Message { from: 2, body }) => {
                                return Ok::<_, glommio::GlommioError<()>>(Some(body))
                            }
                            Some(_) => {}
                            None => return Ok(None),
                        }
                    }
                })
                .await
                .ok()
                .flatten();
                link.close(Duration::from_secs(1)).await;
                answer
            })
        });
        let answer = node1.join().unwrap();
        let got = node2.join().unwrap();
        assert_eq!(got.len(), count as usize);
        for (i, body) in got.iter().enumerate() {
            assert_eq!(
                &body[..4],
                &(i as u32).to_be_bytes(),
                "message {i} in order"
            );
            assert_eq!(body.len(), 4 + (i % 5) * 3000);
        }
        assert_eq!(answer.as_deref(), Some(&b"all here"[..]));
    }
}
