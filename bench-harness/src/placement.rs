//! Where the broker and the load generator run. When the bench starts the broker itself it
//! gives it and the load generator disjoint cores by default — the first half of the cores
//! this process may use for the broker (both brokers of `compare-brokers` get the same set;
//! the JVM too), the rest for the load generator — so neither steals the other's CPU, and a
//! pinned client thread cannot starve the per-CPU kernel worker that completes the broker's
//! O_DIRECT writes (the #8 notes). `--broker-cpus` / `--client-cpus` override; against a
//! broker given with `--bootstrap`, only `--client-cpus` applies. The report records it.

use strand_tuning::cpus;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// Cores of a broker the bench starts (`None`: not pinned).
    pub broker: Option<Vec<usize>>,
    /// Cores of the load generator (`None`: not pinned).
    pub client: Option<Vec<usize>>,
}

impl Placement {
    /// Decides the placement from the cores `allowed` to this process and the flags.
    pub fn choose(
        allowed: &[usize],
        starts_broker: bool,
        broker_cpus: Option<&str>,
        client_cpus: Option<&str>,
    ) -> Result<Placement, String> {
        let broker = match (starts_broker, broker_cpus) {
            (false, Some(_)) => {
                return Err("--broker-cpus applies only to a broker the bench starts".into())
            }
            (false, None) => None,
            (true, Some(list)) => Some(cpus::parse_list(list)?),
            (true, None) if allowed.len() >= 2 => Some(allowed[..allowed.len() / 2].to_vec()),
            (true, None) => None,
        };
        let client = match client_cpus {
            Some(list) => Some(cpus::parse_list(list)?),
            None => broker
                .as_ref()
                .map(|b| allowed.iter().copied().filter(|c| !b.contains(c)).collect()),
        };
        Ok(Placement { broker, client })
    }

    /// Whether the broker and the load generator share a core.
    pub fn overlaps(&self) -> bool {
        match (&self.broker, &self.client) {
            (Some(b), Some(c)) => b.iter().any(|x| c.contains(x)),
            _ => true,
        }
    }

    /// One line for the console and the report.
    pub fn describe(&self) -> String {
        let side = |cpus: &Option<Vec<usize>>| {
            cpus.as_ref().map_or("any core".to_string(), |c| {
                format!("cpus {}", cpus::format_list(c))
            })
        };
        format!(
            "placement: broker on {}, load generator on {}{}",
            side(&self.broker),
            side(&self.client),
            if self.overlaps() {
                " (shared: not a fair placement)"
            } else {
                " (disjoint)"
            }
        )
    }

    /// Confines this process (the load generator; threads started later inherit it).
    pub fn confine_client(&self) -> Result<(), String> {
        match &self.client {
            Some(c) => cpus::set_affinity(0, c)
                .map_err(|e| format!("cannot confine the load generator to {c:?}: {e}")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_cores_in_halves_by_default() {
        let p = Placement::choose(&[0, 1], true, None, None).unwrap();
        assert_eq!((p.broker, p.client), (Some(vec![0]), Some(vec![1])));
        let p = Placement::choose(&(0..16).collect::<Vec<_>>(), true, None, None).unwrap();
        assert_eq!(p.broker.unwrap(), (0..8).collect::<Vec<_>>());
        assert!(!Placement::choose(&[0, 1], true, None, None)
            .unwrap()
            .overlaps());
        let one = Placement::choose(&[0], true, None, None).unwrap();
        assert!(one.overlaps() && one.broker.is_none());
        let remote = Placement::choose(&[0, 1], false, None, Some("1")).unwrap();
        assert_eq!((remote.broker, remote.client), (None, Some(vec![1])));
        assert!(Placement::choose(&[0, 1], false, Some("0"), None).is_err());
    }
}
