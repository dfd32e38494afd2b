//! A client connection: frames in, replies out in request order.
//!
//! Kafka clients rely on replies coming back in the order they sent requests, and on the
//! effects of one request (appends) preceding the next. The reader task runs each request up
//! to its ordering point (`kafka::handle`: for Produce, the appends) before reading the next
//! one, and queues the rest of it — for `acks=-1`, waiting for the fdatasync — to the writer
//! task, which writes replies strictly in order. So a producer with five requests in flight
//! gets its appends in order and shares fdatasyncs, instead of paying one per request.
//!
//! Time limits on reading: a connection with no request in flight that sends nothing for
//! `connections.max.idle.ms` is closed (as Kafka closes idle connections), and a request
//! frame that has started arriving must be complete within `limits::FRAME_READ_TIMEOUT_MS`
//! (or the idle limit, if lower): a client that sends half a frame and stops holds its buffer
//! no longer than that.
//!
//! Memory: a request frame over `limits::CONNECTION_FREE_BYTES` is read only once the shard's
//! connection budget (`limits::SHARD_CONNECTION_MEMORY_BYTES`) covers it, and a ready reply
//! (a fetch result) queued beyond a connection's free allowance holds budget until written;
//! a connection over budget stops reading until others give some back. A reply that makes no
//! progress for `limits::REPLY_WRITE_TIMEOUT_MS` closes the connection (the client stopped
//! reading), which frees what its queue held.
//!
//! Anything that does not parse as Kafka — a bad frame size, an unknown API, a body that does
//! not decode — is logged with the peer address and the connection is closed once the replies
//! already queued are written; other connections are unaffected.

use std::cell::Cell;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_channel::{mpsc, oneshot};
use futures_lite::io::{ReadHalf, WriteHalf};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, StreamExt};
use glommio::net::TcpStream;
use glommio::sync::{Semaphore, StaticPermit};
use strand_wire::api::{decode_request, encode_response, peek_header};
use strand_wire::frame::FrameReader;
use strand_wire::kafka::messages::{ApiKey, ResponseKind};
use strand_wire::ErrorCode;
use tracing::{debug, warn};

use super::{api_versions, handle, supported, Handled, PendingReply, Reply};
use crate::limits;
use crate::node::Node;
use crate::security::config::Listener;
use crate::security::session::{Gate, Session};
use crate::stages::{Stage, Stages};

/// Bytes requested from the socket per read while no frame is partly read and the client has
/// sent something (a frame's size is then known and the rest is read in pieces of up to
/// `limits::REPLY_WRITE_CHUNK_BYTES`). An idle connection holds no buffer (`read_into_empty`).
const READ_CHUNK_BYTES: usize = 16 << 10;

/// A reply on its way to the writer, with what it needs to be encoded.
struct Queued {
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    reply: Outgoing,
    /// Holds one of the connection's in-flight slots until written.
    _slot: StaticPermit,
    /// For the stage histograms: when the frame was complete and when it was decoded.
    received: Instant,
    decoded: Instant,
}

enum Outgoing {
    /// Encoded already (everything but a produce waiting for its append): `bytes` counted in
    /// the connection's queued total, `budget` what it holds of the shard's memory budget.
    Ready {
        segments: Vec<Bytes>,
        bytes: usize,
        _budget: Option<StaticPermit>,
    },
    Later(PendingReply),
}

/// Memory permits are counted in KiB, rounded up, and never more than the whole budget.
fn budget_kib(bytes: usize) -> u64 {
    let kib = bytes.div_ceil(1024) as u64;
    kib.min((limits::SHARD_CONNECTION_MEMORY_BYTES >> 10) as u64)
}

/// A new connection on `listener`: the TLS handshake where the listener has TLS, then
/// requests until the client leaves. Until it is authenticated (TLS, and SASL where the
/// listener has SASL) the connection has `limits::AUTHENTICATION_TIMEOUT_MS`.
pub async fn accept(
    node: Rc<Node>,
    stream: TcpStream,
    peer: std::net::SocketAddr,
    listener: &Listener,
) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let limit = Duration::from_millis(limits::AUTHENTICATION_TIMEOUT_MS);
    let host = peer.ip().to_string();
    let peer = peer.to_string();
    if !listener.protocol.tls() {
        let session = Rc::new(Session::new(listener.clone(), host, None));
        return serve_within(node, stream, session, peer, limit).await;
    }
    let Some(tls) = node.shared.security.tls.clone() else {
        return Err(io::Error::other(
            "a TLS listener without a TLS configuration",
        ));
    };
    // rustls reads the socket 4 KiB at a time (a syscall each at hundreds of MB/s): a buffer
    // below it reads `limits::TLS_READ_BUFFER_BYTES` per refill.
    let stream = futures_lite::io::BufReader::with_capacity(limits::TLS_READ_BUFFER_BYTES, stream);
    let handshake = futures_rustls::TlsAcceptor::from(tls).accept(stream);
    let timeout = async {
        glommio::timer::sleep(limit).await;
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "TLS handshake timed out",
        ))
    };
    let stream = match futures_lite::future::or(handshake, timeout).await {
        Ok(s) => s,
        Err(e) => {
            crate::metrics::with(|m| m.tls_handshake_failures += 1);
            debug!(%peer, error = %e, "TLS handshake failed; closing connection");
            return Ok(());
        }
    };
    let principal = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(|cert| crate::security::tls::certificate_principal(cert));
    let session = Rc::new(Session::new(listener.clone(), host, principal));
    serve_within(node, stream, session, peer, limit).await
}

/// Serves the connection; one that has not authenticated within `limit` is closed.
async fn serve_within<S>(
    node: Rc<Node>,
    stream: S,
    session: Rc<Session>,
    peer: String,
    limit: Duration,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    if !session.is_sasl() {
        return serve(node, stream, session, peer).await;
    }
    let watch = Rc::clone(&session);
    let deadline = async move {
        glommio::timer::sleep(limit).await;
        if watch.authenticated() {
            std::future::pending::<()>().await;
        }
        debug!("closing connection: SASL authentication not done in time");
        Ok(())
    };
    futures_lite::future::or(serve(node, stream, session, peer), deadline).await
}

pub async fn serve<S>(
    node: Rc<Node>,
    stream: S,
    session: Rc<Session>,
    peer: String,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let (reader, writer) = futures_lite::io::split(stream);
    let (tx, rx) = mpsc::unbounded();
    let queued = Rc::new(Cell::new(0usize));
    let (stopped_tx, stopped_rx) = oneshot::channel::<()>();
    let writing = glommio::spawn_local({
        let (queued, peer) = (Rc::clone(&queued), peer.clone());
        let stages = Rc::clone(&node.stages);
        async move {
            let result = write_replies(writer, rx, queued, peer, stages).await;
            drop(stopped_tx); // a writer that gives up stops the reader too
            result
        }
    });
    // The reader ends at the client's EOF, on bad input, or when the writer has stopped.
    let read_result = futures_lite::future::or(
        read_requests(&node, &session, reader, tx, &queued, &peer),
        async {
            let _ = stopped_rx.await;
            Ok(())
        },
    )
    .await;
    let write_result = writing.await;
    read_result.and(write_result)
}

async fn read_requests<S: AsyncRead + Unpin>(
    node: &Rc<Node>,
    session: &Rc<Session>,
    mut stream: ReadHalf<S>,
    tx: mpsc::UnboundedSender<Queued>,
    queued: &Rc<Cell<usize>>,
    peer: &str,
) -> io::Result<()> {
    let slots = Rc::new(Semaphore::new(
        limits::IN_FLIGHT_REQUESTS_PER_CONNECTION as u64,
    ));
    let mut reader = FrameReader::new(limits::FRAME_BYTES_MAX);
    let idle_ms = u64::try_from(node.config().connections_max_idle_ms).unwrap_or(u64::MAX);
    let all_slots = limits::IN_FLIGHT_REQUESTS_PER_CONNECTION as u64;
    let mut frame_started: Option<Instant> = None;
    let mut frame_budget: Option<StaticPermit> = None;
    // Bytes the last read returned (sizes the next one).
    let mut last_read = READ_CHUNK_BYTES;
    loop {
        let frame = loop {
            match reader.next_frame() {
                Ok(Some(frame)) => break frame,
                Ok(None) => {}
                Err(e) => {
                    warn!(%peer, error = %e, "closing connection");
                    return Ok(());
                }
            }
            if let Some(size) = reader.pending_frame_bytes() {
                let buf = reader.buffer();
                let api_key = (buf.len() >= 6).then(|| i16::from_be_bytes([buf[4], buf[5]]));
                if let Some(api_key) = api_key {
                    // Before authentication only the SASL APIs pass, and no more than a SASL
                    // token's worth: refused on the header, before the body is read.
                    // (An unknown key on an open listener goes on to the checks below, as before.)
                    let gate = match ApiKey::try_from(api_key) {
                        Ok(api) => session.gate(api, crate::runtime::clock::now_ms()),
                        Err(_) if session.is_sasl() && !session.authenticated() => {
                            Gate::Close("unknown API key before authentication")
                        }
                        Err(_) => Gate::Serve,
                    };
                    if let Gate::Close(why) = gate {
                        warn!(%peer, api_key, size, "closing connection: {why}");
                        return Ok(());
                    }
                    if session.is_sasl()
                        && !session.authenticated()
                        && size > limits::UNAUTHENTICATED_FRAME_BYTES_MAX
                    {
                        warn!(%peer, api_key, size, "closing connection: frame too large before authentication");
                        return Ok(());
                    }
                    let max = limits::request_frame_bytes_max(api_key);
                    if size > max {
                        warn!(%peer, api_key, size, max, "request frame too large for its API; closing connection");
                        return Ok(());
                    }
                }
                if size > limits::CONNECTION_FREE_BYTES
                    && frame_budget.is_none()
                    && api_key.is_some()
                {
                    // A large frame is read only with budget for all of it; waiting for the
                    // budget does not count against the client's frame time.
                    frame_budget = Some(
                        node.connection_memory
                            .acquire_static_permit(budget_kib(size))
                            .await
                            .map_err(|e| io::Error::other(e.to_string()))?,
                    );
                    frame_started = Some(Instant::now());
                }
            }
            // The buffer is zero-filled up to the read's size before each read, so a read is
            // sized by what the last one returned (doubling while reads come back full): a
            // TLS stream gives at most a record or two per read, and zeroing 1 MiB to receive
            // 16 KiB took 15% of a shard at 500 MB/s (#21's profile).
            let chunk = match reader.pending_frame_missing() {
                0 => READ_CHUNK_BYTES,
                missing => missing
                    .min(limits::REPLY_WRITE_CHUNK_BYTES)
                    .min(last_read.saturating_mul(2).max(READ_CHUNK_BYTES)),
            };
            let buf = reader.buffer();
            let len = buf.len();
            // How long this read may wait: the rest of a started frame's time, or the idle
            // limit when nothing is in flight (a parked JoinGroup or a long poll is not idle).
            let wait = if len > 0 {
                let started = *frame_started.get_or_insert_with(Instant::now);
                let limit = Duration::from_millis(limits::FRAME_READ_TIMEOUT_MS.min(idle_ms));
                Some((
                    limit.saturating_sub(started.elapsed()),
                    "a request frame took too long",
                ))
            } else if slots.available() == all_slots {
                Some((
                    Duration::from_millis(idle_ms),
                    "idle (connections.max.idle.ms)",
                ))
            } else {
                None
            };
            let outcome = if len == 0 {
                read_into_empty(&mut stream, buf, chunk, wait).await
            } else {
                buf.resize(len + chunk, 0);
                let outcome = read_timed(&mut stream, &mut buf[len..], wait).await;
                buf.truncate(len + bytes_read(&outcome));
                outcome
            };
            let n = match outcome {
                Ok(Ok(n)) => n,
                Ok(Err(why)) => {
                    debug!(%peer, buffered = len, "closing connection: {why}");
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            if n == 0 {
                debug!(%peer, buffered = len, "connection closed by the client");
                return Ok(());
            }
            last_read = n;
            if reader.pending_frame_missing() > 0 {
                // A large frame arriving as fast as the socket gives it (each read returns
                // at once) must not keep the shard from its other connections.
                glommio::executor().yield_task_queue_now().await;
            }
        };
        frame_started = None;
        let received = Instant::now();
        // Held until the request is handled (the frame's bytes are copied or dropped by then).
        let _frame_budget = frame_budget.take();
        let slot = slots
            .acquire_static_permit(1)
            .await
            .map_err(|e| io::Error::other(e.to_string()))?;
        let Some(prefix) = peek_header(&frame) else {
            warn!(%peer, "request shorter than a header; closing connection");
            return Ok(());
        };
        let Ok(api) = ApiKey::try_from(prefix.api_key) else {
            warn!(%peer, api_key = prefix.api_key, "unknown API key; closing connection");
            return Ok(());
        };
        if let Gate::Close(why) = session.gate(api, crate::runtime::clock::now_ms()) {
            // Unread: an unauthenticated client touches nothing (Kafka closes it the same way).
            warn!(%peer, ?api, "closing connection: {why}");
            crate::metrics::with(|m| m.error(prefix.api_key, crate::metrics::CONNECTION_CLOSED));
            return Ok(());
        }
        let version = prefix.api_version;
        let correlation_id = prefix.correlation_id;
        crate::metrics::with(|m| m.request(prefix.api_key));
        node.stages
            .borrow_mut()
            .record(prefix.api_key, Stage::Queue, received.elapsed());
        let mut decoded = Instant::now();
        let in_range = supported(api).is_some_and(|(lo, hi)| version >= lo && version <= hi);
        let (version, handled) = if in_range {
            let decoding = decoded;
            let (header, _, request) = match decode_request(frame) {
                Ok(x) => x,
                Err(e) => {
                    warn!(%peer, error = %e, "undecodable request; closing connection");
                    crate::metrics::with(|m| {
                        m.error(prefix.api_key, crate::metrics::CONNECTION_CLOSED)
                    });
                    return Ok(());
                }
            };
            decoded = Instant::now();
            node.stages
                .borrow_mut()
                .record(prefix.api_key, Stage::Decode, decoded - decoding);
            debug!(%peer, ?api, version, correlation_id, "request");
            (version, handle(node, session, &header, request).await)
        } else if api == ApiKey::ApiVersions {
            // KIP-511: answer at v0 with the table, so the client can pick a version.
            let table = api_versions::handle(ErrorCode::UnsupportedVersion.code());
            let reply = Reply::Kind(Box::new(ResponseKind::ApiVersions(table)));
            (0, Handled::Now(reply))
        } else {
            warn!(%peer, ?api, version, "unsupported API or version; closing connection");
            crate::metrics::with(|m| m.error(prefix.api_key, crate::metrics::CONNECTION_CLOSED));
            return Ok(());
        };
        let reply = match handled {
            Handled::Now(reply) => {
                let Some(segments) = encode(api, version, correlation_id, reply, peer)? else {
                    continue; // nothing goes back (acks=0)
                };
                node.stages
                    .borrow_mut()
                    .record(prefix.api_key, Stage::Handle, decoded.elapsed());
                let bytes: usize = segments.iter().map(Bytes::len).sum();
                let before = queued.get();
                let over = (before + bytes).saturating_sub(limits::CONNECTION_FREE_BYTES)
                    - before.saturating_sub(limits::CONNECTION_FREE_BYTES);
                let budget = if over > 0 {
                    Some(
                        node.connection_memory
                            .acquire_static_permit(budget_kib(over))
                            .await
                            .map_err(|e| io::Error::other(e.to_string()))?,
                    )
                } else {
                    None
                };
                queued.set(queued.get() + bytes);
                Outgoing::Ready {
                    segments,
                    bytes,
                    _budget: budget,
                }
            }
            Handled::Later(pending) => Outgoing::Later(pending),
        };
        let q = Queued {
            api,
            version,
            correlation_id,
            reply,
            _slot: slot,
            received,
            decoded,
        };
        tx.unbounded_send(q)
            .map_err(|_| io::Error::other("writer gone"))?;
        if session.failed() {
            // A failed authentication: its reply goes out after Kafka's delay, then the close.
            let delay_ms = node.shared.security.config.failed_authentication_delay_ms;
            glommio::timer::sleep(Duration::from_millis(delay_ms)).await;
            debug!(%peer, "closing connection: authentication failed");
            return Ok(());
        }
    }
}

/// A read that may wait at most `wait` (how long, and why the connection closes after it):
/// the bytes read (0 at the client's EOF), or the reason it timed out.
type ReadOutcome = io::Result<Result<usize, &'static str>>;

fn bytes_read(outcome: &ReadOutcome) -> usize {
    match outcome {
        Ok(Ok(n)) => *n,
        _ => 0,
    }
}

async fn read_timed<S: AsyncRead + Unpin>(
    stream: &mut ReadHalf<S>,
    into: &mut [u8],
    wait: Option<(Duration, &'static str)>,
) -> ReadOutcome {
    let read = stream.read(into);
    match wait {
        Some((limit, why)) => {
            let timer = async move {
                glommio::timer::sleep(limit).await;
                Err(why)
            };
            match futures_lite::future::or(async { Ok(read.await) }, timer).await {
                Ok(result) => result.map(Ok),
                Err(why) => Ok(Err(why)),
            }
        }
        None => read.await.map(Ok),
    }
}

/// A read with nothing buffered. If the client has sent something, it is read at once into a
/// `chunk`-sized buffer (a busy connection reads ahead, many small frames per read). If not,
/// the connection is idle: its buffer is given back and the wait is for the next frame's size
/// prefix, read into 4 bytes of the task itself, so an idle connection holds no read buffer
/// (a flood of 1,500 idle connections held 64 KiB each, and the heap they spread over stayed
/// resident after they closed). The frame's buffer is then sized by its prefix.
async fn read_into_empty<S: AsyncRead + Unpin>(
    stream: &mut ReadHalf<S>,
    buf: &mut BytesMut,
    chunk: usize,
    wait: Option<(Duration, &'static str)>,
) -> ReadOutcome {
    debug_assert!(buf.is_empty());
    buf.resize(chunk, 0);
    // Polled once: glommio's read tries the socket without waiting, and otherwise only
    // registers for readiness; nothing was read into `buf` when it is not ready.
    if let Some(result) = futures_lite::future::poll_once(stream.read(&mut buf[..])).await {
        let outcome = result.map(Ok);
        buf.truncate(bytes_read(&outcome));
        return outcome;
    }
    *buf = BytesMut::new();
    let mut prefix = [0u8; 4];
    let outcome = read_timed(stream, &mut prefix, wait).await;
    if let Ok(Ok(n)) = outcome {
        buf.extend_from_slice(&prefix[..n]);
    }
    outcome
}

/// A reply as the segments to write, or `None` when nothing goes back.
fn encode(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    reply: Reply,
    peer: &str,
) -> io::Result<Option<Vec<Bytes>>> {
    match reply {
        Reply::Kind(body) => {
            super::response_errors::each_error(&body, |code| {
                crate::metrics::with(|m| m.error(api as i16, code))
            });
            let bytes = encode_response(api, version, correlation_id, &body).map_err(|e| {
                io::Error::other(format!("cannot encode {api:?} v{version} response: {e}"))
            })?;
            Ok(Some(vec![bytes.freeze()]))
        }
        // Record sets are slices of the log's own buffers: written as they are.
        Reply::Segments(segments) => Ok(Some(segments)),
        Reply::Nothing => Ok(None),
        Reply::Unhandled => {
            tracing::error!(%peer, ?api, version, "API in the supported table has no handler; closing connection");
            Err(io::Error::other("unhandled API"))
        }
    }
}

/// Writes `bytes` in pieces, each of which must go out within `limits::REPLY_WRITE_TIMEOUT_MS`.
async fn write_timed<S: AsyncWrite + Unpin>(
    stream: &mut WriteHalf<S>,
    bytes: &[u8],
) -> io::Result<()> {
    for piece in bytes.chunks(limits::REPLY_WRITE_CHUNK_BYTES) {
        let timer = async {
            glommio::timer::sleep(Duration::from_millis(limits::REPLY_WRITE_TIMEOUT_MS)).await;
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client has not read its replies (a reply made no progress for REPLY_WRITE_TIMEOUT_MS)",
            ))
        };
        futures_lite::future::or(stream.write_all(piece), timer).await?;
    }
    Ok(())
}

async fn write_replies<S: AsyncWrite + Unpin>(
    mut stream: WriteHalf<S>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    queued: Rc<Cell<usize>>,
    peer: String,
    stages: Rc<std::cell::RefCell<Stages>>,
) -> io::Result<()> {
    while let Some(q) = rx.next().await {
        let (segments, bytes) = match q.reply {
            Outgoing::Ready {
                segments, bytes, ..
            } => (segments, bytes),
            Outgoing::Later(pending) => {
                let reply = pending.await;
                stages
                    .borrow_mut()
                    .record(q.api as i16, Stage::Handle, q.decoded.elapsed());
                match encode(q.api, q.version, q.correlation_id, reply, &peer) {
                    Ok(Some(segments)) => (segments, 0),
                    Ok(None) => continue,
                    Err(_) => return Ok(()),
                }
            }
        };
        let writing = Instant::now();
        for s in &segments {
            if let Err(e) = write_timed(&mut stream, s).await {
                if e.kind() == io::ErrorKind::TimedOut {
                    debug!(%peer, queued = queued.get(), "closing connection: {e}");
                }
                return Err(e);
            }
        }
        queued.set(queued.get() - bytes);
        stream.flush().await?;
        let mut stages = stages.borrow_mut();
        stages.record(q.api as i16, Stage::Write, writing.elapsed());
        let took = q.received.elapsed();
        stages.record(q.api as i16, Stage::Total, took);
        crate::metrics::with(|m| m.request_done(q.api as i16, took));
    }
    stream.flush().await?;
    stream.close().await
}
