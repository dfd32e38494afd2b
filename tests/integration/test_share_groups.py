"""Share groups (KIP-932, "queues for Kafka") with the Java client 4.x's KafkaShareConsumer,
each member a child process (tests/java/ShareMember.java) so it can be killed with -9.

- 4 members on one partition share the work; explicit ACCEPT / RELEASE / REJECT: released
  records come back with delivery count 2, rejected ones never;
- a member killed mid-batch: its records are redelivered after the acquisition lock
  (`share.record.lock.duration.ms`) with delivery count 2;
- records released past `share.delivery.count.limit` are archived (never delivered again);
- the broker killed with -9 and restarted in the middle: every record is accepted, and none
  accepted before the restart is delivered again after it.
"""
import glob
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import until

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LIBS = os.environ.get("STRAND_JAVA_LIBS", os.path.join(ROOT, "target", "java-libs"))
CP = os.path.join(LIBS, "*")

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or not glob.glob(os.path.join(LIBS, "kafka-clients-*.jar")),
    reason="java or the Kafka jars are missing")

CONFIG = {"group.share.heartbeat.interval.ms": 500, "group.share.session.timeout.ms": 6000}


class Member:
    def __init__(self, broker, topic, group, name, mode, tmp):
        self.name = name
        self.stopfile = os.path.join(tmp, f"stop-{name}")
        cmd = ["java", "-cp", CP, os.path.join(ROOT, "tests", "java", "ShareMember.java"),
               broker.bootstrap, topic, group, name, self.stopfile, mode]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []  # (time, fields)
        self.err = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append((time.time(), line.split()))

    def got(self, since=0.0):
        """(offset, delivery count) of each delivery to it."""
        with self.lock:
            return [(int(f[2]), int(f[3])) for t, f in self.lines if f and f[0] == "GOT" and t >= since]

    def acked(self, kind=None, before=None):
        with self.lock:
            return {(int(f[2])) for t, f in self.lines if f and f[0] == "ACK"
                    and (kind is None or f[3].upper() == kind) and (before is None or t < before)}

    def stop(self):
        open(self.stopfile, "w").close()

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def tail(self):
        with self.lock:
            last = [" ".join(f) for _, f in self.lines[-8:]]
        return f"{self.name}: {last} stderr: {''.join(self.err[-10:])}"


def setup(broker, topic, group, **configs):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    settings = {"share.auto.offset.reset": "earliest", **configs}
    r = subprocess.run(["java", "-cp", CP, "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server",
                        broker.bootstrap, "--alter", "--entity-type", "groups", "--entity-name", group,
                        "--add-config", ",".join(f"{k}={v}" for k, v in settings.items())],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def produce(broker, topic, n, start=0, pause_every=0, batch=0):
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
    for i in range(start, start + n):
        p.produce(topic, value=f"v{i}".encode())
        if batch and (i + 1) % batch == 0:
            p.flush(30)
        if pause_every and (i + 1) % pause_every == 0:
            p.flush(30)
            time.sleep(0.1)
    assert p.flush(30) == 0


def finish(members):
    for m in members:
        m.stop()
    for m in members:
        try:
            m.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            m.kill9()


def context(members, broker):
    return lambda: "\n".join(m.tail() for m in members) + "\n" + broker.log()[-2000:]


def test_four_members_share_one_partition_with_accept_release_reject(make_broker, tmp_path):
    broker = make_broker(config=CONFIG).start()
    topic = group = "share-mixed"
    setup(broker, topic, group, **{"share.record.lock.duration.ms": 5000})
    members = [Member(broker, topic, group, f"s{i}", "mixed", str(tmp_path)) for i in range(4)]
    try:
        until("members ready", lambda: all(any(f == ["READY"] for _, f in m.lines) for m in members),
              limit_s=60, context=context(members, broker))
        time.sleep(4)  # all assigned, each with a fetch waiting
        n = 300
        # Batches of 10: records are acquired a whole batch at a time.
        produce(broker, topic, n, batch=10)
        accepted = lambda: set().union(*(m.acked("ACCEPT") for m in members))  # noqa: E731
        want = {o for o in range(n) if o % 3 != 1}
        until("every record accepted but the rejected", lambda: want <= accepted(), limit_s=90,
              context=context(members, broker))
        deliveries = [d for m in members for d in m.got()]
        assert all(len(m.got()) > 0 for m in members), [len(m.got()) for m in members]
        rejected = {o for o in range(n) if o % 3 == 1}
        assert rejected <= set().union(*(m.acked("REJECT") for m in members))
        assert not [d for d in deliveries if d[0] in rejected and d[1] > 1], "a rejected record came back"
        for o in range(0, n, 3):
            assert (o, 2) in deliveries, f"released {o} not redelivered with count 2"
        assert not [d for d in deliveries if d[0] % 3 == 2 and d[1] > 1], "an accepted record came back"
    finally:
        finish(members)


def test_a_member_killed_mid_batch_has_its_records_redelivered_after_the_lock(make_broker, tmp_path):
    broker = make_broker(config=CONFIG).start()
    topic = group = "share-killed"
    setup(broker, topic, group, **{"share.record.lock.duration.ms": 3000})
    holder = Member(broker, topic, group, "holder", "hold", str(tmp_path))
    members = [holder]
    try:
        until("holder ready", lambda: any(f == ["READY"] for _, f in holder.lines), limit_s=60)
        produce(broker, topic, 10)
        until("holder got records", lambda: holder.got(), limit_s=60, context=context(members, broker))
        held = {o for o, _ in holder.got()}
        holder.kill9()
        killed_at = time.time()
        taker = Member(broker, topic, group, "taker", "accept", str(tmp_path))
        members.append(taker)
        until("held records accepted by the other member", lambda: held <= taker.acked("ACCEPT"),
              limit_s=60, context=context(members, broker))
        again = [(o, c) for o, c in taker.got() if o in held]
        assert all(c == 2 for o, c in again), again
        first = min(t for t, f in taker.lines if f and f[0] == "GOT")
        assert first - killed_at > 1.0, "redelivered before the lock could have expired"
    finally:
        finish(members)


def test_records_past_the_delivery_count_limit_are_archived(make_broker, tmp_path):
    broker = make_broker(config=CONFIG).start()
    topic = group = "share-limit"
    setup(broker, topic, group, **{"share.delivery.count.limit": 2,
                                    "share.record.lock.duration.ms": 2000})
    m = Member(broker, topic, group, "releaser", "release", str(tmp_path))
    try:
        until("ready", lambda: any(f == ["READY"] for _, f in m.lines), limit_s=60)
        produce(broker, topic, 10)
        until("each record delivered twice", lambda: {(o, 2) for o in range(10)} <= set(m.got()),
              limit_s=60, context=context([m], broker))
        time.sleep(3)
        assert max(c for _, c in m.got()) == 2, sorted(set(m.got()))
        # Newer records still flow past the archived ones.
        produce(broker, topic, 1, start=10)
        until("the next record", lambda: (10, 1) in m.got(), limit_s=30)
    finally:
        finish([m])


def test_a_broker_restart_loses_no_acknowledgement(make_broker, tmp_path):
    broker = make_broker(config=CONFIG).start()
    topic = group = "share-restart"
    setup(broker, topic, group)
    members = [Member(broker, topic, group, f"r{i}", "accept", str(tmp_path)) for i in range(2)]
    try:
        until("members ready", lambda: all(any(f == ["READY"] for _, f in m.lines) for m in members),
              limit_s=60)
        n = 400
        produce(broker, topic, n // 2, pause_every=20)
        accepted = lambda before=None: set().union(*(m.acked("ACCEPT", before) for m in members))  # noqa: E731
        until("some accepted", lambda: len(accepted()) >= 50, limit_s=60, context=context(members, broker))
        broker.kill9()
        restarted_at = time.time()
        before = accepted(restarted_at)
        broker.start()
        produce(broker, topic, n // 2, start=n // 2, pause_every=20)
        until("every record accepted", lambda: set(range(n)) <= accepted(), limit_s=120,
              context=context(members, broker))
        redelivered = {o for m in members for o, _ in m.got(since=restarted_at + 0.5) if o in before}
        assert not redelivered, f"accepted before the restart, delivered again: {sorted(redelivered)[:20]}"
    finally:
        finish(members)


def test_the_native_cli_consumes_as_a_share_group(make_broker):
    """`strand consume --group G --share`: records acknowledged as printed (accept by default,
    --ack reject or release), with their delivery count (%d); `strand group describe` shows
    the share group."""
    from conftest import BINARY
    broker = make_broker(config=CONFIG).start()
    topic = group = "share-cli"
    setup(broker, topic, group)
    produce(broker, topic, 10)
    env = {**os.environ, "STRAND_BROKERS": broker.bootstrap}

    def consume(*extra):
        r = subprocess.run([BINARY, "consume", topic, "--group", group, "--share", "-f", "%o:%d\\n",
                            *extra], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        return [tuple(map(int, line.split(":"))) for line in r.stdout.split()]

    assert consume("-n", "4") == [(0, 1), (1, 1), (2, 1), (3, 1)]
    # The rest was acquired by that run and given back when it stopped: count 2 now.
    assert consume("-n", "3", "--ack", "reject") == [(4, 2), (5, 2), (6, 2)]
    # 7..9 went back again with the second run: count 3; 4..6, rejected, never come back.
    assert consume("-n", "3") == [(7, 3), (8, 3), (9, 3)]
    r = subprocess.run([BINARY, "group", "describe", group], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0 and group in r.stdout, r.stdout + r.stderr


def test_kafka_share_groups_tool_describes_resets_and_deletes_offsets(make_broker):
    """`kafka-share-groups --describe` (ShareGroupDescribe, DescribeShareGroupOffsets), then
    `--reset-offsets --to-earliest --execute` (AlterShareGroupOffsets) and `--delete-offsets`
    (DeleteShareGroupOffsets) on the emptied group: the records come again from offset 0."""
    from conftest import BINARY
    broker = make_broker(config=CONFIG).start()
    topic = group = "share-tool"
    setup(broker, topic, group)
    produce(broker, topic, 10)
    env = {**os.environ, "STRAND_BROKERS": broker.bootstrap}

    def consume(n):
        r = subprocess.run([BINARY, "consume", topic, "--group", group, "--share", "-n", str(n),
                            "-f", "%o:%d\\n"], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        return [tuple(map(int, line.split(":"))) for line in r.stdout.split()]

    def tool(*args):
        r = subprocess.run(["java", "-cp", CP, "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                            "--bootstrap-server", broker.bootstrap, *args],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return [l.split() for l in r.stdout.splitlines() if l.startswith(group)]

    assert consume(4) == [(0, 1), (1, 1), (2, 1), (3, 1)]
    rows = tool("--describe", "--group", group)
    assert [(r[1], r[2], r[3]) for r in rows] == [(topic, "0", "4")], rows
    tool("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert consume(2) == [(0, 1), (1, 1)], "after the reset, from the start with fresh counts"
    tool("--delete-offsets", "--group", group, "--topic", topic)
    # No state: share.auto.offset.reset (earliest) applies again.
    assert consume(1) == [(0, 1)]
