"""Starts a real `strand serve` process for the integration tests (no mock broker)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("STRAND_BIN", os.path.join(ROOT, "target", "release", "strand"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(what, pred, limit_s=30, context=None):
    """Polls `pred` until it returns something true (returned) or `limit_s` passes (an
    AssertionError naming `what`, the last result or exception, and `context()` if given).
    Exceptions count as "not yet": a node may still be starting or just killed."""
    end = time.time() + limit_s
    last = None
    while time.time() < end:
        try:
            last = pred()
            if last:
                return last
        except Exception as e:  # noqa: BLE001
            last = e
        time.sleep(0.1)
    extra = ("\n" + context()) if context else ""
    raise AssertionError(f"{what}: not within {limit_s} s (last: {last!r}){extra}")


class Broker:
    """One strand process on a free port with its own data directory."""

    def __init__(self, data_dir, cores=2, config=None, env=None):
        self.data_dir = data_dir
        self.env = env
        # Like the Kafka broker below (and Kafka's own test setups): no initial rebalance delay,
        # so a consumer group starting in a test is not held 3 s; tests that check the delay
        # set it explicitly.
        self.config = {"group.initial.rebalance.delay.ms": 0, **(config or {})}
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.cores = cores
        self.proc = None
        self.log_path = os.path.join(data_dir + "-logs", "strand.log")
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)

    def start(self):
        log = open(self.log_path, "ab")
        args = [BINARY, "serve", "--listen", self.bootstrap, "--data-dir", self.data_dir,
                "--cores", str(self.cores)]
        if self.config:
            path = os.path.join(os.path.dirname(self.log_path), "strand.toml")
            with open(path, "w") as f:
                for k, v in self.config.items():
                    value = str(v).lower() if isinstance(v, bool) else (
                        f'"{v}"' if isinstance(v, str) else str(v))
                    f.write(f'"{k}" = {value}\n')
            args += ["--config", path]
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(self.env or {})})
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"strand exited: {open(self.log_path).read()[-2000:]}")
                time.sleep(0.05)
        raise RuntimeError("strand did not start listening")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


@pytest.fixture(scope="session")
def broker():
    tmp = tempfile.mkdtemp(prefix="strand-it-")
    b = Broker(os.path.join(tmp, "data")).start()
    yield b
    b.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def fresh_broker():
    tmp = tempfile.mkdtemp(prefix="strand-it-")
    b = Broker(os.path.join(tmp, "data"))
    yield b
    b.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def make_broker():
    """A factory: `make_broker(config={...})` gives an unstarted broker with a TOML config."""
    made = []

    def make(**kwargs):
        tmp = tempfile.mkdtemp(prefix="strand-it-")
        b = Broker(os.path.join(tmp, "data"), **kwargs)
        made.append((tmp, b))
        return b

    yield make
    for tmp, b in made:
        b.stop()
        if not os.environ.get("STRAND_KEEP_TEST_DATA"):
            shutil.rmtree(tmp, ignore_errors=True)


KAFKA_LIBS = os.path.join(ROOT, "target", "kafka-libs")


class KafkaBroker:
    """A single-node Apache Kafka 4.x (KRaft) from the Maven Central jars in target/kafka-libs
    (scripts/test fetches them), for running the same checks against Kafka."""

    def __init__(self, work):
        self.work = work
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        props = os.path.join(self.work, "kafka.properties")
        with open(props, "w") as f:
            f.write(f"""process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{self.controller_port}
listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs={self.work}/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
""")
        cp = os.path.join(KAFKA_LIBS, "*")
        cluster_id = subprocess.run(
            ["java", "-cp", cp, "kafka.tools.StorageTool", "random-uuid"],
            capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                        "-c", props], capture_output=True, check=True)
        log = open(os.path.join(self.work, "kafka.log"), "w")
        self.proc = subprocess.Popen(["java", "-Xmx512m", "-cp", cp, "kafka.Kafka", props],
                                     stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                time.sleep(2)  # let the broker finish registering with its controller
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("kafka exited: " + open(os.path.join(self.work, "kafka.log")).read()[-3000:])
                time.sleep(0.2)
        raise RuntimeError("kafka did not start listening")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture(scope="session")
def kafka():
    if not os.path.isdir(KAFKA_LIBS) or not shutil.which("java"):
        pytest.skip("Apache Kafka jars not in target/kafka-libs (scripts/test fetches them)")
    tmp = tempfile.mkdtemp(prefix="kafka-it-")
    k = KafkaBroker(tmp).start()
    yield k
    k.stop()
    shutil.rmtree(tmp, ignore_errors=True)
