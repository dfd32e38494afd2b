//! The broker process: data directory, shards, per-shard partitions and listener.
//!
//! Each shard loads the topic catalog, opens the partitions it owns, starts its inbox (work
//! from other shards) and retention timer, then binds its own listener on the shared address
//! (glommio sets SO_REUSEPORT, so the kernel spreads connections over shards) and serves Kafka
//! clients with [`crate::kafka::conn`].

use std::io;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_channel::mpsc;
use glommio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::catalog::{Catalog, CatalogOp, NewTopic};
use crate::config::BrokerConfig;
use crate::internal_topics::{OFFSETS_PARTITIONS, OFFSETS_TOPIC, TXN_PARTITIONS, TXN_TOPIC};
use crate::kafka::conn;
use crate::limits;
use crate::node::{Mesh, Node, NodeShared, ShardMsg};
use crate::runtime::clock::now_ms;
use crate::runtime::shard::{run_shards, shard_count};
use crate::security::config::Listener;
use crate::storage::CleanOptions;

/// Version of the on-disk layout; written to `<data_dir>/strand.meta`.
pub const DATA_FORMAT_VERSION: u32 = 1;
const META_FILE: &str = "strand.meta";

/// Creates the data directory or checks its format version; returns the cluster id kept there.
/// In cluster mode `want` is the configured `cluster.id`: a new directory records it, an
/// existing one must already hold it (Kafka's INCONSISTENT_CLUSTER_ID, at start-up).
pub fn prepare_data_dir(dir: &Path, want: Option<&str>) -> io::Result<String> {
    std::fs::create_dir_all(dir)?;
    let meta = dir.join(META_FILE);
    match std::fs::read_to_string(&meta) {
        Ok(text) => {
            let field = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().trim_matches('"').to_string())
            };
            let version = field("format_version = ").and_then(|v| v.parse::<u32>().ok());
            if version != Some(DATA_FORMAT_VERSION) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} says format {version:?}; this strand reads format {DATA_FORMAT_VERSION}",
                        meta.display()
                    ),
                ));
            }
            let have = field("cluster_id = ").unwrap_or_else(|| "strand".to_string());
            match want {
                Some(want) if want != have => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} belongs to cluster {have:?} but cluster.id is {want:?}: use another \
                         data directory (a single-node directory cannot join a cluster yet)",
                        dir.display()
                    ),
                )),
                _ => Ok(have),
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let cluster_id = match want {
                Some(id) => id.to_string(),
                None => uuid::Uuid::new_v4().simple().to_string(),
            };
            std::fs::write(
                &meta,
                format!("format_version = {DATA_FORMAT_VERSION}\ncluster_id = \"{cluster_id}\"\n"),
            )?;
            crate::storage::recovery::sync_dir(dir)?;
            Ok(cluster_id)
        }
        Err(e) => Err(e),
    }
}

/// Runs the broker until the process is stopped.
pub fn serve(config: BrokerConfig) -> io::Result<()> {
    crate::memory::configure_allocator();
    if let Some(path) = &config.pid_file {
        std::fs::write(path, format!("{}\n", std::process::id()))
            .map_err(|e| io::Error::new(e.kind(), format!("pid.file {}: {e}", path.display())))?;
    }
    let want_id = config.cluster.as_ref().map(|c| c.cluster_id.as_str());
    let cluster_id = prepare_data_dir(&config.data_dir, want_id)?;
    let shards = shard_count(config.cores);
    // Cluster mode: the controller executor's inbox, and the shards' handle to it.
    let creds = config
        .cluster
        .as_ref()
        .map(crate::cluster_member::load_credentials)
        .transpose()?;
    let (calls_tx, calls_rx) = futures_channel::mpsc::unbounded();
    let handle = config
        .cluster
        .as_ref()
        .map(|c| crate::cluster::handle::ClusterHandle {
            node_id: c.node_id,
            calls: calls_tx,
            producer_ids: Default::default(),
            peers_down: Default::default(),
        });
    info!(listen = %config.listen, data_dir = %config.data_dir.display(), shards, "starting strand");
    let storage = crate::host::storage_options(&config)?;
    crate::host::warn_on_tuning(&config.data_dir);
    let mesh = Mesh::new(shards);
    let security = Arc::new(crate::security::Security::new(
        &config.security,
        &config.listeners(),
        &config.data_dir,
    )?);
    // A single node replicates nothing: its broker configs live in the catalog.
    let throttle_rates = match config.cluster {
        Some(_) => crate::cluster::throttle_rates::ThrottleRates::load(&config.data_dir)?,
        None => crate::cluster::throttle_rates::ThrottleRates::unsaved(),
    };
    let shared = Arc::new(NodeShared {
        config: Arc::new(config.clone()),
        senders: mesh.senders,
        next_producer_id: AtomicI64::new(now_ms().max(1) * 1000),
        cluster_id,
        storage,
        appended: (0..shards)
            .map(|_| Arc::new(event_listener::Event::new()))
            .collect(),
        disk: Arc::new(crate::disk_space::DiskSpace::new(
            &config.data_dir,
            config.storage_min_free_bytes,
        )),
        admission: crate::admission::Admission::new(
            usize::try_from(config.max_connections).unwrap_or(usize::MAX),
            usize::try_from(config.max_connections_per_ip).unwrap_or(usize::MAX),
            strand_tuning::host::nofile_limit().map(|l| l.soft),
        ),
        auto_create: Default::default(),
        cluster: handle,
        throttle_rates: Arc::new(throttle_rates),
        listeners_bound: Default::default(),
        security,
    });
    info!(
        max_connections = shared.admission.max_total(),
        "client connections admitted (max.connections, capped below the open-files limit)"
    );
    // Each shard takes its own receiver once, at start-up.
    let inboxes = Arc::new(Mutex::new(mesh.receivers));
    // Stop signals are blocked before any thread starts (the controller executor too), so
    // only the signal thread takes them.
    crate::shutdown::install(shards)?;
    // In cluster mode the controller executor is one more doorbell peer (index `shards`).
    let peers = shards + usize::from(config.cluster.is_some());
    let (doorbells, mut ends) = crate::runtime::wake::doorbells(peers);
    if let (Some(cluster), Some(creds)) = (config.cluster.clone(), creds) {
        let bells = ends
            .pop()
            .ok_or_else(|| io::Error::other("no doorbells for the controller executor"))?;
        let client = match &cluster.advertised {
            Some(a) => a.clone(),
            None => {
                let a: std::net::SocketAddr = config
                    .listen
                    .parse()
                    .map_err(|e| io::Error::other(format!("listen {:?}: {e}", config.listen)))?;
                (a.ip().to_string(), a.port())
            }
        };
        crate::cluster_member::spawn(crate::cluster_member::MemberStart {
            cluster,
            creds,
            shards,
            client,
            data_dir: config.data_dir.clone(),
            num_partitions: config.num_partitions,
            senders: shared.senders.clone(),
            calls: calls_rx,
            doorbells: Arc::clone(&doorbells),
            bells,
            producer_ids: shared
                .cluster
                .as_ref()
                .map(|h| Arc::clone(&h.producer_ids))
                .unwrap_or_default(),
            peers_down: shared
                .cluster
                .as_ref()
                .map(|h| Arc::clone(&h.peers_down))
                .unwrap_or_default(),
        })?;
    }
    let ends: Arc<Mutex<Vec<Option<crate::runtime::wake::ShardDoorbells>>>> =
        Arc::new(Mutex::new(ends.into_iter().map(Some).collect()));
    let idle_poll = std::time::Duration::from_micros(config.idle_poll_time_us);
    run_shards(
        shards,
        crate::runtime::shard::Polling {
            idle_poll,
            overprovisioned: config.overprovisioned,
        },
        Arc::new(config),
        move |id, _n, _config| {
            let shared = Arc::clone(&shared);
            let inbox = inboxes.lock().ok().and_then(|mut v| v[id].take());
            let bells = ends.lock().ok().and_then(|mut v| v[id].take());
            shard_main(id, shared, inbox, Arc::clone(&doorbells), bells)
        },
    )
}

async fn shard_main(
    id: usize,
    shared: Arc<NodeShared>,
    inbox: Option<mpsc::UnboundedReceiver<ShardMsg>>,
    doorbells: Arc<crate::runtime::wake::Doorbells>,
    bells: Option<crate::runtime::wake::ShardDoorbells>,
) -> io::Result<()> {
    let inbox = inbox.ok_or_else(|| io::Error::other(format!("shard {id} has no inbox")))?;
    let bells = bells.ok_or_else(|| io::Error::other(format!("shard {id} has no doorbells")))?;
    crate::runtime::wake::start(id, doorbells, bells).await;
    crate::metrics::set_enabled(shared.config.metrics_enabled);
    let node = Node::new(id, Arc::clone(&shared));
    let data_dir = shared.config.data_dir.clone();
    let catalog = match &shared.config.cluster {
        // The cluster's topics come from the metadata image (the publisher), not topics.toml.
        Some(c) => Catalog {
            cluster: Some(Arc::new(crate::cluster::view::ClusterView::empty(
                c.node_id,
                &c.cluster_id,
            ))),
            ..Catalog::default()
        },
        None => {
            glommio::executor()
                .spawn_blocking(move || Catalog::load(&data_dir))
                .await?
        }
    };
    node.apply_catalog(Arc::new(catalog)).await;
    glommio::spawn_local(Rc::clone(&node).run_inbox(inbox)).detach();
    node.spawn_group_ticker();
    node.spawn_share_ticker();
    node.spawn_lag_probe();
    if id == 0 && shared.config.cluster.is_none() {
        create_internal_topics(&node).await;
    } else if id == 0 {
        // In a cluster the controller may not be elected yet: ask until the topics exist.
        // Placement balances leaders over the brokers registered at that moment, so wait
        // (up to `INTERNAL_TOPICS_WAIT_MS`) for every voter to register first: otherwise the
        // first node up would coordinate every group and transaction.
        let node = Rc::clone(&node);
        let voters = shared.config.cluster.as_ref().map_or(1, |c| c.voters.len());
        glommio::spawn_local(async move {
            let started = std::time::Instant::now();
            loop {
                let live = node.view().map_or(0, |v| v.live_brokers().count());
                if live < voters
                    && started.elapsed() < Duration::from_millis(limits::INTERNAL_TOPICS_WAIT_MS)
                {
                    glommio::timer::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                create_internal_topics(&node).await;
                let catalog = node.catalog();
                if [OFFSETS_TOPIC, TXN_TOPIC]
                    .iter()
                    .all(|t| catalog.topics.contains_key(*t))
                {
                    break;
                }
                glommio::timer::sleep(Duration::from_secs(1)).await;
            }
        })
        .detach();
    }
    node.spawn_txn_ticker();
    spawn_housekeeping(Rc::clone(&node));
    spawn_shutdown_watch(Rc::clone(&node));
    if id == 0 {
        spawn_disk_watch(Rc::clone(&node));
        crate::admin_http::spawn(Rc::clone(&node));
    }

    let listeners = shared.config.listeners();
    let mut bound = Vec::new();
    for l in &listeners {
        let listener = TcpListener::bind(l.bind).map_err(|e| {
            io::Error::other(format!("cannot listen on {} ({}): {e}", l.bind, l.name))
        })?;
        info!(shard = id, addr = %l.bind, listener = %l.name, protocol = l.protocol.name(), "listening");
        bound.push((l.clone(), listener));
    }
    node.shared
        .listeners_bound
        .fetch_add(1, std::sync::atomic::Ordering::Release);
    let accepting: Vec<_> = bound
        .into_iter()
        .map(|(l, listener)| glommio::spawn_local(accept_loop(Rc::clone(&node), l, listener)))
        .collect();
    for task in accepting {
        task.await;
    }
    Ok(())
}

/// Accepts one listener's connections on this shard, each served by its own task.
async fn accept_loop(node: Rc<Node>, listener_config: Listener, listener: TcpListener) {
    let id = node.shard;
    let listener_config = Rc::new(listener_config);
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                warn!(shard = id, error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let peer = match stream.peer_addr() {
            Ok(a) => a,
            Err(_) => continue,
        };
        let admitted = match node.shared.admission.try_admit(peer.ip()) {
            Ok(a) => a,
            Err(why) => {
                debug!(shard = id, ip = %peer.ip(), "connection refused: {why}");
                continue; // dropping the stream closes it
            }
        };
        let node = Rc::clone(&node);
        let listener_config = Rc::clone(&listener_config);
        crate::metrics::with(|m| m.connections_accepted += 1);
        glommio::spawn_local(async move {
            let _admitted = admitted;
            if let Err(e) = conn::accept(node, stream, peer, &listener_config).await {
                if e.kind() == std::io::ErrorKind::Other {
                    warn!(error = %e, "connection closed after an internal error");
                } else {
                    debug!(error = %e, "connection ended with an error");
                }
            }
            crate::metrics::with(|m| m.connections_closed += 1);
        })
        .detach();
    }
}

/// Creates `__consumer_offsets` and `__transaction_state` if missing, with Kafka's settings
/// for them: compacted, small segments; in a cluster `offsets.topic.replication.factor` /
/// `transaction.state.log.replication.factor` replicas (capped at the brokers registered after
/// the wait for every voter, with a warning; Kafka instead refuses with
/// COORDINATOR_NOT_AVAILABLE until enough brokers are up) and `transaction.state.log.min.isr`.
async fn create_internal_topics(node: &Node) {
    let segment_bytes = node.config().offsets_topic_segment_bytes;
    let live = node.view().map_or(1, |v| v.live_brokers().count().max(1));
    let cluster = node.config().cluster.as_ref();
    for (name, partitions) in [
        (OFFSETS_TOPIC, OFFSETS_PARTITIONS),
        (TXN_TOPIC, TXN_PARTITIONS),
    ] {
        if node.catalog().topics.contains_key(name) {
            continue;
        }
        let wanted = cluster.map_or(1, |c| match name {
            OFFSETS_TOPIC => c.offsets_topic_replication_factor,
            _ => c.transaction_state_log_replication_factor,
        });
        let replication_factor = wanted.min(i16::try_from(live).unwrap_or(i16::MAX));
        if replication_factor < wanted {
            warn!(topic = name, wanted, replication_factor, live, "fewer brokers registered than the internal topic's replication factor: created with fewer replicas");
        }
        let mut configs: std::collections::BTreeMap<String, String> = [
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), segment_bytes.to_string()),
        ]
        .into();
        if let (TXN_TOPIC, Some(c)) = (name, cluster) {
            let min_isr = c.transaction_state_log_min_isr.min(replication_factor);
            configs.insert("min.insync.replicas".to_string(), min_isr.to_string());
        }
        let topic = NewTopic {
            name: name.to_string(),
            partitions,
            replication_factor,
            configs,
        };
        node.change_catalog(CatalogOp::Create(vec![topic]), false)
            .await;
    }
}

/// Shard 0 keeps the free-space reading fresh for every shard and the reserve file in place,
/// and returns freed memory to the OS after connections close (`memory`).
fn spawn_disk_watch(node: Rc<Node>) {
    let dir = node.config().data_dir.clone();
    glommio::spawn_local(async move {
        let mut closed_seen = 0;
        loop {
            let (disk, dir) = (Arc::clone(&node.shared.disk), dir.clone());
            let closed = node.shared.admission.closed();
            let trim = closed != closed_seen;
            closed_seen = closed;
            let _ = glommio::executor()
                .spawn_blocking(move || {
                    if !disk.refresh() {
                        crate::disk_space::ensure_reserve(&dir);
                    }
                    if trim {
                        crate::memory::return_freed_memory();
                    }
                })
                .await;
            glommio::timer::sleep(Duration::from_millis(limits::DISK_CHECK_INTERVAL_MS)).await;
        }
    })
    .detach();
}

/// The shard's background upkeep, on a low-priority task queue so it yields to request
/// handling: idle rolls (`segment.ms`), retention every `log.retention.check.interval.ms`, and
/// a compaction pass (`log.cleaner.*`) per compacted partition every `log.cleaner.backoff.ms`.
/// On a stop signal (`shutdown`): flush every partition of this shard, twice (appends that
/// passed the produce check before the signal finish in between), then report.
fn spawn_shutdown_watch(node: Rc<Node>) {
    glommio::spawn_local(async move {
        crate::shutdown::signalled().await;
        node.flush_all().await;
        glommio::timer::sleep(Duration::from_millis(crate::shutdown::SHUTDOWN_POLL_MS)).await;
        node.flush_all().await;
        crate::shutdown::shard_flushed();
    })
    .detach();
}

fn spawn_housekeeping(node: Rc<Node>) {
    let config = node.config().clone();
    let queue = glommio::executor().create_task_queue(
        glommio::Shares::Static(limits::HOUSEKEEPING_SHARES),
        glommio::Latency::NotImportant,
        "housekeeping",
    );
    let retention_ms = config.retention_check_interval_ms.max(1);
    let cleaner_ms = config
        .cleaner
        .enable
        .then_some(config.cleaner.backoff_ms.max(1));
    let tick_ms = cleaner_ms.map_or(retention_ms, |c| c.min(retention_ms));
    let options = CleanOptions {
        io_bytes_per_sec: config.cleaner.io_max_bytes_per_second,
        stop_after: None,
    };
    let task = async move {
        let (mut last_retention, mut last_clean) = (now_ms(), now_ms());
        loop {
            glommio::timer::sleep(Duration::from_millis(tick_ms)).await;
            let now = now_ms();
            let retention_due = now - last_retention >= retention_ms as i64;
            let clean_due = cleaner_ms.is_some_and(|c| now - last_clean >= c as i64);
            if retention_due {
                last_retention = now;
            }
            if clean_due {
                last_clean = now;
            }
            for log in node.local_partitions() {
                if let Err(e) = log.roll_if_idle(now_ms()).await {
                    warn!(dir = %log.dir().display(), error = %e, "idle roll failed");
                }
                if retention_due {
                    match log.enforce_retention(now_ms()).await {
                        Ok(0) => {}
                        Ok(n) => info!(dir = %log.dir().display(), deleted = n, "retention"),
                        Err(e) => warn!(dir = %log.dir().display(), error = %e, "retention failed"),
                    }
                }
                if clean_due {
                    match log.clean(now_ms(), options).await {
                        Ok(None) => {}
                        Ok(Some(r)) => info!(
                            dir = %log.dir().display(),
                            dirty_per_mille = r.dirty_ratio_milli,
                            keys = r.keys,
                            segments = r.segments_rewritten,
                            bytes_before = r.bytes_before,
                            bytes_after = r.bytes_after,
                            records_removed = r.records_removed,
                            unreadable_batches = r.unreadable_batches,
                            elapsed_ms = r.elapsed_ms,
                            "compaction pass done"
                        ),
                        Err(e) => {
                            warn!(dir = %log.dir().display(), error = %e, "compaction failed; will retry")
                        }
                    }
                }
            }
        }
    };
    match glommio::spawn_local_into(task, queue) {
        Ok(t) => {
            t.detach();
        }
        Err(e) => warn!(error = %e, "no housekeeping task: retention and compaction are off"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_dir_version_is_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        prepare_data_dir(dir.path(), None).expect("fresh");
        prepare_data_dir(dir.path(), None).expect("same version");
        std::fs::write(dir.path().join(META_FILE), "format_version = 99\n").expect("write");
        assert!(prepare_data_dir(dir.path(), None).is_err());
    }

    #[test]
    fn a_cluster_data_dir_keeps_its_cluster_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let id = prepare_data_dir(dir.path(), Some("blue")).expect("fresh");
        assert_eq!(id, "blue");
        assert_eq!(
            prepare_data_dir(dir.path(), Some("blue")).expect("same"),
            "blue"
        );
        let e = prepare_data_dir(dir.path(), Some("green")).expect_err("another cluster");
        assert!(e.to_string().contains("cluster.id"), "{e}");
        let single = tempfile::tempdir().expect("tempdir");
        prepare_data_dir(single.path(), None).expect("single node");
        assert!(prepare_data_dir(single.path(), Some("blue")).is_err());
    }
}
