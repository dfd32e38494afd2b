"""A group member run as a child process by test_group_failures.py: consumes one partition and
holds (sleeps) at message 5, either after processing it but before committing
(at-least-once) or after committing it but before processing (at-most-once), so the test can
kill -9 it at exactly that point."""
import sys
import time

from confluent_kafka import Consumer, TopicPartition

bootstrap, topic, group, mode = sys.argv[1:5]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
c.subscribe([topic])
while True:
    m = c.poll(0.5)
    if m is None or m.error():
        continue
    value = m.value().decode()
    commit = [TopicPartition(m.topic(), m.partition(), m.offset() + 1)]
    if mode == "at-least-once":
        print(f"PROCESSED {value}", flush=True)
        if value == "m5":
            print("HOLD", flush=True)
            time.sleep(120)
        c.commit(offsets=commit, asynchronous=False)
    else:
        c.commit(offsets=commit, asynchronous=False)
        if value == "m5":
            print("HOLD", flush=True)
            time.sleep(120)
        print(f"PROCESSED {value}", flush=True)
