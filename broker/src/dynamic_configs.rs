//! Configs that AlterConfigs / IncrementalAlterConfigs change at run time, by resource: a
//! topic's (validated against [`crate::topic_configs`]), the broker's dynamic configs, and a
//! group's (Kafka 4.x group configs, KIP-848). The catalog keeps them (persisted with the
//! topics); the broker and group ones are stored and described, not acted on yet, since they
//! concern features Strand does not have (listener security, the new group protocols).
//! Depends on `topic_configs` only; the catalog depends on it.

use std::collections::BTreeMap;

/// One config change: (name, operation, value). Operations are IncrementalAlterConfigs':
/// 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
pub type ConfigChange = (String, i8, Option<String>);

/// What a config change is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resource {
    Topic(String),
    /// This broker (by its id) or the cluster-wide default (empty name).
    Broker,
    Group(String),
}

/// Kafka 4.4's group configs (`GroupConfig.configNames()`), with their defaults.
pub const GROUP_CONFIGS: &[(&str, &str)] = &[
    ("consumer.assignment.interval.ms", "1000"),
    ("consumer.assignor.offload.enable", "false"),
    ("consumer.heartbeat.interval.ms", "5000"),
    ("consumer.session.timeout.ms", "45000"),
    ("errors.deadletterqueue.copy.record.enable", "false"),
    ("errors.deadletterqueue.topic.name", ""),
    ("share.assignment.interval.ms", "1000"),
    ("share.assignor.offload.enable", "false"),
    ("share.auto.offset.reset", "latest"),
    ("share.delivery.count.limit", "5"),
    ("share.heartbeat.interval.ms", "5000"),
    ("share.isolation.level", "read_uncommitted"),
    ("share.partition.max.record.locks", "2000"),
    ("share.record.lock.duration.ms", "30000"),
    ("share.renew.acknowledge.enable", "false"),
    ("share.session.timeout.ms", "45000"),
    ("streams.acceptable.recovery.lag", "10000"),
    ("streams.assignment.interval.ms", "1000"),
    ("streams.assignor.name", ""),
    ("streams.assignor.offload.enable", "false"),
    ("streams.heartbeat.interval.ms", "5000"),
    ("streams.initial.rebalance.delay.ms", "3000"),
    ("streams.num.standby.replicas", "0"),
    ("streams.num.warmup.replicas", "2"),
    ("streams.rack.aware.assignment.tags", ""),
    ("streams.session.timeout.ms", "45000"),
    ("streams.task.offset.interval.ms", "60000"),
];

/// A group config's value: the group's own, else Kafka's default.
pub fn group_value(configs: Option<&BTreeMap<String, String>>, name: &str) -> String {
    configs
        .and_then(|c| c.get(name))
        .cloned()
        .or_else(|| {
            GROUP_CONFIGS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, d)| d.to_string())
        })
        .unwrap_or_default()
}

/// Checks one value for `resource` and returns what to store.
pub fn validate(resource: &Resource, name: &str, value: &str) -> Result<String, String> {
    match resource {
        Resource::Topic(_) => crate::topic_configs::normalize(name, value),
        Resource::Broker if name.is_empty() => Err("empty broker config name".into()),
        Resource::Broker => Ok(value.to_string()),
        Resource::Group(_) => {
            if !GROUP_CONFIGS.iter().any(|(n, _)| *n == name) {
                return Err(format!("unknown group config name: {name}"));
            }
            let numeric = [".ms", ".replicas", ".limit", ".locks", ".lag"]
                .iter()
                .any(|s| name.ends_with(s));
            if numeric && value.trim().parse::<i64>().map_or(true, |v| v < 0) {
                return Err(format!(
                    "invalid value {value:?} for {name}: expected a non-negative integer"
                ));
            }
            Ok(value.to_string())
        }
    }
}

/// The default of `name` for `resource` (where the current value of an APPEND or SUBTRACT
/// starts when nothing is set), if known.
fn default_of(resource: &Resource, name: &str) -> String {
    match resource {
        Resource::Topic(_) => {
            crate::topic_configs::find(name).map_or(String::new(), |d| d.default.to_string())
        }
        Resource::Broker => String::new(),
        Resource::Group(_) => GROUP_CONFIGS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(String::new(), |(_, d)| d.to_string()),
    }
}

fn is_known(resource: &Resource, name: &str) -> bool {
    match resource {
        Resource::Topic(_) => crate::topic_configs::find(name).is_some(),
        Resource::Broker => !name.is_empty(),
        Resource::Group(_) => GROUP_CONFIGS.iter().any(|(n, _)| *n == name),
    }
}

/// Applies IncrementalAlterConfigs operations (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT) to a
/// copy of `configs`; the error (INVALID_CONFIG's message) leaves nothing changed.
pub fn apply(
    resource: &Resource,
    configs: &BTreeMap<String, String>,
    ops: &[ConfigChange],
) -> Result<BTreeMap<String, String>, String> {
    let mut next = configs.clone();
    for (name, op, value) in ops {
        match (op, value) {
            (0, Some(v)) => {
                let v = validate(resource, name, v)?;
                next.insert(name.clone(), v);
            }
            (1, _) => {
                if !is_known(resource, name) {
                    return Err(format!("unknown config name: {name}"));
                }
                next.remove(name);
            }
            (2 | 3, Some(v)) => {
                let current = next
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| default_of(resource, name));
                let joined = match resource {
                    Resource::Topic(_) => crate::topic_configs::list_op(name, &current, *op, v)?,
                    _ => list_join(&current, *op, v),
                };
                let joined = validate(resource, name, &joined)?;
                next.insert(name.clone(), joined);
            }
            _ => {
                return Err(format!(
                    "operation {op} on {name} needs a value (SET, APPEND, SUBTRACT) or is unknown"
                ))
            }
        }
    }
    Ok(next)
}

/// APPEND (2) or SUBTRACT (3) on a comma-separated list.
fn list_join(current: &str, op: i8, value: &str) -> String {
    let mut items: Vec<&str> = current.split(',').filter(|s| !s.is_empty()).collect();
    for v in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if op == 2 {
            if !items.contains(&v) {
                items.push(v);
            }
        } else {
            items.retain(|i| *i != v);
        }
    }
    items.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_and_group_configs_are_checked_and_changed() {
        let empty = BTreeMap::new();
        let b = apply(
            &Resource::Broker,
            &empty,
            &[
                ("background.threads".into(), 0, Some("9".into())),
                ("log.cleanup.policy".into(), 2, Some("compact".into())),
            ],
        )
        .expect("broker");
        assert_eq!(b["log.cleanup.policy"], "compact");
        let b = apply(
            &Resource::Broker,
            &b,
            &[
                ("background.threads".into(), 1, None),
                ("log.cleanup.policy".into(), 3, Some("compact".into())),
            ],
        )
        .expect("broker");
        assert_eq!(b.get("background.threads"), None);
        let g = Resource::Group("g".into());
        let set = [(
            "consumer.session.timeout.ms".into(),
            0,
            Some("50000".into()),
        )];
        assert_eq!(
            apply(&g, &empty, &set).expect("group")["consumer.session.timeout.ms"],
            "50000"
        );
        assert!(apply(&g, &empty, &[("nope".into(), 0, Some("1".into()))]).is_err());
        let bad = [("consumer.session.timeout.ms".into(), 0, Some("soon".into()))];
        assert!(apply(&g, &empty, &bad).is_err());
    }
}
