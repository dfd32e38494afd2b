//! Server-side assignors (`group.consumer.assignors`): `uniform` (the default) and `range`.
//!
//! Both take each member's subscribed topic ids and each topic's partition count, and give
//! every partition of a subscribed topic to exactly one member subscribed to it.

use std::collections::{BTreeMap, BTreeSet};

use super::{Assignment, TopicId};

/// Every member, with nothing yet.
fn nothing_for(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
) -> BTreeMap<String, Assignment> {
    subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect()
}

/// Balanced and sticky: every member ends within one partition of the others (when they all
/// subscribe to the same topics), and a partition stays with its owner in `previous` while
/// that keeps the balance — so a member joining or leaving moves as few partitions as it can.
pub fn uniform(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
    partitions: &BTreeMap<TopicId, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut out = nothing_for(subscriptions);
    let all: Vec<(TopicId, i32)> = partitions
        .iter()
        .filter(|(t, _)| subscriptions.values().any(|s| s.contains(t)))
        .flat_map(|(t, n)| (0..*n).map(move |p| (*t, p)))
        .collect();
    if subscriptions.is_empty() || all.is_empty() {
        return out;
    }
    let members = subscriptions.len();
    let min_quota = all.len() / members;
    let mut extra = all.len() % members;
    let count = |out: &BTreeMap<String, Assignment>, m: &str| -> usize {
        out.get(m).map_or(0, |a| a.values().map(|p| p.len()).sum())
    };
    let mut taken: BTreeSet<(TopicId, i32)> = BTreeSet::new();
    // Sticky phase: each member keeps what it had, up to its share.
    for (m, subs) in subscriptions {
        let Some(prev) = previous.get(m) else {
            continue;
        };
        let mut kept = 0usize;
        for (t, ps) in prev {
            if !subs.contains(t) {
                continue;
            }
            for p in ps {
                let valid = partitions.get(t).is_some_and(|n| *p < *n);
                if !valid || taken.contains(&(*t, *p)) {
                    continue;
                }
                let may = kept < min_quota || (kept == min_quota && extra > 0);
                if !may {
                    break;
                }
                if kept == min_quota {
                    extra -= 1;
                }
                out.entry(m.clone())
                    .or_default()
                    .entry(*t)
                    .or_default()
                    .insert(*p);
                taken.insert((*t, *p));
                kept += 1;
            }
        }
    }
    // The rest, each to the least-loaded member subscribed to its topic.
    for (t, p) in all {
        if taken.contains(&(t, p)) {
            continue;
        }
        let best = subscriptions
            .iter()
            .filter(|(_, s)| s.contains(&t))
            .map(|(m, _)| (count(&out, m), m))
            .min();
        if let Some((_, m)) = best {
            let m = m.clone();
            out.entry(m).or_default().entry(t).or_default().insert(p);
        }
    }
    out
}

/// Kafka's range, sticky as its server-side one: per topic, the members subscribed to it (by
/// member id) have quotas of `partitions / members`, the first `partitions % members` one
/// more; each keeps what it had in `previous` up to its quota, and the rest go in order to
/// members under quota. From nothing that is contiguous ranges.
pub fn range(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
    partitions: &BTreeMap<TopicId, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut out = nothing_for(subscriptions);
    for (t, n) in partitions {
        let subscribers: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, s)| s.contains(t))
            .map(|(m, _)| m)
            .collect();
        if subscribers.is_empty() || *n <= 0 {
            continue;
        }
        let count = subscribers.len();
        let per = usize::try_from(*n).unwrap_or(0) / count;
        let extra = usize::try_from(*n).unwrap_or(0) % count;
        let quota = |i: usize| per + usize::from(i < extra);
        let mut owner: BTreeMap<i32, usize> = BTreeMap::new();
        let mut load = vec![0usize; count];
        for (i, m) in subscribers.iter().enumerate() {
            let Some(had) = previous.get(*m).and_then(|a| a.get(t)) else {
                continue;
            };
            for p in had.iter().filter(|p| **p < *n) {
                if load[i] < quota(i) && !owner.contains_key(p) {
                    owner.insert(*p, i);
                    load[i] += 1;
                }
            }
        }
        let mut i = 0usize;
        for p in 0..*n {
            if owner.contains_key(&p) {
                continue;
            }
            while i < count && load[i] >= quota(i) {
                i += 1;
            }
            if i == count {
                break;
            }
            owner.insert(p, i);
            load[i] += 1;
        }
        for (p, i) in owner {
            out.entry(subscribers[i].clone())
                .or_default()
                .entry(*t)
                .or_default()
                .insert(p);
        }
    }
    out
}
