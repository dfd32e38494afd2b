//! The JSON report (one versioned schema) and the host facts it carries.
//!
//! Raw histograms are in HdrHistogram's interval-log format (one line per one-second
//! interval, V2 deflate-compressed, base64; values in µs, the max column in ms), readable
//! by HdrHistogram's `HistogramLogProcessor` and by [`decode_interval_log`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::measure::{latency_histogram, Counts, PERCENTILES};
use crate::run::{epoch_s, RunResult};

/// Bumped on any change a reader of the JSON would notice.
pub const SCHEMA_VERSION: u32 = 1;

/// Facts about the machine a report was measured on.
pub fn host_facts(data_dir: &Path) -> Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "model name").then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let memory_kib: Option<u64> = read("/proc/meminfo").lines().find_map(|l| {
        l.strip_prefix("MemTotal:")?
            .trim()
            .strip_suffix("kB")?
            .trim()
            .parse()
            .ok()
    });
    let os = read("/etc/os-release").lines().find_map(|l| {
        l.strip_prefix("PRETTY_NAME=")
            .map(|v| v.trim_matches('"').to_string())
    });
    let host = strand_tuning::Host::probe(Path::new("/"), data_dir);
    let disk = strand_tuning::disk::data_disk(&host)
        .map(|d| d.describe(&host))
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let filesystem = strand_tuning::disk::mount_of(&host)
        .map(|(point, fstype, _)| format!("{fstype} on {}", point.display()));
    json!({
        "cpu_model": cpu_model,
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "os": os,
        "memory_bytes": memory_kib.map(|k| k * 1024),
        "data_dir": data_dir.display().to_string(),
        "data_disk": disk,
        "filesystem": filesystem,
    })
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Percentiles (ms) of one histogram.
pub fn latency_json(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return Value::Null;
    }
    let mut m = serde_json::Map::new();
    for (p, name) in PERCENTILES {
        m.insert(name.into(), json!(ms(h.value_at_percentile(p))));
    }
    m.insert("max".into(), json!(ms(h.max())));
    m.insert("mean".into(), json!(h.mean() / 1000.0));
    m.insert("count".into(), json!(h.len()));
    Value::Object(m)
}

type Pick = fn(&Counts) -> &Histogram<u64>;
const METRICS: [(&str, Pick); 3] = [
    ("publish", |c| &c.publish),
    ("publish_uncorrected", |c| &c.publish_uncorrected),
    ("end_to_end", |c| &c.end_to_end),
];

/// One metric of a run as an HdrHistogram interval log (text).
pub fn interval_log(run: &RunResult, pick: Pick) -> Result<String, String> {
    let mut buf = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    let base = std::time::UNIX_EPOCH + Duration::from_secs_f64(run.start_epoch_s);
    let mut w = IntervalLogWriterBuilder::new()
        .add_comment(&format!(
            "strand bench: {} ({}), values in us",
            run.label, run.broker
        ))
        .with_start_time(base)
        .with_base_time(base)
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut buf, &mut ser)
        .map_err(|e| e.to_string())?;
    for iv in &run.intervals {
        // Warm-up intervals as recorded, tagged; measured ones hold only measured messages,
        // so the untagged intervals sum to the summary.
        let (tag, counts) = if iv.warmup {
            (Tag::new("warmup"), &iv.counts)
        } else {
            (None, &iv.measured)
        };
        w.write_histogram(
            pick(counts),
            Duration::from_secs_f64(iv.start_s),
            Duration::from_secs_f64(iv.duration_s),
            tag,
        )
        .map_err(|e| format!("interval log: {e:?}"))?;
    }
    drop(w);
    String::from_utf8(buf).map_err(|e| e.to_string())
}

/// Sums the untagged (measured) intervals of an interval log.
pub fn decode_interval_log(text: &str) -> Result<Histogram<u64>, String> {
    let mut total = latency_histogram();
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(text.as_bytes()) {
        let entry = entry.map_err(|e| format!("interval log: {e:?}"))?;
        if let LogEntry::Interval(ilh) = entry {
            if ilh.tag().is_some() {
                continue;
            }
            let bytes = base64_decode(ilh.encoded_histogram())?;
            let h: Histogram<u64> = de
                .deserialize(&mut &bytes[..])
                .map_err(|e| format!("histogram: {e:?}"))?;
            total.add(&h).map_err(|e| format!("histogram: {e:?}"))?;
        }
    }
    Ok(total)
}

/// Standard base64 (RFC 4648, with padding), as interval logs use.
fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|c| *c != b'=' && !c.is_ascii_whitespace()) {
        let v = ALPHABET
            .iter()
            .position(|a| *a == c)
            .ok_or_else(|| format!("base64: bad byte {c}"))? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

/// A run in the report.
pub fn run_json(run: &RunResult) -> Result<Value, String> {
    let s = &run.summary;
    let c = &s.counts;
    let intervals: Vec<Value> = run
        .intervals
        .iter()
        .map(|iv| {
            let q = |h: &Histogram<u64>, p: f64| (!h.is_empty()).then(|| ms(h.value_at_percentile(p)));
            json!({
                "start_s": iv.start_s,
                "duration_s": iv.duration_s,
                "warmup": iv.warmup,
                "sent": iv.counts.sent,
                "sent_bytes": iv.counts.sent_bytes,
                "acked": iv.counts.acked,
                "errors": iv.counts.errors,
                "consumed": iv.counts.consumed,
                "send_rate_msg_s": iv.send_rate(),
                "send_mb_s": iv.send_mb_s(),
                "publish_p50_ms": q(&iv.counts.publish, 50.0),
                "publish_p99_ms": q(&iv.counts.publish, 99.0),
                "publish_max_ms": (!iv.counts.publish.is_empty()).then(|| ms(iv.counts.publish.max())),
                "end_to_end_p99_ms": q(&iv.counts.end_to_end, 99.0),
            })
        })
        .collect();
    let mut latency = serde_json::Map::new();
    let mut histograms = serde_json::Map::new();
    for (name, pick) in METRICS {
        latency.insert(name.into(), latency_json(pick(c)));
        histograms.insert(name.into(), json!(interval_log(run, pick)?));
    }
    Ok(json!({
        "label": run.label,
        "broker": run.broker,
        "bootstrap": run.bootstrap,
        "workload": serde_json::to_value(&run.workload).map_err(|e| e.to_string())?,
        "start_epoch_s": run.start_epoch_s,
        "warmup_taken_s": run.warmup_taken_s,
        "warmup_settled": run.warmup_settled,
        "host_steal_pct": run.steal_pct,
        "broker_cpu_s": run.broker_cpu_s,
        "broker_cpu_ms_per_mb": run.broker_cpu_ms_per_mb(),
        "summary": {
            "duration_s": s.duration_s,
            "records_sent": c.sent,
            "bytes_sent": c.sent_bytes,
            "records_acked": c.acked,
            "errors": c.errors,
            "first_error": c.first_error,
            "records_consumed": c.consumed,
            "send_rate_msg_s": s.send_rate(),
            "send_mb_s": s.send_mb_s(),
            "consume_rate_msg_s": s.consume_rate(),
            "latency_ms": latency,
        },
        "broker_stages_us": run.broker_stages,
        "intervals": intervals,
        "histograms": {
            "unit": "us",
            "encoding": "HdrHistogram interval log, V2 deflate + base64, one interval per second; tag warmup = not in the summary",
            "metrics": histograms,
        },
    }))
}

/// The whole report.
pub fn report_json(
    kind: &str,
    command: &str,
    host: Value,
    runs: &[RunResult],
    notes: &[String],
) -> Result<Value, String> {
    let runs: Result<Vec<Value>, String> = runs.iter().map(run_json).collect();
    Ok(json!({
        "schema": "strand-bench-report",
        "schema_version": SCHEMA_VERSION,
        "strand_version": env!("CARGO_PKG_VERSION"),
        "kind": kind,
        "command": command,
        "created_epoch_s": epoch_s(),
        "host": host,
        "notes": notes,
        "runs": runs?,
    }))
}

/// `DIR/strand-bench-<kind>-YYYYMMDD-HHMMSS` (UTC); the caller adds `.json` / `.html`.
pub fn report_stem(out: &Path, kind: &str) -> PathBuf {
    let secs = epoch_s() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let name = if kind == "run" {
        "strand-bench".to_string()
    } else {
        format!("strand-bench-{kind}")
    };
    out.join(format!(
        "{name}-{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Interval, Summary};
    use crate::workload::Workload;

    fn run_with(values_us: &[u64]) -> RunResult {
        let mut warm = Counts::default();
        let _ = warm.publish.record(1_000_000);
        let mut c = Counts::default();
        for v in values_us {
            let _ = c.publish.record(*v);
        }
        let intervals = vec![
            Interval {
                start_s: 0.0,
                duration_s: 1.0,
                warmup: true,
                counts: warm,
                measured: Counts::default(),
            },
            Interval {
                start_s: 1.0,
                duration_s: 1.0,
                warmup: false,
                counts: c.clone(),
                measured: c,
            },
        ];
        RunResult {
            label: "t".into(),
            broker: "b".into(),
            bootstrap: "x:1".into(),
            workload: Workload::default(),
            start_epoch_s: 1_700_000_000.0,
            summary: Summary::of(&intervals),
            intervals,
            broker_stages: Vec::new(),
            warmup_taken_s: 0.0,
            warmup_settled: None,
            steal_pct: None,
            broker_cpu_s: None,
        }
    }

    #[test]
    fn interval_log_roundtrips_and_skips_warmup() {
        let run = run_with(&[100, 200, 300, 5_000]);
        let text = interval_log(&run, |c| &c.publish).expect("encodes");
        assert!(text.contains("#[BaseTime: 1700000000.000"), "{text}");
        assert!(text.contains("Tag=warmup,"), "{text}");
        let h = decode_interval_log(&text).expect("decodes");
        assert_eq!(h.len(), 4);
        assert_eq!(h.max(), run.summary.counts.publish.max());
        assert_eq!(
            h.value_at_quantile(0.5),
            run.summary.counts.publish.value_at_quantile(0.5)
        );
    }

    #[test]
    fn base64_decodes_rfc4648_vectors() {
        assert_eq!(base64_decode("Zm9vYmFy").expect("ok"), b"foobar");
        assert_eq!(base64_decode("Zm9vYg==").expect("ok"), b"foob");
        assert!(base64_decode("Zm9v*").is_err());
    }

    #[test]
    fn report_has_schema_and_percentiles() {
        let run = run_with(&[1_000, 2_000]);
        let v = report_json(
            "run",
            "strand bench",
            host_facts(Path::new("/tmp")),
            &[run],
            &[],
        )
        .expect("report");
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert!(v["host"]["cores"].as_u64().expect("cores") >= 1);
        let lat = &v["runs"][0]["summary"]["latency_ms"]["publish"];
        assert_eq!(lat["count"], 2);
        assert!(lat["p99.99"].as_f64().expect("p99.99") >= 1.99);
        assert!(v["runs"][0]["summary"]["latency_ms"]["end_to_end"].is_null());
    }

    #[test]
    fn report_names_are_utc_timestamps() {
        let p = report_stem(Path::new("/out"), "run");
        let name = p.file_name().expect("name").to_string_lossy().to_string();
        assert!(name.starts_with("strand-bench-20"), "{name}");
        assert_eq!(name.len(), "strand-bench-YYYYMMDD-HHMMSS".len());
    }
}
