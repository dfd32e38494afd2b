//! KIP-227 incremental fetch sessions (sans-IO): one cache per shard.
//!
//! A consumer that fetches 1,000 partitions would otherwise name all of them in every request
//! and get all of them back in every answer, even when two have new records. With a session
//! the broker remembers the partitions and their fetch offsets; an incremental request
//! names only the partitions whose offset changed (plus new ones, and `forgotten` ones to
//! drop), and the answer lists only partitions with records, an error, or a changed high
//! watermark, last stable offset or log start.
//!
//! Request metadata, as in Kafka's `FetchMetadata`:
//! - `session_id` 0, `epoch` -1: no session (a sessionless full fetch).
//! - `epoch` 0: a full fetch that asks for a new session (closing `session_id` if set).
//! - `session_id` set, `epoch` -1: close the session; answer sessionless.
//! - `epoch` > 0: incremental on `session_id`; an unknown id is FETCH_SESSION_ID_NOT_FOUND (70),
//!   an epoch other than the one expected is INVALID_FETCH_SESSION_EPOCH (71). Each accepted
//!   request moves the expected epoch on by one (wrapping to 1).
//!
//! Sessions live on the shard whose connection made them: a client that reconnects to another
//! shard gets 70 and starts a new session, as with a broker that restarted. The cache holds at
//! most `max.incremental.fetch.session.cache.slots` sessions per node (split over the shards)
//! and `limits::FETCH_SESSION_PARTITIONS_PER_SHARD` partitions in all; when full, a new session
//! replaces one idle for `limits::FETCH_SESSION_EVICTION_MS`, else the smallest if the new one
//! is larger (bigger sessions save more), else the fetch goes on without a session.
//!
//! Fairness: an incremental request cannot reorder its partitions, so the session starts each
//! fetch after the last partition that returned records (the response size limit would
//! otherwise always favour the first partitions).

use std::collections::HashMap;
use std::rc::Rc;

use strand_wire::ErrorCode;

use crate::storage::{TopicPartition, WeakLog};

/// What the client asked for in one partition. The name is shared (`Rc`): a session's
/// partitions are planned on every fetch, and cloning 1,000 strings each time showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Want {
    pub tp: Rc<TopicPartition>,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    /// Where the name resolved on this shard, shared by the session's entry and every plan
    /// cloned from it (so the fetch path fills it once per session, not once per fetch).
    pub memo: Memo,
}

/// The log a wanted partition resolved to, and the shard's partition-map generation then:
/// valid while the generation holds (no partition opened or removed since). Filled and read
/// by the fetch path; this module only carries it. Equal to any other memo.
#[derive(Clone, Default)]
pub struct Memo(Rc<std::cell::RefCell<Option<(u64, WeakLog)>>>);

impl Memo {
    /// The remembered log, when it was resolved at `generation` and is still open.
    pub fn get(&self, generation: u64) -> Option<crate::storage::PartitionLog> {
        match &*self.0.borrow() {
            Some((g, log)) if *g == generation => log.upgrade(),
            _ => None,
        }
    }

    pub fn set(&self, generation: u64, log: WeakLog) {
        *self.0.borrow_mut() = Some((generation, log));
    }
}

impl PartialEq for Memo {
    fn eq(&self, _: &Memo) -> bool {
        true
    }
}

impl Eq for Memo {}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memo")
    }
}

/// What the client was last told about a partition (for deciding what changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Told {
    pub high_watermark: i64,
    pub last_stable: i64,
    pub log_start: i64,
}

/// Never told anything: every field differs from any real answer.
const TOLD_NOTHING: Told = Told {
    high_watermark: i64::MIN,
    last_stable: i64::MIN,
    log_start: i64::MIN,
};

/// How to answer one fetch.
#[derive(Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every wanted partition, session id 0.
    Sessionless,
    /// Every wanted partition; `session_id` is the new session's (0: none was made).
    Full { session_id: i32 },
    /// Only the partitions that changed, on `session_id`.
    Incremental { session_id: i32 },
}

/// The partitions to read for one fetch, in order, with what the client knows of each.
#[derive(Debug)]
pub struct Plan {
    pub mode: Mode,
    pub wants: Vec<(Want, Told)>,
}

/// The outcome of reading one planned partition, for [`Plan::must_answer`].
#[derive(Clone, Copy, Debug)]
pub struct Answer {
    pub told: Told,
    pub has_records: bool,
    pub error: bool,
}

impl Plan {
    /// Whether the partition at `i` goes into the response: always, except in an incremental
    /// answer, where only records, errors and changed offsets do.
    pub fn must_answer(&self, i: usize, a: &Answer) -> bool {
        match self.mode {
            Mode::Incremental { .. } => a.has_records || a.error || a.told != self.wants[i].1,
            _ => true,
        }
    }
}

struct Entry {
    want: Want,
    told: Told,
}

struct Session {
    /// Epoch the next incremental request must carry.
    next_epoch: i32,
    entries: Vec<Entry>,
    index: HashMap<Rc<TopicPartition>, usize>,
    /// Where the next fetch starts (fairness, see the module comment).
    cursor: usize,
    last_used_ms: u64,
}

impl Session {
    fn upsert(&mut self, want: Want) {
        match self.index.get(&want.tp) {
            Some(&i) => {
                // Same name: what it resolved to stays valid (the memo checks its generation).
                let memo = self.entries[i].want.memo.clone();
                self.entries[i].want = Want { memo, ..want };
            }
            None => {
                self.index.insert(Rc::clone(&want.tp), self.entries.len());
                self.entries.push(Entry {
                    want,
                    told: TOLD_NOTHING,
                });
            }
        }
    }

    fn forget(&mut self, tp: &TopicPartition) {
        let Some(i) = self.index.remove(tp) else {
            return;
        };
        self.entries.swap_remove(i);
        if let Some(moved) = self.entries.get(i) {
            self.index.insert(Rc::clone(&moved.want.tp), i);
        }
        debug_assert_eq!(self.index.len(), self.entries.len());
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// One shard's fetch sessions.
pub struct FetchSessions {
    sessions: HashMap<i32, Session>,
    slots_max: usize,
    partitions_max: usize,
    /// Partitions held by every session together.
    partitions: usize,
    eviction_ms: u64,
    /// xorshift state for session ids.
    seed: u64,
}

impl FetchSessions {
    /// `slots_max` 0 disables sessions (every fetch is answered in full, session id 0).
    pub fn new(slots_max: usize, partitions_max: usize, eviction_ms: u64, seed: u64) -> Self {
        FetchSessions {
            sessions: HashMap::new(),
            slots_max,
            partitions_max,
            partitions: 0,
            eviction_ms,
            seed: seed | 1,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Starts a fetch: the partitions to read and how to answer, or a session error.
    /// `wants` are the request's partitions (each once), `forgotten` its forgotten ones.
    pub fn plan(
        &mut self,
        session_id: i32,
        epoch: i32,
        wants: Vec<Want>,
        forgotten: &[TopicPartition],
        now_ms: u64,
    ) -> Result<Plan, ErrorCode> {
        let full = |mode| Plan {
            mode,
            wants: wants.iter().map(|w| (w.clone(), TOLD_NOTHING)).collect(),
        };
        if epoch == -1 || epoch == 0 {
            if session_id != 0 {
                self.remove(session_id);
            }
            if epoch == -1 {
                return Ok(full(Mode::Sessionless));
            }
            let session_id = self.create(&wants, now_ms);
            return Ok(full(Mode::Full { session_id }));
        }
        let partitions_max = self.partitions_max;
        let held_elsewhere = self.partitions;
        let Some(s) = self.sessions.get_mut(&session_id) else {
            return Err(ErrorCode::FetchSessionIdNotFound);
        };
        if s.next_epoch != epoch {
            return Err(ErrorCode::InvalidFetchSessionEpoch);
        }
        let before = s.entries.len();
        for w in wants {
            s.upsert(w);
        }
        for tp in forgotten {
            s.forget(tp);
        }
        let after = s.entries.len();
        if held_elsewhere - before + after > partitions_max {
            // Grown past what the shard holds for sessions: the client starts over (and its
            // next full fetch gets a session only if there is room).
            self.sessions.remove(&session_id);
            self.partitions = held_elsewhere - before;
            return Err(ErrorCode::FetchSessionIdNotFound);
        }
        self.partitions = held_elsewhere - before + after;
        s.next_epoch = next_epoch(epoch);
        s.last_used_ms = now_ms;
        let n = s.entries.len();
        let start = if n == 0 { 0 } else { s.cursor % n };
        let wants = (0..n)
            .map(|k| {
                let e = &s.entries[(start + k) % n];
                (e.want.clone(), e.told)
            })
            .collect();
        Ok(Plan {
            mode: Mode::Incremental { session_id },
            wants,
        })
    }

    /// Records what a fetch told the client: `answered` pairs a planned partition's index
    /// with its answer, for every partition the response carried.
    pub fn told(&mut self, plan: &Plan, answered: &[(usize, Answer)]) {
        let session_id = match plan.mode {
            Mode::Full { session_id } | Mode::Incremental { session_id } => session_id,
            Mode::Sessionless => return,
        };
        let Some(s) = self.sessions.get_mut(&session_id) else {
            return; // evicted or closed meanwhile
        };
        let mut last_with_records = None;
        for &(i, a) in answered {
            let tp = &plan.wants[i].0.tp;
            if let Some(&at) = s.index.get(&**tp) {
                s.entries[at].told = a.told;
                if a.has_records {
                    last_with_records = Some(at);
                }
            }
        }
        if let Some(at) = last_with_records {
            s.cursor = at + 1;
        }
    }

    fn remove(&mut self, session_id: i32) {
        if let Some(s) = self.sessions.remove(&session_id) {
            self.partitions -= s.entries.len();
        }
    }

    /// A new session for a full fetch of `wants`, or 0 when there is no room.
    fn create(&mut self, wants: &[Want], now_ms: u64) -> i32 {
        if self.slots_max == 0 || wants.is_empty() || wants.len() > self.partitions_max {
            return 0;
        }
        while self.sessions.len() >= self.slots_max
            || self.partitions + wants.len() > self.partitions_max
        {
            let Some(victim) = self.victim(wants.len(), now_ms) else {
                return 0;
            };
            self.remove(victim);
        }
        let id = loop {
            self.seed ^= self.seed << 13;
            self.seed ^= self.seed >> 7;
            self.seed ^= self.seed << 17;
            let id = (self.seed as i32) & i32::MAX;
            if id != 0 && !self.sessions.contains_key(&id) {
                break id;
            }
        };
        let mut s = Session {
            next_epoch: 1,
            entries: Vec::with_capacity(wants.len()),
            index: HashMap::with_capacity(wants.len()),
            cursor: 0,
            last_used_ms: now_ms,
        };
        for w in wants {
            s.upsert(w.clone());
        }
        self.partitions += s.entries.len();
        self.sessions.insert(id, s);
        id
    }

    /// The session to make room with: the longest idle one if idle past the eviction time,
    /// else the smallest if it is smaller than the new one.
    fn victim(&self, new_size: usize, now_ms: u64) -> Option<i32> {
        let idle = self
            .sessions
            .iter()
            .min_by_key(|(_, s)| s.last_used_ms)
            .filter(|(_, s)| now_ms.saturating_sub(s.last_used_ms) >= self.eviction_ms);
        if let Some((&id, _)) = idle {
            return Some(id);
        }
        self.sessions
            .iter()
            .min_by_key(|(_, s)| s.entries.len())
            .filter(|(_, s)| s.entries.len() < new_size)
            .map(|(&id, _)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(p: i32, offset: i64) -> Want {
        Want {
            tp: Rc::new(("t".to_string(), p)),
            fetch_offset: offset,
            max_bytes: 1 << 20,
            memo: Memo::default(),
        }
    }

    fn told(hw: i64) -> Told {
        Told {
            high_watermark: hw,
            last_stable: hw,
            log_start: 0,
        }
    }

    fn answer(hw: i64, has_records: bool) -> Answer {
        Answer {
            told: told(hw),
            has_records,
            error: false,
        }
    }

    fn cache() -> FetchSessions {
        FetchSessions::new(2, 10, 1_000, 42)
    }

    fn session_of(plan: &Plan) -> i32 {
        match plan.mode {
            Mode::Full { session_id } | Mode::Incremental { session_id } => session_id,
            Mode::Sessionless => 0,
        }
    }

    #[test]
    fn sessionless_and_full_fetches_answer_everything() {
        let mut c = cache();
        let p = c.plan(0, -1, vec![want(0, 5)], &[], 0).expect("plan");
        assert_eq!(p.mode, Mode::Sessionless);
        assert!(c.is_empty());
        let p = c
            .plan(0, 0, vec![want(0, 5), want(1, 7)], &[], 0)
            .expect("plan");
        assert!(session_of(&p) > 0);
        assert_eq!(c.len(), 1);
        assert!(p.must_answer(0, &answer(TOLD_NOTHING.high_watermark, false)));
    }

    #[test]
    fn incremental_answers_only_what_changed_and_keeps_offsets() {
        let mut c = cache();
        let p = c
            .plan(0, 0, vec![want(0, 5), want(1, 7)], &[], 0)
            .expect("plan");
        let id = session_of(&p);
        c.told(&p, &[(0, answer(10, true)), (1, answer(7, false))]);
        // Partition 0 advanced to 10; partition 1 is unchanged and not named.
        let p = c.plan(id, 1, vec![want(0, 10)], &[], 1).expect("plan");
        assert_eq!(p.mode, Mode::Incremental { session_id: id });
        let offsets: Vec<(i32, i64)> = p
            .wants
            .iter()
            .map(|(w, _)| (w.tp.1, w.fetch_offset))
            .collect();
        // Starts after the partition that returned records (fairness).
        assert_eq!(offsets, vec![(1, 7), (0, 10)]);
        assert!(!p.must_answer(0, &answer(7, false)), "nothing new");
        assert!(p.must_answer(0, &answer(8, false)), "high watermark moved");
        assert!(p.must_answer(1, &answer(10, true)), "records");
        let err = Answer {
            error: true,
            ..answer(10, false)
        };
        assert!(p.must_answer(1, &err), "an error");
    }

    #[test]
    fn epochs_are_checked_and_unknown_sessions_refused() {
        let mut c = cache();
        let p = c.plan(0, 0, vec![want(0, 0)], &[], 0).expect("plan");
        let id = session_of(&p);
        assert_eq!(
            c.plan(id, 2, vec![], &[], 0).unwrap_err(),
            ErrorCode::InvalidFetchSessionEpoch
        );
        assert!(c.plan(id, 1, vec![], &[], 0).is_ok());
        assert!(c.plan(id, 2, vec![], &[], 0).is_ok());
        assert_eq!(
            c.plan(id + 1, 1, vec![], &[], 0).unwrap_err(),
            ErrorCode::FetchSessionIdNotFound
        );
        // epoch -1 on the session closes it.
        let p = c.plan(id, -1, vec![want(0, 0)], &[], 0).expect("plan");
        assert_eq!(p.mode, Mode::Sessionless);
        assert_eq!(
            c.plan(id, 3, vec![], &[], 0).unwrap_err(),
            ErrorCode::FetchSessionIdNotFound
        );
        assert_eq!(next_epoch(i32::MAX), 1);
    }

    #[test]
    fn forgotten_partitions_leave_the_session() {
        let mut c = cache();
        let p = c
            .plan(0, 0, vec![want(0, 0), want(1, 0), want(2, 0)], &[], 0)
            .expect("plan");
        let id = session_of(&p);
        let p = c
            .plan(id, 1, vec![want(3, 0)], &[("t".to_string(), 0)], 0)
            .expect("plan");
        let mut parts: Vec<i32> = p.wants.iter().map(|(w, _)| w.tp.1).collect();
        parts.sort_unstable();
        assert_eq!(parts, vec![1, 2, 3]);
        assert_eq!(c.partitions, 3);
    }

    #[test]
    fn a_full_cache_evicts_idle_then_smaller_sessions() {
        let mut c = cache(); // 2 slots, 10 partitions, 1 s eviction
        let a = session_of(&c.plan(0, 0, vec![want(0, 0)], &[], 0).expect("plan"));
        let b = session_of(
            &c.plan(0, 0, vec![want(0, 0), want(1, 0)], &[], 500)
                .expect("plan"),
        );
        // Same size as the smallest and nobody idle long enough: no session.
        let p = c.plan(0, 0, vec![want(2, 0)], &[], 600).expect("plan");
        assert_eq!(p.mode, Mode::Full { session_id: 0 });
        // Larger than the smallest (a, 1 partition): replaces it.
        let d = session_of(
            &c.plan(0, 0, vec![want(0, 0), want(1, 0), want(2, 0)], &[], 700)
                .expect("plan"),
        );
        assert!(d > 0);
        assert_eq!(
            c.plan(a, 1, vec![], &[], 700).unwrap_err(),
            ErrorCode::FetchSessionIdNotFound
        );
        // b idle for 1 s: a small session may replace it.
        let e = session_of(&c.plan(0, 0, vec![want(9, 0)], &[], 1_600).expect("plan"));
        assert!(e > 0);
        assert_eq!(
            c.plan(b, 1, vec![], &[], 1_600).unwrap_err(),
            ErrorCode::FetchSessionIdNotFound
        );
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn partitions_are_bounded_per_shard() {
        let mut c = cache(); // 10 partitions
        let many: Vec<Want> = (0..11).map(|p| want(p, 0)).collect();
        let p = c.plan(0, 0, many, &[], 0).expect("plan");
        assert_eq!(
            p.mode,
            Mode::Full { session_id: 0 },
            "too big for the shard"
        );
        let id = session_of(&c.plan(0, 0, vec![want(0, 0)], &[], 0).expect("plan"));
        let grow: Vec<Want> = (1..11).map(|p| want(p, 0)).collect();
        assert_eq!(
            c.plan(id, 1, grow, &[], 0).unwrap_err(),
            ErrorCode::FetchSessionIdNotFound,
            "grown past the bound: the client starts over"
        );
        assert_eq!(c.partitions, 0);
        assert!(c.is_empty());
    }
}
