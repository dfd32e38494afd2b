//! Drivers: the client libraries that produce and consume a workload. Both take the same
//! [`Plan`], share one [`Control`] with the run loop, and record into [`Recorder`]s.
//!
//! - [`native`] — Strand's client: one glommio executor per core (pinned), producers and
//!   consumers spread over them as tasks.
//! - [`rdkafka`] — librdkafka: one thread per producer (plus librdkafka's own) and per
//!   consumer, so users can check the numbers are not an artefact of our client.

pub mod native;
pub mod rdkafka;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::measure::{MeasureStart, Recorder};
use crate::workload::{DriverKind, Workload};

/// What to run where.
#[derive(Clone, Debug)]
pub struct Plan {
    pub workload: Workload,
    pub bootstrap: String,
    pub topics: Vec<String>,
    /// Unique per run: group names and transactional ids are derived from it.
    pub run_id: String,
    /// Client settings by Kafka's names (`security.protocol`, `sasl.*`, `ssl.*`).
    pub client_props: Vec<(String, String)>,
}

/// The native client's security from the client settings (TLS, SASL).
pub fn security(props: &[(String, String)]) -> Result<strand_client::ClientSecurity, String> {
    strand_client::ClientSecurity::from_properties(props)
}

/// The client settings as librdkafka takes them: Kafka's Java names for PEM files mapped to
/// librdkafka's (`ssl.truststore.location` -> `ssl.ca.location`, a PEM keystore ->
/// `ssl.certificate.location` + `ssl.key.location`), the store types (PEM only) dropped.
pub fn librdkafka_props(props: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in props {
        match k.as_str() {
            "ssl.truststore.type" | "ssl.keystore.type" => {}
            "ssl.truststore.location" => out.push(("ssl.ca.location".into(), v.clone())),
            "ssl.keystore.location" => {
                out.push(("ssl.certificate.location".into(), v.clone()));
                out.push(("ssl.key.location".into(), v.clone()));
            }
            _ => out.push((k.clone(), v.clone())),
        }
    }
    out
}

/// One producer: its topic and a seed for its keys.
#[derive(Clone, Debug)]
pub struct ProducerSpec {
    pub topic: String,
    pub index: u32,
    pub seed: u64,
}

/// One consumer: a topic's partitions, on behalf of a group.
#[derive(Clone, Debug)]
pub struct ConsumerSpec {
    pub topic: String,
    pub group: String,
    pub partitions: Vec<i32>,
}

impl Plan {
    pub fn producers(&self) -> Vec<ProducerSpec> {
        let mut v = Vec::new();
        for (t, topic) in self.topics.iter().enumerate() {
            for index in 0..self.workload.producers_per_topic {
                v.push(ProducerSpec {
                    topic: topic.clone(),
                    index,
                    seed: (t as u64) << 32 | u64::from(index),
                });
            }
        }
        v
    }

    /// The consumers of a group split each topic's partitions (partition p goes to consumer
    /// p mod consumers_per_group), like a settled range/round-robin assignment.
    pub fn consumers(&self) -> Vec<ConsumerSpec> {
        let w = &self.workload;
        let mut v = Vec::new();
        for topic in &self.topics {
            for g in 0..w.consumer_groups {
                for c in 0..w.consumers_per_group {
                    v.push(ConsumerSpec {
                        topic: topic.clone(),
                        group: format!("strand-bench-{}-g{g}", self.run_id),
                        partitions: (0..w.partitions_per_topic as i32)
                            .filter(|p| *p as u32 % w.consumers_per_group == c)
                            .collect(),
                    });
                }
            }
        }
        v
    }
}

/// Shared between the run loop and the workers.
#[derive(Default)]
pub struct Control {
    /// Clients connected (and consumers positioned): the run starts when all are.
    pub ready: AtomicUsize,
    /// Set once every client is ready: producers start sending.
    pub go: AtomicBool,
    /// Producers stop sending, flush and wait for their acks.
    pub stop: AtomicBool,
    pub producers_done: AtomicUsize,
    /// Consumers stop.
    pub stop_consumers: AtomicBool,
    /// A worker that failed says why here (setup failures end the run).
    pub failure: Mutex<Option<String>>,
    /// Where the warm-up ends (set with `go`).
    pub measure_start: MeasureStart,
}

impl Control {
    pub fn fail(&self, why: String) {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(why);
        }
        self.stop.store(true, Ordering::SeqCst);
        self.stop_consumers.store(true, Ordering::SeqCst);
    }

    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn flag(b: &AtomicBool) -> bool {
        b.load(Ordering::SeqCst)
    }
}

/// Running workers: their recorders and a way to wait for them.
pub struct Workers {
    pub recorders: Vec<Recorder>,
    pub joins: Vec<Box<dyn FnOnce() -> Result<(), String> + Send>>,
    pub clients: usize,
}

impl Workers {
    /// Waits for every worker; the first error wins.
    pub fn join(self) -> Result<(), String> {
        let mut first = Ok(());
        for j in self.joins {
            if let Err(e) = j() {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

impl Control {
    pub fn recorder(&self) -> Recorder {
        Recorder::new(&self.measure_start)
    }
}

pub fn start(plan: &Plan, ctl: &std::sync::Arc<Control>) -> Result<Workers, String> {
    match plan.workload.driver {
        DriverKind::Native => native::start(plan, ctl),
        DriverKind::Rdkafka => rdkafka::start(plan, ctl),
    }
}

/// How often idle loops look at the control flags.
pub const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// Consumers' fetch wait (`fetch.max.wait.ms`): how long an idle consumer waits for data.
pub const FETCH_WAIT_MS: i32 = 100;
