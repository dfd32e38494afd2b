//! Every bound the broker enforces, in one place, each with the reason for its value.

/// Size of one O_DIRECT write buffer. 1 MiB writes reach the disk's sequential bandwidth
/// (measured ~2 GB/s here) while keeping a partial-buffer flush cheap; must be a multiple of
/// the 4 KiB block.
pub const WRITE_CHUNK_BYTES: usize = 1 << 20;

/// The smallest O_DIRECT write buffer a partition holds (`storage::dma`): buffers are sized
/// to what the partition wrote between flushes (powers of two up to `WRITE_CHUNK_BYTES`), so
/// a quiet partition holds 64 KiB rather than 1 MiB. A multiple of the 4 KiB block.
pub const WRITE_BUFFER_MIN_BYTES: usize = 64 << 10;

/// Full write buffers in flight per partition before appends wait (write-behind). Four 1 MiB
/// writes keep an NVMe queue busy; more only adds memory and tail latency.
pub const WRITE_BEHIND_DEPTH: usize = 4;

/// Hot-tail cache per partition. Consumers that keep up read from here without I/O; 32 MiB
/// is ~16 ms of a 2 GB/s disk, well above the write-behind window (4 x 1 MiB) the cache must
/// always cover, since bytes not yet written can only be read from the cache.
pub const PARTITION_CACHE_BYTES: usize = 32 << 20;

/// Every partition's hot-tail cache on one shard together (`storage::shard_cache`): over it,
/// partitions give up their oldest written batches in turn. 256 MiB keeps 16 busy
/// partitions' tails in memory (16 MiB each, ~80 ms at 200 MB/s) and bounds a shard with
/// thousands of partitions, which the per-partition cap alone does not (1,000 x 32 MiB).
pub const SHARD_CACHE_BYTES: usize = 256 << 20;

/// Partitions asked to give up a batch per append while the shard's cache is over budget;
/// the rest waits for the next append.
pub const SHARD_CACHE_EVICT_SCAN_MAX: usize = 64;

/// Small batches (up to `CACHE_BLOCK_COPY_MAX_BYTES`) are cached side by side in blocks of
/// this size (`storage::cache`), one block per partition at a time: a block leaves the heap
/// once its batches leave the cache. 16 KiB keeps an idle partition's partly filled block
/// small; copying at most 2 KiB costs less than the allocation it replaces.
pub const CACHE_BLOCK_BYTES: usize = 16 << 10;
pub const CACHE_BLOCK_COPY_MAX_BYTES: usize = 2 << 10;

// io-properties from `strand iotune` may change the chunk and the depth, within a window
// that must stay inside the cache.
const _: () =
    assert!(strand_tuning::props::WRITE_BEHIND_WINDOW_BYTES_MAX <= PARTITION_CACHE_BYTES as u64);

/// Smallest disk read for a fetch: the sparse index may put the start up to
/// `index.interval.bytes` before the wanted batch, and tiny reads waste an I/O.
pub const READ_BYTES_MIN: u64 = 64 << 10;

/// Largest single disk read for a fetch (Kafka's default `fetch.max.bytes` is 50 MiB, but
/// larger reads only delay the first byte; the consumer comes back for more).
pub const READ_BYTES_MAX: u64 = 8 << 20;

/// Fewest partition reads a fetch starts at once (`kafka::fetch::read_all`): a read is
/// charged against the response budget at most `1/FETCH_WAVE_READS_MIN` of what is left, so
/// a client whose `max.partition.fetch.bytes` equals its `fetch.max.bytes` does not read one
/// partition per round trip. Worst case it reads 16 partitions' worth (each at most
/// `READ_BYTES_MAX`) to keep one response; with Kafka's defaults (1 MiB of 50 MiB) it changes
/// nothing.
pub const FETCH_WAVE_READS_MIN: usize = 16;

/// Threads per shard that read old segments for fetches (`storage::read_pool`): enough reads
/// in flight to keep a disk busy while a consumer catches up on many partitions (one at a
/// time, 55 reads of 1 MiB took ~150 ms per fetch here), few enough to stay idle otherwise.
pub const READ_THREADS_PER_SHARD: usize = 4;

/// Kafka's longest topic name. Longer names are refused at creation, and a fetch naming one
/// gets UNKNOWN_TOPIC_OR_PARTITION without the name being copied per partition (a 100 MiB
/// frame of partitions under one huge name would otherwise multiply into gigabytes).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Partitions every KIP-227 fetch session on one shard holds together (`fetch_session`): each
/// costs ~100 bytes (its name, offsets and an index entry), at most ~400 with a 249-byte name,
/// so 128 Ki bound a shard's sessions at 13-50 MiB — 128 consumers of 1,000 partitions each.
/// Beyond, new sessions replace idle or smaller ones, or fetches go on without one.
pub const FETCH_SESSION_PARTITIONS_PER_SHARD: usize = 128 << 10;

/// A fetch session idle this long may be replaced by a new one when the cache is full
/// (Kafka's `min.incremental.fetch.session.eviction.ms`, 2 minutes).
pub const FETCH_SESSION_EVICTION_MS: u64 = 120_000;

/// Largest request frame accepted (Kafka's `socket.request.max.bytes` default, 100 MiB).
pub const FRAME_BYTES_MAX: usize = 100 << 20;

/// Percent of the process's open-files limit that client connections may take (the rest is
/// for segment files, indexes and the cluster): with `ulimit -n` at 20,000, 15,000
/// connections, so the broker refuses before accept() fails with EMFILE. `strand tune`
/// recommends an open-files limit of 1,048,576.
pub const CONNECTION_FD_SHARE: u64 = 75;

/// Open files kept out of the partitions' share of the open-files limit (`ulimit -n`) besides
/// what connections may take: listeners, io_uring rings, the metadata log, logs, sockets of
/// the cluster link. Partitions get the rest, at `topic.fds.per.partition` each: with
/// `ulimit -n` at 20,000 (15,000 for connections), 2,372 partitions. Before this bound,
/// 10,000 partitions on such a host ran out of descriptors: partitions failed to open and
/// every accept() failed with EMFILE.
pub const OPEN_FILES_RESERVED: u64 = 256;

/// Locked memory glommio registers with io_uring per executor. The default (10 MiB) is over
/// the 8 MiB `ulimit -l` of many hosts; glommio falls back to ordinary aligned allocations
/// beyond what is registered.
pub const EXECUTOR_IO_MEMORY_BYTES: usize = 6 << 20;

/// Partitions one topic may have: each partition costs open files, a write buffer and a cache
/// on its shard, so a typo (`--partitions 100000`) must not exhaust the node.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

/// Default partition count for auto-created topics and CreateTopics with -1 (Kafka's
/// `num.partitions` default is 1).
pub const DEFAULT_PARTITIONS: i32 = 1;

/// How often a long-polling fetch re-checks partitions owned by other shards. Local partitions
/// wake the fetch at once through their append event.
pub const FETCH_POLL_MS: u64 = 1;

/// Bytes at the end of a partition's log read at start-up to rebuild idempotent-producer state
/// (the last five batches of each producer). Bounded so opening a partition stays fast; a
/// producer whose last batches are older is treated as new.
pub const PRODUCER_STATE_REBUILD_BYTES: u64 = 32 << 20;

/// Requests one connection may have between "read" and "reply written" (Kafka clients send
/// at most 5 produce requests in flight; the rest is headroom for pipelined metadata).
/// Bounds the memory a single connection can pin in the reply queue.
pub const IN_FLIGHT_REQUESTS_PER_CONNECTION: usize = 16;

/// Produce bytes a shard holds between reading them off a socket and having them in a log
/// (copied out of request frames, queued behind an append or in a cross-shard channel).
/// Connections that would go over it wait: backpressure reaches the clients through TCP
/// instead of the broker running out of memory. 256 MiB covers ~100 ms at disk speed.
pub const SHARD_PRODUCE_MEMORY_BYTES: usize = 256 << 20;

/// How far ahead of the writes a segment file is kept zero-filled (`storage::prefill`).
/// Filling the whole `segment.bytes` (1 GiB) per partition up front wastes disk on many
/// small partitions; extending the file per write makes every fdatasync update its size and
/// hands each write to kernel workers. 16 MiB steps cost one size update per 16 MiB
/// (Redpanda allocates in 32 MiB steps).
pub const PREALLOCATE_STEP_BYTES: u64 = 16 << 20;

/// The first zero-fill step of a segment; each next step is as large as what the segment
/// already holds, up to `PREALLOCATE_STEP_BYTES`. A new or quiet partition then holds
/// 256 KiB of zeros, not 16 MiB (780 idle partitions took 13 GB once; at 1 MiB, a new
/// 1,000-partition topic wrote 1 GB of zeros and lost a quarter of its max-rate throughput).
pub const PREALLOCATE_FIRST_STEP_BYTES: u64 = 256 << 10;

/// Zeros per write of the zero-fill (`storage::prefill`). 1 MiB writes back to back held the
/// disk for tens of milliseconds at a time and acks=all fdatasyncs queued behind them; smaller
/// paced writes let the syncs in between (see `PREFILL_PAUSE_PERCENT`).
pub const PREFILL_WRITE_BYTES: usize = 256 << 10;

/// After each zero-fill write, the fill thread sleeps this share of the time the write took
/// (300: one shard's zeros take about a quarter of the time its fill thread spends, for writes
/// under ~7 ms; `PREFILL_PAUSE_MAX_MS` caps the pause), unless something waits for a fill
/// (`prefill::Hurry`): then it writes at full speed. A fill starts half a step (up to
/// 8 MiB) ahead of the appends. Measured at 10 MB/s acks=all, 16 partitions, one shard
/// (2026-12-04): produce p99 22-36 ms unpaced, 8-10 ms at 100, 4-9 ms at 300.
pub const PREFILL_PAUSE_PERCENT: u32 = 300;

/// The longest one pause (a write that stalled for long does not stall the fill as long again).
pub const PREFILL_PAUSE_MAX_MS: u64 = 20;

/// How often an append that reached a write of zeros in flight looks again (`prefill::Claim`):
/// one such write (`PREFILL_WRITE_BYTES`) takes 0.1-2 ms here; the append waits for at most
/// that one write.
pub const PREFILL_CLAIM_POLL: std::time::Duration = std::time::Duration::from_micros(200);

/// Keys one compaction pass indexes (key digest -> offset, ~40 bytes each with the table's
/// overhead: ~40 MiB). A dirty part with more distinct keys is cleaned over several passes,
/// as Kafka's cleaner does when its dedupe buffer fills.
pub const CLEANER_KEYS_MAX: usize = 1_000_000;

/// CPU shares of each shard's housekeeping task queue (retention, compaction bookkeeping,
/// idle rolls) against the default queue's 1000 that serves requests: background work gets
/// about 1/20 of a busy core and all of an idle one. (The compaction pass itself runs on a
/// thread of its own; see `storage::housekeeping`.)
pub const HOUSEKEEPING_SHARES: usize = 50;

/// Nice value of the compaction thread. 0, measured (scripts/bench-compaction): at nice 10 or
/// `SCHED_IDLE` the thread, starved by a busy shard while it holds an ext4 journal handle
/// (allocating, renaming, fsyncing), holds up the journal commit and with it the shard's own
/// O_DIRECT writes: p99.9 stalls of 100-200 ms. At nice 0 it is preempted but never starved;
/// the pass leaves the shard's core (see `helper_thread::leave_shard_core`), and
/// `log.cleaner.io.max.bytes.per.second` caps it where that is not enough.
pub const CLEANER_NICE: libc::c_int = 0;

/// A segment write or fdatasync slower than this is logged (WARN) with how long it queued and
/// how long the device took. Healthy NVMe answers in well under a millisecond; seconds point
/// at the host (a starved per-CPU `dio` kworker, a stalled journal, a failing disk).
pub const SLOW_IO_WARN_MS: u64 = 500;

/// How often each shard's lag probe asks to wake (`stages`: `shard lag`). Long enough that an
/// idle shard stays idle (at 5 ms the probe's 200 wake-ups a second were most of an idle
/// node's 2.7% of a core: each wake-up costs a reactor pass, ~60 us with glommio's timer
/// re-arming), short enough that a loaded run still gathers a few thousand samples.
pub const SHARD_LAG_PROBE_MS: u64 = 50;

/// A partition log's flusher waits this long at most for the next append when it has nothing
/// to sync (it is woken by the append itself; the bound only ends the task of a dropped log).
pub const FLUSHER_IDLE_RECHECK_MS: u64 = 10_000;

/// How long a group with neither members nor committed offsets is kept before it is
/// forgotten. Kafka removes such groups in its periodic cleanup
/// (`offsets.retention.check.interval.ms`, 10 minutes); until then they can be described and
/// deleted (tools remove a static member, then delete its group).
pub const EMPTY_GROUP_KEEP_MS: i64 = 600_000;

/// Largest records section a produced compressed batch may decompress to (it is streamed
/// through its decompressor once, to validate its records, and then stored as sent). 16 MiB
/// is 16 times the clients' default batch size (librdkafka `batch.size` 1 MB, the Java
/// client's 16 KB; both count uncompressed bytes). What bounds a bomb's cost is this, not
/// memory (the walk holds one 64 KiB buffer): inflating 64 MiB of zeros took ~7 ms of a
/// shard, and bombs paced at 50/s raised a healthy client's p99 from ~3 to ~14 ms on two
/// cores; at 8 MiB it stayed at ~2 ms. Kafka decompresses a batch whatever its size.
pub const PRODUCE_DECOMPRESSED_BYTES_MAX: usize = 16 << 20;

/// Protocol names and metadata a group member may send in one JoinGroup (every member's
/// metadata goes to the leader, and the group keeps it). Real subscriptions are a few KiB;
/// 1 MiB leaves room for thousands of topics and stops a client from parking 50 MiB per member.
pub const GROUP_MEMBER_METADATA_BYTES_MAX: usize = 1 << 20;

/// A KIP-848 subscription regex, compiled: a member's pattern lives as long as its session
/// and is matched against every topic name on each assignment, so a pattern that compiles to
/// more than this is refused (INVALID_REGULAR_EXPRESSION) rather than held.
pub const GROUP_REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;

/// Offsets one share acknowledgement batch may span. A batch covers records a member holds,
/// at most `share.partition.max.record.locks` (2,000 by default) of them; a client naming a
/// billion offsets would make the broker walk them all.
pub const SHARE_ACK_BATCH_OFFSETS_MAX: i64 = 1 << 20;

/// Size at which a share-partition's state file is rewritten as a snapshot: each fetch and
/// acknowledgement appends ~30 bytes per run of records, so this is tens of thousands of
/// changes, and a replay at start-up reads at most this much per share-partition.
pub const SHARE_STATE_FILE_BYTES_MAX: u64 = 4 << 20;

/// The largest frame a request of `api_key` may be; a larger one closes the connection as soon
/// as its size and API key have arrived, before its body is read. Only Produce and the
/// batch admin APIs need `FRAME_BYTES_MAX`; JoinGroup is bounded by its protocol metadata
/// (a 50 MiB JoinGroup was read in full, then refused), and requests with a fixed handful of
/// fields by 1 MiB.
pub fn request_frame_bytes_max(api_key: i16) -> usize {
    const SMALL: usize = 1 << 20;
    match api_key {
        // JoinGroup: the metadata limit, plus room for ids and protocol names.
        11 => GROUP_MEMBER_METADATA_BYTES_MAX + (64 << 10),
        // FindCoordinator, Heartbeat, ApiVersions, InitProducerId, EndTxn,
        // DescribeCluster: a few ids and strings.
        10 | 12 | 18 | 22 | 26 | 60 => SMALL,
        _ => FRAME_BYTES_MAX,
    }
}

/// A request frame that has started arriving must be complete within this long, or the
/// connection is closed (Kafka has no such bound; slowloris clients held partial 100 MiB
/// frames forever). A full 100 MiB frame needs 1.7 MB/s to make it.
pub const FRAME_READ_TIMEOUT_MS: u64 = 60_000;

/// How often shard 0 measures free disk space (one `statvfs`): often enough that a disk
/// filling at 2 GB/s is caught within a few GB of the threshold.
pub const DISK_CHECK_INTERVAL_MS: u64 = 1_000;

/// The reserve file kept in the data directory and released when a catalog save meets a full
/// disk: `topics.toml` for thousands of topics fits many times over.
pub const DISK_RESERVE_BYTES: usize = 4 << 20;

/// How long a group or transaction coordinator waits for the in-sync replicas of its internal
/// partition to confirm a write (Kafka's `offsets.commit.timeout.ms`, 5 s): past it the request
/// is answered COORDINATOR_NOT_AVAILABLE and the client retries.
pub const COORDINATOR_WRITE_TIMEOUT_MS: u64 = 5_000;

/// How long a shard waits before it tries again to load an internal partition it leads but
/// could not take up (its log refused to lead the epoch): without a retry the groups or
/// transactional ids there would answer COORDINATOR_LOAD_IN_PROGRESS until the next
/// metadata change. A second: a failing disk is not hammered, a transient failure costs little.
pub const COORDINATOR_LOAD_RETRY_MS: u64 = 1_000;

/// Partitions with series of their own in `GET /metrics` (log offsets, size, segments;
/// replicas, ISR, followers' lag), the first by (topic, partition), and likewise (group,
/// partition) pairs (committed offset, lag): bounds a scrape's size and Prometheus's
/// cardinality (about ten series each). The rest are counted in
/// `strand_metrics_partitions_left_out` / `strand_metrics_group_offsets_left_out`. The
/// default of `metrics.partition.series.max` (0 drops those labels).
pub const METRICS_PARTITION_SERIES_MAX: usize = 1_000;

/// Memory a shard lets its connections hold beyond their free allowance: request frames over
/// `CONNECTION_FREE_BYTES` while they are read and handled, and replies (fetch results) queued
/// for a client that reads slowly or not at all. A connection that would go over waits (it
/// stops reading), so memory stays bounded however many greedy clients there are; together
/// with `SHARD_PRODUCE_MEMORY_BYTES` and the partition caches this is the broker's budget.
pub const SHARD_CONNECTION_MEMORY_BYTES: usize = 256 << 20;

/// What every connection may hold without drawing on `SHARD_CONNECTION_MEMORY_BYTES`: a
/// request frame up to this size, and this much of queued replies. Ordinary clients (1 MB
/// `max.request.size` / `message.max.bytes`, small fetches) then never wait behind a
/// client that hogs the budget with 100 MiB frames or unread 50 MiB fetches.
pub const CONNECTION_FREE_BYTES: usize = 1 << 20;

/// A reply whose next 1 MiB cannot be written for this long closes the connection: the
/// client stopped reading (Kafka clients give up on a request after 30-60 s anyway), and the
/// replies queued for it would otherwise hold memory for as long as it stays connected.
pub const REPLY_WRITE_TIMEOUT_MS: u64 = 60_000;

/// Bytes of a reply written to the socket per write (so the timeout above measures progress,
/// not the size of a 50 MiB fetch response).
pub const REPLY_WRITE_CHUNK_BYTES: usize = 1 << 20;

/// Topics one Metadata request may auto-create; the rest are answered LEADER_NOT_AVAILABLE
/// (retriable: the client asks again and they are created then). One request naming 100,000
/// topics created them all in 6.5 s and filled the disk.
pub const AUTO_CREATE_TOPICS_PER_REQUEST: usize = 100;

/// Partitions auto-creation may add per second, broker-wide (a token bucket holding at most
/// one second's worth), in the spirit of Kafka's `controller_mutation_rate` quota. Explicit
/// CreateTopics / CreatePartitions are not rate limited; every way is capped by
/// `topic.partitions.per.shard`.
pub const AUTO_CREATE_PARTITIONS_PER_SEC: u64 = 1_000;

/// Allocations at least this large are mapped on their own (returned to the OS when freed),
/// and an allocator arena returns free space at its top beyond this (`memory`). 1 MiB: a
/// 1 MiB produce batch or fetch read costs one mmap and its page faults (~30 us), and the
/// broker's RSS comes back after a burst instead of staying at its peak.
pub const ALLOCATOR_MMAP_THRESHOLD_BYTES: usize = 1 << 20;

/// Cluster mode: how long shard 0 waits for every voter to register before asking the
/// controller for the internal topics (`__consumer_offsets`, `__transaction_state`):
/// placement spreads their leaders over the brokers registered then. After this, a node
/// that is down does not hold the others back.
pub const INTERNAL_TOPICS_WAIT_MS: u64 = 30_000;

/// Cluster mode: topic changes of one request (CreateTopics, DeleteTopics, ...) asked of the
/// controller at once. Concurrent asks are committed by the quorum together (one round and one
/// fdatasync for many); the bound keeps one request from queueing thousands of proposals.
pub const CONTROLLER_CALLS_IN_FLIGHT: usize = 64;

/// Cluster mode: bytes a follower asks for per replica fetch (Kafka's
/// `replica.fetch.max.bytes` is 1 MiB per partition); one answer must fit a cluster message.
pub const REPLICA_FETCH_MAX_BYTES: i32 = 1 << 20;

/// Cluster mode: bytes of batches in one answer to a follower's fetch session, all its
/// partitions together (Kafka's `replica.fetch.response.max.bytes` is 10 MiB). Smaller here:
/// an answer (plus at most one batch past the cap) must fit one cluster message (16 MiB), and
/// the answers to all sessions toward one peer share its 64 MiB send queue with the quorum.
pub const REPLICA_FETCH_RESPONSE_MAX_BYTES: i32 = 4 << 20;

/// Cluster mode: how long a leader holds a follower's fetch that has nothing new (Kafka's
/// `replica.fetch.wait.max.ms`, 500 ms), answering as soon as something is appended.
pub const REPLICA_FETCH_WAIT_MS: u64 = 500;

/// Cluster mode: how long a leader holds a follower's fetch whose only news is a high
/// watermark it has not heard (Kafka does not answer early for that at all). Short, so a
/// follower that becomes leader starts close to the real high watermark; long enough that
/// the high-watermark move its own fetch caused rides on the next batch under load.
pub const REPLICA_FETCH_HW_NEWS_MS: u64 = 10;

/// Cluster mode: how long past its wait a follower gives up on a fetch session's answer (a
/// message lost with a connection) and asks again. Above a round trip under load; far below
/// `replica.lag.time.max.ms`, so a lost answer does not cost the ISR.
pub const REPLICA_FETCH_SLACK_MS: u64 = 2_000;

/// Cluster mode: a follower's pause after a failed fetch (Kafka's
/// `replica.fetch.backoff.ms`, 1 s; shorter here so a failover is followed quickly).
pub const REPLICA_FETCH_BACKOFF_MS: u64 = 100;

/// Cluster mode: the default of `replica.lag.time.max.ms` — an in-sync follower that has not
/// caught up with the leader for this long leaves the ISR (Kafka's default).
pub const REPLICA_LAG_TIME_MAX_MS: u64 = 30_000;

/// Cluster mode: how often a leader checks its followers' lag and sends ISR changes.
pub const REPLICA_TICK_MS: u64 = 250;

/// Cluster mode: connections the liveness tripwire listener holds at once. A peer holds one
/// (the listener's host has at most a few hundred peers in any cluster we run; a handful
/// today); beyond this, new connections are closed at once, so a flood of connections to the
/// cluster port costs a bounded number of sockets and tasks. Excess peers (or a flood
/// holding every slot) lose only the fast death evidence: their session timeout still rules.
pub const TRIPWIRE_ACCEPTED_MAX: usize = 256;

/// Cluster mode: how often the liveness tripwire listener looks for new connections and for
/// peers that closed theirs (it polls plain sockets; see `cluster::tripwire`). Only the
/// setting-up of a peer's tripwire waits for it (well inside the dialer's 1 s hello
/// timeout); a death is seen by the peers' dialers, not by this poll. (50 ms cost 20 wake-ups
/// a second on an idle node.)
pub const TRIPWIRE_ACCEPT_POLL_MS: u64 = 250;

/// Cluster mode: how long a Metadata answer waits for a new leader where the current one is
/// a peer this node just saw die (`kafka::metadata`, `cluster::peers_down`). The fence
/// takes milliseconds (tens when the controller died too and the quorum elects first);
/// long enough for that, short enough that a fence that cannot happen (no quorum) costs
/// clients little: they are answered with no leader (LEADER_NOT_AVAILABLE) and retry.
pub const METADATA_AWAIT_NEW_LEADER_MS: u64 = 300;

/// Cluster mode: how often such a waiting Metadata answer looks at the catalog again.
pub const METADATA_AWAIT_NEW_LEADER_POLL_MS: u64 = 2;

/// A new connection must finish its TLS handshake, and on a SASL listener its SASL
/// authentication, within this long (Kafka leaves it to `connections.max.idle.ms`; a
/// client that opens connections and stalls mid-handshake would hold them ten minutes).
pub const AUTHENTICATION_TIMEOUT_MS: u64 = 10_000;

/// The largest request frame a connection on a SASL listener may send before it has
/// authenticated: a SASL token (`strand_wire::sasl::SASL_TOKEN_BYTES_MAX`, 64 KiB) and its
/// request header (Kafka bounds this with `sasl.server.max.receive.size`, 512 KiB).
pub const UNAUTHENTICATED_FRAME_BYTES_MAX: usize = strand_wire::sasl::SASL_TOKEN_BYTES_MAX + 4096;

/// The read buffer under each TLS connection's rustls (which reads the socket 4 KiB at a
/// time): one read of up to this much per refill instead of one syscall per 4 KiB. Held for
/// the connection's life, so 1,000 TLS connections hold 64 MiB; PLAINTEXT connections hold
/// none (#21's profile: at 580 MB/s over SASL_SSL the 4 KiB reads were ~145,000 syscalls/s).
pub const TLS_READ_BUFFER_BYTES: usize = 64 << 10;
