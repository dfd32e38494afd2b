//! The brokers a bench can start itself: Strand (`strand serve`, the same binary, in a temp
//! directory) and Apache Kafka 4.x (single-node KRaft, jars from Maven Central). Both keep
//! their data under the bench's work directory, so they share a disk. Dropping one stops it.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Maven project that lists Kafka's jars (written to a temp dir when fetching).
const KAFKA_POM: &str = include_str!("../../bench/kafka/pom.xml");
const START_TIMEOUT: Duration = Duration::from_secs(90);
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A broker process started by the bench.
pub struct Spawned {
    child: Child,
    pub bootstrap: String,
    pub log_path: PathBuf,
    /// What it is, for reports: `strand (embedded)`, `apache-kafka 4.x (KRaft)`.
    pub description: String,
}

impl Spawned {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then SIGKILL if it does not exit in time.
    pub fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
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
    };
    s.wait_listening(port, Duration::ZERO)?;
    Ok(s)
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

/// Formats and starts a single-node KRaft Kafka with its data in `dir/data`.
pub fn start_kafka(
    libs: &Path,
    dir: &Path,
    heap: &str,
    cpus: Option<&[usize]>,
) -> Result<Spawned, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (port, controller) = (free_port()?, free_port()?);
    let data = dir.join("data");
    let props = dir.join("kafka.properties");
    let text = format!(
        "process.roles=broker,controller\nnode.id=1\n\
         controller.quorum.voters=1@127.0.0.1:{controller}\n\
         listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
         controller.listener.names=CONTROLLER\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
         log.dirs={}\nnum.partitions=1\noffsets.topic.replication.factor=1\n\
         offsets.topic.num.partitions=4\ntransaction.state.log.replication.factor=1\n\
         transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n",
        data.display()
    );
    std::fs::write(&props, text).map_err(|e| format!("{}: {e}", props.display()))?;
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
    let props_s = props.display().to_string();
    java(&[
        "kafka.tools.StorageTool",
        "format",
        "-t",
        &id,
        "-c",
        &props_s,
    ])?;
    let log_path = dir.join("kafka.log");
    let (out, err) = log_file(&log_path)?;
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
    confine(&mut cmd, cpus);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start kafka: {e}"))?;
    let version = kafka_version(libs).unwrap_or_else(|| "4.x".into());
    let mut s = Spawned {
        child,
        bootstrap: format!("127.0.0.1:{port}"),
        log_path,
        description: format!("apache-kafka {version} (KRaft, single node)"),
    };
    // The broker accepts connections a moment before it has registered with its controller.
    s.wait_listening(port, Duration::from_secs(2))?;
    Ok(s)
}
