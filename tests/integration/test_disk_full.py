"""A full disk, on a small ext4 filesystem the test makes (a loop device): the broker refuses
new topics and produce cleanly, existing topics stay readable, deleting a topic frees space
and is recorded even on a full disk, and a restart on the full disk opens every partition."""
import os
import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import Broker


def can_loop_mount():
    return os.geteuid() == 0 and shutil.which("mkfs.ext4") and shutil.which("mount")


@pytest.fixture
def small_disk(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root, mkfs.ext4 and loop mounts")
    img, mnt = tmp_path / "disk.img", tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["truncate", "-s", "160M", str(img)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True)
    r = subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"loop mount refused here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def free(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def read_all(b, topic, n):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.time() + 30
    while got < n and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got += 1
    c.close()
    return got


def test_a_full_disk_refuses_writes_keeps_reads_and_deletes_and_restarts(small_disk):
    data = small_disk / "data"
    b = Broker(str(data), cores=1, config={"log.preallocate": True,
                                            "storage.min.free.bytes": 48 << 20,
                                            "log.segment.bytes": 8 << 20})
    b.log_path = str(small_disk.parent / "strand.log")  # the log must not fill the disk too
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all",
                      "message.timeout.ms": 4000, "linger.ms": 5})
        p.produce("keep", value=b"0" * 1000)  # auto-created
        p.flush(15)
        for i in range(99):
            p.produce("keep", value=b"k" * 1000)
        assert p.flush(30) == 0
        # Fill: more topics (each preallocates: log.preallocate above) and bulk data, until the broker says no.
        refused, errors = False, []
        junk = []
        for i in range(40):
            t = f"junk-{i}"
            try:
                admin.create_topics([NewTopic(t, 1, 1)])[t].result(10)
                junk.append(t)
            except KafkaException as e:
                assert e.args[0].code() == KafkaError.POLICY_VIOLATION, e
                refused = True
                break
            for _ in range(32):
                p.produce(t, value=os.urandom(64 << 10),
                          on_delivery=lambda err, m: err and errors.append(err))
            p.flush(20)
            time.sleep(1.1)  # the broker re-reads free space every second
        assert refused, f"new topics refused once space ran low (free {free(small_disk)})"
        before = len(errors)
        for _ in range(8):
            p.produce("keep", value=os.urandom(64 << 10),
                      on_delivery=lambda err, m: err and errors.append(err))
        p.flush(20)
        assert len(errors) > before, "produce is refused on a low disk"
        assert all(e.code() in (KafkaError.KAFKA_STORAGE_ERROR, KafkaError._MSG_TIMED_OUT)
                   for e in errors[before:]), errors[before:]
        assert read_all(b, "keep", 100) == 100, "existing data stays readable"
        # Deleting topics is recorded and frees their space.
        low = free(small_disk)
        for t, f in admin.delete_topics(junk).items():
            f.result(15)
        deadline = time.time() + 15
        while free(small_disk) <= low and time.time() < deadline:
            time.sleep(0.2)
        assert free(small_disk) > low
        # Fill the disk to the brim behind the broker's back, then restart on it.
        filler = small_disk / "filler"
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
            except OSError:
                pass
        b.stop()
        b.start()
        assert read_all(b, "keep", 100) == 100, "every partition opens on a full disk"
        names = set(AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics)
        assert "keep" in names and not names & set(junk)
    finally:
        b.stop()
