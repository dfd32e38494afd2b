//! `strand cluster info [--json]`: the cluster id, the brokers (live, or a voter that is not
//! a live broker: fenced or down), the active controller, the metadata quorum (leader, term,
//! commit index and each voter's lag, from DescribeQuorum answered by the leader) and, per
//! live broker, its metadata image digest and applied offset (read-only broker entries of
//! DescribeConfigs), with whether every digest is equal. On a single node: the brokers only.

use std::collections::BTreeMap;

use serde_json::json;
use strand_client::{ClientError, Cluster};
use strand_wire::kafka::messages::describe_configs_request::DescribeConfigsResource;
use strand_wire::kafka::messages::describe_quorum_request::{PartitionData, TopicData};
use strand_wire::kafka::messages::{
    DescribeConfigsRequest, DescribeQuorumRequest, DescribeQuorumResponse, RequestKind,
    ResponseKind, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;

const RESOURCE_BROKER: i8 = 4;
const DIGEST_KEY: &str = "strand.metadata.image.digest";
const APPLIED_KEY: &str = "strand.metadata.applied.offset";

/// The quorum as the leader (or, failing that, any broker) describes it.
async fn quorum(cluster: &Cluster, leader: i32) -> Option<DescribeQuorumResponse> {
    let mut p = PartitionData::default();
    p.partition_index = 0;
    let mut t = TopicData::default();
    t.topic_name = TopicName(StrBytes::from_static_str("__cluster_metadata"));
    t.partitions = vec![p];
    let mut req = DescribeQuorumRequest::default();
    req.topics = vec![t];
    let answer = match cluster.broker(leader).await {
        Ok(conn) => conn.request(RequestKind::DescribeQuorum(req)).await,
        Err(_) => cluster.request(RequestKind::DescribeQuorum(req)).await,
    };
    match answer {
        Ok(ResponseKind::DescribeQuorum(r)) if r.error_code == 0 => Some(r),
        _ => None,
    }
}

/// (image digest, applied offset) as broker `id` reports them.
async fn image_of(cluster: &Cluster, id: i32) -> Option<(String, String)> {
    let mut res = DescribeConfigsResource::default();
    res.resource_type = RESOURCE_BROKER;
    res.resource_name = StrBytes::from_string(id.to_string());
    res.configuration_keys = Some(vec![
        StrBytes::from_static_str(DIGEST_KEY),
        StrBytes::from_static_str(APPLIED_KEY),
    ]);
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![res];
    let conn = cluster.broker(id).await.ok()?;
    let Ok(ResponseKind::DescribeConfigs(r)) =
        conn.request(RequestKind::DescribeConfigs(req)).await
    else {
        return None;
    };
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    for res in r.results {
        for c in res.configs {
            if let Some(v) = c.value {
                found.insert(c.name.to_string(), v.to_string());
            }
        }
    }
    Some((
        found.get(DIGEST_KEY)?.clone(),
        found.get(APPLIED_KEY)?.clone(),
    ))
}

pub async fn info(cluster: Cluster, json_out: bool) -> Result<(), ClientError> {
    let md = cluster.refresh(None).await?;
    let q = quorum(&cluster, md.controller_id).await;
    let part = q
        .as_ref()
        .and_then(|q| q.topics.first())
        .and_then(|t| t.partitions.first());
    let mut images = BTreeMap::new();
    if q.is_some() {
        for id in md.brokers.keys() {
            if let Some(image) = image_of(&cluster, *id).await {
                images.insert(*id, image);
            }
        }
    }
    let digests_equal = images
        .values()
        .map(|(d, _)| d)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        <= 1;
    let voters: Vec<(i32, i64)> = part.map_or_else(Vec::new, |p| {
        p.current_voters
            .iter()
            .map(|v| (v.replica_id.0, v.log_end_offset))
            .collect()
    });
    let high_watermark = part.map_or(-1, |p| p.high_watermark);
    if json_out {
        let brokers: Vec<_> = md
            .brokers
            .iter()
            .map(|(id, addr)| {
                let (digest, applied) = images.get(id).cloned().unzip();
                json!({"id": id, "address": addr, "state": "live", "image_digest": digest,
                       "applied_offset": applied.and_then(|a| a.parse::<u64>().ok())})
            })
            .chain(
                voters
                    .iter()
                    .filter(|(id, _)| !md.brokers.contains_key(id))
                    .map(|(id, _)| json!({"id": id, "state": "fenced or down"})),
            )
            .collect();
        let quorum = part.map(|p| {
            json!({"leader": p.leader_id.0, "term": p.leader_epoch, "commit_index": p.high_watermark,
                   "voters": voters.iter().map(|(id, end)| json!({"id": id, "log_end": end,
                       "lag": if *end >= 0 { Some(high_watermark - end) } else { None }}))
                       .collect::<Vec<_>>()})
        });
        println!(
            "{}",
            json!({"cluster_id": md.cluster_id, "controller": md.controller_id,
                   "brokers": brokers, "topics": md.topics.len(), "quorum": quorum,
                   "image_digests_equal": digests_equal})
        );
        return Ok(());
    }
    println!(
        "cluster {}  controller {}  topics {}",
        md.cluster_id.as_deref().unwrap_or("-"),
        md.controller_id,
        md.topics.len()
    );
    let mut rows: Vec<Vec<String>> = md
        .brokers
        .iter()
        .map(|(id, addr)| {
            let (digest, applied) = images
                .get(id)
                .cloned()
                .unwrap_or_else(|| ("-".into(), "-".into()));
            vec![id.to_string(), addr.clone(), "live".into(), digest, applied]
        })
        .collect();
    for (id, _) in voters.iter().filter(|(id, _)| !md.brokers.contains_key(id)) {
        rows.push(vec![
            id.to_string(),
            "-".into(),
            "fenced or down".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    crate::cli::print_table(
        &[
            "BROKER",
            "ADDRESS",
            "STATE",
            "IMAGE DIGEST",
            "APPLIED OFFSET",
        ],
        &rows,
    );
    if let Some(p) = part {
        println!(
            "\nquorum: leader {}  term {}  commit index {}{}",
            p.leader_id.0,
            p.leader_epoch,
            p.high_watermark,
            if digests_equal {
                ""
            } else {
                "  (image digests differ)"
            }
        );
        let rows: Vec<Vec<String>> = voters
            .iter()
            .map(|(id, end)| {
                let lag = if *end >= 0 {
                    (high_watermark - end).to_string()
                } else {
                    "-".into()
                };
                vec![id.to_string(), end.to_string(), lag]
            })
            .collect();
        crate::cli::print_table(&["VOTER", "LOG END", "LAG"], &rows);
    }
    Ok(())
}
