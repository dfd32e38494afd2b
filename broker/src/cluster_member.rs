//! Cluster mode's process wiring (`node.id` set): a controller executor of its own thread
//! beside the shards runs this node's metadata side and feeds the shards.
//!
//! - [`MetadataDriver`]: this node's quorum voter and metadata node (the active controller
//!   when its voter leads), over the QUIC cluster link;
//! - [`broker_session::run`]: registers this broker and heartbeats; a refusal
//!   (DUPLICATE_BROKER_REGISTRATION, INCONSISTENT_CLUSTER_ID) stops the process: it must not
//!   serve as someone else;
//! - the publisher: on every image or controller change, a `ClusterView` and the catalog
//!   made from it go to every shard (`ShardMsg::ApplyCatalog`), latest image only, one at a
//!   time; `published` records the offset every shard has applied;
//! - shards' controller calls (`ClusterHandle`): asked of the active controller, answered
//!   once every shard has applied the answer's metadata offset (read-your-writes).
//!
//! The executor is a doorbell peer of the shards (`wake::doorbells(shards + 1)`, index
//! `shards`), so awaits in both directions go through `wake::cross`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use event_listener::Event;
use futures_channel::{mpsc, oneshot};
use futures_lite::StreamExt;
use strand_cluster_core::broker_rpc::{self, BrokerAnswer, BrokerRequest};
use strand_cluster_core::controller::ControllerConfig;
use strand_cluster_core::controller_rpc::Request;
use strand_cluster_core::limits::{CONTROLLER_REQUEST_TIMEOUT_MS, METADATA_SNAPSHOT_EVERY_ENTRIES};
use strand_cluster_core::liveness::Evidence;
use strand_cluster_core::messages::Channel;
use strand_cluster_core::records::{BrokerRegistration, Endpoint};
use strand_cluster_core::transport::tls::NodeCredentials;
use strand_wire::ErrorCode;
use tracing::{debug, error, info, warn};

use crate::catalog::{Catalog, TopicMeta};
use crate::cluster::broker_session::{self, BrokerSession};
use crate::cluster::handle::{ClusterStatus, ControllerCall};
use crate::cluster::metadata_driver::{MetadataDriver, MetadataSpec};
use crate::cluster::peers_down::PeersDown;
use crate::cluster::producer_ids::ProducerIdBlocks;
use crate::cluster::quorum_driver::VoterSpec;
use crate::cluster::tripwire;
use crate::cluster::view::ClusterView;
use crate::cluster_config::ClusterConfig;
use crate::node::ShardMsg;
use crate::runtime::wake::{self, Doorbells, ShardDoorbells};

/// Kafka's producer-id block size (`AllocateProducerIds`).
const PRODUCER_ID_BLOCK_SIZE: i64 = 1_000;
/// The metadata quorum's directory under the data directory (Kafka's name).
pub const METADATA_DIR: &str = "__cluster_metadata-0";

/// What the controller executor needs, made by `server::serve` before the shards start.
pub struct MemberStart {
    pub cluster: ClusterConfig,
    pub creds: NodeCredentials,
    pub shards: usize,
    /// Where clients reach this broker (advertised listener, else the listen address).
    pub client: (String, u16),
    pub data_dir: PathBuf,
    pub num_partitions: i32,
    pub senders: Vec<mpsc::UnboundedSender<ShardMsg>>,
    pub calls: mpsc::UnboundedReceiver<ControllerCall>,
    pub doorbells: Arc<Doorbells>,
    pub bells: ShardDoorbells,
    /// The shards' producer ids, refilled here from the controller.
    pub producer_ids: Arc<ProducerIdBlocks>,
    pub peers_down: Arc<PeersDown>,
}

/// Reads the cluster transport's PEM files named by the config.
pub fn load_credentials(c: &ClusterConfig) -> io::Result<NodeCredentials> {
    let read = |p: &PathBuf, what: &str| {
        std::fs::read_to_string(p)
            .map_err(|e| io::Error::new(e.kind(), format!("{what} {}: {e}", p.display())))
    };
    Ok(NodeCredentials {
        ca_pem: read(&c.tls_ca, "cluster.tls.ca.location")?,
        cert_chain_pem: read(&c.tls_certificate, "cluster.tls.certificate.location")?,
        key_pem: read(&c.tls_key, "cluster.tls.key.location")?,
    })
}

/// The catalog shards use, made from a view: topics with their ids, partition counts and
/// configs; the view rides along for leaders and brokers.
pub fn catalog_of(view: Arc<ClusterView>) -> Catalog {
    let topics = view
        .topics
        .iter()
        .map(|(name, t)| {
            (
                name.clone(),
                TopicMeta {
                    id: uuid::Uuid::from_bytes(t.id).to_string(),
                    partitions: t.partitions.len() as i32,
                    configs: t.configs.clone(),
                },
            )
        })
        .collect();
    Catalog {
        topics,
        broker_configs: BTreeMap::new(),
        group_configs: BTreeMap::new(),
        cluster: Some(view),
    }
}

/// Starts the controller executor's thread (it lives as long as the process; a failure to
/// start the metadata side ends the process, since the node cannot serve without it).
pub fn spawn(start: MemberStart) -> io::Result<()> {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("strand-controller")
        .spawn(move || async move {
            if let Err(e) = run(start).await {
                error!(error = %e, "the cluster member stopped; exiting");
                std::process::exit(1);
            }
        })
        .map(drop)
        .map_err(|e| io::Error::other(format!("cannot start the controller executor: {e}")))
}

async fn run(start: MemberStart) -> io::Result<()> {
    let MemberStart {
        cluster,
        creds,
        shards,
        client,
        data_dir,
        num_partitions,
        senders,
        mut calls,
        doorbells,
        bells,
        producer_ids,
        peers_down,
    } = start;
    wake::start(shards, doorbells, bells).await;
    let me = cluster.node_id;
    let cluster_addr: SocketAddr = cluster.cluster_addr();
    let driver = MetadataDriver::start(MetadataSpec {
        voter: VoterSpec {
            me,
            voters: cluster.voters.clone(),
            listen: cluster_addr,
            dir: data_dir.join(METADATA_DIR),
            creds,
            election_timeout_ms: cluster.election_timeout_ms,
        },
        controller: ControllerConfig {
            cluster_id: cluster.cluster_id.clone(),
            session_timeout_ms: cluster.broker_session_timeout_ms,
            default_partitions: num_partitions,
            default_replication_factor: cluster.default_replication_factor,
            producer_id_block_size: PRODUCER_ID_BLOCK_SIZE,
        },
        shard_of: Box::new(|topic: &str, partition: i32, shards: u32| {
            crate::runtime::shard::shard_for(topic, partition, shards as usize) as u32
        }),
        snapshot_every_entries: METADATA_SNAPSHOT_EVERY_ENTRIES,
    })?;
    info!(node = me, cluster = %cluster_addr, "metadata quorum voter started");
    let incarnation = uuid::Uuid::new_v4().as_u128();
    if cluster.liveness_tripwire && cluster_addr.port() != 0 {
        let d = driver.clone();
        tripwire::start(
            me,
            incarnation,
            cluster_addr,
            &cluster.voters,
            Rc::new(move |node, evidence| {
                match evidence {
                    Evidence::Suspect { .. } => peers_down.suspect(node),
                    Evidence::Gone { .. } => peers_down.gone(node),
                    Evidence::Up { .. } => peers_down.up(node),
                }
                d.peer_evidence(node, evidence)
            }),
        );
    }
    let registration = BrokerRegistration {
        node_id: me,
        incarnation,
        cluster_id: cluster.cluster_id.clone(),
        client: Endpoint {
            host: client.0,
            port: client.1,
        },
        cluster: Endpoint {
            host: cluster_addr.ip().to_string(),
            port: cluster_addr.port(),
        },
        shards: shards as u32,
        rack: None,
    };
    let session = Rc::new(BrokerSession::default());
    let published = Rc::new(Published::default());
    // Heartbeats name the offset every shard has applied, so the controller unfences this
    // broker only once its shards serve the view that holds its registration.
    let shards_applied: Rc<dyn Fn() -> u64> = {
        let p = Rc::clone(&published);
        Rc::new(move || p.offset.get())
    };
    // On a stop signal the session tells the controller (controlled shutdown); the process
    // waits for that before it exits.
    crate::shutdown::expect_controlled_stop();
    let lifecycle = glommio::spawn_local(broker_session::run(
        driver.clone(),
        registration,
        cluster.broker_heartbeat_interval_ms,
        Rc::clone(&session),
        shards_applied,
        crate::shutdown::signalled(),
    ));
    glommio::spawn_local(async move {
        let ended = lifecycle.await;
        crate::shutdown::controlled_stop_done();
        if let Err(why) = ended {
            error!(node = me, "{why}; exiting");
            std::process::exit(1);
        }
    })
    .detach();
    glommio::spawn_local(refill_producer_ids(driver.clone(), producer_ids)).detach();
    // Request ids start at a random point, so a late answer to a request of this node's
    // previous incarnation cannot complete a new one.
    let asks = Rc::new(BrokerAsks {
        next_id: Cell::new(uuid::Uuid::new_v4().as_u64_pair().0 >> 1),
        waiting: RefCell::new(HashMap::new()),
    });
    glommio::spawn_local(broker_messages(
        driver.clone(),
        senders.clone(),
        shards,
        Rc::clone(&asks),
    ))
    .detach();
    glommio::spawn_local(publisher(
        driver.clone(),
        incarnation,
        senders,
        cluster.cluster_id.clone(),
        Rc::clone(&published),
    ))
    .detach();
    while let Some(call) = wake::cross(calls.next()).await {
        match call {
            ControllerCall::Ask { req, reply } => {
                let served = serve_call(driver.clone(), req, reply, Rc::clone(&published));
                glommio::spawn_local(served).detach();
            }
            ControllerCall::Broker { to, req, reply } => asks.ask(&driver, to, &req, reply),
            ControllerCall::Status { reply } => {
                let image = driver.image();
                let _ = reply.send(ClusterStatus {
                    quorum: driver.quorum_status(),
                    voters: cluster.voters.clone(),
                    applied_offset: image.applied_offset,
                    image_digest: image.digest(),
                    topics: image.topics.len(),
                });
            }
        }
    }
    Ok(())
}

/// Where a broker request's outcome goes.
type BrokerReply = oneshot::Sender<Result<BrokerAnswer, ErrorCode>>;

/// This node's requests to other brokers awaiting an answer: id -> (asked node, reply).
#[derive(Default)]
struct BrokerAsks {
    next_id: Cell<u64>,
    waiting: RefCell<HashMap<u64, (i32, BrokerReply)>>,
}

impl BrokerAsks {
    /// Sends `req` to `to`; the reply comes from its answer or, after
    /// `CONTROLLER_REQUEST_TIMEOUT_MS` (a replica fetch: its wait plus
    /// `REPLICA_FETCH_SLACK_MS`), REQUEST_TIMED_OUT.
    fn ask(
        self: &Rc<Self>,
        driver: &MetadataDriver,
        to: i32,
        req: &BrokerRequest,
        reply: BrokerReply,
    ) {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        // A replica fetch session waits on its answer for every partition it carries: a lost
        // answer must not stall them for the controller's 10 s.
        let timeout_ms = match req {
            BrokerRequest::ReplicaFetchMany { max_wait_ms, .. } => {
                u64::try_from(*max_wait_ms).unwrap_or(0) + crate::limits::REPLICA_FETCH_SLACK_MS
            }
            _ => CONTROLLER_REQUEST_TIMEOUT_MS,
        };
        if let Err(why) = driver.send_to(
            to,
            Channel::BrokerRequest,
            &broker_rpc::encode_request(id, req),
        ) {
            debug!(node = to, %why, "broker request not sent");
            let _ = reply.send(Err(ErrorCode::NotLeaderOrFollower));
            return;
        }
        self.waiting.borrow_mut().insert(id, (to, reply));
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            glommio::timer::sleep(Duration::from_millis(timeout_ms)).await;
            if let Some((_, reply)) = me.waiting.borrow_mut().remove(&id) {
                let _ = reply.send(Err(ErrorCode::RequestTimedOut));
            }
        })
        .detach();
    }

    /// An answer from `from`: counts only for a request that went to `from`.
    fn answered(&self, from: i32, a: BrokerAnswer) {
        let mut waiting = self.waiting.borrow_mut();
        match waiting.get(&a.request_id) {
            Some((asked, _)) if *asked == from => {
                if let Some((_, reply)) = waiting.remove(&a.request_id) {
                    let _ = reply.send(match a.error {
                        Some(code) => Err(code),
                        None => Ok(a),
                    });
                }
            }
            _ => debug!(
                peer = from,
                request = a.request_id,
                "broker answer for no request of ours"
            ),
        }
    }
}

/// Broker-to-broker messages from the link: requests go to the owning shard (a transaction
/// marker to the partition's shard) and their outcome back; answers to their askers.
async fn broker_messages(
    driver: MetadataDriver,
    senders: Vec<mpsc::UnboundedSender<ShardMsg>>,
    shards: usize,
    asks: Rc<BrokerAsks>,
) {
    while let Some((from, channel, body)) = driver.next_broker_message().await {
        match channel {
            Channel::BrokerAnswer => match broker_rpc::decode_answer(body) {
                Ok(a) => asks.answered(from, a),
                Err(why) => warn!(peer = from, %why, "broker answer refused"),
            },
            Channel::BrokerRequest => {
                let (id, req) = match broker_rpc::decode_request(&body) {
                    Ok(r) => r,
                    Err(why) => {
                        warn!(peer = from, %why, "broker request refused");
                        continue;
                    }
                };
                let (shard, rx) = match to_shard(req, shards, from) {
                    Ok(routed) => routed,
                    Err(why) => {
                        warn!(peer = from, %why, "broker request refused");
                        let answer = broker_rpc::encode_answer(&BrokerAnswer {
                            request_id: id,
                            error: Some(ErrorCode::InvalidRequest),
                            partitions: Vec::new(),
                        });
                        if let Err(why) = driver.send_chunks_to(from, Channel::BrokerAnswer, answer)
                        {
                            debug!(peer = from, %why, "broker answer not sent");
                        }
                        continue;
                    }
                };
                let (msg, rx) = rx;
                let sent = senders
                    .get(shard)
                    .is_some_and(|s| s.unbounded_send(msg).is_ok());
                let driver = driver.clone();
                glommio::spawn_local(async move {
                    let outcome = if sent {
                        rx.await
                    } else {
                        Err(ErrorCode::NotLeaderOrFollower)
                    };
                    let answer = broker_rpc::encode_answer(&BrokerAnswer {
                        request_id: id,
                        error: outcome.as_ref().err().copied(),
                        partitions: outcome.unwrap_or_default(),
                    });
                    if let Err(why) = driver.send_chunks_to(from, Channel::BrokerAnswer, answer) {
                        debug!(peer = from, %why, "broker answer not sent");
                    }
                })
                .detach();
            }
            _ => {}
        }
    }
}

/// What a shard's answer to a broker request resolves to: a fetch's partitions, or nothing.
type ShardAnswer = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<broker_rpc::PartitionAnswer>, ErrorCode>>>,
>;

/// The shard message for a broker request (to the partition's shard) and its answer. A
/// replica fetch speaks for its sender only (the transport authenticated `from`): the replica
/// it names must be `from`.
fn to_shard(
    req: BrokerRequest,
    shards: usize,
    from: i32,
) -> Result<(usize, (ShardMsg, ShardAnswer)), String> {
    match req {
        BrokerRequest::TxnMarker {
            topic,
            partition,
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
        } => {
            let shard = crate::runtime::shard::shard_for(&topic, partition, shards);
            let (reply, rx) = oneshot::channel();
            let msg = ShardMsg::Marker {
                tp: (topic, partition),
                marker: crate::node::txn_service::Marker {
                    producer_id,
                    epoch: producer_epoch,
                    commit,
                    coordinator_epoch,
                },
                reply,
            };
            let answer: ShardAnswer = Box::pin(async move {
                wake::cross(rx)
                    .await
                    .unwrap_or(Err(ErrorCode::NotLeaderOrFollower))
                    .map(|()| Vec::new())
            });
            Ok((shard, (msg, answer)))
        }
        BrokerRequest::ReplicaFetchMany {
            replica,
            leader_shard,
            max_wait_ms,
            response_max_bytes,
            partitions,
        } => {
            if replica != from {
                return Err(format!("node {from} fetched for replica {replica}"));
            }
            let shard = leader_shard as usize;
            if shard >= shards || max_wait_ms < 0 || response_max_bytes < 0 {
                return Err(format!(
                    "replica fetch of shard {leader_shard} of {shards}, wait {max_wait_ms} ms, {response_max_bytes} bytes"
                ));
            }
            let asked = partitions.len();
            let (reply, rx) = oneshot::channel();
            let msg = ShardMsg::ReplicaFetchMany {
                fetch: crate::node::ReplicaFetchMany {
                    replica,
                    max_wait_ms,
                    response_max_bytes,
                    partitions,
                },
                reply,
            };
            let answer: ShardAnswer = Box::pin(async move {
                Ok(wake::cross(rx)
                    .await
                    .unwrap_or_else(|_| vec![Err(ErrorCode::NotLeaderOrFollower); asked]))
            });
            Ok((shard, (msg, answer)))
        }
    }
}

/// The metadata offset every shard has applied, and an event fired when it moves.
#[derive(Default)]
struct Published {
    offset: Cell<u64>,
    moved: Event,
}

async fn publisher(
    driver: MetadataDriver,
    incarnation: u128,
    senders: Vec<mpsc::UnboundedSender<ShardMsg>>,
    cluster_id: String,
    published: Rc<Published>,
) {
    let mut last: Option<(u64, Option<i32>)> = None;
    while !driver.is_stopped() {
        let listener = driver.listen();
        let state = (driver.applied_offset(), driver.leader().node);
        if last == Some(state) {
            let _ = glommio::timer::timeout(Duration::from_secs(1), async {
                listener.await;
                Ok(())
            })
            .await;
            continue;
        }
        let view = Arc::new(ClusterView::from_image(
            &driver.image(),
            driver.me(),
            incarnation,
            &cluster_id,
            state.1,
        ));
        let catalog = Arc::new(catalog_of(view));
        let mut waits = Vec::with_capacity(senders.len());
        for s in &senders {
            let (reply, rx) = oneshot::channel();
            let msg = ShardMsg::ApplyCatalog {
                catalog: Arc::clone(&catalog),
                reply,
            };
            if s.unbounded_send(msg).is_ok() {
                waits.push(rx);
            }
        }
        for w in waits {
            let _ = wake::cross(w).await;
        }
        published.offset.set(state.0);
        published.moved.notify(usize::MAX);
        last = Some(state);
    }
}

/// Keeps a spare producer-id block ready for the shards (asked again every 100 ms until the
/// controller answers: it needs this broker registered first).
async fn refill_producer_ids(driver: MetadataDriver, blocks: Arc<ProducerIdBlocks>) {
    let limit = Duration::from_millis(CONTROLLER_REQUEST_TIMEOUT_MS);
    while !driver.is_stopped() {
        if blocks.wants_block() {
            let req = Request::AllocateProducerIds {
                node_id: driver.me(),
            };
            let a = driver.call(req, limit).await;
            match (a.error, a.producer_ids) {
                (None, Some((first, size))) if first >= 0 && size > 0 => {
                    blocks.add_block(first, size);
                    continue;
                }
                (error, _) => debug!(?error, "no producer-id block yet; asking again"),
            }
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
}

async fn serve_call(
    driver: MetadataDriver,
    req: Request,
    reply: oneshot::Sender<strand_cluster_core::controller_rpc::Answer>,
    published: Rc<Published>,
) {
    let limit = Duration::from_millis(CONTROLLER_REQUEST_TIMEOUT_MS);
    let answer = driver.call(req, limit).await;
    if answer.error.is_none() && answer.metadata_offset > 0 {
        // Read-your-writes: the shards see the change before the client hears of it.
        let end = Instant::now() + limit;
        loop {
            let listener = published.moved.listen();
            if published.offset.get() >= answer.metadata_offset {
                break;
            }
            let Some(left) = end.checked_duration_since(Instant::now()) else {
                break;
            };
            let _ = glommio::timer::timeout(left, async {
                listener.await;
                Ok(())
            })
            .await;
        }
    }
    let _ = reply.send(answer);
}
