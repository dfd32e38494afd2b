//! A share-group consumer (KIP-932): joins with ShareGroupHeartbeat, fetches with ShareFetch
//! from each assigned partition's leader (one share session per leader), and acknowledges
//! each record it was given — piggybacked on the next fetch, or with ShareAcknowledge on
//! `commit` and `close`. Records come with their delivery count.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use strand_wire::kafka::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatchA,
};
use strand_wire::kafka::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use strand_wire::kafka::messages::{
    GroupId, RequestKind, ResponseKind, ShareAcknowledgeRequest, ShareFetchRequest,
    ShareGroupHeartbeatRequest, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;
use uuid::Uuid;

use crate::cluster::Cluster;
use crate::consumer::{decode_records, Record};
use crate::error::ClientError;

/// How a record is acknowledged (KIP-932's types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    Accept = 1,
    Release = 2,
    Reject = 3,
}

pub struct ShareConsumer {
    cluster: Cluster,
    group: String,
    topic: String,
    member_id: String,
    epoch: i32,
    heartbeat_interval: Duration,
    next_heartbeat: Instant,
    /// Assigned partitions (of `topic`).
    partitions: Vec<i32>,
    topic_id: Uuid,
    /// Share session epoch per leader (the next request's).
    sessions: HashMap<i32, i32>,
    /// Acknowledgements not yet sent, by partition: (offset, type).
    pending: BTreeMap<i32, Vec<(i64, Ack)>>,
}

fn gid(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

/// Runs of consecutive offsets with the same type: `(first, last, type)`.
fn runs(mut acks: Vec<(i64, Ack)>) -> Vec<(i64, i64, i8)> {
    acks.sort_by_key(|a| a.0);
    let mut out: Vec<(i64, i64, i8)> = Vec::new();
    for (o, t) in acks {
        match out.last_mut() {
            Some((_, last, lt)) if *last + 1 == o && *lt == t as i8 => *last = o,
            _ => out.push((o, o, t as i8)),
        }
    }
    out
}

impl ShareConsumer {
    /// Joins `group` subscribed to `topic` and waits for an assignment.
    pub async fn subscribe(
        cluster: Cluster,
        group: &str,
        topic: &str,
    ) -> Result<ShareConsumer, ClientError> {
        let meta = cluster.refresh(Some(&[topic])).await?;
        let topic_id: Uuid = meta
            .topics
            .get(topic)
            .and_then(|t| t.id.parse().ok())
            .ok_or_else(|| ClientError::Invalid(format!("unknown topic {topic}")))?;
        let mut c = ShareConsumer {
            cluster,
            group: group.to_string(),
            topic: topic.to_string(),
            member_id: Uuid::new_v4().to_string(),
            epoch: 0,
            heartbeat_interval: Duration::from_secs(5),
            next_heartbeat: Instant::now(),
            partitions: Vec::new(),
            topic_id,
            sessions: HashMap::new(),
            pending: BTreeMap::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while c.partitions.is_empty() && Instant::now() < deadline {
            c.heartbeat().await?;
            if c.partitions.is_empty() {
                glommio::timer::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(c)
    }

    async fn heartbeat(&mut self) -> Result<(), ClientError> {
        let mut req = ShareGroupHeartbeatRequest::default();
        req.group_id = gid(&self.group);
        req.member_id = StrBytes::from_string(self.member_id.clone());
        req.member_epoch = self.epoch;
        if self.epoch == 0 {
            req.subscribed_topic_names =
                Some(vec![TopicName(StrBytes::from_string(self.topic.clone()))]);
        }
        let conn = self.cluster.coordinator(&self.group).await?;
        let ResponseKind::ShareGroupHeartbeat(r) =
            conn.request(RequestKind::ShareGroupHeartbeat(req)).await?
        else {
            return Err(ClientError::Protocol(
                "unexpected answer to ShareGroupHeartbeat".into(),
            ));
        };
        if r.error_code != 0 {
            // Fenced or forgotten (a coordinator restart): join again.
            self.epoch = 0;
            return ClientError::check(r.error_code, r.error_message.as_deref());
        }
        self.epoch = r.member_epoch;
        self.heartbeat_interval = Duration::from_millis(r.heartbeat_interval_ms.max(100) as u64);
        self.next_heartbeat = Instant::now() + self.heartbeat_interval;
        if let Some(a) = r.assignment {
            self.partitions = a
                .topic_partitions
                .into_iter()
                .filter(|t| t.topic_id == self.topic_id)
                .flat_map(|t| t.partitions)
                .collect();
        }
        Ok(())
    }

    /// Acknowledges a record this consumer was given (sent with the next fetch or commit).
    pub fn acknowledge(&mut self, record: &Record, ack: Ack) {
        self.pending
            .entry(record.partition)
            .or_default()
            .push((record.offset, ack));
    }

    fn leaders(&self) -> BTreeMap<i32, Vec<i32>> {
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for &p in &self.partitions {
            let leader = self.cluster.leader(&self.topic, p).unwrap_or(-1);
            by_leader.entry(leader).or_default().push(p);
        }
        by_leader
    }

    /// The next records, each with its delivery count (waiting up to 500 ms for some).
    pub async fn poll(&mut self) -> Result<Vec<(Record, i16)>, ClientError> {
        if Instant::now() >= self.next_heartbeat {
            self.heartbeat().await?;
        }
        let mut out = Vec::new();
        for (leader, partitions) in self.leaders() {
            let epoch = *self.sessions.get(&leader).unwrap_or(&0);
            let mut req = ShareFetchRequest::default();
            req.group_id = Some(gid(&self.group));
            req.member_id = Some(StrBytes::from_string(self.member_id.clone()));
            req.share_session_epoch = epoch;
            req.max_wait_ms = 500;
            req.min_bytes = 1;
            req.max_bytes = 8 << 20;
            req.max_records = 500;
            req.batch_size = 500;
            let mut t = FetchTopic::default();
            t.topic_id = self.topic_id;
            for p in &partitions {
                let mut fp = FetchPartition::default();
                fp.partition_index = *p;
                if epoch > 0 {
                    let acks = self.pending.remove(p).unwrap_or_default();
                    fp.acknowledgement_batches = runs(acks)
                        .into_iter()
                        .map(|(f, l, ty)| {
                            let mut b = AcknowledgementBatch::default();
                            b.first_offset = f;
                            b.last_offset = l;
                            b.acknowledge_types = vec![ty];
                            b
                        })
                        .collect();
                }
                t.partitions.push(fp);
            }
            req.topics = vec![t];
            let conn = self.cluster.broker(leader).await?;
            let ResponseKind::ShareFetch(r) = conn.request(RequestKind::ShareFetch(req)).await?
            else {
                return Err(ClientError::Protocol(
                    "unexpected answer to ShareFetch".into(),
                ));
            };
            if r.error_code != 0 {
                self.sessions.remove(&leader);
                return ClientError::check(r.error_code, r.error_message.as_deref()).map(|_| out);
            }
            self.sessions
                .insert(leader, if epoch == i32::MAX { 1 } else { epoch + 1 });
            for topic in r.responses {
                for p in topic.partitions {
                    ClientError::check(p.error_code, p.error_message.as_deref())?;
                    let mut records = VecDeque::new();
                    let tp = (self.topic.clone(), p.partition_index);
                    decode_records(&tp, 0, p.records.as_ref(), vec![], &mut records)?;
                    for r in records {
                        let count = p
                            .acquired_records
                            .iter()
                            .find(|a| a.first_offset <= r.offset && r.offset <= a.last_offset)
                            .map(|a| a.delivery_count);
                        if let Some(count) = count {
                            out.push((r, count));
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Sends the pending acknowledgements now (ShareAcknowledge), and waits for them.
    pub async fn commit(&mut self) -> Result<(), ClientError> {
        self.send_acks(false).await
    }

    async fn send_acks(&mut self, closing: bool) -> Result<(), ClientError> {
        for (leader, partitions) in self.leaders() {
            let Some(&epoch) = self.sessions.get(&leader) else {
                continue;
            };
            let mut t = AcknowledgeTopic::default();
            t.topic_id = self.topic_id;
            for p in partitions {
                let acks = self.pending.remove(&p).unwrap_or_default();
                if acks.is_empty() {
                    continue;
                }
                let mut ap = AcknowledgePartition::default();
                ap.partition_index = p;
                ap.acknowledgement_batches = runs(acks)
                    .into_iter()
                    .map(|(f, l, ty)| {
                        let mut b = AckBatchA::default();
                        b.first_offset = f;
                        b.last_offset = l;
                        b.acknowledge_types = vec![ty];
                        b
                    })
                    .collect();
                t.partitions.push(ap);
            }
            if t.partitions.is_empty() && !closing {
                continue;
            }
            let mut req = ShareAcknowledgeRequest::default();
            req.group_id = Some(gid(&self.group));
            req.member_id = Some(StrBytes::from_string(self.member_id.clone()));
            req.share_session_epoch = if closing { -1 } else { epoch };
            req.topics = vec![t];
            let conn = self.cluster.broker(leader).await?;
            let ResponseKind::ShareAcknowledge(r) =
                conn.request(RequestKind::ShareAcknowledge(req)).await?
            else {
                return Err(ClientError::Protocol(
                    "unexpected answer to ShareAcknowledge".into(),
                ));
            };
            ClientError::check(r.error_code, r.error_message.as_deref())?;
            for topic in r.responses {
                for p in topic.partitions {
                    ClientError::check(p.error_code, p.error_message.as_deref())?;
                }
            }
            if closing {
                self.sessions.remove(&leader);
            } else {
                self.sessions
                    .insert(leader, if epoch == i32::MAX { 1 } else { epoch + 1 });
            }
        }
        Ok(())
    }

    /// Sends the pending acknowledgements, closes the share sessions (what is still held goes
    /// back to the group) and leaves the group.
    pub async fn close(mut self) -> Result<(), ClientError> {
        let acked = self.send_acks(true).await;
        self.epoch = -1;
        let left = self.heartbeat().await;
        acked.and(left)
    }
}
