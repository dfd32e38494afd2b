"""KIP-227 incremental fetch sessions on the wire (Fetch v7, built by hand): a full fetch opens
a session, incremental fetches name only what moved and get back only what changed, stale
epochs and unknown sessions get errors 71 and 70, forgotten partitions leave the session, and
epoch -1 closes it. (The Java client, in test_java, uses sessions for every consumer.)"""
import socket
import struct
import uuid

from kafka import KafkaAdminClient
from kafka.admin import NewTopic

import kafka_raw
from kafka_raw import batch, record, s

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


def fetch_v7(session_id, epoch, topic, partitions, forgotten=(), max_wait_ms=50, cid=1,
             max_bytes=1 << 20):
    """Fetch v7 naming `partitions` [(partition, offset)] of `topic`, forgetting `forgotten`;
    the response holds at most `max_bytes` of records (past the first batch)."""
    parts = b"".join(struct.pack(">iqqi", p, o, -1, 1 << 20) for p, o in partitions)
    topics = (struct.pack(">i", 1) + s(topic) + struct.pack(">i", len(partitions)) + parts
              if partitions else struct.pack(">i", 0))
    gone = (struct.pack(">i", 1) + s(topic) + struct.pack(">i", len(forgotten))
            + b"".join(struct.pack(">i", p) for p in forgotten)
            if forgotten else struct.pack(">i", 0))
    body = (struct.pack(">iiiib", -1, max_wait_ms, 1, max_bytes, 0)
            + struct.pack(">ii", session_id, epoch) + topics + gone)
    return kafka_raw.framed(1, 7, cid, body)


def parse_fetch_v7(body):
    """(error, session id, {partition: (error, high watermark, record bytes)})."""
    at = 4 + 4  # correlation id, throttle
    error, session_id = struct.unpack(">hi", body[at:at + 6])
    at += 6
    out = {}
    (ntopics,) = struct.unpack(">i", body[at:at + 4])
    at += 4
    for _ in range(ntopics):
        at += 2 + struct.unpack(">h", body[at:at + 2])[0]
        (nparts,) = struct.unpack(">i", body[at:at + 4])
        at += 4
        for _ in range(nparts):
            p, err, hw, _lso, _start = struct.unpack(">ihqqq", body[at:at + 30])
            at += 30
            (naborted,) = struct.unpack(">i", body[at:at + 4])
            at += 4 + max(naborted, 0) * 16
            (nbytes,) = struct.unpack(">i", body[at:at + 4])
            at += 4 + max(nbytes, 0)
            out[p] = (err, hw, max(nbytes, 0))
    return error, session_id, out


def test_incremental_fetch_session(broker):
    topic = f"fs-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    one = batch(record(0, b"k", b"v"), 1, 0)
    assert kafka_raw.produce(broker.port, topic, one, partition=0) == 0

    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        def fetch(*args, **kwargs):
            sock.sendall(fetch_v7(*args, **kwargs))
            return parse_fetch_v7(kafka_raw.read_frame(sock))

        # A full fetch (epoch 0) opens a session and answers every partition.
        err, sid, parts = fetch(0, 0, topic, [(0, 0), (1, 0), (2, 0)])
        assert err == 0 and sid > 0, (err, sid)
        assert sorted(parts) == [0, 1, 2]
        assert parts[0][2] > 0 and parts[1][2] == 0, parts

        # Incremental: partition 0 moved to offset 1; nothing changed anywhere.
        err, sid2, parts = fetch(sid, 1, topic, [(0, 1)])
        assert (err, sid2, parts) == (0, sid, {}), parts

        # New records on partition 2: only it comes back, from the offset the session holds.
        assert kafka_raw.produce(broker.port, topic, one, partition=2) == 0
        err, _, parts = fetch(sid, 2, topic, [])
        assert err == 0 and sorted(parts) == [2] and parts[2][1] == 1 and parts[2][2] > 0, parts

        # The same epoch again, and an unknown session.
        assert fetch(sid, 2, topic, [])[0] == INVALID_FETCH_SESSION_EPOCH
        assert fetch(sid + 1, 1, topic, [])[0] == FETCH_SESSION_ID_NOT_FOUND

        # Forgotten partitions leave the session: new records there are not answered.
        err, _, parts = fetch(sid, 3, topic, [], forgotten=[2])
        assert err == 0, err
        assert kafka_raw.produce(broker.port, topic, one, partition=2) == 0
        err, _, parts = fetch(sid, 4, topic, [])
        assert (err, parts) == (0, {}), parts
        # ... and a partition named again comes back into it.
        err, _, parts = fetch(sid, 5, topic, [(2, 1)])
        assert err == 0 and sorted(parts) == [2] and parts[2][1] == 2, parts

        # Epoch -1 closes the session (a sessionless answer, session id 0).
        err, sid3, parts = fetch(sid, -1, topic, [(0, 0)])
        assert (err, sid3) == (0, 0) and sorted(parts) == [0]
        assert fetch(sid, 6, topic, [])[0] == FETCH_SESSION_ID_NOT_FOUND


def test_a_spent_response_budget_still_answers_every_partition(broker):
    """fetch.max.bytes spent by the first batch: a full fetch still lists every partition (its
    offsets, no records), and each incremental fetch then serves the next partition in turn."""
    topic = f"fs-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 4, 1)])
    admin.close()
    big = batch(record(0, b"k", b"v" * 4000), 1, 0)
    for p in range(4):
        assert kafka_raw.produce(broker.port, topic, big, partition=p) == 0

    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        def fetch(*args, **kwargs):
            sock.sendall(fetch_v7(*args, max_bytes=100, **kwargs))
            return parse_fetch_v7(kafka_raw.read_frame(sock))

        err, sid, parts = fetch(0, 0, topic, [(p, 0) for p in range(4)])
        assert err == 0 and sid > 0, (err, sid)
        assert sorted(parts) == [0, 1, 2, 3], parts
        assert all(hw == 1 for _, hw, _ in parts.values()), parts
        served = [p for p, (_, _, n) in parts.items() if n > 0]
        assert len(served) == 1, parts
        for epoch in range(1, 4):
            err, _, parts = fetch(sid, epoch, topic, [(served[-1], 1)])
            got = [p for p, (_, _, n) in parts.items() if n > 0]
            assert err == 0 and len(got) == 1 and got[0] not in served, (served, parts)
            served += got
        assert sorted(served) == [0, 1, 2, 3]


def test_sessions_off(make_broker):
    b = make_broker(config={"max.incremental.fetch.session.cache.slots": 0}).start()
    topic = f"fs-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    body = kafka_raw.call(b.port, fetch_v7(0, 0, topic, [(0, 0), (1, 0)]))
    err, sid, parts = parse_fetch_v7(body)
    assert (err, sid, sorted(parts)) == (0, 0, [0, 1]), "answered in full, no session"


def test_overlong_topic_names_are_refused_cheaply(broker):
    # Kafka's names are at most 249 bytes; a fetch naming a longer one (here 10,000 partitions
    # under a 30 KiB name: 300 MB if the name were copied per partition) gets
    # UNKNOWN_TOPIC_OR_PARTITION for each, at once, and no session holds it.
    name = "x" * (30 << 10)
    body = kafka_raw.call(broker.port, fetch_v7(0, 0, name, [(p, 0) for p in range(10_000)],
                                                max_wait_ms=5_000))
    err, sid, parts = parse_fetch_v7(body)
    assert (err, sid) == (0, 0)
    assert len(parts) == 10_000 and all(e == 3 for e, _, _ in parts.values())


def test_session_follows_a_topic_deleted_and_created_again(broker):
    """A session remembers where each partition's log is (a memo on the broker's fetch path);
    a topic deleted and created again under the same name is a new log, and an incremental
    fetch must answer from it, not from the deleted one."""
    import time

    from kafka.errors import TopicAlreadyExistsError

    topic = f"fs-re-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    two = batch(record(0, b"k", b"v") + record(1, b"k", b"w"), 2, 1)
    assert kafka_raw.produce(broker.port, topic, two, partition=0) == 0
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        def fetch(*args, **kwargs):
            sock.sendall(fetch_v7(*args, **kwargs))
            return parse_fetch_v7(kafka_raw.read_frame(sock))

        err, sid, parts = fetch(0, 0, topic, [(0, 2)])
        assert err == 0 and sid > 0 and parts[0][:2] == (0, 2), parts
        assert fetch(sid, 1, topic, [])[2] == {}  # nothing moved

        admin.delete_topics([topic])
        deadline = time.monotonic() + 30
        while True:
            try:
                admin.create_topics([NewTopic(topic, 1, 1)])
                break
            except TopicAlreadyExistsError:
                assert time.monotonic() < deadline, "topic never went away"
                time.sleep(0.2)
        one = batch(record(0, b"k", b"x"), 1, 0)
        deadline = time.monotonic() + 30
        while kafka_raw.produce(broker.port, topic, one, partition=0) != 0:
            assert time.monotonic() < deadline, "recreated topic never took a write"
            time.sleep(0.2)

        # The session still holds offset 2; the new log ends at 1: out of range (error 1),
        # where the deleted log would have said "nothing new" (and been left out).
        err, _, parts = fetch(sid, 2, topic, [])
        assert err == 0 and 0 in parts, parts
        assert parts[0][0] == 1 or parts[0][1] == 1, parts
    admin.close()


def test_long_poll_across_a_topic_deletion_answers_unknown(broker):
    """A fetch waiting (max.wait) while its topic is deleted answers UNKNOWN_TOPIC_OR_PARTITION
    when the wait ends, not the deleted log's offsets."""
    topic = f"fs-del-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    one = batch(record(0, b"k", b"v"), 1, 0)
    assert kafka_raw.produce(broker.port, topic, one, partition=0) == 0
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        sock.sendall(fetch_v7(0, 0, topic, [(0, 1)]))
        err, sid, parts = parse_fetch_v7(kafka_raw.read_frame(sock))
        assert err == 0 and sid > 0 and parts[0][:2] == (0, 1), parts
        # Incremental, nothing new: the broker holds it for max.wait (2 s).
        sock.sendall(fetch_v7(sid, 1, topic, [], max_wait_ms=2000))
        admin.delete_topics([topic])
        err, _, parts = parse_fetch_v7(kafka_raw.read_frame(sock))
        assert err == 0 and parts.get(0, (None,))[0] == 3, parts  # UNKNOWN_TOPIC_OR_PARTITION
    admin.close()
