"""A well-behaved client, run as its own process beside an attack (so the attacker's Python
work cannot delay its callbacks): an acks=1 producer sends one small record every 5 ms and
a consumer in a group reads them back. acks=1 so its latency measures the broker's request
path, not this VM's fdatasync jitter (with no attack at all, an acks=all client's p99 went
from 7.5 to 28 ms between two 6 s windows); the broker is stopped cleanly before the
restart check, so every acknowledged record must still be there. On SIGTERM it flushes, waits for its
consumer to catch up, and writes a JSON report:
  sent: [[send time (s since epoch), delivery latency ms or null, value, error or null]]
  consumed: values read back.
  consumer: how the consumer ended (drain timed out or not, its errors, assignments), so a
    miss says whether the broker or the consumer lost track.

usage: healthy_client.py BOOTSTRAP TOPIC REPORT_PATH
"""
import json
import signal
import sys
import threading
import time

from confluent_kafka import Consumer, Producer

INTERVAL_S = 0.005
MAX_RUN_S = 300  # every load loop bounded


def main():
    bootstrap, topic, report_path = sys.argv[1:4]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sent = []
    consumed = set()
    consumer = {"errors": [], "assigned": [], "drain_timed_out": False, "last_value": None,
                "last_at": None}

    def consume():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"healthy-{topic}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "error_cb": lambda e: consumer["errors"].append([time.time(), str(e)])})

        def on_assign(_, parts):
            consumer["assigned"].append([time.time(), [(p.partition, p.offset) for p in parts]])

        c.subscribe([topic], on_assign=on_assign)
        drained_at = None
        while True:
            m = c.poll(0.1)
            if m is not None and m.error():
                consumer["errors"].append([time.time(), str(m.error())])
            elif m is not None:
                consumed.add(m.value().decode())
                consumer["last_value"], consumer["last_at"] = m.value().decode(), time.time()
            if stop.is_set():
                acked = {v for _, lat, v, err in sent if err is None and lat is not None}
                drained_at = drained_at or time.time()
                if acked <= consumed:
                    break
                if time.time() - drained_at > 20:
                    consumer["drain_timed_out"] = True
                    break
        c.close()

    reader = threading.Thread(target=consume)
    reader.start()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1",
                  "linger.ms": 0, "message.timeout.ms": 30000})

    def report(entry):
        def on_delivery(err, msg):
            entry[1] = (time.time() - entry[0]) * 1000
            entry[3] = None if err is None else str(err)
        return on_delivery

    started = time.time()
    seq = 0
    next_at = time.time()
    while not stop.is_set() and time.time() - started < MAX_RUN_S:
        entry = [time.time(), None, f"h-{seq}", None]
        sent.append(entry)
        p.produce(topic, value=entry[2].encode(), on_delivery=report(entry))
        seq += 1
        next_at += INTERVAL_S
        while True:
            left = next_at - time.time()
            p.poll(max(left, 0))
            if left <= 0:
                break
    p.flush(30)
    for e in sent:
        if e[1] is None and e[3] is None:
            e[3] = "no delivery report"
    reader.join(60)
    with open(report_path, "w") as f:
        json.dump({"sent": sent, "consumed": sorted(consumed), "consumer": consumer}, f)


if __name__ == "__main__":
    main()
