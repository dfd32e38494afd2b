"""Kafka requests built by hand, for tests that send what no client would: shared by the
hostile-input tests (frames, record batches with a correct CRC over nonsense, raw Produce,
Metadata and Fetch)."""
import socket
import struct
import time


def s(text):
    """A Kafka STRING (int16 length + UTF-8)."""
    return struct.pack(">h", len(text)) + text.encode()


def framed(api_key, version, correlation_id, body, client_id="raw"):
    """A request with a v1 header (api key, version, correlation id, client id), size-prefixed."""
    payload = struct.pack(">hhi", api_key, version, correlation_id) + s(client_id) + body
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock):
    """One size-prefixed response (without its size), or None if the connection closed."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return None
        data += chunk
    return data[4:4 + struct.unpack(">i", data[:4])[0]]


def call(port, request, timeout=30):
    """Sends one request on a new connection and returns the response body (None: closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        return read_frame(sock)


def api_versions_v0(correlation_id=1):
    return framed(18, 0, correlation_id, b"")


def metadata_v1(topics, correlation_id=1):
    """Metadata v1 naming `topics` (auto-creation allowed at v1-v3)."""
    return framed(3, 1, correlation_id,
                  struct.pack(">i", len(topics)) + b"".join(s(t) for t in topics))


def metadata_topic_errors(body):
    """{topic: error code} from a Metadata v1 response body (after the correlation id)."""
    at = 4
    (brokers,) = struct.unpack(">i", body[at:at + 4])
    at += 4
    for _ in range(brokers):
        at += 4  # node id
        at += 2 + struct.unpack(">h", body[at:at + 2])[0]  # host
        at += 4  # port
        rack = struct.unpack(">h", body[at:at + 2])[0]
        at += 2 + max(rack, 0)
    at += 4  # controller id
    (topics,) = struct.unpack(">i", body[at:at + 4])
    at += 4
    out = {}
    for _ in range(topics):
        (error,) = struct.unpack(">h", body[at:at + 2])
        at += 2
        n = struct.unpack(">h", body[at:at + 2])[0]
        name = body[at + 2:at + 2 + n].decode()
        at += 2 + n + 1  # name, is_internal
        (parts,) = struct.unpack(">i", body[at:at + 4])
        at += 4
        for _ in range(parts):
            at += 2 + 4 + 4  # error, index, leader
            for _ in range(2):  # replicas, isr
                (k,) = struct.unpack(">i", body[at:at + 4])
                at += 4 + 4 * k
        out[name] = error
    return out


def metadata_v1_partitions(body):
    """{topic: (error, {partition: (leader, sorted isr)})} from a Metadata v1 response body."""
    at = 4
    (brokers,) = struct.unpack(">i", body[at:at + 4])
    at += 4
    for _ in range(brokers):
        at += 4
        at += 2 + struct.unpack(">h", body[at:at + 2])[0]
        at += 4
        rack = struct.unpack(">h", body[at:at + 2])[0]
        at += 2 + max(rack, 0)
    at += 4
    (topics,) = struct.unpack(">i", body[at:at + 4])
    at += 4
    out = {}
    for _ in range(topics):
        (error,) = struct.unpack(">h", body[at:at + 2])
        n = struct.unpack(">h", body[at + 2:at + 4])[0]
        name = body[at + 4:at + 4 + n].decode()
        at += 4 + n + 1
        (parts,) = struct.unpack(">i", body[at:at + 4])
        at += 4
        got = {}
        for _ in range(parts):
            _err, index, leader = struct.unpack(">hii", body[at:at + 10])
            at += 10
            lists = []
            for _ in range(2):  # replicas, isr
                (k,) = struct.unpack(">i", body[at:at + 4])
                lists.append(list(struct.unpack(f">{k}i", body[at + 4:at + 4 + 4 * k])))
                at += 4 + 4 * k
            got[index] = (leader, sorted(lists[1]))
        out[name] = (error, got)
    return out


def fetch_v4(topic, partitions, max_bytes=2**31 - 1, correlation_id=1):
    """Fetch v4 of `partitions` [(partition, offset, partition max bytes)] of one topic."""
    parts = b"".join(struct.pack(">iqi", p, o, m) for p, o, m in partitions)
    body = (struct.pack(">iiiib", -1, 100, 1, max_bytes, 0) + struct.pack(">i", 1) + s(topic)
            + struct.pack(">i", len(partitions)) + parts)
    return framed(1, 4, correlation_id, body)


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


def produce_v3(topic, records, partition=0, acks=-1, correlation_id=7):
    body = (struct.pack(">h", -1) + struct.pack(">hi", acks, 10000) + struct.pack(">i", 1)
            + s(topic) + struct.pack(">i", 1) + struct.pack(">i", partition)
            + struct.pack(">i", len(records)) + records)
    return framed(0, 3, correlation_id, body, client_id="poison")


def produce_error(body):
    """The one partition's error code from a Produce v3 response body."""
    at = 4 + 4  # correlation id, topics count
    at += 2 + struct.unpack(">h", body[at:at + 2])[0] + 4 + 4  # name, partitions, index
    return struct.unpack(">h", body[at:at + 2])[0]


def produce(port, topic, records, partition=0):
    """Produce v3, acks=-1, one partition: the partition's error code."""
    body = call(port, produce_v3(topic, records, partition))
    assert body is not None, "connection closed"
    return produce_error(body)


def produce_led(port, topic, records, partition=0, limit_s=10):
    """`produce`, asked again while the broker answers NOT_LEADER_OR_FOLLOWER (6) or
    LEADER_NOT_AVAILABLE (5), as every Kafka client does: a node's metadata can name a leader
    before that leader has applied the change and opened its log. The last error code."""
    deadline = time.monotonic() + limit_s
    while True:
        error = produce(port, topic, records, partition)
        if error not in (5, 6) or time.monotonic() > deadline:
            return error
        time.sleep(0.1)


def list_offsets_v4(topic, partition, current_leader_epoch, timestamp=-1, correlation_id=9):
    """ListOffsets v4 for one partition with a `current_leader_epoch` (KIP-320)."""
    body = (struct.pack(">ib", -1, 0) + struct.pack(">i", 1) + s(topic) + struct.pack(">i", 1)
            + struct.pack(">iiq", partition, current_leader_epoch, timestamp))
    return framed(2, 4, correlation_id, body)


def list_offsets_v4_answer(body):
    """(error code, offset, leader epoch) of the one partition in a ListOffsets v4 answer."""
    at = 4 + 4 + 4  # correlation id, throttle time, topics count
    at += 2 + struct.unpack(">h", body[at:at + 2])[0] + 4  # name, partitions count
    _, error, _, offset, epoch = struct.unpack(">ihqqi", body[at:at + 26])
    return error, offset, epoch


def fetch_v4_batch_epochs(body):
    """[(base offset, partition leader epoch)] of the batches of the first partition in a
    Fetch v4 answer."""
    at = 4 + 4 + 4  # correlation id, throttle time, topics count
    at += 2 + struct.unpack(">h", body[at:at + 2])[0] + 4  # name, partitions count
    at += 4 + 2 + 8 + 8  # partition, error, high watermark, last stable offset
    (aborted,) = struct.unpack(">i", body[at:at + 4])
    at += 4 + max(aborted, 0) * 16
    (size,) = struct.unpack(">i", body[at:at + 4])
    records = body[at + 4:at + 4 + max(size, 0)]
    out, i = [], 0
    while i + 61 <= len(records):
        base, length, epoch = struct.unpack(">qii", records[i:i + 16])
        out.append((base, epoch))
        i += 12 + length
    return out


def offset_for_leader_epoch_v3(topic, partition, leader_epoch, current_leader_epoch=-1,
                               correlation_id=13):
    """OffsetForLeaderEpoch v3 for one partition, as a consumer asks (replica id -1)."""
    body = (struct.pack(">ii", -1, 1) + s(topic) + struct.pack(">i", 1)
            + struct.pack(">iii", partition, current_leader_epoch, leader_epoch))
    return framed(23, 3, correlation_id, body)


def offset_for_leader_epoch_v3_answer(body):
    """(error code, leader epoch, end offset) of the one partition answered."""
    at = 4 + 4 + 4  # correlation id, throttle time, topics count
    at += 2 + struct.unpack(">h", body[at:at + 2])[0] + 4  # name, partitions count
    error, _, epoch, end = struct.unpack(">hiiq", body[at:at + 18])
    return error, epoch, end


# Flexible versions (KIP-482): compact strings and arrays, tagged-field sections.

def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def read_uvarint(body, at):
    n, shift = 0, 0
    while True:
        b = body[at]
        at += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, at
        shift += 7


def cs(text):
    """A COMPACT_STRING."""
    return uvarint(len(text) + 1) + text.encode()


def read_cs(body, at):
    n, at = read_uvarint(body, at)
    return (None if n == 0 else body[at:at + n - 1].decode()), at + max(n - 1, 0)


def framed_flexible(api_key, version, correlation_id, body, client_id="raw"):
    """A request with a v2 header (client id a classic STRING, then an empty tag section)."""
    payload = struct.pack(">hhi", api_key, version, correlation_id) + s(client_id) + b"\0" + body
    return struct.pack(">i", len(payload)) + payload


def read_tags(body, at):
    """{tag: bytes} of a tagged-field section."""
    count, at = read_uvarint(body, at)
    tags = {}
    for _ in range(count):
        tag, at = read_uvarint(body, at)
        size, at = read_uvarint(body, at)
        tags[tag] = body[at:at + size]
        at += size
    return tags, at


def produce_v10(topic, records, partition=0, acks=-1, correlation_id=11):
    body = (uvarint(0) + struct.pack(">hi", acks, 10000) + uvarint(2) + cs(topic) + uvarint(2)
            + struct.pack(">i", partition) + uvarint(len(records) + 1) + records + b"\0"
            + b"\0" + b"\0")
    return framed_flexible(0, 10, correlation_id, body)


def produce_v10_answer(body):
    """(error code, current leader (id, epoch) or None, {node id: (host, port)}) of the one
    partition in a Produce v10 answer (KIP-951's tagged fields)."""
    _, at = read_tags(body, 4)  # correlation id, header tags
    _, at = read_uvarint(body, at)  # topics
    _, at = read_cs(body, at)
    _, at = read_uvarint(body, at)  # partitions
    _, error = struct.unpack(">ih", body[at:at + 6])
    at += 6 + 24  # base offset, log append time, log start offset
    n, at = read_uvarint(body, at)  # record errors (none expected)
    assert n <= 1, "record errors"
    _, at = read_cs(body, at)  # error message
    tags, at = read_tags(body, at)
    leader = struct.unpack(">ii", tags[0][:8]) if 0 in tags else None
    _, at = read_tags(body, at)  # topic's tags
    at += 4  # throttle time
    tags, at = read_tags(body, at)
    nodes = {}
    if 0 in tags:
        e, i = tags[0], 0
        count, i = read_uvarint(e, i)
        for _ in range(count - 1):
            (node,) = struct.unpack(">i", e[i:i + 4])
            host, i = read_cs(e, i + 4)
            (port,) = struct.unpack(">i", e[i:i + 4])
            _, i = read_cs(e, i + 4)  # rack
            _, i = read_tags(e, i)
            nodes[node] = (host, port)
    return error, leader, nodes


def fetch_v12(topic, partition, offset=0, current_leader_epoch=-1, correlation_id=12):
    body = (struct.pack(">iiiibii", -1, 0, 1, 1 << 20, 0, 0, -1) + uvarint(2) + cs(topic)
            + uvarint(2) + struct.pack(">iiqiqi", partition, current_leader_epoch, offset, -1,
                                       -1, 1 << 20)
            + b"\0" + b"\0" + uvarint(1) + cs("") + b"\0")
    return framed_flexible(1, 12, correlation_id, body)


def fetch_v12_answer(body):
    """(error code, current leader (id, epoch) or None) of the one partition in a Fetch v12
    answer."""
    _, at = read_tags(body, 4)
    at += 4 + 2 + 4  # throttle, error, session id
    _, at = read_uvarint(body, at)
    _, at = read_cs(body, at)
    _, at = read_uvarint(body, at)
    _, error = struct.unpack(">ih", body[at:at + 6])
    at += 6 + 24
    n, at = read_uvarint(body, at)  # aborted transactions (nullable)
    at += max(n - 1, 0) * 17
    at += 4  # preferred read replica
    n, at = read_uvarint(body, at)
    at += max(n - 1, 0)
    tags, at = read_tags(body, at)
    return error, (struct.unpack(">ii", tags[1][:8]) if 1 in tags else None)
