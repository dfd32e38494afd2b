"""kcat (librdkafka's command-line client) produces keyed lines and reads them back."""
import shutil
import subprocess
import uuid

import pytest


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_produce_and_consume(broker):
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    lines = [f"k{i % 4}:value-{i}" for i in range(100)]
    subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-K:"],
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=60)
    out = subprocess.run(["kcat", "-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning",
                          "-e", "-q", "-f", "%k:%s\n"],
                         capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == lines
    meta = subprocess.run(["kcat", "-L", "-b", broker.bootstrap, "-t", topic],
                          capture_output=True, text=True, check=True, timeout=30)
    assert f'topic "{topic}" with 1 partitions' in meta.stdout
