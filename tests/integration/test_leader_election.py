"""#18: ElectLeaders (KIP-460) on three real nodes, with Kafka's own `kafka-leader-election`
and with `strand topic elect-leaders`.

- preferred: the first replica, stopped (SIGTERM) and restarted, follows and rejoins the ISR
  but does not lead; a preferred election gives it the leadership back (Kafka's tool prints
  "Successfully completed leader election (PREFERRED)"), asked again it prints "Valid replica
  already elected", `--all-topic-partitions` succeeds; every acknowledged record is read
  back in order from the new leader.
- unclean (five nodes, so the metadata quorum outlives two stopped nodes): a partition whose
  only in-sync replica is down has no leader, even with its other replica back; `strand topic elect-leaders --unclean` makes that replica lead (ISR = it
  alone), it takes writes, and the old leader, restarted, truncates to it and rejoins.
"""
import glob
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_raw
from conftest import BINARY
from test_cluster import NODES, Cluster
from test_replication import JAVA_LIBS, LAG_MS, SESSION_MS, one_record, read_all

HAVE_KAFKA_TOOLS = bool(shutil.which("java") and glob.glob(os.path.join(JAVA_LIBS,
                                                                         "kafka-tools-*.jar")))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(str(tmp_path_factory.mktemp("elections")), cluster_id="elections",
                 config={"replica.lag.time.max.ms": LAG_MS,
                         "broker.session.timeout.ms": SESSION_MS}).running() as c:
        yield c


FIVE = (1, 2, 3, 4, 5)


@pytest.fixture
def five(tmp_path):
    with Cluster(str(tmp_path), cluster_id="five", nodes=FIVE, cores=1,
                 config={"replica.lag.time.max.ms": LAG_MS,
                         "broker.session.timeout.ms": SESSION_MS}).running() as c:
        yield c


def create(cluster, topic, rf, partitions=1, config=None):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=rf,
                                  config=config or {})],
                        operation_timeout=20)[topic].result(timeout=30)
    md = cluster.until("leaders and full ISRs", lambda: (lambda m: m if len(
        m.topics[topic].partitions) == partitions and all(
        p.leader in cluster.nodes and len(p.isrs) == rf for p in m.topics[topic].partitions.values())
        else None)(cluster.metadata(1, topic)), limit_s=60)
    # Node 1's view can be ahead of a leader's own: wait until each leader serves its partitions
    # as their leader (until then it answers NOT_LEADER_OR_FOLLOWER, as Kafka's brokers do).
    for p in md.topics[topic].partitions.values():
        cluster.until(f"node {p.leader} leads {topic}-{p.id}", lambda p=p: (
            served(cluster, p.leader, topic, p.id) or (None,))[0] == p.leader, limit_s=30)
    return md


def produce_once_led(cluster, node, topic, record, limit_s=10):
    """Produce (acks=all) to `node`, asked again while it answers NOT_LEADER_OR_FOLLOWER (6),
    as clients do while the leader's shard opens its log: the last error code."""
    deadline = time.monotonic() + limit_s
    while True:
        error = kafka_raw.produce(cluster.brokers[node].port, topic, record)
        if error != 6 or time.monotonic() > deadline:
            return error
        time.sleep(0.1)


def served(cluster, node, topic, partition=0):
    """(leader, sorted isr) as node `node` itself serves it, or None."""
    try:
        body = kafka_raw.call(cluster.brokers[node].port, kafka_raw.metadata_v1([topic]),
                              timeout=2)
    except OSError:
        return None
    error, parts = kafka_raw.metadata_v1_partitions(body)[topic]
    return (parts[partition][0], list(parts[partition][1])) if error == 0 else None


def strand(cluster, *args):
    return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, STRAND_BROKERS=cluster.bootstrap()))


def leader_election(cluster, *args):
    r = subprocess.run(["java", "-cp", os.path.join(JAVA_LIBS, "*"),
                        "org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server",
                        cluster.bootstrap(), *args], capture_output=True, text=True,
                       timeout=120)
    return r.returncode, r.stdout + r.stderr


def stop_the_preferred_leader(cluster, topic, acked):
    """A new RF 3 topic (min ISR 2) takes `acked` through its preferred leader, which is then
    stopped until another node leads: (preferred, a third node, the new leader)."""
    cluster.until("three brokers live", cluster.formed, limit_s=60)
    md = create(cluster, topic, rf=3, config={"min.insync.replicas": "2"})
    preferred = md.topics[topic].partitions[0].replicas[0]
    assert md.topics[topic].partitions[0].leader == preferred
    other = next(n for n in NODES if n != preferred)
    for v in acked:
        assert produce_once_led(cluster, preferred, topic, one_record(v)) == 0
    cluster.brokers[preferred].stop()
    moved, _ = cluster.until("another node leads", lambda: (lambda m: m if m and m[0] not in (
        -1, preferred) else None)(served(cluster, other, topic)), limit_s=30)
    return preferred, other, moved


def test_a_preferred_election_gives_the_first_replica_its_leadership_back(cluster):
    topic = "pref-" + uuid.uuid4().hex[:6]
    acked = [f"a-{i}".encode() for i in range(10)]
    preferred, other, moved = stop_the_preferred_leader(cluster, topic, acked)
    node = cluster.brokers[preferred]
    more = [f"b-{i}".encode() for i in range(10)]
    for v in more:
        assert produce_once_led(cluster, moved, topic, one_record(v)) == 0
    node.start()
    cluster.until("the preferred replica back in the ISR",
                  lambda: served(cluster, other, topic) == (moved, sorted(NODES)), limit_s=60)
    assert served(cluster, other, topic)[0] == moved, "a returning replica does not lead by itself"

    if HAVE_KAFKA_TOOLS:
        rc, out = leader_election(cluster, "--election-type", "preferred", "--topic", topic,
                                  "--partition", "0")
        assert rc == 0, out
        assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" \
            in out, out
    else:
        r = strand(cluster, "topic", "elect-leaders", topic, "--partition", "0", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == [{"topic": topic, "partition": 0, "result": "elected"}]
    # Every node serves the new leader (the answer came once the asked node applied it).
    cluster.until("every node names the preferred leader", lambda: all(
        served(cluster, n, topic) == (preferred, sorted(NODES)) for n in NODES), limit_s=10)

    if HAVE_KAFKA_TOOLS:
        rc, out = leader_election(cluster, "--election-type", "preferred", "--topic", topic,
                                  "--partition", "0")
        assert rc == 0, out
        assert f"Valid replica already elected for partitions {topic}-0" in out, out
        rc, out = leader_election(cluster, "--election-type", "preferred",
                                  "--all-topic-partitions")
        assert rc == 0, out
    r = strand(cluster, "topic", "elect-leaders", topic, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"topic": topic, "partition": 0, "result": "already led"}]

    last = b"after-election"
    assert produce_once_led(cluster, preferred, topic, one_record(last)) == 0
    got = [v for _, v in read_all(node.bootstrap, topic, 0, len(acked) + len(more) + 1)]
    assert got == acked + more + [last], got


def test_an_unclean_election_leads_a_partition_whose_isr_is_down(five):
    cluster = five
    topic = "uncl-" + uuid.uuid4().hex[:6]
    md = create(cluster, topic, rf=2)
    p = md.topics[topic].partitions[0]
    first, second = p.leader, next(n for n in p.replicas if n != p.leader)
    third = next(n for n in FIVE if n not in p.replicas)
    assert produce_once_led(cluster, first, topic, one_record(b"both")) == 0
    # `second` stops (leaves the ISR), then `first` takes a record only it has, and stops.
    cluster.brokers[second].stop()
    cluster.until("the stopped follower out of the ISR",
                  lambda: served(cluster, third, topic) == (first, [first]), limit_s=30)
    # (acks=all with the ISR shrunk to `first`: a fetch `second` sent as it stopped must not
    # propose it back into the ISR, KIP-841, or this would wait for it until the timeout.)
    assert produce_once_led(cluster, first, topic, one_record(b"only-first")) == 0
    cluster.brokers[first].stop()
    cluster.until("no leader", lambda: served(cluster, third, topic) is not None and
                  served(cluster, third, topic)[0] == -1, limit_s=30)
    cluster.brokers[second].start()
    cluster.until(f"node {second} serves again", lambda: served(cluster, second, topic) is not None,
                  limit_s=30)
    time.sleep(1)
    assert served(cluster, third, topic)[0] == -1, "an out-of-sync replica never leads by itself"

    r = strand(cluster, "topic", "elect-leaders", topic, "--partition", "0", "--json")
    assert r.returncode != 0, r.stdout
    assert "(error 80)" in r.stdout, r.stdout + r.stderr  # PREFERRED_LEADER_NOT_AVAILABLE
    r = strand(cluster, "topic", "elect-leaders", topic, "--partition", "0", "--unclean",
               "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout) == [{"topic": topic, "partition": 0, "result": "elected"}]
    cluster.until(f"node {second} leads alone",
                  lambda: served(cluster, third, topic) == (second, [second]), limit_s=10)
    assert produce_once_led(cluster, second, topic, one_record(b"unclean")) == 0

    # The old leader comes back, truncates what only it had, and rejoins.
    cluster.brokers[first].start()
    cluster.until(f"node {first} back in the ISR",
                  lambda: served(cluster, third, topic) == (second, sorted([first, second])),
                  limit_s=60)
    got = [v for _, v in read_all(cluster.brokers[second].bootstrap, topic, 0, 2)]
    assert got == [b"both", b"unclean"], got
    r = strand(cluster, "topic", "elect-leaders", "--unclean", "--json")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_leader_that_appended_nothing_in_its_epoch_rejoins_as_a_follower(cluster):
    """Found by the deterministic simulation (#19, `strand-sim --seed 82`): a node that led an
    epoch without appending anything (its epoch cache ends with that empty epoch, recorded
    when it served its followers) and then followed asked the new leader with that epoch
    forever — the divergence answer cut no record, so nothing changed — and, once the lag
    timeout dropped it, never rejoined the ISR."""
    topic = "empty-epoch-" + uuid.uuid4().hex[:6]
    acked = [f"e-{i}".encode() for i in range(5)]
    preferred, other, moved = stop_the_preferred_leader(cluster, topic, acked)
    node = cluster.brokers[preferred]
    # Nothing is produced in `moved`'s epoch: it only serves the third replica's fetches.
    node.start()
    cluster.until("the preferred replica back in the ISR",
                  lambda: served(cluster, other, topic) == (moved, sorted(NODES)), limit_s=60)
    r = strand(cluster, "topic", "elect-leaders", topic, "--partition", "0", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    cluster.until("every node names the preferred leader", lambda: all(
        (served(cluster, n, topic) or (None,))[0] == preferred for n in NODES), limit_s=10)
    # Past the lag timeout, with a record to replicate: `moved` must be (or be back) in sync.
    time.sleep(LAG_MS / 1000 + 1)
    last = b"after-empty-epoch"
    assert produce_once_led(cluster, preferred, topic, one_record(last)) == 0
    cluster.until(f"node {moved} in the ISR again",
                  lambda: served(cluster, other, topic) == (preferred, sorted(NODES)),
                  limit_s=20)
    got = [v for _, v in read_all(cluster.brokers[moved].bootstrap, topic, 0, len(acked) + 1)]
    assert got == acked + [last], got
