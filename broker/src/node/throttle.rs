//! Replication throttles on a shard (KIP-73; the rules are
//! `strand_cluster_core::replication::throttle`'s): the broker-config changes that set this
//! node's rates, and the checks the replica paths make — the leader's (`replica_serve`) before
//! it reads for a follower, the follower's (`replica_fetcher`) before it asks for a partition.
//! The bytes moved are counted node-wide (`cluster::throttle_rates`), as Kafka's rates are a
//! broker's.

use strand_cluster_core::replication::throttle::ThrottledReplicas;
use strand_wire::ErrorCode;

use super::{Node, TopicPartition};
use crate::catalog::{Catalog, CatalogOp, OpResult};
use crate::cluster::throttle_rates::{self, Side, ThrottleRates, KEYS};
use crate::dynamic_configs::Resource;
use std::sync::Arc;

/// IncrementalAlterConfigs' operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

/// A change of this node's rates: each key set (`Some`) or removed.
pub(super) type RatesChange = Vec<(String, Option<u64>)>;

/// Cluster mode, per item of `op`: `Some` when it is a change of this broker's replication
/// throttle rates (each of its keys a rate, or a DELETE of a key that is not set, as
/// `kafka-reassign-partitions` clears throttles), applied here rather than by the controller;
/// `Some(Err)` for a rate that is not valid. `None`: not such a change.
pub(super) fn rates_changes(
    op: &CatalogOp,
    before: &Catalog,
) -> Vec<Option<Result<RatesChange, (ErrorCode, String)>>> {
    let invalid = |why: String| Err((ErrorCode::InvalidConfig, why));
    match op {
        CatalogOp::AlterConfigs(items) => items
            .iter()
            .map(|(r, ops)| {
                let ours = |k: &str| KEYS.contains(&k);
                let fits = *r == Resource::Broker
                    && ops.iter().any(|(k, _, _)| ours(k))
                    && ops.iter().all(|(k, code, _)| {
                        ours(k) || (*code == OP_DELETE && !before.broker_configs.contains_key(k))
                    });
                if !fits {
                    return None;
                }
                let mut change = Vec::new();
                for (key, code, value) in ops.iter().filter(|(k, _, _)| ours(k)) {
                    match (*code, value) {
                        (OP_SET, Some(v)) => match throttle_rates::validate(key, v) {
                            Ok(rate) => change.push((key.clone(), Some(rate))),
                            Err(why) => return Some(invalid(why)),
                        },
                        (OP_DELETE, _) => change.push((key.clone(), None)),
                        _ => return Some(invalid(format!("{key} takes SET or DELETE"))),
                    }
                }
                Some(Ok(change))
            })
            .collect(),
        // The legacy AlterConfigs: the broker's whole set, rates only (an empty set removes
        // both: in a cluster the rates are all the dynamic configs a broker holds).
        CatalogOp::SetConfigs(items) => items
            .iter()
            .map(|(r, set)| {
                let fits = *r == Resource::Broker && set.keys().all(|k| KEYS.contains(&k.as_str()));
                if !fits {
                    return None;
                }
                let mut change = Vec::new();
                for key in KEYS {
                    match set.get(key).map(|v| throttle_rates::validate(key, v)) {
                        Some(Ok(rate)) => change.push((key.to_string(), Some(rate))),
                        Some(Err(why)) => return Some(invalid(why)),
                        None => change.push((key.to_string(), None)),
                    }
                }
                Some(Ok(change))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Sets this node's rates and saves them (every shard reads them from `NodeShared`).
pub(super) async fn change_rates(rates: Arc<ThrottleRates>, change: RatesChange) -> OpResult {
    tracing::info!(?change, "replication throttle rates");
    glommio::executor()
        .spawn_blocking(move || rates.change(&change))
        .await
        .map_err(|e| {
            (
                ErrorCode::KafkaStorageError,
                format!("cannot save the rates: {e}"),
            )
        })
}

impl Node {
    /// As `tp`'s leader: bytes this shard may still send to `follower`'s replica of it.
    /// `None` when it is not throttled: no leader rate set, the topic's
    /// `leader.replication.throttled.replicas` does not list this node, or the follower is
    /// in the ISR.
    pub(super) fn leader_allowance(&self, tp: &TopicPartition, follower: i32) -> Option<i64> {
        self.allowance(Side::Leader, tp, Some(follower))
    }

    /// As a follower of `tp`: bytes this shard may still fetch of it (`None`: not throttled,
    /// as for the leader, with `follower.replication.throttled.replicas` and this replica).
    pub(super) fn follower_allowance(&self, tp: &TopicPartition) -> Option<i64> {
        self.allowance(Side::Follower, tp, None)
    }

    fn allowance(&self, side: Side, tp: &TopicPartition, follower: Option<i32>) -> Option<i64> {
        let rates = &self.shared.throttle_rates;
        rates.rate(side)?;
        let catalog = self.catalog();
        let view = catalog.cluster.as_ref()?;
        let key = match side {
            Side::Leader => LEADER_REPLICAS,
            Side::Follower => FOLLOWER_REPLICAS,
        };
        let listed = catalog.topics.get(&tp.0)?.configs.get(key)?;
        // (Validated when set; an unparsable value throttles nothing.)
        let replicas = ThrottledReplicas::parse(listed).ok()?;
        if !replicas.throttles(tp.1, view.me) {
            return None;
        }
        let replica = follower.unwrap_or(view.me);
        if view.partition(&tp.0, tp.1)?.isr.contains(&replica) {
            return None;
        }
        rates.allowance(side, crate::runtime::clock::now_ms() as u64)
    }

    /// `bytes` moved for a throttled replica on `side`.
    pub(super) fn throttle_spend(&self, side: Side, bytes: usize) {
        self.shared.throttle_rates.spend(side, bytes);
    }
}
