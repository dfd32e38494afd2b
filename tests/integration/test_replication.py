"""#18, in progress: partition replication between three real nodes (followers pull from the
leader over the QUIC cluster link), behind `STRAND_REPLICATION_PREVIEW=1`.

- a topic with replication factor 3: Metadata lists three replicas and the ISR;
- followers copy the leader's log byte for byte (the batches in each node's segment files
  are identical, offsets and leader epochs included);
- the leader killed with kill -9: a follower leads (from the ISR) with every record that was
  replicated, takes new records, and the old leader, restarted, follows it and converges.
Not yet covered (not built yet): acks=all waiting for the ISR, the high watermark over the
ISR, ISR shrink and growth, divergent logs truncated in a live cluster (the storage and the
truncation rule have their own tests).
"""
import glob
import os
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

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
