//! OffsetFetch (key 9): committed offsets of one group (v1-7) or several (v8+); -1 where
//! nothing was committed. A null topic list means "every partition the group committed".

use std::collections::BTreeMap;
use std::rc::Rc;

use strand_wire::kafka::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use strand_wire::kafka::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use strand_wire::kafka::protocol::StrBytes;

use crate::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

type Found = BTreeMap<String, Vec<(i32, i64, Option<String>)>>;

async fn fetch(node: &Rc<Node>, group: &str, partitions: Option<Vec<(String, i32)>>) -> Found {
    let req = GroupRequest::Fetch {
        group: group.to_string(),
        partitions,
    };
    let mut out: Found = BTreeMap::new();
    if let GroupResponse::Offsets(list) = node.group_request(group, req).await {
        for ((topic, p), offset, md) in list {
            out.entry(topic).or_default().push((p, offset, md));
        }
    }
    out
}

pub async fn handle(node: &Rc<Node>, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let mut r = OffsetFetchResponse::default();
    if version >= 8 {
        for g in req.groups {
            let group = g.group_id.0.as_str().to_string();
            let wanted = g.topics.map(|ts| {
                ts.into_iter()
                    .flat_map(|t| {
                        let name = t.name.0.as_str().to_string();
                        t.partition_indexes
                            .into_iter()
                            .map(move |p| (name.clone(), p))
                    })
                    .collect()
            });
            let mut gr = OffsetFetchResponseGroup::default();
            gr.group_id = g.group_id;
            gr.topics = fetch(node, &group, wanted)
                .await
                .into_iter()
                .map(|(topic, parts)| {
                    let mut t = OffsetFetchResponseTopics::default();
                    t.name = TopicName(StrBytes::from_string(topic));
                    t.partitions = parts
                        .into_iter()
                        .map(|(p, o, md)| {
                            let mut pr = OffsetFetchResponsePartitions::default();
                            pr.partition_index = p;
                            pr.committed_offset = o;
                            pr.metadata = Some(StrBytes::from_string(md.unwrap_or_default()));
                            pr
                        })
                        .collect();
                    t
                })
                .collect();
            r.groups.push(gr);
        }
        return r;
    }
    let group = req.group_id.0.as_str().to_string();
    let wanted = req.topics.map(|ts| {
        ts.into_iter()
            .flat_map(|t| {
                let name = t.name.0.as_str().to_string();
                t.partition_indexes
                    .into_iter()
                    .map(move |p| (name.clone(), p))
            })
            .collect()
    });
    r.topics = fetch(node, &group, wanted)
        .await
        .into_iter()
        .map(|(topic, parts)| {
            let mut t = OffsetFetchResponseTopic::default();
            t.name = TopicName(StrBytes::from_string(topic));
            t.partitions = parts
                .into_iter()
                .map(|(p, o, md)| {
                    let mut pr = OffsetFetchResponsePartition::default();
                    pr.partition_index = p;
                    pr.committed_offset = o;
                    pr.metadata = Some(StrBytes::from_string(md.unwrap_or_default()));
                    pr
                })
                .collect();
            t
        })
        .collect();
    r
}
