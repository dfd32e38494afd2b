//! The admin HTTP listener (`admin.listen`, Redpanda's port 9644 by default; empty: off),
//! served by shard 0 on its own executor. One request per connection (`Connection: close`).
//!
//! - `GET /v1/status/live`: 200 while the broker runs. `GET /v1/status/ready`: the same,
//!   except 503 until every shard's Kafka listener is bound, after a stop signal, and on a
//!   cluster node whose view has not caught up with the metadata log since it started
//!   (`ClusterView::caught_up`).
//! - `GET /v1/partitions[?topic=T]`: every partition with a replica here (`node::admin_views`).
//! - `GET /v1/groups`: the groups this node coordinates, with committed offsets and lag.
//! - `GET /v1/stages`: every shard's request-stage histograms merged (`stages`), as JSON:
//!   `{"stages": [{"api", "stage", "count", "p50_us", "p99_us", "p999_us", "max_us"}]}`.
//!   `?reset=true` empties them after the copy, so a bench can measure exactly its window.
//! - `GET /metrics`: Prometheus's text format (`metrics::expose`): every shard's counters,
//!   gathered at once (`Node::all_metrics`).
//!
//! Requests are parsed with `httparse`; a head over `HEAD_BYTES_MAX` closes the connection,
//! and a whole request (read, gathering from the shards, write) has `REQUEST_TIMEOUT_MS`. At
//! most `CONNECTIONS_MAX` connections are served at once; more are closed at accept (they
//! share the open-files limit with the Kafka listener). Bind failure is a warning, not fatal: the Kafka
//! listener matters more than the admin one (several brokers on one host share the default).

use std::rc::Rc;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use tracing::{debug, info, warn};

use crate::node::Node;

/// Largest request head accepted: the admin API has no request bodies.
const HEAD_BYTES_MAX: usize = 8 << 10;
/// Time one request may take, from accept to the last byte written.
const REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Admin connections served at once.
const CONNECTIONS_MAX: usize = 64;

/// Serves the admin API on `node` (shard 0) until the process ends.
pub fn spawn(node: Rc<Node>) {
    let addr = node.config().admin_listen.clone();
    if addr.is_empty() {
        return;
    }
    let listener = match TcpListener::bind(addr.as_str()) {
        Ok(l) => l,
        Err(e) => {
            warn!(%addr, error = %e, "admin API off: cannot listen (admin.listen)");
            return;
        }
    };
    info!(%addr, "admin API listening");
    let open = Rc::new(std::cell::Cell::new(0usize));
    glommio::spawn_local(async move {
        loop {
            let Ok(stream) = listener.accept().await else {
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            };
            if open.get() >= CONNECTIONS_MAX {
                debug!("admin connection refused: {CONNECTIONS_MAX} open");
                continue; // dropping the stream closes it
            }
            open.set(open.get() + 1);
            let (node, open) = (Rc::clone(&node), Rc::clone(&open));
            glommio::spawn_local(async move {
                let timer = async {
                    glommio::timer::sleep(Duration::from_millis(REQUEST_TIMEOUT_MS)).await;
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "admin request took too long",
                    ))
                };
                if let Err(e) = futures_lite::future::or(serve(&node, stream), timer).await {
                    debug!(error = %e, "admin connection ended with an error");
                }
                open.set(open.get() - 1);
            })
            .detach();
        }
    })
    .detach();
}

async fn serve(node: &Rc<Node>, mut stream: TcpStream) -> std::io::Result<()> {
    let Some(head) = read_head(&mut stream).await? else {
        return Ok(());
    };
    let (status, content_type, body) = respond(node, &head).await;
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.close().await
}

/// The request head (through the blank line), or `None` if it is too large or the client
/// closed first.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&chunk[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(Some(head));
        }
        if head.len() > HEAD_BYTES_MAX {
            return Ok(None);
        }
    }
}

/// Status line, Content-Type and body for one request head: `GET /metrics` in Prometheus's
/// text format, everything else JSON.
async fn respond(node: &Rc<Node>, head: &[u8]) -> (&'static str, &'static str, String) {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let metrics = matches!(req.parse(head), Ok(httparse::Status::Complete(_)))
        && req.method == Some("GET")
        && req
            .path
            .is_some_and(|p| p.split('?').next() == Some("/metrics"));
    if metrics {
        let body = crate::metrics::expose::encode(node.all_metrics().await);
        return ("200 OK", crate::metrics::expose::CONTENT_TYPE, body);
    }
    let (status, body) = respond_json(node, head).await;
    (status, "application/json", body)
}

/// Status line and JSON body for one request head.
async fn respond_json(node: &Rc<Node>, head: &[u8]) -> (&'static str, String) {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let (method, path) = match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => (
            req.method.unwrap_or_default().to_string(),
            req.path.unwrap_or_default().to_string(),
        ),
        _ => return ("400 Bad Request", error_body("malformed request")),
    };
    if method != "GET" {
        return (
            "405 Method Not Allowed",
            error_body("the admin API answers GET"),
        );
    }
    let (route, query) = path.split_once('?').unwrap_or((path.as_str(), ""));
    match route {
        "/v1/status/live" => ("200 OK", "{\"status\":\"ok\"}".into()),
        "/v1/status/ready" => match not_ready(node) {
            Some(why) => ("503 Service Unavailable", error_body(why)),
            None => ("200 OK", "{\"status\":\"ok\"}".into()),
        },
        "/v1/cluster" => match &node.shared.cluster {
            None => (
                "404 Not Found",
                error_body("this broker runs alone (no node.id)"),
            ),
            Some(h) => match h.status().await {
                None => (
                    "503 Service Unavailable",
                    error_body("the controller executor is gone"),
                ),
                Some(s) => {
                    let q = &s.quorum;
                    let body = serde_json::json!({
                        "node_id": h.node_id,
                        "leader": q.leader_id as i64 - 1,
                        "term": q.term,
                        "commit_index": q.commit_index,
                        "last_index": q.last_index,
                        "voters": q.voters.iter().map(|v| serde_json::json!({
                            "node_id": v.id as i64 - 1, "matched_index": v.matched_index,
                        })).collect::<Vec<_>>(),
                        "applied_offset": s.applied_offset,
                        "image_digest": format!("{:016x}", s.image_digest),
                        "topics": s.topics,
                    });
                    ("200 OK", body.to_string())
                }
            },
        },
        "/v1/partitions" => {
            let topic = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("topic="))
                .map(percent_decoded);
            (
                "200 OK",
                node.partitions_view(topic.as_deref()).await.to_string(),
            )
        }
        "/v1/groups" => ("200 OK", node.groups_view().await.to_string()),
        "/v1/stages" => {
            let reset = query.split('&').any(|kv| kv == "reset=true");
            let stages = node.all_stages(reset).await;
            let body = serde_json::json!({
                "shards": node.shards(),
                "stages": stages.summaries(),
            });
            ("200 OK", body.to_string())
        }
        _ => (
            "404 Not Found",
            error_body(&format!(
                "no route {route:?}: try /metrics, /v1/status/live, /v1/status/ready, \
                 /v1/partitions, /v1/groups, /v1/stages, /v1/cluster"
            )),
        ),
    }
}

/// `%XX` escapes decoded (a topic name in a query); bytes that are not valid UTF-8 after
/// decoding become U+FFFD, so they match no topic.
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why the broker is not ready to serve clients, if it is not: every shard's Kafka listener
/// must be bound, no stop signal received, and a cluster node's view caught up with the
/// metadata log since it started (it leads nothing before that).
fn not_ready(node: &Node) -> Option<&'static str> {
    let bound = node
        .shared
        .listeners_bound
        .load(std::sync::atomic::Ordering::Acquire);
    if bound < node.shards() {
        return Some("the Kafka listener is not bound yet");
    }
    if crate::shutdown::requested() {
        return Some("shutting down");
    }
    match node.catalog().cluster.as_ref() {
        Some(view) if !view.caught_up => Some("not caught up with the cluster's metadata log yet"),
        _ => None,
    }
}

fn error_body(message: &str) -> String {
    serde_json::json!({ "error": message }).to_string()
}
