//! Three voters, each on an executor of its own thread, over real UDP on loopback with real
//! files: election, ordered commit everywhere, a leader stopped and replaced, its restart
//! replaying its log and catching up.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use strand_cluster_core::transport::certs::DevCa;

use super::*;

enum Cmd {
    Propose(Vec<u8>),
    Stop,
}

#[derive(Debug)]
enum Report {
    Leader(NodeId, Leader),
    Committed(NodeId, Committed),
}

fn free_udp_addr() -> SocketAddr {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap()
}

struct Running {
    cmds: futures_channel::mpsc::UnboundedSender<Cmd>,
    thread: std::thread::JoinHandle<()>,
}

fn spawn_voter(spec: VoterSpec, reports: mpsc::Sender<Report>) -> Running {
    let (tx, mut rx) = futures_channel::mpsc::unbounded::<Cmd>();
    let me = spec.me;
    let thread = std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .unwrap()
            .run(async move {
                let v = QuorumVoter::start(spec).unwrap();
                let (v2, r2) = (v.clone(), reports.clone());
                glommio::spawn_local(async move {
                    while let Some(c) = v2.next_committed().await {
                        let _ = r2.send(Report::Committed(me, c));
                    }
                })
                .detach();
                let (v3, r3) = (v.clone(), reports);
                glommio::spawn_local(async move {
                    let mut last = v3.leader();
                    while !v3.is_stopped() {
                        let l = v3.leader_change(last, Duration::from_millis(200)).await;
                        if l != last {
                            last = l;
                            if r3.send(Report::Leader(me, l)).is_err() {
                                return;
                            }
                        }
                    }
                })
                .detach();
                while let Some(cmd) = rx.next().await {
                    match cmd {
                        Cmd::Propose(d) => {
                            let _ = v.propose(d);
                        }
                        Cmd::Stop => {
                            v.stop().await;
                            return;
                        }
                    }
                }
            });
    });
    Running { cmds: tx, thread }
}

/// Waits for a report matching `pick`, keeping every committed entry seen meanwhile.
fn wait_for<T>(
    rx: &mpsc::Receiver<Report>,
    entries: &mut std::collections::HashMap<NodeId, Vec<Vec<u8>>>,
    limit: Duration,
    mut pick: impl FnMut(&Report, &std::collections::HashMap<NodeId, Vec<Vec<u8>>>) -> Option<T>,
) -> Option<T> {
    let end = Instant::now() + limit;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let Ok(r) = rx.recv_timeout(left) else { break };
        if let Report::Committed(n, Committed::Entry { data, .. }) = &r {
            entries.entry(*n).or_default().push(data.clone());
        }
        if let Some(t) = pick(&r, entries) {
            return Some(t);
        }
    }
    None
}

#[test]
fn three_voters_commit_in_order_survive_a_leader_stop_and_a_restart_catches_up() {
    let ca = DevCa::new("quorum test").unwrap();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let ids: [NodeId; 3] = [0, 1, 2];
    let voters: Vec<(NodeId, SocketAddr)> = ids.iter().map(|&n| (n, free_udp_addr())).collect();
    let spec = |n: NodeId| VoterSpec {
        me: n,
        voters: voters.clone(),
        listen: voters[n as usize].1,
        dir: dirs[n as usize].path().to_path_buf(),
        creds: ca.issue(n).unwrap(),
        election_timeout_ms: 1000,
    };
    let (tx, rx) = mpsc::channel();
    let mut running: Vec<Option<Running>> = ids
        .iter()
        .map(|&n| Some(spawn_voter(spec(n), tx.clone())))
        .collect();
    let mut entries = std::collections::HashMap::new();

    let (leader, old_term) = wait_for(&rx, &mut entries, Duration::from_secs(15), |r, _| match r {
        Report::Leader(n, l) if l.is_me => Some((*n, l.term)),
        _ => None,
    })
    .expect("a leader is elected");
    for i in 0..50u8 {
        let cmds = &running[leader as usize].as_ref().unwrap().cmds;
        cmds.unbounded_send(Cmd::Propose(vec![i])).unwrap();
    }
    let all: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i]).collect();
    let done = wait_for(&rx, &mut entries, Duration::from_secs(15), |_, e| {
        ids.iter()
            .all(|n| e.get(n).is_some_and(|v| v.len() >= 50))
            .then_some(())
    });
    assert!(done.is_some(), "every voter commits: {entries:?}");
    for n in ids {
        assert_eq!(entries[&n], all, "voter {n} has the same entries in order");
    }

    // Stop the leader: the other two elect one of themselves.
    let stopped_at = Instant::now();
    let old = running[leader as usize].take().unwrap();
    old.cmds.unbounded_send(Cmd::Stop).unwrap();
    old.thread.join().unwrap();
    let (new_leader, new_term) =
        wait_for(&rx, &mut entries, Duration::from_secs(15), |r, _| match r {
            Report::Leader(n, l) if l.is_me && *n != leader => Some((*n, l.term)),
            _ => None,
        })
        .expect("a new leader");
    let failover = stopped_at.elapsed();
    // Each election round waits a random [1, 2) s timeout; a split vote (both followers
    // timing out together) costs another round in a higher term.
    let rounds = new_term.saturating_sub(old_term).max(1);
    eprintln!(
        "failover after a stopped leader: {failover:?} in {rounds} round(s) (election timeout 1000 ms)"
    );
    assert!(
        failover < Duration::from_millis(2000 * rounds + 1000),
        "failover took {failover:?} for {rounds} round(s)"
    );
    for i in 50..60u8 {
        let cmds = &running[new_leader as usize].as_ref().unwrap().cmds;
        cmds.unbounded_send(Cmd::Propose(vec![i])).unwrap();
    }
    let survivors: Vec<NodeId> = ids.iter().copied().filter(|&n| n != leader).collect();
    assert!(
        wait_for(&rx, &mut entries, Duration::from_secs(15), |_, e| {
            survivors
                .iter()
                .all(|n| e.get(n).is_some_and(|v| v.len() >= 60))
                .then_some(())
        })
        .is_some(),
        "the survivors commit without the old leader"
    );

    // The old leader comes back from its directory: it replays its log and catches up.
    entries.remove(&leader);
    running[leader as usize] = Some(spawn_voter(spec(leader), tx.clone()));
    assert!(
        wait_for(&rx, &mut entries, Duration::from_secs(15), |_, e| {
            e.get(&leader).is_some_and(|v| v.len() >= 60).then_some(())
        })
        .is_some(),
        "the restarted voter catches up: {:?}",
        entries.get(&leader).map(Vec::len)
    );
    let all: Vec<Vec<u8>> = (0..60u8).map(|i| vec![i]).collect();
    for n in ids {
        assert_eq!(entries[&n][..60], all[..], "voter {n}");
    }
    for r in running.into_iter().flatten() {
        let _ = r.cmds.unbounded_send(Cmd::Stop);
        r.thread.join().unwrap();
    }
}
