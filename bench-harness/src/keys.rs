//! Record keys by distribution (sans-IO): none, round-robin, uniform random, zipf.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::workload::KeyDistribution;

/// Draws key indexes; [`KeyGen::next_key`] writes `key-{i}` into a reused buffer.
pub struct KeyGen {
    kind: Kind,
    rng: StdRng,
}

enum Kind {
    None,
    RoundRobin {
        keys: u64,
        next: u64,
    },
    Random {
        keys: u64,
    },
    /// Cumulative probabilities of ranks 1..=keys (rank 1 the hottest).
    Zipf {
        cdf: Vec<f64>,
    },
}

impl KeyGen {
    pub fn new(dist: KeyDistribution, keys: u64, zipf_exponent: f64, seed: u64) -> KeyGen {
        let kind = match dist {
            KeyDistribution::None => Kind::None,
            KeyDistribution::RoundRobin => Kind::RoundRobin {
                keys: keys.max(1),
                next: 0,
            },
            KeyDistribution::Random => Kind::Random { keys: keys.max(1) },
            KeyDistribution::Zipf => Kind::Zipf {
                cdf: zipf_cdf(keys.max(1), zipf_exponent),
            },
        };
        KeyGen {
            kind,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The next key's index; `None` for keyless records.
    pub fn next_index(&mut self) -> Option<u64> {
        match &mut self.kind {
            Kind::None => None,
            Kind::RoundRobin { keys, next } => {
                let k = *next;
                *next = (*next + 1) % *keys;
                Some(k)
            }
            Kind::Random { keys } => Some(self.rng.gen_range(0..*keys)),
            Kind::Zipf { cdf } => {
                let u: f64 = self.rng.gen();
                Some(cdf.partition_point(|&c| c < u).min(cdf.len() - 1) as u64)
            }
        }
    }

    /// The next key as bytes in `buf` (`key-{index}`); `None` for keyless records.
    pub fn next_key<'a>(&mut self, buf: &'a mut Vec<u8>) -> Option<&'a [u8]> {
        use std::io::Write;
        let i = self.next_index()?;
        buf.clear();
        let _ = write!(buf, "key-{i}");
        Some(&buf[..])
    }
}

fn zipf_cdf(keys: u64, exponent: f64) -> Vec<f64> {
    let mut cdf = Vec::with_capacity(keys as usize);
    let mut sum = 0.0;
    for rank in 1..=keys {
        sum += 1.0 / (rank as f64).powf(exponent);
        cdf.push(sum);
    }
    for c in &mut cdf {
        *c /= sum;
    }
    cdf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(dist: KeyDistribution, keys: u64, draws: usize) -> Vec<u64> {
        let mut g = KeyGen::new(dist, keys, 1.0, 7);
        let mut c = vec![0u64; keys as usize];
        for _ in 0..draws {
            let i = g.next_index().expect("keyed") as usize;
            c[i] += 1;
        }
        c
    }

    #[test]
    fn none_has_no_key() {
        let mut g = KeyGen::new(KeyDistribution::None, 10, 1.0, 1);
        let mut buf = Vec::new();
        assert!(g.next_key(&mut buf).is_none());
    }

    #[test]
    fn round_robin_cycles() {
        let mut g = KeyGen::new(KeyDistribution::RoundRobin, 3, 1.0, 1);
        let got: Vec<u64> = (0..7).filter_map(|_| g.next_index()).collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1, 2, 0]);
        let mut buf = Vec::new();
        assert_eq!(g.next_key(&mut buf), Some(&b"key-1"[..]));
    }

    #[test]
    fn random_is_roughly_uniform() {
        let c = counts(KeyDistribution::Random, 10, 100_000);
        for n in c {
            assert!((9_000..11_000).contains(&n), "{n}");
        }
    }

    #[test]
    fn zipf_is_skewed_like_zipf() {
        // s = 1 over 100 keys: P(rank 1) = 1 / H(100) ~ 0.193, rank 2 half of that.
        let c = counts(KeyDistribution::Zipf, 100, 200_000);
        let p1 = c[0] as f64 / 200_000.0;
        assert!((0.18..0.21).contains(&p1), "p(rank 1) = {p1}");
        let ratio = c[0] as f64 / c[1] as f64;
        assert!((1.8..2.2).contains(&ratio), "rank1/rank2 = {ratio}");
        assert!(c[99] > 0 && c[99] < c[9]);
    }
}
