//! Each log's background flusher: `flush.ms` after an append it makes the appended data
//! durable (`sync_to`), so a partition's unsynced data is bounded in time even without
//! `acks=all` producers; an idle log's flusher sleeps until the next append.

use std::rc::Rc;
use std::time::Duration;

use super::PartitionLog;

impl PartitionLog {
    /// Background task: `flush.ms` after an append, make appended data durable. A log with
    /// nothing to sync waits for its next append (an idle partition costs no wake-ups; the
    /// wait is bounded so the task of a dropped log ends).
    pub(super) fn spawn_flusher(&self) {
        let weak = Rc::downgrade(&self.inner);
        glommio::spawn_local(async move {
            loop {
                let (flush_ms, idle) = match weak.upgrade() {
                    Some(inner) => {
                        let listener = inner.appended.listen();
                        let st = inner.state.borrow();
                        if st.closed {
                            return;
                        }
                        let clean = st.durable >= st.log.log_end();
                        (st.log.config().flush_ms.max(1), clean.then_some(listener))
                    }
                    None => return,
                };
                if let Some(appended) = idle {
                    futures_lite::future::or(
                        async {
                            appended.await;
                        },
                        glommio::timer::sleep(Duration::from_millis(
                            crate::limits::FLUSHER_IDLE_RECHECK_MS,
                        )),
                    )
                    .await;
                    continue;
                }
                glommio::timer::sleep(Duration::from_millis(flush_ms)).await;
                let Some(inner) = weak.upgrade() else { return };
                let p = PartitionLog { inner };
                if p.inner.state.borrow().closed {
                    return;
                }
                let end = p.log_end();
                if p.durable_offset() < end {
                    let _ = p.sync_to(end).await;
                }
            }
        })
        .detach();
    }
}
