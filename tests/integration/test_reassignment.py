"""#18: partition reassignment (KIP-455) on three real nodes, with Kafka's own
`kafka-reassign-partitions` (AlterPartitionReassignments / ListPartitionReassignments).

- move: a replication-factor-2 topic moved to [the third node, the old follower] while its
  leader is one of the replicas removed: the new replica copies the log, joins the ISR, the
  move completes (`--verify` says so), the removed node deletes its copy, the new copy's
  batches are byte-identical to the kept one's, a consumer reads every acknowledged record
  from the new leader, and `--list` shows nothing in flight.
- cancel: a move to a paused node stays in flight (`--list` shows it adding and removing);
  `--cancel` puts the replicas back, and the paused node, resumed, deletes the partial copy.

- throttled move (KIP-73): `--execute --throttle` sets the brokers' replication throttle
  rates and the topic's throttled replicas; the new replica copies 8 MiB no faster than the
  rate allows (an unthrottled move of the same log is timed beside it), then `--verify`
  clears every throttle config, and the copy is byte-identical.
"""
import glob
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from test_cluster import NODES, Cluster
from test_leader_election import create, produce_once_led, served, strand
from test_replication import (JAVA_LIBS, LAG_MS, SESSION_MS, batches, one_record, pause,
                              read_all, resume)

pytestmark = pytest.mark.skipif(
    not (shutil.which("java") and glob.glob(os.path.join(JAVA_LIBS, "kafka-tools-*.jar"))),
    reason="needs java and Kafka's tools (target/java-libs, scripts/test fetches them)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(str(tmp_path_factory.mktemp("reassign")), cluster_id="reassign",
                 config={"replica.lag.time.max.ms": LAG_MS,
                         "broker.session.timeout.ms": SESSION_MS}).running() as c:
        yield c


def tool(cluster, *args, nodes=NODES):
    r = subprocess.run(["java", "-cp", os.path.join(JAVA_LIBS, "*"),
                        "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                        "--bootstrap-server", cluster.bootstrap(*nodes), *args],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def reassign_tool(cluster, tmp_path, plan, *args, nodes=NODES):
    path = os.path.join(str(tmp_path), "plan-" + uuid.uuid4().hex[:6] + ".json")
    with open(path, "w") as f:
        json.dump({"version": 1, "partitions": plan}, f)
    return tool(cluster, "--reassignment-json-file", path, *args, nodes=nodes)


def list_tool(cluster, nodes=NODES):
    return tool(cluster, "--list", nodes=nodes)


def replicas_everywhere(cluster, topic):
    """(replicas, sorted isr, leader) of partition 0 if every node serves the same, else None."""
    seen = set()
    for n in NODES:
        p = cluster.metadata(n, topic).topics[topic].partitions[0]
        seen.add((tuple(p.replicas), tuple(sorted(p.isrs)), p.leader))
    return seen.pop() if len(seen) == 1 else None


def test_a_move_copies_the_log_to_the_new_replica_and_removes_the_old_one(cluster, tmp_path):
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = "move-" + uuid.uuid4().hex[:6]
    md = create(cluster, topic, rf=2, config={"min.insync.replicas": "2"})
    p = md.topics[topic].partitions[0]
    leader, follower = p.leader, next(n for n in p.replicas if n != p.leader)
    third = next(n for n in NODES if n not in p.replicas)
    acked = [f"v-{i}".encode() for i in range(200)]
    for v in acked:
        assert produce_once_led(cluster, leader, topic, one_record(v)) == 0

    target = [third, follower]
    plan = [{"topic": topic, "partition": 0, "replicas": target}]
    rc, out = reassign_tool(cluster, tmp_path, plan, "--execute")
    assert rc == 0, out
    assert f"Successfully started partition reassignment for {topic}-0" in out, out
    cluster.until("the move completes", lambda: "is completed" in reassign_tool(
        cluster, tmp_path, plan, "--verify", "--preserve-throttles")[1], limit_s=60)
    # Plain --verify also clears replication throttles (broker and topic configs deleted;
    # none is set, so nothing changes, and it succeeds).
    rc, out = reassign_tool(cluster, tmp_path, plan, "--verify")
    assert rc == 0 and "Clearing broker-level throttles" in out, out
    state = cluster.until("every node serves the new replicas", lambda: (lambda s: s if s and list(
        s[0]) == target and list(s[1]) == sorted(target) and s[2] in target else None)(
        replicas_everywhere(cluster, topic)), limit_s=30)
    new_leader = state[2]
    assert new_leader != leader, "the removed leader handed over"
    # The removed node deletes its copy; the new copy holds the leader's batches exactly.
    removed = os.path.join(cluster.brokers[leader].data_dir, f"{topic}-0")
    cluster.until(f"node {leader} deleted its copy", lambda: not os.path.exists(removed),
                  limit_s=30)
    cluster.until("the new copy equals the kept one", lambda: batches(
        cluster.brokers[third].data_dir, topic, 0) == batches(
        cluster.brokers[follower].data_dir, topic, 0) != [], limit_s=30)
    got = [v for _, v in read_all(cluster.brokers[new_leader].bootstrap, topic, 0, len(acked))]
    assert got == acked
    # acks=all with min.insync.replicas=2 works on the new replica set.
    assert produce_once_led(cluster, new_leader, topic, one_record(b"after-move")) == 0
    rc, out = list_tool(cluster)
    assert rc == 0 and "No partition reassignments found." in out, out


def test_a_cancelled_move_puts_the_replicas_back(cluster, tmp_path):
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    # The node to pause must not be the active controller (the move is asked of it).
    controller = cluster.metadata(1).controller_id
    for _ in range(6):
        topic = "cancel-" + uuid.uuid4().hex[:6]
        md = create(cluster, topic, rf=2)
        p = md.topics[topic].partitions[0]
        original = list(p.replicas)
        third = next(n for n in NODES if n not in original)
        if third != controller:
            break
    assert third != controller, "placement kept the controller in every replica set"
    others = [n for n in NODES if n != third]
    assert produce_once_led(cluster, p.leader, topic, one_record(b"kept")) == 0
    plan = [{"topic": topic, "partition": 0, "replicas": [third, original[1]]}]
    # The new replica's node is paused: it cannot copy the log, so the move stays in flight.
    pause(cluster, third)
    try:
        rc, out = reassign_tool(cluster, tmp_path, plan, "--execute", nodes=others)
        assert rc == 0, out
        rc, out = list_tool(cluster, nodes=others)
        assert rc == 0, out
        assert f"{topic}-0: replicas: {third},{original[1]},{original[0]}. adding: {third}. " \
               f"removing: {original[0]}." in out, out
        # (--preserve-throttles: the tool's throttle clean-up asks every broker, and one is
        # paused.)
        rc, out = reassign_tool(cluster, tmp_path, plan, "--cancel", "--preserve-throttles",
                                nodes=others)
        assert rc == 0, out
        assert f"Successfully cancelled partition reassignment for: {topic}-0" in out, out
    finally:
        resume(cluster, third)
    cluster.until("the original replicas back", lambda: (lambda s: s if s and sorted(
        s[0]) == sorted(original) and s[2] in original else None)(
        replicas_everywhere(cluster, topic)), limit_s=30)
    partial = os.path.join(cluster.brokers[third].data_dir, f"{topic}-0")
    cluster.until(f"node {third} deleted its partial copy", lambda: not os.path.exists(partial),
                  limit_s=60)
    rc, out = list_tool(cluster)
    assert "No partition reassignments found." in out, out
    leader = served(cluster, original[0], topic)[0]
    got = [v for _, v in read_all(cluster.brokers[leader].bootstrap, topic, 0, 1)]
    assert got == [b"kept"]


def test_the_strand_cli_moves_a_replica_and_waits_for_it(cluster):
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    topic = "cli-" + uuid.uuid4().hex[:6]
    md = create(cluster, topic, rf=2)
    p = md.topics[topic].partitions[0]
    third = next(n for n in NODES if n not in p.replicas)
    kept = p.replicas[1]
    assert produce_once_led(cluster, p.leader, topic, one_record(b"moved")) == 0
    target = f"{kept},{third}"
    r = strand(cluster, "topic", "reassign", topic, "--partition", "0", "--replicas", target,
               "--wait", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout) == {"topic": topic, "partition": 0, "replicas": [kept, third],
                                    "reassignment": "completed"}
    r = strand(cluster, "topic", "reassignments", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == [], r.stdout + r.stderr
    cluster.until("every node serves the new replicas", lambda: (lambda s: s if s and list(
        s[0]) == [kept, third] else None)(replicas_everywhere(cluster, topic)), limit_s=30)
    # Bad targets get Kafka's errors: an unknown broker, and a cancel with nothing in flight.
    r = strand(cluster, "topic", "reassign", topic, "--replicas", "1,99")
    assert r.returncode != 0 and "(error 39)" in r.stdout + r.stderr, r.stdout + r.stderr
    r = strand(cluster, "topic", "reassign", topic, "--cancel")
    assert r.returncode != 0 and "(error 85)" in r.stdout + r.stderr, r.stdout + r.stderr


def configs(cluster, node, kind, name):
    admin = AdminClient({"bootstrap.servers": cluster.brokers[node].bootstrap})
    res = ConfigResource(kind, name)
    return {k: v.value for k, v in admin.describe_configs([res])[res].result(10).items()}


def fill(cluster, node, topic, count, size):
    p = Producer({"bootstrap.servers": cluster.brokers[node].bootstrap, "acks": "all",
                  "linger.ms": 5, "compression.type": "none"})
    for i in range(count):
        p.produce(topic, value=(b"%08d" % i) * (size // 8), partition=0)
        p.poll(0)
    assert p.flush(60) == 0


def timed_move(cluster, tmp_path, topic, leader, third, *throttle):
    """Moves partition 0 from [leader] to [leader, third]: seconds until `third` is in the
    ISR (polled through Metadata every 50 ms, not the tool's slow JVM)."""
    plan = [{"topic": topic, "partition": 0, "replicas": [leader, third]}]
    start = time.monotonic()
    rc, out = reassign_tool(cluster, tmp_path, plan, "--execute", *throttle)
    assert rc == 0, out
    while True:
        p = cluster.metadata(leader, topic).topics[topic].partitions[0]
        if third in p.isrs:
            return time.monotonic() - start, plan, out
        assert time.monotonic() - start < 90, "the move never completed"
        time.sleep(0.05)


def test_a_throttled_move_copies_no_faster_than_the_throttle(cluster, tmp_path):
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    count, size, rate = 1024, 8192, 2_000_000  # 8 MiB at 2 MB/s
    moved = {}
    for name in ("free", "throttled"):
        topic = f"{name}-" + uuid.uuid4().hex[:6]
        md = create(cluster, topic, rf=1)
        leader = md.topics[topic].partitions[0].leader
        third = next(n for n in NODES if n != leader)
        fill(cluster, leader, topic, count, size)
        throttle = ("--throttle", str(rate)) if name == "throttled" else ()
        elapsed, plan, out = timed_move(cluster, tmp_path, topic, leader, third, *throttle)
        moved[name] = (topic, leader, third, elapsed, plan, out)
    topic, leader, third, elapsed, plan, out = moved["throttled"]
    assert f"The inter-broker throttle limit was set to {rate} B/s" in out, out
    # Both brokers of the move hold the rates; the topic names the throttled replicas.
    for node in (leader, third):
        c = configs(cluster, node, "BROKER", str(node))
        assert c.get("leader.replication.throttled.rate") == str(rate), c
        assert c.get("follower.replication.throttled.rate") == str(rate), c
    t = configs(cluster, leader, "TOPIC", topic)
    assert t["leader.replication.throttled.replicas"] == f"0:{leader}", t
    assert t["follower.replication.throttled.replicas"] == f"0:{third}", t
    # 8 MiB at 2 MB/s, less the one second a rate may bank: at least ~3.2 s. Unthrottled,
    # the same copy takes well under that on loopback.
    free = moved["free"][3]
    print(f"8 MiB moved: throttled to {rate} B/s in {elapsed:.2f} s, unthrottled {free:.2f} s")
    assert elapsed >= 3.0, f"throttled move took {elapsed:.2f} s (unthrottled {free:.2f} s)"
    assert free < elapsed / 2, f"throttled {elapsed:.2f} s, unthrottled {free:.2f} s"
    # --verify clears the throttles: the rates on every broker, the topic's replica lists.
    rc, out = reassign_tool(cluster, tmp_path, plan, "--verify")
    assert rc == 0 and "is completed" in out and "Clearing broker-level throttles" in out, out
    for node in NODES:
        c = configs(cluster, node, "BROKER", str(node))
        assert "leader.replication.throttled.rate" not in c, c
        assert "follower.replication.throttled.rate" not in c, c
    t = configs(cluster, leader, "TOPIC", topic)
    assert t.get("leader.replication.throttled.replicas", "") == "", t
    assert t.get("follower.replication.throttled.replicas", "") == "", t
    cluster.until("the copy equals the leader's", lambda: batches(
        cluster.brokers[third].data_dir, topic, 0) == batches(
        cluster.brokers[leader].data_dir, topic, 0) != [], limit_s=30)
    # A rate that is not bytes per second is refused; the cluster-wide default cannot be set.
    admin = AdminClient({"bootstrap.servers": cluster.brokers[leader].bootstrap})
    bad = ConfigResource("BROKER", str(leader), incremental_configs=[ConfigEntry(
        "leader.replication.throttled.rate", "-5",
        incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as refused:
        admin.incremental_alter_configs([bad])[bad].result(10)
    assert "at least 0" in str(refused.value), refused.value
    r = subprocess.run(["java", "-cp", os.path.join(JAVA_LIBS, "*"), "org.apache.kafka.tools.ConfigCommand",
                        "--bootstrap-server", cluster.bootstrap(), "--entity-type", "brokers",
                        "--entity-default", "--alter", "--add-config",
                        "leader.replication.throttled.rate=5"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "name a broker id" in r.stdout + r.stderr, r.stdout + r.stderr
