//! The brokers a bench can start itself: Strand (`strand serve`, the same binary, in a temp
//! directory; `strand cluster start` for several nodes) and Apache Kafka 4.x (KRaft, one
//! process per node in combined broker+controller mode, jars from Maven Central). Both keep
//! their data under the bench's work directory, so they share a disk. Dropping one stops it.
//! With several nodes, node k of either system runs on the same cores ([`node_slices`]).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Maven project that lists Kafka's jars (written to a temp dir when fetching).
const KAFKA_POM: &str = include_str!("../../bench/kafka/pom.xml");
const START_TIMEOUT: Duration = Duration::from_secs(90);
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// `strand cluster start` SIGTERMs its nodes, then waits for them (20 s, then SIGKILL).
const CLUSTER_STOP_TIMEOUT: Duration = Duration::from_secs(70);

/// A broker process started by the bench.
pub struct Spawned {
    child: Child,
    pub bootstrap: String,
    pub log_path: PathBuf,
    /// What it is, for reports: `strand (embedded)`, `apache-kafka 4.x (KRaft)`.
    pub description: String,
    stop_timeout: Duration,
}

impl Spawned {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then SIGKILL if it does not exit in time.
    pub fn stop(&mut self) {
        self.terminate();
        self.await_exit();
    }

    /// Sends SIGTERM (once it may still run).
    fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
    }

    /// Waits for the exit after [`Spawned::terminate`]; SIGKILL after the stop timeout.
    fn await_exit(&mut self) {
        let deadline = Instant::now() + self.stop_timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn wait_listening(&mut self, port: u16, settle: Duration) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                std::thread::sleep(settle);
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited ({status}) before listening; its log: {}\n{}",
                    self.description,
                    self.log_path.display(),
                    tail(&self.log_path)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "{} did not listen on port {port} within {} s",
            self.description,
            START_TIMEOUT.as_secs()
        ))
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stops every process at once (SIGTERM to all, then waits): a Kafka node stopped alone
/// waits for the others' controllers, so one at a time would add their timeouts.
pub fn stop_all(procs: &mut [Spawned]) {
    for p in procs.iter_mut() {
        p.terminate();
    }
    for p in procs.iter_mut() {
        p.await_exit();
    }
}

/// The bootstrap list of several started nodes.
pub fn bootstrap_of(procs: &[Spawned]) -> String {
    procs
        .iter()
        .map(|p| p.bootstrap.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// The cores of each of `nodes` nodes: equal disjoint slices of the brokers' cores when there
/// are at least as many cores as nodes (left-over cores unused), else all of them for every
/// node. Node k of Strand and of Kafka get the same slice.
pub fn node_slices(cpus: Option<&[usize]>, nodes: usize) -> Vec<Option<Vec<usize>>> {
    let nodes = nodes.max(1);
    match cpus {
        None => vec![None; nodes],
        Some(c) if c.len() < nodes => vec![Some(c.to_vec()); nodes],
        Some(c) => {
            let each = c.len() / nodes;
            c.chunks(each)
                .take(nodes)
                .map(|s| Some(s.to_vec()))
                .collect()
        }
    }
}

/// "node 1 on cpus 0-3, node 2 on cpus 4-7" for reports.
pub fn describe_slices(slices: &[Option<Vec<usize>>]) -> String {
    slices
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Some(c) => format!(
                "node {} on cpus {}",
                i + 1,
                strand_tuning::cpus::format_list(c)
            ),
            None => format!("node {} on any core", i + 1),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.len().saturating_sub(3000);
    text.get(start..).unwrap_or("").to_string()
}

pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

fn log_file(path: &Path) -> Result<(Stdio, Stdio), String> {
    let f = std::fs::File::create(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let g = f
        .try_clone()
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    Ok((Stdio::from(f), Stdio::from(g)))
}

/// Runs the child on `cpus` only (set between fork and exec, before it starts a thread).
fn confine(cmd: &mut Command, cpus: Option<&[usize]>) {
    use std::os::unix::process::CommandExt;
    if let Some(cpus) = cpus {
        let cpus = cpus.to_vec();
        // SAFETY: the closure only makes one async-signal-safe syscall (sched_setaffinity)
        // on a set built from memory allocated before the fork.
        unsafe {
            cmd.pre_exec(move || strand_tuning::cpus::set_affinity(0, &cpus));
        }
    }
}

/// Starts `strand_bin serve` on a free port with its data in `dir/data`; `config` entries
/// go to a TOML config file (`"log.flush.interval.ms" = 100`).
pub fn start_strand(
    strand_bin: &Path,
    dir: &Path,
    cores: Option<usize>,
    config: &[(&str, String)],
    cpus: Option<&[usize]>,
) -> Result<Spawned, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let port = free_port()?;
    let bootstrap = format!("127.0.0.1:{port}");
    let log_path = dir.join("strand.log");
    let (out, err) = log_file(&log_path)?;
    let mut cmd = Command::new(strand_bin);
    cmd.arg("serve")
        .arg("--listen")
        .arg(&bootstrap)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env_remove("STRAND_CONFIG")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    if let Some(c) = cores {
        cmd.arg("--cores").arg(c.to_string());
    }
    if !config.is_empty() {
        let path = dir.join("strand.toml");
        let text: String = config
            .iter()
            .map(|(k, v)| format!("\"{k}\" = {v}\n"))
            .collect();
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        cmd.arg("--config").arg(path);
    }
    confine(&mut cmd, cpus);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {} serve: {e}", strand_bin.display()))?;
    let mut s = Spawned {
        child,
        bootstrap,
        log_path,
        description: "strand (embedded)".into(),
        stop_timeout: STOP_TIMEOUT,
    };
    s.wait_listening(port, Duration::ZERO)?;
    Ok(s)
}

/// Starts `strand_bin cluster start --nodes N` in `dir` (node k confined to slice k of
/// `cpus`, [`node_slices`]) and waits for its `bootstrap:` line. Returns the process (whose
/// SIGTERM stops every node) and node 1's admin API address.
pub fn start_strand_cluster(
    strand_bin: &Path,
    dir: &Path,
    nodes: u32,
    cores_per_node: Option<usize>,
    cpus: Option<&[usize]>,
) -> Result<(Spawned, Option<String>), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let slices = node_slices(cpus, nodes as usize);
    let cores = cores_per_node
        .or_else(|| slices[0].as_ref().map(Vec::len))
        .unwrap_or(1);
    let log_path = dir.join("cluster-start.log");
    let (out, err) = log_file(&log_path)?;
    let cluster_dir = dir.join("cluster");
    let mut cmd = Command::new(strand_bin);
    cmd.arg("cluster")
        .arg("start")
        .arg("--nodes")
        .arg(nodes.to_string())
        .arg("--dir")
        .arg(&cluster_dir)
        .arg("--cores-per-node")
        .arg(cores.to_string())
        .env_remove("STRAND_CONFIG")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    if slices.iter().all(Option::is_some) {
        let lists: Vec<String> = slices
            .iter()
            .flatten()
            .map(|c| strand_tuning::cpus::format_list(c))
            .collect();
        cmd.arg("--node-cpus").arg(lists.join("/"));
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {} cluster start: {e}", strand_bin.display()))?;
    let mut s = Spawned {
        child,
        bootstrap: String::new(),
        log_path,
        description: format!(
            "strand, {nodes} nodes (strand cluster start, {cores} shard(s) each; {})",
            describe_slices(&slices)
        ),
        stop_timeout: CLUSTER_STOP_TIMEOUT,
    };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let text = std::fs::read_to_string(&s.log_path).unwrap_or_default();
        if let Some(b) = text.lines().find_map(|l| l.strip_prefix("bootstrap: ")) {
            s.bootstrap = b.trim().to_string();
            break;
        }
        if let Ok(Some(status)) = s.child.try_wait() {
            return Err(format!(
                "strand cluster start exited ({status}); its output: {}\n{}",
                s.log_path.display(),
                tail(&s.log_path)
            ));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "strand cluster start: no bootstrap line within {} s; its output: {}",
                START_TIMEOUT.as_secs(),
                s.log_path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let admin = std::fs::read_to_string(cluster_dir.join("node-1/strand.toml"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("\"admin.listen\" = "))
                .map(|v| v.trim().trim_matches('"').to_string())
        });
    Ok((s, admin))
}

/// The node processes of a cluster [`start_strand_cluster`] started in `dir` (their pid files;
/// a node whose file cannot be read is left out).
pub fn strand_cluster_pids(dir: &Path, nodes: u32) -> Vec<u32> {
    (1..=nodes)
        .filter_map(|n| {
            std::fs::read_to_string(dir.join(format!("cluster/node-{n}/pid")))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
        .collect()
}

/// The command that fetches Kafka's jars into `libs`.
pub fn kafka_fetch_command(libs: &Path) -> String {
    format!(
        "mvn -q -B -f bench/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory={}",
        libs.display()
    )
}

fn has_kafka_jars(libs: &Path) -> bool {
    std::fs::read_dir(libs).is_ok_and(|d| {
        d.flatten().any(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.starts_with("kafka_") && n.ends_with(".jar")
        })
    })
}

/// Makes sure `libs` holds Kafka's jars: fetches them with Maven if it is installed, else
/// says what to run.
pub fn ensure_kafka_libs(libs: &Path, work: &Path) -> Result<(), String> {
    if has_kafka_jars(libs) {
        return Ok(());
    }
    let which = |tool: &str| {
        Command::new(tool)
            .arg("-version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    };
    if !which("mvn") {
        return Err(format!(
            "Apache Kafka's jars are not in {} and Maven (mvn) is not installed. Install Maven and \
             a JDK (17+), then run from a Strand checkout:\n  {}\nor pass --kafka-libs DIR, or \
             --kafka-bootstrap HOST:PORT for a Kafka you started yourself",
            libs.display(),
            kafka_fetch_command(libs)
        ));
    }
    let pom_dir = work.join("kafka-pom");
    std::fs::create_dir_all(&pom_dir).map_err(|e| format!("{}: {e}", pom_dir.display()))?;
    let pom = pom_dir.join("pom.xml");
    std::fs::write(&pom, KAFKA_POM).map_err(|e| format!("{}: {e}", pom.display()))?;
    let abs = std::path::absolute(libs).unwrap_or_else(|_| libs.to_path_buf());
    eprintln!(
        "fetching Apache Kafka's jars from Maven Central into {}",
        abs.display()
    );
    let status = Command::new("mvn")
        .args(["-q", "-B", "-f"])
        .arg(&pom)
        .arg("dependency:copy-dependencies")
        .arg(format!("-DoutputDirectory={}", abs.display()))
        .status()
        .map_err(|e| format!("cannot run mvn: {e}"))?;
    if !status.success() || !has_kafka_jars(libs) {
        return Err(format!(
            "mvn could not fetch Kafka's jars ({status}); try: {}",
            kafka_fetch_command(libs)
        ));
    }
    Ok(())
}

/// The Kafka version of the jars (`kafka_2.13-4.1.0.jar` -> `4.1.0`).
pub fn kafka_version(libs: &Path) -> Option<String> {
    std::fs::read_dir(libs).ok()?.flatten().find_map(|e| {
        let n = e.file_name().to_string_lossy().to_string();
        let rest = n.strip_prefix("kafka_")?.strip_suffix(".jar")?;
        let (_, v) = rest.split_once('-')?;
        (!v.contains('-')).then(|| v.to_string())
    })
}

/// One Kafka node's properties: combined broker+controller, `nodes` voters; the internal
/// topics replicated as Kafka's defaults have it (3 / 3 / min ISR 2) where there are nodes
/// for it.
fn kafka_properties(
    node: u32,
    nodes: u32,
    voters: &str,
    port: u16,
    controller: u16,
    data: &Path,
) -> String {
    let rf = nodes.min(3);
    let min_isr = nodes.min(2);
    format!(
        "process.roles=broker,controller\nnode.id={node}\n\
         controller.quorum.voters={voters}\n\
         listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
         controller.listener.names=CONTROLLER\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
         log.dirs={}\nnum.partitions=1\noffsets.topic.replication.factor={rf}\n\
         offsets.topic.num.partitions=4\ntransaction.state.log.replication.factor={rf}\n\
         transaction.state.log.min.isr={min_isr}\ngroup.initial.rebalance.delay.ms=0\n",
        data.display()
    )
}

/// Formats and starts a KRaft Kafka of `nodes` processes (combined broker+controller each,
/// node k in `dir/node-k` confined to slice k of `cpus`, [`node_slices`]).
pub fn start_kafka(
    libs: &Path,
    dir: &Path,
    nodes: u32,
    heap: &str,
    cpus: Option<&[usize]>,
) -> Result<Vec<Spawned>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let nodes = nodes.max(1);
    let mut ports = Vec::new();
    for _ in 0..nodes {
        ports.push((free_port()?, free_port()?));
    }
    let voters = ports
        .iter()
        .enumerate()
        .map(|(i, (_, c))| format!("{}@127.0.0.1:{c}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let cp = format!("{}/*", libs.display());
    let java = |args: &[&str]| -> Result<String, String> {
        let out = Command::new("java")
            .arg("-cp")
            .arg(&cp)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run java (a JDK 17+ is needed for Kafka): {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "java {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    };
    let id = java(&["kafka.tools.StorageTool", "random-uuid"])?;
    let id = id.lines().last().unwrap_or("").trim().to_string();
    let version = kafka_version(libs).unwrap_or_else(|| "4.x".into());
    let slices = node_slices(cpus, nodes as usize);
    let mut started = Vec::new();
    for (i, ((port, controller), slice)) in ports.iter().zip(&slices).enumerate() {
        let node = i as u32 + 1;
        // One node keeps the single-node layout (`dir/data`) of earlier reports.
        let node_dir = if nodes == 1 {
            dir.to_path_buf()
        } else {
            dir.join(format!("node-{node}"))
        };
        if let Err(e) = std::fs::create_dir_all(&node_dir) {
            stop_all(&mut started);
            return Err(format!("cannot create {}: {e}", node_dir.display()));
        }
        let props = node_dir.join("kafka.properties");
        let text = kafka_properties(
            node,
            nodes,
            &voters,
            *port,
            *controller,
            &node_dir.join("data"),
        );
        let props_s = props.display().to_string();
        let prepared = std::fs::write(&props, text)
            .map_err(|e| format!("{}: {e}", props.display()))
            .and_then(|()| {
                java(&[
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    &id,
                    "-c",
                    &props_s,
                ])
            });
        let log_path = node_dir.join("kafka.log");
        let (out, err) = match prepared.and_then(|_| log_file(&log_path)) {
            Ok(files) => files,
            Err(e) => {
                stop_all(&mut started);
                return Err(e);
            }
        };
        let mut cmd = Command::new("java");
        cmd.arg(format!("-Xmx{heap}"))
            .arg(format!("-Xms{heap}"))
            .arg("-cp")
            .arg(&cp)
            .arg("kafka.Kafka")
            .arg(&props)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        confine(&mut cmd, slice.as_deref());
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                stop_all(&mut started);
                return Err(format!("cannot start kafka: {e}"));
            }
        };
        let description = if nodes == 1 {
            format!("apache-kafka {version} (KRaft, single node)")
        } else {
            format!(
                "apache-kafka {version} (KRaft, {nodes} nodes, broker+controller each; {})",
                describe_slices(&slices)
            )
        };
        started.push(Spawned {
            child,
            bootstrap: format!("127.0.0.1:{port}"),
            log_path,
            description,
            stop_timeout: STOP_TIMEOUT,
        });
    }
    // The brokers accept connections a moment before they have registered with the
    // controller quorum (the bench's topic creation retries until all have).
    for (s, (port, _)) in started.iter_mut().zip(&ports) {
        if let Err(e) = s.wait_listening(*port, Duration::from_secs(2)) {
            stop_all(&mut started);
            return Err(e);
        }
    }
    Ok(started)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_get_disjoint_slices_when_there_are_cores_for_them() {
        assert_eq!(node_slices(None, 3), vec![None, None, None]);
        assert_eq!(node_slices(Some(&[0]), 3), vec![Some(vec![0]); 3]);
        assert_eq!(
            node_slices(Some(&[0, 1, 2, 3, 4, 5, 6]), 3),
            vec![Some(vec![0, 1]), Some(vec![2, 3]), Some(vec![4, 5])]
        );
        assert_eq!(node_slices(Some(&[4, 5]), 1), vec![Some(vec![4, 5])]);
        assert_eq!(
            describe_slices(&node_slices(Some(&[0, 1]), 2)),
            "node 1 on cpus 0, node 2 on cpus 1"
        );
    }

    #[test]
    fn kafka_nodes_share_the_voters_and_replicate_internal_topics() {
        let p = kafka_properties(2, 3, "1@h:1,2@h:2,3@h:3", 9092, 9093, Path::new("/d"));
        assert!(p.contains("node.id=2\n"));
        assert!(p.contains("controller.quorum.voters=1@h:1,2@h:2,3@h:3\n"));
        assert!(p.contains("offsets.topic.replication.factor=3\n"));
        assert!(p.contains("transaction.state.log.min.isr=2\n"));
        let one = kafka_properties(1, 1, "1@h:1", 9092, 9093, Path::new("/d"));
        assert!(one.contains("offsets.topic.replication.factor=1\n"));
        assert!(one.contains("transaction.state.log.min.isr=1\n"));
    }
}
