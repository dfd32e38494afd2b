"""#17's local cluster: `strand cluster start --nodes 3`, used the way its README section says
(pid files, a node killed with kill -9 and brought back with `strand serve --config`).

- a 12-partition topic led by all three nodes; confluent-kafka, kafka-python and the Java
  client, each bootstrapped with a different single node, produce keyed records and read every
  record back (from partitions led by all three nodes);
- a consumer group whose members are bootstrapped through different nodes splits the
  partitions and reads everything;
- a transaction over partitions led by different nodes commits (read_committed sees it) and
  one aborts (nothing of it seen): markers travel to the leaders over the cluster link;
- the lesson's examples (`../shared/examples`, the EOS one too) pass against the cluster;
- every node's metadata image is the same (digest on the admin API's `/v1/cluster`), and
  Kafka's `kafka-metadata-quorum describe --status` (DescribeQuorum) names the leader;
- kill -9 of the active controller: another voter takes over (the time is printed), topics
  can be created afterwards (1,100 of them, so the others' logs are compacted past the
  killed node's), and the restarted node catches up from a snapshot and serves again;
- Ctrl-C (SIGINT) to `strand cluster start` stops every node, the restarted one too.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from conftest import BINARY, ROOT, until

LIBS = os.environ.get("STRAND_JAVA_LIBS", os.path.join(ROOT, "target", "java-libs"))
EXAMPLES = os.path.join(ROOT, "..", "shared", "examples")
HAVE_JAVA = bool(glob.glob(os.path.join(LIBS, "kafka-clients-*.jar")))


def alive(pid):
    """Running (a zombie, exited but not yet reaped by its parent, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


class Local:
    def __init__(self, work):
        self.dir = work
        self.proc = subprocess.Popen([BINARY, "cluster", "start", "--nodes", "3", "--dir", work],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.out = []
        for line in self.proc.stdout:
            self.out.append(line)
            if line.startswith("bootstrap: "):
                self.nodes = line.split(" ", 1)[1].strip().split(",")
                break
        else:
            raise RuntimeError("no bootstrap line: " + "".join(self.out))

    def pid(self, n):
        with open(os.path.join(self.dir, f"node-{n}", "pid")) as f:
            return int(f.read().strip())

    def admin(self, n):
        return AdminClient({"bootstrap.servers": self.nodes[n - 1]})

    def metadata(self, n, topic=None):
        return self.admin(n).list_topics(topic=topic, timeout=5)

    def log(self, n):
        with open(os.path.join(self.dir, f"node-{n}", "strand.log"), errors="replace") as f:
            return f.read()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    c = Local(str(tmp_path_factory.mktemp("local") / "c"))
    try:
        until("three brokers and a controller", lambda: (lambda m: sorted(m.brokers) == [1, 2, 3]
                                                          and m.controller_id in (1, 2, 3))(
            c.metadata(1)), limit_s=60)
        yield c
    finally:
        if c.proc.poll() is None:
            c.proc.send_signal(signal.SIGINT)
            try:
                c.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                c.proc.kill()
        for n in (1, 2, 3):
            try:
                os.kill(c.pid(n), signal.SIGKILL)
            except (OSError, ValueError):
                pass


def create(local, node, topic, partitions):
    admin = local.admin(node)  # kept alive until the answer: a dropped client cancels it
    fs = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=20)
    fs[topic].result(timeout=30)


def read_all_confluent(bootstrap, topic, partitions, expect):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    got, parts = set(), set()
    end = time.time() + 60
    while len(got) < expect and time.time() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.add(m.value().decode())
            parts.add(m.partition())
    c.close()
    return got, parts


def read_all_kafka_python(bootstrap, topic, partitions, expect):
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    tps = [KafkaTopicPartition(topic, i) for i in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got, parts = set(), set()
    end = time.time() + 60
    while len(got) < expect and time.time() < end:
        for tp, records in c.poll(timeout_ms=500).items():
            for r in records:
                got.add(r.value.decode())
                parts.add(tp.partition)
    c.close()
    return got, parts


def test_three_clients_each_through_one_node_over_a_topic_led_by_every_node(local):
    """confluent-kafka through node 1, kafka-python through node 2, the Java client through
    node 3: each produces keyed records to one 12-partition topic led by all three nodes,
    then reads every record (all three clients') back."""
    topic = "twelve-" + uuid.uuid4().hex[:6]
    create(local, 1, topic, 12)
    md = until("leaders on all nodes", lambda: (lambda m: m if topic in m.topics and {
        p.leader for p in m.topics[topic].partitions.values()} == {1, 2, 3} else None)(
            local.metadata(2, topic)))
    assert len(md.topics[topic].partitions) == 12
    each = 400
    expect = each * (3 if HAVE_JAVA else 2)

    p = Producer({"bootstrap.servers": local.nodes[0], "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5})
    for i in range(each):
        p.produce(topic, key=f"ck{i % 29}".encode(), value=f"confluent-v{i}".encode())
    assert p.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=local.nodes[1], acks="all")
    for i in range(each):
        kp.send(topic, key=f"pk{i % 37}".encode(), value=f"python-v{i}".encode())
    kp.flush(30)
    kp.close()
    if HAVE_JAVA:
        r = subprocess.run(["java", "-cp", os.path.join(LIBS, "*"),
                            os.path.join(ROOT, "tests", "java", "JavaClusterCheck.java"),
                            local.nodes[2], topic, "12", str(each), str(expect)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert f"java cluster: OK {expect} records" in r.stdout, r.stdout
        print(r.stdout.strip())

    for name, read, node in (("confluent-kafka", read_all_confluent, 0),
                             ("kafka-python", read_all_kafka_python, 1)):
        got, parts = read(local.nodes[node], topic, 12, expect)
        assert len(got) == expect, f"{name} read {len(got)} of {expect}"
        leaders = {md.topics[topic].partitions[q].leader for q in parts}
        assert leaders == {1, 2, 3}, f"{name} read only from partitions led by {leaders}"
        print(f"{name}: {len(got)} records from {len(parts)} partitions led by nodes 1, 2, 3")


def test_a_group_with_members_bootstrapped_through_different_nodes(local):
    topic = "grouped-" + uuid.uuid4().hex[:6]
    create(local, 3, topic, 12)
    until("leaders on all nodes", lambda: topic in local.metadata(1, topic).topics and {
        p.leader for p in local.metadata(1, topic).topics[topic].partitions.values()}
        == {1, 2, 3})
    p = Producer({"bootstrap.servers": local.nodes[2], "acks": "all"})
    sent = 600
    for i in range(sent):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0

    group = "g-" + topic
    members = [Consumer({"bootstrap.servers": local.nodes[n], "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10000})
               for n in (0, 1)]
    for m in members:
        m.subscribe([topic])
    got = [set(), set()]
    end = time.time() + 60
    while time.time() < end and not (len(got[0] | got[1]) == sent
                                     and all(m.assignment() for m in members)):
        for i, m in enumerate(members):
            msg = m.poll(0.2)
            if msg is not None and not msg.error():
                got[i].add(msg.value())
    assigned = [{tp.partition for tp in m.assignment()} for m in members]
    for m in members:
        m.close()
    assert all(assigned) and not (assigned[0] & assigned[1]), assigned
    assert assigned[0] | assigned[1] == set(range(12)), assigned
    assert len(got[0] | got[1]) == sent, f"the group read {len(got[0] | got[1])} of {sent}"
    print(f"group {group}: members through nodes 1 and 2 hold {sorted(assigned[0])} and "
          f"{sorted(assigned[1])}")


def test_a_transaction_over_partitions_on_several_nodes_commits_and_one_aborts(local):
    topic = "txn-" + uuid.uuid4().hex[:6]
    create(local, 2, topic, 6)
    md = until("leaders known", lambda: (lambda m: m if len(
        m.topics[topic].partitions) == 6 and all(
        p.leader in (1, 2, 3) for p in m.topics[topic].partitions.values()) else None)(
            local.metadata(1, topic)))
    leaders = {p.leader for p in md.topics[topic].partitions.values()}
    assert len(leaders) >= 2, f"all partitions on one node: {leaders}"
    p = Producer({"bootstrap.servers": local.nodes[0], "transactional.id": "tx-" + topic})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(60):
        p.produce(topic, value=f"c{i}".encode(), partition=i % 6)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(60):
        p.produce(topic, value=f"a{i}".encode(), partition=i % 6)
    p.abort_transaction(30)
    # A last committed record per partition, so a reader that saw it has passed the abort.
    p.begin_transaction()
    for part in range(6):
        p.produce(topic, value=f"end{part}".encode(), partition=part)
    p.commit_transaction(30)

    c = Consumer({"bootstrap.servers": local.nodes[2], "group.id": "rc-" + topic,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(6)])
    got = []
    end = time.time() + 40
    while sum(v.startswith(b"end") for v in got) < 6 and time.time() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    committed = [v for v in got if v.startswith(b"c")]
    aborted = [v for v in got if v.startswith(b"a")]
    assert len(committed) == 60 and not aborted, (len(committed), aborted[:5], len(got))


def test_the_lesson_examples_against_the_cluster(local):
    if not os.path.exists(EXAMPLES):
        pytest.skip(f"{EXAMPLES} not present")
    for script in ("basic_producer.py", "keyed_producer.py", "group_consumer.py",
                   "eos_read_process_write.py"):
        r = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)],
                           env={**os.environ, "BOOTSTRAP": local.nodes[1]},
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0 and "OK" in r.stdout, script + "\n" + r.stdout + r.stderr


def admin_addr(local, n):
    with open(os.path.join(local.dir, f"node-{n}", "strand.toml")) as f:
        line = next(l for l in f if l.startswith('"admin.listen"'))
    return line.split("=", 1)[1].strip().strip('"')


def cluster_status(local, n):
    with urllib.request.urlopen(f"http://{admin_addr(local, n)}/v1/cluster", timeout=5) as r:
        return json.load(r)


def test_the_quorum_is_described_and_every_image_is_equal(local):
    def same():
        s = [cluster_status(local, n) for n in (1, 2, 3)]
        return s if len({x["image_digest"] for x in s}) == 1 and len(
            {x["applied_offset"] for x in s}) == 1 else None
    s = until("equal images (digest and applied offset) on every node", same)
    assert s[0]["topics"] >= 3, s[0]
    assert len({x["leader"] for x in s}) == 1 and s[0]["leader"] in (1, 2, 3), s
    leader = next(x for x in s if x["node_id"] == x["leader"])
    assert sorted(v["node_id"] for v in leader["voters"]) == [1, 2, 3], leader
    # The same through `strand cluster info --json` (DescribeQuorum + each broker's digest).
    r = subprocess.run([BINARY, "cluster", "info", "--json", "--brokers", local.nodes[0]],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    info = json.loads(r.stdout)
    assert info["image_digests_equal"], info
    assert sorted(b["id"] for b in info["brokers"] if b["state"] == "live") == [1, 2, 3], info
    assert {b["image_digest"] for b in info["brokers"]} == {s[0]["image_digest"]}, info
    assert info["quorum"]["leader"] == s[0]["leader"], info
    assert sorted(v["id"] for v in info["quorum"]["voters"]) == [1, 2, 3], info
    if HAVE_JAVA:
        r = subprocess.run(["java", "-cp", os.path.join(LIBS, "*"),
                            "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server",
                            local.nodes[0], "describe", "--status"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert f"LeaderId:               {s[0]['leader']}" in r.stdout, r.stdout
        assert "CurrentVoters:" in r.stdout, r.stdout


def test_controller_killed_another_takes_over_and_the_node_comes_back(local):
    old = local.metadata(1).controller_id
    survivor = next(n for n in (1, 2, 3) if n != old)
    behind = cluster_status(local, old)["commit_index"]
    os.kill(local.pid(old), signal.SIGKILL)
    killed_at = time.time()
    new = until("a new controller", lambda: (lambda c: c if c not in (-1, old) else None)(
        local.metadata(survivor).controller_id), limit_s=30)
    took = time.time() - killed_at
    print(f"controller {old} killed: node {new} is controller after {took:.2f} s (seen by a client)")
    assert took < 10, took

    topic = "after-" + uuid.uuid4().hex[:6]
    create(local, survivor, topic, 6)
    # Until broker.session.timeout.ms passes the killed node is not fenced yet, so placement
    # may still give it partitions (as Kafka's would): with one replica they are offline
    # until it returns.
    until("the new topic listed", lambda: len(
        local.metadata(survivor, topic).topics[topic].partitions) == 6)

    # More than a snapshot's worth of metadata changes while it is away, so the voters'
    # logs are compacted past where the killed node stopped: it must catch up from a snapshot.
    admin = local.admin(survivor)
    churn = [f"while-away-{uuid.uuid4().hex[:6]}-{i}" for i in range(1100)]
    for i in range(0, len(churn), 275):
        for f in admin.create_topics([NewTopic(n, 1, 1) for n in churn[i:i + 275]],
                                     operation_timeout=60).values():
            f.result(timeout=120)

    log = open(os.path.join(local.dir, f"node-{old}", "strand.log"), "ab")
    subprocess.Popen([BINARY, "serve", "--config",
                      os.path.join(local.dir, f"node-{old}", "strand.toml")],
                     stdout=log, stderr=subprocess.STDOUT)
    until("the restarted node listed again", lambda: old in local.metadata(survivor).brokers,
          limit_s=60)
    until("its pid file rewritten", lambda: alive(local.pid(old)))
    until("every partition of the new topic led by a live node", lambda: all(
        p.leader in (1, 2, 3) for p in local.metadata(survivor, topic).topics[topic]
        .partitions.values()), limit_s=60)
    def restored_past():
        at = [int(line.split("index=")[1].split()[0]) for line in local.log(old).splitlines()
              if "metadata image restored from a snapshot" in line and "index=" in line]
        return max(at) if at and max(at) > behind else None
    restored = until("the restarted node restored from a snapshot taken while it was away",
                     restored_past, limit_s=60)
    until("the restarted node's image equal to the others'", lambda: len(
        {cluster_status(local, n)["image_digest"] for n in (1, 2, 3)}) == 1, limit_s=60)
    print(f"node {old} stopped at {behind}, restored from a snapshot at {restored}")
    # And it serves its partitions again: every partition of the new topic takes a record.
    until(f"node {old} listed by itself", lambda: old in local.metadata(old).brokers, limit_s=60)
    errors = []
    p = Producer({"bootstrap.servers": local.nodes[survivor - 1], "acks": "all",
                  "message.timeout.ms": 30000})
    for q in range(6):
        p.produce(topic, value=b"back", partition=q,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(40) == 0 and not errors, errors


def test_ctrl_c_stops_every_node(local):
    pids = [local.pid(n) for n in (1, 2, 3)]
    assert all(alive(p) for p in pids)
    local.proc.send_signal(signal.SIGINT)
    local.proc.wait(timeout=40)
    rest = local.proc.stdout.read()
    assert local.proc.returncode == 0, rest
    until("every node gone", lambda: not any(alive(p) for p in pids), limit_s=10)
