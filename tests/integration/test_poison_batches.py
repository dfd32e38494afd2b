"""Batches with a valid CRC but nonsense inside are refused at produce, as Kafka's
LogValidator refuses them: lying record counts and offset deltas, garbage records, a codec
flag on data that is not compressed that way, a decompression bomb. Sent on a raw socket
(no client would build them); afterwards a real client reads back exactly the good records."""
import gzip
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_raw
from kafka_raw import batch, record


def produce(broker, topic, records):
    return kafka_raw.produce(broker.port, topic, records)


INVALID_RECORD, CORRUPT_MESSAGE = 87, 2


def test_poison_batches_are_refused_and_readers_see_only_good_records(broker):
    topic = f"poison-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    one = record(0, b"k", b"good-0")
    assert produce(broker, topic, batch(one, 1, 0)) == 0
    cases = {
        "count 2^31-1 with one record": (batch(one, 2**31 - 1, 0), INVALID_RECORD),
        "lastOffsetDelta 2^31-1": (batch(one, 1, 2**31 - 1), INVALID_RECORD),
        "count and delta both lie": (batch(one, 2**31 - 1, 2**31 - 2), INVALID_RECORD),
        "random bytes as records": (batch(bytes(range(7, 250)), 1, 0), INVALID_RECORD),
        "gzip flag on plain records": (batch(one, 1, 0, attributes=1), CORRUPT_MESSAGE),
        "gzip bomb": (batch(gzip.compress(record(0, b"k", bytes(100 << 20)), 1), 1, 0,
                            attributes=1), INVALID_RECORD),
    }
    for name, (bad, code) in cases.items():
        assert produce(broker, topic, bad) == code, name
    two = record(0, b"k", b"good-1") + record(1, b"k", b"good-2")
    assert produce(broker, topic, batch(two, 2, 1)) == 0

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    for _ in range(100):
        m = c.poll(0.1)
        if m is not None and not m.error():
            got.append((m.offset(), m.value()))
        if len(got) == 3:
            break
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert got == [(0, b"good-0"), (1, b"good-1"), (2, b"good-2")]
    assert (lo, hi) == (0, 3), "no refused batch moved the log end"
