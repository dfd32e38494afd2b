//! Replication throttles (Kafka's KIP-73), without I/O: which replicas a broker throttles, and
//! how many bytes it may still move for them.
//!
//! Kafka's rules, as its `ReplicationQuotaManager` and `ReplicaManager` apply them:
//! - A topic's `leader.replication.throttled.replicas` and
//!   `follower.replication.throttled.replicas` are `*` (every replica) or a list of
//!   `partition:broker`; broker `b` throttles the partitions listed with `b` — as a leader
//!   the bytes it sends to followers of them, as a follower the bytes it fetches of them.
//! - The rates are the broker's `leader.replication.throttled.rate` and
//!   `follower.replication.throttled.rate` (bytes per second; unset = unlimited, so listed
//!   replicas are not throttled).
//! - Only replicas *outside the ISR* are throttled: a follower catching up (a new replica of
//!   a reassignment, a wiped node) is held to the rate; an in-sync one never is, so `acks=all`
//!   latency does not depend on a throttle.
//! - While the measured rate is over the quota, throttled partitions get no bytes (the leader
//!   answers them empty, the follower leaves them out of its fetch); others go on.
//!
//! Kafka measures the rate over 11 one-second samples; [`TokenBucket`] holds the same average
//! with a burst of one second of the rate, and lets at most what is left be read at once.

/// The value of a `*.replication.throttled.replicas` topic config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ThrottledReplicas {
    /// Empty: nothing is throttled.
    #[default]
    None,
    /// `*`: every replica of the topic, on every broker.
    All,
    /// `partition:broker` pairs.
    Listed(Vec<(i32, i32)>),
}

impl ThrottledReplicas {
    /// Parses a config value: `*`, empty, or `partition:broker[,partition:broker...]`
    /// (spaces around items allowed, as Kafka's validator allows).
    pub fn parse(value: &str) -> Result<ThrottledReplicas, String> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(ThrottledReplicas::None);
        }
        if value == "*" {
            return Ok(ThrottledReplicas::All);
        }
        let mut pairs = Vec::new();
        for item in value.split(',') {
            let item = item.trim();
            let parsed = item.split_once(':').and_then(|(p, b)| {
                let p = p.trim().parse::<i32>().ok().filter(|p| *p >= 0)?;
                let b = b.trim().parse::<i32>().ok().filter(|b| *b >= 0)?;
                Some((p, b))
            });
            match parsed {
                Some(pair) => pairs.push(pair),
                None => {
                    return Err(format!(
                        "{item:?} is not partition:broker (a list of them, or *, is expected)"
                    ))
                }
            }
        }
        Ok(ThrottledReplicas::Listed(pairs))
    }

    /// Whether `broker` throttles `partition` under this config.
    pub fn throttles(&self, partition: i32, broker: i32) -> bool {
        match self {
            ThrottledReplicas::None => false,
            ThrottledReplicas::All => true,
            ThrottledReplicas::Listed(pairs) => pairs.contains(&(partition, broker)),
        }
    }
}

/// Bytes a broker (or one shard's share of it) may move for throttled replicas: refilled at
/// the rate, at most one second of it banked, spent after each transfer (it may go below
/// zero by one transfer, which the refill then pays back).
#[derive(Clone, Debug, Default)]
pub struct TokenBucket {
    tokens: i64,
    last_ms: Option<u64>,
}

impl TokenBucket {
    /// What may be moved now at `rate_bytes_per_s` (0 or less: wait).
    pub fn allowance(&mut self, now_ms: u64, rate_bytes_per_s: u64) -> i64 {
        let burst = i64::try_from(rate_bytes_per_s).unwrap_or(i64::MAX);
        match self.last_ms {
            None => self.tokens = burst,
            Some(last) => {
                let elapsed_ms = now_ms.saturating_sub(last);
                let refill = u128::from(elapsed_ms) * u128::from(rate_bytes_per_s) / 1000;
                let refill = i64::try_from(refill).unwrap_or(i64::MAX);
                self.tokens = self.tokens.saturating_add(refill).min(burst);
            }
        }
        self.last_ms = Some(now_ms.max(self.last_ms.unwrap_or(0)));
        self.tokens
    }

    /// `bytes` were moved.
    pub fn spend(&mut self, bytes: u64) {
        self.tokens = self
            .tokens
            .saturating_sub(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_replicas_parse_as_kafka_writes_them() {
        assert_eq!(ThrottledReplicas::parse(""), Ok(ThrottledReplicas::None));
        assert_eq!(ThrottledReplicas::parse(" * "), Ok(ThrottledReplicas::All));
        let listed = ThrottledReplicas::parse("0:1, 0:2,3:1").unwrap();
        assert_eq!(
            listed,
            ThrottledReplicas::Listed(vec![(0, 1), (0, 2), (3, 1)])
        );
        assert!(listed.throttles(0, 2));
        assert!(listed.throttles(3, 1));
        assert!(!listed.throttles(3, 2));
        assert!(!listed.throttles(1, 1));
        assert!(ThrottledReplicas::All.throttles(7, 9));
        assert!(!ThrottledReplicas::None.throttles(0, 0));
        for bad in ["0", "a:1", "0:b", "0:1,", "1:-1", "*,0:1", "0:1:2"] {
            assert!(ThrottledReplicas::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bucket_holds_the_average_rate_with_one_second_of_burst() {
        let rate = 1_000_000;
        let mut b = TokenBucket::default();
        assert_eq!(
            b.allowance(10_000, rate),
            1_000_000,
            "a second banked at first"
        );
        b.spend(3_000_000); // one large transfer goes past it
        assert_eq!(b.allowance(10_000, rate), -2_000_000);
        assert_eq!(b.allowance(12_000, rate), 0, "paid back after two seconds");
        assert_eq!(b.allowance(12_500, rate), 500_000);
        assert_eq!(
            b.allowance(60_000, rate),
            1_000_000,
            "never more than a second"
        );
        // Moving `rate` per second for 20 s in 100 ms steps keeps it from going negative;
        // twice the rate does not.
        let (mut even, mut twice) = (TokenBucket::default(), TokenBucket::default());
        let mut twice_refused = 0;
        for step in 0..200u64 {
            let now = 100_000 + step * 100;
            assert!(even.allowance(now, rate) > 0);
            even.spend(rate / 10);
            if twice.allowance(now, rate) > 0 {
                twice.spend(rate / 5);
            } else {
                twice_refused += 1;
            }
        }
        assert!((90..=110).contains(&twice_refused), "{twice_refused}");
        // Time going back (another clock reading) takes nothing and gives nothing.
        let mut c = TokenBucket::default();
        c.allowance(5_000, rate);
        c.spend(1_000_000);
        assert_eq!(c.allowance(4_000, rate), 0);
    }
}
