//! The metadata quorum in a simulated network: voters exchange raft messages through an
//! in-memory queue; a voter can be cut off (its messages dropped both ways) or stopped (no
//! ticks, nothing delivered) and restarted over the same store. Time is counted in ticks.

use std::collections::{BTreeSet, VecDeque};

use raft::eraftpb::Message;
use raft::storage::MemStorage;

use crate::quorum::{discard_logger, mem_store, Quorum, QuorumConfig};

const ELECTION_TICKS: usize = 10;

fn cfg() -> QuorumConfig {
    QuorumConfig {
        tick_ms: 100,
        election_ticks: ELECTION_TICKS,
        heartbeat_ticks: 2,
    }
}

struct Net {
    voters: Vec<Quorum<MemStorage>>,
    stores: Vec<MemStorage>,
    queue: VecDeque<Message>,
    cut: BTreeSet<u64>,
    stopped: BTreeSet<u64>,
    /// Each voter's committed stream, as applied.
    applied: Vec<Vec<(u64, Vec<u8>)>>,
}

impl Net {
    fn new(n: u64) -> Net {
        let ids: Vec<u64> = (1..=n).collect();
        let logger = discard_logger();
        let stores: Vec<MemStorage> = ids.iter().map(|_| mem_store(&ids)).collect();
        let voters = ids
            .iter()
            .zip(&stores)
            .map(|(id, s)| Quorum::new(*id, s.clone(), cfg(), &logger).unwrap())
            .collect();
        Net {
            voters,
            stores,
            queue: VecDeque::new(),
            cut: BTreeSet::new(),
            stopped: BTreeSet::new(),
            applied: vec![Vec::new(); n as usize],
        }
    }

    fn up(&self, id: u64) -> bool {
        !self.cut.contains(&id) && !self.stopped.contains(&id)
    }

    /// Polls every running voter and delivers messages until nothing moves.
    fn pump(&mut self) {
        for _round in 0..10_000 {
            for i in 0..self.voters.len() {
                let id = i as u64 + 1;
                if self.stopped.contains(&id) {
                    continue;
                }
                let out = self.voters[i].poll().unwrap();
                if out.snapshot.is_some() {
                    self.applied[i].clear();
                }
                self.applied[i].extend(out.committed);
                self.queue.extend(out.messages);
            }
            if self.queue.is_empty() {
                return;
            }
            while let Some(m) = self.queue.pop_front() {
                if self.up(m.from) && self.up(m.to) {
                    let to = m.to as usize - 1;
                    self.voters[to].step(m).unwrap();
                }
            }
        }
        panic!("the simulated network never went quiet");
    }

    fn tick(&mut self) {
        for i in 0..self.voters.len() {
            if !self.stopped.contains(&(i as u64 + 1)) {
                self.voters[i].tick();
            }
        }
        self.pump();
    }

    /// The leader as the running, connected voters see it, if they agree on one.
    fn leader(&self) -> Option<u64> {
        let leaders: Vec<u64> = (1..=self.voters.len() as u64)
            .filter(|id| self.up(*id))
            .filter(|id| self.voters[*id as usize - 1].leadership().is_leader)
            .collect();
        match leaders[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Ticks until a leader is known; the ticks it took.
    fn until_leader(&mut self, max_ticks: usize) -> (u64, usize) {
        for t in 1..=max_ticks {
            self.tick();
            if let Some(l) = self.leader() {
                return (l, t);
            }
        }
        panic!("no leader after {max_ticks} ticks");
    }

    fn propose(&mut self, leader: u64, data: &[u8]) {
        self.voters[leader as usize - 1]
            .propose(data.to_vec())
            .unwrap();
        self.pump();
    }

    fn payloads(&self, voter: u64) -> Vec<Vec<u8>> {
        self.applied[voter as usize - 1]
            .iter()
            .map(|(_, d)| d.clone())
            .collect()
    }
}

#[test]
fn three_voters_elect_one_leader_and_commit_in_the_same_order() {
    let mut net = Net::new(3);
    let (leader, ticks) = net.until_leader(10 * ELECTION_TICKS);
    // Each election round waits one random timeout in [10, 20) ticks; two voters timing out
    // on the same tick split the vote and start another round in a higher term.
    let rounds = net.voters[leader as usize - 1].leadership().term as usize;
    assert!(
        ticks <= rounds * 2 * ELECTION_TICKS + 2,
        "took {ticks} ticks for {rounds} rounds"
    );
    for i in 0..100u32 {
        net.propose(leader, &i.to_be_bytes());
    }
    let want: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_be_bytes().to_vec()).collect();
    for v in 1..=3 {
        assert_eq!(net.payloads(v), want, "voter {v}");
    }
    // Indexes increase and are the same on every voter.
    let idx: Vec<u64> = net.applied[0].iter().map(|(i, _)| *i).collect();
    assert!(idx.windows(2).all(|w| w[0] < w[1]));
    for v in 1..3 {
        let other: Vec<u64> = net.applied[v].iter().map(|(i, _)| *i).collect();
        assert_eq!(other, idx);
    }
    // The leader sees every voter caught up to its commit index; a follower knows the
    // leader and the term but tracks no one.
    let status = net.voters[leader as usize - 1].status();
    assert!(status.is_leader);
    assert_eq!(status.voters.len(), 3);
    assert!(status
        .voters
        .iter()
        .all(|v| v.matched_index == status.commit_index));
    assert_eq!(status.last_index, status.commit_index);
    let other = if leader == 1 { 2 } else { 1 };
    let follower_status = net.voters[other as usize - 1].status();
    assert_eq!(follower_status.leader_id, leader);
    assert_eq!(follower_status.term, status.term);
    assert!(follower_status.voters.is_empty());
    // A follower refuses proposals and names the leader.
    let follower = if leader == 1 { 2 } else { 1 };
    let e = net.voters[follower as usize - 1]
        .propose(b"x".to_vec())
        .unwrap_err();
    assert_eq!(e.leader_id, leader);
}

#[test]
fn a_stopped_leader_is_replaced_within_two_election_timeouts_a_round_and_catches_up_after() {
    let mut net = Net::new(3);
    let (old, _) = net.until_leader(10 * ELECTION_TICKS);
    net.propose(old, b"before");
    let old_term = net.voters[old as usize - 1].leadership().term;
    net.stopped.insert(old);
    let (new, ticks) = net.until_leader(10 * ELECTION_TICKS);
    assert_ne!(new, old);
    // Followers wait a random [10, 20) ticks without heartbeats; pre-vote and vote take no
    // extra tick here. 100 ms ticks: at most ~2 s per round. If both followers time out on
    // the same tick they split the vote and wait again in a higher term (CI saw 27 ticks).
    let rounds = (net.voters[new as usize - 1].leadership().term - old_term) as usize;
    assert!(rounds >= 1);
    assert!(
        ticks <= rounds * 2 * ELECTION_TICKS + 1,
        "failover took {ticks} ticks for {rounds} rounds"
    );
    net.propose(new, b"after");
    // The old leader restarts over its store: it replays what it had committed, follows
    // the new leader and catches up.
    net.stopped.remove(&old);
    let logger = discard_logger();
    let store = net.stores[old as usize - 1].clone();
    net.voters[old as usize - 1] = Quorum::new(old, store, cfg(), &logger).unwrap();
    net.applied[old as usize - 1].clear();
    for _ in 0..3 * ELECTION_TICKS {
        net.tick();
    }
    assert_eq!(
        net.leader(),
        Some(new),
        "the restarted voter did not depose the leader"
    );
    let want = vec![b"before".to_vec(), b"after".to_vec()];
    for v in 1..=3 {
        assert_eq!(net.payloads(v), want, "voter {v}");
    }
}

#[test]
fn a_cut_off_follower_neither_disrupts_the_leader_nor_commits_alone() {
    let mut net = Net::new(3);
    let (leader, _) = net.until_leader(10 * ELECTION_TICKS);
    let term = net.voters[leader as usize - 1].leadership().term;
    let lonely = if leader == 3 { 1 } else { 3 };
    net.cut.insert(lonely);
    for _ in 0..10 * ELECTION_TICKS {
        net.tick();
    }
    net.propose(leader, b"while-cut");
    assert!(
        net.payloads(lonely).is_empty(),
        "a minority commits nothing"
    );
    net.cut.remove(&lonely);
    for _ in 0..3 * ELECTION_TICKS {
        net.tick();
    }
    // Pre-vote: the lonely voter never bumped the term, so the leader kept its place.
    assert_eq!(net.leader(), Some(leader));
    assert_eq!(net.voters[leader as usize - 1].leadership().term, term);
    assert_eq!(net.payloads(lonely), vec![b"while-cut".to_vec()]);
}

#[test]
fn a_leader_cut_off_from_its_quorum_steps_down() {
    let mut net = Net::new(3);
    let (leader, _) = net.until_leader(10 * ELECTION_TICKS);
    net.cut.insert(leader);
    // Check-quorum: it hears from nobody for an election timeout and steps down, while the
    // other two elect a leader of their own (after a split vote or two, possibly).
    for _ in 0..2 * ELECTION_TICKS {
        net.tick();
    }
    assert!(!net.voters[leader as usize - 1].leadership().is_leader);
    let (new, _) = net.until_leader(10 * ELECTION_TICKS);
    assert_ne!(new, leader);
}

#[test]
fn a_dead_leader_with_evidence_is_replaced_within_three_ticks() {
    for _round in 0..20 {
        let mut net = Net::new(3);
        let (old, _) = net.until_leader(10 * ELECTION_TICKS);
        net.propose(old, b"before");
        net.stopped.insert(old);
        // The survivors' tripwires fire (in id order; the highest-ranked one may be late).
        let survivors: Vec<u64> = (1..=3).filter(|v| *v != old).collect();
        for v in survivors.iter().rev() {
            net.voters[*v as usize - 1].leader_gone(old);
        }
        net.pump();
        let mut ticks = 0;
        let new = loop {
            if let Some(l) = net.leader() {
                break l;
            }
            assert!(ticks < 3, "no leader {ticks} ticks after the evidence");
            net.tick();
            ticks += 1;
        };
        assert_eq!(new, survivors[0], "rank 0 (the lowest id) wins");
        net.propose(new, b"after");
        assert_eq!(
            net.payloads(new),
            vec![b"before".to_vec(), b"after".to_vec()]
        );
    }
}

#[test]
fn a_voter_without_evidence_still_refuses_a_vote_while_in_lease() {
    let mut net = Net::new(3);
    let (leader, _) = net.until_leader(10 * ELECTION_TICKS);
    // One follower wrongly believes the leader dead; the other has no such evidence, and the
    // leader lives: the healthy leader is not deposed.
    let follower = (1..=3).find(|v| *v != leader).unwrap();
    // A voter acts on evidence only about the leader it follows.
    net.voters[follower as usize - 1].leader_gone(leader);
    for _ in 0..5 {
        net.tick();
    }
    assert_eq!(net.leader(), Some(leader));
}

#[test]
fn a_vote_ignored_for_the_dead_leaders_lease_is_heard_once_the_evidence_arrives() {
    let mut net = Net::new(3);
    let (old, _) = net.until_leader(10 * ELECTION_TICKS);
    net.stopped.insert(old);
    let survivors: Vec<u64> = (1..=3).filter(|v| *v != old).collect();
    // Rank 0 sees the death first and campaigns; the other is still in the lease.
    net.voters[survivors[0] as usize - 1].leader_gone(old);
    net.pump();
    assert_eq!(net.leader(), None, "the vote was ignored in lease");
    // Its evidence arrives a moment later, before any tick: the ignored vote is heard.
    net.voters[survivors[1] as usize - 1].leader_gone(old);
    net.pump();
    assert_eq!(net.leader(), Some(survivors[0]));
}
