//! Comparison tables (sans-IO): several runs of one workload side by side.

use std::fmt::Write;

use hdrhistogram::Histogram;

use crate::run::RunResult;

fn p(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_percentile(q) as f64 / 1000.0)
}

fn cell(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// One row per run: throughput, publish and end-to-end percentiles (ms).
pub fn runs_table(runs: &[RunResult]) -> String {
    let mut s = format!(
        "{:<22} {:>10} {:>8} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>6}\n",
        "run",
        "msg/s",
        "MB/s",
        "pub p50",
        "pub p99",
        "p99.9",
        "max",
        "e2e p50",
        "e2e p99",
        "p99.9",
        "errors"
    );
    for r in runs {
        let c = &r.summary.counts;
        let _ = writeln!(
            s,
            "{:<22} {:>10.0} {:>8.2} | {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>6}",
            r.label,
            r.summary.send_rate(),
            r.summary.send_mb_s(),
            cell(p(&c.publish, 50.0)),
            cell(p(&c.publish, 99.0)),
            cell(p(&c.publish, 99.9)),
            cell((!c.publish.is_empty()).then(|| c.publish.max() as f64 / 1000.0)),
            cell(p(&c.end_to_end, 50.0)),
            cell(p(&c.end_to_end, 99.0)),
            cell(p(&c.end_to_end, 99.9)),
            c.errors
        );
    }
    s.push_str("latencies in ms; pub = send -> ack (from the intended send time), e2e = send -> consumer receipt\n");
    s
}

/// Says when a run's load generator was far behind its schedule: most records sent after
/// the warm-up were due during it (a backlog), so the summary, which counts records by
/// their intended send time, holds few or none of them and the broker did not sustain the
/// rate.
pub fn backlog_note(r: &RunResult) -> Option<String> {
    let sent_after: u64 = r
        .intervals
        .iter()
        .filter(|i| !i.warmup)
        .map(|i| i.counts.sent)
        .sum();
    let due_after = r.summary.counts.sent;
    (sent_after > 0 && due_after * 2 < sent_after).then(|| {
        format!(
            "{}: of the {sent_after} records sent after the warm-up only {due_after} were due \
             after it: the load generator was behind its schedule (a backlog), so {} did not \
             sustain this rate and its percentiles cover {}",
            r.label,
            r.label,
            if due_after == 0 {
                "nothing".to_string()
            } else {
                format!("{due_after} records")
            }
        )
    })
}

/// Metric by metric, `a` against `b`, with the ratio a/b.
pub fn ratio_table(a: &RunResult, b: &RunResult) -> String {
    let (ca, cb) = (&a.summary.counts, &b.summary.counts);
    let mut rows: Vec<(String, Option<f64>, Option<f64>)> = vec![
        (
            "send rate (msg/s)".into(),
            Some(a.summary.send_rate()),
            Some(b.summary.send_rate()),
        ),
        (
            "send rate (MB/s)".into(),
            Some(a.summary.send_mb_s()),
            Some(b.summary.send_mb_s()),
        ),
    ];
    for (name, ha, hb) in [
        ("publish", &ca.publish, &cb.publish),
        ("end-to-end", &ca.end_to_end, &cb.end_to_end),
    ] {
        for q in [50.0, 99.0, 99.9] {
            rows.push((format!("{name} p{q} (ms)"), p(ha, q), p(hb, q)));
        }
        rows.push((
            format!("{name} max (ms)"),
            (!ha.is_empty()).then(|| ha.max() as f64 / 1000.0),
            (!hb.is_empty()).then(|| hb.max() as f64 / 1000.0),
        ));
    }
    // What each acknowledged MB cost the brokers (every node): shown for every run that
    // started its brokers.
    if a.broker_cpu_s.is_some() || b.broker_cpu_s.is_some() {
        rows.push((
            "broker CPU per MB (ms)".into(),
            a.broker_cpu_ms_per_mb(),
            b.broker_cpu_ms_per_mb(),
        ));
    }
    let mut s = format!(
        "{:<26} {:>12} {:>12} {:>10}\n",
        "metric",
        a.label,
        b.label,
        format!("{}/{}", a.label, b.label)
    );
    for (name, va, vb) in rows {
        let ratio = match (va, vb) {
            (Some(x), Some(y)) if y > 0.0 => format!("{:.2}x", x / y),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:<26} {:>12} {:>12} {:>10}",
            name,
            cell(va),
            cell(vb),
            ratio
        );
    }
    s.push_str("throughput: a ratio above 1 favours the first; latency: below 1 does\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Counts, Interval, Summary};
    use crate::workload::Workload;

    fn run(label: &str, sent: u64, latency_us: u64) -> RunResult {
        let mut c = Counts {
            sent,
            sent_bytes: sent * 1024,
            ..Counts::default()
        };
        let _ = c.publish.record(latency_us);
        let intervals = vec![Interval {
            start_s: 0.0,
            duration_s: 1.0,
            warmup: false,
            counts: c.clone(),
            measured: c,
        }];
        RunResult {
            label: label.into(),
            broker: "b".into(),
            bootstrap: "x:1".into(),
            workload: Workload::default(),
            start_epoch_s: 0.0,
            summary: Summary::of(&intervals),
            intervals,
            broker_stages: Vec::new(),
            warmup_taken_s: 0.0,
            warmup_settled: None,
            steal_pct: None,
            broker_cpu_s: Some(1.5),
        }
    }

    #[test]
    fn ratios_are_first_over_second() {
        let t = ratio_table(&run("strand", 2000, 1000), &run("kafka", 1000, 4000));
        let rate = t
            .lines()
            .find(|l| l.starts_with("send rate (msg/s)"))
            .expect("row");
        assert!(rate.ends_with("2.00x"), "{rate}");
        let p50 = t
            .lines()
            .find(|l| l.starts_with("publish p50"))
            .expect("row");
        assert!(p50.ends_with("0.25x"), "{p50}");
        let e2e = t
            .lines()
            .find(|l| l.starts_with("end-to-end p50"))
            .expect("row");
        assert!(e2e.ends_with('-'), "no consumers, no ratio: {e2e}");
        assert!(
            t.lines().any(|l| l.starts_with("broker CPU per MB (ms)")),
            "{t}"
        );
    }

    #[test]
    fn a_run_whose_records_were_all_due_in_the_warmup_is_a_backlog() {
        let mut r = run("kafka", 0, 1000);
        r.intervals[0].counts.sent = 5000;
        let note = backlog_note(&r).expect("a backlog");
        assert!(note.contains("only 0 were due"), "{note}");
        let steady = run("strand", 2000, 1000);
        assert!(backlog_note(&steady).is_none());
    }

    #[test]
    fn runs_table_has_a_row_per_run() {
        let t = runs_table(&[run("acks=0", 10, 100), run("acks=all", 10, 900)]);
        assert!(t.lines().any(|l| l.starts_with("acks=0")));
        assert!(t
            .lines()
            .any(|l| l.starts_with("acks=all") && l.contains("0.90")));
    }
}
