//! This node's replication throttle rates (KIP-73): `leader.replication.throttled.rate` and
//! `follower.replication.throttled.rate`, in bytes per second, as
//! `kafka-reassign-partitions --throttle` and `kafka-configs --entity-type brokers
//! --entity-name N` set them (IncrementalAlterConfigs or AlterConfigs on broker `N`, which
//! the admin client sends to broker `N` itself). Unset means unlimited.
//!
//! They are this node's own dynamic configs: kept in `<data_dir>/replication-throttle-rates`
//! (written whole: temporary file, fsync, rename), read at start, and held in atomics the
//! shards read on replica fetches; the bytes moved against each rate are counted node-wide
//! (a mutex taken only for throttled replicas, which are outside the ISR: never on the path
//! of an in-sync replica or an `acks=all` produce).
//! Not in the metadata log (yet): a wiped data directory forgets them, and the cluster-wide
//! default (`--entity-default`) cannot hold them. The decisions (which replicas, how many
//! bytes) are `strand_cluster_core::replication::throttle`'s; `node/throttle.rs` applies them.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use strand_cluster_core::replication::throttle::TokenBucket;

pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
/// The broker configs this module keeps.
pub const KEYS: [&str; 2] = [LEADER_RATE, FOLLOWER_RATE];

const FILE: &str = "replication-throttle-rates";
/// An unset rate in the atomics.
const UNSET: u64 = u64::MAX;

pub struct ThrottleRates {
    leader: AtomicU64,
    follower: AtomicU64,
    /// `None`: not saved (tests).
    path: Option<PathBuf>,
    /// One save at a time, so the file ends as the last change left the atomics.
    saving: Mutex<()>,
    /// What the node has moved against each rate (all shards: the rate is the broker's).
    /// Locked only for replicas that are throttled — outside the ISR, with a rate set.
    leader_spent: Mutex<TokenBucket>,
    follower_spent: Mutex<TokenBucket>,
}

/// Which rate.
#[derive(Clone, Copy, Debug)]
pub enum Side {
    /// Bytes this node sends as a leader (`leader.replication.throttled.rate`).
    Leader,
    /// Bytes this node fetches as a follower (`follower.replication.throttled.rate`).
    Follower,
}

impl ThrottleRates {
    /// Unset rates, never saved.
    pub fn unsaved() -> ThrottleRates {
        ThrottleRates {
            leader: AtomicU64::new(UNSET),
            follower: AtomicU64::new(UNSET),
            path: None,
            saving: Mutex::new(()),
            leader_spent: Mutex::default(),
            follower_spent: Mutex::default(),
        }
    }

    /// The rates saved in `data_dir` (unset when there is no file). A file this module did
    /// not write is an error that names it.
    pub fn load(data_dir: &Path) -> io::Result<ThrottleRates> {
        let path = data_dir.join(FILE);
        let rates = ThrottleRates {
            path: Some(path.clone()),
            ..ThrottleRates::unsaved()
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(rates),
            Err(e) => return Err(e),
        };
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let parsed = line
                .split_once('=')
                .ok_or_else(|| "expected key=value".to_string())
                .and_then(|(k, v)| Ok((k, validate(k, v)?)));
            match parsed {
                Ok((key, rate)) => rates.slot(key).store(rate, Ordering::Relaxed),
                Err(why) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: {line:?}: {why}", path.display()),
                    ))
                }
            }
        }
        Ok(rates)
    }

    fn slot(&self, key: &str) -> &AtomicU64 {
        if key == LEADER_RATE {
            &self.leader
        } else {
            &self.follower
        }
    }

    fn read(slot: &AtomicU64) -> Option<u64> {
        Some(slot.load(Ordering::Relaxed)).filter(|r| *r != UNSET)
    }

    /// Bytes per second this node may send to throttled followers, if limited.
    pub fn leader(&self) -> Option<u64> {
        Self::read(&self.leader)
    }

    /// Bytes per second this node may fetch for its throttled replicas, if limited.
    pub fn follower(&self) -> Option<u64> {
        Self::read(&self.follower)
    }

    /// The rate of `side`, if one is set.
    pub fn rate(&self, side: Side) -> Option<u64> {
        match side {
            Side::Leader => self.leader(),
            Side::Follower => self.follower(),
        }
    }

    /// What may be moved now against `side`'s rate (0 or less: nothing), `None` when the
    /// rate is unset.
    pub fn allowance(&self, side: Side, now_ms: u64) -> Option<i64> {
        let rate = self.rate(side)?;
        Some(self.bucket(side).allowance(now_ms, rate))
    }

    /// `bytes` were moved against `side`'s rate.
    pub fn spend(&self, side: Side, bytes: usize) {
        self.bucket(side).spend(bytes as u64);
    }

    fn bucket(&self, side: Side) -> std::sync::MutexGuard<'_, TokenBucket> {
        let m = match side {
            Side::Leader => &self.leader_spent,
            Side::Follower => &self.follower_spent,
        };
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rates that are set, as DescribeConfigs lists them.
    pub fn described(&self) -> Vec<(String, String)> {
        KEYS.iter()
            .filter_map(|k| Some((k.to_string(), Self::read(self.slot(k))?.to_string())))
            .collect()
    }

    /// Sets (`Some`) or removes (`None`) rates, then saves them. Blocking file I/O: call it
    /// off the shard's reactor. Keys must be [`KEYS`] and values checked by [`validate`].
    pub fn change(&self, changes: &[(String, Option<u64>)]) -> io::Result<()> {
        let _one = self.saving.lock().unwrap_or_else(|e| e.into_inner());
        for (key, rate) in changes {
            assert!(KEYS.contains(&key.as_str()), "not a throttle rate: {key}");
            self.slot(key)
                .store(rate.unwrap_or(UNSET), Ordering::Relaxed);
        }
        let Some(path) = &self.path else {
            return Ok(());
        };
        let text: String = self
            .described()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        let tmp = path.with_extension("tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        match path.parent() {
            Some(dir) => crate::storage::recovery::sync_dir(dir),
            None => Ok(()),
        }
    }
}

/// Checks a rate as Kafka does (a long, at least 0).
pub fn validate(key: &str, value: &str) -> Result<u64, String> {
    if !KEYS.contains(&key) {
        return Err(format!("{key} is not a replication throttle rate"));
    }
    match value.trim().parse::<i64>() {
        Ok(v) if v >= 0 => Ok(v as u64),
        _ => Err(format!(
            "invalid value {value:?} for {key}: expected bytes per second, at least 0"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_saved_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let rates = ThrottleRates::load(dir.path()).unwrap();
        assert_eq!((rates.leader(), rates.follower()), (None, None));
        rates
            .change(&[
                (LEADER_RATE.into(), Some(1000)),
                (FOLLOWER_RATE.into(), Some(0)),
            ])
            .unwrap();
        assert_eq!(rates.described().len(), 2);
        let again = ThrottleRates::load(dir.path()).unwrap();
        assert_eq!((again.leader(), again.follower()), (Some(1000), Some(0)));
        again.change(&[(LEADER_RATE.into(), None)]).unwrap();
        let third = ThrottleRates::load(dir.path()).unwrap();
        assert_eq!((third.leader(), third.follower()), (None, Some(0)));
        assert_eq!(validate(LEADER_RATE, " 5 "), Ok(5));
        assert!(validate(LEADER_RATE, "-1").is_err());
        assert!(validate(LEADER_RATE, "x").is_err());
        assert!(validate("log.retention.ms", "5").is_err());
        std::fs::write(
            dir.path().join(FILE),
            "leader.replication.throttled.rate=-3\n",
        )
        .unwrap();
        let err = ThrottleRates::load(dir.path()).err().unwrap();
        assert!(err.to_string().contains("at least 0"), "{err}");
    }
}
