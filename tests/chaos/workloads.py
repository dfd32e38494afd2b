"""The chaos run's workloads (#19), each a thread writing events to the history:

- `producer`: an idempotent acks=all librdkafka producer of unique values ("p0-17");
- `java_producer`: the same with Apache Kafka's Java client (ChaosProducer.java, run as a
  single-file program from the jars in $STRAND_JAVA_LIBS);
- `consumer`: a member of a consumer group over the input topic, committing offsets;
- `processor`: transactional read-process-write (KIP-98/447): consumes the input topic in
  group `TXN_GROUP` (read_committed), writes "x-<value>" to the output topic and the offsets
  in one transaction; every fifth transaction is aborted on purpose;
- `committed_reader`: a read_committed reader of the output topic (never to see an aborted
  value);
- `final_read`: every partition of a topic from its start to its high watermark, once every
  fault healed.
"""
import glob
import json
import os
import shutil
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOPIC = "chaos"
OUT_TOPIC = "chaos-out"
GROUP = "chaos-group"
TXN_GROUP = "chaos-txn"
JAVA_LIBS = os.environ.get("STRAND_JAVA_LIBS",
                           os.path.join(HERE, "..", "..", "target", "kafka-libs"))


def producer(history, proc, bootstrap, partitions, rate, stop, acks="all"):
    """`acks` other than "all" (a deliberately weakened setting, `run.py --acks 1`) turns
    idempotence off too (it requires acks=all)."""
    from confluent_kafka import KafkaError, Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": acks == "all",
                  "acks": acks,
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


def java_available():
    return bool(shutil.which("java") and glob.glob(os.path.join(JAVA_LIBS, "kafka-clients-*.jar")))


def java_producer(history, proc, bootstrap, partitions, rate, stop, acks="all"):
    """ChaosProducer.java in a JVM of its own; its JSON lines go to the history as they are
    (their "t" is the JVM's, on the history's clock)."""
    cmd = ["java", "-Xmx256m", "-cp", os.path.join(JAVA_LIBS, "*"),
           os.path.join(HERE, "ChaosProducer.java"), bootstrap, TOPIC, str(partitions),
           str(rate), proc, str(int(history.t0 * 1000)), acks]
    jvm = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)

    def closer():
        stop.wait()
        try:
            jvm.stdin.close()
        except OSError:
            pass

    threading.Thread(target=closer, daemon=True).start()
    for line in jvm.stdout:
        try:
            history(json.loads(line))
        except ValueError:
            pass
    try:
        jvm.wait(timeout=120)
    except subprocess.TimeoutExpired:
        jvm.kill()


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
            history({"proc": proc, "f": "read", "type": "ok", "topic": TOPIC,
                     "partition": m.partition(), "offset": m.offset(),
                     "value": m.value().decode()})
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


def _rewind(c):
    """After an aborted transaction: back to the group's committed offsets (what the
    aborted transaction read is processed again)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    assigned = c.assignment()
    if not assigned:
        return
    for tp in c.committed(assigned, timeout=10):
        off = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        c.seek(TopicPartition(tp.topic, tp.partition, off))


def _transactional(history, bootstrap, proc, stop):
    """A transactional producer, initialised (InitProducerId: it fences an older one with
    this transactional.id); every failed attempt goes to the history (f "txn-init")."""
    from confluent_kafka import KafkaException, Producer
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"chaos-{proc}",
                  "transaction.timeout.ms": 30000, "message.timeout.ms": 30000,
                  "linger.ms": 5})
    while not stop.is_set():
        try:
            p.init_transactions(30)
            return p
        except KafkaException as e:
            history({"proc": proc, "f": "txn-init", "type": "fail", "error": str(e.args[0])})
            if e.args[0].fatal():
                p = Producer({"bootstrap.servers": bootstrap,
                              "transactional.id": f"chaos-{proc}",
                              "transaction.timeout.ms": 30000, "message.timeout.ms": 30000,
                              "linger.ms": 5})
            time.sleep(0.5)
    return None


# A transaction's client calls, together, at most this long (each has its own 30 s limit,
# which librdkafka does not always keep).
TXN_CALL_LIMIT_S = 100


def _bounded(fn, limit_s):
    """`fn()` on a thread of its own: its result, its exception, or TimeoutError if it has
    not returned within `limit_s` (the thread is left behind)."""
    box = {}

    def run():
        try:
            box["ok"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["err"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit_s)
    if t.is_alive():
        raise TimeoutError(f"no answer within {limit_s} s")
    if "err" in box:
        raise box["err"]
    return box.get("ok")


def processor(history, proc, bootstrap, out_partitions, stop):
    """Read-process-write with transactions; history events f "txn": invoke (txn, values),
    then ok (committed), fail (aborted: its values must never be read under
    read_committed) or info (unknown)."""
    from confluent_kafka import Consumer, KafkaException
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": TXN_GROUP,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "session.timeout.ms": 10000,
                  "heartbeat.interval.ms": 1000})
    c.subscribe([TOPIC])
    p = _transactional(history, bootstrap, proc, stop)
    abandoned = []
    n = 0
    while p is not None and not stop.is_set():
        msgs = [m for m in c.consume(100, timeout=0.5) if not m.error()]
        if not msgs:
            continue
        n += 1
        txn = f"{proc}-t{n}"
        outs = [f"x-{m.value().decode()}" for m in msgs]
        on_purpose = n % 5 == 0
        parts = [m.partition() % out_partitions for m in msgs]
        history({"proc": proc, "f": "txn", "type": "invoke", "txn": txn, "topic": OUT_TOPIC,
                 "values": outs, "partitions": parts})
        outcome = "info"

        def transaction():
            p.begin_transaction()
            for v, part in zip(outs, parts):
                p.produce(OUT_TOPIC, value=v.encode(), partition=part)
            if on_purpose:
                p.abort_transaction(30)
                return "fail"
            at = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
            p.send_offsets_to_transaction(at, c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            return "ok"
        try:
            outcome = _bounded(transaction, TXN_CALL_LIMIT_S)
        except TimeoutError:
            # librdkafka's send_offsets_to_transaction can wait forever (its coordinator
            # request has no deadline: the 30-minute run of session 29 lost its processor
            # so). The outcome is unknown; the stuck producer is left to its thread (destroying
            # it could hang too) and a new one fences it.
            history({"proc": proc, "f": "txn-stuck", "txn": txn, "limit_s": TXN_CALL_LIMIT_S})
            abandoned.append(p)
            p = _transactional(history, bootstrap, proc, stop)
        except KafkaException as e:
            err = e.args[0]
            history({"proc": proc, "f": "txn-error", "txn": txn, "error": str(err)})
            if err.txn_requires_abort():
                try:
                    _bounded(lambda: p.abort_transaction(30), TXN_CALL_LIMIT_S)
                    outcome = "fail"
                except (KafkaException, TimeoutError):
                    pass
            if err.fatal() or outcome == "info":
                # Unknown outcome: a new producer (the same transactional.id fences the old
                # one and aborts whatever it left open). The old one is kept, not destroyed
                # here: destroying a producer mid-transaction can block.
                abandoned.append(p)
                p = _transactional(history, bootstrap, proc, stop)
        history({"proc": proc, "f": "txn", "type": outcome, "txn": txn,
                 **({"why": "aborted on purpose"} if on_purpose else {})})
        if outcome != "ok":
            try:
                _rewind(c)
            except KafkaException:
                pass
    try:
        c.close()
    except Exception:  # noqa: BLE001
        pass


def committed_reader(history, proc, bootstrap, partitions, stop):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-out-reader",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([TopicPartition(OUT_TOPIC, p, 0) for p in range(partitions)])
    while not stop.is_set():
        for m in c.consume(200, timeout=0.5):
            if not m.error():
                history({"proc": proc, "f": "read", "type": "ok", "topic": OUT_TOPIC,
                         "partition": m.partition(), "offset": m.offset(),
                         "value": m.value().decode()})
    c.close()


def final_read(history, bootstrap, topic, partitions, limit_s=120):
    """Every partition from its start up to its high watermark (read_committed: up to the
    last stable offset, which open transactions hold back until they end or time out); one
    "final" event each."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-final",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    highs = {}
    deadline = time.time() + limit_s
    for p in range(partitions):
        while p not in highs and time.time() < deadline:
            try:
                highs[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            except Exception:  # noqa: BLE001
                time.sleep(0.5)
    c.assign([TopicPartition(topic, p, 0) for p in highs])
    at = {p: 0 for p in highs}
    while time.time() < deadline and any(at[p] < highs[p] for p in highs):
        for m in c.consume(500, timeout=1):
            if m.error():
                continue
            history({"proc": "final", "f": "read", "type": "ok", "topic": topic,
                     "partition": m.partition(), "offset": m.offset(),
                     "value": m.value().decode()})
            at[m.partition()] = m.offset() + 1
        # Past the last record, a read_committed position may stop short of the high
        # watermark by control records only: the position says how far it got.
        for tp in c.position([TopicPartition(topic, p) for p in highs]):
            if tp.offset >= 0:
                at[tp.partition] = max(at[tp.partition], tp.offset)
    for p in highs:
        if at[p] >= highs[p]:
            history({"proc": "final", "f": "final", "type": "ok", "topic": topic,
                     "partition": p, "high": highs[p]})
    c.close()
