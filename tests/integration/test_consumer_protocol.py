"""KIP-848 consumer groups (`group.protocol=consumer`) with real clients: the Java client 4.x and
librdkafka, each member a child process (so one can be killed with -9).

One run per client on 8 partitions: 1 member, then 3, then 5; one killed with -9; one added.
Records are produced before each step, and at the end every produced record was read by some
member. Members that stay in the group keep partitions throughout every change (no group-wide
stop: a member never drops to nothing while the group grows), revocations never hit a
partition the member is given back at once, and `kafka-consumer-groups --describe` shows the
group with every partition owned."""
import glob
import os
import shutil
import signal
import subprocess
import sys
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
PARTITIONS = 8
PER_STEP = 80 * PARTITIONS

have_java = shutil.which("java") is not None and glob.glob(os.path.join(LIBS, "kafka-clients-*.jar"))

CONFIG = {
    # Members heartbeat every 500 ms and are dropped 6 s after their last one: a killed
    # member's partitions move within seconds (Kafka's defaults are 5 s and 45 s).
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.session.timeout.ms": 6000,
}


class Member:
    """A member process and what it printed."""

    def __init__(self, client, bootstrap, topic, group, name, tmp, assignor=None):
        self.name = name
        self.stopfile = os.path.join(tmp, f"stop-{name}")
        args = [bootstrap, topic, group, name, self.stopfile] + ([assignor] if assignor else [])
        if client == "java":
            cmd = ["java", "-cp", CP, os.path.join(ROOT, "tests", "java", "ConsumerProtocolMember.java")]
        else:
            cmd = [sys.executable, os.path.join(HERE, "consumer_protocol_member.py")]
        self.proc = subprocess.Popen(cmd + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.events = []  # (time, kind, payload)
        self.err = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            with self.lock:
                self.events.append((time.time(), kind, rest))

    def _read_err(self):
        for line in self.proc.stderr:
            self.err.append(line)

    def records(self):
        with self.lock:
            return {tuple(map(int, e[2].split())) for e in self.events if e[1] == "R"}

    def owned(self):
        """Partitions owned now, replayed from the callbacks."""
        owned = set()
        for _, kind, rest in self.history():
            if kind in ("ASSIGNED", "REVOKED", "LOST"):
                ps = {int(p) for p in rest.split(",") if p}
                if kind == "ASSIGNED":
                    owned |= ps
                elif kind in ("REVOKED", "LOST"):
                    owned -= ps
        return owned

    def history(self):
        with self.lock:
            return [(t, k, r) for t, k, r in self.events if k != "R"]

    def stop(self):
        open(self.stopfile, "w").close()

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def tail(self):
        return f"{self.name}: " + repr(self.history()[-12:]) + " stderr: " + "".join(self.err[-15:])


def produce(bootstrap, topic, n, start):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


def owned_everywhere(members):
    return [m.owned() for m in members]


def settled(members):
    """Every live member owns something, no partition twice, all 8 owned."""
    sets = owned_everywhere(members)
    union = set().union(*sets)
    return (all(sets) and sum(len(s) for s in sets) == len(union) == PARTITIONS) and sets


def run_scenario(broker, client, tmp, assignor=None):
    tag = f"{client}-{assignor or 'default'}"
    topic, group = f"kip848-{tag}", f"kip848-{tag}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    produced = 0
    members = []

    def add(name):
        m = Member(client, broker.bootstrap, topic, group, name, tmp, assignor)
        members.append(m)
        return m

    def live():
        return [m for m in members if m.proc.poll() is None]

    def read_all(what):
        want = {(i % PARTITIONS, i // PARTITIONS) for i in range(produced)}
        context = lambda: "\n".join(m.tail() for m in members) + "\n" + broker.log()[-3000:]  # noqa: E731
        until(f"{what}: every record read",
              lambda: want <= set().union(*(m.records() for m in members)), limit_s=60,
              context=context)
        return until(f"{what}: group settled", lambda: settled(live()), limit_s=60,
                     context=context)

    try:
        produce(broker.bootstrap, topic, PER_STEP, produced)
        produced += PER_STEP
        first = add("m1")
        read_all("one member")
        assert first.owned() == set(range(PARTITIONS))

        # Grow to 3, then 5: the members already there keep partitions throughout.
        for size in (3, 5):
            before = {m.name: m.owned() for m in live()}
            while len(live()) < size:
                add(f"m{len(members) + 1}")
            produce(broker.bootstrap, topic, PER_STEP, produced)
            produced += PER_STEP
            sets = read_all(f"{size} members")
            assert sorted(len(s) for s in sets)[-1] - sorted(len(s) for s in sets)[0] <= 1, sets
            for m in live():
                if m.name in before:
                    assert m.owned() <= before[m.name], f"{m.name} gained while the group grew"
                    # It was never left with nothing: no group-wide stop.
                    owned = set()
                    for _, kind, rest in m.history():
                        ps = {int(p) for p in rest.split(",") if p}
                        if kind == "ASSIGNED":
                            owned |= ps
                        elif kind == "REVOKED":
                            owned -= ps
                            assert owned, f"{m.name} lost every partition: {m.history()}"
                        assert kind != "LOST", f"{m.name} lost partitions: {m.history()}"

        # kill -9 one member: its partitions go to the others after the session timeout.
        victim = live()[1]
        victim.kill9()
        produce(broker.bootstrap, topic, PER_STEP, produced)
        produced += PER_STEP
        sets = read_all("after kill -9")
        assert len(sets) == 4

        # And one more joins.
        add(f"m{len(members) + 1}")
        produce(broker.bootstrap, topic, PER_STEP, produced)
        produced += PER_STEP
        sets = read_all("after adding one")
        assert len(sets) == 5

        # No member's revocation hit a partition it was handed back at once.
        for m in members:
            h = [(k, {int(p) for p in r.split(",") if p}) for _, k, r in m.history()
                 if k in ("ASSIGNED", "REVOKED")]
            for (k1, p1), (k2, p2) in zip(h, h[1:]):
                if k1 == "REVOKED" and k2 == "ASSIGNED":
                    assert not (p1 & p2), f"{m.name} revoked and got back {p1 & p2}: {h}"

        if have_java:
            describe(broker, group, live(), assignor or "uniform")
    finally:
        for m in members:
            m.stop()
        for m in members:
            try:
                m.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                m.kill9()


def describe(broker, group, members, assignor):
    """kafka-consumer-groups --describe: every partition with its member's client id; --members
    lists the five members; --list shows the group."""
    tool = ["java", "-cp", CP, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server", broker.bootstrap]
    r = subprocess.run(tool + ["--describe", "--group", group], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [l.split() for l in r.stdout.splitlines() if l.startswith(group)]
    assert len(rows) == PARTITIONS, r.stdout
    names = {m.name for m in members}
    assert all(row[-1] in names for row in rows), r.stdout
    r = subprocess.run(tool + ["--describe", "--group", group, "--members"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [l for l in r.stdout.splitlines() if l.startswith(group)]
    assert len(rows) == len(members), r.stdout
    r = subprocess.run(tool + ["--describe", "--group", group, "--state"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "Stable" in r.stdout and assignor in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(not have_java, reason="java or the Kafka jars are missing")
@pytest.mark.parametrize("assignor", [None, "range"])
def test_java_consumer_protocol(make_broker, tmp_path, assignor):
    broker = make_broker(config=CONFIG).start()
    run_scenario(broker, "java", str(tmp_path), assignor)


def test_librdkafka_consumer_protocol(make_broker, tmp_path):
    broker = make_broker(config=CONFIG).start()
    run_scenario(broker, "librdkafka", str(tmp_path))


def test_an_empty_classic_group_converts_and_keeps_its_offsets(make_broker, tmp_path):
    """A classic group's members leave; a consumer-protocol member joins the same group id and
    goes on from the offsets the classic members committed."""
    from confluent_kafka import Consumer, TopicPartition
    broker = make_broker(config=CONFIG).start()
    topic = group = "kip848-convert"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    produce(broker.bootstrap, topic, PER_STEP, 0)
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    classic.subscribe([topic])
    seen = 0
    deadline = time.time() + 60
    while seen < PER_STEP // 2 and time.time() < deadline:
        for m in classic.consume(50, 0.5):
            if not m.error():
                seen += 1
                classic.commit(message=m, asynchronous=False)
    committed = classic.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    classic.close()
    assert seen >= PER_STEP // 2
    start = {tp.partition: tp.offset for tp in committed}
    m = Member("librdkafka", broker.bootstrap, topic, group, "upgraded", str(tmp_path))
    try:
        want = {(i % PARTITIONS, i // PARTITIONS) for i in range(PER_STEP)}
        want = {(p, o) for p, o in want if o >= max(start.get(p, 0), 0)}
        until("the rest read by the consumer-protocol member", lambda: want <= m.records(),
              limit_s=60, context=m.tail)
        early = {(p, o) for p, o in m.records() if o < max(start.get(p, 0), 0)}
        assert not early, f"read again below the classic group's commits: {sorted(early)[:10]}"
    finally:
        m.stop()
        m.proc.wait(timeout=30)


@pytest.mark.skipif(not have_java, reason="java or the Kafka jars are missing")
def test_java_regex_subscription_is_resolved_by_the_broker(make_broker):
    """`subscribe(SubscriptionPattern)` (KIP-848's SubscribedTopicRegex): the broker resolves
    the pattern, follows a matching topic created later; the client learns assigned topics by
    id (Metadata v12 with topic ids and empty names)."""
    broker = make_broker(config=CONFIG).start()
    r = subprocess.run(["java", "-cp", CP, os.path.join(ROOT, "tests", "java", "RegexSubscription.java"),
                        broker.bootstrap], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "regex: OK 15" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


def test_librdkafka_regex_subscription_is_resolved_by_the_broker(make_broker):
    from confluent_kafka import Consumer
    broker = make_broker(config=CONFIG).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("rx-orders-eu", 2, 1), NewTopic("rx-payments", 1, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("rx-orders-eu", f"e{i}".encode())
        p.produce("rx-payments", f"p{i}".encode())
    p.flush(30)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rx", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["^rx-orders-.*"])
    seen, created, end = set(), False, time.time() + 60
    try:
        while time.time() < end and len(seen) < 15:
            for m in c.consume(100, 0.2):
                if not m.error():
                    seen.add((m.topic(), m.value().decode()))
            if not created and len(seen) >= 10:
                created = True
                admin.create_topics([NewTopic("rx-orders-us", 1, 1)])["rx-orders-us"].result(30)
                for i in range(5):
                    p.produce("rx-orders-us", f"u{i}".encode())
                p.flush(30)
    finally:
        c.close()
    assert len(seen) == 15 and not any(t == "rx-payments" for t, _ in seen), sorted(seen)
