"""Batches with a valid CRC but nonsense inside are refused at produce, as Kafka's
LogValidator refuses them: lying record counts and offset deltas, garbage records, a codec
flag on data that is not compressed that way, a decompression bomb. Sent on a raw socket
(no client would build them); afterwards a real client reads back exactly the good records."""
import gzip
import socket
import struct
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(n):
    n = (n << 1) ^ (n >> 63)  # zig-zag
    out = b""
    while True:
        if n < 0x80:
            return out + bytes([n])
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7


def record(index, key, value):
    body = b"\x00" + varint(0) + varint(index) + varint(len(key)) + key + varint(len(value)) \
        + value + varint(0)
    return varint(len(body)) + body


def batch(records_section, count, last_delta, attributes=0):
    """A v2 batch with a correct CRC over whatever it is given."""
    after_crc = (struct.pack(">hiqqqhii", attributes, last_delta, 1000, 1000, -1, -1, -1, count)
                 + records_section)
    head = struct.pack(">iB", 0, 2)  # partition leader epoch, magic
    crc = crc32c(after_crc)
    body = head + struct.pack(">I", crc) + after_crc
    return struct.pack(">qi", 0, len(body)) + body


def s(text):
    return struct.pack(">h", len(text)) + text.encode()


def produce(broker, topic, records):
    """Produce v3, acks=-1, one partition: the partition's error code."""
    body = (struct.pack(">hhi", 0, 3, 7) + s("poison") + struct.pack(">h", -1)
            + struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + s(topic)
            + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(records)) + records)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            data += chunk
    at = 8 + 4  # size, correlation id, topics count
    at += 2 + struct.unpack(">h", data[at:at + 2])[0] + 4 + 4  # name, partitions, index
    return struct.unpack(">h", data[at:at + 2])[0]


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
