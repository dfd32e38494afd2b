"""`GET /metrics` (#20): Prometheus's text format, every shard's counters gathered at scrape
time. Checked by parsing the text ourselves, and through a real Prometheus server (Debian's
`prometheus` package, scraping every second) when it is installed."""
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from conftest import BINARY, free_port, until

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def wait_listening(port):
    until(f"port {port}", lambda: _connects(port), limit_s=15)


def _connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def scrape(port):
    """{(name, frozenset(labels)): value} and the Content-Type."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        ctype = r.headers["Content-Type"]
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out, ctype


# Series a broker exposes only as a cluster node.
CLUSTER_ONLY = {
    "strand_under_replicated_partitions", "strand_under_min_isr_partitions",
    "strand_offline_partitions", "strand_controller_active", "strand_quorum_term",
    "strand_quorum_commit_index", "strand_cluster_brokers_unfenced",
    "strand_cluster_brokers_fenced",
}


def dashboard_series():
    """The strand_ series the Grafana dashboard queries."""
    dash = os.path.join(os.path.dirname(__file__), "..", "..", "dashboards", "strand.json")
    with open(dash) as f:
        exprs = [t["expr"] for p in json.load(f)["panels"] for t in p.get("targets", [])]
    names = {n for e in exprs for n in re.findall(r"strand_[a-z_]+", e)}
    assert names
    return names


def described(port):
    """Every series name a scrape describes (`# TYPE`), with the sample names it stands for
    (`_total` for a counter; `_bucket`, `_sum`, `_count` for a histogram), zeros included."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
            names |= {name} | {name + x for x in suffixes.get(kind, [])}
    return names


def total(samples, name, **want):
    return sum(v for (n, labels), v in samples.items()
               if n == name and all((k, w) in labels for k, w in want.items()))


def make_topic(bootstrap, partitions):
    topic = f"met-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    admin.close()
    return topic


def test_metrics_count_every_request_record_and_byte_across_shards(make_broker):
    admin = free_port()
    b = make_broker(cores=2, config={"admin.listen": f"127.0.0.1:{admin}"}).start()
    wait_listening(admin)
    topic = make_topic(b.bootstrap, 4)
    before, ctype = scrape(admin)
    assert ctype.startswith("text/plain; version=0.0.4"), ctype

    n = 300
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=0)
    for i in range(n):
        p.send(topic, value=b"v" * 100, partition=i % 4).get(timeout=30)
    p.close()
    group = f"lagger-{uuid.uuid4().hex[:6]}"
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                      consumer_timeout_ms=5000, group_id=group, enable_auto_commit=False)
    c.assign([TopicPartition(topic, k) for k in range(4)])
    read = sum(1 for _ in c)
    c.commit()
    c.close()
    assert read == n
    # The group is paused (no consumer) while more is produced: its lag is exactly that.
    more = 37
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=0)
    for i in range(more):
        p.send(topic, value=b"w", partition=i % 4).get(timeout=30)
    p.close()
    n_all = n + more

    after, _ = scrape(admin)

    def delta(name, **want):
        return total(after, name, **want) - total(before, name, **want)

    produce = delta("strand_kafka_requests_total", api="Produce")
    # One request per record (each waited for); metadata refreshes aside, nothing else.
    assert produce == n_all, produce
    assert delta("strand_records_in_total") == n_all, "no increment lost across shards"
    assert delta("strand_bytes_in_total") >= n * 100
    assert delta("strand_bytes_out_total") >= n * 100
    assert delta("strand_kafka_request_latency_seconds_count", api="Produce") == produce
    assert delta("strand_kafka_request_latency_seconds_bucket", api="Produce", le="+Inf") == produce
    assert delta("strand_fsync_latency_seconds_count") > 0, "acks=all waits for fsyncs"
    shards = {dict(labels)["shard"] for (name, labels) in after
              if name == "strand_kafka_requests_total"}
    assert shards == {"0", "1"}, shards
    for k in range(4):
        lbl = frozenset({("topic", topic), ("partition", str(k))})
        end = n / 4 + len(range(k, more, 4))
        assert after[("strand_partition_log_end_offset", lbl)] == end
        assert after[("strand_partition_high_watermark", lbl)] == end
        assert after[("strand_partition_segments", lbl)] >= 1
        glbl = lbl | {("group", group)}
        assert after[("strand_group_committed_offset", glbl)] == n / 4
    assert total(after, "strand_group_lag", group=group) == more
    assert after[("strand_metrics_partitions_left_out", frozenset())] == 0
    # Request stages: every Produce request passed through each connection stage once.
    for stage in ("queue", "decode", "handle", "write", "total"):
        assert delta("strand_request_stage_latency_seconds_count", api="Produce",
                     stage=stage) == produce, stage
    assert delta("strand_request_stage_latency_seconds_count", api="partition",
                 stage="fsync_wait") >= n_all
    assert delta("strand_segment_write_latency_seconds_count") > 0
    assert delta("strand_cross_shard_messages_total") > 0, "4 partitions over 2 shards"
    for gauge in ("strand_write_behind_writes", "strand_produce_memory_bytes",
                  "strand_connection_memory_bytes", "strand_partition_cache_bytes"):
        assert {dict(lb)["shard"] for (nm, lb) in after if nm == gauge} == {"0", "1"}, gauge
    assert total(after, "strand_partition_cache_bytes") > 0, "the tails are cached"
    # Errors of any API are counted by their Kafka name: deleting a topic that is not there.
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        a.delete_topics([f"absent-{uuid.uuid4().hex[:6]}"])
    except Exception:  # noqa: BLE001 - kafka-python raises UnknownTopicOrPartitionError
        pass
    a.close()
    errs, _ = scrape(admin)
    assert total(errs, "strand_kafka_request_errors_total", api="DeleteTopics",
                 error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    # A request that cannot be decoded closes its connection, counted as its API's error.
    host, port = b.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        body = struct.pack(">hhih", 0, 9, 7, -1) + b"\xff" * 16  # Produce v9, garbage
        sock.sendall(struct.pack(">i", len(body)) + body)
        sock.settimeout(5)
        assert sock.recv(1) == b"", "the broker closes the connection"
    closed, _ = scrape(admin)
    assert total(closed, "strand_kafka_request_errors_total", api="Produce",
                 error="CONNECTION_CLOSED") == 1
    # Every series the Grafana dashboard queries is one the broker describes (the cluster's
    # on a cluster node: test_replication).
    missing = dashboard_series() - CLUSTER_ONLY - described(admin)
    assert not missing, sorted(missing)
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{admin}/nope", timeout=10)
        raise AssertionError("no 404")
    except urllib.error.HTTPError as e:
        assert e.code == 404 and "/metrics" in json.loads(e.read())["error"]


def test_a_scrape_of_ten_thousand_partitions_is_quick_and_bounded(make_broker):
    """10,000 partitions over two shards: a scrape answers in under a second, and has
    per-partition series for `metrics.partition.series.max` (1,000) of them only."""
    admin = free_port()
    # The default cap is 5,000 partitions per shard, and the internal topics take some. The
    # open files: 20,000 here (CI's hard limit), so connections are capped at 1,000 and a
    # partition counted at one file (its writer: readers open on a first read from disk).
    b = make_broker(cores=2, config={"admin.listen": f"127.0.0.1:{admin}",
                                     "topic.partitions.per.shard": 6000,
                                     "max.connections": 1000,
                                     "topic.fds.per.partition": 1}).start()
    wait_listening(admin)
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=120_000)
    topics = [f"wide{k}-{uuid.uuid4().hex[:6]}" for k in range(10)]
    a.create_topics([NewTopic(t, num_partitions=1000, replication_factor=1) for t in topics],
                    timeout_ms=120_000)
    a.close()
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks=1, linger_ms=5)
    for k in range(2000):
        p.send(topics[k % 10], value=b"x", partition=k % 1000)
    p.flush(timeout=120)
    p.close()
    took = []
    for _ in range(5):
        t0 = time.monotonic()
        samples, _ = scrape(admin)
        took.append(time.monotonic() - t0)
    print(f"scrape of 10,000 partitions: {min(took) * 1000:.0f}-{max(took) * 1000:.0f} ms, "
          f"{len(samples)} samples")
    assert max(took) < 1.0, took
    # Ours and the internal topics' (their partitions are created at start).
    assert samples[("strand_metrics_partitions_left_out", frozenset())] >= 9000
    per_partition = {lb for (nm, lb) in samples if nm == "strand_partition_log_end_offset"}
    assert len(per_partition) == 1000
    assert len(samples) < 20_000, "bounded: 1,000 partitions' gauges and the rest"


def test_strand_top_shows_the_produce_rate_and_the_busiest_partition(make_broker):
    admin = free_port()
    b = make_broker(config={"admin.listen": f"127.0.0.1:{admin}"}).start()
    wait_listening(admin)
    topic = make_topic(b.bootstrap, 3)
    top = subprocess.Popen([BINARY, "top", "--admin", f"127.0.0.1:{admin}", "--iterations", "3",
                            "--interval-ms", "1000"], stdout=subprocess.PIPE, text=True)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks=1, linger_ms=0)
    deadline = time.time() + 4
    while time.time() < deadline:  # only partition 1, paced: ~100 requests a second
        p.send(topic, value=b"t" * 50, partition=1).get(timeout=30)
        time.sleep(0.01)
    p.close()
    out, _ = top.communicate(timeout=30)
    assert top.returncode == 0, out
    frames = [f for f in out.split("strand top ") if f.strip()]
    assert len(frames) == 3, out
    # The middle frame is wholly inside the workload.
    produce = [ln.split() for ln in frames[1].splitlines() if ln.startswith("Produce ")]
    assert produce and 30 < float(produce[0][1]) < 200, frames[1]
    busiest = frames[1].split("busiest partitions")[1].split()
    assert busiest[3] == f"{topic}-1", frames[1]  # header: records/s, log end; then the rows
    bad = subprocess.run([BINARY, "top", "--admin", f"127.0.0.1:{free_port()}",
                          "--iterations", "1"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "cannot reach the admin API" in bad.stderr, bad.stderr


def test_counts_stay_exact_under_concurrent_load_and_scrapes(make_broker):
    """Four librdkafka producers at once over two shards, scraped every 50 ms meanwhile: no
    increment is lost (records counted equal records acknowledged; every Produce request has
    its latency observation and its stage passes)."""
    import threading
    from confluent_kafka import Producer
    admin = free_port()
    b = make_broker(cores=2, config={"admin.listen": f"127.0.0.1:{admin}"}).start()
    wait_listening(admin)
    topic = make_topic(b.bootstrap, 8)
    before, _ = scrape(admin)
    acked = []
    stop = threading.Event()

    def produce(k):
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 1,
                      "enable.idempotence": False})
        ok = [0]

        def done(err, _msg):
            if err is None:
                ok[0] += 1
        for i in range(5000):
            p.produce(topic, value=b"%d-%d" % (k, i), partition=(k + i) % 8, on_delivery=done)
            p.poll(0)
        assert p.flush(60) == 0
        acked.append(ok[0])

    def keep_scraping():
        while not stop.is_set():
            scrape(admin)
            time.sleep(0.05)
    scraper = threading.Thread(target=keep_scraping)
    scraper.start()
    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    stop.set()
    scraper.join(timeout=30)
    after, _ = scrape(admin)

    def delta(name, **want):
        return total(after, name, **want) - total(before, name, **want)
    assert sum(acked) == 20000, acked
    assert delta("strand_records_in_total") == 20000
    produce_requests = delta("strand_kafka_requests_total", api="Produce")
    assert produce_requests > 0
    assert delta("strand_kafka_request_latency_seconds_count", api="Produce") == produce_requests
    assert delta("strand_request_stage_latency_seconds_count", api="Produce",
                 stage="total") == produce_requests


def test_partition_labels_can_be_dropped(make_broker):
    admin = free_port()
    b = make_broker(config={"admin.listen": f"127.0.0.1:{admin}",
                            "metrics.partition.series.max": 0}).start()
    wait_listening(admin)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=0)
    p.send(f"nolabels-{uuid.uuid4().hex[:6]}", value=b"x").get(timeout=30)
    p.close()
    samples, _ = scrape(admin)
    labelled = [n for (n, lb) in samples if {"topic", "partition"} & {k for k, _ in lb}]
    assert not labelled, labelled
    assert samples[("strand_metrics_partitions_left_out", frozenset())] >= 1
    assert total(samples, "strand_records_in_total") == 1


def test_metrics_off_counts_nothing(make_broker):
    admin = free_port()
    b = make_broker(config={"admin.listen": f"127.0.0.1:{admin}",
                            "metrics.enabled": False}).start()
    wait_listening(admin)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=0)
    p.send(f"off-{uuid.uuid4().hex[:6]}", value=b"x").get(timeout=30)
    p.close()
    samples, _ = scrape(admin)
    assert total(samples, "strand_kafka_requests_total") == 0
    assert total(samples, "strand_records_in_total") == 0
    # Partition gauges are read at scrape time, not counted: still there.
    assert total(samples, "strand_partition_log_end_offset") == 1


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="Debian's prometheus not installed")
def test_a_real_prometheus_sees_the_produce_rate_and_latency_counts(make_broker):
    admin = free_port()
    b = make_broker(cores=2, config={"admin.listen": f"127.0.0.1:{admin}"}).start()
    wait_listening(admin)
    topic = make_topic(b.bootstrap, 2)
    web = free_port()
    tmp = tempfile.mkdtemp(prefix="strand-prom-")
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: strand\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{admin}']\n")
    prom = subprocess.Popen(
        ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/data",
         f"--web.listen-address=127.0.0.1:{web}"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "prometheus.log"), "w"))
    try:
        def query(q, at=None):
            args = {"query": q, **({"time": f"{at:.3f}"} if at else {})}
            url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode(args)
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
            assert body["status"] == "success", body
            res = body["data"]["result"]
            return float(res[0]["value"][1]) if res else None

        def up():
            try:
                return query('up{job="strand"}') == 1
            except OSError:
                return False
        until("prometheus scraping strand", up, limit_s=60)

        # A steady, paced workload: one acknowledged produce request per 10 ms, 20 s.
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=0)
        p.send(topic, value=b"warm").get(timeout=30)
        # A group that commits the current end and then stays away (paused).
        group = f"paused-{uuid.uuid4().hex[:6]}"
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=group,
                          enable_auto_commit=False)
        tps = [TopicPartition(topic, k) for k in range(2)]
        c.assign(tps)
        c.commit({tp: OffsetAndMetadata(off, "", -1) for tp, off in c.end_offsets(tps).items()})
        c.close()
        time.sleep(2.5)  # two scrapes with the warm-up counted
        t0 = time.time()
        sent_at = []
        for i in range(2000):
            due = t0 + i * 0.01
            now = time.time()
            if due > now:
                time.sleep(due - now)
            p.send(topic, value=b"x" * 64, partition=i % 2).get(timeout=30)
            sent_at.append(time.time())
        t1 = time.time()
        p.close()
        time.sleep(3)  # scraped past the end

        q = 'sum(strand_kafka_requests_total{api="Produce"})'
        requests = query(q, t1 + 2) - query(q, t0 - 0.5)
        assert requests == len(sent_at), (requests, len(sent_at))
        lat = 'sum(strand_kafka_request_latency_seconds_count{api="Produce"})'
        assert query(lat, t1 + 2) - query(lat, t0 - 0.5) == requests
        # The rate over a 10 s window inside the workload, against the client's own count.
        end = t0 + 15
        rate = query('sum(rate(strand_kafka_requests_total{api="Produce"}[10s]))', end)
        sent = sum(1 for t in sent_at if end - 10 < t <= end) / 10
        assert abs(rate - sent) <= 0.05 * sent, (rate, sent)
        lag = query(f'sum(strand_group_lag{{group="{group}"}})', t1 + 2)
        assert lag == len(sent_at), (lag, len(sent_at))
    finally:
        prom.terminate()
        try:
            prom.wait(timeout=10)
        except subprocess.TimeoutExpired:
            prom.kill()
        shutil.rmtree(tmp, ignore_errors=True)
