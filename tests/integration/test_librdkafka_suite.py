"""librdkafka's own tests (from the rdkafka-sys crate's sources, built by
scripts/librdkafka-tests) against a real strand process: transactions (0103), aborted
messages under read_committed (0129), the idempotent producer (0090, 0094); and the whole
suite that applies to one plaintext node (`--all`, test_librdkafka_all)."""
import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "librdkafka-tests")
RUNNER = os.path.join(ROOT, "target", "librdkafka-tests", "tests", "test-runner")

needs_runner = pytest.mark.skipif(
    not os.path.exists(RUNNER),
    reason="librdkafka's test-runner is not built (scripts/librdkafka-tests --build)")


@needs_runner
@pytest.mark.parametrize("tests", ["0103", "0129", "0090", "0094"])
def test_librdkafka_suite(fresh_broker, tests):
    b = fresh_broker.start()
    r = subprocess.run([SCRIPT, b.bootstrap, tests], capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "ALL TESTS PASSED" in out


# The whole set (scripts/librdkafka-exclusions.txt says what is left out and why): 93 tests,
# ~20 min wall on 2 cores with -j 2. CI runs the tests that cover the Kafka 4.x behaviours of
# issue 14 (COMPAT below, ~5 min); the whole set runs with STRAND_LIBRDKAFKA_ALL=1 (or
# `scripts/librdkafka-tests --all`), and its table is in the README. STRAND_LIBRDKAFKA_JOBS
# sets the tests run at once (default 2).
MIN_PASS_PCT = 97.0
# Produce record errors and APPEND configs (0011), ListGroups (0019), commits (0030),
# ListOffsets (0031, 0054), subscriptions and kafka-topics.sh (0045), LogAppendTime (0052),
# the admin API: configs of topics, brokers and groups, replica assignments, authorized
# operations, groups (0081), static membership (0102), topic re-creation (0107), auto-creation
# (0109).
COMPAT = "0011,0019,0030,0031,0045,0052,0054,0081,0102,0107,0109"


def run_all(make_broker, tmp_path, tests=None):
    # Brokers as librdkafka's CI cluster has them (trivup, tests/scenarios/*.json): topics
    # auto-created with 4 partitions, Kafka's 3 s initial rebalance delay (the tests' timing
    # assumes it); the "noautocreate" scenario's tests get a second node without
    # auto-creation.
    conf = {"num.partitions": 4, "group.initial.rebalance.delay.ms": 3000}
    b = make_broker(config=conf).start()
    n = make_broker(config={**conf, "auto.create.topics.enable": False}).start()
    results = tmp_path / "results"
    args = [SCRIPT, "--all", "-j", os.environ.get("STRAND_LIBRDKAFKA_JOBS", "2"),
            "--min-pass", str(MIN_PASS_PCT), "--results", str(results)]
    if tests:
        args += ["--tests", tests]
    r = subprocess.run(args + [b.bootstrap, n.bootstrap], capture_output=True, text=True,
                       timeout=3 * 3600)
    out = r.stdout + r.stderr
    summary = (results / "summary.txt").read_text() if (results / "summary.txt").exists() else out
    print(summary)
    m = re.search(r"(\d+) of (\d+) run tests passed", summary)
    assert m, out[-4000:]
    passed, ran = int(m.group(1)), int(m.group(2))
    assert b.proc.poll() is None and n.proc.poll() is None, "a broker exited during the run"
    return passed, ran, summary, b


@needs_runner
def test_librdkafka_compat(make_broker, tmp_path):
    passed, ran, summary, b = run_all(make_broker, tmp_path, COMPAT)
    assert ran >= len(COMPAT.split(",")), summary
    if passed < ran:
        # One retry of what failed, on fresh brokers: on this 2-core VM an O_DIRECT write can
        # stall for seconds (the performance issue's kworker starvation) and a test with a
        # 10 s flush timeout then fails. A real protocol difference fails twice.
        failed = sorted(set(re.findall(r"FAILED (\d{4})", summary)))
        assert failed, summary
        again, ran2, summary2, b = run_all(make_broker, tmp_path / "retry", ",".join(failed))
        assert again == ran2, f"failed twice:\n{summary}\n{summary2}\n{b.log()[-3000:]}"


@needs_runner
@pytest.mark.skipif(os.environ.get("STRAND_LIBRDKAFKA_ALL", "0") != "1",
                    reason="the whole set (~20 min) runs with STRAND_LIBRDKAFKA_ALL=1")
def test_librdkafka_all(make_broker, tmp_path):
    passed, ran, summary, b = run_all(make_broker, tmp_path)
    assert ran >= 80, f"only {ran} tests ran:\n{summary}"
    assert 100.0 * passed / ran >= MIN_PASS_PCT, \
        f"{passed} of {ran} passed (< {MIN_PASS_PCT}%):\n{summary}\n{b.log()[-3000:]}"
