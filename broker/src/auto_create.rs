//! How much topic auto-creation (a Metadata request naming topics that do not exist) may do
//! now: at most `limits::AUTO_CREATE_TOPICS_PER_REQUEST` topics per request, and
//! `limits::AUTO_CREATE_PARTITIONS_PER_SEC` partitions per second broker-wide (a token bucket
//! that holds one second's worth). Topics left out are answered LEADER_NOT_AVAILABLE, which
//! clients retry. The mutex is taken only when a request would auto-create.

use std::sync::Mutex;

use crate::limits;

#[derive(Debug)]
struct Bucket {
    tokens: u64,
    refilled_ms: i64,
}

#[derive(Debug)]
pub struct AutoCreate {
    bucket: Mutex<Bucket>,
}

impl Default for AutoCreate {
    fn default() -> Self {
        AutoCreate {
            bucket: Mutex::new(Bucket {
                tokens: limits::AUTO_CREATE_PARTITIONS_PER_SEC,
                refilled_ms: i64::MIN,
            }),
        }
    }
}

impl AutoCreate {
    /// How many of the topics (their partition counts, in request order) may be created at
    /// `now_ms`; their partitions are taken from the bucket.
    pub fn admit(&self, now_ms: i64, partitions: &[i32]) -> usize {
        let mut b = self
            .bucket
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let rate = limits::AUTO_CREATE_PARTITIONS_PER_SEC;
        if b.refilled_ms == i64::MIN {
            b.refilled_ms = now_ms;
        }
        let elapsed_ms = u64::try_from(now_ms.saturating_sub(b.refilled_ms)).unwrap_or(0);
        let earned = elapsed_ms.saturating_mul(rate) / 1000;
        if earned > 0 {
            b.tokens = (b.tokens + earned).min(rate);
            b.refilled_ms = now_ms;
        }
        let mut admitted = 0;
        for &p in partitions
            .iter()
            .take(limits::AUTO_CREATE_TOPICS_PER_REQUEST)
        {
            let p = u64::try_from(p.max(1)).unwrap_or(1);
            if p > b.tokens {
                break;
            }
            b.tokens -= p;
            admitted += 1;
        }
        admitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_topics_per_request_and_partitions_per_second() {
        let a = AutoCreate::default();
        let many = vec![1; 10_000];
        assert_eq!(a.admit(0, &many), limits::AUTO_CREATE_TOPICS_PER_REQUEST);
        let rate = limits::AUTO_CREATE_PARTITIONS_PER_SEC as usize;
        let mut created = limits::AUTO_CREATE_TOPICS_PER_REQUEST;
        while a.admit(0, &many) > 0 {
            created += limits::AUTO_CREATE_TOPICS_PER_REQUEST;
        }
        assert_eq!(created, rate, "one second's worth at once");
        assert_eq!(a.admit(100, &many), rate / 10, "then the rate");
        assert_eq!(
            a.admit(100_000, &[rate as i32 + 1]),
            0,
            "bigger than a second's worth"
        );
    }
}
