//! The simulated network: every message gets a delay (mostly a few milliseconds, now and then
//! hundreds: that reorders), may be lost or delivered twice, and is dropped on a cut link —
//! checked when it is sent and again when it arrives (a partition drops what is in flight, as
//! iptables does). Links are directed, so a cut can be one-way.

use std::collections::BTreeMap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::Addr;

pub(crate) struct Net {
    /// Directed links that drop everything: (from, to) -> how many cuts hold it (faults
    /// overlap; each heals its own).
    cut: BTreeMap<(Addr, Addr), u32>,
    loss: f64,
    duplication: f64,
    spike: f64,
}

impl Net {
    /// A network whose loss, duplication and delay spikes are drawn per seed: some seeds
    /// clean, some rough.
    pub(crate) fn drawn(rng: &mut ChaCha8Rng) -> Net {
        Net {
            cut: BTreeMap::new(),
            loss: rng.gen_range(0.0..0.05),
            duplication: rng.gen_range(0.0..0.02),
            spike: rng.gen_range(0.0..0.03),
        }
    }

    /// Whether a message from `from` reaches `to` now.
    pub(crate) fn delivers(&self, from: Addr, to: Addr) -> bool {
        from == to || !self.cut.contains_key(&(from, to))
    }

    /// A message sent now: `None` if it is lost, else its delay and, if it is duplicated, the
    /// copy's delay.
    pub(crate) fn route(
        &self,
        rng: &mut ChaCha8Rng,
        from: Addr,
        to: Addr,
    ) -> Option<(u64, Option<u64>)> {
        if !self.delivers(from, to) || rng.gen_bool(self.loss) {
            return None;
        }
        let first = self.delay(rng);
        let copy = rng.gen_bool(self.duplication).then(|| self.delay(rng));
        Some((first, copy))
    }

    fn delay(&self, rng: &mut ChaCha8Rng) -> u64 {
        if rng.gen_bool(self.spike) {
            rng.gen_range(50..400)
        } else {
            rng.gen_range(1..6)
        }
    }

    pub(crate) fn cut(&mut self, links: &[(Addr, Addr)]) {
        for l in links {
            *self.cut.entry(*l).or_default() += 1;
        }
    }

    pub(crate) fn heal(&mut self, links: &[(Addr, Addr)]) {
        for l in links {
            if let Some(n) = self.cut.get_mut(l) {
                *n -= 1;
                if *n == 0 {
                    self.cut.remove(l);
                }
            }
        }
    }
}
