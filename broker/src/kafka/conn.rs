//! A client connection: frames in, one request at a time, responses out in order.
//!
//! Kafka serves each connection's requests strictly in order and one at a time (it mutes the
//! socket until the response is written); clients rely on that for ordering, so we do the same.
//! Anything that does not parse as Kafka — a bad frame size, an unknown API, a body that does
//! not decode — is logged with the peer address and the connection is closed; other
//! connections are unaffected.

use std::io;
use std::rc::Rc;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use strand_wire::api::{decode_request, encode_response, peek_header};
use strand_wire::frame::FrameReader;
use strand_wire::kafka::messages::{ApiKey, ResponseKind};
use strand_wire::ErrorCode;
use tracing::{debug, warn};

use super::{api_versions, handle, supported, Reply};
use crate::limits;
use crate::node::Node;

/// Bytes requested from the socket per read.
const READ_CHUNK_BYTES: usize = 64 << 10;

pub async fn serve(node: Rc<Node>, mut stream: TcpStream) -> io::Result<()> {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let _ = stream.set_nodelay(true);
    let mut reader = FrameReader::new(limits::FRAME_BYTES_MAX);
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
            buf.resize(len + READ_CHUNK_BYTES, 0);
            let n = match stream.read(&mut buf[len..]).await {
                Ok(n) => n,
                Err(e) => {
                    buf.truncate(len);
                    return Err(e);
                }
            };
            buf.truncate(len + n);
            if n == 0 {
                return Ok(());
            }
        };
        let Some(prefix) = peek_header(&frame) else {
            warn!(%peer, "request shorter than a header; closing connection");
            return Ok(());
        };
        let Ok(api) = ApiKey::try_from(prefix.api_key) else {
            warn!(%peer, api_key = prefix.api_key, "unknown API key; closing connection");
            return Ok(());
        };
        let version = prefix.api_version;
        let in_range = supported(api).is_some_and(|(lo, hi)| version >= lo && version <= hi);
        if !in_range {
            if api == ApiKey::ApiVersions {
                // KIP-511: answer at v0 with the table, so the client can pick a version.
                let body = ResponseKind::ApiVersions(api_versions::handle(
                    ErrorCode::UnsupportedVersion.code(),
                ));
                write(&mut stream, api, 0, prefix.correlation_id, &body).await?;
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
        match handle(&node, &header, request).await {
            Reply::Kind(response) => {
                write(&mut stream, api, version, header.correlation_id, &response).await?
            }
            Reply::Segments(segments) => {
                // Record sets are slices of the log's own buffers: written as they are.
                for s in &segments {
                    stream.write_all(s).await?;
                }
                stream.flush().await?;
            }
            Reply::Nothing => {}
            Reply::Unhandled => {
                tracing::error!(%peer, ?api, version, "API in the supported table has no handler; closing connection");
                return Ok(());
            }
        }
    }
}

async fn write(
    stream: &mut TcpStream,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> io::Result<()> {
    let bytes = encode_response(api, version, correlation_id, body)
        .map_err(|e| io::Error::other(format!("cannot encode {api:?} v{version} response: {e}")))?;
    stream.write_all(&bytes).await?;
    stream.flush().await
}
