//! Choosing a partition for a record (sans-IO).
//!
//! Keyed records: Kafka's `murmur2` hash of the key bytes, made positive, modulo the
//! partition count — what the Java client's default partitioner and librdkafka's
//! `murmur2_random` do, so the same key lands on the same partition whichever client wrote it.
//! Keyless records: *sticky* (KIP-480): keep filling one partition until its batch is sent,
//! then move on, so keyless traffic still makes full batches.

/// Kafka's murmur2 (the Java client's `Utils.murmur2`), over the key bytes.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition for `key` among `partitions` (> 0): `toPositive(murmur2(key)) % partitions`.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    assert!(partitions > 0, "a topic has at least one partition");
    (murmur2(key) & 0x7fff_ffff) % partitions
}

/// The sticky choice for keyless records of one topic.
#[derive(Debug, Default)]
pub struct Sticky {
    current: Option<i32>,
    /// xorshift state: cheap, and no global RNG on the hot path.
    seed: u64,
}

impl Sticky {
    pub fn new(seed: u64) -> Sticky {
        Sticky {
            current: None,
            seed: seed | 1,
        }
    }

    /// The partition keyless records go to now.
    pub fn partition(&mut self, partitions: i32) -> i32 {
        match self.current {
            Some(p) if p < partitions => p,
            _ => {
                let p = self.next_random(partitions);
                self.current = Some(p);
                p
            }
        }
    }

    /// The batch of `sent` went out: pick another partition (not the same one if possible).
    pub fn batch_sent(&mut self, sent: i32, partitions: i32) {
        if self.current == Some(sent) {
            let mut p = self.next_random(partitions);
            if partitions > 1 && p == sent {
                p = (p + 1) % partitions;
            }
            self.current = Some(p);
        }
    }

    fn next_random(&mut self, partitions: i32) -> i32 {
        let mut x = self.seed;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed = x;
        (x % partitions.max(1) as u64) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas_published_values() {
        // Values from the Java client's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 3] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{:?}", std::str::from_utf8(key));
        }
    }

    #[test]
    fn sticky_stays_until_the_batch_is_sent() {
        let mut s = Sticky::new(42);
        let p = s.partition(8);
        assert_eq!(s.partition(8), p);
        s.batch_sent(p, 8);
        assert_ne!(s.partition(8), p);
        assert_eq!(Sticky::new(1).partition(1), 0);
    }
}
