"""Garbage, oversized and truncated frames close that connection only; other clients go on."""
import socket
import struct
import uuid

from confluent_kafka import Producer


def raw(broker, payload, read=True):
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    s.sendall(payload)
    data = b""
    if read:
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except socket.timeout:
            data += b"<timeout>"
    s.close()
    return data


def api_versions_v0():
    body = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", -1)
    return struct.pack(">i", len(body)) + body


def test_bad_frames_close_only_their_connection(broker):
    # Garbage: size prefix far over the frame limit.
    assert raw(broker, b"GET / HTTP/1.1\r\n\r\n") == b""
    # Negative size.
    assert raw(broker, struct.pack(">i", -7) + b"xxxx") == b""
    # Unknown API key.
    assert raw(broker, struct.pack(">i", 8) + struct.pack(">hhi", 999, 0, 1)) == b""
    # A Metadata request whose body is cut short.
    body = struct.pack(">hhi", 3, 12, 5) + b"\x00\x05strand" + b"\x02"
    assert raw(broker, struct.pack(">i", len(body)) + body) == b""
    # Truncated frame, then hang up: the broker must not wait forever or crash.
    raw(broker, struct.pack(">i", 100) + b"abc", read=False)
    # An ApiVersions at an unknown version gets UNSUPPORTED_VERSION (35) at v0, not a close.
    body = struct.pack(">hhi", 18, 99, 3) + struct.pack(">h", -1)
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    s.sendall(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", s.recv(4))[0]
    resp = b""
    while len(resp) < size:
        resp += s.recv(size - len(resp))
    corr, err = struct.unpack(">ih", resp[:6])
    assert (corr, err) == (3, 35)
    s.close()
    # A well-formed request still works on a new connection, and real clients are fine.
    assert len(raw_api_versions(broker)) > 10
    acked = []
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(f"after-garbage-{uuid.uuid4().hex[:6]}", b"ok",
              on_delivery=lambda e, m: e is None and acked.append(1))
    assert p.flush(20) == 0 and acked == [1]
    assert "closing connection" in broker.log()


def raw_api_versions(broker):
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    s.sendall(api_versions_v0())
    size = struct.unpack(">i", s.recv(4))[0]
    resp = b""
    while len(resp) < size:
        resp += s.recv(size - len(resp))
    s.close()
    return resp


def test_idle_and_half_sent_connections_are_closed(make_broker):
    """connections.max.idle.ms closes a connection that sends nothing; a frame that started
    arriving must also finish within it (slowloris). A busy client is not affected."""
    import time
    b = make_broker(config={"connections.max.idle.ms": 1500}).start()
    idle = socket.create_connection(("127.0.0.1", b.port))
    half = socket.create_connection(("127.0.0.1", b.port))
    half.sendall(struct.pack(">i", 50 << 20) + b"x" * 1000)  # 50 MiB announced, 1000 bytes sent
    start = time.time()
    for s in (idle, half):
        s.settimeout(10)
        assert s.recv(1) == b"", "closed by the broker"
        s.close()
    assert time.time() - start < 5
    # A connection that keeps talking stays open past the limit.
    busy = socket.create_connection(("127.0.0.1", b.port))
    busy.settimeout(10)
    for _ in range(4):
        busy.sendall(api_versions_v0())
        size = struct.unpack(">i", busy.recv(4))[0]
        while size > 0:
            size -= len(busy.recv(size))
        time.sleep(0.6)
    busy.close()


def test_a_greedy_fetch_is_capped_and_duplicates_are_answered_once(make_broker):
    """Fetch v4 asking for 2 GiB with one partition listed 200 times: the response holds the
    partition once and stays within fetch.max.bytes (plus the first batch, which always goes
    out whole)."""
    b = make_broker(config={"fetch.max.bytes": 1 << 20}).start()
    topic = f"greedy-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "batch.size": 65536})
    for i in range(4000):
        p.produce(topic, value=b"x" * 1000, partition=0)
    assert p.flush(30) == 0

    def s(text):
        return struct.pack(">h", len(text)) + text.encode()
    parts = b"".join(struct.pack(">iqi", 0, 0, 2**31 - 1) for _ in range(200))
    body = (struct.pack(">hhi", 1, 4, 9) + s("greedy") + struct.pack(">iiiib", -1, 100, 1, 2**31 - 1, 0)
            + struct.pack(">i", 1) + s(topic) + struct.pack(">i", 200) + parts)
    with socket.create_connection(("127.0.0.1", b.port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(1 << 20)
            assert chunk, "connection closed"
            data += chunk
    size = struct.unpack(">i", data[:4])[0]
    assert size < (1 << 20) + (128 << 10), size
    at = 4 + 4 + 4  # size, correlation id, throttle
    assert struct.unpack(">i", data[at:at + 4])[0] == 1  # one topic
    at += 4
    at += 2 + struct.unpack(">h", data[at:at + 2])[0]
    assert struct.unpack(">i", data[at:at + 4])[0] == 1, "the partition once"
    at += 4
    index, error = struct.unpack(">ih", data[at:at + 6])
    assert (index, error) == (0, 0)


def test_connections_per_ip_are_limited_and_places_come_back(make_broker):
    """max.connections.per.ip: the broker closes connections past the limit at once (before
    accept() could run out of descriptors); a closed connection frees its place."""
    import time
    b = make_broker(config={"max.connections.per.ip": 3}).start()
    time.sleep(0.5)  # the start-up probe's connections are gone

    def talk(s):
        s.sendall(api_versions_v0())
        head = s.recv(4)
        return len(head) == 4

    kept = [socket.create_connection(("127.0.0.1", b.port), timeout=10) for _ in range(3)]
    assert all(talk(s) for s in kept)
    extra = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    assert extra.recv(1) == b"", "the fourth is closed"
    extra.close()
    kept.pop().close()
    time.sleep(0.3)
    again = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    assert talk(again)
    for s in kept + [again]:
        s.close()
