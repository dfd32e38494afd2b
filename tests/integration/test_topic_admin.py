"""Topic administration with confluent-kafka's AdminClient: create, describe and alter configs,
add partitions, delete — with Kafka's config names and error codes."""
import contextlib
import resource
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewPartitions, NewTopic, ResourceType)


def test_topic_admin_round_trip(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"adm-{uuid.uuid4().hex[:8]}"
    fs = admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "60000"})])
    fs[topic].result(10)

    res = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "60000"
    assert not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete"

    alter = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([alter])[alter].result(10)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.bytes"].value == "1048576"
    assert configs["retention.ms"].is_default

    bad = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="INVALID_CONFIG.*retention.ms: expected an integer"):
        admin.incremental_alter_configs([bad])[bad].result(10)

    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5
    with pytest.raises(KafkaException):
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)

    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    with pytest.raises(KafkaException, match="REPLICATION_FACTOR"):
        admin.create_topics([NewTopic(topic + "x", 1, 3)])[topic + "x"].result(10)

    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics


@contextlib.contextmanager
def open_files_limit(soft):
    """Processes started inside get `soft` as their open-files limit (raising the hard limit
    where that is needed and allowed: root); skips the test where it is not allowed."""
    was = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, max(was[1], soft)))
    except (ValueError, OSError) as e:
        pytest.skip(f"cannot set the open-files limit to {soft}: {e}")
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(was[0], was[1]), was[1]))


def test_partitions_past_the_open_files_limit_are_refused(make_broker):
    """`ulimit -n` 2,000: 1,500 for connections, 256 reserved, the rest for partitions at 2
    files each: 122 partitions. More are refused with POLICY_VIOLATION naming the limit
    (before, they were created, failed to open, and accept() failed with EMFILE for
    everyone); the broker goes on serving."""
    with open_files_limit(2000):
        b = make_broker().start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    ok, big = f"fits-{uuid.uuid4().hex[:6]}", f"big-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(ok, 50, 1)], operation_timeout=30)[ok].result(timeout=30)
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(big, 400, 1)], operation_timeout=30)[big].result(timeout=30)
    err = e.value.args[0]
    assert err.code() == KafkaError.POLICY_VIOLATION, err
    assert "ulimit -n 2000" in err.str(), err.str()
    assert big not in admin.list_topics(timeout=10).topics
    assert ok in admin.list_topics(timeout=10).topics
