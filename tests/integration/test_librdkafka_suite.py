"""librdkafka's own tests (from the rdkafka-sys crate's sources, built by
scripts/librdkafka-tests) against a real strand process: transactions (0103), aborted
messages under read_committed (0129), the idempotent producer (0090, 0094)."""
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "librdkafka-tests")
RUNNER = os.path.join(ROOT, "target", "librdkafka-tests", "tests", "test-runner")


@pytest.mark.skipif(not os.path.exists(RUNNER),
                    reason="librdkafka's test-runner is not built (scripts/librdkafka-tests --build)")
@pytest.mark.parametrize("tests", ["0103", "0129", "0090", "0094"])
def test_librdkafka_suite(fresh_broker, tests):
    b = fresh_broker.start()
    r = subprocess.run([SCRIPT, b.bootstrap, tests], capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "ALL TESTS PASSED" in out
