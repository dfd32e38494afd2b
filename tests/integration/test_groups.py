"""Consumer groups with confluent-kafka (classic protocol): the lesson's book-club picture —
each partition read by exactly one member, a fifth member idle, everyone resuming from the
committed bookmark after a broker restart."""
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def make_topic(broker, partitions=4, messages=400):
    topic = f"grp-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    produce(broker, topic, messages)
    return topic


def produce(broker, topic, messages):
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(messages):
        p.produce(topic, key=str(i % 17), value=f"m{i}")
    assert p.flush(30) == 0


def consumer(broker, group, **extra):
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **extra})


def settle(broker, group, consumers, partitions, timeout=30):
    """Polls everyone until the broker reports the group Stable with every consumer in it and
    the consumers' own assignments cover every partition exactly once. (Checking only the
    consumers' assignments is not enough: a member whose JoinGroup has not reached the broker
    yet looks the same as an idle one, and its join would rebalance everyone later.)"""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deadline = time.time() + timeout
    got = {id(c): [] for c in consumers}
    while time.time() < deadline:
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and not m.error():
                got[id(c)].append(m)
        owned = [set(tp.partition for tp in c.assignment()) for c in consumers]
        union = set().union(*owned)
        busy = sum(1 for o in owned if o)
        if not (union == set(range(partitions)) and sum(len(o) for o in owned) == partitions
                and busy == min(len(consumers), partitions)):
            continue
        desc = admin.describe_consumer_groups([group])[group].result(10)
        if desc.state == ConsumerGroupState.STABLE and len(desc.members) == len(consumers):
            return owned, got
    raise AssertionError(f"no stable assignment: {[c.assignment() for c in consumers]}")


@pytest.mark.parametrize("members", [1, 2, 4, 5])
def test_each_partition_has_one_owner_and_every_message_is_read_once(broker, members):
    # The group settles on an empty topic; then 400 messages arrive: with no member crashing
    # and no rebalance, each is read exactly once.
    topic = make_topic(broker, messages=0)
    group = f"book-club-{uuid.uuid4().hex[:6]}"
    consumers = [consumer(broker, group) for _ in range(members)]
    rebalances = []
    for c in consumers:
        c.subscribe([topic], on_assign=lambda _c, parts: rebalances.append(("assign", parts)),
                    on_revoke=lambda _c, parts: rebalances.append(("revoke", parts)))
    owned, got = settle(broker, group, consumers, 4)
    # A member's on_assign may still be queued for its next poll; it is not a new generation.
    del rebalances[:]
    if members == 5:
        assert sorted(len(o) for o in owned) == [0, 1, 1, 1, 1], owned
    else:
        assert all(len(o) == 4 // members for o in owned), owned
    assert not any(got.values())
    produce(broker, topic, 400)
    seen = []
    deadline = time.time() + 30
    while len(seen) < 400 and time.time() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen.append(m.value())
    late = [(kind, [p.partition for p in parts]) for kind, parts in rebalances
            if kind == "revoke"]
    for c in consumers:
        c.close()
    assert not late, f"the group rebalanced after it was stable: {late}"
    assert len(seen) == 400 and len(set(seen)) == 400


def test_members_starting_together_get_one_generation(make_broker):
    # group.initial.rebalance.delay.ms (Kafka's default, 3 s): the first member of an empty
    # group waits for the others, so three consumers starting together are assigned once —
    # no assign/revoke/assign storm (which, without commits, makes consumers re-read).
    b = make_broker(config={"group.initial.rebalance.delay.ms": 3000}).start()
    topic = make_topic(b, messages=0)
    group = f"together-{uuid.uuid4().hex[:6]}"
    events = []
    consumers = [consumer(b, group) for _ in range(3)]
    for i, c in enumerate(consumers):
        c.subscribe([topic], on_assign=lambda _c, parts, i=i: events.append((i, "assign")),
                    on_revoke=lambda _c, parts, i=i: events.append((i, "revoke")))
    started = time.time()
    settle(b, group, consumers, 4)
    waited = time.time() - started
    before_close = list(events)
    for c in consumers:
        c.close()
    assert sorted(before_close) == [(0, "assign"), (1, "assign"), (2, "assign")], before_close
    assert waited >= 2.5, f"stable after {waited:.1f}s: the initial delay did not hold the join"


def test_committed_offsets_survive_a_broker_restart(fresh_broker):
    b = fresh_broker.start()
    topic = make_topic(b, partitions=2, messages=100)
    group = f"bookmark-{uuid.uuid4().hex[:6]}"
    c = consumer(b, group)
    c.subscribe([topic])
    read = []
    deadline = time.time() + 30
    while len(read) < 60 and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            read.append(m)
    c.commit(offsets=[TopicPartition(m.topic(), m.partition(), m.offset() + 1) for m in read[-60:]],
             asynchronous=False)
    committed = {tp.partition: tp.offset for tp in c.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)}
    c.close()
    b.kill9()
    b.start()
    c = consumer(b, group)
    after = {tp.partition: tp.offset for tp in c.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)}
    assert after == committed
    c.subscribe([topic])
    rest = []
    deadline = time.time() + 30
    while time.time() < deadline and len(rest) < 100 - sum(max(o, 0) for o in committed.values()):
        m = c.poll(0.2)
        if m is not None and not m.error():
            rest.append(m)
    c.close()
    first_read = {(m.partition(), m.offset()) for m in read}
    assert not first_read & {(m.partition(), m.offset()) for m in rest if m.offset() < committed.get(m.partition(), 0)}
    assert all(m.offset() >= committed[m.partition()] for m in rest)
