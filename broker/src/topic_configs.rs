//! Every topic config Apache Kafka 4.x accepts (checked against 4.4.0's `LogConfig`), with its type, Kafka's default and its
//! validation, plus Strand's own (`write.caching` from Redpanda, `flush.bytes`). One table:
//! CreateTopics, IncrementalAlterConfigs and AlterConfigs validate against it, DescribeConfigs
//! describes every entry. `applied` says whether Strand acts on the value; the others are
//! validated, stored and described so that tools and clients that set them work, and the
//! README lists them.

/// How a value is checked (and which Kafka `ConfigType` DescribeConfigs reports).
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Boolean,
    /// One of these values (any value when empty).
    Str(&'static [&'static str]),
    Int(i64, i64),
    Long(i64, i64),
    Double(f64, f64),
    /// Comma-separated; each item one of these values (any item when empty).
    List(&'static [&'static str]),
}

impl Kind {
    /// Kafka's `ConfigType` code, as DescribeConfigs v3+ reports it.
    pub fn type_code(self) -> i8 {
        match self {
            Kind::Boolean => 1,
            Kind::Str(_) => 2,
            Kind::Int(..) => 3,
            Kind::Long(..) => 5,
            Kind::Double(..) => 6,
            Kind::List(_) => 7,
        }
    }
}

#[derive(Debug)]
pub struct TopicConfig {
    pub name: &'static str,
    pub kind: Kind,
    /// Kafka's default (for the configs Strand applies, the broker's log defaults win).
    pub default: &'static str,
    /// Whether Strand acts on it (single node: `min.insync.replicas` is trivially met).
    pub applied: bool,
}

const L: i64 = i64::MAX;
const I: i64 = i32::MAX as i64;
const POLICIES: &[&str] = &["delete", "compact"];
const CODECS: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

const fn c(name: &'static str, kind: Kind, default: &'static str, applied: bool) -> TopicConfig {
    TopicConfig {
        name,
        kind,
        default,
        applied,
    }
}

/// Kafka 4.x's topic configs (`TopicConfig`/`LogConfig`), in name order, then Strand's.
pub const TOPIC_CONFIGS: &[TopicConfig] = &[
    c("cleanup.policy", Kind::List(POLICIES), "delete", true),
    c("compression.gzip.level", Kind::Int(-1, 9), "-1", false),
    c("compression.lz4.level", Kind::Int(1, 17), "9", false),
    c("compression.type", Kind::Str(CODECS), "producer", false),
    c(
        "compression.zstd.level",
        Kind::Int(-131_072, 22),
        "3",
        false,
    ),
    c("delete.retention.ms", Kind::Long(0, L), "86400000", true),
    c(
        "errors.deadletterqueue.group.enable",
        Kind::Boolean,
        "false",
        false,
    ),
    c("file.delete.delay.ms", Kind::Long(0, L), "60000", false),
    c(
        "flush.messages",
        Kind::Long(1, L),
        "9223372036854775807",
        false,
    ),
    c("flush.ms", Kind::Long(0, L), "9223372036854775807", true),
    c(
        "follower.replication.throttled.replicas",
        Kind::List(&[]),
        "",
        false,
    ),
    c("index.interval.bytes", Kind::Int(0, I), "4096", true),
    c(
        "leader.replication.throttled.replicas",
        Kind::List(&[]),
        "",
        false,
    ),
    c("local.retention.bytes", Kind::Long(-2, L), "-2", false),
    c("local.retention.ms", Kind::Long(-2, L), "-2", false),
    c(
        "max.compaction.lag.ms",
        Kind::Long(1, L),
        "9223372036854775807",
        true,
    ),
    c(
        "max.decompressed.message.bytes",
        Kind::Int(1, 2_147_483_639),
        "2147483639",
        false,
    ),
    c("max.message.bytes", Kind::Int(0, I), "1048588", true),
    c(
        "message.timestamp.after.max.ms",
        Kind::Long(0, L),
        "3600000",
        false,
    ),
    c(
        "message.timestamp.before.max.ms",
        Kind::Long(0, L),
        "9223372036854775807",
        false,
    ),
    c(
        "message.timestamp.type",
        Kind::Str(&["CreateTime", "LogAppendTime"]),
        "CreateTime",
        true,
    ),
    c(
        "min.cleanable.dirty.ratio",
        Kind::Double(0.0, 1.0),
        "0.5",
        true,
    ),
    c("min.compaction.lag.ms", Kind::Long(0, L), "0", true),
    c("min.insync.replicas", Kind::Int(1, I), "1", true),
    c("preallocate", Kind::Boolean, "false", false),
    c("remote.copy.lag.bytes", Kind::Long(-1, L), "-1", false),
    c("remote.copy.lag.ms", Kind::Long(-1, L), "0", false),
    c("remote.log.copy.disable", Kind::Boolean, "false", false),
    c(
        "remote.log.delete.on.disable",
        Kind::Boolean,
        "false",
        false,
    ),
    c("remote.storage.enable", Kind::Boolean, "false", false),
    c("retention.bytes", Kind::Long(i64::MIN, L), "-1", true),
    c("retention.ms", Kind::Long(-1, L), "604800000", true),
    // Kafka 4.x refuses segments under 1 MiB; Strand keeps accepting small ones (tests and
    // compaction demos use 16 KiB segments) and clamps to its own bounds.
    c("segment.bytes", Kind::Int(14, I), "1073741824", true),
    c("segment.index.bytes", Kind::Int(4, I), "10485760", false),
    c("segment.jitter.ms", Kind::Long(0, L), "0", false),
    c("segment.ms", Kind::Long(1, L), "604800000", true),
    c(
        "unclean.leader.election.enable",
        Kind::Boolean,
        "false",
        false,
    ),
    // Strand's own.
    c("flush.bytes", Kind::Long(1, L), "9223372036854775807", true),
    c("write.caching", Kind::Boolean, "false", true),
];

pub fn find(name: &str) -> Option<&'static TopicConfig> {
    TOPIC_CONFIGS.iter().find(|c| c.name == name)
}

fn check_range<T: PartialOrd + std::fmt::Display>(
    name: &str,
    v: T,
    lo: T,
    hi: T,
) -> Result<(), String> {
    if v < lo || v > hi {
        return Err(format!(
            "invalid value {v} for {name}: must be in [{lo}, {hi}]"
        ));
    }
    Ok(())
}

/// Why `value` is not a valid `name` (Kafka's INVALID_CONFIG message), if it is not.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    let Some(def) = find(name) else {
        return Err(format!("unknown topic config name: {name}"));
    };
    let bad = |what: &str| format!("invalid value {value:?} for {name}: {what}");
    match def.kind {
        Kind::Boolean => match value.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => Err(bad("expected true or false")),
        },
        Kind::Str(allowed) => {
            if allowed.is_empty() || allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
                Ok(())
            } else {
                Err(bad(&format!("expected one of {}", allowed.join(", "))))
            }
        }
        Kind::Int(lo, hi) | Kind::Long(lo, hi) => {
            let v = value
                .trim()
                .parse::<i64>()
                .map_err(|_| bad("expected an integer"))?;
            check_range(name, v, lo, hi)
        }
        Kind::Double(lo, hi) => {
            let v = value
                .trim()
                .parse::<f64>()
                .map_err(|_| bad("expected a number"))?;
            check_range(name, v, lo, hi)
        }
        Kind::List(_) if name.ends_with(".replication.throttled.replicas") => {
            use strand_cluster_core::replication::throttle::ThrottledReplicas;
            ThrottledReplicas::parse(value)
                .map(drop)
                .map_err(|why| bad(&why))
        }
        Kind::List(allowed) => {
            let items = list_items(value);
            if allowed.is_empty() {
                return Ok(());
            }
            if name == "cleanup.policy" && items.is_empty() {
                return Err(bad("at least one policy"));
            }
            match items.iter().find(|i| !allowed.contains(&i.as_str())) {
                Some(i) => Err(bad(&format!("{i:?} is not one of {}", allowed.join(", ")))),
                None => Ok(()),
            }
        }
    }
}

/// Validates a topic config and returns the value to store (booleans in lower case, as
/// Kafka describes them).
pub fn normalize(name: &str, value: &str) -> Result<String, String> {
    validate(name, value)?;
    Ok(match find(name).map(|d| d.kind) {
        Some(Kind::Boolean) => value.to_ascii_lowercase(),
        _ => value.to_string(),
    })
}

fn list_items(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// IncrementalAlterConfigs APPEND (2) and SUBTRACT (3) of a list config: the new value, from
/// the current one (the topic's, else the default). Errors for configs that are not lists.
pub fn list_op(name: &str, current: &str, op: i8, value: &str) -> Result<String, String> {
    if !matches!(find(name).map(|d| d.kind), Some(Kind::List(_))) {
        return Err(format!(
            "{} is only allowed on list configs; {name} is not one",
            if op == 2 { "APPEND" } else { "SUBTRACT" }
        ));
    }
    let mut items = list_items(current);
    for v in list_items(value) {
        if op == 2 {
            if !items.contains(&v) {
                items.push(v);
            }
        } else {
            items.retain(|i| *i != v);
        }
    }
    Ok(items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_like_kafka() {
        assert!(validate("retention.ms", "1000").is_ok());
        assert!(validate("retention.ms", "soon").is_err());
        assert!(validate("retention.ms", "-5").is_err());
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("cleanup.policy", "shred").is_err());
        assert!(validate("min.cleanable.dirty.ratio", "0.01").is_ok());
        assert!(validate("min.cleanable.dirty.ratio", "2").is_err());
        assert!(validate("compression.type", "zstd").is_ok());
        assert!(validate("compression.type", "brotli").is_err());
        assert!(validate("compression.zstd.level", "23").is_err());
        assert!(validate("message.timestamp.type", "LogAppendTime").is_ok());
        assert!(validate("preallocate", "yes").is_err());
        assert!(validate("nope", "1").is_err());
        let throttled = "leader.replication.throttled.replicas";
        assert!(validate(throttled, "0:1,1:2").is_ok());
        assert!(validate(throttled, "*").is_ok());
        assert!(validate(throttled, "").is_ok());
        assert!(validate(throttled, "0-1").is_err());
    }

    #[test]
    fn append_and_subtract_work_on_lists_only() {
        assert_eq!(
            list_op("cleanup.policy", "delete", 2, "compact").unwrap(),
            "delete,compact"
        );
        assert_eq!(
            list_op("cleanup.policy", "delete,compact", 2, "compact").unwrap(),
            "delete,compact"
        );
        assert_eq!(
            list_op("cleanup.policy", "delete,compact", 3, "delete").unwrap(),
            "compact"
        );
        assert!(list_op("retention.ms", "1", 2, "2").is_err());
    }

    #[test]
    fn names_are_unique_and_defaults_valid() {
        for (i, c) in TOPIC_CONFIGS.iter().enumerate() {
            assert!(
                TOPIC_CONFIGS[..i].iter().all(|o| o.name != c.name),
                "{}",
                c.name
            );
            if !c.default.is_empty() {
                assert!(validate(c.name, c.default).is_ok(), "{}", c.name);
            }
        }
    }
}
