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
//! Anything that does not parse as Kafka — a bad frame size, an unknown API, a body that does
//! not decode — is logged with the peer address and the connection is closed once the replies
//! already queued are written; other connections are unaffected.

use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_channel::mpsc;
use futures_lite::io::{ReadHalf, WriteHalf};
use futures_lite::{AsyncReadExt, AsyncWriteExt, StreamExt};
use glommio::net::TcpStream;
use glommio::sync::{Semaphore, StaticPermit};
use strand_wire::api::{decode_request, encode_response, peek_header};
use strand_wire::frame::FrameReader;
use strand_wire::kafka::messages::{ApiKey, ResponseKind};
use strand_wire::ErrorCode;
use tracing::{debug, warn};

use super::{api_versions, handle, supported, PendingReply, Reply};
use crate::limits;
use crate::node::Node;

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// A reply on its way to the writer, with what it needs to be encoded.
struct Queued {
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    reply: PendingReply,
    /// Holds one of the connection's in-flight slots until written.
    _slot: StaticPermit,
}

pub async fn serve(node: Rc<Node>, stream: TcpStream) -> io::Result<()> {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let _ = stream.set_nodelay(true);
    let (reader, writer) = futures_lite::io::split(stream);
    let (tx, rx) = mpsc::unbounded();
    let writing = glommio::spawn_local(write_replies(writer, rx, peer.clone()));
    let read_result = read_requests(&node, reader, tx, &peer).await;
    let write_result = writing.await;
    read_result.and(write_result)
}

async fn read_requests(
    node: &Rc<Node>,
    mut stream: ReadHalf<TcpStream>,
    tx: mpsc::UnboundedSender<Queued>,
    peer: &str,
) -> io::Result<()> {
    let slots = Rc::new(Semaphore::new(
        limits::IN_FLIGHT_REQUESTS_PER_CONNECTION as u64,
    ));
    let mut reader = FrameReader::new(limits::FRAME_BYTES_MAX);
    let idle_ms = u64::try_from(node.config().connections_max_idle_ms).unwrap_or(u64::MAX);
    let all_slots = limits::IN_FLIGHT_REQUESTS_PER_CONNECTION as u64;
    let mut frame_started: Option<Instant> = None;
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
            buf.resize(len + READ_CHUNK_BYTES, 0);
            let read = stream.read(&mut buf[len..]);
            let outcome = match wait {
                Some((limit, why)) => {
                    let timer = async move {
                        glommio::timer::sleep(limit).await;
                        Err(why)
                    };
                    futures_lite::future::or(async { Ok(read.await) }, timer).await
                }
                None => Ok(read.await),
            };
            let n = match outcome {
                Ok(Ok(n)) => n,
                Ok(Err(e)) => {
                    buf.truncate(len);
                    return Err(e);
                }
                Err(why) => {
                    debug!(%peer, buffered = len, "closing connection: {why}");
                    return Ok(());
                }
            };
            buf.truncate(len + n);
            if n == 0 {
                return Ok(());
            }
        };
        frame_started = None;
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
        let version = prefix.api_version;
        let queue = |version: i16, reply: PendingReply, slot: StaticPermit| {
            let q = Queued {
                api,
                version,
                correlation_id: prefix.correlation_id,
                reply,
                _slot: slot,
            };
            tx.unbounded_send(q)
                .map_err(|_| io::Error::other("writer gone"))
        };
        let in_range = supported(api).is_some_and(|(lo, hi)| version >= lo && version <= hi);
        if !in_range {
            if api == ApiKey::ApiVersions {
                // KIP-511: answer at v0 with the table, so the client can pick a version.
                let table = api_versions::handle(ErrorCode::UnsupportedVersion.code());
                let reply = Reply::Kind(Box::new(ResponseKind::ApiVersions(table)));
                queue(0, Box::pin(std::future::ready(reply)), slot)?;
                continue;
            }
            warn!(%peer, ?api, version, "unsupported API or version; closing connection");
            return Ok(());
        }
        let (header, _, request) = match decode_request(frame) {
            Ok(x) => x,
            Err(e) => {
                warn!(%peer, error = %e, "undecodable request; closing connection");
                return Ok(());
            }
        };
        debug!(%peer, ?api, version, correlation_id = header.correlation_id, "request");
        let pending = handle(node, &header, request).await;
        queue(version, pending, slot)?;
    }
}

async fn write_replies(
    mut stream: WriteHalf<TcpStream>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    peer: String,
) -> io::Result<()> {
    while let Some(q) = rx.next().await {
        match q.reply.await {
            Reply::Kind(body) => {
                let bytes =
                    encode_response(q.api, q.version, q.correlation_id, &body).map_err(|e| {
                        io::Error::other(format!(
                            "cannot encode {:?} v{} response: {e}",
                            q.api, q.version
                        ))
                    })?;
                stream.write_all(&bytes).await?;
            }
            Reply::Segments(segments) => {
                // Record sets are slices of the log's own buffers: written as they are.
                for s in &segments {
                    stream.write_all(s).await?;
                }
            }
            Reply::Nothing => continue,
            Reply::Unhandled => {
                tracing::error!(%peer, api = ?q.api, version = q.version, "API in the supported table has no handler; closing connection");
                return Ok(());
            }
        }
        stream.flush().await?;
    }
    stream.flush().await?;
    stream.close().await
}
