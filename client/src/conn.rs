//! The glommio driver of one broker connection: a writer task sends framed requests in order,
//! a reader task splits response frames and hands each to the caller waiting for its
//! correlation id. Requests are pipelined (many in flight); [`crate::protocol::Wire`] does all
//! the protocol work.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures_channel::{mpsc, oneshot};
use futures_lite::io::{ReadHalf, WriteHalf};
use futures_lite::{AsyncReadExt, AsyncWriteExt, StreamExt};
use glommio::net::TcpStream;
use strand_wire::frame::FrameReader;
use strand_wire::kafka::messages::{ApiVersionsRequest, RequestKind, ResponseKind};
use strand_wire::kafka::protocol::StrBytes;

use crate::error::ClientError;
use crate::protocol::Wire;

/// Largest response frame accepted (a Fetch response is bounded by its `max_bytes`).
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;
/// Bytes asked from the socket per read.
const READ_CHUNK_BYTES: usize = 256 << 10;

type Waiter = oneshot::Sender<Result<ResponseKind, ClientError>>;

struct Inner {
    addr: String,
    wire: RefCell<Wire>,
    waiters: RefCell<HashMap<i32, Waiter>>,
    out: mpsc::UnboundedSender<Bytes>,
    /// Why the connection is unusable, once it is.
    failed: RefCell<Option<String>>,
}

/// A connection to one broker; clones share it (on one executor).
#[derive(Clone)]
pub struct BrokerConn {
    inner: Rc<Inner>,
}

impl BrokerConn {
    /// Connects, starts the reader and writer tasks, and negotiates API versions.
    pub async fn connect(addr: &str, client_id: &str) -> Result<BrokerConn, ClientError> {
        let stream = TcpStream::connect(addr).await.map_err(|e| {
            ClientError::Io(std::io::Error::other(format!(
                "cannot connect to {addr}: {e}"
            )))
        })?;
        let _ = stream.set_nodelay(true);
        let (reader, writer) = futures_lite::io::split(stream);
        let (tx, rx) = mpsc::unbounded();
        let conn = BrokerConn {
            inner: Rc::new(Inner {
                addr: addr.to_string(),
                wire: RefCell::new(Wire::new(client_id)),
                waiters: RefCell::new(HashMap::new()),
                out: tx,
                failed: RefCell::new(None),
            }),
        };
        let weak = Rc::downgrade(&conn.inner);
        glommio::spawn_local(async move {
            let result = write_loop(writer, rx).await;
            if let (Err(e), Some(inner)) = (result, weak.upgrade()) {
                fail(&inner, format!("write to {}: {e}", inner.addr));
            }
        })
        .detach();
        let weak = Rc::downgrade(&conn.inner);
        glommio::spawn_local(async move { read_loop(weak, reader).await }).detach();
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_static_str("strand-client");
        req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        match conn.request(RequestKind::ApiVersions(req)).await? {
            ResponseKind::ApiVersions(r) => {
                ClientError::check(r.error_code, None)?;
                conn.inner.wire.borrow_mut().set_versions(&r);
            }
            _ => {
                return Err(ClientError::Protocol(
                    "unexpected ApiVersions answer".into(),
                ))
            }
        }
        Ok(conn)
    }

    pub fn addr(&self) -> &str {
        &self.inner.addr
    }

    pub fn is_failed(&self) -> bool {
        self.inner.failed.borrow().is_some()
    }

    /// The version this connection speaks for `api`.
    pub fn version(&self, api: strand_wire::kafka::messages::ApiKey) -> Result<i16, ClientError> {
        self.inner.wire.borrow().version(api)
    }

    /// Sends a request and waits for its response (no timeout: see [`Self::request_within`]).
    pub async fn request(&self, body: RequestKind) -> Result<ResponseKind, ClientError> {
        let rx = self.start(body, true)?.expect("a response is expected");
        rx.await
            .map_err(|_| ClientError::Io(std::io::Error::other("connection closed")))?
    }

    /// [`Self::request`] with a deadline.
    pub async fn request_within(
        &self,
        body: RequestKind,
        timeout: Duration,
    ) -> Result<ResponseKind, ClientError> {
        let addr = self.inner.addr.clone();
        futures_lite::future::or(self.request(body), async move {
            glommio::timer::sleep(timeout).await;
            Err(ClientError::Timeout(format!(
                "no answer from {addr} in {timeout:?}"
            )))
        })
        .await
    }

    /// Sends a request that gets no response (Produce with acks=0).
    pub fn send_only(&self, body: RequestKind) -> Result<(), ClientError> {
        self.start(body, false).map(|_| ())
    }

    /// Starts a request: framed and queued for the writer, in call order. The returned receiver
    /// resolves with the response.
    pub fn start(
        &self,
        body: RequestKind,
        expect_response: bool,
    ) -> Result<Option<oneshot::Receiver<Result<ResponseKind, ClientError>>>, ClientError> {
        if let Some(why) = self.inner.failed.borrow().as_ref() {
            return Err(ClientError::Io(std::io::Error::other(why.clone())));
        }
        let (id, frame) = self.inner.wire.borrow_mut().encode(&body)?;
        let rx = if expect_response {
            let (tx, rx) = oneshot::channel();
            self.inner.waiters.borrow_mut().insert(id, tx);
            Some(rx)
        } else {
            self.inner.wire.borrow_mut().forget(id);
            None
        };
        self.inner
            .out
            .unbounded_send(frame)
            .map_err(|_| ClientError::Io(std::io::Error::other("connection closed")))?;
        Ok(rx)
    }
}

fn fail(inner: &Inner, why: String) {
    inner.failed.borrow_mut().get_or_insert(why.clone());
    for (_, w) in inner.waiters.borrow_mut().drain() {
        let _ = w.send(Err(ClientError::Io(std::io::Error::other(why.clone()))));
    }
}

async fn write_loop(
    mut writer: WriteHalf<TcpStream>,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
) -> std::io::Result<()> {
    while let Some(frame) = rx.next().await {
        writer.write_all(&frame).await?;
        // Write whatever else is already queued before flushing (fewer syscalls under load).
        while let Ok(more) = rx.try_recv() {
            writer.write_all(&more).await?;
        }
        writer.flush().await?;
    }
    writer.close().await
}

async fn read_loop(weak: std::rc::Weak<Inner>, mut reader: ReadHalf<TcpStream>) {
    let mut frames = FrameReader::new(RESPONSE_BYTES_MAX);
    loop {
        let frame = match frames.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => {
                let buf = frames.buffer();
                let len = buf.len();
                buf.resize(len + READ_CHUNK_BYTES, 0);
                let n = reader.read(&mut buf[len..]).await;
                let n = match n {
                    Ok(n) => n,
                    Err(e) => {
                        buf.truncate(len);
                        if let Some(inner) = weak.upgrade() {
                            fail(&inner, format!("read from {}: {e}", inner.addr));
                        }
                        return;
                    }
                };
                buf.truncate(len + n);
                if n == 0 {
                    if let Some(inner) = weak.upgrade() {
                        fail(&inner, format!("{} closed the connection", inner.addr));
                    }
                    return;
                }
                continue;
            }
            Err(e) => {
                if let Some(inner) = weak.upgrade() {
                    fail(&inner, format!("bad frame from {}: {e}", inner.addr));
                }
                return;
            }
        };
        let Some(inner) = weak.upgrade() else { return };
        let decoded = inner.wire.borrow_mut().decode(frame);
        match decoded {
            Ok((id, body)) => {
                if let Some(w) = inner.waiters.borrow_mut().remove(&id) {
                    let _ = w.send(Ok(body));
                }
            }
            Err(e) => {
                fail(&inner, format!("{}: {e}", inner.addr));
                return;
            }
        }
    }
}
