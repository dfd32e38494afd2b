//! The client's view of a cluster: bootstrap addresses, broker connections (one per broker,
//! shared by producer, consumer and admin on this executor) and topic metadata.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Duration;

use strand_wire::kafka::messages::metadata_request::MetadataRequestTopic;
use strand_wire::kafka::messages::{MetadataRequest, RequestKind, ResponseKind, TopicName};
use strand_wire::kafka::protocol::StrBytes;

use crate::conn::BrokerConn;
use crate::error::ClientError;
use crate::security::ClientSecurity;

/// How long a request may wait for its answer before the client gives up on it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One topic as Metadata describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub id: String,
    /// Partition index -> leader broker id (-1: none).
    pub leaders: Vec<i32>,
    /// Partition index -> replica broker ids and in-sync replica ids, as Metadata lists them.
    pub replicas: Vec<Vec<i32>>,
    pub isr: Vec<Vec<i32>>,
    pub internal: bool,
}

/// Brokers and topics, as of the last Metadata answer.
#[derive(Clone, Debug, Default)]
pub struct Metadata {
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    /// Broker id -> `host:port`.
    pub brokers: BTreeMap<i32, String>,
    pub topics: BTreeMap<String, TopicInfo>,
}

struct Inner {
    bootstrap: Vec<String>,
    client_id: String,
    security: ClientSecurity,
    /// Built once from `security`, shared by every connection.
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    conns: RefCell<HashMap<String, BrokerConn>>,
    metadata: RefCell<Metadata>,
}

/// Shared handle (cheap to clone) used by the producer, consumer and admin.
#[derive(Clone)]
pub struct Cluster {
    inner: Rc<Inner>,
}

impl Cluster {
    /// `bootstrap`: comma-separated `host:port` list. Connects to the first that answers, in
    /// plaintext.
    pub async fn connect(bootstrap: &str, client_id: &str) -> Result<Cluster, ClientError> {
        Cluster::connect_secure(bootstrap, client_id, ClientSecurity::default()).await
    }

    /// [`Self::connect`], with every broker connection (bootstrap and later ones) secured as
    /// `security` says.
    pub async fn connect_secure(
        bootstrap: &str,
        client_id: &str,
        security: ClientSecurity,
    ) -> Result<Cluster, ClientError> {
        let tls = security.tls_config().map_err(ClientError::Invalid)?;
        security.sasl_settings().map_err(ClientError::Invalid)?;
        let bootstrap: Vec<String> = bootstrap
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if bootstrap.is_empty() {
            return Err(ClientError::Invalid("no bootstrap brokers given".into()));
        }
        let cluster = Cluster {
            inner: Rc::new(Inner {
                bootstrap,
                client_id: client_id.to_string(),
                security,
                tls,
                conns: RefCell::new(HashMap::new()),
                metadata: RefCell::new(Metadata::default()),
            }),
        };
        cluster.refresh(None).await?;
        Ok(cluster)
    }

    /// A connection to `addr`, reused while it works.
    pub async fn conn_to(&self, addr: &str) -> Result<BrokerConn, ClientError> {
        if let Some(c) = self.inner.conns.borrow().get(addr) {
            if !c.is_failed() {
                return Ok(c.clone());
            }
        }
        let sasl = self.inner.security.sasl_settings().ok().flatten();
        let c =
            BrokerConn::connect_with(addr, &self.inner.client_id, self.inner.tls.as_ref(), sasl)
                .await?;
        self.inner
            .conns
            .borrow_mut()
            .insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Any working connection: a known broker, else a bootstrap address.
    pub async fn any_conn(&self) -> Result<BrokerConn, ClientError> {
        let mut candidates: Vec<String> = self
            .inner
            .metadata
            .borrow()
            .brokers
            .values()
            .cloned()
            .collect();
        candidates.extend(self.inner.bootstrap.iter().cloned());
        let mut last = None;
        for addr in candidates {
            match self.conn_to(&addr).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ClientError::Invalid("no brokers".into())))
    }

    /// A connection to broker `id`.
    pub async fn broker(&self, id: i32) -> Result<BrokerConn, ClientError> {
        let addr = self.inner.metadata.borrow().brokers.get(&id).cloned();
        match addr {
            Some(a) => self.conn_to(&a).await,
            None => Err(ClientError::Invalid(format!("unknown broker id {id}"))),
        }
    }

    /// Sends `body` to any broker and waits for the answer.
    pub async fn request(&self, body: RequestKind) -> Result<ResponseKind, ClientError> {
        self.any_conn()
            .await?
            .request_within(body, REQUEST_TIMEOUT)
            .await
    }

    /// How this cluster's connections are secured.
    pub fn security(&self) -> &ClientSecurity {
        &self.inner.security
    }

    pub fn metadata(&self) -> Metadata {
        self.inner.metadata.borrow().clone()
    }

    /// Refreshes metadata for `topics` (`None`: all topics). Topics are not auto-created.
    pub async fn refresh(&self, topics: Option<&[&str]>) -> Result<Metadata, ClientError> {
        let mut req = MetadataRequest::default();
        req.topics = topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    let mut m = MetadataRequestTopic::default();
                    m.name = Some(TopicName(StrBytes::from_string(t.to_string())));
                    m
                })
                .collect()
        });
        req.allow_auto_topic_creation = false;
        let ResponseKind::Metadata(r) = self.request(RequestKind::Metadata(req)).await? else {
            return Err(ClientError::Protocol("unexpected Metadata answer".into()));
        };
        let mut md = self.inner.metadata.borrow().clone();
        md.cluster_id = r.cluster_id.map(|c| c.to_string());
        md.controller_id = r.controller_id.0;
        md.brokers = r
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        if topics.is_none() {
            md.topics.clear();
        }
        for t in r.topics {
            let Some(name) = t.name.map(|n| n.0.to_string()) else {
                continue;
            };
            if t.error_code != 0 {
                md.topics.remove(&name);
                if topics.is_some() {
                    ClientError::check(t.error_code, Some(&format!("topic {name:?}")))?;
                }
                continue;
            }
            type Part = (i32, i32, Vec<i32>, Vec<i32>);
            let mut parts: Vec<Part> = t
                .partitions
                .iter()
                .map(|p| {
                    let ids = |v: &[strand_wire::kafka::messages::BrokerId]| -> Vec<i32> {
                        v.iter().map(|b| b.0).collect()
                    };
                    (
                        p.partition_index,
                        p.leader_id.0,
                        ids(&p.replica_nodes),
                        ids(&p.isr_nodes),
                    )
                })
                .collect();
            parts.sort();
            md.topics.insert(
                name.clone(),
                TopicInfo {
                    name,
                    id: t.topic_id.to_string(),
                    leaders: parts.iter().map(|p| p.1).collect(),
                    replicas: parts.iter().map(|p| p.2.clone()).collect(),
                    isr: parts.into_iter().map(|p| p.3).collect(),
                    internal: t.is_internal,
                },
            );
        }
        *self.inner.metadata.borrow_mut() = md.clone();
        Ok(md)
    }

    /// The partition count of a topic already in the metadata (no clone, no await).
    pub fn partition_count(&self, topic: &str) -> Option<i32> {
        self.inner
            .metadata
            .borrow()
            .topics
            .get(topic)
            .map(|t| t.leaders.len() as i32)
    }

    /// The leader of a partition already in the metadata.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.inner
            .metadata
            .borrow()
            .topics
            .get(topic)
            .and_then(|t| t.leaders.get(partition as usize).copied())
    }

    /// The leader of a partition, from the metadata or (if unknown) a refresh; -1 if none.
    pub async fn leader_of(&self, topic: &str, partition: i32) -> Result<i32, ClientError> {
        if let Some(l) = self.leader(topic, partition) {
            return Ok(l);
        }
        Ok(self
            .topic(topic)
            .await?
            .leaders
            .get(partition as usize)
            .copied()
            .unwrap_or(-1))
    }

    /// The topic's partition leaders (index -> broker id, -1: none), fetched if not known yet.
    /// Cheaper than [`Cluster::topic`] on a hot path: no replica lists are cloned (with 1,000
    /// partitions, cloning them on every consumer fetch was a seventh of a client core).
    pub async fn leaders(&self, name: &str) -> Result<Vec<i32>, ClientError> {
        if let Some(t) = self.inner.metadata.borrow().topics.get(name) {
            return Ok(t.leaders.clone());
        }
        Ok(self.topic(name).await?.leaders)
    }

    /// The topic's metadata, fetched if not known yet. A missing topic is an error that says
    /// how to create it.
    pub async fn topic(&self, name: &str) -> Result<TopicInfo, ClientError> {
        if let Some(t) = self.inner.metadata.borrow().topics.get(name) {
            return Ok(t.clone());
        }
        match self.refresh(Some(&[name])).await {
            Ok(md) => md.topics.get(name).cloned().ok_or_else(|| not_found(name)),
            Err(e) if e.code() == Some(3) => Err(not_found(name)),
            Err(e) => Err(e),
        }
    }
}

fn not_found(name: &str) -> ClientError {
    ClientError::Invalid(format!(
        "topic {name:?} not found — create it with `strand topic create {name}`"
    ))
}

/// Runs `op` again while it fails with a retriable error (a coordinator still loading, a
/// leader moving), with a short backoff, for up to `REQUEST_TIMEOUT`.
pub async fn retrying<T, F, Fut>(mut op: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let deadline = std::time::Instant::now() + REQUEST_TIMEOUT;
    loop {
        match op().await {
            Err(e) if e.is_retriable() && std::time::Instant::now() < deadline => {
                glommio::timer::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}
