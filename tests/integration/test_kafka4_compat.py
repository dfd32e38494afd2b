"""Behaviours where Strand once differed from Apache Kafka 4.x, each checked with a real
client against a real strand process: confluent-kafka (librdkafka), kafka-python, the Java
client and Kafka's own tools (4.4.0 jars from Maven Central)."""
import glob
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import uuid

import pytest
from confluent_kafka import (Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions,
                             ConsumerGroupType, KafkaError,
                             KafkaException, Producer, TopicCollection, TopicPartition)
from confluent_kafka.admin import (AclOperation, AdminClient, AlterConfigOpType,
                                   ConfigEntry, ConfigResource,
                                   NewPartitions, NewTopic, OffsetSpec)

from conftest import ROOT, Broker

KAFKA_LIBS = os.path.join(ROOT, "target", "kafka-libs")
JAVA_LIBS = os.path.join(ROOT, "target", "java-libs")
needs_java = pytest.mark.skipif(
    shutil.which("java") is None or not glob.glob(os.path.join(KAFKA_LIBS, "kafka-tools-*.jar")),
    reason="java or Kafka's jars (scripts/test fetches them with Maven) are missing")


@pytest.fixture(scope="module")
def dbroker():
    """One broker for the module, logging group events at debug level."""
    tmp = tempfile.mkdtemp(prefix="strand-compat-")
    b = Broker(os.path.join(tmp, "data"), env={"STRAND_LOG": "info,strand_broker=debug"}).start()
    yield b
    b.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def admin(b):
    """One AdminClient per broker, kept alive: a temporary one is destroyed before its futures
    resolve (they then fail with _DESTROY)."""
    if getattr(b, "admin", None) is None:
        b.admin = AdminClient({"bootstrap.servers": b.bootstrap})
    return b.admin


def new_topic(b, partitions=4, messages=0, **configs):
    topic = f"c4-{uuid.uuid4().hex[:8]}"
    admin(b).create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(10)
    if messages:
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(messages):
            p.produce(topic, key=str(i), value=f"m{i}", partition=i % partitions)
        assert p.flush(30) == 0
    return topic


def consumer(b, group, **extra):
    return Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                     "partition.assignment.strategy": "range", **extra})


def poll_until(consumers, done, timeout=30, sink=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error() and sink is not None:
                sink.append((m.topic(), m.partition(), m.offset()))
        if done():
            return
    raise AssertionError(f"timed out: {[c.assignment() for c in consumers]}")


def parts(c):
    return sorted(tp.partition for tp in c.assignment())


def test_commit_in_a_revoke_callback_while_a_member_joins_is_kept(dbroker):
    """Kafka accepts commits of the current generation while the group prepares a rebalance:
    that is when clients commit in their revoke callbacks. Refused, the partition's next owner
    reads those records again."""
    topic = new_topic(dbroker, 4, 200)
    group = f"g-{uuid.uuid4().hex[:8]}"
    seen, failures, commits = [], [], []

    def on_revoke(c, partitions):
        try:
            c.commit(asynchronous=False)
            commits.append(partitions)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:  # nothing new since the last one
                failures.append(e)

    a = consumer(dbroker, group)
    a.subscribe([topic], on_revoke=on_revoke)
    poll_until([a], lambda: len(seen) >= 200, sink=seen)
    b = consumer(dbroker, group)
    b.subscribe([topic])
    poll_until([a, b], lambda: parts(a) and parts(b) and len(parts(a) + parts(b)) == 4, sink=seen)
    end = time.time() + 3
    while time.time() < end:
        for c in (a, b):
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen.append((m.topic(), m.partition(), m.offset()))
    a.close()
    b.close()
    assert failures == [], f"commit in on_revoke failed: {failures}"
    assert commits, "the revoke callback committed"
    assert len(seen) == 200, f"{len(seen) - len(set(seen))} records delivered twice"
    assert "rebalance started" in dbroker.log()


def test_a_restarted_static_member_keeps_its_partitions_with_no_revoke_anywhere(dbroker):
    topic = new_topic(dbroker, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events = []

    def member(name):
        c = consumer(dbroker, group, **{"group.instance.id": name, "session.timeout.ms": 30000})
        c.subscribe([topic],
                    on_assign=lambda c, p: events.append((name, "assign", sorted(x.partition for x in p))),
                    on_revoke=lambda c, p: events.append((name, "revoke", sorted(x.partition for x in p))))
        return c

    s1, s2 = member("s1"), member("s2")
    poll_until([s1, s2], lambda: parts(s1) and parts(s2) and len(parts(s1) + parts(s2)) == 4)
    before = parts(s1)
    s1.close()  # a static member does not leave the group when it closes
    mark = len(events)
    s1 = member("s1")
    poll_until([s1, s2], lambda: parts(s1) == before, timeout=20)
    end = time.time() + 3
    while time.time() < end:
        s1.poll(0.05)
        s2.poll(0.05)
    after = events[mark:]
    assert after == [("s1", "assign", before)], after
    s1.close()
    s2.close()


def test_a_second_process_with_the_same_instance_id_fences_the_first(dbroker):
    topic = new_topic(dbroker, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    errors = []
    first = consumer(dbroker, group, **{"group.instance.id": "dup",
                                         "error_cb": lambda e: errors.append(e)})
    first.subscribe([topic])
    poll_until([first], lambda: len(parts(first)) == 2)
    second = consumer(dbroker, group, **{"group.instance.id": "dup"})
    second.subscribe([topic])
    poll_until([second], lambda: len(parts(second)) == 2)

    # librdkafka treats FENCED_INSTANCE_ID as fatal: reported to error_cb and from poll.
    deadline = time.time() + 15
    while time.time() < deadline and not errors:
        try:
            m = first.poll(0.1)
            if m is not None and m.error():
                errors.append(m.error())
        except KafkaException as e:
            errors.append(e.args[0])
    assert any("fenced" in str(e).lower() for e in errors), errors
    second.close()
    assert "static member replaced" in dbroker.log()
    assert "FencedInstanceId" in dbroker.log()


@needs_java
def test_leave_group_by_instance_id_removes_a_static_member(dbroker):
    topic = new_topic(dbroker, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = consumer(dbroker, group, **{"group.instance.id": "gone", "session.timeout.ms": 60000})
    c.subscribe([topic])
    poll_until([c], lambda: parts(c) == [0])
    c.close()  # static: still a member until its session times out
    desc = admin(dbroker).describe_consumer_groups([group])[group].result(10)
    assert len(desc.members) == 1
    cp = os.path.join(JAVA_LIBS, "*")
    r = subprocess.run(["java", "-cp", cp, os.path.join(ROOT, "tests", "java", "RemoveStaticMember.java"),
                        dbroker.bootstrap, group, "gone"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"removed gone from {group}" in r.stdout and f"deleted {group}" in r.stdout, r.stdout


def test_metadata_marks_internal_topics_and_patterns_skip_them(dbroker):
    from kafka.admin import KafkaAdminClient
    topic = new_topic(dbroker, 1)
    ka = KafkaAdminClient(bootstrap_servers=dbroker.bootstrap)
    described = {t.get("topic", t.get("name")): t["is_internal"] for t in
                 ka.describe_topics(["__consumer_offsets", "__transaction_state", topic])}
    ka.close()
    assert described == {"__consumer_offsets": True, "__transaction_state": True, topic: False}
    # The Java client and kafka-python leave internal topics out of pattern subscriptions
    # (exclude.internal.topics), by the flag.
    from kafka import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=dbroker.bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}",
                      auto_offset_reset="earliest")
    c.subscribe(pattern="^.*")
    deadline = time.time() + 30
    while topic not in {tp.topic for tp in c.assignment()} and time.time() < deadline:
        c.poll(timeout_ms=100)
    assigned = {tp.topic for tp in c.assignment()}
    c.close()
    assert topic in assigned
    assert not assigned & {"__consumer_offsets", "__transaction_state"}, assigned


def test_commits_to_a_topic_that_does_not_exist_are_refused(dbroker):
    topic = new_topic(dbroker, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = consumer(dbroker, group)
    with pytest.raises(KafkaException) as e:
        c.commit(offsets=[TopicPartition("no-such-topic-c4", 0, 5), TopicPartition(topic, 0, 7)],
                 asynchronous=False)
    assert e.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The partition of the topic that exists was committed all the same.
    assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 7
    c.close()
    # AlterConsumerGroupOffsets (the admin API) answers the same.
    f = admin(dbroker).alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition("no-such-topic-c4", 0, 1)])])[group]
    with pytest.raises(KafkaException) as e:
        for tp in f.result(10).topic_partitions:
            if tp.error:
                raise KafkaException(tp.error)
    assert e.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_an_offset_commit_with_a_generation_for_an_unknown_group_is_illegal(dbroker):
    """OffsetCommit v2 on a raw socket: a group that does not exist accepts only commits with
    generation -1 (ILLEGAL_GENERATION otherwise, as in Kafka)."""
    topic = new_topic(dbroker, 1)

    def s(text):
        return struct.pack(">h", len(text)) + text.encode()

    def commit(group, generation):
        body = (struct.pack(">hhi", 8, 2, 42) + s("c4") + s(group) + struct.pack(">i", generation)
                + s("m" if generation >= 0 else "") + struct.pack(">q", -1) + struct.pack(">i", 1)
                + s(topic) + struct.pack(">i", 1) + struct.pack(">iq", 0, 1) + s(""))
        with socket.create_connection(("127.0.0.1", dbroker.port), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = sock.recv(65536)
                assert chunk, "connection closed"
                data += chunk
        at = 8 + 4  # size, correlation id, topics count
        at += 2 + struct.unpack(">h", data[at:at + 2])[0] + 4 + 4  # name, partitions count, index
        return struct.unpack(">h", data[at:at + 2])[0]
    assert commit(f"nope-{uuid.uuid4().hex[:6]}", 5) == 22  # ILLEGAL_GENERATION
    assert commit(f"simple-{uuid.uuid4().hex[:6]}", -1) == 0


def describe(b, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: v.value for k, v in admin(b).describe_configs([res])[res].result(10).items()}


def test_every_kafka_topic_config_is_accepted_validated_and_described(dbroker):
    topic = new_topic(dbroker, 1, **{"compression.type": "zstd", "preallocate": "true",
                                      "message.timestamp.type": "LogAppendTime",
                                      "unclean.leader.election.enable": "false"})
    got = describe(dbroker, topic)
    assert got["compression.type"] == "zstd" and got["preallocate"] == "true"
    for name in ("segment.index.bytes", "file.delete.delay.ms", "local.retention.ms",
                 "remote.storage.enable", "max.decompressed.message.bytes"):
        assert name in got, name
    for bad in ({"compression.type": "brotli"}, {"no.such.config": "1"},
                {"min.cleanable.dirty.ratio": "2"}):
        t = f"c4-bad-{uuid.uuid4().hex[:6]}"
        with pytest.raises(KafkaException) as e:
            admin(dbroker).create_topics([NewTopic(t, 1, 1, config=bad)])[t].result(10)
        assert e.value.args[0].code() == KafkaError.INVALID_CONFIG, bad
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND)])
    admin(dbroker).incremental_alter_configs([res])[res].result(10)
    assert describe(dbroker, topic)["cleanup.policy"] == "delete,compact"
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete",
                    incremental_operation=AlterConfigOpType.SUBTRACT)])
    admin(dbroker).incremental_alter_configs([res])[res].result(10)
    assert describe(dbroker, topic)["cleanup.policy"] == "compact"
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
    with pytest.raises(KafkaException):
        admin(dbroker).incremental_alter_configs([res])[res].result(10)
    # The legacy AlterConfigs API replaces the topic's whole set of overrides.
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "123456"})
    admin(dbroker).alter_configs([res])[res].result(10)
    got = describe(dbroker, topic)
    assert got["retention.ms"] == "123456"
    assert got["compression.type"] == "producer", "not named: back to the default"


def test_list_offsets_by_max_timestamp_and_by_time_inside_a_batch(dbroker):
    topic = new_topic(dbroker, 1)
    p = Producer({"bootstrap.servers": dbroker.bootstrap, "linger.ms": 500,
                  "compression.type": "gzip"})
    for i, ts in enumerate([1_000, 5_000, 3_000, 5_000]):
        p.produce(topic, value=f"v{i}", partition=0, timestamp=ts)
    assert p.flush(30) == 0
    tp = TopicPartition(topic, 0)

    def lookup(spec):
        r = admin(dbroker).list_offsets({tp: spec})[tp].result(10)
        return r.offset, r.timestamp
    assert lookup(OffsetSpec.max_timestamp()) == (1, 5_000)
    assert lookup(OffsetSpec.for_timestamp(2_000)) == (1, 5_000)
    assert lookup(OffsetSpec.for_timestamp(1_000)) == (0, 1_000)
    assert lookup(OffsetSpec.for_timestamp(9_000))[0] == -1
    assert lookup(OffsetSpec.latest())[0] == 4
    empty = new_topic(dbroker, 1)
    r = admin(dbroker).list_offsets({TopicPartition(empty, 0): OffsetSpec.max_timestamp()})
    assert r[TopicPartition(empty, 0)].result(10).offset == -1


def test_authorized_operations_are_kafkas_full_set_without_an_authorizer(dbroker):
    topic = new_topic(dbroker, 1)
    a = admin(dbroker)
    t = a.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(10)
    assert {AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
            AclOperation.ALTER_CONFIGS} <= set(t.authorized_operations)
    cl = a.describe_cluster(include_authorized_operations=True).result(10)
    assert {AclOperation.DESCRIBE, AclOperation.IDEMPOTENT_WRITE} <= set(cl.authorized_operations)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = consumer(dbroker, group)
    c.subscribe([topic])
    poll_until([c], lambda: parts(c) == [0])
    g = a.describe_consumer_groups([group], include_authorized_operations=True)[group].result(10)
    assert {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE} == set(g.authorized_operations)
    # ListGroups v5: every group is a classic one.
    listed = a.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(10)
    mine = [x for x in listed.valid if x.group_id == group]
    assert mine and mine[0].type == ConsumerGroupType.CLASSIC
    assert mine[0].state == ConsumerGroupState.STABLE
    listed = a.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(10)
    assert not listed.valid
    c.close()


def test_create_topics_and_partitions_with_replica_assignments(dbroker):
    a = admin(dbroker)
    topic = f"c4-{uuid.uuid4().hex[:8]}"
    a.create_topics([NewTopic(topic, 3, -1, replica_assignment=[[0], [0], [0]])])[topic].result(10)
    assert len(a.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    bad = f"c4-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as e:
        a.create_topics([NewTopic(bad, 2, -1, replica_assignment=[[0], [7]])])[bad].result(10)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    a.create_partitions([NewPartitions(topic, 5, replica_assignment=[[0], [0]])])[topic].result(10)
    assert len(a.list_topics(topic, timeout=10).topics[topic].partitions) == 5
    with pytest.raises(KafkaException) as e:
        a.create_partitions([NewPartitions(topic, 6, replica_assignment=[[3]])])[topic].result(10)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT


def kafka_tool(main_class, *args):
    return subprocess.run(["java", "-cp", os.path.join(KAFKA_LIBS, "*"), main_class, *args],
                          capture_output=True, text=True, timeout=120)


@needs_java
def test_kafka_4_4_tools_find_every_api_they_need_usable(dbroker):
    r = kafka_tool("org.apache.kafka.tools.BrokerApiVersionsCommand",
                   "--bootstrap-server", dbroker.bootstrap)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "UNUSABLE" not in r.stdout, r.stdout
    for api in ("Produce(0)", "Fetch(1)", "JoinGroup(11)", "ListGroups(16)",
                "DescribeGroups(15)", "AlterConfigs(33)"):
        line = next(x for x in r.stdout.splitlines() if api in x)
        assert "usable" in line, line
    # DescribeGroups at 4.4's version: an unknown group is reported as not existing.
    r = kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                   "--bootstrap-server", dbroker.bootstrap, "--describe", "--group", "no-such-group")
    out = r.stdout + r.stderr
    assert "GroupIdNotFoundException: Group no-such-group not found" in out or "does not exist" in out, out
