"""The Java client (kafka-clients 4.x) and Kafka's own ProducerPerformance tool, from Maven
Central, against strand."""
import glob
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIBS = os.environ.get("STRAND_JAVA_LIBS", os.path.join(ROOT, "target", "java-libs"))
CP = os.path.join(LIBS, "*")

needs_java = pytest.mark.skipif(
    shutil.which("java") is None or not glob.glob(os.path.join(LIBS, "kafka-clients-*.jar")),
    reason="java or the Kafka jars (scripts/test fetches them with Maven) are missing")


@needs_java
def test_java_client(broker):
    r = subprocess.run(["java", "-cp", CP, os.path.join(ROOT, "tests", "java", "JavaClientCheck.java"),
                        broker.bootstrap], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "java client: OK 1000 records" in r.stdout


@needs_java
@pytest.mark.parametrize("acks", ["1", "-1"])
def test_kafka_producer_performance_tool(broker, acks):
    r = subprocess.run(["java", "-cp", CP, "org.apache.kafka.tools.ProducerPerformance",
                        "--topic", f"perf-acks{acks}", "--num-records", "50000", "--record-size", "1024",
                        "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
                        f"acks={acks}"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    final = [l for l in r.stdout.splitlines() if l.startswith("50000 records sent")]
    assert final, r.stdout[-3000:]
    assert re.search(r"records/sec .* 99th", final[0])
    assert "Exception" not in r.stdout + r.stderr


@needs_java
def test_kafka_consumer_performance_tool(broker):
    topic = "perf-consume"
    r = subprocess.run(["java", "-cp", CP, "org.apache.kafka.tools.ProducerPerformance",
                        "--topic", topic, "--num-records", "20000", "--record-size", "1024",
                        "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run(["java", "-cp", CP, "org.apache.kafka.tools.ConsumerPerformance",
                        "--bootstrap-server", broker.bootstrap, "--topic", topic, "--messages", "20000",
                        "--timeout", "60000"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = [l for l in r.stdout.splitlines() if l and l[0].isdigit()]
    assert rows, r.stdout
    assert rows[-1].split(",")[4].strip() == "20000", rows[-1]


@needs_java
def test_java_cooperative_sticky_group_and_consumer_groups_tool(broker):
    import uuid
    topic, group = f"jg-{uuid.uuid4().hex[:8]}", f"jg-{uuid.uuid4().hex[:6]}"
    r = subprocess.run(["java", "-cp", CP, os.path.join(ROOT, "tests", "java", "JavaGroupCheck.java"),
                        broker.bootstrap, topic, group], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "java group: OK 400 records" in r.stdout
    r = subprocess.run(["java", "-cp", CP, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                        "--bootstrap-server", broker.bootstrap, "--describe", "--group", group],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = [l.split() for l in r.stdout.splitlines() if l.startswith(group)]
    assert len(rows) == 4, r.stdout
    header = next(l.split() for l in r.stdout.splitlines() if "LAG" in l)
    lag = header.index("LAG")
    assert all(row[lag] == "0" for row in rows), r.stdout

    def groups_tool(*args):
        out = subprocess.run(["java", "-cp", CP, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                              "--bootstrap-server", broker.bootstrap, *args],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        return out.stdout

    assert group in groups_tool("--list")
    groups_tool("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    described = groups_tool("--describe", "--group", group)
    rows = [l.split() for l in described.splitlines() if l.startswith(group)]
    assert sum(int(row[lag]) for row in rows) == 400, described
    groups_tool("--delete-offsets", "--group", group, "--topic", topic)
    groups_tool("--delete", "--group", group)
    assert group not in groups_tool("--list")
