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


class Broker:
    """One strand process on a free port with its own data directory."""

    def __init__(self, data_dir, cores=2, config=None):
        self.data_dir = data_dir
        self.config = config or {}
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
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
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
