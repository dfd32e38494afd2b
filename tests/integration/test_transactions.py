"""Transactions against a real strand process: read_committed vs read_uncommitted, the last
stable offset, timeouts, kill -9 with transactions open, Kafka's `kafka-transactions` tool and
its TransactionalMessageCopier under repeated kills of the copier and of the broker."""
import glob
import os
import random
import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIBS = os.environ.get("STRAND_JAVA_LIBS", os.path.join(ROOT, "target", "java-libs"))
CP = os.path.join(LIBS, "*")

needs_java = pytest.mark.skipif(
    shutil.which("java") is None or not glob.glob(os.path.join(LIBS, "kafka-tools-*.jar")),
    reason="java or the Kafka jars (scripts/test fetches them with Maven) are missing")


def tag():
    return uuid.uuid4().hex[:8]


def create(bootstrap, topic, partitions=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def read_all(bootstrap, topic, isolation, expect=None, idle_s=3.0, timeout_s=60):
    """Every value of `topic` a fresh consumer at `isolation` sees (until `expect` values or
    `idle_s` without a message)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "r-" + tag(),
                  "isolation.level": isolation, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    out, last, deadline = [], time.time(), time.time() + timeout_s
    while time.time() < deadline and time.time() - last < idle_s:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        out.append(m.value().decode())
        last = time.time()
        if expect is not None and len(out) >= expect:
            time.sleep(1.0)  # anything more would be a duplicate: give it a chance to show
            while (m := c.poll(0.5)) is not None:
                if not m.error():
                    out.append(m.value().decode())
            break
    c.close()
    return out


def txn_producer(bootstrap, tid, **extra):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **extra})
    p.init_transactions(30)
    return p


def test_read_committed_skips_aborted_records_read_uncommitted_sees_them(broker):
    topic = "txn-iso-" + tag()
    create(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, "iso-" + tag())
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"committed-{i}")
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"aborted-{i}")
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, "committed-5")
    p.commit_transaction(30)
    committed = read_all(broker.bootstrap, topic, "read_committed")
    assert committed == [f"committed-{i}" for i in range(6)]
    uncommitted = read_all(broker.bootstrap, topic, "read_uncommitted")
    assert sorted(uncommitted) == sorted([f"committed-{i}" for i in range(6)]
                                         + [f"aborted-{i}" for i in range(5)])


def test_open_transaction_holds_back_read_committed_until_commit(broker):
    topic = "txn-lso-" + tag()
    create(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, "lso-" + tag())
    p.begin_transaction()
    p.produce(topic, "in-txn")
    p.flush(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, "after-open-txn")
    assert plain.flush(30) == 0
    # The open transaction is the last stable offset: nothing at or after it is readable.
    assert read_all(broker.bootstrap, topic, "read_committed", idle_s=2) == []
    assert sorted(read_all(broker.bootstrap, topic, "read_uncommitted", idle_s=2)) == [
        "after-open-txn", "in-txn"]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "w-" + tag(),
                  "isolation.level": "read_committed"})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert (low, high) == (0, 0), "read_committed high watermark is the LSO"
    p.commit_transaction(30)
    assert read_all(broker.bootstrap, topic, "read_committed", expect=2) == [
        "in-txn", "after-open-txn"]


def test_transaction_timeout_aborts_and_fences_the_producer(broker):
    topic = "txn-timeout-" + tag()
    create(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, "timeout-" + tag(), **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(topic, "expires")
    p.flush(30)
    time.sleep(4.5)  # the coordinator's ticker aborts it (checked every second)
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, "later")
    assert plain.flush(30) == 0
    assert read_all(broker.bootstrap, topic, "read_committed", expect=1) == ["later"]


def test_transactions_survive_kill9(fresh_broker):
    b = fresh_broker.start()
    topic = "txn-crash-" + tag()
    create(b.bootstrap, topic)
    tid = "crash-" + tag()
    p = txn_producer(b.bootstrap, tid, **{"transaction.timeout.ms": 60000})
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"c{i}")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, "open-at-crash")
    p.flush(30)
    b.kill9()
    b.start()
    # Committed before the crash: visible. The open transaction still blocks what follows it.
    assert read_all(b.bootstrap, topic, "read_committed", idle_s=3) == [f"c{i}" for i in range(10)]
    # A new instance with the same transactional.id aborts the open transaction at init.
    p2 = txn_producer(b.bootstrap, tid)
    p2.begin_transaction()
    p2.produce(topic, "after-restart")
    p2.commit_transaction(30)
    got = read_all(b.bootstrap, topic, "read_committed", expect=11)
    assert got == [f"c{i}" for i in range(10)] + ["after-restart"]
    assert "open-at-crash" in read_all(b.bootstrap, topic, "read_uncommitted", expect=12)


def run_tool(bootstrap, *args):
    r = subprocess.run(["java", "-cp", CP, "org.apache.kafka.tools.TransactionsCommand",
                        "--bootstrap-server", bootstrap, *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


@needs_java
def test_kafka_transactions_tool_lists_describes_and_finds_hanging(broker):
    topic = "txn-tool-" + tag()
    create(broker.bootstrap, topic)
    tid = "tool-" + tag()
    p = txn_producer(broker.bootstrap, tid)
    p.begin_transaction()
    p.produce(topic, "open")
    p.flush(30)
    listed = run_tool(broker.bootstrap, "list")
    assert tid in listed and "Ongoing" in listed
    described = run_tool(broker.bootstrap, "describe", "--transactional-id", tid)
    assert "Ongoing" in described and f"{topic}-0" in described
    producers = run_tool(broker.bootstrap, "describe-producers", "--topic", topic,
                         "--partition", "0")
    # The open transaction starts at offset 0 of the partition.
    row = [l for l in producers.splitlines()[1:] if l.strip()]
    assert row and row[0].split()[-1] == "0", producers
    # Not hanging: its coordinator knows it (and it is younger than the timeout).
    hanging = run_tool(broker.bootstrap, "find-hanging", "--broker-id", "0")
    assert topic not in hanging
    p.commit_transaction(30)
    assert "CompleteCommit" in run_tool(broker.bootstrap, "describe", "--transactional-id", tid)


def copier(bootstrap, src, dst, partition, run_tag, log):
    return subprocess.Popen(
        ["java", "-Xmx256m", "-cp", CP, "org.apache.kafka.tools.TransactionalMessageCopier",
         "--broker-list", bootstrap, "--input-topic", src, "--input-partition", str(partition),
         "--output-topic", dst, "--consumer-group", f"copier-{run_tag}-{partition}",
         "--transactional-id", f"copier-{run_tag}-{partition}", "--transaction-size", "50",
         "--transaction-timeout", "10000", "--enable-random-aborts", "--use-group-metadata"],
        stdout=log, stderr=subprocess.STDOUT)


def copy_with_kills(bootstrap, log_dir, create_topic, kill, n=10_000, partitions=2, kills=4):
    """Copies `n` messages with one TransactionalMessageCopier per input partition while
    `kill(procs, run_tag)` kills (SIGKILL) the copiers, or brokers, `kills` times; copiers
    that die are restarted until each has copied its whole partition. `create_topic(name,
    partitions)` makes the input and output topics."""
    run_tag = tag()
    src, dst = f"copy-in-{run_tag}", f"copy-out-{run_tag}"
    create_topic(src, partitions)
    create_topic(dst, partitions)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(n):
        p.produce(src, str(i), partition=i % partitions)
    assert p.flush(60) == 0
    log = open(os.path.join(log_dir, f"copier-{run_tag}.log"), "ab")
    procs = {q: copier(bootstrap, src, dst, q, run_tag, log) for q in range(partitions)}
    done, kills_left, rng = set(), kills, random.Random(run_tag)
    deadline = time.time() + 400
    next_kill = time.time() + rng.uniform(1.0, 2.0)
    while len(done) < partitions and time.time() < deadline:
        time.sleep(0.2)
        for q, proc in list(procs.items()):
            if q in done or proc.poll() is None:
                continue
            if proc.returncode == 0:
                done.add(q)
            else:  # died (killed, or gave up while a broker was down): start it again
                procs[q] = copier(bootstrap, src, dst, q, run_tag, log)
        if kills_left and time.time() >= next_kill and len(done) < partitions:
            kills_left -= 1
            kill({q: proc for q, proc in procs.items() if q not in done}, run_tag)
            next_kill = time.time() + rng.uniform(1.0, 2.5)
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
    assert len(done) == partitions, f"copiers did not finish (done {sorted(done)})"
    assert kills - kills_left >= 2, "the copy finished before two kills: nothing was tested"
    out = read_all(bootstrap, dst, "read_committed", expect=n, idle_s=5, timeout_s=120)
    assert len(out) == len(set(out)), f"duplicates: {len(out) - len(set(out))}"
    assert sorted(out, key=int) == [str(i) for i in range(n)], (
        f"missing {n - len(set(out))}, extra {len(set(out) - {str(i) for i in range(n)})}")
    log.close()
    return log.name


def kill_copiers(procs, _run_tag):
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@needs_java
def test_transactional_message_copier_survives_copier_kills(fresh_broker):
    b = fresh_broker.start()
    copy_with_kills(b.bootstrap, os.path.dirname(b.log_path),
                    lambda name, count: create(b.bootstrap, name, count), kill_copiers)


@needs_java
def test_transactional_message_copier_survives_broker_kills(fresh_broker):
    b = fresh_broker.start()

    def kill_broker(_procs, _run_tag):
        b.kill9()
        time.sleep(0.5)
        b.start()

    copy_with_kills(b.bootstrap, os.path.dirname(b.log_path),
                    lambda name, count: create(b.bootstrap, name, count), kill_broker, kills=3)


def test_aborted_index_survives_restarts_across_many_segments(make_broker):
    """Aborted transactions spread over many rolled segments: their `.txnindex` files (and the
    scan of the active segment) let read_committed skip them after a clean stop and after a
    kill -9."""
    b = make_broker(config={"log.segment.bytes": 16384}).start()
    topic = "txn-segs-" + tag()
    create(b.bootstrap, topic)
    tid = "segs-" + tag()
    p = txn_producer(b.bootstrap, tid)
    expected = []
    for t in range(30):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, f"t{t}-{i}-" + "x" * 300)
        if t % 3 == 1:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            expected += [f"t{t}-{i}-" + "x" * 300 for i in range(10)]
    p.begin_transaction()
    p.produce(topic, "left-open")
    p.flush(30)
    part_dir = os.path.join(b.data_dir, f"{topic}-0")
    assert len(glob.glob(os.path.join(part_dir, "*.txnindex"))) >= 3
    for restart in (b.stop, b.kill9):
        restart()
        b.start()
        got = read_all(b.bootstrap, topic, "read_committed", idle_s=3)
        assert got == expected, f"after {restart.__name__}: {len(got)} vs {len(expected)}"
    # The transaction left open survived the restarts; a new instance of the producer aborts
    # it when it initialises, and what follows becomes readable.
    p2 = txn_producer(b.bootstrap, tid)
    p2.begin_transaction()
    p2.produce(topic, "after")
    p2.commit_transaction(30)
    assert read_all(b.bootstrap, topic, "read_committed", expect=len(expected) + 1) == (
        expected + ["after"])


def test_delete_records_moves_the_log_start_and_survives_restart(fresh_broker):
    from confluent_kafka.admin import AdminClient
    b = fresh_broker.start()
    topic = "delrec-" + tag()
    create(b.bootstrap, topic)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(20):
        p.produce(topic, str(i))
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    fut = admin.delete_records([TopicPartition(topic, 0, 12)])
    res = fut[TopicPartition(topic, 0, 12)].result(30) if isinstance(fut, dict) else fut.result(30)
    assert read_all(b.bootstrap, topic, "read_uncommitted", expect=8) == [str(i) for i in range(12, 20)]
    b.kill9()
    b.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "lw-" + tag()})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert (low, high) == (12, 20), res


def test_commit_latency_benchmark_prints_percentiles(broker):
    """scripts/bench-txn (short run): a row per transaction size with p50 <= p99."""
    import sys
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench-txn"),
                        "--bootstrap", broker.bootstrap, "--small", "30", "--large", "5",
                        "--warmup", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [l.split() for l in r.stdout.splitlines() if l.startswith("broker ")
            and l.split()[1].isdigit()]
    assert [int(row[1]) for row in rows] == [1, 100], r.stdout
    for row in rows:
        p50, p99 = float(row[3]), float(row[4])
        assert 0 < p50 <= p99, r.stdout


def test_compaction_removes_aborted_data_and_compacts_committed_transactions(make_broker):
    """A compacted topic written by a transactional producer: committed transactions are
    compacted by key like any other data, aborted transactions' records are removed (even a
    read_uncommitted reader no longer sees them), markers stay, offsets only grow."""
    b = make_broker(config={"log.cleaner.backoff.ms": 200,
                            "log.retention.check.interval.ms": 200}).start()
    topic = "txn-compact-" + tag()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": str(64 * 1024), "segment.ms": "500",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(30)
    p = txn_producer(b.bootstrap, "compact-" + tag())
    latest = {}
    for t in range(60):
        p.begin_transaction()
        for k in range(20):
            value = f"t{t}-k{k}-" + "x" * 100
            p.produce(topic, key=f"k{k}", value=value)
            if t % 4 != 3:
                latest[f"k{k}"] = value
        if t % 4 == 3:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    part_dir = os.path.join(b.data_dir, f"{topic}-0")
    size = lambda: sum(os.path.getsize(os.path.join(part_dir, f))
                       for f in os.listdir(part_dir) if f.endswith(".log"))
    before, deadline = size(), time.time() + 60
    seen = []
    while time.time() < deadline:
        time.sleep(1)
        seen = read_all(b.bootstrap, topic, "read_uncommitted", idle_s=2)
        if len(seen) <= 2 * len(latest):
            break
    assert not any(v.startswith(f"t{t}-") for v in seen for t in range(3, 60, 4)), \
        "aborted records are still served after compaction"
    committed = read_all(b.bootstrap, topic, "read_committed", idle_s=2)
    by_key = {}
    for v in committed:
        by_key[v.split("-")[1]] = v
    assert by_key == {k: v for k, v in latest.items()}
    print(f"compacted transactional topic: {before} -> {size()} bytes of .log, "
          f"{len(seen)} records left of {60 * 20}")
