//! Workloads: the TOML schema, its defaults and its validation (sans-IO).
//!
//! ```toml
//! name = "1-topic-16-partitions-1kb"
//! topics = 1
//! partitions_per_topic = 16
//! message_size_bytes = 1024
//! rate = "50MB/s"          # "max", messages per second (51200), or "N MB/s"
//! acks = "all"
//! ```
//! Every key is optional; [`Workload::default`] is the workload `strand bench` runs with no
//! arguments. `--set key=value` on the command line overrides any key ([`Workload::set`]).

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The first 8 bytes of every value: the intended send time, µs since the Unix epoch (the
/// consumers' end-to-end latency is measured from it).
pub const TIMESTAMP_BYTES: usize = 8;
/// Zipf keys are drawn from a table of this many entries at most (one f64 each).
pub const ZIPF_KEYS_MAX: u64 = 10_000_000;

/// How records are keyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyDistribution {
    /// No key: the client's sticky partitioner spreads batches over the partitions.
    None,
    /// `key-0`, `key-1`, ... `key-{keys-1}`, then again.
    RoundRobin,
    /// Uniformly random among `keys` keys.
    Random,
    /// Zipf-distributed among `keys` keys (`zipf_exponent`): a few hot keys.
    Zipf,
}

/// Target send rate of the whole workload (all producers together).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// As fast as the producers can send (backpressure: the client's buffer).
    Max,
    /// A fixed schedule of this many messages per second; latency counts from each message's
    /// intended send time (coordinated-omission correction).
    PerSecond(f64),
    /// A fixed schedule of this many MB/s (MiB: 2^20 bytes), turned into messages per second
    /// with the message size.
    MegabytesPerSecond(f64),
}

impl Rate {
    /// `max`, `1000`, `1000/s`, `50MB/s`.
    pub fn parse(s: &str) -> Result<Rate, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("max") {
            return Ok(Rate::Max);
        }
        let bad = || format!("rate {s:?}: expected max, N (messages/s) or N MB/s");
        let lower = t.to_ascii_lowercase();
        let (num, mb) = if let Some(n) = lower.strip_suffix("mb/s") {
            (n.trim(), true)
        } else {
            (lower.strip_suffix("/s").unwrap_or(&lower).trim(), false)
        };
        let v: f64 = num.parse().map_err(|_| bad())?;
        if !(v.is_finite() && v > 0.0) {
            return Err(bad());
        }
        Ok(if mb {
            Rate::MegabytesPerSecond(v)
        } else {
            Rate::PerSecond(v)
        })
    }

    /// Messages per second for `message_size_bytes`; `None` = max.
    pub fn messages_per_s(&self, message_size_bytes: usize) -> Option<f64> {
        match *self {
            Rate::Max => None,
            Rate::PerSecond(v) => Some(v),
            Rate::MegabytesPerSecond(mb) => {
                Some(mb * 1024.0 * 1024.0 / message_size_bytes.max(1) as f64)
            }
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::Max => write!(f, "max"),
            Rate::PerSecond(v) => write!(f, "{v}/s"),
            Rate::MegabytesPerSecond(v) => write!(f, "{v}MB/s"),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Float(f64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Int(v) => v.to_string(),
            Raw::Float(v) => v.to_string(),
            Raw::Text(s) => s,
        };
        Rate::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Which client library produces and consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriverKind {
    /// Strand's native client, one glommio executor per core, pinned.
    Native,
    /// librdkafka (the `rdkafka` crate), one thread per producer and per consumer.
    Rdkafka,
}

/// One benchmark workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    pub topics: u32,
    pub partitions_per_topic: u32,
    pub message_size_bytes: usize,
    pub key_distribution: KeyDistribution,
    /// Distinct keys (round-robin, random, zipf).
    pub keys: u64,
    pub zipf_exponent: f64,
    pub producers_per_topic: u32,
    /// Consumer groups per topic (each reads every record); 0 = no consumers, no end-to-end
    /// latency.
    pub consumer_groups: u32,
    /// Consumers per group; a group's partitions are split among them (static assignment).
    pub consumers_per_group: u32,
    pub rate: Rate,
    /// Run before the measurement starts; its records are not in the summary.
    pub warmup_s: f64,
    /// 0: the warm-up is `warmup_s` exactly. Above `warmup_s`: after `warmup_s` the warm-up
    /// goes on until the per-second publish p99 has settled (see `settle.rs`), at most this
    /// long in all. `compare-brokers` sets 120 s unless given.
    pub warmup_max_s: f64,
    /// The measured period.
    pub duration_s: f64,
    /// `0`, `1` or `all` (a TOML integer is accepted too).
    #[serde(deserialize_with = "string_or_number")]
    pub acks: String,
    pub linger_ms: u64,
    pub batch_size_bytes: usize,
    /// none, gzip, snappy, lz4, zstd.
    pub compression: String,
    pub idempotence: bool,
    /// Produce in transactions (committed every `transaction_interval_ms`; rdkafka driver).
    pub transactions: bool,
    pub transaction_interval_ms: u64,
    /// Per producer, records sent but not yet acknowledged before the next send waits; 0 =
    /// unbounded (only the client's buffer limits it). 1 is a synchronous producer.
    pub max_in_flight_records: u32,
    /// Produce requests in flight per broker connection (`max.in.flight.requests.per.connection`;
    /// the Java client's default is 5).
    pub max_in_flight_requests: u32,
    /// The client's `buffer.memory`.
    pub buffer_bytes: usize,
    /// Strand's `write.caching` topic config: `true` acknowledges acks=all without waiting
    /// for fsync. Unset: the broker's default (fsync before ack). Not sent to other brokers.
    pub write_caching: Option<bool>,
    pub driver: DriverKind,
    /// Native driver: pin each client executor to a core (thread-per-core). With the broker on
    /// the same cores, `false` lets the kernel move a busy client thread off a core where a
    /// per-CPU kworker must run (see docs/ARCHITECTURE.md, "Direct I/O completions").
    pub pin_client_threads: bool,
    /// The topics' replication factor; -1: the broker's `default.replication.factor`.
    /// `--nodes N` makes it N when unset.
    pub replication_factor: i32,
    /// The topics' `min.insync.replicas` (sent to both brokers); 0: the broker's default.
    /// `--nodes N` (N >= 2) makes it N - 1 when unset.
    pub min_insync_replicas: i32,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            name: "default-1-topic-16-partitions-1kb".into(),
            topics: 1,
            partitions_per_topic: 16,
            message_size_bytes: 1024,
            key_distribution: KeyDistribution::None,
            keys: 1000,
            zipf_exponent: 1.0,
            producers_per_topic: 1,
            consumer_groups: 1,
            consumers_per_group: 1,
            rate: Rate::PerSecond(10_000.0),
            warmup_s: 5.0,
            warmup_max_s: 0.0,
            duration_s: 30.0,
            acks: "1".into(),
            linger_ms: 1,
            batch_size_bytes: 128 * 1024,
            compression: "none".into(),
            idempotence: false,
            transactions: false,
            transaction_interval_ms: 100,
            max_in_flight_records: 0,
            max_in_flight_requests: 5,
            buffer_bytes: 64 << 20,
            write_caching: None,
            driver: DriverKind::Native,
            pin_client_threads: true,
            replication_factor: -1,
            min_insync_replicas: 0,
        }
    }
}

impl Workload {
    pub fn from_toml(text: &str) -> Result<Workload, String> {
        let w: Workload = toml::from_str(text).map_err(|e| e.to_string())?;
        w.validate()?;
        Ok(w)
    }

    pub fn load(path: &Path) -> Result<Workload, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read workload {}: {e}", path.display()))?;
        Workload::from_toml(&text).map_err(|e| format!("workload {}: {e}", path.display()))
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// Overrides one key with a TOML value (`acks=1`, `rate="max"`, `rate=max`: a bare word
    /// that is not TOML is taken as a string).
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let (key, value) = assignment
            .split_once('=')
            .ok_or_else(|| format!("--set {assignment:?}: expected key=value"))?;
        let (key, value) = (key.trim(), value.trim());
        let mut table = toml::Table::try_from(&*self).map_err(|e| e.to_string())?;
        if !table.contains_key(key) && key != "write_caching" {
            return Err(format!("--set: unknown workload key {key:?}"));
        }
        let mut parsed: toml::Value = match toml::from_str::<toml::Table>(&format!("v = {value}")) {
            Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(value.into())),
            Err(_) => toml::Value::String(value.into()),
        };
        // `--set compression=1` style: a string key keeps a string.
        if matches!(table.get(key), Some(toml::Value::String(_))) && !parsed.is_str() {
            parsed = toml::Value::String(value.trim_matches('"').into());
        }
        table.insert(key.to_string(), parsed);
        let w: Workload = table
            .try_into()
            .map_err(|e: toml::de::Error| format!("--set {key}: {}", e.message()))?;
        w.validate()?;
        *self = w;
        Ok(())
    }

    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), String> {
        let fail = |m: String| Err(format!("workload {:?}: {m}", self.name));
        if self.topics == 0 || self.partitions_per_topic == 0 || self.producers_per_topic == 0 {
            return fail("topics, partitions_per_topic and producers_per_topic must be > 0".into());
        }
        if self.message_size_bytes < TIMESTAMP_BYTES {
            return fail(format!(
                "message_size_bytes must be at least {TIMESTAMP_BYTES} (the send timestamp)"
            ));
        }
        if self.consumer_groups > 0 && self.consumers_per_group == 0 {
            return fail("consumers_per_group must be > 0 when consumer_groups > 0".into());
        }
        if self.key_distribution != KeyDistribution::None && self.keys == 0 {
            return fail("keys must be > 0 with a key distribution".into());
        }
        if self.key_distribution == KeyDistribution::Zipf
            && (self.keys > ZIPF_KEYS_MAX
                || self.zipf_exponent.is_nan()
                || self.zipf_exponent <= 0.0)
        {
            return fail(format!(
                "zipf needs 0 < keys <= {ZIPF_KEYS_MAX} and zipf_exponent > 0"
            ));
        }
        let bad = |v: f64| v.is_nan() || v < 0.0;
        if bad(self.duration_s)
            || self.duration_s == 0.0
            || bad(self.warmup_s)
            || bad(self.warmup_max_s)
        {
            return fail("duration_s must be > 0, warmup_s and warmup_max_s >= 0".into());
        }
        self.acks_i16()?;
        if !["none", "gzip", "snappy", "lz4", "zstd"].contains(&self.compression.as_str()) {
            return fail(format!(
                "compression {:?}: none, gzip, snappy, lz4 or zstd",
                self.compression
            ));
        }
        if self.max_in_flight_requests == 0 {
            return fail("max_in_flight_requests must be > 0".into());
        }
        if self.replication_factor == 0 || self.replication_factor < -1 {
            return fail("replication_factor must be >= 1 (or -1: the broker's default)".into());
        }
        if self.min_insync_replicas < 0
            || (self.replication_factor > 0 && self.min_insync_replicas > self.replication_factor)
        {
            return fail(
                "min_insync_replicas must be >= 0 (0: the broker's default) and at most the \
                 replication factor"
                    .into(),
            );
        }
        if self.transactions && self.acks_i16()? != -1 {
            return fail("transactions need acks=all".into());
        }
        Ok(())
    }

    /// Kafka's `acks` as the protocol has it: 0, 1 or -1.
    pub fn acks_i16(&self) -> Result<i16, String> {
        match self.acks.as_str() {
            "0" => Ok(0),
            "1" => Ok(1),
            "all" | "-1" => Ok(-1),
            other => Err(format!("acks {other:?}: 0, 1 or all")),
        }
    }

    /// Messages per second of one producer; `None` at max rate.
    pub fn rate_per_producer(&self) -> Option<f64> {
        let producers = f64::from(self.topics * self.producers_per_topic);
        self.rate
            .messages_per_s(self.message_size_bytes)
            .map(|r| r / producers)
    }

    /// Topic configs every broker gets at creation (Strand-only ones are added elsewhere).
    pub fn topic_configs(&self) -> Vec<(String, String)> {
        let mut c = Vec::new();
        if self.min_insync_replicas > 0 {
            c.push((
                "min.insync.replicas".to_string(),
                self.min_insync_replicas.to_string(),
            ));
        }
        c
    }

    /// What `--nodes N` implies for a workload that does not say: replication factor N and
    /// `min.insync.replicas` N - 1 (Kafka's usual 3 / 2).
    pub fn replicate_over(&mut self, nodes: u32) {
        if nodes < 2 {
            return;
        }
        if self.replication_factor == -1 {
            self.replication_factor = nodes as i32;
        }
        if self.min_insync_replicas == 0 {
            self.min_insync_replicas = (self.replication_factor - 1).max(1);
        }
    }

    pub fn total_s(&self) -> f64 {
        self.warmup_s + self.duration_s
    }
}

fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Int(i64),
        Text(String),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Int(v) => v.to_string(),
        Raw::Text(s) => s,
    })
}

/// `30s`, `500ms`, `2m`, `1.5` (seconds).
pub fn parse_duration_s(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
        _ => Err(format!("duration {s:?}: expected e.g. 30s, 500ms, 2m")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_imply_replication_unless_the_workload_says() {
        let mut w = Workload::default();
        w.replicate_over(1);
        assert_eq!((w.replication_factor, w.min_insync_replicas), (-1, 0));
        assert!(w.topic_configs().is_empty());
        w.replicate_over(3);
        assert_eq!((w.replication_factor, w.min_insync_replicas), (3, 2));
        assert_eq!(
            w.topic_configs(),
            vec![("min.insync.replicas".to_string(), "2".to_string())]
        );
        let mut w = Workload::default();
        w.set("replication_factor=2").expect("valid");
        w.replicate_over(3);
        assert_eq!((w.replication_factor, w.min_insync_replicas), (2, 1));
        assert!(w.clone().set("min_insync_replicas=3").is_err());
        assert!(w.set("replication_factor=0").is_err());
    }

    #[test]
    fn rates_parse() {
        assert_eq!(Rate::parse("max"), Ok(Rate::Max));
        assert_eq!(Rate::parse("1000"), Ok(Rate::PerSecond(1000.0)));
        assert_eq!(Rate::parse("1000/s"), Ok(Rate::PerSecond(1000.0)));
        assert_eq!(Rate::parse("50MB/s"), Ok(Rate::MegabytesPerSecond(50.0)));
        assert!(Rate::parse("-3").is_err());
        assert!(Rate::parse("fast").is_err());
        let r = Rate::MegabytesPerSecond(50.0).messages_per_s(1024);
        assert_eq!(r, Some(51_200.0));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration_s("5s"), Ok(5.0));
        assert_eq!(parse_duration_s("500ms"), Ok(0.5));
        assert_eq!(parse_duration_s("2m"), Ok(120.0));
        assert_eq!(parse_duration_s("1.5"), Ok(1.5));
        assert!(parse_duration_s("soon").is_err());
    }

    #[test]
    fn toml_roundtrip_and_defaults() {
        let w = Workload::from_toml("partitions_per_topic = 100\nrate = 50000\nacks = \"1\"\n")
            .expect("valid");
        assert_eq!(w.partitions_per_topic, 100);
        assert_eq!(w.rate, Rate::PerSecond(50_000.0));
        assert_eq!(w.message_size_bytes, 1024);
        let back = Workload::from_toml(&w.to_toml()).expect("roundtrip");
        assert_eq!(back, w);
    }

    #[test]
    fn invalid_workloads_are_refused() {
        assert!(Workload::from_toml("acks = \"2\"").is_err());
        assert_eq!(
            Workload::from_toml("acks = 1").expect("integer acks").acks,
            "1"
        );
        assert!(Workload::from_toml("message_size_bytes = 4").is_err());
        assert!(
            Workload::from_toml("partitions = 3").is_err(),
            "unknown key"
        );
        assert!(Workload::from_toml("compression = \"brotli\"").is_err());
        assert!(Workload::from_toml("transactions = true\nacks = \"1\"").is_err());
        assert!(Workload::from_toml("key_distribution = \"zipf\"\nkeys = 0").is_err());
    }

    #[test]
    fn set_overrides_one_key() {
        let mut w = Workload::default();
        w.set("acks=1").expect("acks");
        w.set("rate=max").expect("bare word");
        w.set("rate=\"50MB/s\"").expect("string");
        w.set("write_caching=true").expect("optional key");
        w.set("key_distribution=zipf").expect("enum");
        assert!(w.pin_client_threads, "thread-per-core by default");
        w.set("pin_client_threads=false").expect("bool");
        assert!(!w.pin_client_threads);
        assert_eq!(w.acks, "1");
        assert_eq!(w.rate, Rate::MegabytesPerSecond(50.0));
        assert_eq!(w.write_caching, Some(true));
        assert_eq!(w.key_distribution, KeyDistribution::Zipf);
        assert!(w.set("nonsense=1").is_err());
        assert!(w.set("acks=7").is_err());
        assert_eq!(
            w.acks, "1",
            "a refused override leaves the workload as it was"
        );
    }

    #[test]
    fn shipped_workloads_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/workloads");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("bench/workloads exists") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|e| e == "toml") {
                Workload::load(&path).expect("shipped workload is valid");
                n += 1;
            }
        }
        assert!(n >= 4, "four shipped workloads, found {n}");
    }
}
