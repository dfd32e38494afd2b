"""#18 step 7 (preview): the group and transaction coordinators follow the leadership of their
internal partitions.

Three nodes: `__consumer_offsets` and
`__transaction_state` are created with three replicas (`offsets.topic.replication.factor`,
`transaction.state.log.replication.factor`) and `__transaction_state` with
`min.insync.replicas=2` (`transaction.state.log.min.isr`). The node coordinating a group or a
transactional id is killed with kill -9; the node that leads its internal partition next loads
the state from its copy of the log and coordinates:
- offsets committed before the kill are still committed, and the group carries on from them;
- a transaction left open by the kill is aborted by the next coordinator when the producer's
  successor (same `transactional.id`) initialises, and a read_committed consumer reads the
  committed transactions only, in order;
- Kafka's TransactionalMessageCopier (random aborts) copies while the node coordinating a
  copier's transactions, the one coordinating its consumer group and the leader of an output
  partition are killed in turn: read_committed output is exactly the input.
Before coordinators moved, both waited until the killed node came back.
"""
import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from test_cluster import NODES, Cluster
from test_transactions import copy_with_kills, needs_java

SESSION_MS = 1000
INTERNAL_PARTITIONS = 8  # internal_topics::OFFSETS_PARTITIONS / TXN_PARTITIONS


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(str(tmp_path_factory.mktemp("coordinators")), cluster_id="coordinators",
                 config={"broker.session.timeout.ms": SESSION_MS,
                         "broker.heartbeat.interval.ms": SESSION_MS // 4}).running() as c:
        yield c


def internal_partition(key):
    """`internal_topics::internal_partition`: FNV-1a of the key modulo the partition count."""
    h = 0x811C9DC5
    for b in key.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h % INTERNAL_PARTITIONS


def replicated(cluster, node, topic, partition):
    """The partition's metadata from `node` when it has a leader and three in-sync replicas."""
    md = cluster.metadata(node, topic)
    p = md.topics[topic].partitions.get(partition) if topic in md.topics else None
    return p if p is not None and p.leader in NODES and len(p.isrs) == 3 else None


def create_topic(cluster, topic, partitions=1):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                  config={"min.insync.replicas": "2"})],
                        operation_timeout=20)[topic].result(timeout=30)
    for p in range(partitions):
        cluster.until("the topic's ISR full", lambda: replicated(cluster, 1, topic, p),
                      limit_s=60)


def everything_back(cluster, victim, internal):
    cluster.brokers[victim].start()
    cluster.until("the internal partition's ISR full again",
                  lambda: replicated(cluster, victim, internal[0], internal[1]), limit_s=90)


def test_committed_offsets_survive_the_group_coordinators_kill(cluster):
    topic, group = "cof-" + uuid.uuid4().hex[:6], "cog-" + uuid.uuid4().hex[:6]
    create_topic(cluster, topic)
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
    for i in range(100):
        p.produce(topic, value=f"v-{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    read = 0
    deadline = time.time() + 60
    while read < 40 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            read += 1
    assert read == 40
    c.commit(offsets=[TopicPartition(topic, 0, 40)], asynchronous=False)
    c.close()

    internal = ("__consumer_offsets", internal_partition(group))
    md = cluster.until("the group's offsets partition with three in-sync replicas",
                       lambda: replicated(cluster, 1, *internal), limit_s=60)
    victim = md.leader
    survivors = [n for n in NODES if n != victim]
    killed_at = time.monotonic()
    cluster.brokers[victim].kill9()
    try:
        c2 = Consumer({"bootstrap.servers": cluster.bootstrap(*survivors), "group.id": group,
                       "enable.auto.commit": False, "auto.offset.reset": "latest"})

        def committed():
            try:
                got = c2.committed([TopicPartition(topic, 0)], timeout=2)
            except Exception:  # noqa: BLE001 - coordinator moving: retriable errors
                return None
            return got[0].offset if got and got[0].offset >= 0 else None

        offset = cluster.until("the committed offset from the next coordinator", committed,
                               limit_s=60)
        took = time.monotonic() - killed_at
        print(f"group coordinator on node {victim} killed: its committed offset read back "
              f"from the next one after {took:.2f} s")
        assert offset == 40
        # The group carries on from there ("latest" would skip everything if it were lost).
        c2.subscribe([topic])
        first = None
        deadline = time.time() + 60
        while first is None and time.time() < deadline:
            m = c2.poll(0.5)
            if m is not None and not m.error():
                first = m
        assert first is not None and first.offset() == 40, first
        c2.commit(offsets=[TopicPartition(topic, 0, 41)], asynchronous=False)
        c2.close()
    finally:
        everything_back(cluster, victim, internal)
    # The restarted node follows: the commit made while it was down is there everywhere.
    c3 = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group,
                   "enable.auto.commit": False})
    assert c3.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 41
    c3.close()


def test_an_open_transaction_is_aborted_by_the_next_coordinator(cluster):
    topic, tid = "cot-" + uuid.uuid4().hex[:6], "cotx-" + uuid.uuid4().hex[:6]
    create_topic(cluster, topic)
    internal = ("__transaction_state", internal_partition(tid))
    cluster.until("the id's transaction-state partition with three in-sync replicas",
                  lambda: replicated(cluster, 1, *internal), limit_s=60)
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"a-{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"b-{i}".encode())
    assert p.flush(30) == 0  # in the log, transaction open

    victim = cluster.until("the id's coordinator",
                           lambda: replicated(cluster, 1, *internal)).leader
    survivors = [n for n in NODES if n != victim]
    killed_at = time.monotonic()
    cluster.brokers[victim].kill9()
    try:
        p2 = Producer({"bootstrap.servers": cluster.bootstrap(*survivors),
                       "transactional.id": tid})
        # Fences the first producer; the next coordinator aborts its open transaction.
        p2.init_transactions(60)
        took = time.monotonic() - killed_at
        print(f"transaction coordinator on node {victim} killed: the successor initialised "
              f"after {took:.2f} s")
        p2.begin_transaction()
        for i in range(10):
            p2.produce(topic, value=f"c-{i}".encode())
        p2.commit_transaction(60)

        c = Consumer({"bootstrap.servers": cluster.bootstrap(*survivors),
                      "group.id": "cot-reader-" + uuid.uuid4().hex[:6],
                      "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        values = []
        deadline = time.time() + 60
        while len(values) < 20 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                values.append(m.value().decode())
        c.close()
        want = [f"a-{i}" for i in range(10)] + [f"c-{i}" for i in range(10)]
        assert values == want, values
    finally:
        everything_back(cluster, victim, internal)


@needs_java
def test_transactional_message_copier_across_coordinator_and_leader_kills(cluster):
    kills = []

    def kill(_procs, run_tag):
        """In turn: the node coordinating copier 0's transactions, the one coordinating its
        group, the leader of output partition 0; each restarted after a second."""
        topic, partition = [
            ("__transaction_state", internal_partition(f"copier-{run_tag}-0")),
            ("__consumer_offsets", internal_partition(f"copier-{run_tag}-0")),
            (f"copy-out-{run_tag}", 0),
        ][len(kills) % 3]
        # Asked of a node that was not just restarted (it may not have caught up yet).
        asker = next(n for n in NODES if not kills or n != kills[-1][2])
        md = cluster.until(f"{topic}-{partition} with three in-sync replicas",
                           lambda: replicated(cluster, asker, topic, partition), limit_s=90)
        cluster.brokers[md.leader].kill9()
        kills.append((topic, partition, md.leader))
        time.sleep(1.0)
        cluster.brokers[md.leader].start()

    log = copy_with_kills(cluster.bootstrap(), os.path.dirname(cluster.brokers[1].log_path),
                          lambda name, count: create_topic(cluster, name, count), kill,
                          n=20_000, kills=3)
    print("killed (partition, node): " + ", ".join(f"{t}-{p} on {n}" for t, p, n in kills))
    # Copiers may die while a node is down (they are restarted), but never on an error code
    # the Java client cannot handle (it would be a wrong answer from a coordinator).
    with open(log, errors="replace") as f:
        unhandled = [line for line in f if "Unhandled error" in line]
    assert not unhandled, unhandled[:3]
