//! Three nodes, each on an executor of its own thread, over real UDP and real files: brokers
//! register and are unfenced, topics created through any node (in process on the leader,
//! over the link elsewhere) appear in every node's image, the controller stops and another
//! takes over, a restarted node catches up from a snapshot.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use strand_cluster_core::controller::NewTopic;
use strand_cluster_core::records::{BrokerRegistration, Endpoint};
use strand_cluster_core::transport::certs::DevCa;

use super::super::broker_session::{self, BrokerSession};
use super::*;

enum Cmd {
    Create(String, i32),
    Delete(String),
    Stop,
}

#[derive(Debug)]
enum Report {
    /// (node, applied offset, image digest, topics, unfenced brokers, leader)
    State(NodeId, u64, u64, usize, usize, Option<NodeId>),
    Answer(NodeId, Answer),
}

fn free_udp_addr() -> SocketAddr {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap()
}

struct Running {
    cmds: futures_channel::mpsc::UnboundedSender<Cmd>,
    thread: std::thread::JoinHandle<()>,
}

fn controller_cfg() -> ControllerConfig {
    ControllerConfig {
        cluster_id: "test-cluster".into(),
        session_timeout_ms: 3_000,
        default_partitions: 1,
        default_replication_factor: 1,
        producer_id_block_size: 1000,
    }
}

fn spawn_node(spec: MetadataSpec, reports: mpsc::Sender<Report>) -> Running {
    let (tx, mut rx) = futures_channel::mpsc::unbounded::<Cmd>();
    let me = spec.voter.me;
    let thread = std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .unwrap()
            .run(async move {
                let d = MetadataDriver::start(spec).unwrap();
                let session = Rc::new(BrokerSession::default());
                let registration = BrokerRegistration {
                    node_id: me,
                    incarnation: rand::random(),
                    cluster_id: "test-cluster".into(),
                    client: Endpoint {
                        host: "127.0.0.1".into(),
                        port: 9000 + me as u16,
                    },
                    cluster: Endpoint {
                        host: "127.0.0.1".into(),
                        port: 9100 + me as u16,
                    },
                    shards: 2,
                    rack: None,
                };
                let lifecycle = glommio::spawn_local(broker_session::run(
                    d.clone(),
                    registration,
                    300,
                    Rc::clone(&session),
                    {
                        let d = d.clone();
                        Rc::new(move || d.applied_offset())
                    },
                    std::future::pending(),
                ));
                let (d2, r2) = (d.clone(), reports.clone());
                glommio::spawn_local(async move {
                    while !d2.is_stopped() {
                        glommio::timer::sleep(Duration::from_millis(50)).await;
                        let image = d2.image();
                        let unfenced = image.brokers.values().filter(|b| !b.fenced).count();
                        let _ = r2.send(Report::State(
                            me,
                            image.applied_offset,
                            image.digest(),
                            image.topics.len(),
                            unfenced,
                            d2.leader().node,
                        ));
                    }
                })
                .detach();
                while let Some(cmd) = rx.next().await {
                    match cmd {
                        Cmd::Create(name, partitions) => {
                            let req = Request::CreateTopic(NewTopic {
                                name,
                                partitions,
                                replication_factor: 1,
                                configs: BTreeMap::new(),
                            });
                            let a = d.call(req, Duration::from_secs(10)).await;
                            if a.error.is_none() {
                                d.applied(a.metadata_offset, Duration::from_secs(5)).await;
                            }
                            let _ = reports.send(Report::Answer(me, a));
                        }
                        Cmd::Delete(name) => {
                            let a = d
                                .call(Request::DeleteTopic { name }, Duration::from_secs(10))
                                .await;
                            let _ = reports.send(Report::Answer(me, a));
                        }
                        Cmd::Stop => {
                            // A crash, not a controlled shutdown: no goodbye heartbeat.
                            d.stop().await;
                            drop(lifecycle);
                            return;
                        }
                    }
                }
            });
    });
    Running { cmds: tx, thread }
}

struct Harness {
    rx: mpsc::Receiver<Report>,
    state: BTreeMap<NodeId, (u64, u64, usize, usize, Option<NodeId>)>,
}

impl Harness {
    /// Waits until `pred` holds over the latest state of every node, or `limit`.
    fn until(
        &mut self,
        limit: Duration,
        mut pred: impl FnMut(&BTreeMap<NodeId, (u64, u64, usize, usize, Option<NodeId>)>) -> bool,
    ) -> bool {
        let end = Instant::now() + limit;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            let Ok(r) = self.rx.recv_timeout(left) else {
                break;
            };
            if let Report::State(n, off, digest, topics, unfenced, leader) = r {
                self.state
                    .insert(n, (off, digest, topics, unfenced, leader));
                if pred(&self.state) {
                    return true;
                }
            }
        }
        false
    }

    fn answer(&mut self, limit: Duration) -> Option<(NodeId, Answer)> {
        let end = Instant::now() + limit;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(Report::Answer(n, a)) => return Some((n, a)),
                Ok(Report::State(n, off, digest, topics, unfenced, leader)) => {
                    self.state
                        .insert(n, (off, digest, topics, unfenced, leader));
                }
                Err(_) => break,
            }
        }
        None
    }
}

#[test]
fn three_nodes_register_create_topics_anywhere_and_survive_a_controller_stop() {
    let ca = DevCa::new("metadata test").unwrap();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let ids: [NodeId; 3] = [0, 1, 2];
    let voters: Vec<(NodeId, SocketAddr)> = ids.iter().map(|&n| (n, free_udp_addr())).collect();
    let spec = |n: NodeId| MetadataSpec {
        voter: VoterSpec {
            me: n,
            voters: voters.clone(),
            listen: voters[n as usize].1,
            dir: dirs[n as usize].path().to_path_buf(),
            creds: ca.issue(n).unwrap(),
            election_timeout_ms: 1000,
        },
        controller: controller_cfg(),
        shard_of: Box::new(|t: &str, p: i32, shards: u32| (t.len() as u32 + p as u32) % shards),
        // Small, so the restarted node's log is behind the others' snapshots.
        snapshot_every_entries: 4,
    };
    let (tx, rx) = mpsc::channel();
    let mut running: Vec<Option<Running>> = ids
        .iter()
        .map(|&n| Some(spawn_node(spec(n), tx.clone())))
        .collect();
    let mut h = Harness {
        rx,
        state: BTreeMap::new(),
    };
    assert!(
        h.until(Duration::from_secs(20), |s| s.len() == 3
            && s.values().all(|v| v.3 == 3)),
        "every broker registered and unfenced: {:?}",
        h.state
    );
    let leader = h.state[&0].4.expect("a leader");
    assert!(
        h.state.values().all(|v| v.4 == Some(leader)),
        "{:?}",
        h.state
    );

    // A topic created through every node: in process on the leader, over the link elsewhere.
    for n in ids {
        let cmds = &running[n as usize].as_ref().unwrap().cmds;
        cmds.unbounded_send(Cmd::Create(format!("topic-via-{n}"), 12))
            .unwrap();
        let (from, a) = h.answer(Duration::from_secs(15)).expect("an answer");
        assert_eq!(from, n);
        assert_eq!(a.error, None, "create through node {n} (leader {leader})");
        assert!(a.topic_id.is_some());
    }
    assert!(
        h.until(Duration::from_secs(10), |s| s.values().all(|v| v.2 == 3)
            && s.values()
                .map(|v| v.1)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == 1),
        "every image has the three topics and the same digest: {:?}",
        h.state
    );
    // A second creation of one name is refused with Kafka's error, whoever asks.
    let other = ids.iter().copied().find(|n| *n != leader).unwrap();
    running[other as usize]
        .as_ref()
        .unwrap()
        .cmds
        .unbounded_send(Cmd::Create("topic-via-0".into(), 1))
        .unwrap();
    let (_, a) = h.answer(Duration::from_secs(15)).unwrap();
    assert_eq!(a.error.unwrap().0, ErrorCode::TopicAlreadyExists);

    // The controller stops (a crash): another voter takes over, the stopped broker is
    // fenced when its session expires, and topics can be created.
    let stopped_at = Instant::now();
    let old = running[leader as usize].take().unwrap();
    old.cmds.unbounded_send(Cmd::Stop).unwrap();
    old.thread.join().unwrap();
    let survivors: Vec<NodeId> = ids.iter().copied().filter(|n| *n != leader).collect();
    assert!(
        h.until(Duration::from_secs(15), |s| survivors.iter().all(|n| {
            s.get(n)
                .is_some_and(|v| v.4.is_some() && v.4 != Some(leader))
        })),
        "a new controller: {:?}",
        h.state
    );
    eprintln!("new controller after {:?}", stopped_at.elapsed());
    let asker = survivors[0];
    running[asker as usize]
        .as_ref()
        .unwrap()
        .cmds
        .unbounded_send(Cmd::Create("after-failover".into(), 3))
        .unwrap();
    let (_, a) = h.answer(Duration::from_secs(15)).unwrap();
    assert_eq!(a.error, None);
    assert!(
        h.until(Duration::from_secs(10), |s| survivors
            .iter()
            .all(|n| s.get(n).is_some_and(|v| v.2 == 4 && v.3 == 2))),
        "the survivors have the new topic and fenced the stopped broker: {:?}",
        h.state
    );

    // Deletions (many entries: past a snapshot), then the stopped node restarts from its
    // directory and catches up to the same image.
    running[asker as usize]
        .as_ref()
        .unwrap()
        .cmds
        .unbounded_send(Cmd::Delete("topic-via-1".into()))
        .unwrap();
    let (_, a) = h.answer(Duration::from_secs(15)).unwrap();
    assert_eq!(a.error, None);
    running[leader as usize] = Some(spawn_node(spec(leader), tx.clone()));
    assert!(
        h.until(Duration::from_secs(20), |s| s.len() == 3
            && s.values().all(|v| v.2 == 3 && v.3 == 3)
            && s.values()
                .map(|v| v.1)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == 1),
        "the restarted node caught up and was unfenced: {:?}",
        h.state
    );
    for r in running.into_iter().flatten() {
        let _ = r.cmds.unbounded_send(Cmd::Stop);
        r.thread.join().unwrap();
    }
}
