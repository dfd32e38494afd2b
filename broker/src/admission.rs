//! Which new connections the broker takes, across all shards: at most `max.connections` in
//! all and `max.connections.per.ip` from one address (Kafka's names), and never so many that
//! accept() and the partitions' own files run out of descriptors — the total is kept to
//! `limits::CONNECTION_FD_SHARE` of the process's open-files limit (`strand tune` recommends
//! raising that limit to 1,048,576).
//!
//! Every shard accepts on its own socket, so the counts are shared: one small mutex, taken
//! once when a connection arrives and once when it ends, never on the request path.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

#[derive(Debug)]
pub struct Admission {
    max_total: usize,
    max_per_ip: usize,
    counts: Mutex<Counts>,
    /// Connections that have ended, ever (memory upkeep trims after closes).
    closed: AtomicU64,
}

/// Why a connection was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Total(usize),
    PerIp(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Total(n) => write!(f, "{n} connections open (max.connections)"),
            Refusal::PerIp(n) => {
                write!(
                    f,
                    "{n} connections from this address (max.connections.per.ip)"
                )
            }
        }
    }
}

/// A connection's place; gives it back when dropped.
#[derive(Debug)]
pub struct Admitted {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut c = self
            .admission
            .counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        c.total = c.total.saturating_sub(1);
        self.admission.closed.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = c.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.per_ip.remove(&self.ip);
            }
        }
    }
}

impl Admission {
    /// `max_total` is further capped by the descriptors available (`fd_limit`, if known).
    pub fn new(max_total: usize, max_per_ip: usize, fd_limit: Option<u64>) -> Arc<Admission> {
        let fd_cap = fd_limit.map_or(usize::MAX, |l| {
            usize::try_from(l / 100 * crate::limits::CONNECTION_FD_SHARE).unwrap_or(usize::MAX)
        });
        Arc::new(Admission {
            max_total: max_total.min(fd_cap).max(1),
            max_per_ip: max_per_ip.max(1),
            counts: Mutex::new(Counts::default()),
            closed: AtomicU64::new(0),
        })
    }

    /// How many admitted connections have ended since the start.
    pub fn closed(&self) -> u64 {
        self.closed.load(Ordering::Relaxed)
    }

    pub fn max_total(&self) -> usize {
        self.max_total
    }

    pub fn try_admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refusal> {
        let mut c = self
            .counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if c.total >= self.max_total {
            return Err(Refusal::Total(c.total));
        }
        let from_ip = c.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.max_per_ip {
            return Err(Refusal::PerIp(from_ip));
        }
        c.total += 1;
        *c.per_ip.entry(ip).or_insert(0) += 1;
        Ok(Admitted {
            admission: Arc::clone(self),
            ip,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_ip_and_in_total_and_places_come_back() {
        let a = Admission::new(3, 2, None);
        let (x, y): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let one = a.try_admit(x).expect("first");
        let _two = a.try_admit(x).expect("second");
        assert_eq!(a.try_admit(x).unwrap_err(), Refusal::PerIp(2));
        let _three = a.try_admit(y).expect("another address");
        assert_eq!(a.try_admit(y).unwrap_err(), Refusal::Total(3));
        drop(one);
        assert!(
            a.try_admit(x).is_ok(),
            "a closed connection's place is free again"
        );
    }

    #[test]
    fn the_total_stays_below_the_descriptor_limit() {
        let a = Admission::new(usize::MAX, usize::MAX, Some(20_000));
        assert_eq!(
            a.max_total(),
            20_000 / 100 * crate::limits::CONNECTION_FD_SHARE as usize
        );
    }
}
