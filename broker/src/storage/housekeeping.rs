//! Background upkeep of a partition, run by the shard's low-priority housekeeping task
//! (`server::spawn_housekeeping`): retention (`cleanup.policy` with `delete`), compaction
//! (with `compact`), and rolling an idle active segment once `segment.ms` has passed (so its
//! records become cleanable and deletable without waiting for the next append; Redpanda does
//! the same, Kafka waits for an append).

use std::io;
use std::sync::Arc;
use std::time::Instant;

use tracing::warn;

use super::cleaner::{self, CleanJob, CleanOutcome, CleanStep};
use super::compaction::{self, Verdict};
use super::partition::PartitionLog;
use super::recovery::{remove_segment_files, sync_dir};

/// Knobs of a compaction pass that come from the broker, not the topic.
#[derive(Clone, Copy, Debug, Default)]
pub struct CleanOptions {
    /// `log.cleaner.io.max.bytes.per.second`; `None` = unthrottled.
    pub io_bytes_per_sec: Option<u64>,
    /// Test hook: stop the pass after this step, as a crash would.
    pub stop_after: Option<CleanStep>,
}

/// What a compaction pass did (for logs and tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanReport {
    pub segments_rewritten: usize,
    pub keys: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    /// Batches whose records could not be read (kept as they are; see the cleaner's WARN).
    pub unreadable_batches: u64,
    pub dirty_ratio_milli: u32,
    pub elapsed_ms: u64,
}

impl PartitionLog {
    /// Deletes closed segments that `retention.ms` / `retention.bytes` no longer keep.
    /// Returns how many were deleted.
    pub async fn enforce_retention(&self, now_ms: i64) -> io::Result<usize> {
        let _permit = self.lock_appends().await?;
        let removed = {
            let mut st = self.inner.state.borrow_mut();
            if !st.log.config().cleanup_policy.delete {
                return Ok(0);
            }
            let n = st.log.retention_candidates(now_ms);
            let removed = st.log.remove_oldest(n);
            for base in &removed {
                st.readers.remove(base);
            }
            let start = st.log.log_start();
            st.cache.drop_below(start);
            st.txns.forget_before(start);
            removed
        };
        if removed.is_empty() {
            return Ok(0);
        }
        let dir = self.inner.dir.clone();
        let n = removed.len();
        glommio::executor()
            .spawn_blocking(move || -> io::Result<()> {
                for base in removed {
                    remove_segment_files(&dir, base)?;
                }
                sync_dir(&dir)
            })
            .await?;
        Ok(n)
    }

    /// DeleteRecords: every offset below `before` (the log end if -1) becomes unreadable; whole
    /// segments below it are deleted. Returns the new log start offset, or `None` if `before`
    /// is past the log end.
    pub async fn delete_records(&self, before: super::Offset) -> io::Result<Option<super::Offset>> {
        let _permit = self.lock_appends().await?;
        let (removed, start) = {
            let mut st = self.inner.state.borrow_mut();
            let end = st.log.log_end();
            let target = if before.0 == -1 { end } else { before };
            if target > end || target.0 < 0 {
                return Ok(None);
            }
            let removed = st.log.advance_log_start(target);
            for base in &removed {
                st.readers.remove(base);
            }
            let start = st.log.log_start();
            st.cache.drop_below(start);
            st.txns.forget_before(start);
            (removed, start)
        };
        let dir = self.inner.dir.clone();
        glommio::executor()
            .spawn_blocking(move || -> io::Result<()> {
                super::recovery::write_log_start(&dir, start)?;
                for base in removed {
                    remove_segment_files(&dir, base)?;
                }
                sync_dir(&dir)
            })
            .await?;
        Ok(Some(start))
    }

    /// Closes the active segment if it is not empty and `segment.ms` has passed since its
    /// first batch. Returns whether it rolled.
    pub async fn roll_if_idle(&self, now_ms: i64) -> io::Result<bool> {
        let due = |p: &PartitionLog| {
            let st = p.inner.state.borrow();
            let active = st.log.active();
            let segment_ms = st.log.config().segment_ms as i64;
            !active.is_empty()
                && active
                    .first_timestamp_ms
                    .is_some_and(|t| now_ms.saturating_sub(t) >= segment_ms)
        };
        if !due(self) {
            return Ok(false);
        }
        let _permit = self.lock_appends().await?;
        if !due(self) {
            return Ok(false);
        }
        self.roll().await?;
        Ok(true)
    }

    /// Runs one compaction pass if the log is compacted and due (dirty ratio, lags, a
    /// tombstone due). The pass itself runs on a thread of its own, off the shard's core (see
    /// `helper_thread::leave_shard_core`), so it never holds up the shard or its blocking pool (fdatasync,
    /// reads); this task only plans and swaps. Returns `None` if nothing ran.
    pub async fn clean(
        &self,
        now_ms: i64,
        options: CleanOptions,
    ) -> io::Result<Option<CleanReport>> {
        let job = {
            let mut st = self.inner.state.borrow_mut();
            if st.cleaning || !st.log.config().cleanup_policy.compact {
                return Ok(None);
            }
            let due = st.tombstone_due_ms.is_some_and(|t| now_ms >= t);
            let mut plan = match compaction::plan(&st.log, st.first_dirty, now_ms, due) {
                Verdict::Clean(plan) => plan,
                Verdict::Idle | Verdict::BelowRatio(_) => return Ok(None),
            };
            // As Kafka: only below the first unstable offset, where every transaction's
            // outcome is known (the segment holding it and later ones wait).
            if let Some(first_unstable) = st.txns.first_unstable() {
                let cut = st
                    .log
                    .segments()
                    .map(|s| s.base)
                    .take_while(|&b| b <= first_unstable)
                    .last()
                    .unwrap_or(plan.upper);
                if cut < plan.upper {
                    plan.upper = cut;
                    plan.dirty.retain(|&b| b < cut);
                    for g in &mut plan.groups {
                        g.retain(|&b| b < cut);
                    }
                    plan.groups.retain(|g| !g.is_empty());
                    if plan.dirty.is_empty() {
                        return Ok(None);
                    }
                }
            }
            let segments = st
                .log
                .segments()
                .take_while(|s| s.base < plan.upper)
                .cloned()
                .collect();
            st.cleaning = true;
            CleanJob {
                dir: self.inner.dir.clone(),
                config: st.log.config().clone(),
                plan,
                segments,
                active_base: st.log.active().base,
                now_ms,
                io_bytes_per_sec: options.io_bytes_per_sec,
                stop_after: options.stop_after,
                txns: st.txns.clone(),
            }
        };
        let ratio = job.plan.dirty_ratio_milli;
        tracing::info!(
            dir = %self.inner.dir.display(),
            dirty_per_mille = ratio,
            segments = job.segments.len(),
            upper = %job.plan.upper,
            "compaction pass starting"
        );
        let started = Instant::now();
        let outcome = match run_on_background_thread(job).await {
            Ok(outcome) => outcome,
            Err(e) => {
                self.inner.state.borrow_mut().cleaning = false;
                return Err(e);
            }
        };
        crate::metrics::with(|m| {
            m.cleaner_passes += 1;
            m.cleaner_bytes_before += outcome.bytes_before;
            m.cleaner_bytes_after += outcome.bytes_after;
        });
        let report = CleanReport {
            segments_rewritten: outcome.swapped.len(),
            keys: outcome.keys,
            bytes_before: outcome.bytes_before,
            bytes_after: outcome.bytes_after,
            records_removed: outcome.records_removed,
            unreadable_batches: outcome.unreadable_batches,
            dirty_ratio_milli: ratio,
            elapsed_ms: started.elapsed().as_millis() as u64,
        };
        let (upper, due) = (outcome.upper, outcome.tombstone_due_ms);
        {
            let mut st = self.inner.state.borrow_mut();
            for swapped in outcome.swapped {
                let base = swapped.segment.base;
                if st.log.replace_segments(&swapped.replaced, swapped.segment) {
                    for b in &swapped.replaced {
                        st.readers.remove(b);
                    }
                    // The hot-tail cache may still hold the uncleaned batches.
                    st.cache.drop_segments(&swapped.replaced);
                    st.readers.insert(base, Arc::new(swapped.reader));
                } else {
                    warn!(dir = %self.inner.dir.display(), %base, "cleaned segments changed during the pass; kept the old ones in memory");
                }
            }
            st.first_dirty = st.first_dirty.max(upper);
            st.tombstone_due_ms = due;
        }
        let dir = self.inner.dir.clone();
        let saved = glommio::executor()
            .spawn_blocking(move || cleaner::write_checkpoint(&dir, upper, due))
            .await;
        // Only now may a truncation (`truncate_to`) run: it rewrites the checkpoint too.
        self.inner.state.borrow_mut().cleaning = false;
        saved?;
        Ok(Some(report))
    }

    /// Holds off appends (and rolls) while the caller changes the segment list.
    pub(super) async fn lock_appends(&self) -> io::Result<glommio::sync::Permit<'_>> {
        self.inner
            .append_lock
            .acquire_permit(1)
            .await
            .map_err(|e| io::Error::other(e.to_string()))
    }

    /// Where the dirty part of the log starts (compaction progress).
    pub fn first_dirty(&self) -> super::Offset {
        self.inner.state.borrow().first_dirty
    }
}

async fn run_on_background_thread(job: CleanJob) -> io::Result<CleanOutcome> {
    let (tx, rx) = futures_channel::oneshot::channel();
    std::thread::Builder::new()
        .name("strand-cleaner".into())
        .spawn(move || {
            crate::runtime::helper_thread::leave_shard_core(crate::limits::CLEANER_NICE);
            let _ = tx.send(cleaner::run(job));
        })?;
    crate::runtime::wake::cross(rx)
        .await
        .map_err(|_| io::Error::other("the cleaner thread ended without a result"))?
}
