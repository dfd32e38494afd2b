"""#19: a short chaos run (`scripts/chaos --short`): three nodes in network namespaces (on
127.0.0.1 with process faults only where namespaces cannot be made), idempotent acks=all
producers and a consumer group, every fault kind at least once (isolate, split, bridge,
oneway, flap, kill, pause, restart), then the checker: every anomaly count must be 0, and
most sends must have been acknowledged by the end (the cluster came back).

The `restart` fault (every node killed at once) found the harness's first bug: records a
consumer had read were replaced after the restart (docs/design/durable-visibility.md);
`test_every_node_killed_at_once_loses_nothing_consumers_saw` is its regression test (seed 2
found it with the build before the fix).
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "chaos"))
import harness  # noqa: E402
import run  # noqa: E402


def chaos(tmp_path, *args, acked_at_least):
    extra = [] if harness.namespaces_possible() else ["--loopback"]
    status = run.main([*args, "--out", str(tmp_path), *extra])
    report = open(tmp_path / "report.txt").read()
    print(report)
    sends, acked = map(int, re.search(r"operations: (\d+) sends \((\d+) acknowledged",
                                      report).groups())
    # (Liveness, loosely: after every node is killed at once an idempotent producer can
    # stall for tens of seconds — a known #19 problem, see the README.)
    assert acked >= sends * acked_at_least, f"{acked} of {sends} acknowledged:\n{report}"
    return status, report


# Findings the short run tolerates (counted and printed, not failed on): none now. CI seed 7's
# first run reported offsets_backwards (c0 committed 4646, 20 ms later c1 committed 4367):
# both commits were in flight together and completed by one offsets-topic high watermark
# advance, so their answers' order means nothing; the checker now orders commits by
# invoke-after-acknowledgement only (test_chaos_checker.py).
KNOWN = set()


def test_a_short_chaos_run_finds_no_anomaly(tmp_path):
    seed = os.environ.get("STRAND_CHAOS_SEED", "7")
    status, report = chaos(tmp_path, "--seconds", "95", "--short", "--seed", seed,
                           acked_at_least=0.3)
    counts = dict(re.findall(r"^  (\w+)\s+(\d+)$", report, re.M))
    assert set(counts) >= {"lost", "duplicate", "inconsistent_offset"}, report
    assert all(int(n) == 0 for kind, n in counts.items() if kind not in KNOWN), report
    assert status == 0 or any(int(counts[k]) for k in KNOWN), report
    injected = next(line for line in report.splitlines() if line.startswith("faults injected"))
    on_namespaces = "network namespaces" in report.splitlines()[0]
    expected = harness.FAULTS if on_namespaces else harness.PROCESS_FAULTS
    for kind in expected:
        assert re.search(rf'"{kind}": [1-9]', injected), report
    with open(tmp_path / "timeline.svg") as f:
        assert f.read().startswith("<svg")


def test_every_node_killed_at_once_loses_nothing_consumers_saw(tmp_path):
    status, report = chaos(tmp_path, "--seconds", "45", "--seed", "2", "--faults", "restart",
                           acked_at_least=0.1)
    assert status == 0, report
