//! The `__transaction_state` record of a transactional id: key = the id's bytes, value =
//! `v1|producer id|epoch|last epoch|timeout ms|state|start ms|update ms|topic:partition,...`
//! (text: small, and readable with `strand consume __transaction_state`). Kafka topic names
//! cannot hold `|`, `,` or `:`.

use std::collections::BTreeSet;

use super::{TxnMeta, TxnState};

const VERSION: &str = "v1";

fn state_code(s: TxnState) -> &'static str {
    s.name()
}

fn parse_state(s: &str) -> Option<TxnState> {
    Some(match s {
        "Empty" => TxnState::Empty,
        "Ongoing" => TxnState::Ongoing,
        "PrepareCommit" => TxnState::PrepareCommit,
        "PrepareAbort" => TxnState::PrepareAbort,
        "CompleteCommit" => TxnState::CompleteCommit,
        "CompleteAbort" => TxnState::CompleteAbort,
        _ => return None,
    })
}

/// The record (key, value) for `meta`.
pub fn encode(meta: &TxnMeta) -> (Vec<u8>, Vec<u8>) {
    let partitions: Vec<String> = meta
        .partitions
        .iter()
        .map(|(t, p)| format!("{t}:{p}"))
        .collect();
    let value = format!(
        "{VERSION}|{}|{}|{}|{}|{}|{}|{}|{}",
        meta.producer_id,
        meta.epoch,
        meta.last_epoch,
        meta.timeout_ms,
        state_code(meta.state),
        meta.start_ms,
        meta.update_ms,
        partitions.join(",")
    );
    (
        meta.transactional_id.as_bytes().to_vec(),
        value.into_bytes(),
    )
}

/// Parses a record written by [`encode`]; `None` for anything else.
pub fn decode(key: &[u8], value: &[u8]) -> Option<TxnMeta> {
    let id = std::str::from_utf8(key).ok()?;
    let value = std::str::from_utf8(value).ok()?;
    let f: Vec<&str> = value.split('|').collect();
    if f.len() != 9 || f[0] != VERSION {
        return None;
    }
    let mut partitions = BTreeSet::new();
    for p in f[8].split(',').filter(|s| !s.is_empty()) {
        let (t, n) = p.rsplit_once(':')?;
        partitions.insert((t.to_string(), n.parse().ok()?));
    }
    Some(TxnMeta {
        transactional_id: id.to_string(),
        producer_id: f[1].parse().ok()?,
        epoch: f[2].parse().ok()?,
        last_epoch: f[3].parse().ok()?,
        timeout_ms: f[4].parse().ok()?,
        state: parse_state(f[5])?,
        start_ms: f[6].parse().ok()?,
        update_ms: f[7].parse().ok()?,
        partitions,
    })
}
