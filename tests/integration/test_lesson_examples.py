"""The lesson's own client code (../shared/examples), unmodified, against strand."""
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "examples"))


@pytest.mark.parametrize("script", ["basic_producer.py", "keyed_producer.py", "group_consumer.py",
                                    "eos_read_process_write.py"])
def test_lesson_example(broker, script):
    path = os.path.join(EXAMPLES, script)
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    r = subprocess.run([sys.executable, path], env={**os.environ, "BOOTSTRAP": broker.bootstrap},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout
