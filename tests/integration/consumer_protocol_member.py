"""One member of a KIP-848 consumer group through librdkafka (`group.protocol=consumer`), run
as a child process by test_consumer_protocol.py so it can be killed with -9. Prints the same
events as tests/java/ConsumerProtocolMember.java:
  ASSIGNED p,p,...   REVOKED p,p,...   LOST p,...   R partition offset   READY   CLOSED
and commits after every message batch. Stops (closing, so it leaves the group) when STOPFILE
exists."""
import os
import sys
import time

from confluent_kafka import Consumer

bootstrap, topic, group, name, stopfile = sys.argv[1:6]
conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
        "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False}
if len(sys.argv) > 6:
    conf["group.remote.assignor"] = sys.argv[6]
c = Consumer(conf)


def parts(tps):
    return ",".join(sorted(str(tp.partition) for tp in tps))


def on_assign(consumer, tps):
    print(f"ASSIGNED {parts(tps)}", flush=True)


def on_revoke(consumer, tps):
    if tps:
        print(f"REVOKED {parts(tps)}", flush=True)


def on_lost(consumer, tps):
    print(f"LOST {parts(tps)}", flush=True)


c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
print("READY", flush=True)
deadline = time.time() + 240
while not os.path.exists(stopfile) and time.time() < deadline:
    msgs = c.consume(500, 0.1)
    lines = [f"R {m.partition()} {m.offset()}" for m in msgs if not m.error()]
    if lines:
        print("\n".join(lines), flush=True)
        c.commit(asynchronous=False)
c.close()
print("CLOSED", flush=True)
