//! Transaction coordinator (sans-IO): one [`TxnMeta`] per `transactional.id`, driven by
//! requests and `now_ms`.
//!
//! Each call validates a request against the current state and returns either an error code
//! or the next state to persist (a [`Step`]). The I/O layer (`crate::node::txn_service`) writes the
//! next state to `__transaction_state`, then [`Coordinator::adopt`]s it: the log is the truth,
//! memory follows it. Ending a transaction is three steps — `Prepare{Commit,Abort}` persisted,
//! markers written to every partition in it, `Complete{Commit,Abort}` persisted — and a
//! coordinator that restarts in a `Prepare*` state finishes the job.
//!
//! States and transitions follow Kafka's `TransactionState`:
//! `Empty -> Ongoing -> PrepareCommit|PrepareAbort -> CompleteCommit|CompleteAbort -> Ongoing`.
//! Strand speaks transaction version 1 (no KIP-890 epoch bump per transaction): the epoch is
//! bumped by InitProducerId and by a timeout or fencing abort.

mod codec;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};

use strand_wire::ErrorCode;

pub use codec::{decode, encode};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    /// Kafka's names (DescribeTransactions, ListTransactions, `kafka-transactions`).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// A partition in a transaction.
pub type TxnPartition = (String, i32);

/// A transactional id's state, as persisted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMeta {
    pub transactional_id: String,
    pub producer_id: i64,
    pub epoch: i16,
    /// The epoch before the last bump by the coordinator (a timeout abort), so the producer
    /// that held it may still re-initialise with it (KIP-360); -1 if none.
    pub last_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TxnPartition>,
    /// When the ongoing transaction started; -1 when none.
    pub start_ms: i64,
    pub update_ms: i64,
}

/// What the I/O layer must do next for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Answer now; nothing changes.
    Done,
    /// Persist this state, adopt it, then answer.
    Persist(TxnMeta),
    /// Persist this `Prepare*` state, write its markers, persist the matching `Complete*`
    /// state ([`complete`]), then go on with the request (InitProducerId re-runs).
    End(TxnMeta),
}

/// The `Complete*` state that follows a `Prepare*` one once its markers are written.
pub fn complete(prepared: &TxnMeta, now_ms: i64) -> TxnMeta {
    let mut next = prepared.clone();
    next.state = match prepared.state {
        TxnState::PrepareCommit => TxnState::CompleteCommit,
        _ => TxnState::CompleteAbort,
    };
    next.partitions.clear();
    next.start_ms = -1;
    next.update_ms = now_ms;
    next
}

/// The producer id and epoch a request claims.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    pub producer_id: i64,
    pub epoch: i16,
    /// The request version answers fencing with PRODUCER_FENCED (newer) rather than
    /// INVALID_PRODUCER_EPOCH.
    pub fenced_code: ErrorCode,
}

#[derive(Debug, Default)]
pub struct Coordinator {
    pub txns: HashMap<String, TxnMeta>,
}

impl Coordinator {
    pub fn get(&self, id: &str) -> Option<&TxnMeta> {
        self.txns.get(id)
    }

    /// Makes a persisted state current.
    pub fn adopt(&mut self, meta: TxnMeta) {
        self.txns.insert(meta.transactional_id.clone(), meta);
    }

    /// InitProducerId with a transactional id. `new_producer_id` is called when the id needs
    /// one (`None`: no id to hand out yet — a cluster node waiting for a block from the
    /// controller — answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry). `claim` is the producer id/epoch the request carries (-1 when none, KIP-360).
    pub fn init(
        &self,
        id: &str,
        timeout_ms: i32,
        timeout_max_ms: i32,
        claim: (i64, i16),
        now_ms: i64,
        new_producer_id: &mut dyn FnMut() -> Option<i64>,
    ) -> Result<Step, ErrorCode> {
        if id.is_empty() {
            return Err(ErrorCode::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > timeout_max_ms {
            return Err(ErrorCode::InvalidTransactionTimeout);
        }
        let Some(meta) = self.txns.get(id) else {
            return Ok(Step::Persist(TxnMeta {
                transactional_id: id.to_string(),
                producer_id: new_producer_id().ok_or(ErrorCode::CoordinatorLoadInProgress)?,
                epoch: 0,
                last_epoch: -1,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                start_ms: -1,
                update_ms: now_ms,
            }));
        };
        if claim.0 >= 0 {
            let (pid, epoch) = claim;
            let known =
                pid == meta.producer_id && (epoch == meta.epoch || epoch == meta.last_epoch);
            if !known {
                return Err(ErrorCode::ProducerFenced);
            }
        }
        match meta.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(ErrorCode::ConcurrentTransactions)
            }
            TxnState::Ongoing => {
                // A new producer instance takes over: abort what the old one left open, with a
                // bumped epoch so the old instance is fenced everywhere. A producer that
                // claims the current epoch (KIP-360: recovering after an error) may come back
                // with it if this request fails before the abort completes; anyone else is
                // fenced.
                let mut next = meta.clone();
                next.last_epoch = if claim.0 >= 0 && claim.1 == meta.epoch {
                    meta.epoch
                } else {
                    -1
                };
                next.epoch = next.epoch.saturating_add(1);
                next.state = TxnState::PrepareAbort;
                next.update_ms = now_ms;
                Ok(Step::End(next))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut next = meta.clone();
                // As Kafka's `prepareIncrementProducerEpoch`: no claim, bump; a claim of the
                // current epoch, bump and remember it (so a retry of this very call, its
                // answer lost, is recognised); a claim of the remembered epoch is that retry:
                // the current epoch again, unbumped.
                let retry = claim.0 >= 0 && claim.1 != meta.epoch && claim.1 == meta.last_epoch;
                if retry {
                    // Unchanged epochs; only the timeout may be new.
                } else if meta.epoch >= i16::MAX - 1 {
                    next.producer_id =
                        new_producer_id().ok_or(ErrorCode::CoordinatorLoadInProgress)?;
                    next.epoch = 0;
                    next.last_epoch = -1;
                } else {
                    next.epoch += 1;
                    next.last_epoch = if claim.0 >= 0 { meta.epoch } else { -1 };
                }
                next.timeout_ms = timeout_ms;
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.start_ms = -1;
                next.update_ms = now_ms;
                Ok(Step::Persist(next))
            }
        }
    }

    fn check(&self, id: &str, claim: Claim) -> Result<&TxnMeta, ErrorCode> {
        let meta = self
            .txns
            .get(id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if meta.producer_id != claim.producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if meta.epoch != claim.epoch {
            return Err(claim.fenced_code);
        }
        Ok(meta)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: `partitions` join the ongoing transaction.
    pub fn add_partitions(
        &self,
        id: &str,
        claim: Claim,
        partitions: &[TxnPartition],
        now_ms: i64,
    ) -> Result<Step, ErrorCode> {
        let meta = self.check(id, claim)?;
        if meta.state.is_prepare() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        let ongoing = meta.state == TxnState::Ongoing;
        if ongoing && partitions.iter().all(|p| meta.partitions.contains(p)) {
            return Ok(Step::Done);
        }
        let mut next = meta.clone();
        next.partitions.extend(partitions.iter().cloned());
        if !ongoing {
            next.state = TxnState::Ongoing;
            next.start_ms = now_ms;
        }
        next.update_ms = now_ms;
        Ok(Step::Persist(next))
    }

    /// EndTxn: commit or abort the ongoing transaction.
    pub fn end(
        &self,
        id: &str,
        claim: Claim,
        commit: bool,
        now_ms: i64,
    ) -> Result<Step, ErrorCode> {
        let meta = self.check(id, claim)?;
        match (meta.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut next = meta.clone();
                next.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                next.update_ms = now_ms;
                Ok(Step::End(next))
            }
            // A retry of an EndTxn that already completed.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(Step::Done),
            (TxnState::PrepareCommit | TxnState::PrepareAbort, _) => {
                Err(ErrorCode::ConcurrentTransactions)
            }
            _ => Err(ErrorCode::InvalidTxnState),
        }
    }

    /// TxnOffsetCommit's check: the producer owns the id and its transaction is ongoing.
    pub fn check_offsets(&self, id: &str, claim: Claim) -> Result<(), ErrorCode> {
        let meta = self.check(id, claim)?;
        match meta.state {
            TxnState::Ongoing => Ok(()),
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(ErrorCode::ConcurrentTransactions)
            }
            _ => Err(ErrorCode::InvalidTxnState),
        }
    }

    /// Transactions open longer than their timeout, as the `PrepareAbort` states to run:
    /// the epoch is bumped so the producer that let it expire is fenced.
    pub fn expired(&self, now_ms: i64) -> Vec<TxnMeta> {
        self.txns
            .values()
            .filter(|m| {
                m.state == TxnState::Ongoing
                    && m.start_ms >= 0
                    && now_ms - m.start_ms > i64::from(m.timeout_ms)
            })
            .map(|m| {
                let mut next = m.clone();
                next.last_epoch = m.epoch;
                next.epoch = m.epoch.saturating_add(1);
                next.state = TxnState::PrepareAbort;
                next.update_ms = now_ms;
                next
            })
            .collect()
    }

    /// Transactions left in a `Prepare*` state (after a restart): their markers must be
    /// (re)written and the transaction completed.
    pub fn in_doubt(&self) -> Vec<TxnMeta> {
        self.txns
            .values()
            .filter(|m| m.state.is_prepare())
            .cloned()
            .collect()
    }
}
