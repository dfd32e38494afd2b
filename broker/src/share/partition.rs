//! One share-partition (a share group's view of one topic partition), sans-IO: which records
//! are in flight, who holds them, how often each was delivered (KIP-932).
//!
//! Offsets below `start` (the share-partition start offset, SPSO) are done. Offsets in
//! `[start, next)` have a state each; offsets from `next` on were never delivered. A record is
//! *acquired* by one member at a time, under a lock that expires after
//! `share.record.lock.duration.ms`; acknowledged as ACCEPT it is done, RELEASE makes it
//! available again, REJECT archives it (done, not processed). A record delivered
//! `share.delivery.count.limit` times and released again (or whose lock expires) is archived.
//! `start` moves past every leading done record.

use std::collections::BTreeMap;

use strand_wire::ErrorCode;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordState {
    Available,
    Acquired { member: String, until_ms: i64 },
    Acknowledged,
    Archived,
}

impl RecordState {
    fn done(&self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }

    /// The durable form (acquisitions are stored as available: after a restart nobody holds
    /// them).
    pub fn code(&self) -> u8 {
        match self {
            RecordState::Available | RecordState::Acquired { .. } => 0,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    pub fn from_code(code: u8) -> RecordState {
        match code {
            2 => RecordState::Acknowledged,
            4 => RecordState::Archived,
            _ => RecordState::Available,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlight {
    pub state: RecordState,
    pub delivery_count: i16,
}

/// KIP-932's acknowledge types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckType {
    /// No record at that offset (compacted away, a control record): done.
    Gap,
    Accept,
    Release,
    Reject,
}

impl AckType {
    pub fn from_wire(t: i8) -> Option<AckType> {
        Some(match t {
            0 => AckType::Gap,
            1 => AckType::Accept,
            2 => AckType::Release,
            3 => AckType::Reject,
            _ => return None,
        })
    }
}

/// Settings of the share group (group configs, Kafka's names).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `share.record.lock.duration.ms`.
    pub lock_ms: i64,
    /// `share.delivery.count.limit`.
    pub delivery_count_limit: i16,
    /// `share.partition.max.record.locks`: records in flight (acquired) at once.
    pub max_record_locks: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            lock_ms: 30_000,
            delivery_count_limit: 5,
            max_record_locks: 2_000,
        }
    }
}

/// A state change to persist: offsets `[first, last]` are now in `state` with
/// `delivery_count`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub first: i64,
    pub last: i64,
    pub state: u8,
    pub delivery_count: i16,
}

/// Acquired records, as ShareFetch reports them: `[first, last]` delivered `count` times.
pub type Acquired = (i64, i64, i16);

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SharePartition {
    pub start: i64,
    pub next: i64,
    records: BTreeMap<i64, InFlight>,
}

/// Groups consecutive offsets with the same value into `[first, last]` runs.
fn runs<T: PartialEq + Clone>(items: impl Iterator<Item = (i64, T)>) -> Vec<(i64, i64, T)> {
    let mut out: Vec<(i64, i64, T)> = Vec::new();
    for (o, v) in items {
        match out.last_mut() {
            Some((_, last, lv)) if *last + 1 == o && *lv == v => *last = o,
            _ => out.push((o, o, v)),
        }
    }
    out
}

impl SharePartition {
    /// A share-partition starting at `offset` (`share.auto.offset.reset`: the log start or end).
    pub fn starting_at(offset: i64) -> SharePartition {
        SharePartition {
            start: offset,
            next: offset,
            records: BTreeMap::new(),
        }
    }

    /// Records acquired now.
    pub fn acquired_count(&self) -> usize {
        self.records
            .values()
            .filter(|r| matches!(r.state, RecordState::Acquired { .. }))
            .count()
    }

    /// Records neither done nor acquired below `next`, plus everything from `next` on.
    pub fn first_available(&self) -> i64 {
        self.records
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map_or(self.next, |(o, _)| *o)
    }

    pub fn state_of(&self, offset: i64) -> Option<&InFlight> {
        self.records.get(&offset)
    }

    /// Acquires for `member` the deliverable offsets of `batches` (`(first, last, is_control)`
    /// of the batches read from the log, in order), batch by batch until `max_records` (or
    /// the record-lock limit) is reached — the last batch is taken whole. Control records
    /// are done at once. Returns what was acquired and the changes to persist.
    pub fn acquire(
        &mut self,
        member: &str,
        batches: &[(i64, i64, bool)],
        max_records: usize,
        limits: &Limits,
        now_ms: i64,
    ) -> (Vec<Acquired>, Vec<Change>) {
        let room = limits
            .max_record_locks
            .saturating_sub(self.acquired_count())
            .min(max_records);
        let mut got: Vec<(i64, i16)> = Vec::new();
        let mut changed: Vec<i64> = Vec::new();
        let until_ms = now_ms + limits.lock_ms;
        for &(first, last, control) in batches {
            // Whole batches, as Kafka acquires them: the limit is checked between batches, so
            // members do not each receive the same batch for a slice of it.
            if !control && got.len() >= room {
                break;
            }
            for o in first.max(self.start)..=last {
                if control {
                    if o >= self.next {
                        self.records.insert(
                            o,
                            InFlight {
                                state: RecordState::Archived,
                                delivery_count: 0,
                            },
                        );
                        self.next = o + 1;
                        changed.push(o);
                    }
                    continue;
                }
                let count = if o >= self.next {
                    // Offsets skipped between `next` and `o` (none in a plain log) are done.
                    for gap in self.next..o {
                        self.records.insert(
                            gap,
                            InFlight {
                                state: RecordState::Archived,
                                delivery_count: 0,
                            },
                        );
                        changed.push(gap);
                    }
                    self.next = o + 1;
                    1
                } else {
                    match self.records.get(&o) {
                        Some(r) if r.state == RecordState::Available => r.delivery_count + 1,
                        _ => continue,
                    }
                };
                self.records.insert(
                    o,
                    InFlight {
                        state: RecordState::Acquired {
                            member: member.to_string(),
                            until_ms,
                        },
                        delivery_count: count,
                    },
                );
                got.push((o, count));
                changed.push(o);
            }
        }
        let acquired = runs(got.into_iter());
        let changes = self.changes(changed);
        self.advance();
        (acquired, changes)
    }

    fn changes(&self, mut offsets: Vec<i64>) -> Vec<Change> {
        offsets.sort_unstable();
        offsets.dedup();
        runs(offsets.into_iter().filter_map(|o| {
            self.records
                .get(&o)
                .map(|r| (o, (r.state.code(), r.delivery_count)))
        }))
        .into_iter()
        .map(|(first, last, (state, delivery_count))| Change {
            first,
            last,
            state,
            delivery_count,
        })
        .collect()
    }

    /// Applies `member`'s acknowledgement of `[first, last]`, all or nothing: every offset
    /// must be acquired by it (INVALID_RECORD_STATE otherwise).
    pub fn acknowledge(
        &mut self,
        member: &str,
        first: i64,
        last: i64,
        ack: AckType,
        limits: &Limits,
    ) -> Result<Vec<Change>, ErrorCode> {
        if first > last || last - first > crate::limits::SHARE_ACK_BATCH_OFFSETS_MAX {
            return Err(ErrorCode::InvalidRequest);
        }
        for o in first..=last {
            match self.records.get(&o).map(|r| &r.state) {
                Some(RecordState::Acquired { member: m, .. }) if m == member => {}
                _ => return Err(ErrorCode::InvalidRecordState),
            }
        }
        for o in first..=last {
            if let Some(r) = self.records.get_mut(&o) {
                r.state = match ack {
                    AckType::Gap | AckType::Accept => RecordState::Acknowledged,
                    AckType::Reject => RecordState::Archived,
                    AckType::Release if r.delivery_count >= limits.delivery_count_limit => {
                        RecordState::Archived
                    }
                    AckType::Release => RecordState::Available,
                };
            }
        }
        let changes = self.changes((first..=last).collect());
        self.advance();
        Ok(changes)
    }

    /// Gives back what `member` holds (it left, or its session closed).
    pub fn release_member(&mut self, member: &str, limits: &Limits) -> Vec<Change> {
        self.release_where(limits, |m, _| m == member)
    }

    /// Expires locks past their time.
    pub fn expire_locks(&mut self, limits: &Limits, now_ms: i64) -> Vec<Change> {
        self.release_where(limits, |_, until| until <= now_ms)
    }

    fn release_where(&mut self, limits: &Limits, pick: impl Fn(&str, i64) -> bool) -> Vec<Change> {
        let mut changed = Vec::new();
        for (o, r) in self.records.iter_mut() {
            if let RecordState::Acquired { member, until_ms } = &r.state {
                if pick(member, *until_ms) {
                    r.state = if r.delivery_count >= limits.delivery_count_limit {
                        RecordState::Archived
                    } else {
                        RecordState::Available
                    };
                    changed.push(*o);
                }
            }
        }
        let changes = self.changes(changed);
        self.advance();
        changes
    }

    /// Moves `start` past leading done records.
    fn advance(&mut self) {
        while let Some(entry) = self.records.first_entry() {
            if *entry.key() != self.start || !entry.get().state.done() {
                break;
            }
            entry.remove();
            self.start += 1;
        }
        if self.records.is_empty() && self.start < self.next {
            // Everything delivered is done.
            self.start = self.next;
        }
        debug_assert!(self.start <= self.next);
    }

    /// Replays a persisted change (records acquired before a restart come back available,
    /// with the delivery count they had).
    pub fn apply(&mut self, c: &Change) {
        for o in c.first..=c.last {
            if o < self.start {
                continue;
            }
            self.records.insert(
                o,
                InFlight {
                    state: RecordState::from_code(c.state),
                    delivery_count: c.delivery_count,
                },
            );
            self.next = self.next.max(o + 1);
        }
        self.advance();
    }

    /// The in-flight records, for a snapshot.
    pub fn snapshot(&self) -> Vec<Change> {
        self.changes(self.records.keys().copied().collect())
    }

    /// AlterShareGroupOffsets / a log truncated under it: starts over at `offset`.
    pub fn reset_to(&mut self, offset: i64) {
        *self = SharePartition::starting_at(offset);
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
