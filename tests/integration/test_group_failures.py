"""A member killed with SIGKILL mid-stream: after its session times out its partition moves to
another member, which resumes from the last committed offset. Commit-after-process loses
nothing (the held message is processed twice); commit-before-process loses the held message —
the lesson's at-least-once and at-most-once, both asserted. Also: how fast a 4-member group
rebalances after a LeaveGroup."""
import os
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(__file__)


def topic_with(broker, partitions, messages):
    topic = f"fail-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(messages):
        p.produce(topic, value=f"m{i}")
    assert p.flush(30) == 0
    return topic


@pytest.mark.parametrize("mode", ["at-least-once", "at-most-once"])
def test_killed_member_hands_over_from_the_last_commit(broker, mode):
    topic = topic_with(broker, 1, 20)
    group = f"fail-{uuid.uuid4().hex[:6]}"
    child = subprocess.Popen([sys.executable, os.path.join(HERE, "group_member.py"),
                              broker.bootstrap, topic, group, mode],
                             stdout=subprocess.PIPE, text=True)
    processed = []
    deadline = time.time() + 60
    for line in child.stdout:
        if line.startswith("PROCESSED"):
            processed.append(line.split()[1])
        if line.strip() == "HOLD" or time.time() > deadline:
            break
    child.kill()  # SIGKILL, at the hold point
    child.wait()
    killed_at = time.time()
    survivor = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000})
    survivor.subscribe([topic])
    taken_over = []
    deadline = time.time() + 40
    while time.time() < deadline and "m19" not in taken_over:
        m = survivor.poll(0.5)
        if m is not None and not m.error():
            taken_over.append(m.value().decode())
    handover_s = time.time() - killed_at
    survivor.close()
    everything = {f"m{i}" for i in range(20)}
    print(f"{mode}: child processed {len(processed)}, survivor {len(taken_over)} after {handover_s:.1f}s")
    assert taken_over, "the partition never moved to the survivor"
    if mode == "at-least-once":
        assert set(processed) | set(taken_over) == everything, "at-least-once lost a message"
        assert "m5" in processed and "m5" in taken_over, "the held message is processed twice"
    else:
        assert "m5" not in processed and "m5" not in taken_over, "at-most-once: m5 is lost"
        assert set(processed) | set(taken_over) == everything - {"m5"}


def group_report(broker, group, members):
    """What the broker and each consumer think, for a failed assertion (this setup failed to
    settle within 30 s once in CI and never locally: the next failure should say why)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until the answer
    try:
        d = admin.describe_consumer_groups([group])[group].result(10)
        broker_view = (d.state, [(m.member_id, [tp.partition for tp in m.assignment.topic_partitions])
                                 for m in d.members])
    except Exception as e:  # the report must not hide the original failure
        broker_view = f"describe failed: {e!r}"
    return (f"broker: {broker_view}; consumers: "
            f"{[[tp.partition for tp in m.assignment()] for m in members]}")


def test_rebalance_after_leave_group_is_fast(broker):
    topic = topic_with(broker, 4, 0)
    group = f"leave-{uuid.uuid4().hex[:6]}"
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 100, "auto.offset.reset": "earliest"}
    members = [Consumer(conf) for _ in range(4)]
    for m in members:
        m.subscribe([topic])

    def stable(ms):
        owned = [len(m.assignment()) for m in ms]
        return sum(owned) == 4 and all(o > 0 for o in owned[:min(len(ms), 4)])

    deadline = time.time() + 30
    while not stable(members) and time.time() < deadline:
        for m in members:
            m.poll(0.05)
    assert stable(members), group_report(broker, group, members)
    leaving = members.pop()
    start = time.time()
    leaving.close()  # sends LeaveGroup
    while time.time() - start < 10:
        for m in members:
            m.poll(0.02)
        owned = [set(tp.partition for tp in m.assignment()) for m in members]
        if set().union(*owned) == {0, 1, 2, 3} and sum(len(o) for o in owned) == 4:
            break
    took = time.time() - start
    print(f"4-member group rebalanced after a LeaveGroup in {took * 1000:.0f} ms")
    for m in members:
        m.close()
    assert took < 1.0, f"rebalance took {took:.2f}s"
