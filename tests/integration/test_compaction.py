"""Log compaction against a real strand process with real clients (confluent-kafka).

- 100,000 records over 1,000 keys, tombstones for 100 keys: after cleaning, a consumer from
  the beginning sees exactly the latest value of each live key, no tombstoned key after
  delete.retention.ms, offsets strictly increasing; disk usage before/after is printed.
- kill -9 during a (throttled) compaction pass: after a restart the data is intact and the
  pass resumes.
- __consumer_offsets is compacted: 1,000,000 offset commits for 10 groups keep it small.
"""
import os
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KEYS = 1000
RECORDS = 100_000
DELETED = 100
DELETE_RETENTION_MS = 3000

CLEANER = {
    "log.cleaner.backoff.ms": 200,
    "log.retention.check.interval.ms": 200,
}


def create_compacted(bootstrap, name, partitions=2, **extra):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": str(256 * 1024),
        "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
    }
    config.update(extra)
    fs = admin.create_topics([NewTopic(name, partitions, 1, config=config)])
    fs[name].result(timeout=30)


def produce_keyed(bootstrap, topic):
    """Writes RECORDS records round-robin over KEYS keys, then tombstones for DELETED keys.
    Returns key -> latest value (None = deleted)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    latest = {}

    def send(key, value):
        while True:
            try:
                p.produce(topic, key=key, value=value)
                break
            except BufferError:
                p.poll(0.05)
        latest[key] = value

    for i in range(RECORDS):
        send(f"key-{i % KEYS:04d}", f"v{i}-" + "x" * 40)
    for k in range(DELETED):
        send(f"key-{k:04d}", None)
    assert p.flush(60) == 0
    return latest


def read_all(bootstrap, topic, partitions=2):
    """Every record from the beginning of each partition until its end; checks offsets
    strictly increase. Returns (key -> last value, record count)."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{time.time()}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, last_offset, eof, count = {}, {}, set(), 0
    deadline = time.time() + 60
    while len(eof) < partitions and time.time() < deadline:
        msg = c.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                eof.add(msg.partition())
                continue
            raise KafkaException(msg.error())
        p = msg.partition()
        assert msg.offset() > last_offset.get(p, -1), "offsets strictly increase"
        last_offset[p] = msg.offset()
        eof.discard(p)
        seen[msg.key().decode()] = None if msg.value() is None else msg.value().decode()
        count += 1
    c.close()
    assert len(eof) == partitions, "read every partition to its end"
    return seen, count


def disk_bytes(data_dir, topic):
    total = 0
    for entry in os.listdir(data_dir):
        if entry.rsplit("-", 1)[0] == topic:
            d = os.path.join(data_dir, entry)
            for f in os.listdir(d):
                # The cleaner swaps segments while we look: a file listed a
                # moment ago may be gone (or replaced) by the time we stat it.
                try:
                    total += os.stat(os.path.join(d, f)).st_blocks * 512
                except FileNotFoundError:
                    pass
    return total


def wait_for(predicate, timeout_s, what):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_compacted_topic_keeps_latest_value_per_key_and_drops_tombstones(make_broker):
    b = make_broker(config=CLEANER).start()
    topic = "compacted-acceptance"
    create_compacted(b.bootstrap, topic)
    latest = produce_keyed(b.bootstrap, topic)
    before = disk_bytes(b.data_dir, topic)
    live = {k: v for k, v in latest.items() if v is not None}

    def compacted():
        seen, count = read_all(b.bootstrap, topic)
        return (seen, count) if seen == live and count == len(live) else None

    t0 = time.time()
    seen, count = wait_for(compacted, 90, "compaction to leave exactly the live keys")
    after = disk_bytes(b.data_dir, topic)
    print(f"\ncompaction: {RECORDS + DELETED} records -> {count} "
          f"({len(live)} live keys, {DELETED} deleted), disk {before} -> {after} bytes "
          f"({100.0 * after / before:.1f}%), {time.time() - t0:.1f} s after the last write")
    assert after * 5 < before, f"disk usage shrinks: {before} -> {after}"
    assert "compaction pass done" in b.log()


def test_compacted_topic_refuses_records_without_a_key(make_broker):
    b = make_broker(config=CLEANER).start()
    create_compacted(b.bootstrap, "compacted-keys", partitions=1)
    p = Producer({"bootstrap.servers": b.bootstrap, "retries": 0})
    errors = []
    p.produce("compacted-keys", value=b"no key", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].code() == 87, errors  # INVALID_RECORD


def test_kill9_during_compaction_loses_nothing_and_cleaning_resumes(make_broker):
    # A throttled cleaner makes the pass long enough to be killed in the middle.
    slow = dict(CLEANER, **{"log.cleaner.io.max.bytes.per.second": 1_000_000})
    b = make_broker(config=slow).start()
    topic = "compacted-crash"
    create_compacted(b.bootstrap, topic)
    latest = produce_keyed(b.bootstrap, topic)

    def in_flight():
        log = b.log()
        return log.count("compaction pass starting") > log.count("compaction pass done")

    wait_for(in_flight, 60, "a compaction pass in flight")
    time.sleep(0.3)
    assert in_flight(), "the pass is still running when killed"
    b.kill9()

    del b.config["log.cleaner.io.max.bytes.per.second"]  # restart unthrottled
    b.start()
    live = {k: v for k, v in latest.items() if v is not None}
    # Every key's latest value (and the tombstones) survive. The restarted cleaner may swap a
    # pass in while this reader is half-way (tombstones older than delete.retention.ms go with
    # it, as in Kafka, where a reader must finish within delete.retention.ms): such a read mixes
    # both states, so read again until it sees one of them whole — before that pass (`latest`)
    # or after it (`live`). Lost data would match neither.
    snapshots = []

    def consistent():
        seen, _ = read_all(b.bootstrap, topic)
        snapshots.append(seen)
        return seen == latest or seen == live

    try:
        wait_for(consistent, 60, "a consistent read after the restart")
    except AssertionError:
        last = snapshots[-1] if snapshots else {}
        wrong = {k: (last.get(k), v) for k, v in latest.items() if last.get(k) != v}
        raise AssertionError(f"data lost after kill -9 during compaction: {list(wrong.items())[:5]}")

    def compacted():
        seen, count = read_all(b.bootstrap, topic)
        return seen == live and count == len(live)

    wait_for(compacted, 90, "compaction to resume and finish after the restart")
    assert "compaction pass done" in b.log()


def test_consumer_offsets_stays_small_under_a_million_commits(make_broker):
    b = make_broker(config=dict(CLEANER, **{
        "offsets.topic.segment.bytes": 1 << 20,
    })).start()
    topic = "offsets-source"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 10, 1)])[topic].result(timeout=30)
    groups, partitions, rounds = 10, 10, 10_000  # 10 x 10 x 10,000 = 1,000,000 commits
    consumers = [Consumer({
        "bootstrap.servers": b.bootstrap,
        "group.id": f"commit-group-{g}",
        "enable.auto.commit": False,
    }) for g in range(groups)]
    t0 = time.time()
    for r in range(rounds):
        for c in consumers:
            # One OffsetCommit request carrying 10 partitions' offsets: 10 commits.
            c.commit(offsets=[TopicPartition(topic, p, r + 1) for p in range(partitions)],
                     asynchronous=True)
        if r % 100 == 0:
            for c in consumers:
                c.poll(0)
    for c in consumers:
        c.commit(offsets=[TopicPartition(topic, p, rounds) for p in range(partitions)],
                 asynchronous=False)
    elapsed = time.time() - t0
    written = groups * partitions * rounds
    # Each commit is a ~60-byte record: ~60 MB written. Compacted, each of the 8 partitions
    # holds its (preallocated, 1 MiB) active segment plus a few KiB of cleaned segments.
    limit = 8 * (2 << 20)
    size = wait_for(lambda: (lambda s: s if s < limit else None)(
        disk_bytes(b.data_dir, "__consumer_offsets")), 60, "__consumer_offsets to compact")
    print(f"\n__consumer_offsets: {written} commits in {elapsed:.1f} s "
          f"({written / elapsed:.0f}/s), on disk after compaction: {size} bytes")
    assert "consumer_offsets" in "".join(
        line for line in b.log().splitlines() if "compaction pass done" in line)
    for g, c in enumerate(consumers):
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        assert [tp.offset for tp in got] == [rounds] * partitions, f"group {g}"
        c.close()
    # The compacted offsets topic replays to the same offsets after a restart.
    b.stop()
    b.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "commit-group-3"})
    got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    assert [tp.offset for tp in got] == [rounds] * partitions
    c.close()
