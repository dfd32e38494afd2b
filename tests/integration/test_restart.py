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


def test_sigterm_right_after_acks_1_deliveries_loses_nothing(make_broker):
    """SIGTERM is a clean stop (broker/src/shutdown.rs): writes are refused, every partition
    flushed, exit code 0. acks=1 batches acknowledged within the last `log.flush.interval.ms`
    sit in a segment writer's buffer; before, SIGTERM killed the process like kill -9 and
    they were lost."""
    b = make_broker().start()
    topic = f"sigterm-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 0})
    acked = []
    for i in range(300):
        p.produce(topic, value=b"v%d" % i,
                  on_delivery=lambda err, m: acked.append(m.value()) if err is None else None)
        p.poll(0.002)
    assert p.flush(15) == 0
    del p
    b.proc.terminate()
    assert b.proc.wait(20) == 0, "a clean stop exits 0"
    assert "stopped cleanly" in b.log()
    b.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "sigterm",
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = set(), time.time() + 30
    while len(got) < len(acked) and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.add(m.value())
    c.close()
    assert len(acked) == 300
    assert set(acked) <= got, f"{len(set(acked) - got)} acknowledged records lost on SIGTERM"
