"""kafka-python against a real strand: admin, produce with acks=all, assign + seek, offsets
by time, delete."""
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError


def test_admin_produce_consume_delete(broker):
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 3, 1)])
    try:
        admin.create_topics([NewTopic(topic, 3, 1)])
        raise AssertionError("creating a topic twice must fail")
    except TopicAlreadyExistsError:
        pass
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    futures = [p.send(topic, key=str(i).encode(), value=b"x" * 100) for i in range(300)]
    p.flush()
    offsets = [f.get(timeout=10).offset for f in futures]
    assert all(o >= 0 for o in offsets)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                      consumer_timeout_ms=3000)
    parts = [TopicPartition(topic, i) for i in range(3)]
    c.assign(parts)
    c.seek_to_beginning()
    assert sum(1 for _ in c) == 300
    end = c.end_offsets(parts)
    assert sum(end.values()) == 300
    assert c.beginning_offsets(parts) == {tp: 0 for tp in parts}
    found = c.offsets_for_times({parts[0]: 0})
    assert found[parts[0]].offset == 0
    assert found[parts[0]].timestamp > 1_600_000_000_000, "the batch's timestamp, not the query's"
    c.close()
    admin.delete_topics([topic])
    assert topic not in admin.list_topics()
