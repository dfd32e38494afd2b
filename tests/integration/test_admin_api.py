"""The admin HTTP API (`admin.listen`): health, and the request-stage histograms that tell
where a request's time went (`GET /v1/stages`, `?reset=true`), across shards."""
import json
import socket
import time
import urllib.error
import urllib.request
import uuid

from kafka import KafkaConsumer, KafkaProducer

from conftest import free_port


def get(port, path):
    # Shard 0 opens the admin listener; another shard's Kafka listener may be up first.
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def stages(port, reset=False):
    status, body = get(port, "/v1/stages" + ("?reset=true" if reset else ""))
    assert status == 200, body
    return {(r["api"], r["stage"]): r for r in body["stages"]}


def test_stages_count_every_request_on_every_shard(make_broker):
    admin = free_port()
    b = make_broker(cores=2, config={"admin.listen": f"127.0.0.1:{admin}"}).start()
    assert get(admin, "/v1/status/live") == (200, {"status": "ok"})
    assert get(admin, "/v1/status/ready")[0] == 200
    stages(admin, reset=True)  # start from nothing (the clients' metadata etc. aside)

    topic = f"adm-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=0)
    sent = 0
    for i in range(200):
        p.send(topic, key=str(i).encode(), value=b"x" * 100).get(timeout=30)
        sent += 1
    p.close()

    s = stages(admin)
    produce = s[("produce", "total")]["count"]
    # One request per record here (each waited for), plus the auto-creating first one.
    assert sent <= produce <= sent + 5, (produce, sent)
    for stage in ("queue", "decode", "handle", "write"):
        assert s[("produce", stage)]["count"] == produce, (stage, s[("produce", stage)])
    assert s[("partition", "append")]["count"] >= sent
    assert s[("partition", "fsync_wait")]["count"] >= sent, "acks=all waits for the fsync"
    lag = s[("shard", "lag")]
    assert lag["count"] > 0 and lag["p50_us"] <= lag["max_us"], lag  # each shard's wake-up probe
    row = s[("produce", "total")]
    assert 0 < row["p50_us"] <= row["p99_us"] <= row["p999_us"] <= row["max_us"], row

    # reset=true answers the copy, then empties every shard's.
    assert stages(admin, reset=True)[("produce", "total")]["count"] >= produce
    assert ("produce", "total") not in stages(admin)


def test_bad_requests_get_http_errors(make_broker):
    admin = free_port()
    make_broker(config={"admin.listen": f"127.0.0.1:{admin}"}).start()
    status, body = get(admin, "/v1/nothing")
    assert status == 404 and "/v1/stages" in body["error"], body
    req = urllib.request.Request(f"http://127.0.0.1:{admin}/v1/stages", method="POST", data=b"")
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("POST must be refused")
    except urllib.error.HTTPError as e:
        assert e.code == 405
    with socket.create_connection(("127.0.0.1", admin), timeout=10) as sock:
        sock.sendall(b"\x00garbage\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    # An oversized head is closed without an answer; the API still serves afterwards.
    with socket.create_connection(("127.0.0.1", admin), timeout=10) as sock:
        sock.sendall(b"GET /" + b"a" * 20000)
        try:
            assert sock.recv(100) == b""
        except ConnectionResetError:
            pass  # closed with the rest unread: the kernel resets
    assert get(admin, "/v1/status/live")[0] == 200


def test_admin_listen_off_and_taken(make_broker):
    off = make_broker(config={"admin.listen": ""}).start()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        b = make_broker(config={"admin.listen": f"127.0.0.1:{port}"}).start()
        # The Kafka listener serves regardless; the log says why the admin API is off.
        p = KafkaProducer(bootstrap_servers=b.bootstrap)
        p.send("adm-taken", b"x").get(timeout=30)
        p.close()
        assert "admin API off" in b.log()
        assert "admin API" not in off.log()
    finally:
        taken.close()


def test_partitions_and_groups_views(make_broker):
    admin = free_port()
    b = make_broker(cores=2, config={"admin.listen": f"127.0.0.1:{admin}"}).start()
    topic = f"view-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=0)
    for i in range(30):
        p.send(topic, value=b"x" * 10).get(timeout=30)
    p.close()
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=5000)
    got = 0
    for _ in c:
        got += 1
        if got == 20:
            break
    c.commit()
    status, body = get(admin, f"/v1/partitions?topic={topic}")
    assert status == 200, body
    [row] = body["partitions"]
    assert (row["topic"], row["partition"], row["log_end_offset"], row["high_watermark"]) == \
        (topic, 0, 30, 30), row
    assert row["shard"] in (0, 1) and row["segments"] >= 1 and row["size_bytes"] > 0
    status, body = get(admin, "/v1/partitions")
    assert any(r["topic"] == topic for r in body["partitions"])
    status, body = get(admin, "/v1/groups")
    assert status == 200, body
    [g] = [g for g in body["groups"] if g["group"] == group]
    assert g["state"] == "Stable" and g["members"] == 1 and g["protocol_type"] == "consumer", g
    assert g["offsets"] == [{"topic": topic, "partition": 0, "committed_offset": 20,
                             "lag": 10}], g
    c.close()
