//! The self-contained HTML report: inline SVG plots drawn here (no scripts, no network),
//! several runs overlaid with a legend.
//!
//! - latency by percentile, on a log "nines" axis (x = -log10(1 - q): 90% at 1, 99.9% at 3);
//! - publish latency (p50 dashed, p99 solid) per second over time;
//! - send rate per second over time.

use std::fmt::Write;

use hdrhistogram::Histogram;
use serde_json::Value;

use crate::measure::PERCENTILES;
use crate::run::RunResult;

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
const W: f64 = 760.0;
const H: f64 = 340.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 45.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;

pub struct Series {
    pub label: String,
    pub color: &'static str,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

#[derive(Clone, Copy, PartialEq)]
pub enum XAxis {
    Linear,
    /// x is -log10(1 - quantile); ticks are labelled as percentiles.
    Nines,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// About five round ticks covering 0..=max.
fn ticks(max: f64) -> Vec<f64> {
    if max.is_nan() || max <= 0.0 || !max.is_finite() {
        return vec![0.0, 1.0];
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let n = (max / step).ceil() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

fn fmt_tick(v: f64) -> String {
    if v >= 1_000_000.0 {
        format!("{}M", v / 1_000_000.0)
    } else if v >= 10_000.0 {
        format!("{}k", v / 1000.0)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

fn nines_label(x: f64) -> String {
    match x.round() as i64 {
        0 => "0%".into(),
        1 => "90%".into(),
        2 => "99%".into(),
        n => format!("99.{}%", "9".repeat(n as usize - 2)),
    }
}

/// One line chart as an inline `<svg>`. Percentile charts whose values span more than
/// 50x (acks=0 next to a stalled acks=all) get a log y axis, so every run stays readable.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    x_axis: XAxis,
    series: &[Series],
) -> String {
    let all = series.iter().flat_map(|s| s.points.iter());
    let x_max = all.clone().map(|p| p.0).fold(0.0, f64::max);
    let y_max = all.clone().map(|p| p.1).fold(0.0, f64::max) * 1.05;
    let y_min = all
        .map(|p| p.1)
        .filter(|y| *y > 0.0)
        .fold(f64::INFINITY, f64::min);
    let y_log = x_axis == XAxis::Nines && y_min.is_finite() && y_max / y_min > 50.0;
    let x_ticks: Vec<f64> = match x_axis {
        XAxis::Linear => ticks(x_max),
        XAxis::Nines => (0..=(x_max.ceil().max(1.0) as i64))
            .map(|i| i as f64)
            .collect(),
    };
    // The y axis as drawn: `ty` maps a value to axis units, `y_ticks` are (axis units, label).
    let (lo, hi) = (y_min.log10().floor(), y_max.log10().ceil());
    let ty = |y: f64| {
        if y_log {
            y.max(10f64.powf(lo)).log10() - lo
        } else {
            y
        }
    };
    let y_ticks: Vec<(f64, String)> = if y_log {
        (0..=((hi - lo).max(1.0) as i64))
            .map(|d| (d as f64, fmt_tick(10f64.powf(lo + d as f64))))
            .collect()
    } else {
        ticks(y_max).into_iter().map(|t| (t, fmt_tick(t))).collect()
    };
    let y_label = if y_log {
        format!("{y_label}, log scale")
    } else {
        y_label.to_string()
    };
    let x_hi = x_ticks.last().copied().unwrap_or(1.0).max(1e-9);
    let y_hi = y_ticks.last().map_or(1.0, |t| t.0).max(1e-9);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let sx = |x: f64| LEFT + x / x_hi * pw;
    let sy = |y: f64| TOP + ph - ty(y) / y_hi * ph;
    let sy_axis = |u: f64| TOP + ph - u / y_hi * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"11\">\
         <text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">{}</text>",
        W / 2.0,
        esc(title)
    );
    for t in &x_ticks {
        let x = sx(*t);
        let label = match x_axis {
            XAxis::Linear => fmt_tick(*t),
            XAxis::Nines => nines_label(*t),
        };
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            TOP + ph,
            TOP + ph + 15.0
        );
    }
    for (t, label) in &y_ticks {
        let y = sy_axis(*t);
        let _ = write!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + pw,
            LEFT - 6.0,
            y + 4.0,
            label
        );
    }
    let _ = write!(
        s,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#888\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <text transform=\"translate(16,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        LEFT + pw / 2.0,
        H - 12.0,
        esc(x_label),
        TOP + ph / 2.0,
        esc(&y_label)
    );
    for (i, se) in series.iter().enumerate() {
        if se.points.is_empty() {
            continue;
        }
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        let dash = if se.dashed {
            " stroke-dasharray=\"5,4\""
        } else {
            ""
        };
        let _ = write!(
            s,
            "<polyline class=\"series\" data-label=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"{dash} points=\"{}\"/>",
            esc(&se.label),
            se.color,
            pts.join(" ")
        );
        let ly = TOP + 14.0 + 15.0 * i as f64;
        let lx = LEFT + 10.0;
        let _ = write!(
            s,
            "<line x1=\"{lx}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"2\"{dash}/>\
             <text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
            ly - 4.0,
            lx + 22.0,
            ly - 4.0,
            se.color,
            lx + 28.0,
            esc(&se.label)
        );
    }
    s.push_str("</svg>");
    s
}

/// The percentile curve of a histogram: (nines, ms) points up to the max.
pub fn percentile_curve(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    // Resolution limit: with n samples, quantiles beyond 1 - 1/n are the max.
    let x_end = (h.len() as f64).log10().clamp(1.0, 6.0);
    let steps = 120;
    let mut v: Vec<(f64, f64)> = (0..=steps)
        .map(|i| {
            let x = x_end * i as f64 / steps as f64;
            let q = 1.0 - 10f64.powf(-x);
            (x, h.value_at_quantile(q) as f64 / 1000.0)
        })
        .collect();
    v.push((x_end, h.max() as f64 / 1000.0));
    v
}

fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

fn summary_table(runs: &[RunResult]) -> String {
    let mut s = String::from(
        "<table><tr><th>run</th><th>broker</th><th>msg/s</th><th>MB/s</th><th>latency (ms)</th>",
    );
    for (_, n) in PERCENTILES {
        let _ = write!(s, "<th>{n}</th>");
    }
    s.push_str("<th>max</th><th>errors</th></tr>");
    for r in runs {
        let c = &r.summary.counts;
        let rows = [
            ("publish", &c.publish),
            ("publish (uncorrected)", &c.publish_uncorrected),
            ("end-to-end", &c.end_to_end),
        ];
        let n = rows.iter().filter(|(_, h)| !h.is_empty()).count().max(1);
        let mut first = true;
        for (name, h) in rows.iter().filter(|(_, h)| !h.is_empty()) {
            s.push_str("<tr>");
            if first {
                let _ = write!(
                    s,
                    "<td rowspan=\"{n}\">{}</td><td rowspan=\"{n}\">{}</td><td rowspan=\"{n}\">{:.0}</td><td rowspan=\"{n}\">{:.2}</td>",
                    esc(&r.label),
                    esc(&r.broker),
                    r.summary.send_rate(),
                    r.summary.send_mb_s()
                );
            }
            let _ = write!(s, "<td>{name}</td>");
            for (p, _) in PERCENTILES {
                let _ = write!(
                    s,
                    "<td>{:.3}</td>",
                    h.value_at_percentile(p) as f64 / 1000.0
                );
            }
            let _ = write!(s, "<td>{:.3}</td>", h.max() as f64 / 1000.0);
            if first {
                let _ = write!(s, "<td rowspan=\"{n}\">{}</td>", c.errors);
                first = false;
            }
            s.push_str("</tr>");
        }
    }
    s.push_str("</table>");
    s
}

fn kv_table(v: &Value) -> String {
    let mut s = String::from("<table class=\"kv\">");
    if let Some(m) = v.as_object() {
        for (k, val) in m {
            let text = match val {
                Value::String(t) => t.clone(),
                Value::Null => "-".into(),
                other => other.to_string(),
            };
            let _ = write!(s, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&text));
        }
    }
    s.push_str("</table>");
    s
}

/// The report page. `extra` is preformatted text (a comparison table) shown first.
pub fn report_html(
    title: &str,
    command: &str,
    host: &Value,
    runs: &[RunResult],
    extra: &str,
    notes: &[String],
) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>{}</h1><p><code>{}</code></p>",
        esc(title),
        esc(command)
    );
    if !extra.is_empty() {
        let _ = write!(body, "<h2>Comparison</h2><pre>{}</pre>", esc(extra));
    }
    for n in notes {
        let _ = write!(body, "<p class=\"note\">{}</p>", esc(n));
    }
    let _ = write!(
        body,
        "<h2>Summary (measured period, warm-up excluded)</h2>{}",
        summary_table(runs)
    );
    let curve = |name: &str, pick: fn(&RunResult) -> &Histogram<u64>| {
        let series: Vec<Series> = runs
            .iter()
            .enumerate()
            .filter(|(_, r)| !pick(r).is_empty())
            .map(|(i, r)| Series {
                label: r.label.clone(),
                color: color(i),
                dashed: false,
                points: percentile_curve(pick(r)),
            })
            .collect();
        (!series.is_empty())
            .then(|| line_chart(name, "percentile", "latency (ms)", XAxis::Nines, &series))
    };
    body.push_str("<h2>Latency by percentile</h2>");
    for chart in [
        curve(
            "publish latency (send -> ack, from the intended send time)",
            |r| &r.summary.counts.publish,
        ),
        curve("end-to-end latency (send -> consumer receipt)", |r| {
            &r.summary.counts.end_to_end
        }),
        curve(
            "publish latency, uncorrected (from the actual send call)",
            |r| &r.summary.counts.publish_uncorrected,
        ),
    ]
    .into_iter()
    .flatten()
    {
        body.push_str(&chart);
    }
    let mut lat = Vec::new();
    let mut rate = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let at = |q: f64| -> Vec<(f64, f64)> {
            r.intervals
                .iter()
                .filter(|iv| !iv.counts.publish.is_empty())
                .map(|iv| {
                    (
                        iv.start_s + iv.duration_s,
                        iv.counts.publish.value_at_quantile(q) as f64 / 1000.0,
                    )
                })
                .collect()
        };
        lat.push(Series {
            label: format!("{} p99", r.label),
            color: color(i),
            dashed: false,
            points: at(0.99),
        });
        lat.push(Series {
            label: format!("{} p50", r.label),
            color: color(i),
            dashed: true,
            points: at(0.50),
        });
        rate.push(Series {
            label: r.label.clone(),
            color: color(i),
            dashed: false,
            points: r
                .intervals
                .iter()
                .map(|iv| (iv.start_s + iv.duration_s, iv.send_rate()))
                .collect(),
        });
    }
    body.push_str("<h2>Over time (warm-up included)</h2>");
    body.push_str(&line_chart(
        "publish latency per second",
        "time (s)",
        "latency (ms)",
        XAxis::Linear,
        &lat,
    ));
    body.push_str(&line_chart(
        "send rate per second",
        "time (s)",
        "messages/s",
        XAxis::Linear,
        &rate,
    ));
    let _ = write!(body, "<h2>Host</h2>{}", kv_table(host));
    body.push_str("<h2>Workloads</h2>");
    for r in runs {
        let _ = write!(
            body,
            "<h3>{}</h3><pre>{}</pre>",
            esc(&r.label),
            esc(&r.workload.to_toml())
        );
    }
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:sans-serif;margin:24px;max-width:1000px;color:#222}}\
         table{{border-collapse:collapse;margin:8px 0;font-size:13px}}\
         th,td{{border:1px solid #ccc;padding:3px 7px;text-align:right}}\
         table.kv th,table.kv td{{text-align:left}} svg.plot{{display:block;margin:12px 0}}\
         pre{{background:#f6f6f6;padding:8px;font-size:12px}} .note{{color:#555;font-size:13px}}\
         </style></head><body>{body}</body></html>\n",
        esc(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::latency_histogram;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.37);
        assert!(*t.last().expect("ticks") >= 0.37 && t.len() <= 7, "{t:?}");
        assert_eq!(nines_label(3.0), "99.9%");
    }

    #[test]
    fn percentile_curve_rises_to_the_max() {
        let mut h = latency_histogram();
        for v in 1..=10_000u64 {
            let _ = h.record(v * 10);
        }
        let c = percentile_curve(&h);
        assert!(c.windows(2).all(|w| w[1].1 >= w[0].1), "monotonic");
        assert!(
            (c.last().expect("points").0 - 4.0).abs() < 1e-9,
            "4 nines of 10k samples"
        );
        assert!((c.last().expect("points").1 - 100.0).abs() < 0.1);
    }

    #[test]
    fn charts_overlay_series_with_a_legend() {
        let s = [
            Series {
                label: "a<1>".into(),
                color: color(0),
                dashed: false,
                points: vec![(0.0, 1.0), (1.0, 2.0)],
            },
            Series {
                label: "b".into(),
                color: color(1),
                dashed: true,
                points: vec![(0.0, 3.0), (2.0, 1.0)],
            },
        ];
        let svg = line_chart("t", "x", "y", XAxis::Nines, &s);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a&lt;1&gt;") && svg.contains("99%"));
        assert!(!svg.contains("log scale"), "1..3: linear");
        let wide = [Series {
            label: "w".into(),
            color: color(0),
            dashed: false,
            points: vec![(0.0, 0.5), (3.0, 3000.0)],
        }];
        let svg = line_chart("t", "x", "y", XAxis::Nines, &wide);
        assert!(svg.contains("y, log scale"));
        assert!(
            svg.contains(">0.1</text>") && svg.contains(">10k</text>"),
            "{svg}"
        );
    }
}
