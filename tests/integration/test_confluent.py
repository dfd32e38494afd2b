"""confluent-kafka (librdkafka) against a real strand: keys, ordering, acks, compression,
idempotence, consuming from earliest."""
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def topic_name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(broker, name, partitions):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(timeout=10)


def produce(broker, topic, records, **conf):
    acked, errors = [], []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **conf})

    def report(err, msg):
        if err:
            errors.append(err)
        else:
            acked.append((msg.key(), msg.value(), msg.partition(), msg.offset()))

    for key, value in records:
        p.produce(topic, key=key, value=value, on_delivery=report)
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors
    return acked


def consume_all(broker, topic, expected, timeout=30):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "it-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    md = c.list_topics(topic, timeout=10)
    c.assign([TopicPartition(topic, p, -2) for p in md.topics[topic].partitions])
    out = []
    deadline = time.time() + timeout
    while len(out) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            continue
        out.append((m.key(), m.value(), m.partition(), m.offset()))
    c.close()
    return out


def test_keys_map_to_one_partition_in_order(broker):
    topic = topic_name("keys")
    create(broker, topic, 6)
    records = [(f"user-{i % 10}".encode(), f"event-{i}".encode()) for i in range(600)]
    acked = produce(broker, topic, records)
    part_of = {}
    for key, _, partition, _ in acked:
        assert part_of.setdefault(key, partition) == partition, "a key moved partition"
    got = consume_all(broker, topic, len(records))
    assert sorted(v for _, v, _, _ in got) == sorted(v for _, v in records)
    by_key = {}
    for key, value, _, _ in got:
        by_key.setdefault(key, []).append(int(value.split(b"-")[1]))
    for key, seq in by_key.items():
        assert seq == sorted(seq), f"{key} out of order"


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks_settings(broker, acks):
    topic = topic_name(f"acks{acks}")
    create(broker, topic, 2)
    records = [(None, f"v{i}".encode()) for i in range(200)]
    produce(broker, topic, records, acks=acks)
    assert len(consume_all(broker, topic, 200)) == 200


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(broker, codec):
    topic = topic_name(codec)
    records = [(str(i).encode(), (f"payload {i} " * 20).encode()) for i in range(500)]
    produce(broker, topic, records, **{"compression.type": codec})
    got = consume_all(broker, topic, 500)
    assert sorted(v for _, v, _, _ in got) == sorted(v for _, v in records)


def test_idempotent_producer_no_duplicates(broker):
    topic = topic_name("idem")
    create(broker, topic, 3)
    records = [(str(i).encode(), str(i).encode()) for i in range(2000)]
    produce(broker, topic, records, **{"enable.idempotence": True, "acks": "all",
                                        "max.in.flight.requests.per.connection": 5,
                                        "batch.num.messages": 50})
    got = consume_all(broker, topic, 2000)
    values = [v for _, v, _, _ in got]
    assert len(values) == len(set(values)) == 2000


def test_auto_created_topic_by_producer(broker):
    topic = topic_name("auto")
    produce(broker, topic, [(None, b"hello")])
    assert consume_all(broker, topic, 1)[0][1] == b"hello"
