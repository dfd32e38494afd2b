//! How far a log is *written*: its O_DIRECT writes completed, so the bytes outlive this
//! process (not the host: that takes an fdatasync, `sync_to`). A replicated partition counts
//! only written offsets toward its high watermark — the leader its own written end, a
//! follower the fetch offset it sends once its appended batches are written — so a record
//! consumers can read is on disk on every ISR member, and a `kill -9` of all of them at once
//! loses nothing they saw (as Kafka's page-cache writes outlive its processes).
//! `docs/design/durable-visibility.md` has the history that showed the gap.

use std::io;

use super::PartitionLog;
use crate::storage::Offset;

impl PartitionLog {
    /// Every offset below this is written (or synced).
    pub fn written_offset(&self) -> Offset {
        let st = self.inner.state.borrow();
        st.written.max(st.durable).min(st.log.log_end())
    }

    /// Waits until every offset below `target` is written, leading a write round if none
    /// is running (rounds are shared, as sync rounds are).
    pub async fn write_out_to(&self, target: Offset) -> io::Result<()> {
        let truncations = self.inner.state.borrow().truncations;
        loop {
            let listener = self.inner.durable_changed.listen();
            let lead = {
                let mut st = self.inner.state.borrow_mut();
                if let Some(e) = &st.error {
                    return Err(io::Error::other(e.clone()));
                }
                if st.truncations != truncations {
                    return Err(io::Error::other(format!(
                        "the log was truncated before offsets below {target} were written"
                    )));
                }
                if st.written.max(st.durable) >= target {
                    return Ok(());
                }
                if target > st.log.log_end() {
                    return Err(io::Error::other(format!(
                        "offsets below {target} were truncated before they were written"
                    )));
                }
                let lead = !st.writing;
                st.writing = true;
                lead
            };
            if !lead {
                listener.await;
                continue;
            }
            let result = self.write_round().await;
            self.inner.state.borrow_mut().writing = false;
            self.inner.durable_changed.notify(usize::MAX);
            result.map_err(|e| self.fail(e))?;
        }
    }

    async fn write_round(&self) -> io::Result<()> {
        // Appends already runnable go in this round too.
        futures_lite::future::yield_now().await;
        let (writer, upto_offset, upto_pos, truncations) = {
            let st = self.inner.state.borrow();
            (
                st.writer.clone(),
                st.log.log_end(),
                st.writer.end(),
                st.truncations,
            )
        };
        writer.write_out(upto_pos).await?;
        let mut st = self.inner.state.borrow_mut();
        // (A truncation meanwhile reloaded the log: what this round wrote may be gone, and
        // its offsets may be appended again.)
        if st.truncations == truncations {
            st.written = st.written.max(upto_offset);
        }
        Ok(())
    }
}
