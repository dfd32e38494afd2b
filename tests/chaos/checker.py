"""The chaos harness's checker (#19): reads a history (JSON lines, one event each) and counts
what Jepsen's Kafka analyses look for.

Events (every one has "t" (seconds), "proc" and "f"):
- f "send": "type" "invoke" (value, partition), then "ok" (value, partition, offset), "fail"
  (value: the client was told it was not written) or "info" (value: unknown, e.g. a timeout).
- f "read": "type" "ok", one per record a consumer or the final reader saw (topic,
  partition, offset, value; the topic "chaos" if absent); f "final": "type" "ok" (topic,
  partition, high): the final reader read that partition whole, up to its high watermark,
  after every fault was healed.
- f "txn": "type" "invoke" (txn, topic, values: what the transaction writes there, and
  partitions: where each goes), then "ok" (committed), "fail" (aborted) or "info" (unknown).
- f "commit": "type" "ok" (group, partition, offset, "t0": when the commit was invoked): a
  consumer group committed an offset.

Anomalies (each a count, with the first examples):
- lost: acknowledged (send ok) and never read, though the final read covered its partition;
- duplicate: one value at two or more offsets — unless explained (given the producers of the
  batches, `segments.py`): every copy written under another (producer id, epoch), i.e. the
  client re-sent it after bumping its epoch (a broker deduplicates within an epoch only, as
  Kafka's); or an output value of the transactional processor whose input value was itself
  read at as many offsets (each input record is processed once). Explained ones are counted
  in the stats, not as anomalies;
- inconsistent_offset: one (partition, offset) read with two values, or a value read at
  another offset than its acknowledgement named;
- reorder: one producer's two acknowledged sends to a partition, the second invoked after
  the first was acknowledged, at offsets in the other order;
- unexpected: a value read that no send invoked;
- aborted_read: a value of an aborted transaction read (every reader is read_committed);
- txn_lost: a value of a committed transaction never read, though the final read covered
  its partition of the output topic;
- offsets_backwards: a group's committed offset for a partition went down: a commit invoked
  after another was acknowledged named a lower offset. (Commits that overlap in time have no
  order: two members' commits completed by one high watermark advance of the offsets topic
  can be answered in either order; the first CI seed-7 finding was that.)
"""
import json
from collections import defaultdict

ANOMALIES = ("lost", "duplicate", "inconsistent_offset", "reorder", "unexpected",
             "aborted_read", "txn_lost", "offsets_backwards")
INPUT = "chaos"


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check(events, examples=3, batches=None):
    """{"counts": {anomaly: n}, "examples": {anomaly: [...]}, "stats": {...}}. `batches`:
    {(topic, partition): segments.Batches}, to explain duplicates (see above)."""
    invoked = {}            # value -> (proc, partition, t)
    acked = {}              # value -> (proc, partition, offset, t_invoke, t_ok)
    failed, unknown = set(), set()
    at = defaultdict(set)   # (topic, partition, offset) -> values read there
    where = defaultdict(set)  # value -> (topic, partition, offset) read
    txns = {}               # txn -> ([(value, (topic, partition))], outcome)
    final_partitions = set()
    commits = defaultdict(list)  # (group, partition) -> [(t_invoke, t_ok, offset, proc)]
    found = {a: [] for a in ANOMALIES}
    counts = dict.fromkeys(ANOMALIES, 0)
    explained = defaultdict(int)

    def anomaly(kind, example):
        counts[kind] += 1
        if len(found[kind]) < examples:
            found[kind].append(example)

    for e in events:
        f, kind = e.get("f"), e.get("type")
        if f == "send":
            v = e["value"]
            if kind == "invoke":
                invoked[v] = (e["proc"], e.get("partition"), e["t"])
            elif kind == "ok":
                proc, _, t0 = invoked.get(v, (e["proc"], None, e["t"]))
                acked[v] = (proc, e["partition"], e["offset"], t0, e["t"])
            elif kind == "fail":
                failed.add(v)
            else:
                unknown.add(v)
        elif f == "read" and kind == "ok":
            key = (e.get("topic", INPUT), e["partition"], e["offset"])
            at[key].add(e["value"])
            where[e["value"]].add(key)
        elif f == "final" and kind == "ok":
            final_partitions.add((e.get("topic", INPUT), e["partition"]))
        elif f == "txn":
            if kind == "invoke":
                tps = [(e["topic"], p) for p in e["partitions"]]
                txns[e["txn"]] = (list(zip(e["values"], tps)), None)
            elif e["txn"] in txns:
                txns[e["txn"]] = (txns[e["txn"]][0], kind)
        elif f == "commit" and kind == "ok":
            commits[(e["group"], e["partition"])].append(
                (e.get("t0", e["t"]), e["t"], e["offset"], e["proc"]))

    for key, values in sorted(at.items()):
        if len(values) > 1:
            anomaly("inconsistent_offset", {"topic": key[0], "partition": key[1],
                                            "offset": key[2], "values": sorted(values)})
    # value -> [(txn, outcome, (topic, partition))]: a value aborted once is written again
    # by the transaction that processes its input again.
    written = defaultdict(list)
    for t, (vs, outcome) in txns.items():
        for v, tp in vs:
            written[v].append((t, outcome, tp))
    for v, places in sorted(where.items()):
        if v in written:
            if all(outcome == "fail" for _, outcome, _ in written[v]):
                anomaly("aborted_read", {"value": v, "txn": written[v][0][0],
                                         "read_at": sorted(places)})
        elif v not in invoked:
            anomaly("unexpected", {"value": v, "read_at": sorted(places)})
        if len(places) > 1:
            why = _explained(v, places, where, batches)
            if why:
                explained[why] += 1
            else:
                anomaly("duplicate", {"value": v, "read_at": sorted(places)})
    for v, ws in sorted(written.items()):
        for t, outcome, tp in ws:
            if outcome == "ok" and not where.get(v) and tp in final_partitions:
                anomaly("txn_lost", {"value": v, "txn": t, "topic": tp[0], "partition": tp[1]})
    for v, (proc, p, off, _, _) in sorted(acked.items()):
        places = where.get(v)
        if not places:
            if (INPUT, p) in final_partitions:
                anomaly("lost", {"value": v, "partition": p, "acked_offset": off})
        elif off is not None and (INPUT, p, off) not in places:
            # (An acknowledgement without an offset — librdkafka's, when it learns from the
            # broker's sequence numbers that a batch it had no answer for was written —
            # names no position to disagree with.)
            anomaly("inconsistent_offset", {"value": v, "acked_at": [p, off],
                                            "read_at": sorted(places)})
    # Per producer and partition: a send invoked after another was acknowledged must land at
    # a higher offset.
    by_stream = defaultdict(list)
    for v, (proc, p, _, t0, t1) in acked.items():
        places = where.get(v)
        if places:
            by_stream[(proc, p)].append((t0, t1, min(o for _, _, o in places), v))
    for (proc, p), sends in sorted(by_stream.items()):
        for first, then in went_down(sends):
            anomaly("reorder", {"producer": proc, "partition": p, "first": first[3],
                                "first_offset": first[2], "then": then[3],
                                "offset": then[2]})
    for (group, p), done in sorted(commits.items()):
        for first, then in went_down(done):
            anomaly("offsets_backwards", {"group": group, "partition": p,
                                          "from": first[2], "by": first[3], "to": then[2],
                                          "then_by": then[3]})
    stats = {"sends": len(invoked), "acked": len(acked), "failed": len(failed),
             "unknown": len(unknown),
             "no_outcome": len(set(invoked) - set(acked) - failed - unknown),
             "read_values": len(where),
             "final_partitions": len(final_partitions),
             "commits": sum(len(c) for c in commits.values()),
             "txns": len(txns),
             "txns_committed": sum(1 for _, o in txns.values() if o == "ok"),
             "txns_aborted": sum(1 for _, o in txns.values() if o == "fail"),
             "txns_stuck": sum(1 for e in events if e.get("f") == "txn-stuck"),
             "dup_new_epoch": explained["new_epoch"],
             "dup_from_input": explained["from_input"]}
    return {"counts": counts, "examples": {k: v for k, v in found.items() if v},
            "stats": stats}


def went_down(ops):
    """Pairs (first, then) of ops `(t_invoke, t_ok, offset, label)` where `then` was invoked
    after `first` was acknowledged and names a lower offset: a sweep in invoke order over the
    ops acknowledged before each, keeping the highest offset among them."""
    by_ack = sorted(ops, key=lambda o: o[1])
    done, highest = 0, None
    for op in sorted(ops):
        while done < len(by_ack) and by_ack[done][1] < op[0]:
            if highest is None or by_ack[done][2] > highest[2]:
                highest = by_ack[done]
            done += 1
        if highest is not None and op[2] < highest[2]:
            yield highest, op


def _explained(v, places, where, batches):
    """Why value `v`, read at `places`, is there more than once, if explained: "new_epoch",
    "from_input", or None."""
    if batches is not None:
        producers = []
        for topic, partition, offset in places:
            b = batches.get((topic, partition))
            producers.append(b.producer_at(offset) if b else None)
        if None not in producers and len(set(producers)) == len(producers):
            return "new_epoch"
    topics = {t for t, _, _ in places}
    if topics == {"chaos-out"} and v.startswith("x-"):
        if len(where.get(v[2:], ())) >= len(places):
            return "from_input"
    return None


def report(result):
    """The checker's result as text: counts per anomaly, then the first examples."""
    s = result["stats"]
    lines = [f"operations: {s['sends']} sends ({s['acked']} acknowledged, {s['failed']} "
             f"failed, {s['unknown']} unknown, {s['no_outcome']} with no outcome by the end), "
             f"{s['read_values']} values read, "
             f"{s['commits']} offset commits, {s['txns']} transactions "
             f"({s['txns_committed']} committed, {s['txns_aborted']} aborted, "
             f"{s['txns_stuck']} client calls stuck and abandoned); "
             f"final read of {s['final_partitions']} partitions"]
    if s["dup_new_epoch"] or s["dup_from_input"]:
        lines.append(f"explained duplicates (not anomalies): {s['dup_new_epoch']} values "
                     f"written again under a new producer epoch (the client re-sent what it "
                     f"had no answer for after bumping its epoch), {s['dup_from_input']} "
                     f"output values of an input value read at several offsets")
    for a in ANOMALIES:
        lines.append(f"  {a:<20}{result['counts'][a]:>8}")
    for a, ex in result["examples"].items():
        for e in ex:
            lines.append(f"  e.g. {a}: {json.dumps(e)}")
    return "\n".join(lines)
