//! `strand cluster start --nodes N [--dir DIR]`: a local cluster of N `strand serve` processes
//! on 127.0.0.1, for users trying a cluster and for tests.
//!
//! Under DIR: `certs/` (a development CA and node certificates, made once), and per node
//! `node-N/strand.toml` (its whole configuration: ports, data directory, cluster settings),
//! `node-N/pid` (written by the node itself, `pid.file`), `node-N/strand.log` and
//! `node-N/data/`. A second start in the same DIR reuses the files, so the cluster comes back
//! with its data. Prints `bootstrap: HOST:PORT,...` once every node accepts connections, then
//! waits for Ctrl-C (SIGINT) or SIGTERM and stops every node named by a pid file — also one a
//! person restarted by hand with `strand serve --config DIR/node-N/strand.toml`.

use std::io;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// How long nodes get to accept connections, and to stop.
const START_WAIT: Duration = Duration::from_secs(60);
const STOP_WAIT: Duration = Duration::from_secs(20);

fn free_tcp_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn free_udp_port() -> io::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Whether `port` is free on 127.0.0.1 for both UDP (the QUIC cluster endpoint) and TCP (its
/// liveness tripwire listener, `cluster::tripwire`).
fn free_for_both(port: u16) -> bool {
    UdpSocket::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A cluster port: free for UDP and TCP, and below the kernel's ephemeral range when it can
/// be (inside it, any outgoing TCP connection may take the port before the node binds its
/// tripwire listener; seen in a test: the node then runs without one).
fn free_cluster_port() -> io::Result<u16> {
    const LOWEST: u32 = 10_000;
    let ephemeral_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    if ephemeral_from > LOWEST + 100 {
        let span = ephemeral_from - LOWEST;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id().wrapping_mul(2_654_435_761);
        for i in 0..1_000u32 {
            let port = LOWEST + seed.wrapping_add(i.wrapping_mul(7_919)) % span;
            if free_for_both(port as u16) {
                return Ok(port as u16);
            }
        }
    }
    for _ in 0..100 {
        let port = free_udp_port()?;
        if free_for_both(port) {
            return Ok(port);
        }
    }
    free_udp_port()
}

/// The client address in an existing node config (`listen = "..."`).
fn listen_of(toml: &str) -> Option<String> {
    toml.lines()
        .find_map(|l| l.strip_prefix("listen = "))
        .map(|v| v.trim().trim_matches('"').to_string())
}

/// Writes the node configs (first start) or reads them back (later starts); returns each
/// node's (config path, client address).
fn prepare(dir: &Path, nodes: u32, cores: usize) -> io::Result<Vec<(PathBuf, String)>> {
    std::fs::create_dir_all(dir)?;
    let certs = dir.join("certs");
    if !certs.join("ca.pem").exists() {
        let ids: Vec<String> = (1..=nodes).map(|n| n.to_string()).collect();
        crate::certs::write_dev_certs(&certs, &ids.join(","))?;
    }
    let existing: Vec<bool> = (1..=nodes)
        .map(|n| dir.join(format!("node-{n}/strand.toml")).exists())
        .collect();
    if existing.iter().any(|e| *e) && !existing.iter().all(|e| *e) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} holds configs for some of the {nodes} nodes only: use the node count it was made with, or another --dir",
                dir.display()
            ),
        ));
    }
    let mut out = Vec::new();
    if existing.iter().all(|e| *e) {
        for n in 1..=nodes {
            let path = dir.join(format!("node-{n}/strand.toml"));
            let text = std::fs::read_to_string(&path)?;
            let listen = listen_of(&text).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: no listen line", path.display()),
                )
            })?;
            out.push((path, listen));
        }
        return Ok(out);
    }
    let voters = (1..=nodes)
        .map(|n| Ok(format!("{n}@127.0.0.1:{}", free_cluster_port()?)))
        .collect::<io::Result<Vec<String>>>()?
        .join(",");
    let cluster_id = format!("local-{}", std::process::id());
    let abs = |p: PathBuf| -> String { p.to_string_lossy().into_owned() };
    for n in 1..=nodes {
        let node_dir = dir.join(format!("node-{n}"));
        std::fs::create_dir_all(&node_dir)?;
        let listen = format!("127.0.0.1:{}", free_tcp_port()?);
        let admin = format!("127.0.0.1:{}", free_tcp_port()?);
        let text = format!(
            "# strand cluster start: node {n} of {nodes}\n\
             listen = \"{listen}\"\n\
             data_dir = \"{data}\"\n\
             cores = {cores}\n\
             \"admin.listen\" = \"{admin}\"\n\
             \"pid.file\" = \"{pid}\"\n\
             \"node.id\" = {n}\n\
             \"controller.quorum.voters\" = \"{voters}\"\n\
             \"cluster.id\" = \"{cluster_id}\"\n\
             \"cluster.tls.ca.location\" = \"{ca}\"\n\
             \"cluster.tls.certificate.location\" = \"{cert}\"\n\
             \"cluster.tls.key.location\" = \"{key}\"\n",
            data = abs(node_dir.join("data")),
            pid = abs(node_dir.join("pid")),
            ca = abs(certs.join("ca.pem")),
            cert = abs(certs.join(format!("node-{n}.pem"))),
            key = abs(certs.join(format!("node-{n}.key"))),
        );
        let path = node_dir.join("strand.toml");
        std::fs::write(&path, text)?;
        out.push((path, listen));
    }
    Ok(out)
}

fn pid_of(dir: &Path, n: u32) -> Option<i32> {
    std::fs::read_to_string(dir.join(format!("node-{n}/pid")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether `pid` runs a `strand serve` (a zombie counts as gone; so does a reused pid now
/// running something else, which must never be signalled).
fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    if state == Some("Z") {
        return false;
    }
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| c.split(|b| *b == 0).any(|arg| arg == b"serve"))
        .unwrap_or(false)
}

/// Blocks SIGINT and SIGTERM in this thread (before any child or thread starts) and returns
/// the set to wait on.
fn block_stop_signals() -> io::Result<libc::sigset_t> {
    // SAFETY: plain libc signal-set manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(set)
    }
}

/// `--node-cpus`: one core list per node (`0-3/4-7`), or one list for all of them.
fn node_cpus(spec: Option<&str>, nodes: u32) -> io::Result<Vec<Option<Vec<usize>>>> {
    let Some(spec) = spec else {
        return Ok(vec![None; nodes as usize]);
    };
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let lists = spec
        .split('/')
        .map(|l| strand_tuning::cpus::parse_list(l.trim()))
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| invalid(format!("--node-cpus {spec:?}: {e}")))?;
    match lists.len() {
        1 => Ok(vec![Some(lists[0].clone()); nodes as usize]),
        n if n == nodes as usize => Ok(lists.into_iter().map(Some).collect()),
        n => Err(invalid(format!(
            "--node-cpus {spec:?} has {n} lists for {nodes} nodes (one per node, or one for all)"
        ))),
    }
}

/// Whether nodes of `cores` shards each on `node_cpus` share cores (so must not pin or poll:
/// `overprovisioned`): two nodes with overlapping lists, a node with fewer cores than
/// shards, or several nodes with no lists (each would pin to the same first cores).
fn overprovisioned(node_cpus: &[Option<Vec<usize>>], cores: usize) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut unconfined = 0;
    for cpus in node_cpus {
        match cpus {
            None => unconfined += 1,
            Some(list) => {
                let mut distinct = std::collections::HashSet::new();
                for c in list {
                    distinct.insert(*c);
                    if !seen.insert(*c) {
                        return true;
                    }
                }
                if distinct.len() < cores {
                    return true;
                }
            }
        }
    }
    if unconfined > 0 {
        let allowed = strand_tuning::cpus::allowed().len();
        return node_cpus.len() > 1 || cores > allowed;
    }
    false
}

pub fn start(dir: &Path, nodes: u32, cores: usize, cpus: Option<&str>) -> ExitCode {
    match run(dir, nodes, cores, cpus) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strand cluster start: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(dir: &Path, nodes: u32, cores: usize, cpus: Option<&str>) -> io::Result<()> {
    if !(1..=9).contains(&nodes) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--nodes must be between 1 and 9, got {nodes}"),
        ));
    }
    let node_cpus = node_cpus(cpus, nodes)?;
    let overprovisioned = overprovisioned(&node_cpus, cores);
    if overprovisioned {
        println!(
            "nodes share cores: started overprovisioned (no pinning, no polling; \
             give each node its own cores with --node-cpus to pin them)"
        );
    }
    let set = block_stop_signals()?;
    let dir = std::path::absolute(dir)?;
    let configs = prepare(&dir, nodes, cores)?;
    let exe = std::env::current_exe()?;
    for n in 1..=nodes {
        if let Some(pid) = pid_of(&dir, n).filter(|p| alive(*p)) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("node {n} already runs as process {pid} (stop it first)"),
            ));
        }
    }
    for ((n, (config, _)), cpus) in (1..=nodes).zip(&configs).zip(node_cpus) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("node-{n}/strand.log")))?;
        let mut cmd = Command::new(&exe);
        cmd.arg("serve").arg("--config").arg(config);
        if overprovisioned {
            cmd.arg("--overprovisioned");
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(cpus) = cpus {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure makes one async-signal-safe syscall (sched_setaffinity) on
            // a list allocated before the fork; the node's shards pin within it.
            unsafe {
                cmd.pre_exec(move || strand_tuning::cpus::set_affinity(0, &cpus));
            }
        }
        if let Err(e) = cmd.spawn() {
            // Nodes started before this one must not be left running.
            std::thread::sleep(Duration::from_millis(500));
            stop_all(&dir, nodes);
            return Err(io::Error::new(
                e.kind(),
                format!("cannot start node {n}: {e}"),
            ));
        }
        println!(
            "node {n}: config {}  log {}",
            config.display(),
            dir.join(format!("node-{n}/strand.log")).display()
        );
    }
    let end = Instant::now() + START_WAIT;
    for (n, (_, listen)) in (1..=nodes).zip(&configs) {
        while TcpStream::connect(listen.as_str()).is_err() {
            if Instant::now() > end {
                stop_all(&dir, nodes);
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("node {n} did not accept connections on {listen} (see its log)"),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let bootstrap: Vec<&str> = configs.iter().map(|(_, l)| l.as_str()).collect();
    println!("bootstrap: {}", bootstrap.join(","));
    println!("running; Ctrl-C stops every node");
    let mut signal: libc::c_int = 0;
    // SAFETY: waits on signals blocked above, in this (the only) thread.
    let rc = unsafe { libc::sigwait(&set, &mut signal) };
    if rc != 0 {
        eprintln!("sigwait failed ({rc}); stopping the nodes");
    }
    stop_all(&dir, nodes);
    Ok(())
}

/// SIGTERM to every node with a live pid file, then waits for them to go (SIGKILL after
/// `STOP_WAIT`).
fn stop_all(dir: &Path, nodes: u32) {
    let pids: Vec<(u32, i32)> = (1..=nodes)
        .filter_map(|n| pid_of(dir, n).map(|p| (n, p)))
        .filter(|(_, p)| alive(*p))
        .collect();
    for (_, pid) in &pids {
        // SAFETY: a signal to a process this cluster started (named by its pid file).
        unsafe { libc::kill(*pid, libc::SIGTERM) };
    }
    let end = Instant::now() + STOP_WAIT;
    for (n, pid) in pids {
        while alive(pid) && Instant::now() < end {
            reap();
            std::thread::sleep(Duration::from_millis(50));
        }
        if alive(pid) {
            eprintln!("node {n} (process {pid}) did not stop in time: killing it");
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        println!("node {n} stopped");
    }
    reap();
}

/// Collects exited children so they do not linger as zombies (which `kill(pid, 0)` would
/// still report alive).
fn reap() {
    loop {
        let mut status = 0;
        // SAFETY: non-blocking wait for any child of this process.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{node_cpus, overprovisioned};

    #[test]
    fn nodes_sharing_cores_are_overprovisioned() {
        let list = |v: &[usize]| Some(v.to_vec());
        // Disjoint lists with a core per shard: pinned.
        assert!(!overprovisioned(&[list(&[0]), list(&[1]), list(&[2])], 1));
        assert!(!overprovisioned(&[list(&[0, 1]), list(&[2, 3])], 2));
        // One core for all three (the bench on a 2-core host), or too few cores per node.
        assert!(overprovisioned(&[list(&[0]), list(&[0]), list(&[0])], 1));
        assert!(overprovisioned(&[list(&[0]), list(&[1])], 2));
        // No lists: several nodes would pin to the same first cores.
        assert!(overprovisioned(&[None, None, None], 1));
    }

    #[test]
    fn node_cpus_are_one_list_per_node_or_one_for_all() {
        assert_eq!(node_cpus(None, 2).expect("none"), vec![None, None]);
        assert_eq!(
            node_cpus(Some("0-1/2/3"), 3).expect("three"),
            vec![Some(vec![0, 1]), Some(vec![2]), Some(vec![3])]
        );
        assert_eq!(
            node_cpus(Some("0"), 3).expect("shared"),
            vec![Some(vec![0]); 3]
        );
        assert!(node_cpus(Some("0/1"), 3).is_err());
        assert!(node_cpus(Some("x"), 1).is_err());
    }
}
