"""One chaos run (#19): a cluster (`harness`), the workloads (`workloads`: idempotent acks=all
producers, librdkafka's and the Java client's; a consumer group; a transactional
read-process-write and a read_committed reader), faults on a schedule drawn from a seed, then
every fault healed, a final read of every partition, and the checker over the history.
Writes, under `--out`:
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
import segments  # noqa: E402
import timeline  # noqa: E402
import workloads  # noqa: E402
from workloads import OUT_TOPIC, TOPIC  # noqa: E402


class History:
    def __init__(self):
        self.lock = threading.Lock()
        self.events = []
        self.t0 = time.time()

    def __call__(self, event):
        event = {"t": round(time.time() - self.t0, 4), "proc": "nemesis", **event}
        with self.lock:
            self.events.append(event)


def create_topics(bootstrap, partitions, out_partitions, replicas):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(TOPIC, num_partitions=partitions, replication_factor=replicas,
                       config={"min.insync.replicas": "2"})]
    if out_partitions:
        topics.append(NewTopic(OUT_TOPIC, num_partitions=out_partitions,
                               replication_factor=replicas, config={"min.insync.replicas": "2"}))
    for f in admin.create_topics(topics, operation_timeout=30).values():
        f.result(timeout=60)


def start_workloads(args, history, bootstrap, stop):
    """The workload threads, started."""
    # Daemon threads: a client stuck inside librdkafka (its transactional calls can wait
    # forever) must not keep the process — or the pytest run calling `main` — alive at exit.
    def thread(target, *a):
        return threading.Thread(target=target, args=(history, *a), daemon=True)
    threads = [thread(workloads.producer, f"p{k}", bootstrap, args.partitions, args.rate, stop,
                      args.acks) for k in range(args.producers)]
    java = args.java_producers if workloads.java_available() else 0
    threads += [thread(workloads.java_producer, f"j{k}", bootstrap, args.partitions, args.rate,
                       stop, args.acks) for k in range(java)]
    threads += [thread(workloads.consumer, f"c{k}", bootstrap, stop) for k in range(2)]
    if args.out_partitions:
        threads.append(thread(workloads.processor, "t0", bootstrap, args.out_partitions, stop))
        threads.append(thread(workloads.committed_reader, "r0", bootstrap, args.out_partitions,
                              stop))
    for t in threads:
        t.start()
    return threads, java


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
    threads, java = [], 0
    try:
        cluster.start()
        harness.wait_formed(cluster)
        create_topics(cluster.bootstrap(), args.partitions, args.out_partitions,
                      min(3, args.nodes))
        history.t0 = time.time()
        threads, java = start_workloads(args, history, cluster.bootstrap(), stop)
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
        workloads.final_read(history, cluster.bootstrap(), TOPIC, args.partitions)
        if args.out_partitions:
            workloads.final_read(history, cluster.bootstrap(), OUT_TOPIC, args.out_partitions)
    finally:
        stop.set()
        faults.heal()
        cluster.stop()
    with open(os.path.join(out, "history.jsonl"), "w") as f:
        for e in history.events:
            f.write(json.dumps(e) + "\n")
    # Which producer (id, epoch) wrote each offset, from the stopped nodes' segments: the
    # checker tells a broker's duplicate from a client's re-send under a new epoch with it.
    tps = [(TOPIC, p) for p in range(args.partitions)]
    tps += [(OUT_TOPIC, p) for p in range(args.out_partitions)]
    batches = segments.producer_batches(cluster.work, tps)
    result = checker.check(history.events, batches=batches)
    counts = {k: sum(1 for e in history.events if e.get("f") == "fault" and
                     e.get("type") == "start" and e.get("fault") == k) for k in kinds}
    text = (f"seed {args.seed}, {args.nodes} nodes, {args.seconds} s, {where}; workloads: "
            f"{args.producers} librdkafka + {java} Java producers (acks={args.acks}), 2 group "
            f"consumers, {'a transactional processor and a read_committed reader' if args.out_partitions else 'no transactions'}\n"
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
    a.add_argument("--producers", type=int, default=2, help="librdkafka producers")
    a.add_argument("--java-producers", type=int, default=1,
                   help="Java client producers (when java and $STRAND_JAVA_LIBS are there)")
    a.add_argument("--acks", default="all", choices=("all", "1", "0"),
                   help="the producers' acks (1 or 0: a deliberately weakened setting, to show "
                        "the checker finding lost writes)")
    a.add_argument("--out-partitions", type=int, default=2,
                   help="the transactional workload's output topic (0: no transactions)")
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
