//! Cross-shard wake-ups that never hand a glommio task's waker to another thread.
//!
//! Why: glommio 0.9 supports "foreign" wakers (a task's waker woken or dropped on another
//! thread) but races with the task's destruction: under load the broker crashed with a
//! use-after-free in `RawTask::do_wake` (via `process_foreign_wakes`) and cross-shard replies
//! were sometimes delivered late — 0.1 s to seconds of silence (found by `strand bench`; never
//! with one shard). glommio's own shared channels do not use foreign wakers: the receiving
//! executor keeps the waker and the sender rings an eventfd.
//!
//! So every future that another shard completes (a reply oneshot, the inbox, another shard's
//! `appended` event) is awaited through [`cross`]: the future is polled with a thread-safe
//! [`DoorbellWaker`] that knows the waiting shard and a token; waking it from another shard
//! sends the token over a glommio shared channel (one per ordered pair of shards) to the
//! waiting shard, whose doorbell task wakes the local waker registered under the token. A wake
//! from a thread that is not a shard (the compaction thread) goes to a mutex-protected
//! overflow list, and rings the shard's overflow bell (one byte on a Unix socket pair whose
//! other end the doorbell task reads), which drains the list. Were the bell gone, the list is
//! still drained every [`OVERFLOW_POLL_MS`]; an idle shard is not woken by a timer (a 2 ms
//! poll cost every executor 500 wake-ups a second, ~5% of a core per idle node).

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures_lite::AsyncReadExt;
use glommio::channels::shared_channel::{self, ConnectedSender, SharedReceiver, SharedSender};
use tracing::warn;

/// Tokens in flight to one shard before a wake falls back to the overflow list.
const DOORBELL_CAPACITY: usize = 16 * 1024;
/// How often a shard looks at its overflow list (wakes from non-shard threads, or a full
/// doorbell channel) when its overflow bell cannot be read.
pub const OVERFLOW_POLL_MS: u64 = 2;

/// Shared by all shards: the overflow lists, and the bells that say one has something.
pub struct Doorbells {
    overflow: Vec<Mutex<Vec<u64>>>,
    /// Per shard: the writing end of its overflow bell (non-blocking; `None`: no socket pair
    /// could be made, the shard polls).
    bells: Vec<Option<UnixStream>>,
}

/// The channel ends one shard takes at start-up.
pub struct ShardDoorbells {
    senders: Vec<Option<SharedSender<u64>>>,
    receivers: Vec<Option<SharedReceiver<u64>>>,
    /// The reading end of this shard's overflow bell.
    bell: Option<UnixStream>,
}

/// Makes the doorbell channels for `shards` shards (before the executors start).
pub fn doorbells(shards: usize) -> (Arc<Doorbells>, Vec<ShardDoorbells>) {
    let mut ends: Vec<ShardDoorbells> = (0..shards)
        .map(|_| ShardDoorbells {
            senders: (0..shards).map(|_| None).collect(),
            receivers: (0..shards).map(|_| None).collect(),
            bell: None,
        })
        .collect();
    let mut bells = Vec::with_capacity(shards);
    for end in ends.iter_mut() {
        let pair = UnixStream::pair().and_then(|(tx, rx)| {
            tx.set_nonblocking(true)?;
            Ok((tx, rx))
        });
        match pair {
            Ok((tx, rx)) => {
                end.bell = Some(rx);
                bells.push(Some(tx));
            }
            Err(e) => {
                warn!(error = %e, "no overflow bell: the shard polls its overflow list");
                bells.push(None);
            }
        }
    }
    for from in 0..shards {
        for to in 0..shards {
            if from != to {
                let (tx, rx) = shared_channel::new_bounded(DOORBELL_CAPACITY);
                ends[from].senders[to] = Some(tx);
                ends[to].receivers[from] = Some(rx);
            }
        }
    }
    let shared = Arc::new(Doorbells {
        overflow: (0..shards).map(|_| Mutex::new(Vec::new())).collect(),
        bells,
    });
    (shared, ends)
}

struct Local {
    shard: usize,
    shared: Arc<Doorbells>,
    senders: Vec<Option<ConnectedSender<u64>>>,
    wakers: HashMap<u64, Waker>,
    next_token: u64,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// Connects this shard's doorbells and starts its doorbell tasks. Call once per shard, on its
/// executor, before anything awaits through [`cross`].
pub async fn start(shard: usize, shared: Arc<Doorbells>, ends: ShardDoorbells) {
    // Receivers first: each side's `connect` waits for its peer's.
    for rx in ends.receivers.into_iter().flatten() {
        glommio::spawn_local(async move {
            let rx = rx.connect().await;
            while let Some(token) = rx.recv().await {
                ring(token);
            }
        })
        .detach();
    }
    let mut senders = Vec::new();
    for s in ends.senders {
        senders.push(match s {
            Some(s) => Some(s.connect().await),
            None => None,
        });
    }
    LOCAL.with(|l| {
        *l.borrow_mut() = Some(Local {
            shard,
            shared: Arc::clone(&shared),
            senders,
            wakers: HashMap::new(),
            next_token: 0,
        })
    });
    let bell = ends.bell.map(|b| {
        // SAFETY: the descriptor is this socket's own, handed over once.
        unsafe { glommio::net::UnixStream::from_raw_fd(b.into_raw_fd()) }
    });
    glommio::spawn_local(async move {
        let mut bell = bell;
        let mut rung = [0u8; 64];
        loop {
            let heard = match bell.as_mut() {
                Some(b) => matches!(b.read(&mut rung).await, Ok(n) if n > 0),
                None => false,
            };
            if !heard {
                if bell.take().is_some() {
                    warn!(shard, "overflow bell gone: polling the overflow list");
                }
                glommio::timer::sleep(Duration::from_millis(OVERFLOW_POLL_MS)).await;
            }
            let tokens = match shared.overflow[shard].lock() {
                Ok(mut v) if !v.is_empty() => std::mem::take(&mut *v),
                _ => continue,
            };
            for t in tokens {
                ring(t);
            }
        }
    })
    .detach();
}

/// Wakes the local task waiting under `token` (on this shard's thread).
fn ring(token: u64) {
    let waker = LOCAL.with(|l| {
        l.borrow_mut()
            .as_mut()
            .and_then(|l| l.wakers.remove(&token))
    });
    if let Some(w) = waker {
        w.wake();
    }
}

/// The waker handed to cross-shard futures: thread-safe, it only carries a shard and a token.
struct DoorbellWaker {
    shard: usize,
    token: u64,
    shared: Arc<Doorbells>,
}

impl Wake for DoorbellWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // On the waiting shard itself: wake directly. On another shard: ring its doorbell.
        let sent = LOCAL
            .try_with(|l| {
                let Ok(mut l) = l.try_borrow_mut() else {
                    return false;
                };
                let Some(l) = l.as_mut() else { return false };
                if l.shard == self.shard {
                    return false;
                }
                match l.senders.get(self.shard).and_then(Option::as_ref) {
                    Some(tx) => tx.try_send(self.token).is_ok(),
                    None => false,
                }
            })
            .unwrap_or(false);
        if sent {
            return;
        }
        let local = LOCAL
            .try_with(|l| {
                l.try_borrow()
                    .ok()
                    .and_then(|l| l.as_ref().map(|l| l.shard == self.shard))
                    .unwrap_or(false)
            })
            .unwrap_or(false);
        if local {
            ring(self.token);
            return;
        }
        match self.shared.overflow[self.shard].lock() {
            Ok(mut v) => v.push(self.token),
            Err(e) => warn!(error = %e, "doorbell overflow list poisoned; a wake-up is lost"),
        }
        // After the push: the shard drains the list after reading the bell. A full socket
        // buffer (WouldBlock) means the shard has a ring to read already.
        if let Some(Some(bell)) = self.shared.bells.get(self.shard) {
            let _ = (&*bell).write(&[1]);
        }
    }
}

/// Whether this thread is a shard with its doorbells connected (where [`cross`] never hands a
/// glommio waker to another thread).
pub fn on_shard() -> bool {
    LOCAL.with(|l| l.borrow().is_some())
}

/// Awaits `inner` (completed by another shard or thread) without giving it this task's waker.
/// Outside a shard (tests, tools) it is a plain await.
pub fn cross<F: Future + Unpin>(inner: F) -> Cross<F> {
    Cross {
        inner,
        token: None,
        waker: None,
    }
}

pub struct Cross<F> {
    inner: F,
    token: Option<u64>,
    waker: Option<Waker>,
}

impl<F: Future + Unpin> Future for Cross<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        if this.waker.is_none() {
            let made = LOCAL.with(|l| {
                let mut l = l.borrow_mut();
                let l = l.as_mut()?;
                l.next_token += 1;
                Some((l.next_token, l.shard, Arc::clone(&l.shared)))
            });
            match made {
                Some((token, shard, shared)) => {
                    this.token = Some(token);
                    this.waker = Some(Waker::from(Arc::new(DoorbellWaker {
                        shard,
                        token,
                        shared,
                    })));
                }
                None => return Pin::new(&mut this.inner).poll(cx),
            }
        }
        let token = this.token.unwrap_or_default();
        // Register before polling, so a wake between the poll and the registration is not
        // lost.
        LOCAL.with(|l| {
            if let Some(l) = l.borrow_mut().as_mut() {
                l.wakers.insert(token, cx.waker().clone());
            }
        });
        let waker = this.waker.clone().unwrap_or_else(|| cx.waker().clone());
        let mut inner_cx = Context::from_waker(&waker);
        match Pin::new(&mut this.inner).poll(&mut inner_cx) {
            Poll::Ready(v) => {
                forget(token);
                this.token = None;
                Poll::Ready(v)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F> Drop for Cross<F> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            forget(token);
        }
    }
}

fn forget(token: u64) {
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            if let Some(l) = l.as_mut() {
                l.wakers.remove(&token);
            }
        }
    });
}
