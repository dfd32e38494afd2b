//! Disk reads of old segments, on a few threads of their own per shard.
//!
//! Why: a shard has one glommio blocking thread, and it does the shard's fdatasyncs (ext4
//! batches journal commits best when one thread syncs, see `dma::fdatasync_pooled`), its index
//! writes at segment rolls, and used to do these reads too. A consumer catching up on 1,000
//! partitions then read one 1 MiB chunk at a time (about 150 ms for a 55 MiB fetch on a quiet
//! broker, seconds under load) and every read waited behind the syncs, and they behind it.
//! Here up to `limits::READ_THREADS_PER_SHARD` reads run at once, and no fdatasync waits for
//! them. The threads start with the shard's first read and inherit its CPU placement, so a
//! shard's reads stay on its cores. The read buffer is handed to the response as `Bytes`
//! (no copy), as before.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::rc::Rc;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_channel::oneshot;

use super::dma::read_direct;

type Job = Box<dyn FnOnce() + Send>;

/// One shard's reader threads (they end when the shard's sender is dropped).
struct ReadPool {
    jobs: Sender<Job>,
}

thread_local! {
    static POOL: RefCell<Option<Rc<ReadPool>>> = const { RefCell::new(None) };
}

impl ReadPool {
    fn start(threads: usize) -> io::Result<ReadPool> {
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..threads {
            let queue = Arc::clone(&queue);
            std::thread::Builder::new()
                .name(format!("strand-read-{i}"))
                .spawn(move || work(&queue))?;
        }
        Ok(ReadPool { jobs })
    }
}

fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job, never while reading.
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        match job {
            // A panicking read drops its reply (the fetch answers KAFKA_STORAGE_ERROR) and
            // must not take the thread with it.
            Ok(job) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(_) => return, // the shard is gone
        }
    }
}

fn pool() -> io::Result<Rc<ReadPool>> {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if let Some(pool) = &*p {
            return Ok(Rc::clone(pool));
        }
        let pool = Rc::new(ReadPool::start(crate::limits::READ_THREADS_PER_SHARD)?);
        *p = Some(Rc::clone(&pool));
        Ok(pool)
    })
}

/// `len` bytes of `file` from `pos` (fewer at its end), read with O_DIRECT on a reader thread.
/// Off a shard (unit tests, tools) it runs on glommio's blocking thread instead: there a wake
/// from another thread would reach a glommio waker directly (see `runtime::wake`).
pub async fn read(file: Arc<File>, pos: u64, len: usize) -> io::Result<Bytes> {
    if !crate::runtime::wake::on_shard() {
        return glommio::executor()
            .spawn_blocking(move || read_direct(&file, pos, len))
            .await;
    }
    let (reply, answer) = oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = reply.send(read_direct(&file, pos, len));
    });
    pool()?
        .jobs
        .send(job)
        .map_err(|_| io::Error::other("segment reader threads stopped"))?;
    crate::runtime::wake::cross(answer)
        .await
        .unwrap_or_else(|_| Err(io::Error::other("segment reader thread ended mid-read")))
}
