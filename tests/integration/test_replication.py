"""#18, in progress: partition replication between three real nodes (followers pull from the
leader over the QUIC cluster link), behind `STRAND_REPLICATION_PREVIEW=1`.

- a topic with replication factor 3: Metadata lists three replicas and the ISR;
- followers copy the leader's log byte for byte (the batches in each node's segment files
  are identical, offsets and leader epochs included);
- the leader killed with kill -9: a follower leads (from the ISR) with every record that was
  replicated, takes new records, and the old leader, restarted, follows it and converges;
- acks=all is answered once the ISR has the batch; min.insync.replicas refuses acks=all
  (NOT_ENOUGH_REPLICAS) while a follower is out of the ISR, acks=1 goes on; the follower,
  restarted, is added back through AlterPartition.
Not yet covered: ISR shrink by lag (`replica.lag.time.max.ms`, 30 s), divergent logs
truncated in a live cluster (the storage and the truncation rule have their own tests).
"""
import glob
import os
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_raw
from test_cluster import NODES, Cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(str(tmp_path_factory.mktemp("replicated")), cluster_id="replicated",
                env={"STRAND_REPLICATION_PREVIEW": "1"}).start()
    try:
        c.until("three brokers registered, one controller", c.formed, limit_s=60)
        yield c
    finally:
        c.stop()


def batches(node_dir, topic, partition):
    """The record batches in a node's segment files of `topic`-`partition`, in order, as
    bytes (the zero-filled tail of the active segment ends a file's batches)."""
    out = []
    for path in sorted(glob.glob(os.path.join(node_dir, f"{topic}-{partition}", "*.log"))):
        data = open(path, "rb").read()
        at = 0
        while at + 12 <= len(data):
            (length,) = struct.unpack(">i", data[at + 8:at + 12])
            if length <= 0 or at + 12 + length > len(data):
                break
            out.append(data[at:at + 12 + length])
            at += 12 + length
    return out


def partition_md(cluster, node, topic, partition):
    return cluster.metadata(node, topic).topics[topic].partitions[partition]


def read_all(bootstrap, topic, partition, count, limit_s=30):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "r-" + uuid.uuid4().hex[:6],
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    got = []
    end = time.time() + limit_s
    while len(got) < count and time.time() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.offset(), m.value()))
    c.close()
    return got


def test_followers_copy_the_leader_and_take_over_after_a_kill(cluster):
    topic = "rep-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)],
                        operation_timeout=20)[topic].result(timeout=30)
    md = cluster.until("leaders elected", lambda: (lambda m: m if all(
        p.leader in NODES for p in m.topics[topic].partitions.values()) else None)(
            cluster.metadata(1, topic)))
    for p in md.topics[topic].partitions.values():
        assert sorted(p.replicas) == list(NODES), p.replicas
        assert sorted(p.isrs) == list(NODES), p.isrs

    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5})
    for i in range(600):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0

    def alike(part):
        logs = [batches(cluster.brokers[n].data_dir, topic, part) for n in NODES]
        return logs[0] and all(log == logs[0] for log in logs) and logs
    for part in range(3):
        logs = cluster.until(f"partition {part} the same on every node", lambda: alike(part))
        assert sum(1 for _ in logs[0]) >= 1
        # Offsets and leader epochs as the leader wrote them (epoch 0: the first leader).
        assert all(struct.unpack(">i", b[12:16])[0] == 0 for b in logs[0])

    leader = partition_md(cluster, 1, topic, 0).leader
    survivor = next(n for n in NODES if n != leader)
    cluster.brokers[leader].kill9()
    new = cluster.until("a follower leads partition 0", lambda: (lambda q: q if q.leader not in (
        -1, leader) else None)(partition_md(cluster, survivor, topic, 0)), limit_s=60)
    assert new.leader in NODES and new.leader != leader
    got = read_all(cluster.brokers[new.leader].bootstrap, topic, 0, 200)
    assert [v for _, v in got] == [f"v{i}".encode() for i in range(0, 600, 3)], got[:5]
    p = Producer({"bootstrap.servers": cluster.bootstrap(new.leader), "acks": "all"})
    for i in range(50):
        p.produce(topic, value=f"after-{i}".encode(), partition=0)
    assert p.flush(30) == 0

    cluster.brokers[leader].start()
    logs = cluster.until("the restarted node follows the new leader and converges",
                         lambda: alike(0), limit_s=60)
    epochs = [struct.unpack(">i", b[12:16])[0] for b in logs[0]]
    assert epochs[0] == 0 and epochs[-1] > 0, epochs


def one_record(value):
    return kafka_raw.batch(kafka_raw.record(0, b"k", value), 1, 0)


def test_acks_all_waits_for_the_isr_and_min_insync_replicas_holds(cluster):
    """The high watermark is the lowest log end over the ISR: a consumer sees a record only
    once every in-sync replica has it. A follower killed leaves the ISR when it is fenced;
    with min.insync.replicas=3 an acks=all produce is then NOT_ENOUGH_REPLICAS (19) while
    acks=1 still succeeds; restarted, the follower catches up and the leader asks the
    controller to add it back (AlterPartition): the ISR is 3 again and acks=all succeeds."""
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = "isr-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "3"})],
                        operation_timeout=20)[topic].result(timeout=30)
    part = cluster.until("a leader and a full ISR", lambda: (lambda q: q if q.leader in NODES
                         and len(q.isrs) == 3 else None)(partition_md(cluster, 1, topic, 0)),
                         limit_s=60)
    leader = part.leader
    port = cluster.brokers[leader].port
    assert kafka_raw.produce(port, topic, one_record(b"first")) == 0
    got = read_all(cluster.brokers[leader].bootstrap, topic, 0, 1)
    assert [v for _, v in got] == [b"first"], got

    follower = next(n for n in NODES if n != leader)
    cluster.brokers[follower].kill9()
    cluster.until(f"node {follower} out of the ISR", lambda: sorted(
        partition_md(cluster, leader, topic, 0).isrs) == sorted(
            n for n in NODES if n != follower), limit_s=60)
    assert kafka_raw.produce(port, topic, one_record(b"refused")) == 19, "NOT_ENOUGH_REPLICAS"
    ok = kafka_raw.call(port, kafka_raw.produce_v3(topic, one_record(b"acks-1"), acks=1))
    assert kafka_raw.produce_error(ok) == 0

    cluster.brokers[follower].start()
    cluster.until(f"node {follower} back in the ISR", lambda: sorted(
        partition_md(cluster, leader, topic, 0).isrs) == list(NODES), limit_s=60)
    assert kafka_raw.produce(port, topic, one_record(b"last")) == 0
    got = read_all(cluster.brokers[leader].bootstrap, topic, 0, 3)
    assert [v for _, v in got] == [b"first", b"acks-1", b"last"], got
