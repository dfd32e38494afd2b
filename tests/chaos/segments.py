"""After a chaos run: which producer wrote each offset, read from the nodes' segment files
(Kafka's record batch v2 header: base offset, length, ..., producer id, producer epoch, base
sequence, records). The checker uses it to tell a broker's duplicate (two copies under one
producer id and epoch: idempotence failed) from a client's re-send under a new epoch (the
broker deduplicates within an epoch only, as Kafka's)."""
import bisect
import glob
import os
import struct

HEADER = struct.Struct(">qi")          # base offset, batch length
PRODUCER = struct.Struct(">qhii")      # producer id, epoch, base sequence, records
PRODUCER_AT = 43                       # its position in the batch header


def read_batches(partition_dir):
    """[(base offset, last offset, producer id, epoch)] of one partition directory's
    segments, in offset order (a zero-filled tail ends a segment)."""
    out = []
    for path in sorted(glob.glob(os.path.join(partition_dir, "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + PRODUCER_AT + PRODUCER.size <= len(data):
            base, length = HEADER.unpack_from(data, pos)
            if length <= 0:
                break
            pid, epoch, _, records = PRODUCER.unpack_from(data, pos + PRODUCER_AT)
            out.append((base, base + max(records, 1) - 1, pid, epoch))
            pos += HEADER.size + length
    return out


def producer_batches(cluster_dir, topics_partitions):
    """{(topic, partition): Batches} from the node holding the longest copy of each."""
    found = {}
    for topic, partition in topics_partitions:
        best = []
        for d in glob.glob(os.path.join(cluster_dir, "node-*", f"{topic}-{partition}")):
            try:
                b = read_batches(d)
            except OSError:
                continue
            if b and (not best or b[-1][1] > best[-1][1]):
                best = b
        found[(topic, partition)] = Batches(best)
    return found


class Batches:
    def __init__(self, batches):
        self.batches = batches
        self.bases = [b[0] for b in batches]

    def producer_at(self, offset):
        """(producer id, epoch) of the batch holding `offset`, or None."""
        i = bisect.bisect_right(self.bases, offset) - 1
        if i >= 0 and self.batches[i][0] <= offset <= self.batches[i][1]:
            return self.batches[i][2], self.batches[i][3]
        return None
