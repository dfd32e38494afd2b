//! The glommio driver of one broker connection: a writer task sends framed requests in order,
//! a reader task splits response frames and hands each to the caller waiting for its
//! correlation id. Requests are pipelined (many in flight); [`crate::protocol::Wire`] does all
//! the protocol work.
//!
//! The stream is plain TCP or TLS ([`ClientStream`]); on a SASL listener the connection
//! authenticates (SaslHandshake v1, then SaslAuthenticate rounds) right after ApiVersions,
//! before [`BrokerConn::connect_secure`] returns it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_channel::{mpsc, oneshot};
use futures_lite::io::{ReadHalf, WriteHalf};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, StreamExt};
use glommio::net::TcpStream;
use strand_wire::frame::FrameReader;
use strand_wire::kafka::messages::{
    ApiVersionsRequest, RequestKind, ResponseKind, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::sasl::{plain, scram};

use crate::error::ClientError;
use crate::protocol::Wire;
use crate::security::{self, ClientSecurity, SaslSettings};

/// Largest response frame accepted (a Fetch response is bounded by its `max_bytes`).
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;
/// The socket reads under a TLS stream: rustls asks for 4 KiB at a time, which at hundreds
/// of MB/s is one syscall per 4 KiB; a buffer this size below it reads in larger pieces.
const TLS_READ_BUFFER_BYTES: usize = 64 << 10;
/// Bytes asked from the socket per read.
const READ_CHUNK_BYTES: usize = 256 << 10;
/// Deadline of the TLS handshake and of each SASL request.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(30);

/// A broker connection's byte stream: plain TCP, or TLS over it.
pub enum ClientStream {
    Plain(TcpStream),
    Tls(Box<futures_rustls::client::TlsStream<futures_lite::io::BufReader<TcpStream>>>),
}

impl AsyncRead for ClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_close(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

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
    /// Connects in plaintext, starts the reader and writer tasks, and negotiates API versions.
    pub async fn connect(addr: &str, client_id: &str) -> Result<BrokerConn, ClientError> {
        BrokerConn::connect_with(addr, client_id, None, None).await
    }

    /// [`Self::connect`] as `security` says: TLS first if the protocol uses it, then SASL
    /// after ApiVersions. A broker's `session_lifetime_ms` (KIP-368) is not acted on: the
    /// connection is not re-authenticated, the broker closes it when the session expires,
    /// and [`crate::Cluster`] opens a new one for the next request.
    pub async fn connect_secure(
        addr: &str,
        client_id: &str,
        security: &ClientSecurity,
    ) -> Result<BrokerConn, ClientError> {
        let tls = security.tls_config().map_err(ClientError::Invalid)?;
        let sasl = security.sasl_settings().map_err(ClientError::Invalid)?;
        BrokerConn::connect_with(addr, client_id, tls.as_ref(), sasl).await
    }

    /// Connects with an already built TLS configuration (shared by a cluster's connections).
    pub(crate) async fn connect_with(
        addr: &str,
        client_id: &str,
        tls: Option<&Arc<rustls::ClientConfig>>,
        sasl: Option<&SaslSettings>,
    ) -> Result<BrokerConn, ClientError> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| {
            ClientError::Io(std::io::Error::other(format!(
                "cannot connect to {addr}: {e}"
            )))
        })?;
        let _ = tcp.set_nodelay(true);
        let stream = match tls {
            None => ClientStream::Plain(tcp),
            Some(config) => ClientStream::Tls(Box::new(tls_handshake(addr, config, tcp).await?)),
        };
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
        if let Some(sasl) = sasl {
            conn.authenticate(sasl).await?;
        }
        Ok(conn)
    }

    /// SaslHandshake, then the mechanism's SaslAuthenticate rounds.
    async fn authenticate(&self, sasl: &SaslSettings) -> Result<(), ClientError> {
        let mechanism = sasl.mechanism;
        let mut req = SaslHandshakeRequest::default();
        req.mechanism = StrBytes::from_static_str(mechanism.name());
        let body = RequestKind::SaslHandshake(req);
        let ResponseKind::SaslHandshake(r) = self.request_within(body, AUTH_TIMEOUT).await? else {
            return Err(ClientError::Protocol(
                "unexpected SaslHandshake answer".into(),
            ));
        };
        if r.error_code != 0 {
            let enabled: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(ClientError::Kafka {
                code: r.error_code,
                message: Some(format!(
                    "{} does not accept SASL mechanism {mechanism}; it enables: {}",
                    self.inner.addr,
                    if enabled.is_empty() {
                        "none".to_string()
                    } else {
                        enabled.join(", ")
                    }
                )),
            });
        }
        let Some(m) = scram::ScramMechanism::from_mechanism(mechanism) else {
            self.sasl_round(plain::token(&sasl.username, &sasl.password))
                .await?;
            return Ok(());
        };
        let local = |e: strand_wire::sasl::SaslError| {
            ClientError::Auth(format!(
                "SASL {mechanism} authentication with {} failed: {e}",
                self.inner.addr
            ))
        };
        let mut client = scram::ScramClient::new(m, &sasl.username, &sasl.password);
        let server_first = self.sasl_round(client.client_first()).await?;
        let client_final = client.server_first(&server_first).map_err(local)?;
        let server_final = self.sasl_round(client_final).await?;
        client.server_final(&server_final).map_err(local)
    }

    /// One SaslAuthenticate request; the server's token.
    async fn sasl_round(&self, token: Vec<u8>) -> Result<Bytes, ClientError> {
        let mut req = SaslAuthenticateRequest::default();
        req.auth_bytes = Bytes::from(token);
        let body = RequestKind::SaslAuthenticate(req);
        let ResponseKind::SaslAuthenticate(r) = self.request_within(body, AUTH_TIMEOUT).await?
        else {
            return Err(ClientError::Protocol(
                "unexpected SaslAuthenticate answer".into(),
            ));
        };
        ClientError::check(r.error_code, r.error_message.as_deref())?;
        Ok(r.auth_bytes)
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

/// The TLS handshake, within [`AUTH_TIMEOUT`]. A certificate or protocol failure is an
/// [`ClientError::Auth`] that says which setting to look at.
async fn tls_handshake(
    addr: &str,
    config: &Arc<rustls::ClientConfig>,
    tcp: TcpStream,
) -> Result<futures_rustls::client::TlsStream<futures_lite::io::BufReader<TcpStream>>, ClientError>
{
    let name = security::server_name(addr).map_err(ClientError::Invalid)?;
    let connector = futures_rustls::TlsConnector::from(Arc::clone(config));
    // rustls reads the socket 4 KiB at a time: one larger read per refill instead.
    let tcp = futures_lite::io::BufReader::with_capacity(TLS_READ_BUFFER_BYTES, tcp);
    let handshake =
        futures_lite::future::or(async { Some(connector.connect(name, tcp).await) }, async {
            glommio::timer::sleep(AUTH_TIMEOUT).await;
            None
        });
    match handshake.await {
        None => Err(ClientError::Timeout(format!(
            "TLS handshake with {addr} took over {AUTH_TIMEOUT:?}"
        ))),
        Some(Ok(stream)) => Ok(stream),
        Some(Err(e)) => {
            let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
                return Err(ClientError::Io(io::Error::other(format!(
                    "TLS handshake with {addr}: {e}"
                ))));
            };
            let hint = match tls {
                rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                ) => {
                    "the broker's certificate does not name this host; connect by a name it \
                     lists, or set ssl.endpoint.identification.algorithm= (empty) to skip the \
                     name check"
                }
                rustls::Error::InvalidCertificate(_) => {
                    "check that ssl.truststore.location (ssl.ca.location) is the CA that signed \
                     the broker's certificate"
                }
                rustls::Error::AlertReceived(_) => {
                    "the broker refused the handshake; if it wants a client certificate, give \
                     one with ssl.keystore.location"
                }
                _ => "check that the listener speaks TLS (security.protocol SSL or SASL_SSL)",
            };
            Err(ClientError::Auth(format!(
                "TLS handshake with {addr} failed: {tls} — {hint}"
            )))
        }
    }
}

fn fail(inner: &Inner, why: String) {
    inner.failed.borrow_mut().get_or_insert(why.clone());
    for (_, w) in inner.waiters.borrow_mut().drain() {
        let _ = w.send(Err(ClientError::Io(std::io::Error::other(why.clone()))));
    }
}

async fn write_loop(
    mut writer: WriteHalf<ClientStream>,
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

async fn read_loop(weak: std::rc::Weak<Inner>, mut reader: ReadHalf<ClientStream>) {
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
