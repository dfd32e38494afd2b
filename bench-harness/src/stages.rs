//! The broker's own request-stage timings (Strand's admin API, `GET /v1/stages`), printed next
//! to the bench's latencies so a tail has an address: queueing, decode, handling (append,
//! fsync wait, cross-shard hop) or the response write. Emptied at the end of the warm-up
//! (`?reset=true`) and read at the end, so they cover the measured window.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One stage's percentiles, in microseconds, as the broker reports them.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct StageRow {
    pub api: String,
    pub stage: String,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

#[derive(Deserialize)]
struct StagesBody {
    stages: Vec<StageRow>,
}

const TIMEOUT: Duration = Duration::from_secs(5);

/// `GET http://{admin}/v1/stages[?reset=true]`.
pub fn fetch(admin: &str, reset: bool) -> Result<Vec<StageRow>, String> {
    let path = if reset {
        "/v1/stages?reset=true"
    } else {
        "/v1/stages"
    };
    let addr = admin
        .parse()
        .map_err(|e| format!("admin address {admin:?}: {e}"))?;
    let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)
        .map_err(|e| format!("admin API at {admin}: {e}"))?;
    let _ = s.set_read_timeout(Some(TIMEOUT));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("admin API at {admin}: {e}"))?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)
        .map_err(|e| format!("admin API at {admin}: {e}"))?;
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("admin API at {admin}: no HTTP reply"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "admin API at {admin}: {}",
            head.lines().next().unwrap_or("")
        ));
    }
    let parsed: StagesBody =
        serde_json::from_str(body).map_err(|e| format!("admin API at {admin}: {e}"))?;
    Ok(parsed.stages)
}

/// The stages as a table (milliseconds, like the bench's own), or "" if there are none.
pub fn table(rows: &[StageRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    let mut s = format!(
        "{:<22}{:>10} {:>10} {:>10} {:>10} {:>10}\n",
        "broker stages (ms)", "p50", "p99", "p99.9", "max", "count"
    );
    for r in rows {
        s.push_str(&format!(
            "{:<22}{:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10}\n",
            format!("{} {}", r.api, r.stage),
            ms(r.p50_us),
            ms(r.p99_us),
            ms(r.p999_us),
            ms(r.max_us),
            r.count
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_each_stage_in_ms() {
        let rows = vec![StageRow {
            api: "produce".into(),
            stage: "fsync_wait".into(),
            count: 10,
            p50_us: 1500,
            p99_us: 2000,
            p999_us: 2500,
            max_us: 3000,
        }];
        let t = table(&rows);
        assert!(t.contains("produce fsync_wait"), "{t}");
        assert!(t.contains("1.500"), "{t}");
        assert_eq!(table(&[]), "");
    }
}
