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
