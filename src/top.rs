//! `strand top`: a live terminal view of one broker, read from its admin API's `GET /metrics`
//! (#20): request and error rates and latency percentiles by API, bytes and records per
//! second, connections, the busiest partitions by records appended per second.
//!
//! Two scrapes make a frame: rates are the counters' difference over the time between them,
//! percentiles come from the difference of the latency histograms' buckets, interpolated
//! within a bucket as Prometheus's `histogram_quantile` does. [`Frame::between`] is plain
//! computation on two parsed scrapes (tested below); [`run`] only fetches and prints.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use prometheus_parse::Value;

/// How long one scrape may take, connect to last byte.
const SCRAPE_TIMEOUT_MS: u64 = 5_000;
/// Largest `/metrics` body read (a scrape is bounded by the broker's series limits).
const SCRAPE_BYTES_MAX: u64 = 64 << 20;

#[derive(clap::Args)]
pub struct TopArgs {
    /// The broker's admin API (`admin.listen`).
    #[arg(long, default_value = "127.0.0.1:9644")]
    admin: String,
    /// Time between frames, in milliseconds.
    #[arg(long, default_value_t = 1_000)]
    interval_ms: u64,
    /// Print this many frames one after another (no screen clearing), then exit.
    #[arg(long)]
    iterations: Option<u32>,
    /// Partitions listed (the busiest by records appended per second).
    #[arg(long, default_value_t = 10)]
    partitions: usize,
}

/// One parsed scrape and when it was taken.
pub struct Snapshot {
    at: Instant,
    /// Counters and gauges summed over their other labels, by (name, label value) for the
    /// label that matters to the view ("" where none does).
    scalars: HashMap<(String, String), f64>,
    /// Latency histograms by API: (upper bound in seconds, cumulative count).
    latency: HashMap<String, Vec<(f64, f64)>>,
    /// (topic, partition) -> log end offset.
    log_end: HashMap<(String, String), f64>,
}

impl Snapshot {
    pub fn parse(text: &str, at: Instant) -> std::io::Result<Snapshot> {
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines)?;
        let mut s = Snapshot {
            at,
            scalars: HashMap::new(),
            latency: HashMap::new(),
            log_end: HashMap::new(),
        };
        for sample in scrape.samples {
            let name = sample.metric.as_str();
            let label = |k: &str| sample.labels.get(k).unwrap_or("").to_string();
            match &sample.value {
                Value::Histogram(buckets) if name == "strand_kafka_request_latency_seconds" => {
                    let mut b: Vec<(f64, f64)> =
                        buckets.iter().map(|h| (h.less_than, h.count)).collect();
                    b.sort_by(|x, y| x.0.total_cmp(&y.0));
                    s.latency.insert(label("api"), b);
                }
                Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => {
                    if name == "strand_partition_log_end_offset" {
                        s.log_end.insert((label("topic"), label("partition")), *v);
                        continue;
                    }
                    let key = match name {
                        "strand_kafka_requests_total" | "strand_kafka_request_errors_total" => {
                            label("api")
                        }
                        _ => String::new(),
                    };
                    *s.scalars.entry((name.to_string(), key)).or_default() += v;
                }
                _ => {}
            }
        }
        Ok(s)
    }

    fn scalar(&self, name: &str, key: &str) -> f64 {
        self.scalars
            .get(&(name.to_string(), key.to_string()))
            .copied()
            .unwrap_or(0.0)
    }
}

/// One API's line.
#[derive(Debug, PartialEq)]
pub struct ApiRow {
    pub api: String,
    pub requests_per_s: f64,
    pub errors_per_s: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// What the screen shows between two scrapes.
#[derive(Debug, PartialEq)]
pub struct Frame {
    pub seconds: f64,
    pub apis: Vec<ApiRow>,
    pub bytes_in_per_s: f64,
    pub bytes_out_per_s: f64,
    pub records_in_per_s: f64,
    pub connections: f64,
    /// (topic, partition, records appended per second, log end offset), busiest first.
    pub partitions: Vec<(String, String, f64, f64)>,
}

/// The `q` quantile (0..1) of the observations between two cumulative bucket lists, in
/// seconds; `None` when there were none.
pub fn quantile(q: f64, before: &[(f64, f64)], after: &[(f64, f64)]) -> Option<f64> {
    let at = |b: &[(f64, f64)], le: f64| {
        b.iter()
            .find(|(l, _)| *l == le)
            .map_or(0.0, |(_, count)| *count)
    };
    let delta: Vec<(f64, f64)> = after
        .iter()
        .map(|&(le, count)| (le, (count - at(before, le)).max(0.0)))
        .collect();
    let total = delta.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, cumulative) in &delta {
        if cumulative >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let in_bucket = cumulative - lower.1;
            let into = if in_bucket > 0.0 {
                (rank - lower.1) / in_bucket
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * into);
        }
        lower = (le, cumulative);
    }
    Some(lower.0)
}

impl Frame {
    pub fn between(a: &Snapshot, b: &Snapshot, partitions_max: usize) -> Frame {
        let seconds = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
        let rate =
            |name: &str, key: &str| (b.scalar(name, key) - a.scalar(name, key)).max(0.0) / seconds;
        let mut names: Vec<&String> = b
            .scalars
            .keys()
            .filter(|(n, _)| n == "strand_kafka_requests_total")
            .map(|(_, api)| api)
            .collect();
        names.sort();
        let mut apis: Vec<ApiRow> = names
            .into_iter()
            .map(|api| {
                let none = Vec::new();
                let (before, after) = (
                    a.latency.get(api).unwrap_or(&none),
                    b.latency.get(api).unwrap_or(&none),
                );
                ApiRow {
                    api: api.clone(),
                    requests_per_s: rate("strand_kafka_requests_total", api),
                    errors_per_s: rate("strand_kafka_request_errors_total", api),
                    p50_ms: quantile(0.5, before, after).map(|s| s * 1e3),
                    p99_ms: quantile(0.99, before, after).map(|s| s * 1e3),
                }
            })
            .filter(|r| r.requests_per_s > 0.0)
            .collect();
        apis.sort_by(|x, y| y.requests_per_s.total_cmp(&x.requests_per_s));
        let mut partitions: Vec<(String, String, f64, f64)> = b
            .log_end
            .iter()
            .map(|((t, p), &end)| {
                let was = a
                    .log_end
                    .get(&(t.clone(), p.clone()))
                    .copied()
                    .unwrap_or(end);
                (t.clone(), p.clone(), (end - was).max(0.0) / seconds, end)
            })
            .filter(|x| x.2 > 0.0)
            .collect();
        partitions.sort_by(|x, y| {
            y.2.total_cmp(&x.2)
                .then_with(|| (&x.0, &x.1).cmp(&(&y.0, &y.1)))
        });
        partitions.truncate(partitions_max);
        Frame {
            seconds,
            apis,
            bytes_in_per_s: rate("strand_bytes_in_total", ""),
            bytes_out_per_s: rate("strand_bytes_out_total", ""),
            records_in_per_s: rate("strand_records_in_total", ""),
            connections: b.scalar("strand_connections_active", ""),
            partitions,
        }
    }

    pub fn render(&self, admin: &str) -> String {
        let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.2}"));
        let mut out = format!(
            "strand top  {admin}  over {:.1} s\n\
             in {:.1} MB/s  {:.0} records/s   out {:.1} MB/s   connections {:.0}\n\n\
             {:<24} {:>10} {:>9} {:>9} {:>9}\n",
            self.seconds,
            self.bytes_in_per_s / 1e6,
            self.records_in_per_s,
            self.bytes_out_per_s / 1e6,
            self.connections,
            "API",
            "req/s",
            "err/s",
            "p50 ms",
            "p99 ms"
        );
        for r in &self.apis {
            out += &format!(
                "{:<24} {:>10.1} {:>9.1} {:>9} {:>9}\n",
                r.api,
                r.requests_per_s,
                r.errors_per_s,
                ms(r.p50_ms),
                ms(r.p99_ms)
            );
        }
        out += &format!(
            "\n{:<40} {:>12} {:>14}\n",
            "busiest partitions", "records/s", "log end"
        );
        for (t, p, per_s, end) in &self.partitions {
            out += &format!("{:<40} {per_s:>12.1} {end:>14.0}\n", format!("{t}-{p}"));
        }
        out
    }
}

/// `GET /metrics` from `admin`, as text.
fn fetch(admin: &str) -> Result<String, String> {
    let timeout = Duration::from_millis(SCRAPE_TIMEOUT_MS);
    let addr = admin
        .to_socket_addrs()
        .map_err(|e| format!("{admin}: {e}"))?
        .next()
        .ok_or_else(|| format!("{admin}: no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("cannot reach the admin API at {admin} (admin.listen): {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    s.take(SCRAPE_BYTES_MAX)
        .read_to_end(&mut body)
        .map_err(|e| format!("{admin}: {e}"))?;
    let text = String::from_utf8_lossy(&body);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{admin}: not an HTTP response"))?;
    if !head.starts_with("HTTP/1.1 200") {
        let status = head.lines().next().unwrap_or_default();
        return Err(format!("{admin}/metrics answered {status}"));
    }
    Ok(rest.to_string())
}

fn scrape(admin: &str) -> Result<Snapshot, String> {
    let text = fetch(admin)?;
    Snapshot::parse(&text, Instant::now()).map_err(|e| format!("{admin}/metrics: {e}"))
}

pub fn run(args: TopArgs) -> ExitCode {
    let interval = Duration::from_millis(args.interval_ms.max(100));
    let mut before = match scrape(&args.admin) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("strand top: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut shown = 0u32;
    loop {
        std::thread::sleep(interval);
        let now = match scrape(&args.admin) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("strand top: {e}");
                return ExitCode::FAILURE;
            }
        };
        let frame = Frame::between(&before, &now, args.partitions).render(&args.admin);
        match args.iterations {
            Some(_) => println!("{frame}"),
            // Clear the screen and go home, then the frame.
            None => print!("\x1b[2J\x1b[H{frame}"),
        }
        let _ = std::io::stdout().flush();
        before = now;
        shown += 1;
        if args.iterations.is_some_and(|n| shown >= n) {
            return ExitCode::SUCCESS;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "# TYPE strand_kafka_requests counter\n\
        strand_kafka_requests_total{shard=\"0\",api=\"Produce\"} 100\n\
        strand_kafka_requests_total{shard=\"1\",api=\"Produce\"} 50\n\
        # TYPE strand_kafka_request_latency_seconds histogram\n\
        strand_kafka_request_latency_seconds_bucket{api=\"Produce\",le=\"0.001\"} 100\n\
        strand_kafka_request_latency_seconds_bucket{api=\"Produce\",le=\"0.002\"} 150\n\
        strand_kafka_request_latency_seconds_bucket{api=\"Produce\",le=\"+Inf\"} 150\n\
        strand_kafka_request_latency_seconds_sum{api=\"Produce\"} 0.2\n\
        strand_kafka_request_latency_seconds_count{api=\"Produce\"} 150\n\
        # TYPE strand_records_in counter\n\
        strand_records_in_total{shard=\"0\"} 1000\n\
        # TYPE strand_partition_log_end_offset gauge\n\
        strand_partition_log_end_offset{topic=\"t\",partition=\"0\"} 500\n\
        strand_partition_log_end_offset{topic=\"t\",partition=\"1\"} 500\n";

    const B: &str = "# TYPE strand_kafka_requests counter\n\
        strand_kafka_requests_total{shard=\"0\",api=\"Produce\"} 200\n\
        strand_kafka_requests_total{shard=\"1\",api=\"Produce\"} 150\n\
        # TYPE strand_kafka_request_errors counter\n\
        strand_kafka_request_errors_total{shard=\"0\",api=\"Produce\",error=\"X\"} 20\n\
        # TYPE strand_kafka_request_latency_seconds histogram\n\
        strand_kafka_request_latency_seconds_bucket{api=\"Produce\",le=\"0.001\"} 100\n\
        strand_kafka_request_latency_seconds_bucket{api=\"Produce\",le=\"0.002\"} 350\n\
        strand_kafka_request_latency_seconds_bucket{api=\"Produce\",le=\"+Inf\"} 350\n\
        strand_kafka_request_latency_seconds_sum{api=\"Produce\"} 0.5\n\
        strand_kafka_request_latency_seconds_count{api=\"Produce\"} 350\n\
        # TYPE strand_records_in counter\n\
        strand_records_in_total{shard=\"0\"} 3000\n\
        # TYPE strand_partition_log_end_offset gauge\n\
        strand_partition_log_end_offset{topic=\"t\",partition=\"0\"} 900\n\
        strand_partition_log_end_offset{topic=\"t\",partition=\"1\"} 500\n";

    #[test]
    fn rates_percentiles_and_busiest_partitions_over_two_seconds() {
        let t0 = Instant::now();
        let a = Snapshot::parse(A, t0).expect("parses");
        let b = Snapshot::parse(B, t0 + Duration::from_secs(2)).expect("parses");
        let f = Frame::between(&a, &b, 10);
        assert_eq!(f.apis.len(), 1);
        let p = &f.apis[0];
        assert_eq!(
            (p.api.as_str(), p.requests_per_s, p.errors_per_s),
            ("Produce", 100.0, 10.0)
        );
        // All 200 new requests fell in (1 ms, 2 ms]: p50 halfway, p99 near its top.
        assert!((p.p50_ms.expect("p50") - 1.5).abs() < 1e-9, "{p:?}");
        assert!((p.p99_ms.expect("p99") - 1.99).abs() < 1e-9, "{p:?}");
        assert_eq!(f.records_in_per_s, 1000.0);
        assert_eq!(f.partitions, vec![("t".into(), "0".into(), 200.0, 900.0)]);
        let text = f.render("127.0.0.1:9644");
        assert!(text.contains("Produce") && text.contains("t-0"), "{text}");
    }

    #[test]
    fn no_observations_no_percentile() {
        let b = [(0.001, 5.0), (f64::INFINITY, 5.0)];
        assert_eq!(quantile(0.99, &b, &b), None);
        // Everything past the last bound: the last finite bound is all that is known.
        let before = [(0.001, 0.0), (f64::INFINITY, 0.0)];
        let after = [(0.001, 0.0), (f64::INFINITY, 4.0)];
        assert_eq!(quantile(0.5, &before, &after), Some(0.001));
    }
}
