"""One chaos run (#19): a cluster (`harness`), idempotent acks=all producers and a consumer
group as the workload, faults on a schedule drawn from a seed, then every fault healed, a
final read of every partition, and the checker over the history. Writes, under `--out`:
history.jsonl, report.txt (the checker's counts and examples, the schedule, the seed),
timeline.svg (faults as bands; acknowledgements per second and their p99 latency).

    scripts/chaos --nodes 3 --seconds 300 --seed N [--faults isolate,kill,...] [--out DIR]

Exit status 0 when every anomaly count is 0, 1 otherwise (2: the run itself failed).
"""
import argparse
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checker  # noqa: E402
import harness  # noqa: E402
import timeline  # noqa: E402

TOPIC = "chaos"
GROUP = "chaos-group"


class History:
    def __init__(self):
        self.lock = threading.Lock()
        self.events = []
        self.t0 = time.time()

    def __call__(self, event):
        event = {"t": round(time.time() - self.t0, 4), "proc": "nemesis", **event}
        with self.lock:
            self.events.append(event)


def producer(history, proc, bootstrap, partitions, rate, stop):
    from confluent_kafka import KafkaError, Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 10000,
                  "retry.backoff.ms": 100})

    def done(err, msg, value=None):
        if err is None:
            history({"proc": proc, "f": "send", "type": "ok", "value": value,
                     "partition": msg.partition(), "offset": msg.offset()})
        else:
            # A send that failed after retries may still have been written (librdkafka's
            # "possibly persisted"): unknown, never counted lost.
            kind = "fail" if err.code() == KafkaError.MSG_SIZE_TOO_LARGE else "info"
            history({"proc": proc, "f": "send", "type": kind, "value": value,
                     "error": err.name()})

    i, start = 0, time.time()
    while not stop.is_set():
        if i > (time.time() - start) * rate:
            time.sleep(0.002)
            p.poll(0)
            continue
        value, part = f"{proc}-{i}", i % partitions
        history({"proc": proc, "f": "send", "type": "invoke", "value": value, "partition": part})
        while True:
            try:
                p.produce(TOPIC, value=value.encode(), partition=part,
                          on_delivery=lambda err, msg, v=value: done(err, msg, v))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        i += 1
    p.flush(90)


def consumer(history, proc, bootstrap, stop):
    from confluent_kafka import Consumer, KafkaException
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                  "heartbeat.interval.ms": 1000})
    c.subscribe([TOPIC])
    since_commit = 0
    while not stop.is_set():
        msgs = c.consume(200, timeout=0.5)
        for m in msgs:
            if m.error():
                continue
            history({"proc": proc, "f": "read", "type": "ok", "partition": m.partition(),
                     "offset": m.offset(), "value": m.value().decode()})
            since_commit += 1
        if since_commit >= 50 or (msgs == [] and since_commit):
            t0 = round(time.time() - history.t0, 4)
            try:
                for tp in c.commit(asynchronous=False) or []:
                    if tp.offset >= 0 and not tp.error:
                        history({"proc": proc, "f": "commit", "type": "ok", "group": GROUP,
                                 "partition": tp.partition, "offset": tp.offset, "t0": t0})
                since_commit = 0
            except KafkaException:
                pass  # (a rebalance or a coordinator move: the next commit retries)
    try:
        c.close()
    except Exception:  # noqa: BLE001
        pass


def final_read(history, bootstrap, partitions, limit_s=120):
    """Every partition from its start up to its high watermark; one "final" event each."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-final",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    highs = {}
    deadline = time.time() + limit_s
    for p in range(partitions):
        while p not in highs and time.time() < deadline:
            try:
                highs[p] = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
            except Exception:  # noqa: BLE001
                time.sleep(0.5)
    c.assign([TopicPartition(TOPIC, p, 0) for p in highs])
    at = {p: 0 for p in highs}
    while time.time() < deadline and any(at[p] < highs[p] for p in highs):
        for m in c.consume(500, timeout=1):
            if m.error():
                continue
            history({"proc": "final", "f": "read", "type": "ok", "partition": m.partition(),
                     "offset": m.offset(), "value": m.value().decode()})
            at[m.partition()] = m.offset() + 1
    for p in highs:
        if at[p] >= highs[p]:
            history({"proc": "final", "f": "final", "type": "ok", "partition": p,
                     "high": highs[p]})
    c.close()


def create_topic(bootstrap, partitions, replicas):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=partitions,
                                  replication_factor=replicas,
                                  config={"min.insync.replicas": "2"})],
                        operation_timeout=30)[TOPIC].result(timeout=60)


def run(args):
    rng = harness.seeded(args.seed)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    history = History()
    cluster = harness.Cluster(os.path.join(out, "cluster"), nodes=args.nodes,
                              use_namespaces=not args.loopback)
    faults = harness.Faults(cluster, rng, history)
    kinds = faults.possible(args.faults.split(","))
    plan = (harness.schedule(rng, kinds, args.seconds, fault_s=(4, 6), quiet_s=(2, 3))
            if args.short else harness.schedule(rng, kinds, args.seconds))
    where = "network namespaces" if cluster.net.enabled else "127.0.0.1 (process faults only)"
    print(f"seed {args.seed}: {args.nodes} nodes on {where}; {len(plan)} faults in "
          f"{args.seconds} s:", flush=True)
    for start, kind, d in plan:
        print(f"  at {start:7.2f} s  {kind:<8} for {d:.2f} s", flush=True)
    stop = threading.Event()
    threads = []
    try:
        cluster.start()
        harness.wait_formed(cluster)
        create_topic(cluster.bootstrap(), args.partitions, min(3, args.nodes))
        history.t0 = time.time()
        for k in range(args.producers):
            threads.append(threading.Thread(target=producer, args=(
                history, f"p{k}", cluster.bootstrap(), args.partitions, args.rate, stop)))
        for k in range(2):
            threads.append(threading.Thread(target=consumer, args=(
                history, f"c{k}", cluster.bootstrap(), stop)))
        for t in threads:
            t.start()
        step = 0
        for start, kind, d in plan:
            while time.time() - history.t0 < start:
                time.sleep(0.05)
            faults.start(kind)
            end = time.time() + d
            while time.time() < end:
                faults.tick(step)
                step += 1
                time.sleep(0.5)
            faults.heal()
        while time.time() - history.t0 < args.seconds:
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(timeout=120)
        harness.wait_formed(cluster)
        final_read(history, cluster.bootstrap(), args.partitions)
    finally:
        stop.set()
        faults.heal()
        cluster.stop()
    with open(os.path.join(out, "history.jsonl"), "w") as f:
        for e in history.events:
            f.write(json.dumps(e) + "\n")
    result = checker.check(history.events)
    counts = {k: sum(1 for e in history.events if e.get("f") == "fault" and
                     e.get("type") == "start" and e.get("fault") == k) for k in kinds}
    text = (f"seed {args.seed}, {args.nodes} nodes, {args.seconds} s, {where}\n"
            f"faults injected: {json.dumps(counts)}\n" + checker.report(result))
    with open(os.path.join(out, "report.txt"), "w") as f:
        f.write(text + "\n")
    timeline.write(os.path.join(out, "timeline.svg"), history.events, args.seconds)
    print(text, flush=True)
    return result


def main(argv=None):
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--nodes", type=int, default=3)
    a.add_argument("--seconds", type=float, default=300)
    a.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    a.add_argument("--faults", default=",".join(harness.FAULTS))
    a.add_argument("--partitions", type=int, default=4)
    a.add_argument("--producers", type=int, default=2)
    a.add_argument("--rate", type=float, default=100, help="records per second per producer")
    a.add_argument("--out", default="target/chaos")
    a.add_argument("--loopback", action="store_true", help="no namespaces: process faults only")
    a.add_argument("--short", action="store_true",
                   help="faults of 4-6 s with 2-3 s between (CI: every kind in ~75 s)")
    args = a.parse_args(argv)
    unknown = set(args.faults.split(",")) - set(harness.FAULTS)
    if unknown:
        a.error(f"unknown faults {sorted(unknown)}; known: {','.join(harness.FAULTS)}")
    result = run(args)
    return 0 if not any(result["counts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
