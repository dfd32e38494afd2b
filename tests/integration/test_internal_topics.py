"""The internal topics (`__consumer_offsets`, `__transaction_state`) belong to the
coordinators: clients cannot delete them, write to them or change their partition count, and
committed offsets survive every such attempt (as in Kafka)."""
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

INTERNAL = ["__consumer_offsets", "__transaction_state"]


def test_internal_topics_cannot_be_deleted_written_or_repartitioned(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"it-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)

    for name, f in admin.delete_topics(INTERNAL).items():
        with pytest.raises(KafkaException) as e:
            f.result(10)
        assert e.value.args[0].code() == KafkaError.INVALID_REQUEST, name
    for name, f in admin.create_partitions([NewPartitions(n, 60) for n in INTERNAL]).items():
        with pytest.raises(KafkaException) as e:
            f.result(10)
        assert e.value.args[0].code() == KafkaError.INVALID_REQUEST, name

    reports = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    for name in INTERNAL:
        p.produce(name, key=b"k", value=b"poison", partition=0,
                  on_delivery=lambda err, msg: reports.append(err))
    p.flush(15)
    assert len(reports) == 2
    assert all(r is not None and r.code() == KafkaError.TOPIC_EXCEPTION for r in reports), reports

    assert set(INTERNAL) <= set(admin.list_topics(timeout=10).topics)
    assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 42
    c.close()
