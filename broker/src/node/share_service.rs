//! Share groups on the node (KIP-932): share-partitions live on the shard that leads their
//! partition, so acquiring records and reading them happen on one core. ShareFetch and
//! ShareAcknowledge arrive on any shard and are routed here per partition ([`ShareOp`]).
//! Share sessions (which partitions a member fetches, and the session epoch) are kept by
//! the shard of the connection that opened them. A ticker expires acquisition locks.

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures_channel::oneshot;
use strand_wire::ErrorCode;
use tracing::{debug, warn};

use super::{Node, ShardMsg, TopicPartition};
use crate::share::partition::{AckType, Acquired, Change, Limits, SharePartition};
use crate::share::store::{path_for, ShareFile};

/// How often acquisition locks are checked.
const LOCK_TICK_MS: u64 = 100;

#[derive(Debug)]
pub enum ShareOp {
    /// Acquire records for `member` and read them.
    Fetch {
        group: String,
        member: String,
        tp: TopicPartition,
        bytes_max: usize,
        max_records: usize,
    },
    /// Acknowledge: `(first, last, types)` — one type for the whole range, or one per offset.
    Ack {
        group: String,
        member: String,
        tp: TopicPartition,
        batches: Vec<(i64, i64, Vec<i8>)>,
    },
    /// Give back what `member` holds on `tp` (its session closed or forgot the partition).
    Release {
        group: String,
        member: String,
        tp: TopicPartition,
    },
    /// The share-partition start offset, if the group has state for `tp`.
    Start { group: String, tp: TopicPartition },
    /// AlterShareGroupOffsets (`Some`: start over there) / DeleteShareGroupOffsets (`None`:
    /// forget the state). The group has no members (checked by the caller).
    Reset {
        group: String,
        tp: TopicPartition,
        offset: Option<i64>,
    },
}

impl ShareOp {
    fn tp(&self) -> &TopicPartition {
        match self {
            ShareOp::Fetch { tp, .. }
            | ShareOp::Ack { tp, .. }
            | ShareOp::Release { tp, .. }
            | ShareOp::Start { tp, .. }
            | ShareOp::Reset { tp, .. } => tp,
        }
    }
}

#[derive(Debug)]
pub enum ShareAnswer {
    /// Batches holding acquired records, and the acquired ranges.
    Fetched(Result<(Vec<Bytes>, Vec<Acquired>), ErrorCode>),
    Done(ErrorCode),
    /// The start offset (`None`: no state), or why not.
    Start(Result<Option<i64>, ErrorCode>),
}

/// One share-partition and its file.
pub struct Held {
    pub sp: SharePartition,
    file: ShareFile,
    pub limits: Limits,
}

/// A member's share session on this shard.
#[derive(Debug, Default)]
pub struct Session {
    /// The epoch the next request must carry.
    pub epoch: i32,
    pub partitions: BTreeSet<TopicPartition>,
}

#[derive(Default)]
pub struct Shares {
    pub parts: HashMap<(String, TopicPartition), Held>,
    /// By (group, member).
    pub sessions: HashMap<(String, String), Session>,
}

impl Node {
    /// Runs `op` on the shard that leads its partition.
    pub async fn share_op(&self, op: ShareOp) -> ShareAnswer {
        let owner = self.owner(op.tp());
        if owner == self.shard {
            return self.share_local(op).await;
        }
        let (reply, rx) = oneshot::channel();
        self.send_to(owner, ShardMsg::Share { op, reply });
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or(ShareAnswer::Done(ErrorCode::NotLeaderOrFollower))
    }

    /// The group's share settings (group configs, Kafka's defaults).
    pub(crate) fn share_limits(&self, group: &str) -> (Limits, bool) {
        let catalog = self.catalog();
        let configs = catalog.group_configs.get(group);
        let num = |name: &str, default: i64| {
            crate::dynamic_configs::group_value(configs, name)
                .parse::<i64>()
                .unwrap_or(default)
        };
        let limits = Limits {
            lock_ms: num("share.record.lock.duration.ms", 30_000),
            delivery_count_limit: i16::try_from(num("share.delivery.count.limit", 5)).unwrap_or(5),
            max_record_locks: usize::try_from(num("share.partition.max.record.locks", 2_000))
                .unwrap_or(2_000),
        };
        let earliest =
            crate::dynamic_configs::group_value(configs, "share.auto.offset.reset") == "earliest";
        (limits, earliest)
    }

    /// Loads (or starts) `group`'s share-partition of `tp`.
    fn share_load(&self, group: &str, tp: &TopicPartition) -> Result<(), ErrorCode> {
        let key = (group.to_string(), tp.clone());
        let (limits, earliest) = self.share_limits(group);
        if let Some(h) = self.share.borrow_mut().parts.get_mut(&key) {
            h.limits = limits;
            return Ok(());
        }
        let log = self.led(tp)?;
        let path = path_for(log.dir(), group);
        let io = |e: std::io::Error| {
            warn!(group, topic = %tp.0, partition = tp.1, error = %e, "share state unusable");
            ErrorCode::KafkaStorageError
        };
        let (file, sp) = match ShareFile::open(&path).map_err(io)? {
            Some((file, sp)) => (file, sp),
            None => {
                let start = if earliest {
                    log.log_start().0
                } else {
                    log.log_end().0
                };
                let sp = SharePartition::starting_at(start);
                (ShareFile::create(&path, &sp).map_err(io)?, sp)
            }
        };
        debug!(group, topic = %tp.0, partition = tp.1, start = sp.start, "share-partition loaded");
        self.share
            .borrow_mut()
            .parts
            .insert(key, Held { sp, file, limits });
        Ok(())
    }

    fn share_persist(
        &self,
        key: &(String, TopicPartition),
        changes: &[Change],
    ) -> Result<(), ErrorCode> {
        let mut shares = self.share.borrow_mut();
        let Some(h) = shares.parts.get_mut(key) else {
            return Ok(());
        };
        let r = h
            .file
            .append(changes)
            .and_then(|_| h.file.maybe_compact(&h.sp));
        r.map_err(|e| {
            warn!(group = %key.0, topic = %key.1 .0, error = %e, "share state not written");
            ErrorCode::KafkaStorageError
        })
    }

    async fn share_sync(&self, key: &(String, TopicPartition)) -> Result<(), ErrorCode> {
        let handle = self
            .share
            .borrow()
            .parts
            .get(key)
            .map(|h| h.file.sync_handle());
        let Some(handle) = handle else {
            return Ok(());
        };
        let r = match handle {
            Ok(f) => {
                crate::storage::dma::fdatasync_pooled(std::os::fd::AsRawFd::as_raw_fd(&f)).await
            }
            Err(e) => Err(e),
        };
        r.map_err(|e| {
            warn!(group = %key.0, error = %e, "share state not synced");
            ErrorCode::KafkaStorageError
        })
    }

    pub(super) async fn share_local(&self, op: ShareOp) -> ShareAnswer {
        match op {
            ShareOp::Fetch {
                group,
                member,
                tp,
                bytes_max,
                max_records,
            } => ShareAnswer::Fetched(
                self.share_fetch_local(&group, &member, &tp, bytes_max, max_records)
                    .await,
            ),
            ShareOp::Ack {
                group,
                member,
                tp,
                batches,
            } => ShareAnswer::Done(self.share_ack_local(&group, &member, &tp, &batches).await),
            ShareOp::Start { group, tp } => ShareAnswer::Start(self.share_start_local(&group, &tp)),
            ShareOp::Reset { group, tp, offset } => {
                ShareAnswer::Done(self.share_reset_local(&group, &tp, offset))
            }
            ShareOp::Release { group, member, tp } => {
                let key = (group, tp);
                let changes = {
                    let mut shares = self.share.borrow_mut();
                    match shares.parts.get_mut(&key) {
                        Some(h) => {
                            let limits = h.limits;
                            h.sp.release_member(&member, &limits)
                        }
                        None => vec![],
                    }
                };
                let code = self.share_persist(&key, &changes).err();
                ShareAnswer::Done(code.unwrap_or(ErrorCode::None))
            }
        }
    }

    /// The start offset of `group` on `tp`, loading its state only if it has some.
    fn share_start_local(
        &self,
        group: &str,
        tp: &TopicPartition,
    ) -> Result<Option<i64>, ErrorCode> {
        let key = (group.to_string(), tp.clone());
        if let Some(h) = self.share.borrow().parts.get(&key) {
            return Ok(Some(h.sp.start));
        }
        let log = self.led(tp)?;
        if !path_for(log.dir(), group).exists() {
            return Ok(None);
        }
        self.share_load(group, tp)?;
        Ok(self.share.borrow().parts.get(&key).map(|h| h.sp.start))
    }

    fn share_reset_local(
        &self,
        group: &str,
        tp: &TopicPartition,
        offset: Option<i64>,
    ) -> ErrorCode {
        let log = match self.led(tp) {
            Ok(log) => log,
            Err(e) => return e,
        };
        let key = (group.to_string(), tp.clone());
        let path = path_for(log.dir(), group);
        self.share.borrow_mut().parts.remove(&key);
        let result = match offset {
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
            Some(o) => {
                let o = o.clamp(log.log_start().0, log.log_end().0);
                ShareFile::create(&path, &SharePartition::starting_at(o)).map(|_| ())
            }
        };
        match result {
            Ok(()) => ErrorCode::None,
            Err(e) => {
                warn!(group, topic = %tp.0, partition = tp.1, error = %e, "share state not reset");
                ErrorCode::KafkaStorageError
            }
        }
    }

    async fn share_fetch_local(
        &self,
        group: &str,
        member: &str,
        tp: &TopicPartition,
        bytes_max: usize,
        max_records: usize,
    ) -> Result<(Vec<Bytes>, Vec<Acquired>), ErrorCode> {
        self.share_load(group, tp)?;
        let key = (group.to_string(), tp.clone());
        let from = match self.share.borrow().parts.get(&key) {
            Some(h) => h.sp.first_available(),
            None => return Err(ErrorCode::UnknownServerError),
        };
        let out = match self
            .read_local(tp, crate::storage::Offset(from), bytes_max, false)
            .await
        {
            Ok(out) => out,
            Err(ErrorCode::OffsetOutOfRange) => {
                // Retention removed records under the share-partition: start at the log start.
                let log = self.led(tp)?;
                if let Some(h) = self.share.borrow_mut().parts.get_mut(&key) {
                    if h.sp.start < log.log_start().0 {
                        h.sp.reset_to(log.log_start().0);
                    }
                }
                return Ok((vec![], vec![]));
            }
            Err(e) => return Err(e),
        };
        let spans: Vec<(i64, i64, bool)> = out
            .batches
            .iter()
            .filter_map(|b| strand_wire::BatchHeader::parse(b).ok())
            .map(|h| (h.base_offset, h.last_offset(), h.is_control()))
            .collect();
        let now = crate::runtime::clock::now_ms();
        let (acquired, changes) = {
            let mut shares = self.share.borrow_mut();
            let Some(h) = shares.parts.get_mut(&key) else {
                return Err(ErrorCode::UnknownServerError);
            };
            let limits = h.limits;
            h.sp.acquire(member, &spans, max_records, &limits, now)
        };
        self.share_persist(&key, &changes)?;
        let batches = out
            .batches
            .into_iter()
            .zip(spans)
            .filter(|(_, (first, last, _))| {
                acquired.iter().any(|(f, l, _)| f <= last && l >= first)
            })
            .map(|(b, _)| b)
            .collect();
        Ok((batches, acquired))
    }

    async fn share_ack_local(
        &self,
        group: &str,
        member: &str,
        tp: &TopicPartition,
        batches: &[(i64, i64, Vec<i8>)],
    ) -> ErrorCode {
        if let Err(e) = self.share_load(group, tp) {
            return e;
        }
        let key = (group.to_string(), tp.clone());
        let mut changes = Vec::new();
        let mut error = ErrorCode::None;
        {
            let mut shares = self.share.borrow_mut();
            let Some(h) = shares.parts.get_mut(&key) else {
                return ErrorCode::UnknownServerError;
            };
            let limits = h.limits;
            for (first, last, types) in batches {
                let ranges: Vec<(i64, i64, i8)> = match types.as_slice() {
                    [t] => vec![(*first, *last, *t)],
                    many if i64::try_from(many.len()).ok() == Some(last - first + 1) => many
                        .iter()
                        .enumerate()
                        .map(|(i, t)| (first + i as i64, first + i as i64, *t))
                        .collect(),
                    _ => {
                        error = ErrorCode::InvalidRequest;
                        continue;
                    }
                };
                for (f, l, t) in ranges {
                    let Some(ack) = AckType::from_wire(t) else {
                        error = ErrorCode::InvalidRequest;
                        continue;
                    };
                    match h.sp.acknowledge(member, f, l, ack, &limits) {
                        Ok(c) => changes.extend(c),
                        Err(e) => error = e,
                    }
                }
            }
        }
        if let Err(e) = self.share_persist(&key, &changes) {
            return e;
        }
        if let Err(e) = self.share_sync(&key).await {
            return e;
        }
        error
    }

    /// Expires acquisition locks of this shard's share-partitions.
    pub fn spawn_share_ticker(self: &Rc<Self>) {
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(Duration::from_millis(LOCK_TICK_MS)).await;
                let now = crate::runtime::clock::now_ms();
                let expired: Vec<((String, TopicPartition), Vec<Change>)> = {
                    let mut shares = me.share.borrow_mut();
                    shares
                        .parts
                        .iter_mut()
                        .filter_map(|(k, h)| {
                            let limits = h.limits;
                            let c = h.sp.expire_locks(&limits, now);
                            (!c.is_empty()).then(|| (k.clone(), c))
                        })
                        .collect()
                };
                for (key, changes) in expired {
                    debug!(group = %key.0, topic = %key.1 .0, partition = key.1 .1, "share acquisition locks expired");
                    let _ = me.share_persist(&key, &changes);
                }
            }
        })
        .detach();
    }
}
