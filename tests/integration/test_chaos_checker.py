"""#19: the chaos checker finds each anomaly it names in a made-up history, and none in a
clean one (the runs themselves are in test_chaos.py and `scripts/chaos`)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "chaos"))
import checker  # noqa: E402


def send(proc, value, partition, offset, t0, t1, outcome="ok"):
    out = [{"t": t0, "proc": proc, "f": "send", "type": "invoke", "value": value,
            "partition": partition}]
    done = {"t": t1, "proc": proc, "f": "send", "type": outcome, "value": value,
            "partition": partition}
    if outcome == "ok":
        done["offset"] = offset
    return out + [done]


def read(value, partition, offset, proc="final", t=100.0):
    return {"t": t, "proc": proc, "f": "read", "type": "ok", "value": value,
            "partition": partition, "offset": offset}


def final(partition):
    return {"t": 200.0, "proc": "final", "f": "final", "type": "ok", "partition": partition,
            "high": 0}


def commit(group, partition, offset, t, t0=None, proc="c1"):
    return {"t": t, "proc": proc, "f": "commit", "type": "ok", "group": group,
            "partition": partition, "offset": offset, "t0": t - 0.5 if t0 is None else t0}


def clean():
    h = []
    for i in range(10):
        h += send("p1", f"p1-{i}", 0, i, t0=i, t1=i + 0.5)
    h += send("p2", "p2-0", 0, 10, t0=20, t1=21)
    h += send("p2", "p2-1", 1, None, t0=22, t1=23, outcome="info")  # unknown, never read: fine
    h += [read(f"p1-{i}", 0, i, proc="c1", t=30) for i in range(5)]
    h += [commit("g", 0, 3, 31), commit("g", 0, 5, 32)]
    h += [read(f"p1-{i}", 0, i) for i in range(10)] + [read("p2-0", 0, 10)]
    h.append(read("p2-1", 1, 0))  # an unknown send may have been written
    return h + [final(0), final(1)]


def test_a_clean_history_has_no_anomaly():
    r = checker.check(clean())
    assert r["counts"] == dict.fromkeys(checker.ANOMALIES, 0), checker.report(r)
    assert r["stats"]["acked"] == 11 and r["stats"]["unknown"] == 1
    assert "lost" in checker.report(r)


def test_each_anomaly_is_found():
    h = clean()
    h += send("p3", "lost-1", 0, 11, t0=40, t1=41)                # acknowledged, never read
    h += send("p5", "moved", 1, 3, t0=42, t1=43)                  # acked at 3, read at 4
    h.append(read("moved", 1, 4))
    h.append(read("p1-3", 0, 12))                                   # read twice: duplicate
    h.append(read("other", 0, 4, proc="c1"))                        # offset 4 holds two values
    h.append(read("ghost", 1, 5))                                   # never sent
    h += [commit("g", 0, 2, 50)]                                    # 5 -> 2: backwards
    # p4: "b" invoked after "a" was acknowledged, but lands below it.
    h += send("p4", "a", 1, 9, t0=60, t1=61) + send("p4", "b", 1, 8, t0=62, t1=63)
    h += [read("a", 1, 9), read("b", 1, 8)]
    r = checker.check(h)
    c = r["counts"]
    assert c["lost"] == 1 and r["examples"]["lost"][0]["value"] == "lost-1"
    assert c["duplicate"] == 1 and r["examples"]["duplicate"][0]["value"] == "p1-3"
    # offset 4's two values, and "moved" read elsewhere than its acknowledgement said
    assert c["inconsistent_offset"] == 2, r["examples"]
    assert c["unexpected"] == 2  # "other" and "ghost"
    assert c["offsets_backwards"] == 1
    assert c["reorder"] == 1 and r["examples"]["reorder"][0]["then"] == "b"


def test_overlapping_commits_may_complete_in_any_order():
    # CI seed 7's first finding: c0's commit of 4646 and c1's of 4367 were both in flight,
    # completed by one high watermark advance of the offsets topic, and answered 20 ms apart
    # in the other order. Not an anomaly; a commit invoked after another completed is.
    h = [commit("g", 1, 4367, t=92.92, t0=80.0, proc="c1"),
         commit("g", 1, 4646, t=92.90, t0=91.0, proc="c0")]
    h.sort(key=lambda e: e["t"])
    assert checker.check(h)["counts"]["offsets_backwards"] == 0
    h.append(commit("g", 1, 4500, t=93.5, t0=93.0, proc="c1"))
    r = checker.check(h)
    assert r["counts"]["offsets_backwards"] == 1, r
    assert r["examples"]["offsets_backwards"][0]["from"] == 4646


def test_concurrent_sends_may_land_in_any_order():
    # Both in flight at once: either order is allowed.
    h = send("p1", "x", 0, 1, t0=1, t1=5) + send("p1", "y", 0, 0, t0=2, t1=6)
    h += [read("x", 0, 1), read("y", 0, 0)]
    assert checker.check(h)["counts"]["reorder"] == 0


def test_a_partition_the_final_read_missed_is_not_counted_lost():
    h = send("p1", "x", 3, 0, t0=1, t1=2)
    assert checker.check(h)["counts"]["lost"] == 0


class FakeBatches:
    """segments.Batches for a test: offset -> (producer id, epoch)."""

    def __init__(self, producers):
        self.producers = producers

    def producer_at(self, offset):
        return self.producers.get(offset)


def test_a_duplicate_under_one_producer_epoch_is_an_anomaly_a_new_epoch_explains_it():
    h = clean()
    h.append(read("p1-3", 0, 12))          # p1-3 also at offset 12
    same = {o: (7, 0) for o in range(13)}   # one producer epoch wrote both copies
    r = checker.check(h, batches={("chaos", 0): FakeBatches(same)})
    assert r["counts"]["duplicate"] == 1, checker.report(r)
    bumped = dict(same)
    bumped[12] = (7, 3)                     # the second copy under a new epoch
    r = checker.check(h, batches={("chaos", 0): FakeBatches(bumped)})
    assert r["counts"]["duplicate"] == 0 and r["stats"]["dup_new_epoch"] == 1, checker.report(r)
    assert "new producer epoch" in checker.report(r)
    # Without the batches nothing is explained.
    assert checker.check(h)["counts"]["duplicate"] == 1


def test_an_output_duplicate_follows_an_input_read_twice():
    h = clean()
    h.append(read("p1-3", 0, 12))
    h.append({"t": 50, "proc": "final", "f": "read", "type": "ok", "topic": "chaos-out",
              "partition": 0, "offset": 0, "value": "x-p1-3"})
    h.append({"t": 50, "proc": "final", "f": "read", "type": "ok", "topic": "chaos-out",
              "partition": 0, "offset": 1, "value": "x-p1-3"})
    r = checker.check(h)
    assert r["counts"]["duplicate"] == 1, "only the input's own duplicate"
    assert r["stats"]["dup_from_input"] == 1


def test_an_acknowledgement_without_an_offset_is_not_inconsistent():
    h = clean()
    h += [{"t": 60, "proc": "p9", "f": "send", "type": "invoke", "value": "p9-0", "partition": 1},
          {"t": 61, "proc": "p9", "f": "send", "type": "ok", "value": "p9-0", "partition": 1,
           "offset": None}, read("p9-0", 1, 5)]
    r = checker.check(h)
    assert r["counts"] == dict.fromkeys(checker.ANOMALIES, 0), checker.report(r)
