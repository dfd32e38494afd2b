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

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::mpsc;

use futures_channel::oneshot;

use super::dma::{AlignedBuf, BLOCK_BYTES};

/// Zeros written per `pwrite`.
const WRITE_BYTES: usize = 1 << 20;

struct Job {
    file: File,
    from: u64,
    to: u64,
    done: oneshot::Sender<io::Result<()>>,
}

thread_local! {
    static PREFILLER: RefCell<Option<mpsc::Sender<Job>>> = const { RefCell::new(None) };
}

/// Writes zeros over `[from, to)` of the file behind `fd` and makes them durable
/// (`fdatasync`). Both ends must be block-aligned. The caller keeps `fd` open until the call
/// is made (the job holds its own duplicate of the descriptor).
pub async fn zero_fill(fd: &impl AsRawFd, from: u64, to: u64) -> io::Result<()> {
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
        done,
    };
    PREFILLER.with(|p| {
        let mut p = p.borrow_mut();
        let tx = match p.as_ref() {
            Some(tx) => tx.clone(),
            None => {
                let tx = start()?;
                *p = Some(tx.clone());
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

fn start() -> io::Result<mpsc::Sender<Job>> {
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("strand-prefill".into())
        .spawn(move || {
            crate::runtime::helper_thread::leave_shard_core(0);
            let zeros = AlignedBuf::zeroed(WRITE_BYTES);
            for job in rx {
                let _ = job.done.send(fill(&job.file, job.from, job.to, &zeros));
            }
        })?;
    Ok(tx)
}

fn fill(file: &File, from: u64, to: u64, zeros: &AlignedBuf) -> io::Result<()> {
    let mut pos = from;
    while pos < to {
        let n = (to - pos).min(zeros.as_ref().len() as u64) as usize;
        file.write_all_at(&zeros.as_ref()[..n], pos)?;
        pos += n as u64;
    }
    file.sync_data()
}
