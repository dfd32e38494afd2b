"""#18: partition replication between three real nodes (followers pull from the leader over
the QUIC cluster link; on by default in a cluster since session 20).

- a topic with replication factor 3: Metadata lists three replicas and the ISR;
- followers copy the leader's log byte for byte (the batches in each node's segment files
  are identical, offsets and leader epochs included);
- the leader killed with kill -9: a follower leads (from the ISR) with every record that was
  replicated, takes new records, and the old leader, restarted, follows it and converges;
- acks=all is answered once the ISR has the batch; min.insync.replicas refuses acks=all
  (NOT_ENOUGH_REPLICAS) while a follower is out of the ISR, acks=1 goes on; the follower,
  restarted, is added back through AlterPartition.
- a follower paused (SIGSTOP) longer than `replica.lag.time.max.ms` leaves the ISR and
  acks=all latency recovers while it is out; resumed, it catches up and rejoins;
- a follower that was out while the leader's log start moved past its log end (DeleteRecords)
  starts again at the leader's log start and rejoins the ISR;
- `strand topic describe` and Kafka's `kafka-topics --describe` show leader, replicas and ISR;
  `kafka-topics --describe --under-replicated-partitions` lists a partition with a replica out;
- divergence: a leader that appended records its followers never got (acks=1 while they
  were paused), then was killed, truncates them when it comes back: the data on every disk
  and what consumers read are the new leader's.
- a node restarted with fewer cores, then leading: its followers ask the shard that holds
  each partition now, and acks=all with a full ISR goes on.
- a leader stopped with SIGTERM (controlled shutdown): another node leads at once (not at
  session expiry), acks=all goes on, and the node restarted at once registers again.
- DeleteRecords moves the caught-up followers' log start too: after a failover the deleted
  records stay deleted.
- a node that was down while a topic was deleted removes that topic's partition directories
  when it comes back, and a partition directory of a topic no view names any more (Kafka's
  stray log) is removed once the node has caught up; its other partitions stay.
"""
import glob
import json
import os
import shutil
import signal
import struct
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_raw
from conftest import BINARY
from test_cluster import NODES, Cluster
from test_metrics import CLUSTER_ONLY, dashboard_series, described, scrape, total

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
JAVA_LIBS = os.environ.get("STRAND_JAVA_LIBS", os.path.join(ROOT, "target", "java-libs"))


# Short, so a paused follower leaves the ISR within the test (Kafka's default is 30 s); well
# below the session timeout, so lag, not fencing, removes it; above the time the divergence
# test keeps two followers paused (or the old leader shrinks its ISR to itself meanwhile).
LAG_MS = 3000
SESSION_MS = 6000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(str(tmp_path_factory.mktemp("replicated")), cluster_id="replicated",
                 config={"replica.lag.time.max.ms": LAG_MS,
                         "broker.session.timeout.ms": SESSION_MS}).running() as c:
        yield c


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
    md = cluster.until("leaders elected", lambda: (lambda m: m if len(
        m.topics[topic].partitions) == 3 and all(
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
    assert kafka_raw.produce_led(port, topic, one_record(b"first")) == 0
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
    assert kafka_raw.produce_led(port, topic, one_record(b"last")) == 0
    got = read_all(cluster.brokers[leader].bootstrap, topic, 0, 3)
    assert [v for _, v in got] == [b"first", b"acks-1", b"last"], got


def create_replicated(cluster, topic, partitions=1, config=None):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                  config=config or {})],
                        operation_timeout=20)[topic].result(timeout=30)
    # Node 1 may not know the topic yet (no partitions): `all` of nothing must not pass.
    return cluster.until("leaders and full ISRs", lambda: (lambda m: m if len(
        m.topics[topic].partitions) == partitions and all(
        p.leader in NODES and len(p.isrs) == 3 for p in m.topics[topic].partitions.values())
        else None)(cluster.metadata(1, topic)), limit_s=60)


def pause(cluster, node):
    cluster.brokers[node].proc.send_signal(signal.SIGSTOP)


def resume(cluster, node):
    cluster.brokers[node].proc.send_signal(signal.SIGCONT)


def scrape_node(cluster, node):
    host, port = cluster.brokers[node].config["admin.listen"].split(":")
    return scrape(int(port))[0]


def timed_produce(port, topic, value):
    started = time.monotonic()
    code = kafka_raw.produce(port, topic, one_record(value))
    return code, time.monotonic() - started


def test_a_paused_follower_leaves_the_isr_and_rejoins_after_it_resumes(cluster):
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = "lag-" + uuid.uuid4().hex[:6]
    md = create_replicated(cluster, topic, config={"min.insync.replicas": "2"})
    leader = md.topics[topic].partitions[0].leader
    controller = md.controller_id
    # A follower that is not the controller: the quorum keeps its leader meanwhile.
    follower = next(n for n in NODES if n not in (leader, controller))
    port = cluster.brokers[leader].port
    assert kafka_raw.produce_led(port, topic, one_record(b"before")) == 0

    pause(cluster, follower)
    try:
        # acks=all waits for the paused follower until the leader drops it from the ISR
        # (REQUEST_TIMED_OUT is not expected: the request's timeout is 10 s).
        code, stalled_s = timed_produce(port, topic, b"while-shrinking")
        assert code == 0, code
        cluster.until(f"node {follower} out of the ISR", lambda: sorted(
            partition_md(cluster, leader, topic, 0).isrs) == sorted(
                n for n in NODES if n != follower), limit_s=30)
        latencies = []
        for i in range(20):
            code, took = timed_produce(port, topic, f"out-{i}".encode())
            assert code == 0, code
            latencies.append(took)
        # The leader's lag rule removed it (not the controller's fencing: the session
        # timeout is longer).
        assert f"asking the controller for an ISR change topic={topic} partition=0 isr=" in \
            cluster.brokers[leader].log()
        print(f"acks=all: {stalled_s:.2f} s while the ISR shrank, then max "
              f"{max(latencies) * 1000:.1f} ms over 20 requests with the follower out")
        assert max(latencies) < 1.0, latencies
        # The leader's metrics (#20) show it: ISR 2 of 3 replicas, under-replicated, and the
        # paused follower behind by at least the 20 records produced since it left.
        out = scrape_node(cluster, leader)
        lbl = frozenset({("topic", topic), ("partition", "0")})
        assert (out[("strand_partition_replicas", lbl)],
                out[("strand_partition_isr_size", lbl)]) == (3, 2)
        assert total(out, "strand_under_replicated_partitions") >= 1
        assert out[("strand_partition_replication_lag_records",
                    lbl | {("replica", str(follower))})] >= 20
        assert total(out, "strand_under_min_isr_partitions") == 0, "2 in sync, 2 wanted"
    finally:
        resume(cluster, follower)
    cluster.until(f"node {follower} back in the ISR", lambda: sorted(
        partition_md(cluster, leader, topic, 0).isrs) == list(NODES), limit_s=60)
    back = cluster.until("the leader's metrics show the ISR whole", lambda: (
        lambda m: m if m[("strand_partition_isr_size", lbl)] == 3 else None)(
            scrape_node(cluster, leader)))
    assert total(back, "strand_partition_replication_lag_records", topic=topic) == 0
    everyone = [scrape_node(cluster, n) for n in NODES]
    assert sum(total(m, "strand_controller_active") for m in everyone) == 1
    assert {total(m, "strand_controller_id") for m in everyone} == {controller}
    assert all(total(m, "strand_offline_partitions") == 0 for m in everyone)
    assert all(total(m, "strand_metadata_caught_up") == 1 for m in everyone)
    admin_port = int(cluster.brokers[leader].config["admin.listen"].split(":")[1])
    missing = dashboard_series() - described(admin_port)
    assert not missing and CLUSTER_ONLY <= dashboard_series(), sorted(missing)
    assert kafka_raw.produce_led(port, topic, one_record(b"after")) == 0
    logs = cluster.until("the resumed follower holds the leader's log", lambda: (lambda ls: ls if all(
        x == ls[0] for x in ls) else None)([batches(cluster.brokers[n].data_dir, topic, 0)
                                            for n in NODES]))
    assert len(logs[0]) == 23, len(logs[0])


def test_a_deposed_leader_truncates_what_its_followers_never_got(cluster):
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = "div-" + uuid.uuid4().hex[:6]
    md = create_replicated(cluster, topic, config={"min.insync.replicas": "2"})
    old = md.topics[topic].partitions[0].leader
    followers = [n for n in NODES if n != old]
    port = cluster.brokers[old].port
    for i in range(5):
        assert kafka_raw.produce_led(port, topic, one_record(f"kept-{i}".encode())) == 0
    cluster.until("every replica holds the first records", lambda: all(
        len(batches(cluster.brokers[n].data_dir, topic, 0)) == 5 for n in NODES))

    # Both followers paused: the old leader appends with acks=1 what they never get (the
    # metadata quorum has no majority meanwhile, so nothing else changes), then dies.
    for n in followers:
        pause(cluster, n)
    try:
        for i in range(4):
            ok = kafka_raw.call(port, kafka_raw.produce_v3(
                topic, one_record(f"lost-{i}".encode()), acks=1))
            assert kafka_raw.produce_error(ok) == 0
        cluster.until("the unreplicated records on the old leader's disk", lambda: len(
            batches(cluster.brokers[old].data_dir, topic, 0)) == 9, limit_s=10)
        cluster.brokers[old].kill9()
    finally:
        for n in followers:
            resume(cluster, n)
    new = cluster.until("a follower leads", lambda: (lambda q: q if q.leader in followers
                        else None)(partition_md(cluster, followers[0], topic, 0)), limit_s=60)
    new_port = cluster.brokers[new.leader].port
    for i in range(6):
        assert kafka_raw.produce_led(new_port, topic, one_record(f"new-{i}".encode())) == 0
    # (A follower's fetch parked at the old leader may have been answered with the first
    # unreplicated record before the pause took hold: that record is then the new leader's too.)
    truth = batches(cluster.brokers[new.leader].data_dir, topic, 0)
    diverged = [b for b in batches(cluster.brokers[old].data_dir, topic, 0) if b not in truth]
    assert diverged, "the old leader should hold records the new leader never got"

    cluster.brokers[old].start()
    logs = cluster.until("the old leader truncated and follows the new one", lambda: (
        lambda ls: ls if all(x == ls[0] for x in ls) else None)(
            [batches(cluster.brokers[n].data_dir, topic, 0) for n in NODES]), limit_s=60)
    assert logs[0] == truth, (len(logs[0]), len(truth))
    assert not any(b in logs[0] for b in diverged)
    leaked = [f"lost-{i}".encode() for i in range(4) if any(
        f"lost-{i}".encode() in b for b in truth)]
    want = ([f"kept-{i}".encode() for i in range(5)] + leaked
            + [f"new-{i}".encode() for i in range(6)])
    print(f"divergence: {len(diverged)} batch(es) truncated on node {old}, "
          f"{len(leaked)} reached a follower before the pause")
    for n in NODES:
        # Asked through each node as bootstrap (the leader answers): the new leader's records.
        got = read_all(cluster.brokers[n].bootstrap, topic, 0, len(want))
        assert [v for _, v in got] == want, (n, got)


def test_a_follower_behind_the_leaders_log_start_starts_again_there(cluster):
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = "start-" + uuid.uuid4().hex[:6]
    md = create_replicated(cluster, topic, config={"min.insync.replicas": "1"})
    leader = md.topics[topic].partitions[0].leader
    follower = next(n for n in NODES if n not in (leader, md.controller_id))
    port = cluster.brokers[leader].port
    for i in range(5):
        assert kafka_raw.produce_led(port, topic, one_record(f"early-{i}".encode())) == 0
    cluster.until("the follower holds the first records", lambda: len(
        batches(cluster.brokers[follower].data_dir, topic, 0)) == 5)
    cluster.brokers[follower].stop()
    cluster.until(f"node {follower} out of the ISR", lambda: follower not in
                  partition_md(cluster, leader, topic, 0).isrs, limit_s=60)
    for i in range(5):
        # Two records a batch: offsets 5-6, 7-8, ..., 13-14.
        two = kafka_raw.batch(kafka_raw.record(0, b"k", f"mid-{2 * i}".encode())
                              + kafka_raw.record(1, b"k", f"mid-{2 * i + 1}".encode()), 2, 1)
        assert kafka_raw.produce_led(port, topic, two) == 0
    admin = AdminClient({"bootstrap.servers": cluster.brokers[leader].bootstrap})
    # 12 is inside the batch 11-12: the follower starts again at 11, its log start at 12.
    done = admin.delete_records([TopicPartition(topic, 0, 12)])
    assert list(done.values())[0].result(timeout=30).low_watermark == 12
    for i in range(3):
        assert kafka_raw.produce_led(port, topic, one_record(f"late-{i}".encode())) == 0

    cluster.brokers[follower].start()
    cluster.until(f"node {follower} back in the ISR", lambda: sorted(
        partition_md(cluster, leader, topic, 0).isrs) == list(NODES), limit_s=60)

    def from_start(node):
        return [b for b in batches(cluster.brokers[node].data_dir, topic, 0)
                if struct.unpack(">q", b[:8])[0] >= 11]
    got = cluster.until("the follower holds the leader's log from its start", lambda: (
        lambda f, l: f if f == l and len(f) == 5 else None)(from_start(follower),
                                                           from_start(leader)))
    assert b"mid-6" in got[0] and b"mid-7" in got[0] and b"late-2" in got[-1]
    # DeleteRecords past the high watermark is refused on a replicated partition.
    done = admin.delete_records([TopicPartition(topic, 0, 1000)])
    with pytest.raises(Exception):
        list(done.values())[0].result(timeout=30)
    assert "behind the leader's log start" in cluster.brokers[follower].log()


def kafka_topics(bootstrap, *args):
    r = subprocess.run(["java", "-cp", os.path.join(JAVA_LIBS, "*"),
                        "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
                        *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


def test_describe_shows_replicas_and_isr_and_lists_under_replicated_partitions(cluster):
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = "desc-" + uuid.uuid4().hex[:6]
    md = create_replicated(cluster, topic, partitions=2)
    r = subprocess.run([BINARY, "topic", "describe", topic, "--json"], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, STRAND_BROKERS=cluster.bootstrap()))
    assert r.returncode == 0, r.stderr
    parts = json.loads(r.stdout)["partitions"]
    assert [sorted(p["replicas"]) for p in parts] == [list(NODES)] * 2, parts
    assert [sorted(p["isr"]) for p in parts] == [list(NODES)] * 2, parts
    assert [p["leader"] for p in parts] == [md.topics[topic].partitions[i].leader for i in (0, 1)]

    have_java = shutil.which("java") and glob.glob(os.path.join(JAVA_LIBS, "kafka-tools-*.jar"))
    if not have_java:
        return
    out = kafka_topics(cluster.bootstrap(), "--describe", "--topic", topic)
    rows = [l for l in out.splitlines() if "Partition:" in l]
    assert len(rows) == 2 and all("Replicas:" in l and "Isr:" in l for l in rows), out
    assert kafka_topics(cluster.bootstrap(), "--describe", "--under-replicated-partitions",
                        "--topic", topic).strip() == ""
    leader = md.topics[topic].partitions[0].leader
    follower = next(n for n in NODES if n not in (leader, md.controller_id))
    cluster.brokers[follower].stop()
    try:
        cluster.until(f"node {follower} out of the ISR", lambda: follower not in
                      partition_md(cluster, leader, topic, 0).isrs, limit_s=60)
        alive = cluster.bootstrap(*[n for n in NODES if n != follower])
        out = kafka_topics(alive, "--describe", "--under-replicated-partitions", "--topic", topic)
        assert "Partition: 0" in out, out
    finally:
        cluster.brokers[follower].start()
    cluster.until(f"node {follower} back in the ISRs", lambda: all(
        sorted(p.isrs) == list(NODES) for p in cluster.metadata(leader, topic).topics[
            topic].partitions.values()), limit_s=60)


def test_a_restarted_node_names_no_leaders_until_it_has_caught_up(cluster):
    """A leader killed for longer than its session: the controller fences it and elects a
    follower. Started again, its own image may still be the one from before the kill (it
    leading, the full ISR); until that image holds its new registration the node names no
    leaders (LEADER_NOT_AVAILABLE) and takes no writes, as Kafka's brokers wait for the
    metadata log. Polled from its start until it agrees with the others, it never names
    itself leader."""
    topic = "catch-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)],
                        operation_timeout=20)[topic].result(timeout=30)
    leader = cluster.until("a leader", lambda: (lambda q: q.leader if q.leader in NODES
                                                else None)(partition_md(cluster, 1, topic, 0)))
    other = next(n for n in NODES if n != leader)
    node = cluster.brokers[leader]
    node.kill9()
    new = cluster.until("a follower leads", lambda: (lambda q: q.leader if q.leader not in (
        -1, leader) else None)(partition_md(cluster, other, topic, 0)),
        limit_s=SESSION_MS / 1000 * 4)
    node.start()
    admin_port = int(node.config["admin.listen"].rsplit(":", 1)[1])
    from test_admin_api import get

    def theirs():
        q = partition_md(cluster, other, topic, 0)
        return (q.leader, sorted(q.isrs))
    seen = []
    deadline = time.monotonic() + SESSION_MS / 1000 * 4
    while time.monotonic() < deadline:
        # Asked of the restarted node itself (a client library may ask any broker).
        try:
            body = kafka_raw.call(node.port, kafka_raw.metadata_v1([topic]), timeout=2)
        except OSError:  # not listening yet
            time.sleep(0.05)
            continue
        if body is None:
            time.sleep(0.05)
            continue
        error, parts = kafka_raw.metadata_v1_partitions(body)[topic]
        if error != 0:
            seen.append(("error", error))
            ok = kafka_raw.call(node.port, kafka_raw.produce_v3(topic, one_record(b"e"), acks=1))
            # NOT_LEADER_OR_FOLLOWER, or UNKNOWN_TOPIC_OR_PARTITION before any image: retriable.
            assert kafka_raw.produce_error(ok) in (3, 6), seen
            continue
        seen.append(parts[0])
        assert parts[0][0] != leader, f"the restarted node named itself leader: {seen}"
        if parts[0] == theirs():
            break
    else:
        raise AssertionError(f"never agreed with node {other}: {seen}")
    assert parts[0][0] == new, seen
    # Ready (the admin API) once caught up (every shard applies the view in turn).
    cluster.until("ready", lambda: get(admin_port, "/v1/status/ready")[0] == 200, limit_s=5)


def shard_for(topic, partition, shards):
    """`runtime::shard::shard_for`: FNV-1a over the topic and the partition (big-endian)."""
    h = 0xCBF29CE484222325
    for b in topic.encode() + struct.pack(">i", partition):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h % shards


def test_a_leader_restarted_with_fewer_cores_is_still_followed(cluster):
    """A node restarted with `cores` 2 -> 1 opens its partitions on shard 0, where they were
    placed (and the view's replicas still say) shard 1. Once it leads, each follower must ask
    the shard that has the partition now (from the leader's new registration), or it never
    fetches again and acks=all with min.insync.replicas=3 fails. The node restarted is the
    one the controller elects when the leader stops: the first in-sync replica in replica
    order (`placement::choose_leader`)."""
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = next(t for t in ("cores-" + uuid.uuid4().hex[:6] for _ in range(100))
                 if shard_for(t, 0, 2) == 1)
    create_replicated(cluster, topic, config={"min.insync.replicas": "3"})

    def agreed():
        """(leader, replicas) once every node names the same leader and a full ISR (a
        restarted node names no leader until it has caught up)."""
        seen = set()
        for n in NODES:
            try:
                q = partition_md(cluster, n, topic, 0)
            except KeyError:
                return None
            seen.add((q.leader, tuple(q.replicas), tuple(sorted(q.isrs))))
        if len(seen) != 1:
            return None
        leader, replicas, isr = seen.pop()
        return (leader, replicas) if leader in NODES and len(isr) == 3 else None

    leader, replicas = cluster.until("agreement", agreed, limit_s=60)
    x = next(n for n in replicas if n != leader)
    node = cluster.brokers[x]
    node.stop()
    node.cores = 1
    node.start()

    def x_ready():
        """Node x itself (raw Metadata on its port: a client library may ask another
        broker) names the leader and a full ISR once it has caught up; and it is unfenced
        (listed to clients), so the controller may elect it."""
        try:
            body = kafka_raw.call(node.port, kafka_raw.metadata_v1([topic]), timeout=2)
        except OSError:
            return None
        if body is None:
            return None
        error, parts = kafka_raw.metadata_v1_partitions(body)[topic]
        if error != 0 or parts[0][0] != leader or len(parts[0][1]) != 3:
            return None
        return x in cluster.metadata(leader).brokers or None
    cluster.until(f"node {x} (one core now) caught up, unfenced and in the ISR", x_ready,
                  limit_s=60)
    cluster.brokers[leader].stop()
    cluster.until(f"node {x} leads", lambda: partition_md(cluster, x, topic, 0).leader == x,
                  limit_s=30)
    cluster.brokers[leader].start()
    # Past replica.lag.time.max.ms: followers that could not fetch would be out by now.
    time.sleep(LAG_MS / 1000 + 1)
    assert cluster.until("a full ISR under the one-core leader", agreed, limit_s=30)[0] == x
    assert kafka_raw.produce_led(node.port, topic, one_record(b"from-one-core")) == 0
    for n in NODES:
        if n != x:
            cluster.until(f"node {n} has the record", lambda: any(
                b"from-one-core" in open(f, "rb").read() for f in glob.glob(os.path.join(
                    cluster.brokers[n].data_dir, "**", f"{topic}-0", "*.log"),
                    recursive=True)), limit_s=10)


def test_a_stopped_leader_hands_over_at_once_and_restarts_at_once(cluster):
    """SIGTERM is Kafka's controlled shutdown: the stopping node tells the controller, which
    fences it now (its leaderships move to an in-sync follower, it leaves the ISR) instead of
    after `broker.session.timeout.ms`; acks=all with min.insync.replicas=2 goes on with the
    two others; and the node may register again at once (before, a restart was refused
    DUPLICATE_BROKER_REGISTRATION until the old session expired). Nothing acknowledged is
    lost."""
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = "stop-" + uuid.uuid4().hex[:6]
    create_replicated(cluster, topic, config={"min.insync.replicas": "2"})
    leader = cluster.until("a leader", lambda: (lambda q: q.leader if q.leader in NODES
                                                else None)(partition_md(cluster, 1, topic, 0)))
    other = next(n for n in NODES if n != leader)
    acked = [f"before-{i}".encode() for i in range(20)]
    for v in acked:
        assert kafka_raw.produce_led(cluster.brokers[leader].port, topic, one_record(v)) == 0

    def on_other():
        """(leader, isr) as node `other` itself serves it."""
        body = kafka_raw.call(cluster.brokers[other].port, kafka_raw.metadata_v1([topic]),
                              timeout=2)
        error, parts = kafka_raw.metadata_v1_partitions(body)[topic]
        return (parts[0][0], list(parts[0][1])) if error == 0 else None

    node = cluster.brokers[leader]
    log_before = len(node.log())
    stopped_at = time.time()
    node.stop()
    assert node.proc.returncode == 0, node.log()[log_before:][-3000:]
    exit_s = time.time() - stopped_at
    new_leader, isr = cluster.until("a follower leads, the stopped node out of the ISR",
                                    lambda: (lambda m: m if m and m[0] not in (-1, leader)
                                             and leader not in m[1] else None)(on_other()),
                                    limit_s=SESSION_MS / 1000 * 2)
    handover_s = time.time() - stopped_at
    print(f"SIGTERM: exited after {exit_s:.2f} s, new leader seen after {handover_s:.2f} s")
    # Session expiry alone would take SESSION_MS (plus a controller tick and an election).
    assert handover_s < SESSION_MS / 1000 / 2, (exit_s, handover_s)
    assert "controlled shutdown: fenced" in node.log()[log_before:]
    after = f"after-{leader}".encode()
    assert kafka_raw.produce_led(cluster.brokers[new_leader].port, topic, one_record(after)) == 0

    restarted_at = time.time()
    node.start()
    cluster.until("the restarted node registered",
                  lambda: "registered with the controller" in node.log()[log_before:],
                  limit_s=SESSION_MS / 1000)
    assert time.time() - restarted_at < SESSION_MS / 1000 / 2
    assert "DUPLICATE_BROKER_REGISTRATION" not in node.log()[log_before:]
    cluster.until("the restarted node back in the ISR",
                  lambda: (lambda m: m and m[1] == sorted(NODES))(on_other()), limit_s=30)
    got = [v for _, v in read_all(cluster.brokers[new_leader].bootstrap, topic, 0,
                                  len(acked) + 1)]
    assert got == acked + [after], got


def test_delete_records_moves_every_replicas_log_start(cluster):
    """DeleteRecords on the leader: the in-sync followers move their log start up too
    (Kafka's followers take the leader's log start from every fetch), so after a failover
    the deleted records stay deleted (before, the new leader served them again)."""
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = "delrec-" + uuid.uuid4().hex[:6]
    md = create_replicated(cluster, topic, config={"min.insync.replicas": "1"})
    leader = md.topics[topic].partitions[0].leader
    other = next(n for n in NODES if n != leader)
    port = cluster.brokers[leader].port
    for i in range(6):
        assert kafka_raw.produce_led(port, topic, one_record(f"old-{i}".encode())) == 0
    admin = AdminClient({"bootstrap.servers": cluster.brokers[leader].bootstrap})
    done = admin.delete_records([TopicPartition(topic, 0, 4)])
    assert list(done.values())[0].result(timeout=30).low_watermark == 4
    assert kafka_raw.produce_led(port, topic, one_record(b"after-delete")) == 0
    for n in NODES:
        cluster.until(f"node {n} has the record after the deletion", lambda: any(
            b"after-delete" in b for b in batches(cluster.brokers[n].data_dir, topic, 0)))
    node = cluster.brokers[leader]
    node.stop()
    new = cluster.until("a follower leads", lambda: (lambda q: q.leader if q.leader not in (
        -1, leader) else None)(partition_md(cluster, other, topic, 0)), limit_s=30)
    c = Consumer({"bootstrap.servers": cluster.brokers[new].bootstrap,
                  "group.id": "w-" + uuid.uuid4().hex[:6]})
    try:
        low, high = cluster.until("watermarks from the new leader", lambda: (
            lambda w: w if w[1] == 7 else None)(
                c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)))
    finally:
        c.close()
    assert (low, high) == (4, 7)
    got = read_all(cluster.brokers[new].bootstrap, topic, 0, 3, limit_s=15)
    assert [v for _, v in got] == [b"old-4", b"old-5", b"after-delete"], got
    node.start()
    cluster.until("the stopped node back", cluster.formed, limit_s=60)


def test_a_node_down_while_its_topic_was_deleted_removes_the_files_when_it_returns(cluster):
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    gone, kept = "gone-" + uuid.uuid4().hex[:6], "kept-" + uuid.uuid4().hex[:6]
    create_replicated(cluster, gone, partitions=2)
    create_replicated(cluster, kept)
    # Not the active controller: a DeleteTopics asked just as the controller stops waits for
    # its deadline (a known gap: topic changes are not re-asked at a new controller).
    victim = next(n for n in (3, 2) if n != cluster.metadata(1).controller_id)
    node = cluster.brokers[victim]
    dirs = lambda: sorted(d for d in os.listdir(node.data_dir) if d.startswith((gone, kept)))
    cluster.until(f"node {victim} holds both topics", lambda: dirs() == [f"{gone}-0", f"{gone}-1",
                                                                  f"{kept}-0"], limit_s=30)
    node.stop()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(
        *[n for n in NODES if n != victim])})
    admin.delete_topics([gone], operation_timeout=20)[gone].result(timeout=30)
    assert dirs() == [f"{gone}-0", f"{gone}-1", f"{kept}-0"], "untouched while it is down"
    # A directory of a topic this node never hears of again: its deletion came to it inside
    # a metadata snapshot (its log was compacted past it while the node was down), so no
    # view ever opens it (Kafka's stray log). Made here by hand, as the old process left it.
    ghost = os.path.join(node.data_dir, "ghost-0")
    os.makedirs(ghost)
    with open(os.path.join(ghost, "partition.metadata"), "w") as f:
        f.write(f"version: 0\ntopic_id: {uuid.uuid4()}\n")
    time.sleep(0.05)  # older than the process that starts now
    log_before = len(node.log())
    node.start()
    # The deleted topic's partitions are opened from the node's own metadata log, then
    # removed when the deletion applies; the ghost by the sweep at the first caught-up view.
    cluster.until("the stray directories removed", lambda: dirs() == [f"{kept}-0"]
                  and not os.path.exists(ghost), limit_s=30)
    assert "no longer hosts: removed" in node.log()[log_before:]
    cluster.until(f"node {victim} back in the ISR of the kept topic", lambda: sorted(
        partition_md(cluster, 1, kept, 0).isrs) == list(NODES), limit_s=60)
