//! `strand group`: list, describe (state, members, committed offsets and lag) and reset the
//! offsets of consumer groups — classic, KIP-848 consumer and share groups alike.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{json, Value};
use strand_client::admin::OffsetSpec;
use strand_client::error::ClientError;

use crate::cli::{print_table, run, Conn};

#[derive(Subcommand)]
pub enum GroupCmd {
    /// List consumer groups and their states.
    List,
    /// State, members, and per-partition committed offset, end offset and lag.
    Describe { group: String },
    /// Move a group's committed offsets (the group must have no active members).
    ResetOffsets {
        group: String,
        #[arg(long)]
        topic: String,
        #[arg(long, conflicts_with_all = ["to_latest", "to_offset"])]
        to_earliest: bool,
        #[arg(long, conflicts_with = "to_offset")]
        to_latest: bool,
        #[arg(long)]
        to_offset: Option<i64>,
    },
}

pub fn group(conn: Conn, cmd: GroupCmd) -> ExitCode {
    run(&conn, move |cluster, json| async move {
        match cmd {
            GroupCmd::List => {
                let groups = cluster.list_groups().await?;
                if json {
                    let v: Vec<Value> = groups
                        .iter()
                        .map(|(g, s)| json!({"group": g, "state": s}))
                        .collect();
                    println!("{}", Value::Array(v));
                } else {
                    let rows: Vec<Vec<String>> =
                        groups.into_iter().map(|(g, s)| vec![g, s]).collect();
                    print_table(&["GROUP", "STATE"], &rows);
                }
            }
            GroupCmd::Describe { group } => {
                let info = cluster.describe_group(&group).await?;
                let committed = cluster.committed(&group, None).await?;
                let mut ends: BTreeMap<String, Vec<i64>> = BTreeMap::new();
                for (t, _) in committed.keys() {
                    if !ends.contains_key(t) {
                        ends.insert(
                            t.clone(),
                            cluster.list_offsets(t, OffsetSpec::Latest).await?,
                        );
                    }
                }
                let rows: Vec<(String, i32, i64, i64)> = committed
                    .iter()
                    .map(|((t, p), &o)| {
                        let end = ends
                            .get(t)
                            .and_then(|e| e.get(*p as usize))
                            .copied()
                            .unwrap_or(-1);
                        (t.clone(), *p, o, end)
                    })
                    .collect();
                let total_lag: i64 = rows.iter().map(|r| (r.3 - r.2).max(0)).sum();
                if json {
                    let parts: Vec<Value> = rows
                        .iter()
                        .map(|(t, p, o, e)| json!({"topic": t, "partition": p, "committed_offset": o, "log_end_offset": e, "lag": (e - o).max(0)}))
                        .collect();
                    println!(
                        "{}",
                        json!({"group": group, "state": info.state, "members": info.members.len(), "total_lag": total_lag, "partitions": parts})
                    );
                } else {
                    println!(
                        "group {group}  state {}  members {}  total lag {total_lag}",
                        info.state,
                        info.members.len()
                    );
                    let table: Vec<Vec<String>> = rows
                        .iter()
                        .map(|(t, p, o, e)| {
                            vec![
                                t.clone(),
                                p.to_string(),
                                o.to_string(),
                                e.to_string(),
                                (e - o).max(0).to_string(),
                            ]
                        })
                        .collect();
                    print_table(
                        &[
                            "TOPIC",
                            "PARTITION",
                            "CURRENT-OFFSET",
                            "LOG-END-OFFSET",
                            "LAG",
                        ],
                        &table,
                    );
                }
            }
            GroupCmd::ResetOffsets {
                group,
                topic,
                to_earliest,
                to_latest,
                to_offset,
            } => {
                let offsets = match (to_earliest, to_latest, to_offset) {
                    (true, _, _) => cluster.list_offsets(&topic, OffsetSpec::Earliest).await?,
                    (_, true, _) => cluster.list_offsets(&topic, OffsetSpec::Latest).await?,
                    (_, _, Some(o)) => vec![o; cluster.topic(&topic).await?.leaders.len()],
                    _ => {
                        return Err(ClientError::Invalid(
                            "say where to: --to-earliest, --to-latest or --to-offset N".into(),
                        ))
                    }
                };
                let map: BTreeMap<(String, i32), i64> = offsets
                    .iter()
                    .enumerate()
                    .map(|(p, &o)| ((topic.clone(), p as i32), o))
                    .collect();
                cluster.commit(&group, &map).await?;
                if json {
                    println!(
                        "{}",
                        json!({"group": group, "topic": topic, "offsets": offsets})
                    );
                } else {
                    println!("reset {group} on {topic}: {offsets:?}");
                }
            }
        }
        Ok(())
    })
}
