//! Zero-filling segment files ahead of their appends (#16: no kernel worker on the append
//! path).
//!
//! An O_DIRECT write into space that is not yet written — past the end of the file, or into
//! extents `fallocate` left unwritten — cannot complete inside io_uring's non-blocking attempt:
//! it is handed to an io_uring worker thread, and its completion (extent conversion, size
//! update) runs on a kernel worker of the shard's core. Both compete with the shard's own
//! thread, which spins on that core; under load the appends of a new segment waited hundreds
//! of milliseconds behind them. And an fdatasync after such a write must also write the
//! changed extent tree and file size.
//!
//! So a segment's space is written with zeros ahead of its appends, by a thread of the shard's
//! that leaves the shard's core (`helper_thread::leave_shard_core`) and writes with plain
//! blocking `pwrite`s (a synchronous direct write completes in the calling thread), then
//! `fdatasync`s once so the size and extents are on disk. Appends then only overwrite
//! written blocks: io_uring completes them inline, and their fdatasync writes data only.
//! Recovery already treats a zero tail as the clean end of a segment (`scan`).
//!
//! One thread per shard, started on first use; jobs run in order.
//!
//! A fill never holds an append back for long: an append that reaches a fill still running
//! (or still queued behind other partitions' fills) *claims* its range ([`Claim`]); the fill
//! skips what is claimed and the append waits at most for the one write of zeros in flight
//! there, then goes ahead as a plain allocating write (the kernel-worker path, as without
//! preallocation). At 50 MB/s over 16 partitions, appends that waited for whole 16 MiB fill
//! steps queued behind each other saw publish p99 ~90 ms (`scripts/bench-soak`); with claims
//! they wait for one write at most.
//!
//! The zeros are paced: writing them back to back kept this disk busy for tens of
//! milliseconds at a time, and every acks=all fdatasync queued behind them (10 MB/s acks=all:
//! produce p99 22-28 ms, publish p99 190-370 ms). So zeros go in `limits::PREFILL_WRITE_BYTES`
//! writes, each followed by a pause three times as long as the write took
//! (`limits::PREFILL_PAUSE_PERCENT`), except while something waits for a fill ([`Hurry`]: an
//! append that reached it, a segment's `finish`, a partition reopening): then the thread
//! writes at full speed until no one waits.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};

use event_listener::Event;
use futures_channel::oneshot;

use super::dma::{AlignedBuf, BLOCK_BYTES};

struct Job {
    file: File,
    from: u64,
    to: u64,
    claim: Arc<Claim>,
    done: oneshot::Sender<io::Result<()>>,
}

/// What a fill and the appends of its segment share: the appends own every byte below
/// `claimed_to` (the fill writes no zeros there), the fill owns the range it is writing now.
/// Taken only by an append that reached a fill in flight, and by the fill thread once per
/// write of zeros: never on the path of an append below the fill.
#[derive(Default)]
pub struct Claim(Mutex<ClaimState>);

#[derive(Default)]
struct ClaimState {
    claimed_to: u64,
    writing: Option<(u64, u64)>,
}

impl Claim {
    fn lock(&self) -> MutexGuard<'_, ClaimState> {
        // Nothing panics while holding it; a poisoned lock still holds consistent numbers.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims `[.., upto)` for appends (`upto` block-aligned). `true`: no zeros land there
    /// from now on; `false`: a write of zeros is in flight below `upto` (ask again once it
    /// has ended; the fill starts no new one below the claim).
    pub fn claim(&self, upto: u64) -> bool {
        let mut st = self.lock();
        st.claimed_to = st.claimed_to.max(upto);
        st.writing.is_none_or(|(from, _)| from >= upto)
    }

    /// The next range of zeros to write at or after `pos`, before `to`, at most `max_bytes`;
    /// marked as being written until [`Claim::written`]. `None`: the rest is claimed.
    fn next(&self, pos: u64, to: u64, max_bytes: u64) -> Option<(u64, u64)> {
        let mut st = self.lock();
        debug_assert!(st.writing.is_none(), "one write of zeros at a time");
        let from = pos.max(st.claimed_to);
        if from >= to {
            return None;
        }
        let range = (from, to.min(from + max_bytes));
        st.writing = Some(range);
        Some(range)
    }

    fn written(&self) {
        self.lock().writing = None;
    }
}

/// The shard's prefill thread: its queue and how many appends wait for a fill now.
struct Prefiller {
    jobs: mpsc::Sender<Job>,
    waiting: Arc<AtomicUsize>,
}

/// Zero-fills in flight on this shard per partition directory, and an event when one ends.
/// A fill outlives a log dropped without a close (its job holds the file); a reopen of that
/// partition must not scan or trim the file while zeros still land in it ([`settled`]).
#[derive(Default)]
struct InFlight {
    per_dir: HashMap<PathBuf, usize>,
    ended: Rc<Event>,
}

thread_local! {
    static PREFILLER: RefCell<Option<Prefiller>> = const { RefCell::new(None) };
    static IN_FLIGHT: RefCell<InFlight> = RefCell::new(InFlight::default());
}

/// Held while an append, a segment's `finish` or a reopening partition waits for a zero-fill
/// of this shard: the fill thread does not pause meanwhile.
pub struct Hurry(Arc<AtomicUsize>);

impl Hurry {
    /// `None` when this shard has not filled anything yet (nothing to wait for).
    pub fn start() -> Option<Hurry> {
        PREFILLER.with(|p| {
            p.borrow().as_ref().map(|p| {
                p.waiting.fetch_add(1, Ordering::Relaxed);
                Hurry(Arc::clone(&p.waiting))
            })
        })
    }
}

impl Drop for Hurry {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Writes zeros over `[from, to)` of the file behind `fd`, except what `claim` gives the
/// appends, and makes them durable (`fdatasync`). Both ends must be block-aligned. The caller
/// keeps `fd` open until the call is made (the job holds its own duplicate of the descriptor).
pub async fn zero_fill(fd: &impl AsRawFd, from: u64, to: u64, claim: Arc<Claim>) -> io::Result<()> {
    assert!(
        from.is_multiple_of(BLOCK_BYTES) && to.is_multiple_of(BLOCK_BYTES) && from <= to,
        "zero_fill takes block-aligned ranges: {from}..{to}"
    );
    // SAFETY: `fd` is open for the duration of this borrow (the caller owns it).
    let file = File::from(unsafe { BorrowedFd::borrow_raw(fd.as_raw_fd()) }.try_clone_to_owned()?);
    let (done, result) = oneshot::channel();
    let job = Job {
        file,
        from,
        to,
        claim,
        done,
    };
    PREFILLER.with(|p| {
        let mut p = p.borrow_mut();
        let tx = match p.as_ref() {
            Some(p) => p.jobs.clone(),
            None => {
                let started = start()?;
                let tx = started.jobs.clone();
                *p = Some(started);
                tx
            }
        };
        tx.send(job)
            .map_err(|_| io::Error::other("the zero-fill thread has stopped"))
    })?;
    result
        .await
        .map_err(|_| io::Error::other("the zero-fill thread dropped a job"))?
}

/// Registers a fill of a file in `dir` until dropped.
/// Made when the fill is decided (before its task first runs), so a reopen right after never
/// misses it; the task holds it until the fill ends.
pub struct Filling(PathBuf);

impl Filling {
    pub fn start(dir: &Path) -> Filling {
        let dir = key(dir);
        IN_FLIGHT.with(|f| *f.borrow_mut().per_dir.entry(dir.clone()).or_default() += 1);
        Filling(dir)
    }
}

/// The registry's key for a directory: absolute (glommio opens a relative path as
/// `<cwd>/<path>`, the broker names partitions by `data.dir`, `./strand-data` by default).
fn key(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

impl Drop for Filling {
    fn drop(&mut self) {
        let ended = IN_FLIGHT.with(|f| {
            let mut f = f.borrow_mut();
            if let Some(n) = f.per_dir.get_mut(&self.0) {
                *n -= 1;
                if *n == 0 {
                    f.per_dir.remove(&self.0);
                }
            }
            Rc::clone(&f.ended)
        });
        ended.notify(usize::MAX);
    }
}

/// Waits until no zero-fill of this shard writes into a file of `dir` (a partition being
/// reopened after its log was dropped without a close).
pub async fn settled(dir: &Path) {
    let dir = key(dir);
    let dir = dir.as_path();
    loop {
        let (busy, ended) = IN_FLIGHT.with(|f| {
            let f = f.borrow();
            (f.per_dir.contains_key(dir), Rc::clone(&f.ended))
        });
        if !busy {
            return;
        }
        let listener = ended.listen();
        if IN_FLIGHT.with(|f| f.borrow().per_dir.contains_key(dir)) {
            let _hurry = Hurry::start();
            listener.await;
        }
    }
}

fn start() -> io::Result<Prefiller> {
    let (tx, rx) = mpsc::channel::<Job>();
    let waiting = Arc::new(AtomicUsize::new(0));
    let hurried = Arc::clone(&waiting);
    std::thread::Builder::new()
        .name("strand-prefill".into())
        .spawn(move || {
            crate::runtime::helper_thread::leave_shard_core(0);
            let zeros = AlignedBuf::zeroed(crate::limits::PREFILL_WRITE_BYTES);
            for job in rx {
                let _ = job.done.send(fill(
                    &job.file, job.from, job.to, &job.claim, &zeros, &hurried,
                ));
            }
        })?;
    Ok(Prefiller { jobs: tx, waiting })
}

fn fill(
    file: &File,
    from: u64,
    to: u64,
    claim: &Claim,
    zeros: &AlignedBuf,
    waiting: &AtomicUsize,
) -> io::Result<()> {
    let mut pos = from;
    let mut wrote_any = false;
    while let Some((start, end)) = claim.next(pos, to, zeros.as_ref().len() as u64) {
        let began = std::time::Instant::now();
        let result = file.write_all_at(&zeros.as_ref()[..(end - start) as usize], start);
        claim.written();
        result?;
        wrote_any = true;
        pos = end;
        if pos < to {
            // Asleep in slices of at most a millisecond, so a waiter ends the pause soon.
            let pause = (began.elapsed() * crate::limits::PREFILL_PAUSE_PERCENT / 100).min(
                std::time::Duration::from_millis(crate::limits::PREFILL_PAUSE_MAX_MS),
            );
            let until = std::time::Instant::now() + pause;
            while waiting.load(Ordering::Relaxed) == 0 {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::sleep(left.min(std::time::Duration::from_millis(1)));
            }
        }
    }
    if wrote_any {
        file.sync_data()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_and_an_absolute_name_of_one_directory_are_one_key() {
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(
            key(Path::new("./strand-data/t-0")),
            cwd.join("strand-data/t-0")
        );
        // As glommio names a file it opened by a relative path: `<cwd>/./<path>`.
        assert_eq!(
            key(&cwd.join("./strand-data/t-0")),
            key(Path::new("strand-data/t-0"))
        );
    }

    #[test]
    fn a_claim_keeps_zeros_off_the_appends_and_waits_only_for_a_write_in_flight() {
        let claim = Claim::default();
        assert_eq!(claim.next(0, 1 << 20, 256 << 10), Some((0, 256 << 10)));
        // An append reaching into the write in flight must wait for it...
        assert!(!claim.claim(8192));
        claim.written();
        // ...and then owns its range: the fill goes on past it.
        assert!(claim.claim(8192));
        assert_eq!(
            claim.next(256 << 10, 1 << 20, 256 << 10),
            Some((256 << 10, 512 << 10))
        );
        // An append below the write in flight does not wait.
        assert!(claim.claim(128 << 10));
        // One past it claims the rest; the fill skips what is claimed, and ends.
        assert!(!claim.claim(600 << 10));
        claim.written();
        assert_eq!(
            claim.next(512 << 10, 1 << 20, 256 << 10),
            Some((600 << 10, 856 << 10))
        );
        claim.written();
        assert!(claim.claim(1 << 20));
        assert_eq!(claim.next(856 << 10, 1 << 20, 256 << 10), None);
    }

    #[test]
    fn a_fill_counts_until_its_guard_drops() {
        let dir = Path::new("./some-partition-0");
        let first = Filling::start(dir);
        let second = Filling::start(&std::env::current_dir().expect("cwd").join(dir));
        let busy = || IN_FLIGHT.with(|f| f.borrow().per_dir.contains_key(&key(dir)));
        assert!(busy());
        drop(first);
        assert!(busy(), "one fill of the directory still runs");
        drop(second);
        assert!(!busy());
    }
}
