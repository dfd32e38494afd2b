"""#17: three real `strand serve` processes as one cluster (metadata quorum over QUIC with
mutual TLS, development certificates from `strand cluster certs`), used by librdkafka.

- every node answers Metadata with the three brokers and the same controller;
- a topic created through one node has its partitions led by several nodes, seen alike from
  every node; records produced through any bootstrap node go to the leaders and read back;
- a node that does not lead a partition answers NOT_LEADER_OR_FOLLOWER, naming the leader
  (KIP-951);
- CreatePartitions and topic config changes go through the controller and every node sees
  them;
- consumer groups work: the coordinator is the leader of the group's offsets partition;
- a killed node (not the controller) is fenced (its partitions offline) while all other
  partitions keep serving, and after a restart it leads them again with a higher leader epoch
  and its records intact; batches carry their leader's epoch and OffsetForLeaderEpoch says
  where each epoch ended;
- a data directory of another cluster is refused at start-up;
- 5,000 topic creations and deletions through the quorum (several snapshots), then a restart
  of every node: the metadata image is identical everywhere (its digest).
Replication factor is 1 here: copying partitions between nodes is #18.
"""
import contextlib
import json
import os
import random
import socket
import subprocess
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewPartitions, NewTopic, ResourceType)

import kafka_raw
from conftest import BINARY, Broker, free_port, until

NODES = (1, 2, 3)


def free_for_both(port):
    """Whether `port` is free on 127.0.0.1 for UDP (the QUIC cluster endpoint) and TCP (its
    liveness tripwire listener)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u, socket.socket() as t:
            u.bind(("127.0.0.1", port))
            t.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False


def free_udp_port():
    """A cluster port free for UDP and TCP, below the kernel's ephemeral range (inside it an
    outgoing connection took a node's TCP twin once, and that node ran without a tripwire)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_from = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_from = 32768
    if ephemeral_from > 10100:
        for _ in range(1000):
            port = random.randint(10000, ephemeral_from - 1)
            if free_for_both(port):
                return port
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if free_for_both(port):
            return port
    raise AssertionError("no port free for both UDP and TCP")


class Cluster:
    def __init__(self, work, cluster_id="test-cluster", env=None, config=None, nodes=NODES,
                 cores=2):
        self.nodes = tuple(nodes)
        self.certs = os.path.join(work, "certs")
        subprocess.run([BINARY, "cluster", "certs", "--out", self.certs, "--nodes",
                        ",".join(str(n) for n in self.nodes)], check=True, capture_output=True)
        voters = ",".join(f"{n}@127.0.0.1:{free_udp_port()}" for n in self.nodes)
        self.brokers = {}
        for n in self.nodes:
            self.brokers[n] = Broker(os.path.join(work, f"node-{n}"), cores=cores, config={
                "node.id": n,
                "controller.quorum.voters": voters,
                "cluster.id": cluster_id,
                "cluster.tls.ca.location": os.path.join(self.certs, "ca.pem"),
                "cluster.tls.certificate.location": os.path.join(self.certs, f"node-{n}.pem"),
                "cluster.tls.key.location": os.path.join(self.certs, f"node-{n}.key"),
                "broker.session.timeout.ms": 3000,
                "broker.heartbeat.interval.ms": 500,
                "admin.listen": f"127.0.0.1:{free_port()}",
                **(config or {}),
            }, env=env)

    def start(self):
        for b in self.brokers.values():
            b.start()
        return self

    def stop(self):
        for b in self.brokers.values():
            b.stop()

    @contextlib.contextmanager
    def running(self, limit_s=90):
        """Started and formed (every node lists every broker and one controller) for the
        `with` block, stopped after it (also when starting fails part way)."""
        try:
            self.start()
            self.until(f"{len(self.nodes)} brokers registered, one controller", self.formed,
                       limit_s=limit_s)
            yield self
        finally:
            self.stop()

    def bootstrap(self, *nodes):
        return ",".join(self.brokers[n].bootstrap for n in (nodes or self.nodes))

    def metadata(self, node, topic=None, timeout=5):
        admin = AdminClient({"bootstrap.servers": self.brokers[node].bootstrap})
        return admin.list_topics(topic=topic, timeout=timeout)

    def until(self, what, pred, limit_s=30):
        return until(what, pred, limit_s, context=lambda: "\n".join(
            f"--- node {n}\n{b.log()[-3000:]}" for n, b in self.brokers.items()))

    def formed(self):
        """Every node lists all three brokers and names one controller."""
        controllers = set()
        for n in self.nodes:
            md = self.metadata(n)
            if sorted(md.brokers) != list(self.nodes) or md.controller_id not in self.nodes:
                return False
            controllers.add(md.controller_id)
        return len(controllers) == 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(str(tmp_path_factory.mktemp("cluster"))).running() as c:
        yield c


def leaders(md, topic):
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def create(cluster, node, topic, partitions):
    admin = AdminClient({"bootstrap.servers": cluster.brokers[node].bootstrap})
    fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                             operation_timeout=20)
    fs[topic].result(timeout=30)


def test_a_topic_created_anywhere_is_spread_and_seen_alike_everywhere(cluster):
    topic = "spread-" + uuid.uuid4().hex[:6]
    create(cluster, 2, topic, 6)
    # Read-your-writes on the node asked; the others follow within a moment.
    seen = {}
    for n in NODES:
        seen[n] = cluster.until(
            f"node {n} sees {topic}",
            lambda n=n: (lambda md: leaders(md, topic) if topic in md.topics
                         and len(md.topics[topic].partitions) == 6
                         and all(l in NODES for l in leaders(md, topic).values())
                         else None)(cluster.metadata(n, topic)))
    assert seen[1] == seen[2] == seen[3], seen
    assert len(set(seen[1].values())) >= 2, f"all partitions on one node: {seen[1]}"

    # librdkafka routes each record to its partition's leader, from any bootstrap node.
    p = Producer({"bootstrap.servers": cluster.bootstrap(1), "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5})
    sent = 600
    for i in range(sent):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), partition=i % 6)
    assert p.flush(30) == 0

    c = Consumer({"bootstrap.servers": cluster.bootstrap(3), "group.id": "g-" + topic,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(6)])
    got = set()
    end = time.time() + 30
    while len(got) < sent and time.time() < end:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.add(m.value())
    c.close()
    assert len(got) == sent, f"read {len(got)} of {sent}"

    # The node that does not lead a partition says so (clients then ask Metadata again).
    partition, leader = next(iter(seen[1].items()))
    other = next(n for n in NODES if n != leader)
    rec = kafka_raw.record(0, b"k", b"v")
    code = kafka_raw.produce(cluster.brokers[other].port, topic,
                             kafka_raw.batch(rec, 1, 0), partition=partition)
    assert code == 6, f"NOT_LEADER_OR_FOLLOWER expected from node {other}, got {code}"
    # KIP-951: Produce v10+ and Fetch v12+ name the current leader (and Produce how to reach
    # it), so clients go there without asking Metadata first.
    port = cluster.brokers[other].port
    code, current, nodes = kafka_raw.produce_v10_answer(kafka_raw.call(
        port, kafka_raw.produce_v10(topic, kafka_raw.batch(rec, 1, 0), partition=partition)))
    assert code == 6 and current == (leader, 0), (code, current)
    assert nodes == {leader: ("127.0.0.1", cluster.brokers[leader].port)}, nodes
    code, current = kafka_raw.fetch_v12_answer(
        kafka_raw.call(port, kafka_raw.fetch_v12(topic, partition)))
    assert code == 6 and current == (leader, 0), (code, current)


def test_partitions_added_and_configs_changed_through_the_controller(cluster):
    topic = "grow-" + uuid.uuid4().hex[:6]
    create(cluster, 1, topic, 3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(2)})
    fs = admin.create_partitions([NewPartitions(topic, 7)], operation_timeout=20)
    fs[topic].result(timeout=30)
    md = cluster.until("7 partitions, each led, seen from node 3", lambda: (lambda m: m if len(
        m.topics[topic].partitions) == 7 and all(p.leader in NODES for p in m.topics[
            topic].partitions.values()) else None)(cluster.metadata(3, topic)))
    assert len({p.leader for p in md.topics[topic].partitions.values()}) >= 2
    p = Producer({"bootstrap.servers": cluster.bootstrap(3), "acks": "all"})
    errors = []
    for q in range(7):
        p.produce(topic, value=f"p{q}".encode(), partition=q,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and not errors, errors
    c = Consumer({"bootstrap.servers": cluster.bootstrap(1), "group.id": "z",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, q, 0) for q in range(7)])
    got, end = set(), time.time() + 30
    while len(got) < 7 and time.time() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.add(m.partition())
    c.close()
    assert got == set(range(7)), got
    # Fewer partitions: refused with Kafka's error (INVALID_PARTITIONS).
    fs = admin.create_partitions([NewPartitions(topic, 2)], operation_timeout=20)
    with pytest.raises(KafkaException) as e:
        fs[topic].result(timeout=30)
    assert e.value.args[0].code() == KafkaError.INVALID_PARTITIONS, e.value

    # Topic configs: an incremental change through node 3 is seen by every node.
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    admin3 = AdminClient({"bootstrap.servers": cluster.bootstrap(3)})
    admin3.incremental_alter_configs([res])[res].result(timeout=30)
    described = ConfigResource(ResourceType.TOPIC, topic)
    for n in NODES:
        each = AdminClient({"bootstrap.servers": cluster.bootstrap(n)})  # alive until answered
        cluster.until(f"node {n} describes the new configs", lambda: (lambda d: d[
            "retention.ms"].value == "123456" and d["cleanup.policy"].value == "compact")(
                each.describe_configs([described])[described].result(timeout=10)))
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin3.incremental_alter_configs([res])[res].result(timeout=30)
    cluster.until("retention.ms back to its default", lambda: (lambda d: d[
        "retention.ms"].value == "604800000" and d["cleanup.policy"].value == "compact")(
            admin.describe_configs([described])[described].result(timeout=10)))


def test_a_consumer_group_commits_through_the_coordinating_node(cluster):
    topic = "grouped-" + uuid.uuid4().hex[:6]
    create(cluster, 1, topic, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap(2)})
    for i in range(90):
        p.produce(topic, value=f"g{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0
    group = "grp-" + topic
    c = Consumer({"bootstrap.servers": cluster.bootstrap(3), "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    end = time.time() + 40
    while got < 90 and time.time() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == 90, f"read {got} of 90 in the group"
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(topic, i) for i in range(3)], timeout=10)
    c.close()
    assert sum(tp.offset for tp in committed) == 90, committed


def test_a_killed_node_is_fenced_and_leads_again_after_a_restart(cluster):
    topic = "fence-" + uuid.uuid4().hex[:6]
    create(cluster, 1, topic, 6)
    md = cluster.until("leaders known", lambda: (lambda m: m if all(
        l in NODES for l in leaders(m, topic).values()) else None)(cluster.metadata(1, topic)))
    # A node that is not the active controller (that case is test_cluster_start's).
    victim = next(n for n in sorted(set(leaders(md, topic).values()), reverse=True)
                  if n != md.controller_id)
    theirs = sorted(p for p, l in leaders(md, topic).items() if l == victim)
    others = sorted(p for p, l in leaders(md, topic).items() if l != victim)
    p = Producer({"bootstrap.servers": cluster.bootstrap(1)})
    for part in theirs:
        for i in range(10):
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part)
    assert p.flush(30) == 0
    survivor = next(n for n in NODES if n != victim)

    cluster.brokers[victim].kill9()
    # Fenced after broker.session.timeout.ms: gone from the broker list, partitions offline.
    cluster.until(f"node {victim} fenced", lambda: (lambda m: victim not in m.brokers and all(
        m.topics[topic].partitions[q].leader == -1 for q in theirs))(
            cluster.metadata(survivor, topic)), limit_s=30)
    # All other partitions keep serving meanwhile: written (acks=all) and read back.
    p = Producer({"bootstrap.servers": cluster.bootstrap(survivor), "acks": "all"})
    for part in others:
        for i in range(10):
            p.produce(topic, value=f"during-{part}-{i}".encode(), partition=part)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap(survivor), "group.id": "y",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, q, 0) for q in others])
    during = set()
    end = time.time() + 30
    while len(during) < 10 * len(others) and time.time() < end:
        m = c.poll(0.5)
        if m is not None and not m.error() and m.value().startswith(b"during-"):
            during.add(m.value())
    c.close()
    assert len(during) == 10 * len(others), f"{len(during)} of {10 * len(others)} while down"

    cluster.brokers[victim].start()
    cluster.until(f"node {victim} leads again", lambda: (lambda m: victim in m.brokers and all(
        m.topics[topic].partitions[q].leader == victim for q in theirs))(
            cluster.metadata(survivor, topic)), limit_s=60)
    # The leader epoch moved on with the restart (KIP-320): a client still holding the old
    # one (0, from the topic's creation) is told FENCED_LEADER_EPOCH (74) by the leader; the
    # answer carries the new epoch.
    md_port = cluster.brokers[victim].port
    # The victim's own shards must serve the new view before they are asked.
    cluster.until(f"node {victim} sees itself lead again", lambda: all(
        cluster.metadata(victim, topic).topics[topic].partitions[q].leader == victim
        for q in theirs))
    for q in theirs:
        body = kafka_raw.call(md_port, kafka_raw.list_offsets_v4(topic, q, 0))
        assert kafka_raw.list_offsets_v4_answer(body)[0] == 74, (q, body)
        ok = None
        for epoch in range(1, 10):
            answer = kafka_raw.list_offsets_v4_answer(
                kafka_raw.call(md_port, kafka_raw.list_offsets_v4(topic, q, epoch)))
            if answer[0] == 0:
                ok = (epoch, answer)
                break
            assert answer[0] == 74, (q, epoch, answer)
        assert ok and ok[1][1] == 10 and ok[1][2] == ok[0], (q, ok)
        body = kafka_raw.call(md_port, kafka_raw.list_offsets_v4(topic, q, ok[0] + 1))
        assert kafka_raw.list_offsets_v4_answer(body)[0] == 75, "UNKNOWN_LEADER_EPOCH"
        # Batches carry the epoch of the leader that appended them, and OffsetForLeaderEpoch
        # (KIP-320) says where each epoch ended: epoch 0 at 10, where the new epoch starts.
        new_epoch = ok[0]
        p = Producer({"bootstrap.servers": cluster.brokers[victim].bootstrap, "acks": "all"})
        for i in range(5):
            p.produce(topic, value=f"after-{q}-{i}".encode(), partition=q)
        assert p.flush(30) == 0
        epochs = kafka_raw.fetch_v4_batch_epochs(
            kafka_raw.call(md_port, kafka_raw.fetch_v4(topic, [(q, 0, 1 << 20)])))
        assert epochs and all(e == (0 if b < 10 else new_epoch) for b, e in epochs), epochs
        assert any(b >= 10 for b, _ in epochs), epochs
        ask = lambda epoch, current=-1: kafka_raw.offset_for_leader_epoch_v3_answer(
            kafka_raw.call(md_port, kafka_raw.offset_for_leader_epoch_v3(topic, q, epoch,
                                                                         current)))
        assert ask(0) == (0, 0, 10), ask(0)
        assert ask(new_epoch - 1) == (0, 0, 10), ask(new_epoch - 1)
        assert ask(new_epoch, new_epoch) == (0, new_epoch, 15), ask(new_epoch, new_epoch)
        assert ask(new_epoch, 0)[0] == 74, "FENCED_LEADER_EPOCH"
        other = next(n for n in NODES if n != victim)
        body = kafka_raw.call(cluster.brokers[other].port,
                              kafka_raw.offset_for_leader_epoch_v3(topic, q, 0))
        assert kafka_raw.offset_for_leader_epoch_v3_answer(body)[0] == 6, "NOT_LEADER"
    c = Consumer({"bootstrap.servers": cluster.bootstrap(survivor), "group.id": "x",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, q, 0) for q in theirs])
    got = 0
    end = time.time() + 30
    while got < 15 * len(theirs) and time.time() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.close()
    assert got == 15 * len(theirs), f"read {got} of {15 * len(theirs)} after the restart"


def test_a_data_directory_of_another_cluster_is_refused(tmp_path, cluster):
    node = cluster.brokers[1]
    other = Broker(str(tmp_path / "copy"), cores=1, config={**node.config,
                                                            "cluster.id": "another-cluster"})
    os.makedirs(other.data_dir, exist_ok=True)
    with open(os.path.join(other.data_dir, "strand.meta"), "w") as f:
        f.write('format_version = 1\ncluster_id = "test-cluster"\n')
    with pytest.raises(RuntimeError, match="cluster.id"):
        other.start()


def test_cluster_settings_without_node_id_are_refused(tmp_path):
    b = Broker(str(tmp_path / "d"), cores=1, config={
        "controller.quorum.voters": "1@127.0.0.1:1"})
    with pytest.raises(RuntimeError, match="node.id"):
        b.start()


def status(cluster, n):
    addr = cluster.brokers[n].config["admin.listen"]
    with urllib.request.urlopen(f"http://{addr}/v1/cluster", timeout=5) as r:
        return json.load(r)


def equal_images(cluster):
    s = [status(cluster, n) for n in NODES]
    return s if len({x["image_digest"] for x in s}) == 1 and len(
        {x["applied_offset"] for x in s}) == 1 else None


def test_5000_topic_changes_then_a_restart_of_every_node_leave_equal_images(cluster):
    """Last in this file: it restarts every node."""
    names = [f"churn-{i}" for i in range(2550)]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1, 2, 3)})
    started = time.time()
    for i in range(0, len(names), 250):
        fs = admin.create_topics([NewTopic(n, 1, 1) for n in names[i:i + 250]],
                                 operation_timeout=60)
        for f in fs.values():
            f.result(timeout=120)
    kept = set(names[-100:])
    gone = names[:-100]
    for i in range(0, len(gone), 250):
        fs = admin.delete_topics(gone[i:i + 250], operation_timeout=60)
        for f in fs.values():
            f.result(timeout=120)
    print(f"{len(names)} creations and {len(gone)} deletions in {time.time() - started:.1f} s")
    before = cluster.until("equal images after the churn", lambda: equal_images(cluster))
    assert len(names) + len(gone) == 5000
    assert before[0]["commit_index"] > 5000, before[0]
    listed = set(admin.list_topics(timeout=10).topics)
    assert kept <= listed and not (set(gone) & listed)

    for b in cluster.brokers.values():
        b.stop()
    for b in cluster.brokers.values():
        b.start()
    # Equal, and past everything applied before (the brokers' new registrations come after,
    # so the digest differs from the one before the restart: compare nodes, not times).
    after = cluster.until(
        "equal images after restarting every node, all of the log applied",
        lambda: (lambda s: s if s and s[0]["applied_offset"] > before[0]["applied_offset"]
                 else None)(equal_images(cluster)), limit_s=60)
    # A node back within its old session's timeout is refused (DUPLICATE_BROKER_REGISTRATION)
    # until that session expires, then registers: all three serve again.
    cluster.until("three brokers registered again", cluster.formed, limit_s=30)
    print(f"after the restart: applied offset {after[0]['applied_offset']}, "
          f"digest {after[0]['image_digest']} on every node")
    # The same digests as `strand cluster info --json` prints them (each broker's, over
    # DescribeConfigs), all equal.
    def info():
        r = subprocess.run([BINARY, "cluster", "info", "--json", "--brokers",
                            cluster.bootstrap(1)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout)
    shown = cluster.until("cluster info --json: every broker live, digests equal", lambda: (
        lambda i: i if i["image_digests_equal"] and sorted(
            b["id"] for b in i["brokers"] if b["state"] == "live") == list(NODES) else None)(
                info()))
    print("strand cluster info --json:", sorted(
        (b["id"], b["image_digest"]) for b in shown["brokers"]))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(2)})
    listed = set(admin.list_topics(timeout=10).topics)
    assert kept <= listed and not (set(gone) & listed)
