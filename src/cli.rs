//! The client commands of `strand` (in the spirit of Redpanda's `rpk`, with Kafka's config
//! names): `topic`, `produce`, `consume`, `group`, `cluster`. Each runs on one glommio
//! executor with the native client (`strand-client`), against any Kafka-compatible broker.
//! Tables by default, `--json` for scripts; errors say what went wrong and what to do.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{json, Value};
use strand_client::{
    ClientError, Cluster, Consumer, ConsumerConfig, OffsetSpec, Producer, ProducerConfig, StartAt,
};

#[derive(Args)]
pub struct Conn {
    /// Brokers to bootstrap from (`host:port[,host:port...]`).
    #[arg(
        long,
        env = "STRAND_BROKERS",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    brokers: String,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// A client setting by Kafka's name, repeatable: `-X security.protocol=SASL_SSL
    /// -X sasl.mechanism=SCRAM-SHA-256 -X sasl.username=alice -X sasl.password=...
    /// -X ssl.truststore.location=ca.pem` (`--config` is a topic's config in `topic create`).
    #[arg(short = 'X', long = "client-config", value_name = "KEY=VALUE", value_parser = parse_kv, global = true)]
    client_config: Vec<(String, String)>,
    /// A Kafka client properties file, as Kafka's tools take it; `-X` settings apply after it.
    #[arg(long, env = "STRAND_COMMAND_CONFIG", global = true)]
    command_config: Option<std::path::PathBuf>,
}

impl Conn {
    fn security(&self) -> Result<strand_client::ClientSecurity, ClientError> {
        let mut props = match &self.command_config {
            Some(p) => strand_client::ClientSecurity::read_properties_file(p)
                .map_err(ClientError::Invalid)?,
            None => Vec::new(),
        };
        props.extend(self.client_config.iter().cloned());
        strand_client::ClientSecurity::from_properties(&props).map_err(ClientError::Invalid)
    }
}

#[derive(Subcommand)]
pub enum TopicCmd {
    /// Create a topic.
    Create {
        name: String,
        #[arg(long, short = 'p', default_value_t = -1)]
        partitions: i32,
        /// Topic config, repeatable: `-c cleanup.policy=compact`.
        #[arg(long = "config", short = 'c', value_parser = parse_kv)]
        configs: Vec<(String, String)>,
    },
    /// List topics with their partition counts.
    List,
    /// Partitions, leaders, end offsets and configs of a topic.
    Describe { name: String },
    /// Delete a topic and its data.
    Delete { name: String },
    /// Move leadership back to each partition's preferred (first) replica, as
    /// `kafka-leader-election --election-type preferred` does; with `--unclean`, give a
    /// leaderless partition any live replica (it may lose acknowledged records).
    ElectLeaders {
        /// The topic (all partitions, or `--partition`); none: every topic.
        name: Option<String>,
        #[arg(long, requires = "name")]
        partition: Option<i32>,
        #[arg(long)]
        unclean: bool,
    },
    /// Move a partition's replicas (as `kafka-reassign-partitions --execute`): new replicas
    /// copy the log and join the ISR, then the removed ones are dropped; `--cancel` puts the
    /// replicas back as they were before the move in flight.
    Reassign {
        name: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
        /// The new replicas by node id, preferred leader first: `--replicas 2,3,4`.
        #[arg(long, value_delimiter = ',', required_unless_present = "cancel")]
        replicas: Vec<i32>,
        #[arg(long, conflicts_with = "replicas")]
        cancel: bool,
        /// Wait until the move has completed.
        #[arg(long, conflicts_with = "cancel")]
        wait: bool,
    },
    /// Partition moves in flight (of one topic, or of every topic).
    Reassignments { name: Option<String> },
    /// Set (`--set k=v`) or remove (`--delete k`) topic configs.
    AlterConfig {
        name: String,
        #[arg(long, value_parser = parse_kv)]
        set: Vec<(String, String)>,
        #[arg(long)]
        delete: Vec<String>,
    },
}

#[derive(Args)]
pub struct ProduceArgs {
    topic: String,
    /// One key for every line.
    #[arg(long, short = 'k')]
    key: Option<String>,
    /// Split each line at the first SEP into key and value (kafka-console-producer's
    /// `parse.key` with `key.separator`).
    #[arg(long)]
    key_separator: Option<String>,
    /// 0, 1 or all.
    #[arg(long, default_value = "all")]
    acks: String,
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    compression: String,
}

#[derive(Args)]
pub struct ConsumeArgs {
    pub(crate) topic: String,
    /// Start at the earliest offset (default: the latest, or the group's committed offset).
    #[arg(long)]
    from_beginning: bool,
    /// Join this consumer group (its partitions, from its committed offsets) and commit.
    #[arg(long, short = 'g')]
    pub(crate) group: Option<String>,
    /// Stop after this many records.
    #[arg(long, short = 'n')]
    pub(crate) num: Option<u64>,
    /// Stop at the end offsets seen at start.
    #[arg(long)]
    until_end: bool,
    /// Output per record: %t topic, %p partition, %o offset, %T timestamp, %k key, %v value,
    /// %d delivery count (--share), \n \t. Default "%v\n" (`--json`: one object per line).
    #[arg(long, short = 'f', default_value = "%v\\n")]
    pub(crate) format: String,
    /// Join --group as a share group (KIP-932): records are shared with the group's other
    /// consumers, each acknowledged after it is printed.
    #[arg(long, requires = "group")]
    pub(crate) share: bool,
    /// With --share: how each record is acknowledged — accept, release (back to the group)
    /// or reject.
    #[arg(long, default_value = "accept", requires = "share")]
    pub(crate) ack: String,
}

#[derive(Subcommand)]
pub enum ClusterCmd {
    /// Cluster id, controller, brokers (live / fenced or down), the metadata quorum (leader,
    /// term, each voter's lag) and each broker's metadata image digest.
    Info,
    /// A local cluster: N `strand serve` processes on 127.0.0.1 (configs, pid files, logs and
    /// data under DIR/node-N); prints `bootstrap: ...`, stops them all on Ctrl-C.
    Start {
        #[arg(long, default_value_t = 3)]
        nodes: u32,
        #[arg(long, default_value = "./strand-cluster")]
        dir: std::path::PathBuf,
        /// Shards (cores) per node.
        #[arg(long, default_value_t = 1)]
        cores_per_node: usize,
        /// Confines each node to cores, one list per node separated by `/`
        /// (`0-3/4-7/8-11`); a single list applies to every node [default: no confinement].
        #[arg(long)]
        node_cpus: Option<String>,
    },
    /// A development CA and a certificate for each node, for the cluster transport's mutual
    /// TLS: DIR/ca.pem, DIR/ca.key, DIR/node-N.pem, DIR/node-N.key. Production clusters use
    /// certificates from their own CA, issued for the DNS name `node-<node.id>`.
    Certs {
        /// Where the files go (created; existing files are not overwritten).
        #[arg(long)]
        out: std::path::PathBuf,
        /// The nodes' ids, e.g. `1,2,3`.
        #[arg(long, default_value = "1,2,3")]
        nodes: String,
    },
}

/// How long `strand topic reassign --wait` waits for a move to complete.
const REASSIGN_WAIT_S: u64 = 600;

/// Whether `topic`-`partition` has a move in flight.
async fn in_flight(cluster: &Cluster, topic: &str, partition: i32) -> Result<bool, ClientError> {
    let moves = cluster
        .list_partition_reassignments(Some((topic, partition + 1)))
        .await?;
    Ok(moves.iter().any(|(_, p, ..)| *p == partition))
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| format!("expected key=value, got {s:?}"))
}

/// Runs `f` on a fresh executor and turns its result into an exit code.
pub(crate) fn run<F, Fut>(conn: &Conn, f: F) -> ExitCode
where
    F: FnOnce(Cluster, bool) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), ClientError>> + 'static,
{
    let brokers = conn.brokers.clone();
    let json = conn.json;
    let security = match conn.security() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("strand: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("strand-cli")
        .spawn(move || async move {
            let cluster = Cluster::connect_secure(&brokers, "strand-cli", security)
                .await
                .map_err(|e| match e {
                    // Reached, but TLS or SASL refused us: say that, not "is it running?".
                    ClientError::Auth(_) | ClientError::Kafka { .. } => e,
                    e => ClientError::Invalid(format!(
                        "cannot reach the brokers at {brokers} ({e}) — is `strand serve` running? \
                     (--brokers / STRAND_BROKERS)"
                    )),
                })?;
            f(cluster, json).await
        })
        .map_err(|e| ClientError::Invalid(format!("cannot start an executor: {e}")))
        .and_then(|h| {
            h.join()
                .map_err(|e| ClientError::Invalid(format!("executor failed: {e}")))
        });
    match result.and_then(|r| r) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strand: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let s: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", s.join("  ").trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

pub fn topic(conn: Conn, cmd: TopicCmd) -> ExitCode {
    run(&conn, move |cluster, json| async move {
        match cmd {
            TopicCmd::Create {
                name,
                partitions,
                configs,
            } => {
                cluster.create_topic(&name, partitions, &configs).await?;
                let n = cluster.topic(&name).await?.leaders.len();
                if json {
                    println!(
                        "{}",
                        json!({"topic": name, "partitions": n, "created": true})
                    );
                } else {
                    println!("created topic {name} ({n} partitions)");
                }
            }
            TopicCmd::List => {
                let md = cluster.refresh(None).await?;
                if json {
                    let v: Vec<Value> = md
                        .topics
                        .values()
                        .map(|t| json!({"topic": t.name, "partitions": t.leaders.len(), "internal": t.internal}))
                        .collect();
                    println!("{}", Value::Array(v));
                } else {
                    let rows: Vec<Vec<String>> = md
                        .topics
                        .values()
                        .map(|t| vec![t.name.clone(), t.leaders.len().to_string()])
                        .collect();
                    print_table(&["TOPIC", "PARTITIONS"], &rows);
                }
            }
            TopicCmd::Describe { name } => {
                let info = cluster.topic(&name).await?;
                let start = cluster.list_offsets(&name, OffsetSpec::Earliest).await?;
                let end = cluster.list_offsets(&name, OffsetSpec::Latest).await?;
                let configs = cluster.topic_configs(&name).await?;
                if json {
                    let parts: Vec<Value> = (0..info.leaders.len())
                        .map(|p| json!({"partition": p, "leader": info.leaders[p], "replicas": info.replicas[p], "isr": info.isr[p], "log_start_offset": start[p], "high_watermark": end[p]}))
                        .collect();
                    let cfg: BTreeMap<&String, &Option<String>> =
                        configs.iter().map(|(k, (v, _))| (k, v)).collect();
                    println!(
                        "{}",
                        json!({"topic": name, "id": info.id, "partitions": parts, "configs": cfg})
                    );
                } else {
                    println!(
                        "topic {name}  id {}  partitions {}",
                        info.id,
                        info.leaders.len()
                    );
                    let rows: Vec<Vec<String>> = (0..info.leaders.len())
                        .map(|p| {
                            let ids = |v: &[i32]| {
                                v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
                            };
                            vec![
                                p.to_string(),
                                info.leaders[p].to_string(),
                                ids(&info.replicas[p]),
                                ids(&info.isr[p]),
                                start[p].to_string(),
                                end[p].to_string(),
                            ]
                        })
                        .collect();
                    print_table(
                        &[
                            "PARTITION",
                            "LEADER",
                            "REPLICAS",
                            "ISR",
                            "LOG-START",
                            "HIGH-WATERMARK",
                        ],
                        &rows,
                    );
                    println!();
                    let rows: Vec<Vec<String>> = configs
                        .iter()
                        .map(|(k, (v, set))| {
                            vec![
                                k.clone(),
                                v.clone().unwrap_or_else(|| "-".into()),
                                if *set { "topic" } else { "default" }.into(),
                            ]
                        })
                        .collect();
                    print_table(&["CONFIG", "VALUE", "SOURCE"], &rows);
                }
            }
            TopicCmd::ElectLeaders {
                name,
                partition,
                unclean,
            } => {
                let partitions = match (name, partition) {
                    (None, _) => None,
                    (Some(t), Some(p)) => Some(vec![(t, p)]),
                    (Some(t), None) => {
                        let count = cluster.topic(&t).await?.leaders.len() as i32;
                        Some((0..count).map(|p| (t.clone(), p)).collect())
                    }
                };
                let outcomes = cluster.elect_leaders(partitions, unclean).await?;
                let not_needed = strand_wire::ErrorCode::ElectionNotNeeded.code();
                let mut failed = 0;
                let mut rows = Vec::new();
                let mut values = Vec::new();
                for (topic, p, outcome) in &outcomes {
                    let result = match outcome {
                        Ok(()) => "elected".to_string(),
                        Err(e) if e.code() == Some(not_needed) => "already led".to_string(),
                        Err(e) => {
                            failed += 1;
                            e.to_string()
                        }
                    };
                    values.push(json!({"topic": topic, "partition": p, "result": result}));
                    rows.push(vec![topic.clone(), p.to_string(), result]);
                }
                if json {
                    println!("{}", Value::Array(values));
                } else if rows.is_empty() {
                    println!("no partition needed an election");
                } else {
                    print_table(&["TOPIC", "PARTITION", "RESULT"], &rows);
                }
                if failed > 0 {
                    return Err(ClientError::Invalid(format!(
                        "{failed} of {} partitions were not elected",
                        outcomes.len()
                    )));
                }
            }
            TopicCmd::Reassign {
                name,
                partition,
                replicas,
                cancel,
                wait,
            } => {
                let target = (!cancel).then_some(replicas);
                let moves = vec![(name.clone(), partition, target.clone())];
                for (_, _, outcome) in cluster.alter_partition_reassignments(moves).await? {
                    outcome?;
                }
                let started = std::time::Instant::now();
                while wait && in_flight(&cluster, &name, partition).await? {
                    if started.elapsed() > std::time::Duration::from_secs(REASSIGN_WAIT_S) {
                        return Err(ClientError::Invalid(format!(
                            "{name}-{partition} is still moving after {REASSIGN_WAIT_S} s \
                             (see `strand topic reassignments {name}`)"
                        )));
                    }
                    glommio::timer::sleep(std::time::Duration::from_millis(500)).await;
                }
                let state = match (&target, wait) {
                    (None, _) => "cancelled",
                    (Some(_), true) => "completed",
                    (Some(_), false) => "started",
                };
                if json {
                    println!(
                        "{}",
                        json!({"topic": name, "partition": partition, "replicas": target,
                               "reassignment": state})
                    );
                } else {
                    println!("reassignment of {name}-{partition} {state}");
                }
            }
            TopicCmd::Reassignments { name } => {
                let topic = match &name {
                    Some(t) => Some((t.as_str(), cluster.topic(t).await?.leaders.len() as i32)),
                    None => None,
                };
                let moves = cluster.list_partition_reassignments(topic).await?;
                let ids = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
                if json {
                    let values: Vec<Value> = moves
                        .iter()
                        .map(|(t, p, r, a, x)| {
                            json!({"topic": t, "partition": p, "replicas": r, "adding": a,
                                   "removing": x})
                        })
                        .collect();
                    println!("{}", Value::Array(values));
                } else if moves.is_empty() {
                    println!("no partition reassignments in flight");
                } else {
                    let rows: Vec<Vec<String>> = moves
                        .iter()
                        .map(|(t, p, r, a, x)| {
                            vec![t.clone(), p.to_string(), ids(r), ids(a), ids(x)]
                        })
                        .collect();
                    print_table(
                        &["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
                        &rows,
                    );
                }
            }
            TopicCmd::Delete { name } => {
                cluster.delete_topic(&name).await?;
                if json {
                    println!("{}", json!({"topic": name, "deleted": true}));
                } else {
                    println!("deleted topic {name}");
                }
            }
            TopicCmd::AlterConfig { name, set, delete } => {
                if set.is_empty() && delete.is_empty() {
                    return Err(ClientError::Invalid(
                        "nothing to change: give --set k=v or --delete k".into(),
                    ));
                }
                let mut changes: Vec<(String, Option<String>)> =
                    set.into_iter().map(|(k, v)| (k, Some(v))).collect();
                changes.extend(delete.into_iter().map(|k| (k, None)));
                cluster.alter_topic_configs(&name, &changes).await?;
                if json {
                    println!("{}", json!({"topic": name, "altered": changes.len()}));
                } else {
                    println!("altered {} config(s) of topic {name}", changes.len());
                }
            }
        }
        Ok(())
    })
}

pub fn produce(conn: Conn, args: ProduceArgs) -> ExitCode {
    run(&conn, move |cluster, json| async move {
        let acks = match args.acks.as_str() {
            "all" | "-1" => -1,
            "1" => 1,
            "0" => 0,
            other => {
                return Err(ClientError::Invalid(format!(
                    "--acks must be 0, 1 or all, got {other:?}"
                )))
            }
        };
        cluster.topic(&args.topic).await?;
        let compression =
            strand_wire::compression::parse_codec(&args.compression).ok_or_else(|| {
                ClientError::Invalid(format!(
                    "--compression must be none, gzip, snappy, lz4 or zstd, got {:?}",
                    args.compression
                ))
            })?;
        let config = ProducerConfig {
            acks,
            compression,
            linger_ms: args.linger_ms,
            ..ProducerConfig::default()
        };
        let producer = Producer::new(cluster, config).await?;
        let mut deliveries = Vec::new();
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let line = line.map_err(ClientError::Io)?;
            let (key, value) = match (&args.key_separator, &args.key) {
                (Some(sep), _) => match line.split_once(sep.as_str()) {
                    Some((k, v)) => (Some(k.to_string()), v.to_string()),
                    None => (None, line),
                },
                (None, Some(k)) => (Some(k.clone()), line),
                (None, None) => (None, line),
            };
            let d = producer
                .send(
                    &args.topic,
                    key.as_deref().map(str::as_bytes),
                    value.as_bytes(),
                )
                .await?;
            deliveries.push(d);
        }
        producer.flush().await;
        let mut per_partition: BTreeMap<i32, u64> = BTreeMap::new();
        for d in deliveries {
            let (p, _) = d.wait().await?;
            *per_partition.entry(p).or_default() += 1;
        }
        let total: u64 = per_partition.values().sum();
        if json {
            println!(
                "{}",
                json!({"topic": args.topic, "records": total, "partitions": per_partition})
            );
        } else {
            eprintln!("produced {total} record(s) to {}", args.topic);
        }
        Ok(())
    })
}

/// One consumed record as `consume` prints it: `format` (or a JSON object with `json`); a
/// share group's delivery count, if given, as `%d` / `delivery_count`.
pub(crate) fn render(
    format: &str,
    json: bool,
    r: &strand_client::consumer::Record,
    delivery_count: Option<i16>,
) -> String {
    let text =
        |b: &Option<bytes::Bytes>| b.as_ref().map(|v| String::from_utf8_lossy(v).into_owned());
    if json {
        let mut v = json!({"topic": r.topic, "partition": r.partition, "offset": r.offset,
            "timestamp": r.timestamp_ms, "key": text(&r.key), "value": text(&r.value)});
        if let Some(c) = delivery_count {
            v["delivery_count"] = json!(c);
        }
        return format!("{v}\n");
    }
    format
        .replace("\\n", "\n")
        .replace("\\t", "\t")
        .replace("%t", &r.topic)
        .replace("%p", &r.partition.to_string())
        .replace("%o", &r.offset.to_string())
        .replace("%T", &r.timestamp_ms.to_string())
        .replace(
            "%d",
            &delivery_count.map_or(String::new(), |c| c.to_string()),
        )
        .replace("%k", &text(&r.key).unwrap_or_default())
        .replace("%v", &text(&r.value).unwrap_or_default())
}

pub fn consume(conn: Conn, args: ConsumeArgs) -> ExitCode {
    if args.share {
        return crate::share_consume::consume(conn, args);
    }
    run(&conn, move |cluster, json| async move {
        let start = if args.from_beginning {
            if args.group.is_some() {
                StartAt::Committed
            } else {
                StartAt::Earliest
            }
        } else if args.group.is_some() {
            StartAt::Committed
        } else {
            StartAt::Latest
        };
        let config = ConsumerConfig {
            group: args.group.clone(),
            ..ConsumerConfig::default()
        };
        let mut consumer = Consumer::new(cluster, config);
        if args.group.is_some() {
            consumer.subscribe(&[args.topic.as_str()]).await?;
        } else {
            consumer.assign(&args.topic, None, start).await?;
        }
        let out = std::io::stdout();
        let mut out = out.lock();
        let mut seen = 0u64;
        loop {
            if args.num.is_some_and(|n| seen >= n) || (args.until_end && consumer.at_end()) {
                break;
            }
            for r in consumer.poll().await? {
                if args.num.is_some_and(|n| seen >= n) {
                    consumer.seek(&r.topic, r.partition, r.offset);
                    break;
                }
                seen += 1;
                let line = render(&args.format, json, &r, None);
                out.write_all(line.as_bytes()).map_err(ClientError::Io)?;
            }
            out.flush().map_err(ClientError::Io)?;
            if args.group.is_some() {
                consumer.commit().await?;
            }
        }
        consumer.close().await
    })
}

pub fn cluster(conn: Conn, cmd: ClusterCmd) -> ExitCode {
    if let ClusterCmd::Start {
        nodes,
        dir,
        cores_per_node,
        node_cpus,
    } = cmd
    {
        return crate::local_cluster::start(&dir, nodes, cores_per_node, node_cpus.as_deref());
    }
    if let ClusterCmd::Certs { out, nodes } = cmd {
        return match crate::certs::write_dev_certs(&out, &nodes) {
            Ok(written) => {
                for path in written {
                    println!("wrote {}", path.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("strand cluster certs: {e}");
                ExitCode::from(1)
            }
        };
    }
    run(&conn, move |cluster, json| {
        crate::cluster_info::info(cluster, json)
    })
}
