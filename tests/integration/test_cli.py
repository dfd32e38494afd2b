"""The `strand` command line (native Rust client) against `strand serve` and against Apache
Kafka 4.x: create a topic, produce 1,000 keyed lines, consume them back identical, describe
the group with lag 0; plus the error a missing topic gives, and --json output."""
import json
import os
import subprocess

import pytest

from conftest import BINARY


def strand(bootstrap, *args, stdin=None, check=True):
    env = dict(os.environ, STRAND_BROKERS=bootstrap)
    r = subprocess.run([BINARY, *args], input=stdin, capture_output=True, text=True,
                       env=env, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"strand {' '.join(args)} failed: {r.stderr}")
    return r


@pytest.fixture(params=["strand", "kafka"])
def target(request, broker):
    if request.param == "strand":
        return broker.bootstrap
    return request.getfixturevalue("kafka").bootstrap


def test_cli_round_trip_keyed_lines_and_group_lag(target):
    topic, group = "cli-roundtrip", "cli-group"
    strand(target, "topic", "create", topic, "--partitions", "3")
    listed = json.loads(strand(target, "topic", "list", "--json").stdout)
    assert {"topic": topic, "partitions": 3} in [
        {"topic": t["topic"], "partitions": t["partitions"]} for t in listed]

    lines = [f"key-{i % 100},value-{i}" for i in range(1000)]
    out = strand(target, "produce", topic, "--key-separator", ",", "--json",
                 stdin="\n".join(lines) + "\n")
    assert json.loads(out.stdout)["records"] == 1000

    got = strand(target, "consume", topic, "--from-beginning", "--group", group, "-n", "1000",
                 "--format", "%k,%v\\n").stdout.splitlines()
    assert sorted(got) == sorted(lines), "the same 1,000 lines come back"

    # Same key -> same partition, in the order produced within it.
    recs = [json.loads(l) for l in strand(
        target, "consume", topic, "--from-beginning", "-n", "1000", "--json").stdout.splitlines()]
    by_key = {}
    for r in recs:
        by_key.setdefault(r["key"], set()).add(r["partition"])
    assert all(len(p) == 1 for p in by_key.values())

    described = json.loads(strand(target, "group", "describe", group, "--json").stdout)
    assert described["total_lag"] == 0, described
    assert sum(p["committed_offset"] for p in described["partitions"]) == 1000

    table = strand(target, "group", "describe", group).stdout
    assert "LAG" in table and topic in table
    info = json.loads(strand(target, "cluster", "info", "--json").stdout)
    assert info["brokers"]


def test_cli_errors_say_what_to_do(broker):
    r = strand(broker.bootstrap, "consume", "no-such-topic", "-n", "1", check=False)
    assert r.returncode != 0
    assert 'topic "no-such-topic" not found' in r.stderr
    assert "strand topic create no-such-topic" in r.stderr
    r = strand("127.0.0.1:1", "topic", "list", check=False)
    assert r.returncode != 0 and "is `strand serve` running?" in r.stderr


def test_cli_consumers_share_a_group(target, tmp_path):
    """Two `strand consume --group` processes join one group (classic protocol, range
    assignor): the group shows both members, and together they print every record."""
    import time
    topic, group = "cli-shared", "cli-shared-group"
    strand(target, "topic", "create", topic, "--partitions", "4")
    lines = [f"k{i},v{i}" for i in range(400)]
    strand(target, "produce", topic, "--key-separator", ",", stdin="\n".join(lines) + "\n")
    env = dict(os.environ, STRAND_BROKERS=target)
    procs, outs = [], []

    def members():
        r = strand(target, "group", "describe", group, "--json", check=False)
        return json.loads(r.stdout)["members"] if r.returncode == 0 else 0

    try:
        for i in range(2):
            out = open(tmp_path / f"c{i}.txt", "w")
            outs.append(tmp_path / f"c{i}.txt")
            procs.append(subprocess.Popen(
                [BINARY, "consume", topic, "--group", group, "--from-beginning",
                 "--format", "%k,%v\\n"], stdout=out, stderr=subprocess.STDOUT, env=env))
            deadline = time.time() + 60
            while members() != i + 1:
                assert time.time() < deadline, f"member {i + 1} did not join"
                assert procs[-1].poll() is None, open(outs[-1]).read()
                time.sleep(0.5)
        time.sleep(4)  # let both consume after the rebalance
    finally:
        for p in procs:
            p.kill()
            p.wait()
    got = set()
    for o in outs:
        got.update(l for l in open(o).read().splitlines() if "," in l)
    assert got == set(lines), f"{len(got)} of {len(lines)} records seen"


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_cli_compression_interoperates_with_librdkafka(broker, codec):
    """The native client's compressed batches read back with librdkafka, and librdkafka's
    compressed batches read back with the native client."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    ours, theirs = f"cli-comp-ours-{codec}", f"cli-comp-theirs-{codec}"
    for t in (ours, theirs):
        strand(broker.bootstrap, "topic", "create", t, "--partitions", "1")
    lines = [f"line {i} " + "x" * (i % 50) for i in range(500)]
    strand(broker.bootstrap, "produce", ours, "--compression", codec,
           stdin="\n".join(lines) + "\n")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"rd-{codec}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(ours, 0, 0)])
    got = []
    while len(got) < len(lines):
        m = c.poll(10)
        assert m is not None, f"librdkafka read {len(got)} of {len(lines)}"
        assert not m.error(), m.error()
        got.append(m.value().decode())
    c.close()
    assert got == lines

    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 20})
    for line in lines:
        p.produce(theirs, value=line)
    assert p.flush(30) == 0
    out = strand(broker.bootstrap, "consume", theirs, "--from-beginning", "-n", str(len(lines)))
    assert out.stdout.splitlines() == lines
