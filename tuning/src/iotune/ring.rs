//! O_DIRECT file I/O through one io_uring, `N` operations in flight: the primitive every
//! iotune measurement is made of.
//!
//! The loop is the one fio's io_uring engine runs: fill the queue to its depth, wait for one
//! completion, refill, until the work or the time runs out. Buffers are allocated once,
//! 4 KiB-aligned (O_DIRECT needs aligned addresses, offsets and lengths), filled with
//! pseudo-random bytes so a compressing or deduplicating virtual disk cannot flatter the
//! result, and each one is owned by exactly one in-flight operation (its slot number is the
//! operation's `user_data`).

use std::alloc::Layout;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

/// O_DIRECT alignment of buffer addresses, offsets and lengths.
pub const ALIGN_BYTES: usize = 4096;

/// A zeroed allocation aligned for O_DIRECT; freed on drop.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: Layout,
}

impl AlignedBuf {
    pub fn new(len_bytes: usize) -> io::Result<AlignedBuf> {
        let layout = Layout::from_size_align(len_bytes.max(ALIGN_BYTES), ALIGN_BYTES)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(raw)
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "aligned allocation"))?;
        Ok(AlignedBuf { ptr, layout })
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: we own `layout.size()` initialised (zeroed) bytes at `ptr`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }

    fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// xorshift64: a fast pseudo-random sequence for buffer contents and read offsets.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Fills `buf` with pseudo-random bytes (fast, incompressible enough for a disk).
pub fn fill_random(buf: &mut [u8], seed: u64) {
    let mut rng = XorShift::new(seed);
    for chunk in buf.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next().to_le_bytes()[..chunk.len()]);
    }
}

/// Opens `path` for O_DIRECT I/O, creating it empty when `create` (truncating what was there).
pub fn open_direct(path: &Path, create: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(libc::O_DIRECT);
    if create {
        o.write(true).create(true).truncate(true);
    }
    o.open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("open {} (O_DIRECT): {e}", path.display())))
}

/// Allocates `[0, len_bytes)` of the file with `fallocate(mode 0)`, as fio does before a
/// write job ("Laying out IO file"): the size is set, the blocks reserved as unwritten extents.
pub fn preallocate(file: &File, len_bytes: u64) -> io::Result<()> {
    // SAFETY: plain syscall on an open fd.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len_bytes as libc::off_t) };
    if rc == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(
            e.kind(),
            format!("fallocate {len_bytes} bytes: {e}"),
        ))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Write,
    Read,
}

/// What one run of the ring did.
#[derive(Clone, Copy, Debug)]
pub struct Throughput {
    pub ops: u64,
    pub bytes: u64,
    /// From the first submission to the last completion.
    pub elapsed: Duration,
}

impl Throughput {
    /// Decimal megabytes per second (fio's "MB/s").
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }

    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// An io_uring with `queue_depth` aligned buffers of `block_bytes`, reusable across runs
/// (a new ring also means new io-wq worker threads, which changes what ext4's journal sees:
/// see [`super::fsync`]).
pub struct Ring {
    ring: IoUring,
    bufs: Vec<AlignedBuf>,
    block_bytes: usize,
}

impl Ring {
    pub fn new(block_bytes: usize, queue_depth: u32) -> io::Result<Ring> {
        let depth = queue_depth.max(1);
        let ring = IoUring::new(depth.next_power_of_two())
            .map_err(|e| io::Error::new(e.kind(), format!("io_uring_setup: {e}")))?;
        u32::try_from(block_bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "block too large"))?;
        let bufs = (0..depth)
            .map(|i| {
                let mut b = AlignedBuf::new(block_bytes)?;
                fill_random(b.as_mut_slice(), 0x9e37_79b9_7f4a_7c15 ^ u64::from(i));
                Ok(b)
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Ring {
            ring,
            bufs,
            block_bytes,
        })
    }

    /// Runs `op` on `file`, one block per operation, as many in flight as there are buffers,
    /// at the offsets `next_offset` hands out, until it returns `None` or `time_limit` passes
    /// (then the operations in flight are still waited for and counted).
    pub fn run(
        &mut self,
        file: &File,
        op: Op,
        time_limit: Option<Duration>,
        next_offset: &mut dyn FnMut() -> Option<u64>,
    ) -> io::Result<Throughput> {
        let fd = types::Fd(file.as_raw_fd());
        let block_bytes = self.block_bytes;
        let len = block_bytes as u32;
        let mut free: Vec<usize> = (0..self.bufs.len()).rev().collect();
        let mut inflight = 0u32;
        let mut exhausted = false;
        let mut done = Throughput {
            ops: 0,
            bytes: 0,
            elapsed: Duration::ZERO,
        };
        let start = Instant::now();
        loop {
            if time_limit.is_some_and(|t| start.elapsed() >= t) {
                exhausted = true;
            }
            while !exhausted && !free.is_empty() {
                let Some(offset) = next_offset() else {
                    exhausted = true;
                    break;
                };
                let Some(slot) = free.pop() else { break };
                let ptr = self.bufs[slot].as_ptr();
                let sqe = match op {
                    Op::Write => opcode::Write::new(fd, ptr, len).offset(offset).build(),
                    Op::Read => opcode::Read::new(fd, ptr, len).offset(offset).build(),
                };
                // SAFETY: the buffer of `slot` lives in `self.bufs` as long as the ring, and
                // is untouched until its completion comes back: a slot is reused only then.
                unsafe { self.ring.submission().push(&sqe.user_data(slot as u64)) }
                    .map_err(|_| io::Error::other("io_uring submission queue full"))?;
                inflight += 1;
            }
            if inflight == 0 {
                break;
            }
            self.ring
                .submit_and_wait(1)
                .map_err(|e| io::Error::new(e.kind(), format!("io_uring_enter: {e}")))?;
            for cqe in self.ring.completion() {
                inflight -= 1;
                free.push(cqe.user_data() as usize);
                let res = cqe.result();
                if res < 0 {
                    let e = io::Error::from_raw_os_error(-res);
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{op:?} of {block_bytes} bytes: {e}"),
                    ));
                }
                if res as usize != block_bytes {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("short {op:?}: {res} of {block_bytes} bytes"),
                    ));
                }
                done.ops += 1;
                done.bytes += block_bytes as u64;
            }
        }
        done.elapsed = start.elapsed();
        Ok(done)
    }
}

/// A sequential write job, as `fio --rw=write --direct=1 --bs=B --iodepth=Q --size=S` runs it.
#[derive(Clone, Copy, Debug)]
pub struct SeqWrite {
    pub block_bytes: usize,
    pub queue_depth: u32,
    pub file_bytes: u64,
    /// Stop early after this long (a slow disk must not make iotune take hours).
    pub time_limit: Option<Duration>,
}

/// Creates `path` (truncating), preallocates `file_bytes` like fio, and writes it from the
/// start with O_DIRECT. No fdatasync at the end (fio's default: `end_fsync=0`). The file is
/// left for the caller (to read, or to delete).
pub fn seq_write(path: &Path, job: &SeqWrite) -> io::Result<Throughput> {
    let file = open_direct(path, true)?;
    preallocate(&file, job.file_bytes)?;
    let block = job.block_bytes as u64;
    let mut next = 0u64;
    let mut offsets = || {
        (next + block <= job.file_bytes).then(|| {
            next += block;
            next - block
        })
    };
    Ring::new(job.block_bytes, job.queue_depth)?
        .run(&file, Op::Write, job.time_limit, &mut offsets)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Random `block_bytes` reads over the first `file_bytes` of `path` for `duration`.
pub fn random_read(
    path: &Path,
    file_bytes: u64,
    block_bytes: usize,
    queue_depth: u32,
    duration: Duration,
) -> io::Result<Throughput> {
    let file = open_direct(path, false)?;
    let blocks = (file_bytes / block_bytes as u64).max(1);
    let mut rng = XorShift::new(0x2545_f491_4f6c_dd1d);
    let mut offsets = || Some((rng.next() % blocks) * block_bytes as u64);
    Ring::new(block_bytes, queue_depth)?
        .run(&file, Op::Read, Some(duration), &mut offsets)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}
