//! Direct I/O (glommio + io_uring, O_DIRECT): the segment writer and aligned reads.
//!
//! This is the only storage module that performs I/O. The writer copies appended batches into
//! aligned DMA buffers (sized to the partition's rate, up to `chunk_bytes`) and writes each full buffer with O_DIRECT through
//! glommio's io_uring ring as soon as it fills (write-behind, up to a depth). A flush writes
//! the partial buffer rounded up to the 4 KiB block, and the next buffer starts with a copy of
//! that last partial block so it can be rewritten whole later. Writes that cover the same block
//! are ordered: a rewrite waits until the earlier write of that block has completed.
//!
//! Reads of older data use [`read_direct`]: an O_DIRECT `pread` into an aligned allocation of
//! ours, run on glommio's blocking pool so the shard does not stall, and handed out as `Bytes`
//! slices of that one allocation (no user-space copy between the disk and the socket).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use event_listener::Event;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};

const SLOW_IO: std::time::Duration =
    std::time::Duration::from_millis(crate::limits::SLOW_IO_WARN_MS);

/// Block size for O_DIRECT offsets, lengths and buffer addresses.
pub const BLOCK_BYTES: u64 = 4096;

pub fn align_down(v: u64) -> u64 {
    v & !(BLOCK_BYTES - 1)
}
pub fn align_up(v: u64) -> u64 {
    align_down(v + BLOCK_BYTES - 1)
}

fn gio(e: glommio::GlommioError<()>) -> io::Error {
    io::Error::other(e.to_string())
}

/// Memory aligned for O_DIRECT, owned, and so safe to share across threads inside `Bytes`.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    layout: std::alloc::Layout,
}

// SAFETY: AlignedBuf uniquely owns its allocation (like a Box<[u8]>); after construction it is
// only read through `as_ref`, so sharing or sending it between threads is sound.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (rounded up to a block), block-aligned.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let len = (align_up(len as u64) as usize).max(BLOCK_BYTES as usize);
        let layout = std::alloc::Layout::from_size_align(len, BLOCK_BYTES as usize)
            .expect("block-aligned layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len, layout }
    }

    /// `want` bytes of `file` from the block-aligned `start`, read with O_DIRECT into a fresh
    /// block-aligned allocation that is not zeroed first (the read fills it): fewer bytes
    /// where the file ends. Zeroing 1 MiB read buffers cost a memset plus the page faults it
    /// took, ~10% of a shard's CPU while a consumer caught up at 1,000 partitions.
    pub fn read_from(file: &File, start: u64, want: usize) -> io::Result<AlignedBuf> {
        let cap = (align_up(want as u64) as usize).max(BLOCK_BYTES as usize);
        let layout = std::alloc::Layout::from_size_align(cap, BLOCK_BYTES as usize)
            .expect("block-aligned layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { std::alloc::alloc(layout) };
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // `len` counts the initialised prefix: only that is ever exposed.
        let mut buf = AlignedBuf {
            ptr,
            len: 0,
            layout,
        };
        while buf.len < want {
            // SAFETY: writes into this allocation after its initialised prefix, at most up to
            // `want <= cap` bytes; no Rust reference to the uninitialised part is made.
            let n = unsafe {
                libc::pread(
                    std::os::fd::AsRawFd::as_raw_fd(file),
                    buf.ptr.as_ptr().add(buf.len).cast(),
                    want - buf.len,
                    (start + buf.len as u64) as libc::off_t,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                break;
            }
            buf.len += n as usize;
        }
        Ok(buf)
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: we own `len` initialised bytes at `ptr` (see `as_ref`).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the first `len` bytes at `ptr` are ours and initialised (`zeroed` zeroes
        // them all, `read_from` counts only what the read wrote).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `zeroed` or `read_from`.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Opens a segment for O_DIRECT reads (a plain fd, usable from the blocking pool).
pub fn open_for_direct_reads(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// Reads `len` bytes at `pos` with O_DIRECT into one aligned allocation and returns them as a
/// `Bytes` slice of it. Short if the file ends first. Blocking: call from the blocking pool.
pub fn read_direct(file: &File, pos: u64, len: usize) -> io::Result<Bytes> {
    let start = align_down(pos);
    let end = align_up(pos + len as u64);
    let buf = AlignedBuf::read_from(file, start, (end - start) as usize)?;
    let got = buf.len;
    // A file that ends before `pos` (a segment shorter than its index says) reads nothing.
    let lead = ((pos - start) as usize).min(got);
    let avail = got.saturating_sub(lead).min(len);
    Ok(Bytes::from_owner(buf).slice(lead..lead + avail))
}

/// fdatasync from the shard's one blocking-pool thread rather than an io_uring worker:
/// ext4's journal sleeps to batch commits (up to `max_batch_time`, one 4 ms jiffy here)
/// whenever the syncing thread differs from the previous one, and io_uring's workers vary.
/// The caller keeps `fd` open until this returns.
pub async fn fdatasync_pooled(fd: std::os::fd::RawFd) -> io::Result<()> {
    let asked = std::time::Instant::now();
    let (r, queued, took) = glommio::executor()
        .spawn_blocking(move || {
            let start = std::time::Instant::now();
            // SAFETY: plain syscall on an fd the caller keeps open.
            let r = if unsafe { libc::fdatasync(fd) } == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            };
            (r, start.duration_since(asked), start.elapsed())
        })
        .await;
    crate::metrics::with(|m| m.fsync.observe(asked.elapsed()));
    if asked.elapsed() > SLOW_IO {
        tracing::warn!(
            queued_ms = queued.as_millis() as u64,
            sync_ms = took.as_millis() as u64,
            "slow fdatasync"
        );
    }
    r
}

/// The size of a writer's buffer for `bytes` of data: the power of two at or above it,
/// between `limits::WRITE_BUFFER_MIN_BYTES` and `chunk_bytes`. After a flush the next buffer
/// is sized to what the last one carried and grows (`append`) when a burst needs more, so a
/// quiet partition holds 64 KiB and a busy one full-size buffers. With 1 MiB for every
/// partition, 1,000 partitions overflowed the executor's registered I/O memory and every
/// flush mapped a fresh 1 MiB and page-faulted it in.
fn buffer_bytes_for(bytes: usize, chunk_bytes: usize) -> usize {
    bytes
        .next_power_of_two()
        .max(crate::limits::WRITE_BUFFER_MIN_BYTES)
        .min(chunk_bytes)
}

struct WriterState {
    chunk_bytes: usize,
    /// The buffer being filled; it starts at file position `buf_pos` (block-aligned). `None`
    /// (only while `fill == 0`) until an append needs one.
    buf: Option<DmaBuffer>,
    buf_pos: u64,
    fill: usize,
    /// Logical bytes [0, written) are on disk (written, not necessarily synced).
    written: u64,
    /// Completed writes beyond `written` (start -> end), merged as the gap closes.
    completed: BTreeMap<u64, u64>,
    /// End (logical) of the most recently submitted write, to order block rewrites.
    submitted_end: u64,
    inflight: usize,
    error: Option<String>,
}

/// Appends to one segment file with O_DIRECT, write-behind and block-aligned flushes.
pub struct SegmentWriter {
    file: Rc<DmaFile>,
    state: RefCell<WriterState>,
    /// Notified whenever a write completes or fails.
    changed: Event,
    /// File bytes below this were zero-filled (`storage::prefill`), except ranges appends
    /// claimed from a fill (written by those appends, or holes where a claimed append was
    /// refused): appends below it mostly overwrite; a hole only costs an allocating write.
    /// `u64::MAX` once zero-filling has failed (appends then extend the file as without
    /// preallocation).
    ready: Cell<u64>,
    /// The zero-fill in flight, `[fill_from, fill_to)` (`fill_to == ready` when none):
    /// appends below `fill_from` go ahead, those past it claim from `fill_claim`.
    fill_from: Cell<u64>,
    fill_to: Cell<u64>,
    /// The fill in flight's claim: an append that reaches it takes its range from the fill.
    fill_claim: RefCell<Arc<super::prefill::Claim>>,
    /// The most to zero-fill (the segment's size limit); 0: no preallocation.
    preallocate_limit: u64,
}

impl SegmentWriter {
    /// Opens (creating if needed) `path` for appends at logical size `end`. With
    /// `preallocate_limit > 0` the file is kept zero-filled a step ahead of the appends, up
    /// to that size (`reserve`), so appends overwrite written blocks.
    pub async fn open(
        path: &Path,
        end: u64,
        preallocate_limit: u64,
        chunk_bytes: usize,
    ) -> io::Result<Rc<SegmentWriter>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .dma_open(path)
            .await
            .map_err(gio)?;
        let buf_pos = align_down(end);
        let fill = (end - buf_pos) as usize;
        // No buffer until the first append (a partition nobody writes to holds none), unless
        // the last block is partial: its bytes start the buffer, to be rewritten whole.
        let mut buf = None;
        if fill > 0 {
            // glommio's own reads go through its poll ring, which some filesystems refuse
            // (EOPNOTSUPP); read the partial last block with a plain O_DIRECT pread instead.
            let reader = open_for_direct_reads(path)?;
            let tail = glommio::executor()
                .spawn_blocking(move || read_direct(&reader, buf_pos, fill))
                .await?;
            if tail.len() < fill {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment tail is short",
                ));
            }
            let mut b = file.alloc_dma_buffer(buffer_bytes_for(fill, chunk_bytes));
            b.as_bytes_mut()[..fill].copy_from_slice(&tail[..fill]);
            buf = Some(b);
        }
        let writer = Rc::new(SegmentWriter {
            file: Rc::new(file),
            state: RefCell::new(WriterState {
                chunk_bytes,
                buf,
                buf_pos,
                fill,
                written: end,
                completed: BTreeMap::new(),
                submitted_end: end,
                inflight: 0,
                error: None,
            }),
            changed: Event::new(),
            // The block holding `end` is allocated already; zero-filling starts after it,
            // at the first append (a quiet partition holds no zeros it does not use).
            ready: Cell::new(align_up(end)),
            fill_from: Cell::new(align_up(end)),
            fill_to: Cell::new(align_up(end)),
            fill_claim: RefCell::default(),
            preallocate_limit,
        });
        Ok(writer)
    }

    /// Keeps the file zero-filled ahead of the appends: called before an append that ends
    /// below `upto`. Starts filling the next step in the background when fewer than half a
    /// step remain past `upto`; steps grow with the segment (256 KiB, 512, 1 MiB ... up to
    /// `limits::PREALLOCATE_STEP_BYTES`), so a quiet partition holds little unused disk and
    /// a busy one fills in large steps. When the appends have overtaken the zeros (the
    /// first append of a segment, or a burst faster than the fill), the append goes ahead
    /// as a plain write that allocates (today's kernel path): below a fill that has not
    /// started, or past one in flight by claiming its range (`prefill::Claim`: the fill
    /// skips it), waiting at most for the one write of zeros in flight there. A failed fill
    /// (a full disk) stops preallocation for this segment; the writes themselves report a
    /// shortage.
    pub async fn reserve(self: &Rc<Self>, upto: u64) -> io::Result<()> {
        if self.preallocate_limit == 0 {
            return Ok(());
        }
        loop {
            let filling = self.fill_to.get() != self.ready.get();
            if !filling {
                if upto.saturating_add(self.fill_step() / 2) > self.ready.get() {
                    self.start_fill(upto);
                }
                return Ok(());
            }
            if upto <= self.fill_from.get() {
                return Ok(());
            }
            let claim = Arc::clone(&self.fill_claim.borrow());
            if claim.claim(align_up(upto)) {
                return Ok(());
            }
            // A write of zeros is in flight where this append goes: it takes a millisecond
            // or so; the fill starts none below the claim.
            let _hurry = super::prefill::Hurry::start();
            glommio::timer::sleep(crate::limits::PREFILL_CLAIM_POLL).await;
        }
    }

    fn fill_step(&self) -> u64 {
        self.ready.get().clamp(
            crate::limits::PREALLOCATE_FIRST_STEP_BYTES,
            crate::limits::PREALLOCATE_STEP_BYTES,
        )
    }

    /// Zero-fills from `ready` (or from past `upto` when the appends have overtaken it) to a
    /// step further (not past the size limit unless an append needs it) on the shard's
    /// prefill thread. An append that reaches `fill_from` while it runs claims its range from
    /// it (`reserve`), so zeros never land where an append writes.
    fn start_fill(self: &Rc<Self>, upto: u64) {
        let from = self.ready.get().max(align_up(upto));
        let to = align_up(
            from.saturating_add(self.fill_step())
                .min(self.preallocate_limit.max(upto)),
        );
        if to <= from {
            return;
        }
        // Zeros must never land on appended data: every submitted write ends below `from`.
        assert!(
            from.is_multiple_of(BLOCK_BYTES) && align_up(self.state.borrow().submitted_end) <= from,
            "zero-fill from {from} would overwrite appends (submitted to {})",
            self.state.borrow().submitted_end
        );
        self.fill_from.set(from);
        self.fill_to.set(to);
        let claim = Arc::new(super::prefill::Claim::default());
        *self.fill_claim.borrow_mut() = Arc::clone(&claim);
        let me = Rc::clone(self);
        let filling = self
            .file
            .path()
            .and_then(|p| p.parent().map(super::prefill::Filling::start));
        glommio::spawn_local(async move {
            let _filling = filling;
            let result = super::prefill::zero_fill(&*me.file, from, to, claim).await;
            match result {
                Ok(()) => me.ready.set(to),
                Err(e) => {
                    tracing::warn!(
                        path = %me.file.path().map(|p| p.display().to_string()).unwrap_or_default(),
                        error = %e,
                        "zero-filling a segment ahead of its appends failed; it goes on without"
                    );
                    me.ready.set(u64::MAX);
                }
            }
            me.fill_from.set(me.ready.get());
            me.fill_to.set(me.ready.get());
        })
        .detach();
    }

    /// Ends a zero-fill in flight (it must not extend the file after `finish` trims it): the
    /// whole file is claimed, so once no write of zeros is in flight none starts again (a
    /// job still queued behind other partitions' writes nothing; it is not waited for).
    async fn wait_fill(&self) {
        let claim = Arc::clone(&self.fill_claim.borrow());
        while !claim.claim(u64::MAX) {
            let _hurry = super::prefill::Hurry::start();
            glommio::timer::sleep(crate::limits::PREFILL_CLAIM_POLL).await;
        }
    }

    /// Logical end of the segment (bytes appended so far).
    pub fn end(&self) -> u64 {
        let st = self.state.borrow();
        st.buf_pos + st.fill as u64
    }

    /// Logical bytes known to be on disk.
    pub fn written(&self) -> u64 {
        self.state.borrow().written
    }

    pub fn inflight(&self) -> usize {
        self.state.borrow().inflight
    }

    fn check(&self) -> io::Result<()> {
        match &self.state.borrow().error {
            Some(e) => Err(io::Error::other(format!(
                "earlier segment write failed: {e}"
            ))),
            None => Ok(()),
        }
    }

    /// Copies `data` to the end of the segment; full buffers are written in the background.
    pub fn append(self: &Rc<Self>, mut data: &[u8]) -> io::Result<()> {
        self.check()?;
        self.grow_for(data.len());
        while !data.is_empty() {
            let full = {
                let mut st = self.state.borrow_mut();
                let fill = st.fill;
                let buf = st.buf.as_mut().expect("writer buffer present");
                let capacity = buf.len();
                let n = (capacity - fill).min(data.len());
                buf.as_bytes_mut()[fill..fill + n].copy_from_slice(&data[..n]);
                st.fill += n;
                data = &data[n..];
                st.fill == capacity
            };
            if full {
                self.seal();
            }
        }
        Ok(())
    }

    /// Replaces a buffer without room for `bytes` more by a larger one (up to `chunk_bytes`)
    /// holding what it has; a buffer of `chunk_bytes` is written when full instead.
    fn grow_for(&self, bytes: usize) {
        let mut st = self.state.borrow_mut();
        let fill = st.fill;
        let capacity = st.buf.as_ref().map_or(0, DmaBuffer::len);
        if fill + bytes <= capacity || capacity >= st.chunk_bytes {
            return;
        }
        let mut bigger = self
            .file
            .alloc_dma_buffer(buffer_bytes_for(fill + bytes, st.chunk_bytes));
        if let Some(old) = st.buf.as_ref() {
            bigger.as_bytes_mut()[..fill].copy_from_slice(&old.as_bytes()[..fill]);
        }
        st.buf = Some(bigger);
    }

    /// Submits everything appended but not yet submitted (the partial block rounded up, zero
    /// padded) and starts a new buffer. Returns the logical end now covered by submitted writes.
    pub fn seal(self: &Rc<Self>) -> u64 {
        let (buf, pos, end, wait_for) = {
            let mut st = self.state.borrow_mut();
            let end = st.buf_pos + st.fill as u64;
            if end == st.submitted_end {
                return end;
            }
            let fill = st.fill;
            let padded = align_up(fill as u64) as usize;
            let mut buf = st.buf.take().expect("writer buffer present");
            buf.as_bytes_mut()[fill..padded].fill(0);
            buf.trim_to_size(padded);
            // The next buffer begins at the last partial block, carrying its bytes.
            let keep_from = align_down(fill as u64) as usize;
            let mut next = self
                .file
                .alloc_dma_buffer(buffer_bytes_for(fill, st.chunk_bytes));
            next.as_bytes_mut()[..fill - keep_from]
                .copy_from_slice(&buf.as_bytes()[keep_from..fill]);
            let pos = st.buf_pos;
            // A write starting below the previous write's end rewrites its last block: order it.
            let wait_for = (pos < st.submitted_end).then_some(st.submitted_end);
            st.buf = Some(next);
            st.buf_pos = pos + keep_from as u64;
            st.fill = fill - keep_from;
            st.submitted_end = end;
            st.inflight += 1;
            (buf, pos, end, wait_for)
        };
        let me = Rc::clone(self);
        let bytes = buf.len() as u64;
        crate::metrics::with(|m| {
            m.dma_writes_inflight += 1;
            m.dma_bytes_inflight += bytes;
        });
        glommio::spawn_local(async move {
            let asked = std::time::Instant::now();
            if let Some(prev_end) = wait_for {
                let _ = me.wait_written(prev_end).await;
            }
            let (ordered, bytes) = (asked.elapsed(), buf.len());
            let result = me.file.write_rc_at(Rc::new(buf), pos).await;
            crate::metrics::with(|m| {
                m.dma_write.observe(asked.elapsed());
                m.dma_writes_inflight = m.dma_writes_inflight.saturating_sub(1);
                m.dma_bytes_inflight = m.dma_bytes_inflight.saturating_sub(bytes as u64);
            });
            if asked.elapsed() > SLOW_IO {
                // Seen on a VM whose per-CPU `dio` kworker (which completes O_DIRECT writes
                // into preallocated extents) waited seconds behind a busy pinned thread.
                tracing::warn!(
                    path = %me.file.path().map(|p| p.display().to_string()).unwrap_or_default(),
                    pos,
                    bytes,
                    ordered_ms = ordered.as_millis() as u64,
                    total_ms = asked.elapsed().as_millis() as u64,
                    "slow segment write"
                );
            }
            me.complete(pos, end, result.map(|_| ()).map_err(|e| e.to_string()));
        })
        .detach();
        end
    }

    fn complete(&self, start: u64, end: u64, result: Result<(), String>) {
        let mut st = self.state.borrow_mut();
        st.inflight -= 1;
        match result {
            Err(e) => st.error = Some(e),
            Ok(()) => {
                let e = st.completed.entry(start).or_insert(end);
                *e = (*e).max(end);
                while let Some((&s, &e)) = st.completed.first_key_value() {
                    if s > st.written {
                        break;
                    }
                    st.written = st.written.max(e);
                    st.completed.remove(&s);
                }
            }
        }
        drop(st);
        self.changed.notify(usize::MAX);
    }

    /// Waits until logical bytes `[0, pos)` are on disk.
    pub async fn wait_written(&self, pos: u64) -> io::Result<()> {
        loop {
            let listener = self.changed.listen();
            self.check()?;
            if self.state.borrow().written >= pos {
                return Ok(());
            }
            listener.await;
        }
    }

    /// Waits until fewer than `depth` writes are in flight (write-behind backpressure).
    pub async fn wait_capacity(&self, depth: usize) -> io::Result<()> {
        loop {
            let listener = self.changed.listen();
            self.check()?;
            if self.state.borrow().inflight < depth {
                return Ok(());
            }
            listener.await;
        }
    }

    /// Makes logical bytes `[0, upto)` durable: waits for their writes, then fdatasync.
    pub async fn sync(self: &Rc<Self>, upto: u64) -> io::Result<()> {
        self.write_out(upto).await?;
        self.fdatasync().await
    }

    /// Makes logical bytes `[0, upto)` written (submitted now if they were still buffered,
    /// then waited for): they outlive the process, not the host.
    pub async fn write_out(self: &Rc<Self>, upto: u64) -> io::Result<()> {
        if self.state.borrow().submitted_end < upto {
            self.seal();
        }
        self.wait_written(upto).await
    }

    async fn fdatasync(&self) -> io::Result<()> {
        // SAFETY of the raw fd: `self` keeps the file open for the whole call.
        fdatasync_pooled(std::os::fd::AsRawFd::as_raw_fd(&*self.file)).await
    }

    /// Closes the segment for appends: writes and syncs everything, then trims the file to its
    /// logical size (undoing preallocation).
    pub async fn finish(self: &Rc<Self>) -> io::Result<u64> {
        let end = self.seal();
        self.sync(end).await?;
        self.wait_fill().await;
        self.file.truncate(end).await.map_err(gio)?;
        self.fdatasync().await?;
        Ok(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_reads_return_exactly_the_bytes_asked_for_or_up_to_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("seg");
        let data: Vec<u8> = (0..3 * BLOCK_BYTES as usize + 100)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&path, &data).expect("write");
        let file = open_for_direct_reads(&path).expect("open O_DIRECT");
        // Unaligned start and length, inside the file.
        let got = read_direct(&file, 10, 5000).expect("read");
        assert_eq!(&got[..], &data[10..5010]);
        // Past the end: what there is, and nothing of the buffer beyond it.
        let got = read_direct(&file, 2 * BLOCK_BYTES + 7, 1 << 20).expect("read");
        assert_eq!(&got[..], &data[2 * BLOCK_BYTES as usize + 7..]);
        let buf = AlignedBuf::read_from(&file, 0, 8 * BLOCK_BYTES as usize).expect("read");
        assert_eq!(buf.as_ref(), &data[..]);
    }
}
