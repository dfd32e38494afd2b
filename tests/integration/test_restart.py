"""Acknowledged messages survive a broker SIGKILL and restart."""
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition


def test_acked_messages_survive_kill9(fresh_broker):
    b = fresh_broker.start()
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    acked = []
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(3000):
        p.produce(topic, key=str(i % 5).encode(), value=f"m{i}".encode(),
                  on_delivery=lambda err, m: err is None and acked.append(m.value()))
        p.poll(0)
    assert p.flush(30) == 0
    assert len(acked) == 3000
    b.kill9()
    b.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "r", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, -2)])
    got = []
    deadline = time.time() + 30
    while len(got) < 3000 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert sorted(got) == sorted(acked)
