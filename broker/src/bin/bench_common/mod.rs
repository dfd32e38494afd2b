//! What the two-node benchmark binaries share (`strand-transport-bench`,
//! `strand-replication-bench`): their two cores, an executor pinned to each, and the next
//! message of a `ClusterLink`.

use bytes::Bytes;
use strand_broker::cluster::link::ClusterLink;
use strand_cluster_core::transport::TransportEvent;

/// `--cpus a,b` as two cores; exits with a message otherwise.
pub fn two_cpus(arg: &str) -> (usize, usize) {
    let cpus: Vec<usize> = arg
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    match cpus[..] {
        [a, b] => (a, b),
        _ => {
            eprintln!("--cpus takes two cores, e.g. 0,1");
            std::process::exit(2);
        }
    }
}

/// Runs `f` on a glommio executor pinned to `cpu`, in a thread of its own.
pub fn on_core<T: Send + 'static>(
    cpu: usize,
    f: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, String>>>>
        + Send
        + 'static,
) -> std::thread::JoinHandle<Result<T, String>> {
    std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(cpu))
            .make()
            .map_err(|e| format!("executor on cpu {cpu}: {e}"))
            .and_then(|ex| ex.run(f()))
    })
}

/// Waits for the next message on `link`; a lost connection is an error.
pub async fn next_message(link: &ClusterLink) -> Result<Bytes, String> {
    loop {
        match link.next_event().await {
            Some(TransportEvent::Message { body, .. }) => return Ok(body),
            Some(TransportEvent::Disconnected { reason, .. }) => return Err(reason),
            Some(TransportEvent::Connected { .. }) => {}
            None => return Err("link closed".into()),
        }
    }
}
