//! Fetch (key 1): whole batches from each requested partition, long-polling up to
//! `max.wait.ms` until `min.bytes` are available. With `isolation_level=1` (read_committed)
//! reads stop at the last stable offset and the response lists the aborted transactions in
//! the range returned, for the client to skip. Partitions on other shards are read there;
//! the wait wakes on an append on any shard that owns one of the partitions. The response is
//! encoded by `strand_wire::fetch`, so record bytes travel from the log's buffers to the socket
//! without a copy. A response carries at most `fetch.max.bytes` (or the client's `max_bytes`
//! if lower), and a partition listed twice in one request is read and answered once.
//! Fetch v7+ may use a KIP-227 session (`fetch_session`): the request then names only what
//! changed, and the answer lists only partitions with records, errors or moved offsets.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strand_wire::fetch::{encode_fetch_response, FetchPartition, FetchTopic};
use strand_wire::kafka::messages::FetchRequest;

use crate::fetch_session::{Answer, Mode, Plan, Told, Want};
use crate::limits;
use crate::node::{Node, Probe, ReadOutcome};
use crate::storage::Offset;

/// Serves a fetch and returns the encoded response as socket segments.
pub async fn handle(
    node: &Rc<Node>,
    req: FetchRequest,
    version: i16,
    correlation_id: i32,
    may_read: &dyn Fn(&str) -> bool,
) -> Vec<Bytes> {
    let started = Instant::now();
    let max_wait = Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let min_bytes = req.min_bytes.max(0) as usize;
    let broker_max = node.config().fetch_max_bytes.max(0) as usize;
    let response_max = if req.max_bytes > 0 {
        (req.max_bytes as usize).min(broker_max)
    } else {
        broker_max
    };
    let mut wants = Vec::new();
    let mut refused: Vec<FetchTopic> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for t in &req.topics {
        let too_long = t.topic.0.len() > crate::limits::TOPIC_NAME_BYTES_MAX;
        // READ on the topic (ACLs, `kafka::authorize`): refused partitions never reach a log.
        let denied = !too_long && !may_read(t.topic.0.as_str());
        for p in &t.partitions {
            if !seen.insert((t.topic.0.as_str(), p.partition)) {
                continue; // listed twice: Kafka keeps one entry per partition
            }
            // A name no topic can have, or a stale / future leader epoch (KIP-320, v9+):
            // answered at once, never held by a session.
            let refusal = if too_long {
                Some(strand_wire::ErrorCode::UnknownTopicOrPartition)
            } else if denied {
                Some(strand_wire::ErrorCode::TopicAuthorizationFailed)
            } else if version >= 9 {
                node.check_leader_epoch(&t.topic.0, p.partition, p.current_leader_epoch)
                    .err()
            } else {
                None
            };
            if let Some(code) = refusal {
                if refused.last().is_none_or(|r| r.name != t.topic.0.as_str()) {
                    refused.push(FetchTopic {
                        name: t.topic.0.to_string(),
                        partitions: Vec::new(),
                    });
                }
                if let Some(r) = refused.last_mut() {
                    r.partitions
                        .push(failed(node, version, &t.topic.0, p.partition, code));
                }
                continue;
            }
            wants.push(Want {
                tp: Rc::new((t.topic.0.to_string(), p.partition)),
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                memo: Default::default(),
            });
        }
    }
    let forgotten: Vec<_> = req
        .forgotten_topics_data
        .iter()
        .filter(|t| t.topic.0.len() <= crate::limits::TOPIC_NAME_BYTES_MAX)
        .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
        .collect();
    // Fetch v7+ carries the session fields; older versions decode as "no session" (0, -1).
    let (session_id, epoch) = if version >= 7 {
        (req.session_id, req.session_epoch)
    } else {
        (0, -1)
    };
    let now_ms = crate::runtime::clock::now_ms().max(0) as u64;
    let planned = node
        .fetch_sessions
        .borrow_mut()
        .plan(session_id, epoch, wants, &forgotten, now_ms);
    let plan = match planned {
        Ok(plan) => plan,
        Err(code) => return encode_fetch_response(version, correlation_id, 0, code.code(), 0, &[]),
    };
    let owners: Vec<usize> = {
        let mut o: Vec<usize> = plan.wants.iter().map(|(w, _)| node.owner(&w.tp)).collect();
        o.sort_unstable();
        o.dedup();
        o
    };
    let committed = req.isolation_level == 1;
    let probes: Vec<Probe> = plan.wants.iter().map(|(w, _)| node.probe(w)).collect();
    let results = loop {
        // Listen before reading, so an append between the read and the wait is not missed.
        let listeners: Vec<_> = owners
            .iter()
            .map(|&s| crate::runtime::wake::cross(node.shared.appended[s].listen()))
            .collect();
        let results = read_all(node, &plan, &probes, response_max, committed).await;
        let bytes: usize = results
            .iter()
            .map(|(_, r)| r.as_ref().map_or(0, |o| o.bytes))
            .sum();
        let errors = !refused.is_empty() || results.iter().any(|(_, r)| r.is_err());
        let elapsed = started.elapsed();
        if bytes >= min_bytes || errors || elapsed >= max_wait {
            break results;
        }
        let mut wait: Pin<Box<dyn Future<Output = ()>>> =
            Box::pin(glommio::timer::sleep(max_wait - elapsed));
        for l in listeners {
            wait = Box::pin(futures_lite::future::or(wait, l));
        }
        wait.await;
    };
    let mut by_topic: Vec<FetchTopic> = Vec::new();
    let mut topic_at: HashMap<&str, usize> = HashMap::new();
    let mut answered = Vec::new();
    for (i, result) in results {
        let want = &plan.wants[i].0;
        let mut pd = FetchPartition {
            index: want.tp.1,
            preferred_read_replica: -1,
            ..Default::default()
        };
        match result {
            Ok(read) => {
                pd.high_watermark = read.log_end.0;
                pd.last_stable_offset = read.last_stable.0;
                pd.log_start_offset = read.log_start.0;
                let bytes: usize = read.records.iter().map(|b| b.len()).sum();
                crate::metrics::with(|m| m.bytes_out += bytes as u64);
                pd.records = read.records;
                if committed {
                    pd.aborted = Some(read.aborted);
                }
            }
            Err(code) => pd = failed(node, version, &want.tp.0, want.tp.1, code),
        }
        let answer = Answer {
            told: Told {
                high_watermark: pd.high_watermark,
                last_stable: pd.last_stable_offset,
                log_start: pd.log_start_offset,
            },
            has_records: !pd.records.is_empty(),
            error: pd.error_code != 0,
        };
        if !plan.must_answer(i, &answer) {
            continue;
        }
        answered.push((i, answer));
        let at = *topic_at.entry(want.tp.0.as_str()).or_insert_with(|| {
            by_topic.push(FetchTopic {
                name: want.tp.0.clone(),
                partitions: Vec::new(),
            });
            by_topic.len() - 1
        });
        by_topic[at].partitions.push(pd);
    }
    node.fetch_sessions.borrow_mut().told(&plan, &answered);
    by_topic.extend(refused);
    let session_id = match plan.mode {
        Mode::Sessionless => 0,
        Mode::Full { session_id } | Mode::Incremental { session_id } => session_id,
    };
    encode_fetch_response(version, correlation_id, 0, 0, session_id, &by_topic)
}

/// A partition answered with an error: no offsets (-1), as Kafka answers; from v12, with the
/// partition's current leader when the error sends the client to another broker (KIP-951).
fn failed(
    node: &Node,
    version: i16,
    topic: &str,
    index: i32,
    code: strand_wire::ErrorCode,
) -> FetchPartition {
    use strand_wire::ErrorCode::{FencedLeaderEpoch, NotLeaderOrFollower};
    let redirect = matches!(code, NotLeaderOrFollower | FencedLeaderEpoch) && version >= 12;
    crate::metrics::with(|m| m.error(1, code.code()));
    FetchPartition {
        index,
        error_code: code.code(),
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        preferred_read_replica: -1,
        current_leader: redirect
            .then(|| node.current_leader(topic, index))
            .flatten(),
        ..Default::default()
    }
}

struct Read {
    records: Vec<Bytes>,
    bytes: usize,
    log_start: Offset,
    log_end: Offset,
    last_stable: Offset,
    aborted: Vec<(i64, i64)>,
}

/// Reads every wanted partition (in parallel across shards), keeping the response under
/// `response_max` bytes except that the first batch found is always returned whole. Returns
/// the partitions worth answering, each with its index in the plan: in an incremental session
/// a partition with nothing new whose offsets the client already knows is left out here, so a
/// quiet partition of 1,000 costs one look at its log per wake-up and nothing more.
///
/// Reads start in waves that fit the budget left: each partition with news reserves
/// `min(partition_max_bytes, what is left)`, and the next wave starts with what the last one
/// did not use. Starting them all at once read up to 1 MiB from disk for each of 1,000
/// partitions to keep 55 MiB of it (a consumer catching up read 500 MB/s and fell behind).
/// Partitions past the spent budget are answered with their offsets and no records; the
/// session starts the next fetch after the last one that returned records.
async fn read_all(
    node: &Rc<Node>,
    plan: &Plan,
    probes: &[Probe],
    response_max: usize,
    committed: bool,
) -> Vec<(usize, Result<Read, strand_wire::ErrorCode>)> {
    let incremental = matches!(plan.mode, Mode::Incremental { .. });
    let mut out = Vec::with_capacity(plan.wants.len());
    // Partitions with something to read, in plan order; the others are answered in place
    // (with 1,000 partitions, spawning a task for each made up a quarter of the broker's CPU).
    let mut news = Vec::new();
    for (i, ((w, told), probe)) in plan.wants.iter().zip(probes).enumerate() {
        let offset = Offset(w.fetch_offset);
        match node.probe_nothing_new(probe, &w.tp, offset, committed) {
            Some(nothing) => {
                let now = Told {
                    high_watermark: nothing.log_end.0,
                    last_stable: nothing.last_stable.0,
                    log_start: nothing.log_start.0,
                };
                if !(incremental && now == *told) {
                    out.push((i, Ok(kept(nothing, &mut 0, usize::MAX, &mut false))));
                }
            }
            None => news.push(i),
        }
    }
    let mut total = 0usize;
    let mut next = 0;
    // The budget left; until a record is found, room for at least the first batch.
    let left = |total: usize| {
        response_max
            .saturating_sub(total)
            .max(usize::from(total == 0))
    };
    // Set once a read's batches did not fit: the budget is spent, though a few bytes remain
    // (reading on with what is left read a partition per wave, each to be thrown away: at
    // 1,000 partitions a fetch read hundreds of chunks one after another and kept none).
    let mut spent = false;
    while next < news.len() && !spent && left(total) > 0 {
        let mut reserve = left(total);
        // What one read is charged at most: a wave holds at least
        // `FETCH_WAVE_READS_MIN` reads (when `max.partition.fetch.bytes` is as large as the
        // response, or a partition on another shard turns out to have nothing, one read per
        // wave made a fetch a string of round trips).
        let charge_max = (reserve / limits::FETCH_WAVE_READS_MIN).max(1);
        let mut wave = Vec::new();
        while next < news.len() && reserve > 0 {
            let i = news[next];
            let w = &plan.wants[i].0;
            let bytes_max = (w.max_bytes.max(0) as usize).min(reserve).max(1);
            reserve -= bytes_max.min(charge_max);
            wave.push((i, start_read(node, w, bytes_max, committed)));
            next += 1;
        }
        for (i, read) in wave {
            let r = match read {
                Reading::Done(r) => r,
                Reading::Task(task) => task.await,
            };
            out.push((
                i,
                r.map(|read| kept(read, &mut total, response_max, &mut spent)),
            ));
        }
    }
    // No room left: offsets only, no records (and no disk reads).
    let rest: Vec<_> = news[next..]
        .iter()
        .map(|&i| (i, start_read(node, &plan.wants[i].0, 0, committed)))
        .collect();
    for (i, read) in rest {
        let r = match read {
            Reading::Done(r) => r,
            Reading::Task(task) => task.await,
        };
        out.push((
            i,
            r.map(|read| kept(read, &mut total, response_max, &mut spent)),
        ));
    }
    out
}

/// A partition's read, started: answered in place or running on its own task.
enum Reading {
    Done(ReadOutcome),
    Task(glommio::Task<ReadOutcome>),
}

/// Starts reading `want` (`bytes_max` 0: offsets only, answered in place on this shard).
fn start_read(node: &Rc<Node>, want: &Want, bytes_max: usize, committed: bool) -> Reading {
    let offset = Offset(want.fetch_offset);
    if bytes_max == 0 {
        if let Some(r) = node.read_offsets_here(&want.tp, offset) {
            return Reading::Done(r);
        }
    }
    let node = Rc::clone(node);
    let tp = (*want.tp).clone();
    Reading::Task(glommio::spawn_local(async move {
        node.read(tp, offset, bytes_max, committed).await
    }))
}

/// A read's batches that still fit the response (all of them while `total` is 0: the first
/// batch found is returned whole), counted into `total`; `spent` is set when some did not.
fn kept(
    read: crate::storage::ReadOut,
    total: &mut usize,
    response_max: usize,
    spent: &mut bool,
) -> Read {
    let mut batches = read.batches;
    if *total > 0 {
        let (read_n, mut kept) = (batches.len(), 0usize);
        batches.retain(|b| {
            kept += b.len();
            *total + kept <= response_max
        });
        *spent |= batches.len() < read_n;
    }
    let bytes: usize = batches.iter().map(Bytes::len).sum();
    *total += bytes;
    Read {
        records: batches,
        bytes,
        log_start: read.log_start,
        log_end: read.log_end,
        last_stable: read.last_stable,
        aborted: read.aborted,
    }
}
